"""The hosts backend: a curator bound on TCP and pools started as separate `ldpsim agents`
commands (as they would be on other machines), each with its own key file of ``ldpsim keys``,
give the same output as inproc with the key files' secret, over several runs on the same
curator."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ldpsim.protocols.local import example_data
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import HostsCurator
from ldpsim.simulator.session import Limits, RunFailed
from ldpsim.simulator.session.common import block_of
from ldpsim.simulator.session.keyfiles import (
    HostKeys,
    read_host_keys,
    registration_key,
    token_of,
    write_host_keys,
)

from tests.conftest import ROOT, free_port

LIMITS = Limits(timeout_s=10)


@dataclass
class Keys:
    """The key files ``ldpsim keys`` writes (in-process): their directory, the orchestrator's
    view and the registration key of its token."""

    dir: Path
    host: HostKeys
    auth: bytes

    def pool(self, i: int) -> str:
        return str(self.dir / f"pool-{i}.keys")


def key_files(where: Path, pools: int, *sizes: int) -> Keys:
    """The key files of ``pools`` pools for data sets of ``sizes`` agents."""
    write_host_keys(where, pools, [[block_of(i, pools, n) for n in sizes or (1000,)]
                                    for i in range(pools)])
    host = read_host_keys(where / "secret.key")
    return Keys(where, host, registration_key(token_of(None, where / "secret.key"), host.salt))


def start_pool(port: int, keyfile: str, *extra: str) -> subprocess.Popen:
    """``ldpsim agents`` in its own process, as it would run on another machine."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "ldpsim", "agents", "--connect",
                             f"tcp://127.0.0.1:{port}", "--keys", keyfile, *extra], env=env,
                            stderr=subprocess.PIPE)


def assert_no_pool_registers(hosts: HostsCurator, c: dict, keys: Keys, why: str) -> None:
    """The run must fail for want of a pool (``why`` says what must not have registered)."""
    try:
        hosts.run(c, keys.auth, keys.host.secrets)
    except RunFailed as e:
        assert "no pool registered" in str(e)
    else:
        raise AssertionError(why)


def cfg(protocol: str, seed: int) -> dict:
    return {"protocol": protocol, "params": {"epsilon": 1.0},
            "data": {"kind": "mallows", "n": 1000, "m": 7, "theta": 0.3}, "seed": seed,
            "pools": 2, "agent_mode": "batched", "batch": 256,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def test_hosts_backend_matches_inproc_over_several_runs(tmp_path):
    keys = key_files(tmp_path, 2)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(i)) for i in range(2)]
    secrets = keys.host.secrets
    try:
        for i, (protocol, seed) in enumerate((("ldp_kwiksort_rr", 1), ("dp_kwiksort", 2),
                                              ("ldp_kwiksort_lap", 3))):
            res = hosts.run(cfg(protocol, seed), keys.auth, secrets)
            assert res["output"] == run_inproc(cfg(protocol, seed), LIMITS,
                                               secrets=secrets)["output"]
            assert res["pools_registered"] == 2 and res["dropouts"] == 0
            if i:  # the pools stayed connected: ready as the run starts
                assert res["timing"]["pools_ready_s"] < 0.05
    finally:
        hosts.close()
        codes = [p.wait(timeout=15) for p in pools]
    assert codes == [0, 0]  # the pools exit cleanly when the curator says there are no more runs


def test_hosts_pool_with_wrong_token_is_refused(tmp_path):
    keys = key_files(tmp_path, 1)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=1.5), auth=keys.auth)
    pool = start_pool(port, keys.pool(0), "--token", "a wrong token, 16+ characters")
    try:
        c = cfg("ldp_kwiksort_rr", 1)
        c["pools"] = 1
        assert_no_pool_registers(hosts, c, keys, "a pool with the wrong token registered")
    finally:
        hosts.close()
        pool.kill()
        pool.wait(5)


def test_curve_admits_enrolled_pools_only(tmp_path):
    """With CURVE, a pool with an enrolled key runs; one with another key never gets in."""
    from ldpsim.simulator.backends.curve import make_keys

    keys, stranger = tmp_path / "keys", tmp_path / "stranger"
    kf = key_files(keys, 1)
    make_keys(keys, 1)
    make_keys(stranger, 1)  # valid keys, but not enrolled with this curator
    port = free_port()
    # registration waits timeout_s; generous, since a pool is a fresh Python process
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=6.0), curve=str(keys))

    def pool(secret):
        return start_pool(port, kf.pool(0), "--curve-key", str(secret), "--curve-server",
                          str(keys / "server.key"), "--idle-timeout", "3")

    c = cfg("ldp_kwiksort_rr", 1)
    c["pools"] = 1
    intruder = pool(stranger / "pool-0.key_secret")
    member = None
    try:
        try:
            hosts.run(c, kf.auth, kf.host.secrets)
            raise AssertionError("a pool with an unenrolled CURVE key registered")
        except RunFailed as e:
            assert "no pool registered" in str(e)
        member = pool(keys / "pool-0.key_secret")
        res = hosts.run(c, kf.auth, kf.host.secrets)
        assert res["output"] == run_inproc(c, LIMITS, secrets=kf.host.secrets)["output"]
    finally:
        hosts.close()
        intruder.kill()
        intruder.wait(5)
        code = member.wait(timeout=15) if member is not None else None
    assert code == 0


def test_curve_key_errors_are_clear(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "ldpsim", "keys", str(tmp_path / "k"),
                          "--pools", "2", "--agents", "1000"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0
    assert sorted(p.name for p in (tmp_path / "k").rglob("*")) == [
        "clients", "pool-0.key", "pool-0.key_secret", "pool-0.keys", "pool-0.state",
        "pool-1.key", "pool-1.key_secret", "pool-1.keys", "pool-1.state", "secret.key",
        "server.key", "server.key_secret", "token"]
    for name in ("secret.key", "token", "pool-0.keys", "pool-0.state"):  # the owner's alone
        assert (tmp_path / "k" / name).stat().st_mode & 0o077 == 0
    res = subprocess.run([sys.executable, "-m", "ldpsim", "agents", "--connect",
                          "tcp://127.0.0.1:9", "--keys", str(tmp_path / "k" / "pool-0.keys"),
                          "--curve-key", str(tmp_path / "nope.key_secret"), "--curve-server",
                          str(tmp_path / "server.key")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 2 and "CURVE key file not found" in res.stderr


def test_hosts_backend_runs_a_multi_round_protocol(tmp_path):
    """DPWeVote (k + 1 rounds, a broadcast per round, subsets asked) over TCP pools."""
    keys = key_files(tmp_path, 2, 500)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(i)) for i in range(2)]
    c = {"protocol": "dpwevote", "params": {"epsilon": 2.0},
         "data": {"kind": "weighted_votes", "n": 500, "candidates": 3}, "seed": 3,
         "pools": 2, "agent_mode": "batched", "batch": 128,
         "collusion": {"colluders": 0, "curator": True}, "faults": []}
    try:
        res = hosts.run(c, keys.auth, keys.host.secrets)
        assert res["output"] == run_inproc(c, LIMITS, secrets=keys.host.secrets)["output"]
        assert res["comm"]["rounds"] == 4 and res["dropouts"] == 0
    finally:
        hosts.close()
        codes = [p.wait(timeout=15) for p in pools]
    assert codes == [0, 0]


def test_pools_outlive_a_crashed_curator_and_join_its_successor(tmp_path):
    """A curator killed mid-sweep leaves its pools set up for a dead run; they say they are
    ready again after --timeout of silence, and a new curator on the same endpoint (the same
    command run again) gets them for its runs."""
    keys = key_files(tmp_path, 2, 1000, 400_000)
    secrets = keys.host.secrets
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(i), "--timeout", "1") for i in range(2)]
    c = cfg("ldp_kwiksort_rr", 5)
    try:
        assert hosts.run(c, keys.auth, secrets)["pools_registered"] == 2
        from ldpsim.protocols import get_protocol
        from ldpsim.simulator.session.seeding import curator_config

        big = {**c, "data": {**c["data"], "n": 400_000}, "seed": 6}
        hosts._to_child.send(("run", 1, curator_config(big, secrets), keys.auth, False,
                              get_protocol("ldp_kwiksort_rr")))
        time.sleep(0.3)  # the set-up is out: the pools are set up for run 1
        hosts.proc.kill()  # the curator dies mid-run
        hosts.proc.join(5)
        hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
        nxt = cfg("ldp_kwiksort_rr", 7)  # the sweep's next run
        res = hosts.run(nxt, keys.auth, secrets)
        assert res["output"] == run_inproc(nxt, LIMITS, secrets=secrets)["output"]
        assert res["pools_registered"] == 2 and res["dropouts"] == 0
    finally:
        hosts.close()
        codes = []
        for p in pools:
            try:
                codes.append(p.wait(timeout=15))
            except subprocess.TimeoutExpired:  # never leave a pool behind
                p.kill()
                codes.append(p.wait(5))
    assert codes == [0, 0]


def test_pool_whose_curve_handshake_never_completes_exits_with_a_clear_message(tmp_path):
    from ldpsim.simulator.backends.curve import make_keys

    keys, stranger = tmp_path / "keys", tmp_path / "stranger"
    kf = key_files(keys, 1)
    make_keys(keys, 1)
    make_keys(stranger, 1)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=2.0), curve=str(keys))
    try:
        intruder = start_pool(port, kf.pool(0), "--curve-key",
                              str(stranger / "pool-0.key_secret"), "--curve-server",
                              str(keys / "server.key"), "--idle-timeout", "2")
        code = intruder.wait(timeout=30)  # used to block for ever in its send
        err = intruder.stderr.read().decode()
    finally:
        hosts.close()
    assert code == 2
    assert "no word from the curator" in err and "CURVE handshake" in err
    assert "Traceback" not in err


def test_curve_revocation_takes_effect_at_the_next_run(tmp_path):
    """Deleting a pool's key from clients/ shuts it out of the next run, even though its
    connection (authenticated when it opened) stays open."""
    from ldpsim.simulator.backends.curve import make_keys

    keys = tmp_path / "keys"
    kf = key_files(keys, 1)
    make_keys(keys, 1)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=3.0), curve=str(keys))
    pool = start_pool(port, kf.pool(0), "--curve-key", str(keys / "pool-0.key_secret"),
                      "--curve-server", str(keys / "server.key"))
    c = cfg("ldp_kwiksort_rr", 1)
    c["pools"] = 1
    try:
        assert hosts.run(c, kf.auth, kf.host.secrets)["pools_registered"] == 1
        (keys / "clients" / "pool-0.key").unlink()  # revoked between runs
        c2 = cfg("ldp_kwiksort_rr", 2)  # the next run
        c2["pools"] = 1
        assert_no_pool_registers(hosts, c2, kf, "a revoked pool registered")
    finally:
        hosts.close()
        pool.kill()
        pool.wait(5)


def test_attack_a_curve_key_deleted_before_run_0_is_refused_at_run_0(tmp_path):
    """The curator waits for run 0's pools; the operator deletes a pool's key; then that pool
    connects. It must not take part in run 0 (the enrolment was read when the run began, and
    the key was revoked only from run 1): the next registration reads the list again."""
    import threading
    import time

    from ldpsim.simulator.backends.curve import make_keys

    keys = tmp_path / "keys"
    kf = key_files(keys, 1)
    make_keys(keys, 1)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=6.0), curve=str(keys))
    c = cfg("ldp_kwiksort_rr", 1)
    c["pools"] = 1
    box: dict = {}

    def run() -> None:
        try:
            box["res"] = hosts.run(c, kf.auth, kf.host.secrets)
        except RunFailed as e:
            box["err"] = str(e)

    thread = threading.Thread(target=run)
    thread.start()
    pool = None
    try:
        time.sleep(0.5)  # run 0 has begun: it waits for its pool
        (keys / "clients" / "pool-0.key").unlink()
        pool = start_pool(port, kf.pool(0), "--curve-key", str(keys / "pool-0.key_secret"),
                          "--curve-server", str(keys / "server.key"), "--idle-timeout", "3")
        thread.join(30)
    finally:
        hosts.close()
        if pool is not None:
            pool.kill()
            pool.wait(5)
    assert "res" not in box, "a pool revoked before run 0 took part in it"
    assert "no pool registered" in box.get("err", "")


def test_hosts_backend_gives_the_inproc_virtual_times_of_a_deployment(tmp_path):
    """A ``[deployment]`` (the mobile trace, a deadline that makes some answers late) over TCP
    pools: the output, the dropouts by cause and every round's virtual times are inproc's."""
    from ldpsim.simulator.scenario import deployment as dep

    keys = key_files(tmp_path, 2, 500)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(i)) for i in range(2)]
    table = dep.check({"trace": "mobile", "round_deadline_s": 0.06}, None)
    c = {"protocol": "dpwevote", "params": {"epsilon": 2.0},
         "data": {"kind": "weighted_votes", "n": 500, "candidates": 3}, "seed": 3,
         "pools": 2, "agent_mode": "batched", "batch": 128,
         "collusion": {"colluders": 0, "curator": True}, "faults": [],
         "deployment": dep.run_deployment(table, "dpwevote", {}, {})}
    live = ("wall_s", "curator_cpu_s")
    try:
        res = hosts.run(c, keys.auth, keys.host.secrets)
        ref = run_inproc(c, LIMITS, secrets=keys.host.secrets)
        assert res["output"] == ref["output"] and res["virtual"] == ref["virtual"]
        assert res["virtual"]["dropouts_late"] > 0 and res["virtual"]["dropouts_offline"] > 0
        assert [{k: v for k, v in r.items() if k not in live} for r in res["comm"]["per_round"]] \
            == [{k: v for k, v in r.items() if k not in live} for r in ref["comm"]["per_round"]]
    finally:
        hosts.close()
        codes = [p.wait(timeout=15) for p in pools]
    assert codes == [0, 0]


def test_hosts_pools_hold_a_chunked_run_a_chunk_at_a_time(tmp_path):
    """Issue 52 across machines: ``ldpsim agents`` pools of a run with more agents than its
    ``chunk`` make their agents a chunk at a time and its curator streams, with the output of
    the same run held whole on the inproc backend (streaming protocols, one in agent order, and
    one of several rounds)."""
    keys = key_files(tmp_path, 2)
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(i)) for i in range(2)]
    secrets = keys.host.secrets
    try:
        for protocol, seed in (("ldp_kwiksort_rr", 4), ("kwiksort", 5), ("dpwevote", 6),
                               ("ethics_vldp", 7)):
            c = cfg(protocol, seed)
            if protocol == "dpwevote":
                c["data"] = {"kind": "weighted_votes", "n": 1000, "candidates": 3}
            if protocol == "ethics_vldp":  # in agent order: the second pool is held back
                c["data"] = {**example_data(protocol), "n": 1000}
                c["params"], c["batch"] = {}, 37  # (its voters' own eps_i)
            # an independent pool answers a run once: the chunked run is the inproc run's
            # (held whole), the same run whatever its chunk
            chunked = hosts.run(dict(c, chunk=97), keys.auth, secrets)
            assert chunked["output"] == run_inproc(c, LIMITS, secrets=secrets)["output"], protocol
            assert chunked["pools_registered"] == 2 and chunked["dropouts"] == 0
    finally:
        hosts.close()
        codes = [p.wait(timeout=15) for p in pools]
    assert codes == [0, 0]
