"""Attacks on a pool's memory: what a rogue curator gets by making an independent pool forget.

A pool of the hosts backend refuses a run it has answered (its agents' coins are spent) and
charges every round to its agents' lifetime budget on the run's data set. Before, both lived
only in the pool process's memory, and the curator's end-of-sweep DONE made every pool exit: a
rogue curator sent DONE, the supervisor (or the operator, as the threat model advised) started
the pool again with the same command, and the pool answered the same signed run again. Measured
then: asking other pairs the second time gave, for 100% of 7,796 slots, the XOR of two true
answers (independent coins give 0.508); with ``--lifetime-epsilon 2`` two sweeps over one data
set spent 1.0 + 1.4 = 2.4.

Now the pool keeps what it answered and spent in its state file beside its key file (written
atomically, synced before a report that spends leaves the pool), refuses to start on a missing
or unreadable one unless told ``--new-lifetime``, and whether it exits on DONE is its own
setting (``--keep-serving``). Every test runs real ``ldpsim agents`` processes over loopback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ldpsim.simulator.backends.transport import HostsCurator
from ldpsim.simulator.session import Limits, RunFailed

from tests.conftest import ROOT, free_port
from tests.simulator.backends.test_hosts import Keys, cfg, key_files, start_pool

LIMITS = Limits(timeout_s=10)


def _one_pool(protocol: str, seed: int, **params: float) -> dict:
    """A one-pool run of ``protocol`` (``seed`` fixes its data set) with ``params``."""
    c = cfg(protocol, seed)
    c["pools"] = 1
    c["params"] = {"epsilon": 1.0, **params}
    return c


def _stop(pool: subprocess.Popen) -> int:
    """The pool's exit code once it has exited (killed if it has not within 15 s)."""
    try:
        return pool.wait(timeout=15)
    except subprocess.TimeoutExpired:  # never leave a pool behind
        pool.kill()
        pool.wait(5)
        return -9


def _serve(keys: Keys, run: dict, *extra: str) -> dict:
    """Start pool 0 (``extra``: its options), serve ``run`` with a fresh curator, end the sweep
    (the curator's DONE) and wait for the pool to exit; the run's result."""
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pool = start_pool(port, keys.pool(0), *extra)
    try:
        return hosts.run(run, keys.auth, keys.host.secrets)
    finally:
        hosts.close()
        assert _stop(pool) == 0


def test_attack_a_restarted_pool_refuses_the_run_it_answered(tmp_path: Path) -> None:
    """A rogue curator ends the sweep (DONE: the pool exits), the pool is started again with
    the same command, and the curator replays the signed run: refused, its coins are spent.
    (Failed before: the restarted pool answered the run again with the same coins.)"""
    keys = key_files(tmp_path, 1)
    run = _one_pool("ldp_kwiksort_rr", 1)
    first = _serve(keys, run)
    assert first["pools_registered"] == 1 and first["dropouts"] == 0
    with pytest.raises(RunFailed, match="answered already"):
        _serve(keys, run)


def test_attack_the_lifetime_budget_holds_across_a_restart(tmp_path: Path) -> None:
    """``--lifetime-epsilon 2``: a run at ε = 1.4 over a data set, a restart, and another run
    (other parameters, so another run id) at ε = 1.4 over the same data set. The second would
    take every agent to 2.8: each round past 2 is refused. (Failed before: the restarted pool
    had forgotten the first run's spending and answered all of the second.)"""
    keys = key_files(tmp_path, 1)
    life = ("--lifetime-epsilon", "2")
    first = _serve(keys, _one_pool("ldp_kwiksort_rr", 3, epsilon=1.4), *life)
    assert first["refused"] == 0
    assert first["spent"]["epsilon_lifetime_max"] == pytest.approx(1.4)
    second = _serve(keys, _one_pool("ldp_kwiksort_rr", 3, epsilon=1.4, queries=2), *life)
    assert second["refused"] == 1000 and "lifetime" in second["refusal"]
    assert second["spent"]["epsilon_lifetime_max"] <= 2.0 + 1e-9


def _agents(keyfile: str, *extra: str) -> subprocess.CompletedProcess:
    """``ldpsim agents`` with a curator that never answers: it must stop before connecting."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ldpsim", "agents", "--connect",
                           f"tcp://127.0.0.1:{free_port()}", "--keys", keyfile,
                           "--idle-timeout", "2", *extra], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_corrupt_or_missing_state_file_stops_the_pool_with_one_line(tmp_path: Path) -> None:
    """An unreadable state file must never reset the ledger: the pool does not start, and says
    why in one line. A missing one is refused the same way unless ``--new-lifetime`` says the
    operator starts a new lifetime; that never overwrites an existing state file.
    (Failed before: the pool ignored its state file and started with an empty memory.)"""
    keys = key_files(tmp_path, 1)
    state = Path(keys.pool(0)).with_suffix(".state")
    assert state.is_file()  # ``ldpsim keys`` starts the pool's lifetime with its keys
    good = state.read_bytes()
    for bad in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 1]), b"", b"{}\n"):
        state.write_bytes(bad)
        res = _agents(keys.pool(0))
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "state file" in lines[0] and str(state) in lines[0], lines
        assert "no word from the curator" not in res.stderr
        assert state.read_bytes() == bad  # left as it was, for the operator to look at
        res = _agents(keys.pool(0), "--new-lifetime")  # never over an existing one
        assert res.returncode == 2 and "already" in res.stderr, res.stderr
        assert state.read_bytes() == bad
    state.unlink()
    res = _agents(keys.pool(0))
    assert res.returncode == 2 and "--new-lifetime" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not state.exists()
    res = _agents(keys.pool(0), "--new-lifetime")  # it starts; no curator: the idle timeout
    assert res.returncode == 2 and "no word from the curator" in res.stderr, res.stderr
    assert state.is_file()


def test_done_ends_the_sweep_not_the_pools_memory(tmp_path: Path) -> None:
    """With ``--keep-serving`` the curator's DONE ends its sweep and the pool stays: a new
    curator gets it for a new run, and a replay of the first run is refused. A pool that exits
    on DONE (the default) keeps its memory too: restarted, it still refuses both runs.
    (Failed before: ``--keep-serving`` did not exist, and DONE made every pool exit and
    forget.)"""
    keys = key_files(tmp_path, 1)
    first, second = _one_pool("ldp_kwiksort_rr", 5), _one_pool("ldp_kwiksort_rr", 6)
    port = free_port()
    pool = start_pool(port, keys.pool(0), "--keep-serving", "--timeout", "1",
                      "--idle-timeout", "30")
    try:
        hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
        try:
            assert hosts.run(first, keys.auth, keys.host.secrets)["dropouts"] == 0
        finally:
            hosts.close()  # DONE: the end of this curator's sweep
        time.sleep(1.0)
        assert pool.poll() is None, "the pool exited on the curator's DONE"
        hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
        try:
            with pytest.raises(RunFailed, match="answered already"):
                hosts.run(first, keys.auth, keys.host.secrets)
            assert hosts.run(second, keys.auth, keys.host.secrets)["dropouts"] == 0
        finally:
            hosts.close()
        time.sleep(0.5)
        assert pool.poll() is None
    finally:
        pool.terminate()
        pool.wait(15)
    for run in (first, second):  # restarted (default: exits on DONE), it remembers both
        with pytest.raises(RunFailed, match="answered already"):
            _serve(keys, run)


def test_attack_a_pool_killed_mid_run_has_recorded_what_it_sent(tmp_path: Path) -> None:
    """DPWeVote (4 rounds) over two pools; pool 0 is killed (SIGKILL, the run's fault) as round
    1 begins, after its reports of round 0 left. Started again with the same command, with pool
    1 replaced by a fresh one (a new lifetime), the replayed run is refused by pool 0: its state
    file was written before its first report left. (Failed before: the restarted pool 0 had no
    record and answered the run again.)"""
    keys = key_files(tmp_path, 2, 500)
    run = {"protocol": "dpwevote", "params": {"epsilon": 2.0},
           "data": {"kind": "weighted_votes", "n": 500, "candidates": 3}, "seed": 3,
           "pools": 2, "agent_mode": "batched", "batch": 128,
           "collusion": {"colluders": 0, "curator": True},
           "faults": [{"pool": 0, "round": 1, "action": "kill"}]}
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", Limits(timeout_s=2), auth=keys.auth)
    pools = [start_pool(port, keys.pool(i)) for i in range(2)]
    try:
        res = hosts.run(run, keys.auth, keys.host.secrets)
        assert res["dropouts"] > 0  # pool 0's agents, from round 1 on
    finally:
        hosts.close()
        codes = [_stop(p) for p in pools]
    assert codes == [-9, 0]
    Path(keys.pool(1)).with_suffix(".state").unlink()
    port = free_port()
    hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
    pools = [start_pool(port, keys.pool(0)), start_pool(port, keys.pool(1), "--new-lifetime")]
    try:
        with pytest.raises(RunFailed, match="pool 0 refused the run: run .* answered already"):
            hosts.run({**run, "faults": []}, keys.auth, keys.host.secrets)
    finally:
        hosts.close()
        assert _stop(pools[0]) == 0
        pools[1].kill()  # set up for the refused run, it may not be a peer the curator bids
        pools[1].wait(5)  # goodbye (it would leave at its --idle-timeout)


def _holder(lock: Path, pool: subprocess.Popen, wait_s: float = 10.0) -> bool:
    """Whether ``pool`` holds the state file's lock (its process id written in ``lock``),
    waited for up to ``wait_s``."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end and pool.poll() is None:
        if lock.is_file() and lock.read_text().strip() == str(pool.pid):
            return True
        time.sleep(0.1)
    return False


def test_attack_a_second_process_on_the_state_file_is_refused(tmp_path: Path) -> None:
    """Two ``ldpsim agents`` on one key file: each would keep its own memory of the state
    file, so a run the first answered, replayed through another curator to the second, would
    be answered again with the same coins (and each process's writes would erase the other's).
    The second is refused with one line while the first lives (an fcntl lock held for the
    pool's life); when the first dies, even by SIGKILL, the operating system drops the lock and
    the pool starts again, remembering what the first answered. (Failed before: the second
    started, and answered the run again.)"""
    keys = key_files(tmp_path, 1)
    state = Path(keys.pool(0)).with_suffix(".state")
    lock = state.with_name(state.name + ".lock")
    run = _one_pool("ldp_kwiksort_rr", 7)
    ports = free_port(), free_port()
    first = start_pool(ports[0], keys.pool(0), "--keep-serving", "--idle-timeout", "120")
    second = None
    try:
        _holder(lock, first)
        second = start_pool(ports[1], keys.pool(0), "--keep-serving", "--idle-timeout", "120")
        try:
            code = second.wait(timeout=15)
        except subprocess.TimeoutExpired:  # it started: the attack, through two curators
            for port in ports:
                hosts = HostsCurator(f"tcp://127.0.0.1:{port}", LIMITS, auth=keys.auth)
                try:
                    hosts.run(run, keys.auth, keys.host.secrets)
                finally:
                    hosts.close()
            raise AssertionError("a second process on the state file answered the run "
                                 "the first had answered") from None
        lines = second.stderr.read().decode().strip().splitlines()
        assert code == 2 and len(lines) == 1, lines
        assert "in use" in lines[0] and str(state) in lines[0] and str(first.pid) in lines[0]
        hosts = HostsCurator(f"tcp://127.0.0.1:{ports[0]}", LIMITS, auth=keys.auth)
        try:  # the first serves on, unaffected
            assert hosts.run(run, keys.auth, keys.host.secrets)["dropouts"] == 0
        finally:
            hosts.close()
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()  # a crash: the lock goes with the process
                p.wait(15)
    res = _agents(keys.pool(0))  # the lock is free again: it starts (no curator: idle timeout)
    assert res.returncode == 2 and "no word from the curator" in res.stderr, res.stderr
    with pytest.raises(RunFailed, match="answered already"):
        _serve(keys, run)
