"""A running curator fed garbage over its real ZeroMQ socket survives, rejects each bad message
with a reason, counts it, and produces exactly the output of a clean run."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import msgpack
import zmq
from ldpsim.simulator.backends.door import show
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import _pool_child, run_processes
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import Limits, PoolSession

from tests import drivers
from tests.conftest import each_chunking, free_port

TOKEN = "secret-token"
LIMITS = Limits(timeout_s=10.0, max_frame_bytes=64 * 1024)



def config() -> dict:
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 2.0, "queries": 1},
            "data": {"kind": "mallows", "n": 600, "m": 6, "theta": 0.5}, "seed": 11,
            "pools": 2, "agent_mode": "batched", "batch": 4096,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "config")


def split_envelopes(frame: bytes) -> list[bytes]:
    out, pos = [], 0
    for _, size in wire.iter_frame(frame, 1 << 20):
        out.append(frame[pos:pos + size])
        pos += size
    return out


def attacker_garbage() -> list[list[bytes]]:
    """Messages from a peer that never registered (each is one ZeroMQ message)."""
    return [
        [b"\xc1\xc1 not msgpack at all"],                           # undecodable
        [msgpack.packb({"hello": 1})],                               # not an envelope
        [msgpack.packb([99, wire.REPORT, 0, 0, 5, [1]])],            # wrong version
        [msgpack.packb([1, 42, 0, 0, 5, [1]])],                      # unknown type
        [wire.encode(wire.HELLO, 0, -1, -1, {"pool": 1, "token": "wrong", "n": 600,
                                             "agents": [300, 600], "public": {}})],  # bad token
        [b"one", b"two"],                                            # two frames
        [b"\x00" * (100 * 1024)],                                    # oversized frame
    ]


def pool_garbage(run: int, block: tuple[int, int]) -> list[bytes]:
    """Bad reports from the registered test pool (pool 1)."""
    a = block[0]
    return [
        wire.encode(wire.REPORT, run, 5, a, [1]),                    # out of round
        wire.encode(wire.REPORT, run, 0, a, [7]),                    # out of domain
        wire.encode(wire.REPORT, run, 0, 10**9, [1]),                # unknown agent id
        wire.encode(wire.REPORT, 7, 0, a, [1]),                      # wrong run
        wire.encode(wire.REPORT, run, 0, a + 1, [0.5]),              # wrong type
        wire.encode(wire.REPORT, run, 0, 0, [1]),                    # agent of another pool
    ]


def test_curator_survives_garbage_and_output_is_unchanged():
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    cfg = config()
    parties = drivers.parties(cfg)
    result: dict = {}

    def curator() -> None:
        try:
            result["res"] = run_processes(cfg, LIMITS, endpoint=endpoint, spawn_pools=False,
                                          parties=parties)
        except Exception as e:  # surfaced below
            result["err"] = e

    ctx = mp.get_context("fork")
    real_pool = ctx.Process(target=_pool_child, args=(endpoint, 0, 2, drivers.AUTH, LIMITS,
                                                          parties.pools[0]))
    real_pool.start()
    thread = threading.Thread(target=curator)
    thread.start()

    zctx = zmq.Context()
    attacker = zctx.socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    # past the door (``simulator.backends.door``), as a holder of the registration key
    show(attacker, drivers.AUTH)
    attacker.connect(endpoint)
    for msg in attacker_garbage():
        attacker.send_multipart(msg)

    pool = zctx.socket(zmq.DEALER)
    pool.setsockopt(zmq.LINGER, 0)
    show(pool, drivers.AUTH)
    pool.connect(endpoint)
    ps = PoolSession(1, 2, drivers.AUTH, LIMITS, parties.pools[1])
    pool.send(ps.hello())
    n_dup = 0
    deadline = time.monotonic() + 30
    try:
        while not ps.exit and time.monotonic() < deadline:
            if not pool.poll(100):
                continue
            frame = pool.recv()
            is_query = any(o[1] == wire.QUERY for o, _ in wire.iter_frame(frame, 1 << 20))
            outs = ps.on_frame(frame)
            if not is_query:
                for out in outs:
                    pool.send(out)
                continue
            attacker.send(msgpack.packb([1, wire.REPORT, ps.run, 0, 5, [1]]))  # unknown peer
            time.sleep(0.3)  # let the attacker's messages be processed first
            for bad in pool_garbage(ps.run, (ps.start, ps.stop)):
                pool.send(bad)
            envs = split_envelopes(outs[0])
            half = envs[: len(envs) // 2]
            pool.send(b"".join(half))
            pool.send(b"".join(half))  # every one a duplicate
            n_dup = len(half)
            pool.send(b"".join(envs[len(envs) // 2:]))
        thread.join(30)
        errors = []
        while attacker.poll(200):
            errors.append(wire.decode_one(attacker.recv()))
    finally:
        attacker.close()
        pool.close()
        zctx.term()
        real_pool.join(10)
        if real_pool.is_alive():
            real_pool.kill()
    assert "err" not in result, result.get("err")
    res = result["res"]
    clean = run_inproc(cfg, LIMITS)
    assert res["output"] == clean["output"]
    assert res["dropouts"] == 0
    assert res["rejected"] == len(attacker_garbage()) + 1 + len(pool_garbage(0, (0, 1))) + n_dup
    reasons = " | ".join(r["reason"] for r in res["rejections"])
    for needle in ("undecodable", "not an envelope", "unsupported version",
                   "unknown message type", "unknown peer", "authentication failed",
                   "expected one frame", "oversized frame", "out-of-round", "out-of-domain",
                   "unknown agent 1000000000", "wrong run", "duplicate report",
                   "not hosted by pool 1"):
        assert needle in reasons, needle
    # the attacker was answered with ERROR envelopes that say why
    assert errors and all(e.kind == wire.ERROR for e in errors)
    assert any("undecodable" in e.payload["error"] for e in errors)


class _CountingSession:
    """Stands in for a ``CuratorSession`` in ``CuratorServer._drain``: counts the frames it
    is handed; its deadline is fixed."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.frames: list[bytes] = []
        self.finished = False
        self.pools: dict = {}  # its registered pools: none (the peer is a stranger)

    def next_deadline(self) -> float:
        return self.deadline

    def on_frame(self, peer: bytes, frame: bytes):
        self.frames.append(frame)
        return iter(())

    def reject(self, peer: bytes, reason: str):
        self.frames.append(reason.encode())
        return iter(())


def _queued(n: int):
    """A curator socket with ``n`` one-frame messages from one peer queued on it."""
    from ldpsim.simulator.backends.server import CuratorServer

    server = CuratorServer(f"tcp://127.0.0.1:{free_port()}", LIMITS, auth=drivers.AUTH)
    ctx = zmq.Context()
    peer = ctx.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.setsockopt(zmq.SNDHWM, 0)
    show(peer, drivers.AUTH)  # past the door
    peer.connect(server.endpoint)
    for i in range(n):
        peer.send(b"\xc1 garbage %d" % i)
    deadline = time.monotonic() + 10
    while not server.sock.poll(100) and time.monotonic() < deadline:
        pass
    time.sleep(0.2)  # the rest of them arrive
    return server, ctx, peer


def test_the_curator_reads_a_flood_in_drains_of_bounded_length_and_stops_at_its_deadline():
    """The curator reads the messages queued on its socket without a poll between two of
    them (``CuratorServer._drain``), but at most ``DRAIN`` in one go and none after its
    session's deadline: a flood can neither starve the deadline check nor extend a round."""
    from ldpsim.simulator.backends.server import DRAIN

    server, ctx, peer = _queued(DRAIN + 10)
    try:
        late = _CountingSession(deadline=time.monotonic() - 1.0)
        server._drain(late)
        assert len(late.frames) == 1  # the deadline passed: back to the caller at once
        sess = _CountingSession(deadline=time.monotonic() + 60.0)
        server._drain(sess)
        assert len(sess.frames) == DRAIN
        rest = _CountingSession(deadline=time.monotonic() + 60.0)
        server._drain(rest)  # the queue runs dry: it returns without waiting
        assert len(rest.frames) == 10 - 1
        # each message read once, in the order sent
        assert late.frames + sess.frames + rest.frames == \
            [b"\xc1 garbage %d" % i for i in range(DRAIN + 10)]
    finally:
        peer.close()
        ctx.term()
        server.close()


def test_a_stranger_past_the_door_gets_a_budget_of_bytes_then_is_not_read():
    """A peer that holds the door credential but is no registered pool: its first
    ``STRANGER_BYTES`` of messages in a run are handled (and refused with reasons), the rest
    dropped unread and unanswered; a registered pool has no such budget."""
    from ldpsim.simulator.backends.server import STRANGER_BYTES, CuratorServer

    server = CuratorServer(f"tcp://127.0.0.1:{free_port()}", LIMITS, auth=drivers.AUTH)
    ctx = zmq.Context()
    peer = ctx.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.setsockopt(zmq.SNDHWM, 0)
    show(peer, drivers.AUTH)
    peer.connect(server.endpoint)
    frame = b"\xc1" * 8192
    count = 2 * STRANGER_BYTES // len(frame)
    try:
        for _ in range(count):
            peer.send(frame)
        sess = _CountingSession(deadline=time.monotonic() + 60.0)
        deadline = time.monotonic() + 10
        while len(sess.frames) + server.unread < count and time.monotonic() < deadline:
            if server.sock.poll(100):
                server._drain(sess)
        assert len(sess.frames) == STRANGER_BYTES // len(frame)
        assert server.unread == count - len(sess.frames)
        pool = _CountingSession(deadline=time.monotonic() + 60.0)
        ident = next(iter(server.strangers))
        pool.pools = {ident: object()}  # the same peer, registered: read in full
        for _ in range(8):
            peer.send(frame)
        deadline = time.monotonic() + 10
        while len(pool.frames) < 8 and time.monotonic() < deadline:
            if server.sock.poll(100):
                server._drain(pool)
        assert len(pool.frames) == 8
    finally:
        peer.close()
        ctx.term()
        server.close()
