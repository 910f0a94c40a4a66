"""The transport ceiling: the envelopes of a run, of the same sizes and in the same batches,
pushed curator -> pools -> curator through the runtime's sockets with no protocol logic (the
bound a full run is measured against), and the run it is compared with."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import resource
import shutil
import time
from typing import Any

import numpy as np
import zmq
from ldpsim.simulator.backends.transport import POOL_SOCKET_OPTIONS, die_with_parent, private_ipc
from ldpsim.simulator.codec import wire, wire_numpy, wire_numpy_read
from ldpsim.simulator.session import block_of


def _bench_dealer(endpoint: str) -> tuple[zmq.Context, zmq.Socket]:
    """A benchmark pool's DEALER, with the runtime's socket options, announced to the router."""
    die_with_parent()
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    for opt, val in POOL_SOCKET_OPTIONS:
        s.setsockopt(opt, val)
    s.connect(endpoint)
    s.send(b"ready")
    return ctx, s


def _bench_pool(endpoint: str, reply: Any) -> None:
    """A benchmark pool: answers every query frame with ``reply(frame)`` until "stop"."""
    ctx, s = _bench_dealer(endpoint)
    while True:
        frame = s.recv()
        if frame == b"stop":
            break
        s.send(reply(frame))
    s.close()
    ctx.term()
    os._exit(0)


def _msgpack_reply(frame: bytes) -> bytes:
    """Decode each query envelope, encode one report envelope per agent (general codec)."""
    agents = [obj[4] for obj, _ in wire.iter_frame(frame, 1 << 30)]
    return b"".join(wire.encode_many(wire.REPORT, 0, 0, agents, [[1]] * len(agents))[0])


def _batch_reply(frame: bytes) -> bytes:
    """The same with the runtime's vectorised batch codec."""
    _, _, agents, _ = wire_numpy_read.parse_consecutive(frame, wire.QUERY)
    return wire_numpy.encode_batch(wire.REPORT, 0, 0, agents,
                                   np.ones((len(agents), 1), dtype=np.int64))[0]


def _router(endpoint: str) -> tuple[zmq.Context, zmq.Socket]:
    """The ceiling's curator socket: a ROUTER bound at ``endpoint``, never dropping a frame."""
    zctx = zmq.Context()
    router = zctx.socket(zmq.ROUTER)
    for opt, val in ((zmq.ROUTER_MANDATORY, 1), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0),
                     (zmq.LINGER, 0)):
        router.setsockopt(opt, val)
    router.bind(endpoint)
    return zctx, router


def _recv(router: zmq.Socket) -> list[bytes]:
    """The next message of a benchmark pool (RuntimeError after a minute of silence)."""
    if not router.poll(60_000):
        raise RuntimeError("transport ceiling: a benchmark pool stopped answering")
    return router.recv_multipart()


def _send_queries(router: zmq.Socket, peers: list[bytes], blocks: list[tuple[int, int]],
                  batch: int, envelopes: str, queries: dict[int, bytes]
                  ) -> dict[int, np.ndarray]:
    """Every pool's query frames, its block of agents in batches: pre-built bytes ("raw"),
    or one envelope per agent with the batch codec ("batch") or the general one
    ("msgpack"). Returns the agents of each "batch" frame by its first agent."""
    sent: dict[int, np.ndarray] = {}
    for peer, (lo, hi) in zip(peers, blocks, strict=True):
        for s in range(lo, hi, batch):
            if envelopes == "msgpack":
                ids = list(range(s, min(hi, s + batch)))
                bufs, _ = wire.encode_many(wire.QUERY, 0, 0, ids, [[0]] * len(ids))
                router.send_multipart([peer, b"".join(bufs)])
            elif envelopes == "batch":
                ids = np.arange(s, min(hi, s + batch), dtype=np.int64)
                sent[s] = ids
                frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 0, ids,
                                                   np.zeros((len(ids), 1), dtype=np.int64))
                router.send_multipart([peer, frame])
            else:
                router.send_multipart([peer, queries[min(batch, hi - s)]])
    return sent


def _receive_reports(router: zmq.Socket, n: int, envelopes: str, sent: dict[int, np.ndarray],
                     expected_bytes: int) -> None:
    """Wait for every report: ``n`` envelopes decoded with the codec that sent the queries,
    or (``"raw"``) ``expected_bytes`` bytes."""
    received = 0
    if envelopes == "msgpack":
        while received < n:
            received += sum(1 for _ in wire.iter_frame(_recv(router)[1], 1 << 30))
    elif envelopes == "batch":
        while received < n:
            frame = _recv(router)[1]
            ids = sent.pop(wire_numpy_read.first_agent(frame, wire.REPORT)[2])
            received += len(wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, ids, 1,
                                                        "int"))
    else:
        while received < expected_bytes:
            received += len(_recv(router)[1])


def _stop_pools(router: zmq.Socket, peers: list[bytes], procs: list[Any]) -> None:
    """Tell every benchmark pool to stop and wait for it (a stuck one is killed)."""
    for peer in peers:
        with contextlib.suppress(zmq.ZMQError):
            router.send_multipart([peer, b"stop"])
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(1)


def transport_ceiling(n: int, pools: int, batch: int, query_size: int,
                      report_size: int, envelopes: str = "raw") -> tuple[float, float]:
    """(wall s, CPU s) to move n query envelopes out and n report envelopes back, no logic.

    CPU is the curator loop's plus the pool processes' whole lives (``RUSAGE_CHILDREN``).

    ``envelopes``: "raw" sends pre-built bytes of the same sizes (the sockets alone);
    "batch" encodes and decodes one envelope per agent with the runtime's vectorised batch
    codec (``wire_numpy.encode_batch``, ``wire_numpy_read.parse_consecutive`` and
    ``match_batch``); "msgpack" does it one ``msgpack`` call per envelope (the general codec).
    Nobody validates, randomizes or estimates.
    """
    ctx_mp = mp.get_context("fork")
    ipc_dir, endpoint = private_ipc()  # the runs' own kind of endpoint, removed afterwards
    zctx, router = _router(endpoint)
    blocks = [block_of(i, pools, n) for i in range(pools)]  # the runtime's split
    counts = [min(batch, hi - s) for lo, hi in blocks for s in range(lo, hi, batch)]
    reports = {k * query_size: b"r" * (k * report_size) for k in set(counts)}
    queries = {k: b"q" * (k * query_size) for k in set(counts)}
    reply = {"raw": lambda frame: reports[len(frame)], "batch": _batch_reply,
             "msgpack": _msgpack_reply}[envelopes]
    procs = [ctx_mp.Process(target=_bench_pool, args=(endpoint, reply)) for _ in range(pools)]
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    peers: list[bytes] = []
    try:
        for p in procs:
            p.start()
        peers = [_recv(router)[0] for _ in range(pools)]
        t, cpu0 = time.perf_counter(), time.process_time()
        sent = _send_queries(router, peers, blocks, batch, envelopes, queries)
        _receive_reports(router, n, envelopes, sent, sum(counts) * report_size)
        elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu0
    finally:
        _stop_pools(router, peers, procs)
        router.close()
        zctx.term()
        shutil.rmtree(ipc_dir, ignore_errors=True)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (children.ru_utime + children.ru_stime) - (children0.ru_utime + children0.ru_stime)
    return elapsed, cpu


def used_batch(result: dict[str, Any]) -> int:
    """The largest query batch of a run's rounds (agents; ``batch = "auto"`` resolved)."""
    return max((r["batch"] for r in result["comm"]["per_round"]), default=1)


def from_ready(result: dict[str, Any]) -> float:
    """A run's wall time from when every pool was connected and ready (the ceiling's start)."""
    return result["timing"]["wall_s"] - result["timing"]["pools_ready_s"]


def kwiksort_config(n: int, pools: int, batch: int | str) -> dict[str, Any]:
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 1},
            "data": {"kind": "mallows", "n": n, "m": 10, "theta": 0.5}, "seed": 1,
            "pools": pools, "agent_mode": "batched", "batch": batch,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}
