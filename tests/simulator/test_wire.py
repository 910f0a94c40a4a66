"""The vectorised batch codec must produce and accept exactly what msgpack does."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from ldpsim.simulator import wire

EDGES = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**62]


def reference(kind, run, rnd, agents, payload):
    rows = None if payload is None else np.asarray(payload).astype(
        np.float64 if np.asarray(payload).dtype.kind == "f" else np.int64).tolist()
    bufs, sizes = wire.encode_many(kind, run, rnd, list(map(int, agents)), rows)
    return b"".join(bufs), sizes


@pytest.mark.parametrize("run,rnd", [(0, 0), (3, -1), (300, 70000), (2**33, 5)])
def test_encode_batch_is_byte_identical_to_msgpack(run, rnd):
    rng = np.random.default_rng(run + 7)
    # agent ids crossing every msgpack width boundary, in one batch
    agents = np.unique(np.concatenate([np.array(EDGES), np.array(EDGES) + 1,
                                       rng.integers(0, 2**40, 50)]))
    n = len(agents)
    payloads = [None, rng.integers(0, 128, (n, 3)), rng.integers(0, 2, (n, 1)).astype(bool),
                rng.integers(-2**40, 2**40, (n, 2)),  # not fixint: general encoder
                rng.normal(size=(n, 4)), np.full((n, 1), np.inf), np.zeros((n, 20), np.int64),
                rng.integers(0, 128, (n, 0))]
    for p in payloads:
        frame, sizes = wire.encode_batch(wire.REPORT, run, rnd, agents, p)
        ref, ref_sizes = reference(wire.REPORT, run, rnd, agents, p)
        assert frame == ref
        assert sizes.tolist() == ref_sizes


def test_match_batch_reads_back_and_refuses_any_other_frame():
    rng = np.random.default_rng(1)
    agents = np.arange(100, 400)
    cases = (("int", rng.integers(0, 2, (300, 3))), ("float", rng.normal(size=(300, 2))))
    for dtype, vals in cases:
        frame, _ = wire.encode_batch(wire.REPORT, 2, 0, agents, vals)
        k = vals.shape[1]
        assert np.array_equal(wire.match_batch(frame, wire.REPORT, 2, 0, agents, k, dtype), vals)
        assert wire.match_batch(frame, wire.REPORT, 3, 0, agents, k, dtype) is None  # wrong run
        assert wire.match_batch(frame, wire.QUERY, 2, 0, agents, k, dtype) is None
        assert wire.match_batch(frame, wire.REPORT, 2, 0, agents + 1, k, dtype) is None
        assert wire.match_batch(frame[:-1], wire.REPORT, 2, 0, agents, k, dtype) is None
        # single-byte corruptions: either refused, or accepted with msgpack's own reading
        buf = bytearray(frame)
        for pos in rng.integers(0, len(buf), 300):
            bad = bytearray(buf)
            bad[pos] = (bad[pos] + 1 + rng.integers(0, 255)) % 256
            got = wire.match_batch(bytes(bad), wire.REPORT, 2, 0, agents, k, dtype)
            if got is not None:
                unpacker = msgpack.Unpacker(raw=False)
                unpacker.feed(bytes(bad))
                objs = list(unpacker)
                assert [o[4] for o in objs] == agents.tolist()
                assert all(o[:4] == [1, wire.REPORT, 2, 0] for o in objs)
                assert np.array_equal(np.array([o[5] for o in objs]), got)


def test_match_batch_refuses_non_fixint_ints():
    agents = np.arange(5)
    frame, _ = wire.encode_batch(wire.REPORT, 0, 0, agents, np.full((5, 1), 200))
    assert wire.match_batch(frame, wire.REPORT, 0, 0, agents, 1, "int") is None


@pytest.mark.parametrize("start,n", [(0, 5000), (120, 20), (250, 10), (65530, 10), (7, 1)])
def test_parse_consecutive_round_trip(start, n):
    agents = np.arange(start, start + n)
    q = (agents % 45).reshape(-1, 1)
    frame, _ = wire.encode_batch(wire.QUERY, 4, 1, agents, q)
    run, rnd, got_agents, got = wire.parse_consecutive(frame, wire.QUERY)
    assert (run, rnd) == (4, 1) and np.array_equal(got_agents, agents) and np.array_equal(got, q)
    frame, _ = wire.encode_batch(wire.QUERY, 4, 1, agents, None)
    assert wire.parse_consecutive(frame, wire.QUERY)[3] is None


def test_parse_consecutive_declines_gaps_and_other_kinds():
    agents = np.array([1, 2, 4])
    frame, _ = wire.encode_batch(wire.QUERY, 0, 0, agents, np.zeros((3, 1), np.int64))
    assert wire.parse_consecutive(frame, wire.QUERY) is None
    frame, _ = wire.encode_batch(wire.REPORT, 0, 0, np.arange(3), np.zeros((3, 1), np.int64))
    assert wire.parse_consecutive(frame, wire.QUERY) is None
    assert wire.parse_consecutive(b"\x96\x01", wire.QUERY) is None
    assert wire.parse_consecutive(b"", wire.QUERY) is None


def test_batch_sizes_match_the_encoded_envelopes():
    agents = np.unique(np.concatenate([np.array(EDGES), np.arange(120, 300)]))
    for k, dtype, payload in ((None, "int", None),
                              (3, "int", np.ones((len(agents), 3), dtype=np.int64)),
                              (2, "float", np.zeros((len(agents), 2)))):
        _, sizes = wire.encode_batch(wire.REPORT, 7, 2, agents, payload)
        assert np.array_equal(wire.batch_sizes(7, 2, agents, k, dtype), sizes)
