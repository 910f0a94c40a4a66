"""The accelerated batch codec (``wire_numpy``) must produce and accept exactly what the reference
codec (``wire``, msgpack-python) does: both of its implementations, the compiled one
(``simulator/codec/_wirec.c``, where the install built it) and the numpy one, run every test here.
"""

from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ldpsim.simulator.codec import wire, wire_numpy, wire_numpy_read

from tests.conftest import each_implementation

EDGES = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**62]


codec = each_implementation(wire_numpy.CODEC)  # every test with each batch codec


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


def test_parse_increasing_reads_a_batch_with_gaps_as_msgpack_does():
    """A batch without its offline agents: ids with gaps across every msgpack width, each
    payload kind; the ids and payloads read are those of msgpack-python's decoding."""
    rng = np.random.default_rng(11)
    agents = np.unique(np.concatenate([np.array(EDGES), rng.integers(0, 2**40, 300)]))
    n = len(agents)
    for p in (None, rng.integers(0, 128, (n, 3)), rng.integers(-2**40, 2**40, (n, 2)),
              rng.normal(size=(n, 4)), rng.integers(0, 128, (n, 0))):
        frame, _ = wire_numpy.encode_batch(wire.QUERY, 9, 2, agents, p)
        got = wire_numpy_read.parse_increasing(frame, wire.QUERY)
        if wire_numpy.CODEC.module is None:  # only the compiled reader reads them fast
            assert got is None
            continue
        heads, payloads = reference_read(frame)
        run, rnd, ids, values = got
        assert (run, rnd) == (9, 2) and ids.tolist() == [h[3] for h in heads]
        if p is None:
            assert values is None
        else:
            assert values.dtype == np.asarray(payloads).dtype
            assert np.array_equal(values, np.asarray(payloads).reshape(n, -1))


def test_parse_increasing_refuses_ids_out_of_order_repeated_or_negative_and_other_frames():
    q = np.zeros((3, 1), np.int64)
    read = wire_numpy_read.parse_increasing
    if wire_numpy.CODEC.module is None:  # only the compiled reader reads them fast
        frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 0, np.array([1, 4, 9]), q)
        assert read(frame, wire.QUERY) is None
        return
    for ids in ([5, 3, 9], [5, 5, 9], [-1, 3, 9]):
        frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 0, np.array(ids), q)
        assert read(frame, wire.QUERY) is None
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, 0, np.array([1, 4, 9]), q)
    assert read(frame, wire.QUERY)[2].tolist() == [1, 4, 9]
    assert read(frame[:-1], wire.QUERY) is None
    assert read(frame + frame[:7], wire.QUERY) is None
    assert read(frame, wire.REPORT) is None
    other, _ = wire_numpy.encode_batch(wire.QUERY, 1, 0, np.array([12]), q[:1])
    assert read(frame + other, wire.QUERY) is None  # another run's envelope after them
    assert read(b"", wire.QUERY) is None


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


# ------------------------------------------------------------------ every int width, floats


def exact_reference(kind, run, rnd, agents, payload):
    """The reference codec's frame for these rows as numpy gives them to Python (``tolist``:
    Python ints, uint64 ones above 2^63 included, or floats; bools as 0/1)."""
    rows = np.asarray(payload)
    rows = rows.astype(np.int64) if rows.dtype.kind == "b" else rows
    bufs, sizes = wire.encode_many(kind, run, rnd, list(map(int, agents)), rows.tolist())
    return b"".join(bufs), sizes

INT64_EDGES = [-2**63, -2**63 + 1, -2**31 - 1, -2**31, -2**15 - 1, -2**15, -129, -128, -33, -32,
               -1, 0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 2**31, 2**32 - 1, 2**32,
               2**62, 2**63 - 2, 2**63 - 1]
_INT_FORMATS = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
                0xD2: ">i", 0xD3: ">q"}


def _encodings(value):
    """Every msgpack encoding of an int: (bytes, whether it is the one msgpack-python writes)."""
    out = [(msgpack.packb(value), True)]
    for marker, fmt in _INT_FORMATS.items():
        try:
            raw = bytes([marker]) + struct.pack(fmt, value)
        except struct.error:
            continue
        if raw != out[0][0]:
            out.append((raw, False))
    return out


@pytest.mark.parametrize("value", sorted({e + d for e in INT64_EDGES for d in (-1, 0, 1)
                                          if -2**63 <= e + d < 2**63}))
def test_every_int_encoding_is_read_in_its_shortest_form_only(value):
    """A value at every width edge, in each of msgpack's int encodings that can hold it: the
    fast readers read the one msgpack-python writes and refuse the others (which the reference
    reader reads as the same value)."""
    for raw, shortest in _encodings(value):
        frame = b"\x96\x01\x03\x00\x00\x05\x92" + raw + b"\x07"
        assert reference_read(frame)[1] == [[value, 7]]
        got = wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, np.array([5]), 2, "int")
        fast = wire_numpy_read.parse_consecutive(frame, wire.REPORT)
        if shortest:
            assert got.tolist() == [[value, 7]] and fast[3].tolist() == [[value, 7]]
            assert frame == wire_numpy.encode_batch(wire.REPORT, 0, 0, [5],
                                                    np.array([[value, 7]]))[0]
        else:
            assert got is None and fast is None


def test_ints_beyond_int64_are_written_but_never_read_fast():
    """uint64 values above 2^63 - 1 are written as msgpack-python does; no int schema can hold
    them, so the fast readers leave them to the reference reader (which rejects them)."""
    payload = np.array([[2**63, 1], [2**64 - 1, 2]], dtype=np.uint64)
    agents = np.array([3, 4])
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, payload)
    assert (frame, sizes.tolist()) == exact_reference(wire.REPORT, 0, 0, agents, payload)
    assert wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 2, "int") is None
    assert wire_numpy_read.parse_consecutive(frame, wire.REPORT) is None


def test_olh_seed_value_pairs_and_large_domains_stay_on_the_fast_path():
    """The payloads that used to fall back: OLH's (32-bit seed, value) pairs, GRR over 720
    values, Harmony's (index, sign) over 1024, rows of mixed signed widths."""
    rng = np.random.default_rng(5)
    agents = np.arange(65000, 70000)  # ids crossing 2^16
    n = len(agents)
    payloads = [np.c_[rng.integers(0, 2**32, n), rng.integers(0, 4, n)],
                rng.integers(0, 720, (n, 1)), np.c_[rng.integers(0, 1024, n),
                                                    rng.integers(0, 2, n)],
                rng.integers(-2**40, 2**40, (n, 12)) >> rng.integers(0, 40, (n, 12))]
    for p in payloads:
        frame, sizes = wire_numpy.encode_batch(wire.REPORT, 1, 2, agents, p)
        assert (frame, sizes.tolist()) == exact_reference(wire.REPORT, 1, 2, agents, p)
        assert np.array_equal(wire_numpy_read.match_batch(frame, wire.REPORT, 1, 2, agents,
                                                          p.shape[1], "int"), p)
        run, rnd, ids, rows = wire_numpy_read.parse_consecutive(frame, wire.REPORT)
        assert (run, rnd) == (1, 2) and np.array_equal(ids, agents) and np.array_equal(rows, p)
        cut = int(sizes[:1234].sum())  # a pool's reply split in two frames
        values, got_sizes = wire_numpy_read.match_prefix(frame[:cut], wire.REPORT, 1, 2,
                                                         agents, p.shape[1], "int")
        assert np.array_equal(values, p[:1234]) and np.array_equal(got_sizes, sizes[:1234])
        values, got_sizes = wire_numpy_read.match_prefix(frame[cut:], wire.REPORT, 1, 2,
                                                         agents[1234:], p.shape[1], "int")
        assert np.array_equal(values, p[1234:]) and np.array_equal(got_sizes, sizes[1234:])


def test_a_payload_that_looks_like_an_envelope_head_is_read_as_a_payload():
    """Varying widths make the reader find envelopes by their head; payload bytes that spell
    a head and an agent id of the batch must not cut the frame there."""
    agents = np.arange(40, 44)
    # 0x96 0x01 0x03 0x00 0x00 0x29 (a head of run 0, round 0 and agent 41) inside a payload
    payload = np.array([[300, 0x96, 1, 3, 0, 0, 41], [1, 2, 3, 4, 5, 6, 7],
                        [0x96, 1, 3, 0, 0, 43, 70000], [9, 8, 7, 6, 5, 4, 3]])
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, payload)
    assert b"\x96\x01\x03\x00\x00\x29" in frame[:sizes[0]]
    assert np.array_equal(wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 7,
                                                      "int"), payload)
    assert np.array_equal(wire_numpy_read.parse_consecutive(frame, wire.REPORT)[3], payload)


def test_numpy_scalars_are_written_as_msgpack_python_writes_them():
    """What the reference packer writes for numpy scalars (the ``wire.pack_ext`` hook, and
    np.float64 being a float) is what the batch writer writes for array values (bools aside:
    a bool payload travels as the ints 0/1, see ``encode_batch``)."""
    for value in (np.float64(-0.0), np.float32(1.5), np.float16(np.inf), np.int8(-5),
                  np.uint64(2**64 - 1), np.int64(-2**63), np.uint16(300), np.float64(np.nan)):
        payload = np.array([[value]])
        expected = wire.encode(wire.REPORT, 0, 0, 9, [value])
        assert wire_numpy.encode_batch(wire.REPORT, 0, 0, [9], payload)[0] == expected


# property: any schema's reports and queries

_SPECIAL_FLOATS = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                   1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.5, 1e-300]
_INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _int_values(rng, low, high, shape):
    """Values in [low, high] of every width the bounds allow: the width edges inside them,
    uniform draws over the whole range, and draws near a random edge."""
    edges = np.array([e for e in INT64_EDGES if low <= e <= high] + [low, high], dtype=np.int64)
    near = np.clip(rng.choice(edges, shape) + rng.integers(-40, 41, shape), low, high)
    spread = rng.integers(low, high, shape, endpoint=True, dtype=np.int64)
    pick = rng.integers(0, 3, shape)
    return np.where(pick == 0, rng.choice(edges, shape), np.where(pick == 1, spread, near))


def _float_values(rng, shape):
    special = rng.choice(np.array(_SPECIAL_FLOATS), shape)
    scaled = rng.normal(size=shape) * 10.0 ** rng.integers(-300, 300, shape)
    bits = rng.integers(0, 2**64, shape, dtype=np.uint64, endpoint=False).view(np.float64)
    pick = rng.integers(0, 3, shape)  # bits: any float64 pattern, NaN payloads included
    return np.where(pick == 0, special, np.where(pick == 1, scaled, bits))


@st.composite
def schema_batches(draw):
    """(run, round, agents, dtype, payload): a random ReportSchema's reports (ints within
    random bounds across every width, signed or not, in the smallest numpy dtype or a wider
    one; or floats, as float64 or float32), for sorted ids crossing width boundaries, or
    consecutive ones."""
    ids = _NEAR_EDGES.filter(lambda a: a >= 0)  # agents' ids: [0, n)
    if draw(st.booleans()):
        first = draw(ids.filter(lambda a: a < 2**62 - 40))
        agents = np.arange(first, first + draw(st.integers(1, 40)), dtype=np.int64)
    else:
        agents = np.array(sorted(draw(st.lists(ids | st.integers(0, 300), min_size=1,
                                               max_size=40, unique=True))), dtype=np.int64)
    n, k = len(agents), draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    if draw(st.booleans()):
        low, high = sorted(draw(st.lists(st.sampled_from(INT64_EDGES) | st.integers(-2**63,
                                                                                    2**63 - 1),
                                         min_size=2, max_size=2)))
        values = _int_values(rng, low, high, (n, k))
        fits = [d for d in _INT_DTYPES if np.iinfo(d).min <= low and high <= np.iinfo(d).max]
        payload, dtype = values.astype(draw(st.sampled_from(fits))), "int"
    else:
        values = _float_values(rng, (n, k))
        with np.errstate(over="ignore", invalid="ignore"):  # inf in float32
            payload = values.astype(draw(st.sampled_from([np.float64, np.float64,
                                                          np.float32])))
        dtype = "float"
    run = draw(st.sampled_from([0, 1, 127, 128, 70000, 2**33]))
    rnd = draw(st.sampled_from([-1, 0, 5, 300]))
    return run, rnd, agents, dtype, payload


def _read_as_reference(frame, run, rnd, agents, dtype, values, sizes):
    """Assert the reference reader reads ``frame`` as these envelopes (values compared as
    bytes, so that NaNs compare too, and as the types an int or float schema accepts)."""
    envs = [(wire.check_envelope(obj, size)) for obj, size in wire.iter_frame(frame, 1 << 30)]
    assert [(e.kind, e.run, e.round, e.agent) for e in envs] == [
        (wire.REPORT, run, rnd, a) for a in agents.tolist()]
    assert [e.size for e in envs] == sizes.tolist()
    kinds = int if dtype == "int" else float
    assert all(type(v) is kinds for e in envs for v in e.payload)
    ref = np.array([e.payload for e in envs], dtype=values.dtype)
    assert ref.tobytes() == values.tobytes()


@settings(derandomize=True, deadline=None, database=None, max_examples=400,
          suppress_health_check=[HealthCheck.too_slow])
@given(schema_batches())
def test_any_schema_batch_is_written_as_msgpack_and_read_back(batch):
    run, rnd, agents, dtype, payload = batch
    n, k = payload.shape
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, run, rnd, agents, payload)
    ref, ref_sizes = exact_reference(wire.REPORT, run, rnd, agents, payload)
    assert frame == ref and sizes.tolist() == ref_sizes
    if dtype == "int" and payload.dtype == np.uint64 and payload.max() >= 2**63:
        assert wire_numpy_read.match_batch(frame, wire.REPORT, run, rnd, agents, k,
                                           dtype) is None
        return
    expect = payload.astype(np.int64 if dtype == "int" else np.float64)
    got = wire_numpy_read.match_batch(frame, wire.REPORT, run, rnd, agents, k, dtype)
    assert got is not None and got.dtype == expect.dtype and got.tobytes() == expect.tobytes()
    _read_as_reference(frame, run, rnd, agents, dtype, got, sizes)
    # a prefix (a pool's reply split in frames), read against the whole batch sent
    j = 1 + (n - 1) // 2
    values, got_sizes = wire_numpy_read.match_prefix(frame[:int(sizes[:j].sum())], wire.REPORT,
                                                     run, rnd, agents, k, dtype)
    assert values.tobytes() == expect[:j].tobytes() and got_sizes.tolist() == ref_sizes[:j]
    other = "float" if dtype == "int" else "int"
    assert wire_numpy_read.match_batch(frame, wire.REPORT, run, rnd, agents, k, other) is None
    assert wire_numpy_read.match_batch(frame, wire.REPORT, run, rnd, agents, k + 1,
                                       dtype) is None
    for kind in (None, dtype):  # the pool's reader: dtype from the frame, or given
        fast = wire_numpy_read.parse_consecutive(frame, wire.REPORT, kind)
        if agents[-1] - agents[0] == n - 1:
            f_run, f_rnd, f_ids, f_rows = fast
            assert (f_run, f_rnd) == (run, rnd) and np.array_equal(f_ids, agents)
            assert f_rows.dtype == expect.dtype and f_rows.tobytes() == expect.tobytes()
        else:
            assert fast is None


_MUTATIONS = ("flip", "insert", "delete", "truncate", "widen", "swap", "duplicate", "other type",
              "append", "drop first")


def _widen(frame, sizes):
    """One envelope's last value re-encoded in a wider int encoding (same value), or None."""
    ends = np.cumsum(sizes).tolist()
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        obj = next(iter(wire.iter_frame(frame[start:end], 1 << 30)))[0]
        value = obj[5][-1]
        if type(value) is not int:
            continue
        wider = [raw for raw, shortest in _encodings(value) if not shortest]
        if wider:
            tail = msgpack.packb(value)
            assert frame[end - len(tail):end] == tail
            return frame[:end - len(tail)] + wider[-1] + frame[end:]
    return None


@settings(derandomize=True, deadline=None, database=None, max_examples=400,
          suppress_health_check=[HealthCheck.too_slow])
@given(schema_batches(), st.sampled_from(_MUTATIONS), st.integers(0, 10**6),
       st.integers(0, 255))
def test_altered_frames_are_refused_or_read_as_the_reference_reads_them(batch, mutation, pos,
                                                                        byte):
    """Whatever a frame becomes, the fast readers either decline (None) or read exactly what
    the reference reader reads; a frame in a non-canonical encoding is always declined."""
    run, rnd, agents, dtype, payload = batch
    n, k = payload.shape
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, run, rnd, agents, payload)
    b = bytearray(frame)
    if mutation == "flip":
        b[pos % len(b)] = byte
    elif mutation == "insert":
        b.insert(pos % (len(b) + 1), byte)
    elif mutation == "delete":
        del b[pos % len(b)]
    elif mutation == "truncate":
        del b[pos % len(b):]
    elif mutation == "widen":
        wide = _widen(frame, sizes)
        if wide is None:
            return
        b = bytearray(wide)
    elif mutation == "swap" and n > 1:  # two envelopes in the other order
        i = pos % (n - 1)
        ends = np.cumsum(sizes).tolist()
        s0, e0, e1 = ([0, *ends][i]), ends[i], ends[i + 1]
        b = bytearray(frame[:s0] + frame[e0:e1] + frame[s0:e0] + frame[e1:])
    elif mutation == "duplicate":
        b = bytearray(frame + frame)
    elif mutation == "other type":  # one value as a float in an int batch, or an int in floats
        obj = [list(o) for o, _ in wire.iter_frame(frame, 1 << 30)]
        i = pos % n
        v = obj[i][5][0]
        obj[i][5][0] = float(v) if dtype == "int" else 1
        b = bytearray(b"".join(wire.encode(*o[1:]) for o in obj))
    elif mutation == "append":  # another message after the reports
        b += wire.encode(wire.HELLO, run, -1, -1, {"pool": 0})
    elif mutation == "drop first":
        del b[:int(sizes[0])]
    frame = bytes(b)
    got = wire_numpy_read.match_prefix(frame, wire.REPORT, run, rnd, agents, k, dtype)
    if mutation in ("widen", "other type", "append"):
        assert got is None
    if got is not None:
        values, got_sizes = got
        _read_as_reference(frame, run, rnd, agents[:len(values)], dtype, values, got_sizes)
        assert int(got_sizes.sum()) == len(frame)
    fast = wire_numpy_read.parse_consecutive(frame, wire.REPORT)  # any dtype: from the frame
    if mutation in ("widen", "append"):
        assert fast is None
    if fast is not None:
        f_run, f_rnd, f_ids, f_rows = fast
        assert np.array_equal(f_ids, np.arange(f_ids[0], f_ids[0] + len(f_ids)))
        f_dtype = "float" if f_rows is not None and f_rows.dtype == np.float64 else "int"
        if f_rows is not None:
            envs = list(wire.iter_frame(frame, 1 << 30))
            _read_as_reference(frame, f_run, f_rnd, f_ids, f_dtype, f_rows,
                               np.array([s for _, s in envs]))


@pytest.mark.parametrize("start", [5, 70, 200, 70_000, 2**33])
@pytest.mark.parametrize("dtype", ["int", "float", "nil"])
def test_every_byte_of_a_fixed_stride_batch_altered_is_refused_or_read_as_the_reference(
        start, dtype):
    """The usual batch (every envelope as long as the first: one id width, one-byte ints or
    float64s) has a fixed-offset reader of its own; whichever byte of it changes, to whatever
    value, the readers decline or read exactly what the reference reads."""
    agents = np.arange(start, start + 6, dtype=np.int64)
    k = None if dtype == "nil" else 2
    payload = None if k is None else (np.arange(12).reshape(6, 2) * 11 % 128).astype(
        np.float64 if dtype == "float" else np.int64)
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 3, 1, agents, payload)
    kind = "float" if dtype == "float" else "int"
    got = wire_numpy_read.match_prefix(frame, wire.REPORT, 3, 1, agents, k, kind)
    assert got is not None and got[1].tolist() == sizes.tolist()
    for pos in range(len(frame)):
        for byte in {0x00, 0x05, 0x7f, 0x80, 0xc0, 0xcb, 0xcc, 0xce, 0xff, frame[pos] ^ 1}:
            b = bytearray(frame)
            b[pos] = byte
            got = wire_numpy_read.match_prefix(bytes(b), wire.REPORT, 3, 1, agents, k, kind)
            if got is None:
                continue
            values, got_sizes = got
            assert int(got_sizes.sum()) == len(b)
            if k is not None:
                _read_as_reference(bytes(b), 3, 1, agents[:len(values)], kind, values,
                                   got_sizes)
                continue
            envs = [wire.check_envelope(o, size) for o, size in wire.iter_frame(bytes(b), 1 << 30)]
            assert [(e.kind, e.run, e.round, e.agent, e.payload, e.size) for e in envs] == [
                (wire.REPORT, 3, 1, a, None, z)
                for a, z in zip(agents.tolist(), got_sizes.tolist(), strict=False)]


def _seed_pairs(rng, n):
    """OLH-like reports: a uint32 hash seed (above the uint16 range) and a small value, plus a
    column of int32 negatives."""
    return np.stack([rng.integers(2**16, 2**32, n), rng.integers(-32, 40, n),
                     rng.integers(-2**31, -2**15 - 1, n)], axis=1)


@pytest.mark.parametrize("start", [0, 100, 65500, 2**32 - 30])
def test_ints_of_one_width_per_column_are_read_as_a_matrix(start):
    rng = np.random.default_rng(start)
    agents = np.arange(start, start + 300)  # crosses an id width at 128, 256, 65536, 2^32
    pairs = _seed_pairs(rng, 300)
    frame, sizes = wire_numpy.encode_batch(wire.REPORT, 2, 1, agents, pairs)
    head = np.frombuffer(wire_numpy.head_bytes(wire.REPORT, 2, 1), dtype=np.uint8)
    values, got_sizes = wire_numpy_read._read_uniform(frame, head, agents, 3)
    assert np.array_equal(values, pairs) and np.array_equal(got_sizes, sizes)
    assert np.array_equal(wire_numpy_read.match_batch(frame, wire.REPORT, 2, 1, agents, 3,
                                                      "int"), pairs)
    j = 123  # a pool's reply split in frames: the first j envelopes
    values, _ = wire_numpy_read._read_uniform(frame[:int(sizes[:j].sum())], head, agents, 3)
    assert np.array_equal(values, pairs[:j])


def test_a_batch_with_one_narrower_int_is_left_to_the_head_search_and_still_read():
    rng = np.random.default_rng(3)
    agents = np.arange(1000, 1400)
    pairs = _seed_pairs(rng, 400)
    pairs[250, 0] = 4000  # a seed that fits a uint16: its envelope is 2 bytes shorter
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, pairs)
    head = np.frombuffer(wire_numpy.head_bytes(wire.REPORT, 0, 0), dtype=np.uint8)
    assert wire_numpy_read._read_uniform(frame, head, agents, 3) is None
    assert np.array_equal(wire_numpy_read.match_batch(frame, wire.REPORT, 0, 0, agents, 3,
                                                      "int"), pairs)


@pytest.mark.parametrize("value,wide", [
    (4000, b"\xce\x00\x00\x0f\xa0"),  # a uint16's value in a uint32, like its neighbours
    (2**63, b"\xcf\x80\x00\x00\x00\x00\x00\x00\x00"),  # beyond int64
])
def test_uniform_markers_with_a_value_outside_their_range_are_refused(value, wide):
    rng = np.random.default_rng(4)
    agents = np.arange(50)
    pairs = _seed_pairs(rng, 50)[:, :1]
    if value >= 2**63:  # every seed a uint64, so that the markers stay uniform
        pairs = rng.integers(2**32, 2**62, (50, 1))
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, pairs)
    marker = b"\xcf" if value >= 2**63 else b"\xce"
    first = frame.index(b"\x91" + marker, frame.index(b"\x91" + marker) + 1)  # envelope 1's
    bad = frame[:first + 1] + wide + frame[first + 1 + len(wide):]
    assert len(bad) == len(frame)
    if value < 2**63:  # the reference reader reads it, but it is not msgpack's own encoding
        assert reference_read(bad)[1][1] == [value]
    head = np.frombuffer(wire_numpy.head_bytes(wire.REPORT, 0, 0), dtype=np.uint8)
    assert wire_numpy_read._read_uniform(bad, head, agents, 1) is None
    assert wire_numpy_read.match_batch(bad, wire.REPORT, 0, 0, agents, 1, "int") is None


# ------------------------------------------------------------------ the compiled codec's edges


def test_the_compiled_codec_refuses_buffers_too_short_for_its_arguments(codec):
    if codec != "compiled":
        pytest.skip("the compiled codec's own arguments")
    c = wire_numpy.CODEC.module
    head = wire_numpy.head_bytes(wire.REPORT, 0, 0)
    agents = np.arange(4, dtype=np.int64)
    with pytest.raises(ValueError, match="values"):  # 4 rows of 2 ints need 64 bytes
        c.encode(head, agents, np.zeros(3, np.int64), 2, 1, np.empty(4, np.int64))
    with pytest.raises(ValueError, match="sizes"):
        c.encode(head, agents, np.zeros((4, 2), np.int64), 2, 1, np.empty(3, np.int64))
    with pytest.raises(ValueError, match="mode"):
        c.encode(head, agents, np.zeros((4, 2), np.int64), 2, 7, np.empty(4, np.int64))
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, 0, agents, np.ones((4, 2), np.int64))
    with pytest.raises(ValueError, match="values"):
        c.read(frame, head, agents, 2, False, np.empty(7, np.int64), np.empty(4, np.int64))
    with pytest.raises(ValueError, match="sizes"):
        c.read(frame, head, agents, 2, False, np.empty((4, 2), np.int64), np.empty(2, np.int64))
    with pytest.raises(BufferError):  # a read-only output
        c.read(frame, head, agents, 2, False, b"\0" * 64, np.empty(4, np.int64))
    values, sizes = np.empty((4, 2), np.int64), np.empty(4, np.int64)
    assert c.read(frame, head, agents, 2, False, values, sizes) == 4
    assert values.tolist() == [[1, 1]] * 4


@settings(derandomize=True, deadline=None, database=None, max_examples=500,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(1, 40), st.sampled_from([None, 0, 1, 3, 20]),
       st.sampled_from(["int", "float"]))
def test_any_bytes_are_refused_or_read_as_the_reference_reads_them(junk, n, k, dtype):
    """Arbitrary bytes after a valid first envelope's head: never a crash, and whatever the
    batch reader accepts is what the reference reader reads."""
    head = wire_numpy.head_bytes(wire.REPORT, 0, 0)
    agents = np.arange(n, dtype=np.int64)
    for frame in (junk, head + junk, head + b"\x00" + junk):
        got = wire_numpy_read.match_prefix(frame, wire.REPORT, 0, 0, agents, k, dtype)
        if got is None:
            continue
        values, sizes = got
        fields, payloads = reference_read(frame)
        assert fields == [(wire.REPORT, 0, 0, a) for a in range(len(sizes))]
        assert int(sizes.sum()) == len(frame)
        if k is None:
            assert payloads == [None] * len(sizes)
        else:  # compared as bytes: a NaN is equal to itself there
            ref = np.asarray(payloads, dtype=values.dtype).reshape(values.shape)
            assert values.tobytes() == ref.tobytes()


# ------------------------------------------------------------- what a frame may make us build

_BOMB = """
import resource, struct, sys
from ldpsim.simulator.codec import wire
from ldpsim.simulator.codec import wire_numpy
wire_numpy.CODEC.use(sys.argv[2])
n = 8 << 20
frames = {"flat": b"\\xdd" + struct.pack(">I", n) + b"\\x90" * n,   # 8 MB of empty arrays
          "maps": b"\\xdd" + struct.pack(">I", n) + b"\\x80" * n,   # of empty maps
          "nested": (b"\\xdd" + struct.pack(">I", 1 << 20)) * 1000 + b"\\xc0"}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    list(wire.iter_frame(frames[sys.argv[1]], 1 << 20))
    print("decoded")
except wire.WireError as e:
    print("refused:", e)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


@pytest.mark.parametrize("bomb", ["flat", "maps", "nested"])
def test_attack_a_container_bomb_is_refused_before_anything_is_built(codec, bomb):
    """8 MB of empty-array markers took the decoder to 628 MB; an array header declaring 2^20
    elements, nested 1,000 times in 5 kB, asked for gigabytes. Both are refused from their
    bytes, with every implementation, and the decoder's peak memory hardly moves."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    got = subprocess.run([sys.executable, "-c", _BOMB, bomb, codec], cwd=ROOT,
                         text=True,
                         capture_output=True, timeout=120)
    out = got.stdout.splitlines()
    assert got.returncode == 0 and out[0].startswith("refused: "), got.stderr
    if bomb != "nested":
        assert "frame refused" in out[0] and "bytes of objects per byte" in out[0]
    elif codec == "compiled":
        assert "frame refused" in out[0] and "could hold" in out[0]
    else:  # without the compiled scan, the decoder's limit: no longer than the frame
        assert "exceeds max_array_len(5001)" in out[0]
    assert float(out[1]) < 40  # MB above the interpreter's own (the frame itself: 8 MB)


def _scan_both(frame: bytes) -> tuple[int, str | None]:
    cost, why = wire.scan_frame(frame)
    built = wire_numpy.CODEC.built
    if built is not None:
        code = built.scan(frame, wire.COST_RATIO, wire.COST_BASE, wire.MAX_DEPTH)
        assert (code < 0) == (why is not None)
        if code >= 0:
            assert code == cost
    return cost, why


_objects = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats()
    | st.binary(max_size=40) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=20)
    | st.dictionaries(st.text(max_size=5), inner, max_size=8), max_leaves=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objs=st.lists(_objects, min_size=1, max_size=5), cut=st.integers(0, 64))
def test_the_compiled_scan_and_the_reference_scan_agree(objs, cut):
    """On any msgpack (and any truncation of it) the two scans give the same cost and refuse
    the same frames; a whole honest object is never refused (its cost is small)."""
    frame = b"".join(msgpack.packb(o, use_bin_type=True) for o in objs)
    cost, why = _scan_both(frame)
    assert why is None
    _scan_both(frame[:max(0, len(frame) - cut)])


def test_declared_lengths_are_checked_against_what_the_frame_holds(codec):
    assert wire.scan_frame(b"\x93\x01\x02\x03")[1] is None
    assert "declares 4 elements" in wire.scan_frame(b"\x94\x01\x02\x03")[1]
    # the elements the enclosing array still awaits count too: [[1, 2, 3, 4], x] in 6 bytes
    assert "declares 4 elements" in wire.scan_frame(b"\x92\x94\x01\x02\x03\x04")[1]
    assert wire.scan_frame(b"\x92\x94\x01\x02\x03\x04\xc0")[1] is None
    assert "declares 2 elements" in wire.scan_frame(b"\x81\x01")[1]  # a map: key and value
    deep = b"\x91" * (wire.MAX_DEPTH + 1) + b"\xc0"
    assert "nested deeper" in wire.scan_frame(deep)[1]
    for frame in (b"\x94\x01\x02\x03", deep):
        if codec == "compiled":  # without it, the decoder's own length limit is the guard
            with pytest.raises(wire.WireError, match="frame refused"):
                wire.check_frame(frame)
        with pytest.raises(wire.WireError):
            wire.unpack_all(b"\xdd\x00\x01\x00\x00\x01\x02", 1 << 20)  # 65,536 declared
    assert _scan_both(deep)[1] is not None


def test_honest_batches_pass_the_bound():
    """A batch of one envelope per agent with list payloads (what the reference reader takes
    when the batch codec cannot) costs well under the bound."""
    agents = np.arange(100_000, 150_000)
    bufs, _ = wire.encode_many(wire.REPORT, 3, 1, agents.tolist(), [[7, 300, -2]] * len(agents))
    frame = b"".join(bufs)
    cost, why = _scan_both(frame)
    assert why is None and cost < wire.COST_RATIO * len(frame)
    assert len(wire.unpack_all(frame, len(frame))) == len(agents)


@pytest.mark.parametrize("unit", [b"\xc0", b"\x01", b"\x90", b"\x80", b"\xcc\xff", b"\xa0",
                                  b"\x96\x01\x06\x03\x01\x07\xc0"])
def test_the_bound_covers_what_decoding_builds(unit, codec):
    """Issue 47: what ``unpack_all`` builds from a frame (the objects and the list that holds
    them, measured by tracemalloc) is within the scan's cost. A registered pool's frame of
    nils cost no object but one list slot per byte: the scan counted 0 bytes where decoding
    built 8 per byte (a 60 MiB frame of nils: +363 MB at the curator)."""
    import tracemalloc

    frame = unit * (4_000_000 // len(unit))
    cost, why = _scan_both(frame)
    if why is not None:  # refused before anything is built (over the bound)
        assert cost > wire.COST_RATIO * len(frame) // 2
        with pytest.raises(wire.WireError, match="frame refused"):
            wire.check_frame(frame)
        return
    tracemalloc.start()
    try:
        objs = wire.unpack_all(frame, len(frame))
        built = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(objs) == len(frame) // len(unit)
    assert built <= cost + (64 << 10), (built, cost)
