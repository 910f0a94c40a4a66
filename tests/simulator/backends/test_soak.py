"""A run under a stream of hostile messages of every kind, over real sockets, against a clean run.

An attacker process opens a few connections to the curator's TCP endpoint and sends, as fast as
the curator lets it, a mix of every attack in ``tests/simulator/session/test_attacks.py`` that
an outsider can send over a socket: undecodable bytes, envelopes with an ndarray version,
reports from agent 2^64-1, registrations with a wrong MAC, "ready" HELLOs (each answered with
the set-up: amplification), oversized and multi-part messages, frames of msgpack nils, DONE
statistics of the wrong type and ERRORs from unregistered peers. The attacker passes the door
(``simulator.backends.door``) as a holder of the registration key, so its messages reach the
session. The run must release exactly the clean run's output, and the curator's peak memory
and the wall time must stay within 2x of the clean run's, comparing the best of two attacked
runs with the best of two clean ones (docs/threat-model.md quotes the
measurements).
"""

from __future__ import annotations

import multiprocessing as mp
import time

import msgpack
import numpy as np
import pytest
import zmq
from ldpsim.simulator.backends.door import show
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import Limits

from tests import drivers
from tests.conftest import ROOT, free_port

LIMITS = Limits(timeout_s=20.0)
#: The attacker reads its replies after this many sends. Polling its four sockets after every
#: send spent most of its CPU (0.26-0.31 s of CPU per attacked run against 0.08-0.13 s), which
#: on a two-core machine is taken from the run without reaching the curator: the sparser
#: reads send as many hostile messages or more (17-48 thousand accepted by the socket per run
#: against 18-23 thousand, docs/threat-model.md's figures).
REPLIES_EVERY = 64



def _config(n: int, batch: int) -> dict:
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 2},
            "data": {"kind": "mallows", "n": n, "m": 10, "theta": 0.5}, "seed": 21,
            "pools": 2, "agent_mode": "batched", "batch": batch,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def hostile_messages() -> list[list[bytes]]:
    """One of every kind (each a list of message parts)."""
    head = bytes([7, 1]) + (2).to_bytes(4, "little")
    nd_version = msgpack.ExtType(wire.EXT_NDARRAY, head + np.array([1, 1]).tobytes())
    return [
        [b"\xc1\xc1 not msgpack"],
        [msgpack.packb([nd_version, wire.REPORT, 0, 0, 0, [1]])],
        [msgpack.packb([1, wire.REPORT, 0, 0, 2**64 - 1, [1, 0]])],
        [msgpack.packb([1, wire.REPORT, 0, 0, 5, [1, 0]]) * 50],
        [wire.encode(wire.HELLO, 0, -1, -1, {"pool": 0, "pools": 2, "n": 10**12,
                                             "agents": [0, 5], "public": {}, "mac": b"x" * 32})],
        [wire.encode(wire.HELLO, -1, -1, -1, {"pool": 0, "pools": 2})],
        [b"\x90" * (1200 * 1024)],
        [b"a", b"b", b"c"],
        [b"\xc0" * 20_000],
        [wire.encode(wire.DONE, 0, -1, -1, {"agent_cpu_s": "lots"})],
        [wire.encode(wire.ERROR, 0, -1, -1, {"error": "x" * 10_000})],
    ]


def _attacker(endpoint: str, count: int, deadline_s: float, ready, sent_box,
              auth: bytes | None = drivers.AUTH) -> None:
    """Hostile messages on four connections; ``auth``: the registration key whose door keys
    the attacker shows (``simulator.backends.door``), None for an outsider without it."""
    ctx = zmq.Context()
    socks = []
    for _ in range(4):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 200)
        if auth is not None:
            show(s, auth)
        # the curator binds only when its run starts: retry the connection every 5 ms (the
        # default 100 ms may let a short run end before the first hostile message arrives)
        s.setsockopt(zmq.RECONNECT_IVL, 5)
        s.connect(endpoint)
        socks.append(s)
    kinds = hostile_messages()
    ready.set()
    sent, i, t0 = 0, 0, time.monotonic()
    while sent < count and time.monotonic() - t0 < deadline_s:
        msg = kinds[i % len(kinds)]
        if len(msg[0]) > 100_000 and i % 500:  # the big ones now and then
            i += 1
            continue
        try:
            socks[i % 4].send_multipart(msg, flags=zmq.NOBLOCK)
            sent += 1
            sent_box.value = sent
        except zmq.Again:
            time.sleep(0.0005)  # the curator pushes back (high-water mark, TCP)
        i += 1
        if i % REPLIES_EVERY == 0:  # read the ERROR replies and set-ups, as a peer would
            for s in socks:
                while s.poll(0):
                    s.recv_multipart()
    for s in socks:
        s.close()
    ctx.term()


def _soak(n: int, hostile: int, batch: int) -> tuple[dict, list[dict]]:
    """A clean run and the same run under attack, each twice. Small query batches make many
    frames, so the curator handles hostile messages all through the run (a ROUTER queues its
    peers fairly: between two pool frames, one message from each attacking connection).
    Every attacked run must release the clean output; the caller compares the best of each
    pair (the same statistic on both sides: the machine's noise moves a single run by a
    quarter)."""
    cfg = _config(n, batch)
    clean = min((run_processes(cfg, LIMITS, endpoint=f"tcp://127.0.0.1:{free_port()}",
                               parties=drivers.parties(cfg))
                 for _ in range(2)), key=lambda r: r["timing"]["wall_s"])
    return clean, [_attacked(cfg, clean, hostile) for _ in range(2)]


def _attacked(cfg: dict, clean: dict, hostile: int) -> dict:
    """One run of ``cfg`` under a fresh attacker that sends up to ``hostile`` messages."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    sent = ctx.Value("q", 0)
    attacker = ctx.Process(target=_attacker, args=(endpoint, hostile, 60.0, ready, sent))
    attacker.start()
    try:
        ready.wait(10)
        time.sleep(0.2)  # let the attack start first
        res = run_processes(cfg, LIMITS, endpoint=endpoint, parties=drivers.parties(cfg))
    finally:
        attacker.terminate()
        attacker.join(5)
    assert res["output"] == clean["output"]
    assert res["dropouts"] == 0 and res["rejected"] > 0
    res["hostile_sent"] = sent.value
    return res


def _ratios(clean: dict, attacked: list[dict]) -> tuple[float, float]:
    """The attacked runs' largest curator peak memory and best wall time, over the clean
    run's."""
    for res in attacked:
        t = res["timing"]
        print(f"hostile: {res['hostile_sent']} accepted by the socket, {res['rejected']} "
              f"rejected with a reason during the run; curator memory "
              f"{t['curator_peak_rss_mb']:.0f} MB, wall {t['wall_s']:.2f} s")
    mem = max(r["timing"]["curator_peak_rss_mb"] for r in attacked) \
        / clean["timing"]["curator_peak_rss_mb"]
    wall = min(r["timing"]["wall_s"] for r in attacked) / clean["timing"]["wall_s"]
    print(f"clean: {clean['timing']['curator_peak_rss_mb']:.0f} MB, {clean['timing']['wall_s']:.2f}"
          f" s; curator memory x{mem:.2f}, wall x{wall:.2f}")
    return mem, wall


def test_a_run_under_hostile_traffic_releases_the_clean_output_within_bounded_memory():
    clean, attacked = _soak(n=200_000, hostile=10_000, batch=512)
    mem, wall = _ratios(clean, attacked)
    assert mem <= 2.0
    assert wall <= 4.0  # 2x is the target, measured by the slow soak; this is a smoke bound


@pytest.mark.slow
def test_soak_100k_hostile_messages_within_2x_of_a_clean_run():
    clean, attacked = _soak(n=1_000_000, hostile=100_000, batch=1024)
    mem, wall = _ratios(clean, attacked)
    assert mem <= 2.0 and wall <= 2.0


def test_a_hosts_run_with_a_token_under_hostile_traffic_releases_the_clean_output(tmp_path):
    """The same attack against the hosts backend: a long-lived curator bound on TCP, pools
    started as separate ``ldpsim agents`` commands with their key files and the token, two
    runs in a row."""
    import os
    import subprocess
    import sys

    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.backends.transport import HostsCurator
    from ldpsim.simulator.session.keyfiles import (
        read_host_keys,
        registration_key,
        token_of,
        write_host_keys,
    )

    root = ROOT
    files = write_host_keys(tmp_path, 2, [[(0, 25_000)], [(25_000, 50_000)]])
    host = read_host_keys(files["secret"])
    auth = registration_key(token_of(None, files["secret"]), host.salt)
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    hosts = HostsCurator(endpoint, LIMITS, auth=auth)
    env = dict(os.environ, PYTHONPATH=str(root))
    pools = [subprocess.Popen([sys.executable, "-m", "ldpsim", "agents", "--connect", endpoint,
                               "--keys", str(files[f"pool-{i}"])], env=env,
                              stderr=subprocess.DEVNULL) for i in range(2)]
    ctx = mp.get_context("fork")
    ready, sent = ctx.Event(), ctx.Value("q", 0)
    attacker = ctx.Process(target=_attacker, args=(endpoint, 20_000, 60.0, ready, sent, auth))
    attacker.start()
    results = []
    try:
        ready.wait(10)
        for seed in (1, 2):
            cfg = {**_config(50_000, 512), "seed": seed}
            res = hosts.run(cfg, auth, host.secrets)
            assert res["output"] == run_inproc(cfg, LIMITS, secrets=host.secrets)["output"]
            assert res["dropouts"] == 0 and res["pools_registered"] == 2
            results.append(res)
    finally:
        attacker.terminate()
        attacker.join(5)
        hosts.close()
        for p in pools:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
    assert sum(r["rejected"] for r in results) > 0 and sent.value > 0
