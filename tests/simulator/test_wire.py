"""The accelerated batch codec (``wire_numpy``) must produce and accept exactly what the reference
codec (``wire``, msgpack-python) does."""

from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ldpsim.simulator import wire, wire_numpy, wire_numpy_read

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
        frame, sizes = wire_numpy.encode_batch(wire.REPORT, run, rnd, agents, p)
        ref, ref_sizes = reference(wire.REPORT, run, rnd, agents, p)
        assert frame == ref
        assert sizes.tolist() == ref_sizes


def test_match_batch_reads_back_and_refuses_any_other_frame():
    rng = np.random.default_rng(1)
    agents = np.arange(100, 400)
    cases = (("int", rng.integers(0, 2, (300, 3))), ("float", rng.normal(size=(300, 2))))
    match = wire_numpy_read.match_batch
    for dtype, vals in cases:
        frame, _ = wire_numpy.encode_batch(wire.REPORT, 2, 0, agents, vals)
        k = vals.shape[1]
        assert np.array_equal(match(frame, wire.REPORT, 2, 0, agents, k, dtype), vals)
        assert match(frame, wire.REPORT, 3, 0, agents, k, dtype) is None  # wrong run
        assert match(frame, wire.QUERY, 2, 0, agents, k, dtype) is None
        assert match(frame, wire.REPORT, 2, 0, agents + 1, k, dtype) is None
        assert match(frame[:-1], wire.REPORT, 2, 0, agents, k, dtype) is None
        # single-byte corruptions: either refused, or accepted with msgpack's own reading
        buf = bytearray(frame)
        for pos in rng.integers(0, len(buf), 300):
            bad = bytearray(buf)
            bad[pos] = (bad[pos] + 1 + rng.integers(0, 255)) % 256
            got = match(bytes(bad), wire.REPORT, 2, 0, agents, k, dtype)
            if got is not None:
                unpacker = msgpack.Unpacker(raw=False)
                unpacker.feed(bytes(bad))
                objs = list(unpacker)
                assert [o[4] for o in objs] == agents.tolist()
                assert all(o[:4] == [1, wire.REPORT, 2, 0] for o in objs)
                assert np.array_equal(np.array([o[5] for o in objs]), got)


def test_match_batch_reads_wide_ints_and_refuses_wider_encodings():
    agents = np.arange(5)
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, np.full((5, 1), 200))
    got = wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 1, "int")
    assert got.dtype == np.int64 and got.tolist() == [[200]] * 5
    assert wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 1, "float") is None
    # 200 as a uint16 (0xcd 0x00 0xc8) instead of a uint8: the same envelopes, not canonical
    wide = frame.replace(b"\x91\xcc\xc8", b"\x91\xcd\x00\xc8")
    assert reference_read(wide)[1] == [[200]] * 5
    assert wire_numpy_read.match_batch(wide, wire.REPORT, 0, 0, agents, 1, "int") is None
    assert wire_numpy_read.parse_consecutive(wide, wire.REPORT) is None


@pytest.mark.parametrize("start,n", [(0, 5000), (120, 20), (250, 10), (65530, 10), (7, 1)])
def test_parse_consecutive_round_trip(start, n):
    agents = np.arange(start, start + n)
    q = (agents % 45).reshape(-1, 1)
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 4, 1, agents, q)
    run, rnd, got_agents, got = wire_numpy_read.parse_consecutive(frame, wire.QUERY)
    assert (run, rnd) == (4, 1) and np.array_equal(got_agents, agents) and np.array_equal(got, q)
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 4, 1, agents, None)
    assert wire_numpy_read.parse_consecutive(frame, wire.QUERY)[3] is None


def test_parse_consecutive_declines_gaps_and_other_kinds():
    agents = np.array([1, 2, 4])
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 0, agents, np.zeros((3, 1), np.int64))
    assert wire_numpy_read.parse_consecutive(frame, wire.QUERY) is None
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, 0, np.arange(3), np.zeros((3, 1), np.int64))
    assert wire_numpy_read.parse_consecutive(frame, wire.QUERY) is None
    assert wire_numpy_read.parse_consecutive(b"\x96\x01", wire.QUERY) is None
    assert wire_numpy_read.parse_consecutive(b"", wire.QUERY) is None


def test_batch_sizes_match_the_encoded_envelopes():
    agents = np.unique(np.concatenate([np.array(EDGES), np.arange(120, 300)]))
    for k, dtype, payload in ((None, "int", None),
                              (3, "int", np.ones((len(agents), 3), dtype=np.int64)),
                              (2, "float", np.zeros((len(agents), 2)))):
        _, sizes = wire_numpy.encode_batch(wire.REPORT, 7, 2, agents, payload)
        assert np.array_equal(wire_numpy.batch_sizes(7, 2, agents, k, dtype), sizes)


def reference_read(frame):
    """The reference reader's view of a frame: every envelope checked, as (fields, payload)."""
    envs = [wire.check_envelope(obj, size) for obj, size in wire.iter_frame(frame, 1 << 30)]
    return [(e.kind, e.run, e.round, e.agent) for e in envs], [e.payload for e in envs]


@pytest.mark.parametrize("payload", [None, np.zeros((0, 3), np.int64), np.zeros((0, 2))])
def test_empty_batch_is_the_empty_frame(payload):
    agents = np.zeros(0, dtype=np.int64)
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 1, 0, agents, payload)
    assert frame == b"" == reference(wire.REPORT, 1, 0, agents, payload)[0]
    assert sizes.tolist() == []
    assert wire_numpy.batch_sizes(1, 0, agents, None, "int").tolist() == []
    # nothing to read fast: the reference reader handles (and here accepts) the empty frame
    assert wire_numpy_read.match_batch(frame, wire.REPORT, 1, 0, agents, None, "int") is None
    assert wire_numpy_read.parse_consecutive(frame, wire.REPORT) is None
    assert wire_numpy_read.first_agent(frame, wire.REPORT) is None
    assert reference_read(frame) == ([], [])


@pytest.mark.parametrize("agent", EDGES + [e + 1 for e in EDGES] + [e - 1 for e in EDGES if e])
@pytest.mark.parametrize("dtype", ["int", "float", None])
def test_one_agent_at_every_width_boundary(agent, dtype):
    agents = np.array([agent])
    payload = {"int": np.array([[0, 127]]), "float": np.array([[-0.0, 1e300]]), None: None}[dtype]
    k = None if payload is None else 2
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 3, 2, agents, payload)
    ref, ref_sizes = reference(wire.REPORT, 3, 2, agents, payload)
    assert frame == ref and sizes.tolist() == ref_sizes
    assert wire_numpy_read.first_agent(frame, wire.REPORT) == (3, 2, agent)
    got = wire_numpy_read.match_batch(frame, wire.REPORT, 3, 2, agents, k, dtype or "int")
    assert got.shape == (1, k or 0)
    if payload is not None:
        assert np.array_equal(got, payload) and got.tobytes() == payload.astype(got.dtype).tobytes()
    run, rnd, ids, rows = wire_numpy_read.parse_consecutive(frame, wire.REPORT, dtype or "int")
    assert (run, rnd, ids.tolist()) == (3, 2, [agent])
    assert rows is None if payload is None else np.array_equal(rows, payload)


@pytest.mark.parametrize("start", [120, 250, 65530, 2**32 - 5])
@pytest.mark.parametrize("dtype", ["int", "float"])
def test_consecutive_batches_across_a_width_boundary_read_back(start, dtype):
    agents = np.arange(start, start + 10)
    payload = (agents % 100).reshape(-1, 1) if dtype == "int" else np.sqrt(agents)[:, None]
    frame, sizes = wire_numpy.encode_batch(wire.QUERY, 0, 0, agents, payload)
    assert frame == reference(wire.QUERY, 0, 0, agents, payload)[0]
    assert len(set(sizes.tolist())) == 2  # two id widths in one frame
    run, rnd, ids, rows = wire_numpy_read.parse_consecutive(frame, wire.QUERY, dtype)
    assert np.array_equal(ids, agents) and np.array_equal(rows, payload)
    assert np.array_equal(wire_numpy_read.match_batch(frame, wire.QUERY, 0, 0, agents, 1, dtype),
                          payload)


def test_match_batch_reads_nil_payloads():
    agents = np.array(EDGES)
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 5, agents, None)
    got = wire_numpy_read.match_batch(frame, wire.QUERY, 0, 5, agents, None, "int")
    assert got.shape == (len(agents), 0)
    # [] is not nil
    assert wire_numpy_read.match_batch(frame, wire.QUERY, 0, 5, agents, 0, "int") is None


def _pack_wide(fmt, value):
    """A msgpack int in a wider encoding than the shortest (valid msgpack, not canonical)."""
    return {"u16": b"\xcd", "u32": b"\xce", "i64": b"\xd3"}[fmt] + struct.pack(
        {"u16": ">H", "u32": ">I", "i64": ">q"}[fmt], value)


@pytest.mark.parametrize("name,frame", [
    # the agent id 5 as a uint16 instead of a fixint
    ("wide agent", b"\x96\x01\x03\x00\x00" + _pack_wide("u16", 5) + b"\x91\x01"),
    # the run as an int64
    ("wide run", b"\x96\x01\x03" + _pack_wide("i64", 0) + b"\x00\x05\x91\x01"),
    # the payload value 1 as a uint32
    ("wide value", b"\x96\x01\x03\x00\x00\x05\x91" + _pack_wide("u32", 1)),
    # the payload's array header as an array16 instead of a fixarray
    ("wide header", b"\x96\x01\x03\x00\x00\x05\xdc\x00\x01\x01"),
])
def test_valid_but_non_canonical_frames_go_to_the_reference_reader(name, frame):
    """msgpack allows wider encodings than msgpack-python writes: such a frame means the same
    envelope, the fast reader refuses it (None) and the reference reader reads it."""
    agents = np.array([5])
    fields, payloads = reference_read(frame)
    assert fields == [(wire.REPORT, 0, 0, 5)] and payloads == [[1]]
    assert wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 1, "int") is None
    assert wire_numpy_read.parse_consecutive(frame, wire.REPORT) is None


def test_float32_payloads_are_not_read_as_float64():
    frame = msgpack.packb([1, wire.REPORT, 0, 0, 5, [1.5]], use_single_float=True)
    assert reference_read(frame)[1] == [[1.5]]
    assert wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, np.array([5]), 1, "float") is None
    assert wire_numpy_read.parse_consecutive(frame, wire.REPORT, "float") is None


# ------------------------------------------------------------------ property: any batch

_NEAR_EDGES = st.sampled_from(EDGES).flatmap(
    lambda e: st.integers(max(-1, e - 3), min(2**62, e + 3)))
_PAYLOADS = ("nil", "fixint", "bool", "wide int", "float64", "float32", "uint8")


@st.composite
def batches(draw):
    """(run, round, agents, payload kind, payload): ids near msgpack's width boundaries, in any
    order (the fallback), sorted or consecutive (the canonical cases), every payload layout."""
    shape = draw(st.sampled_from(["any order", "sorted", "consecutive"]))
    if shape == "consecutive":  # a round asking every agent of a block
        first = draw(_NEAR_EDGES.filter(lambda a: a < 2**62 - 40))
        agents = list(range(first, first + draw(st.integers(0, 40))))
    else:
        agents = draw(st.lists(_NEAR_EDGES | st.integers(0, 300), max_size=40, unique=True))
        agents = sorted(agents) if shape == "sorted" else agents
    n, k = len(agents), draw(st.integers(0, 20))
    kind = draw(st.sampled_from(_PAYLOADS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    payload = {"nil": lambda: None,
               "fixint": lambda: rng.integers(0, 128, (n, k)),
               "bool": lambda: rng.integers(0, 2, (n, k)).astype(bool),
               "wide int": lambda: rng.integers(-2**40, 2**40, (n, k)),
               "float64": lambda: rng.normal(0, 1e6, (n, k)),
               "float32": lambda: rng.normal(size=(n, k)).astype(np.float32),
               "uint8": lambda: rng.integers(0, 256, (n, k)).astype(np.uint8)}[kind]()
    run = draw(st.sampled_from([0, 1, 127, 128, 70000, 2**33]))
    rnd = draw(st.sampled_from([-1, 0, 5, 300]))
    return run, rnd, np.array(agents, dtype=np.int64), kind, payload


@settings(derandomize=True, deadline=None, database=None, max_examples=300,
          suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_accelerated_codec_agrees_with_the_reference(batch):
    run, rnd, agents, kind, payload = batch
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, run, rnd, agents, payload)
    ref, ref_sizes = reference(wire.REPORT, run, rnd, agents, payload)
    assert frame == ref and sizes.tolist() == ref_sizes

    n = len(agents)
    k = None if payload is None else payload.shape[1]
    canonical = n > 0 and agents[0] >= 0 and bool((np.diff(agents) > 0).all())
    dtype = "float" if kind in ("float64", "float32") else "int"
    if payload is not None and n:
        assert np.array_equal(wire_numpy.minimal_report_sizes(run, rnd, agents, payload, dtype),
                              ref_sizes)
    narrowest = kind in ("nil", "fixint", "bool", "float64", "float32") or (  # or fixints
        payload.size == 0 or (payload.min() >= -32 and payload.max() < 128))
    if canonical:  # match_batch's callers pass the sorted ids they sent
        got = wire_numpy_read.match_batch(frame, wire.REPORT, run, rnd, agents, k, dtype)
        if narrowest:
            assert np.array_equal(wire_numpy.batch_sizes(run, rnd, agents, k, dtype), sizes)
        # every int width and float: read back, as what the reference reads
        assert got is not None and got.shape == (n, k or 0)
        if payload is not None:
            assert got.tobytes() == payload.astype(got.dtype).tobytes()
        assert wire_numpy_read.match_batch(frame, wire.REPORT, run + 1, rnd, agents, k,
                                           dtype) is None
        assert wire_numpy_read.match_batch(frame, wire.QUERY, run, rnd, agents, k,
                                           dtype) is None
    fast = wire_numpy_read.parse_consecutive(frame, wire.REPORT, dtype)
    if fast is not None:  # whatever the fast reader accepts, it reads as the reference does
        fields, payloads = reference_read(frame)
        f_run, f_rnd, f_ids, f_rows = fast
        assert fields == [(wire.REPORT, f_run, f_rnd, a) for a in f_ids.tolist()]
        assert (f_rows is None) == (payloads[0] is None)
        if f_rows is not None:
            assert f_rows.tolist() == payloads
    elif canonical and agents[-1] - agents[0] == n - 1:  # the case parse_consecutive is for
        pytest.fail("a canonical batch of consecutive agents was refused")

