"""Ingest: the accelerated report decoder agrees with the reference reader on every input.

``ingest.decode_reports`` (canonical-batch match, then one-call decode) may decline any frame,
but whenever it answers it must answer what ``ingest.EnvelopeReader`` reads from the same
bytes; on an honest pool's frames it must answer (else the property holds vacuously); and a run
whose curator never uses it gives the same result record, bit for bit.
"""

from __future__ import annotations

import json
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ldpsim.protocols.base import ReportSchema
from ldpsim.simulator.codec import wire, wire_numpy
from ldpsim.simulator.session import curator as curator_mod
from ldpsim.simulator.session.ingest import (
    REPORT_CHUNK,
    EnvelopeReader,
    Expected,
    Reports,
    decode_reports,
)

RUN, RND, N, PEER = 3, 1, 70000, b"pool-0"
SCHEMAS = {"int": ReportSchema("int", 2, 0, 5), "float": ReportSchema("float", 1, -1.0, 1.0),
           # every msgpack int width: GRR over k = 720, OLH's (32-bit seed, value) pairs,
           # signed values up to the int64 edges, wide rows of small negatives and positives
           "grr720": ReportSchema("int", 1, 0, 719),
           "olh": ReportSchema("int", 2, 0, 2**32 - 1),
           "int64": ReportSchema("int", 3, -2**63, 2**63 - 1),
           "signed": ReportSchema("int", 12, -40000, 300)}


def expected(schema: ReportSchema) -> Expected:
    return Expected(RUN, RND, N, schema, 64 << 20, 1 << 20)


def reference(frame: bytes, exp: Expected) -> Reports | None:
    """What the reference reader reads, when the frame holds only reports of this round."""
    reader = EnvelopeReader(frame, exp, True, exp.max_frame_bytes, exp.max_envelope_bytes)
    chunks = []
    try:
        for item in reader:
            if not isinstance(item, Reports):
                return None
            chunks.append(item)
    except wire.WireError:
        return None
    rest = reader.rest()
    if rest is not None:
        chunks.append(rest)
    if not chunks:
        return None
    return Reports(np.concatenate([c.agents for c in chunks]),
                   np.concatenate([c.values for c in chunks]),
                   np.concatenate([c.ok for c in chunks]),
                   np.concatenate([c.sizes for c in chunks]))


def assert_agree(frame: bytes, pending: dict, exp: Expected) -> Reports | None:
    fast = decode_reports(frame, dict(pending), exp, PEER)
    if fast is None:
        return None
    ref = reference(frame, exp)
    assert ref is not None, "the accelerator read a frame the reference does not read as reports"
    assert ref.ok.all() and fast.ok.all()
    np.testing.assert_array_equal(fast.agents, ref.agents)
    assert fast.values.dtype == ref.values.dtype
    np.testing.assert_array_equal(fast.values, ref.values)
    np.testing.assert_array_equal(fast.sizes, ref.sizes)
    assert int(fast.sizes.sum()) == len(frame)
    if fast.answers is not None:
        key, count = fast.answers
        np.testing.assert_array_equal(fast.agents, pending[key][:count])
    return fast


def honest(schema: ReportSchema, ids: np.ndarray, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    if schema.dtype == "int":  # uniform, or a random number of low bits: every width
        low, high, shape = int(schema.low), int(schema.high), (len(ids), schema.length)
        values = rng.integers(low, high, shape, endpoint=True, dtype=np.int64)
        narrow = np.clip(values >> rng.integers(0, 64, shape), low, high)
        values = np.where(rng.integers(0, 2, shape) == 1, values, narrow)
    else:
        values = rng.uniform(schema.low, schema.high, (len(ids), schema.length))
    return wire_numpy.encode_batch(wire.REPORT, RUN, RND, ids, values)[0]


ids_strategy = st.lists(st.integers(0, N - 1), min_size=1, max_size=40, unique=True).map(
    lambda v: np.asarray(sorted(v), dtype=np.int64))


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(SCHEMAS)), ids=ids_strategy, seed=st.integers(0, 2**32 - 1),
       mutation=st.sampled_from(["none", "flip", "truncate", "append", "prefix", "pending",
                                 "reencode", "outside", "run", "duplicate", "garbage",
                                 "widen"]),
       pos=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_accelerated_and_reference_readers_agree(kind, ids, seed, mutation, pos, byte):
    schema = SCHEMAS[kind]
    exp = expected(schema)
    frame = honest(schema, ids, seed)
    pending = {(PEER, int(ids[0])): ids}
    wider = False
    if mutation == "none":
        assert assert_agree(frame, pending, exp) is not None  # honest: the accelerator answers
        assert decode_reports(frame, pending, exp, PEER).answers == ((PEER, int(ids[0])),
                                                                      len(ids))
        return
    if mutation == "flip":
        b = bytearray(frame)
        b[pos % len(b)] = byte
        frame = bytes(b)
    elif mutation == "truncate":
        frame = frame[:pos % len(frame)]
    elif mutation == "append":  # another envelope after the reports: not a pure report frame
        frame += wire.encode(wire.HELLO, RUN, -1, -1, {"pool": 0})
    elif mutation == "prefix":  # answers only the first part of the batch, still canonical
        cut = 1 + pos % len(ids)
        frame = honest(schema, ids[:cut], seed)
    elif mutation == "pending":  # the reports answer a batch this pool was not sent
        pending = {}
    elif mutation == "reencode":  # the same reports, encoded by the reference codec with floats
        env = list(wire.iter_frame(frame, 1 << 30))
        frame = b"".join(wire.encode(wire.REPORT, RUN, RND, o[4], [float(x) for x in o[5]])
                         for o, _ in env)
    elif mutation == "outside":  # one value out of the schema's domain
        env = [o for o, _ in wire.iter_frame(frame, 1 << 30)]
        env[pos % len(env)][5][0] = schema.high + 1 + (byte if kind == "int" else 0.5)
        frame = b"".join(wire.encode(*o[1:]) for o in env)
    elif mutation == "run":  # another run's reports
        frame = wire_numpy.encode_batch(wire.REPORT, RUN + 1, RND, ids,
                                        reference(frame, exp).values)[0]
    elif mutation == "duplicate":
        frame += frame
    elif mutation == "widen":  # one value in another int encoding: as an int64
        env = [o for o, _ in wire.iter_frame(frame, 1 << 30)]
        i = pos % len(env)
        raw = wire.encode(*env[i][1:])
        value = env[i][5][-1]
        if kind != "float":
            tail = msgpack.packb(value)
            assert raw.endswith(tail)
            wider = len(tail) < 9
            raw = raw[:-len(tail)] + b"\xd3" + struct.pack(">q", value)
        frame = b"".join(raw if j == i else wire.encode(*o[1:]) for j, o in enumerate(env))
    else:
        frame = bytes([byte]) * (1 + pos % 64)
    fast = assert_agree(frame, pending, exp)
    if mutation in ("append", "run", "garbage") and fast is not None:
        pytest.fail(f"{mutation}: the accelerator must decline")
    if mutation == "outside":
        assert fast is None  # out-of-domain reports are screened on the reference path
    if mutation == "widen" and wider:
        assert fast is None  # its size is not the shortest: the reference counts its bytes


def test_large_frames_agree_across_reference_chunks():
    """More reports than one reference chunk: the same batch either way."""
    schema = SCHEMAS["int"]
    ids = np.arange(5, 5 + 3 * REPORT_CHUNK + 7, dtype=np.int64)
    frame = honest(schema, ids, 1)
    fast = assert_agree(frame, {(PEER, 5): ids}, expected(schema))
    assert fast is not None and len(fast.agents) == len(ids)
    # without the pending batch, the one-call decoder answers
    fast = assert_agree(frame, {}, expected(schema))
    assert fast is not None and fast.answers is None


def _record(res: dict) -> str:
    res = {k: v for k, v in res.items() if k != "timing"}
    res["comm"] = dict(res["comm"], per_round=[
        {k: v for k, v in r.items() if k not in ("wall_s", "curator_cpu_s")}
        for r in res["comm"]["per_round"]])
    return json.dumps(res, sort_keys=True, default=repr)


@pytest.mark.parametrize("protocol", ["ldp_kwiksort_rr", "dpwevote", "safari", "truth_lp"])
def test_a_run_without_the_accelerator_is_bit_identical(protocol, monkeypatch):
    from ldpsim.protocols.local import example_data
    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.session import Limits

    cfg = {"protocol": protocol, "params": {}, "data": example_data(protocol), "seed": 11,
           "pools": 2, "batch": 50, "collusion": {"colluders": 0, "curator": True},
           "faults": []}
    calls = []
    real = curator_mod.decode_reports
    monkeypatch.setattr(curator_mod, "decode_reports",
                        lambda *a: calls.append(1) or real(*a))
    fast = run_inproc(cfg, Limits(timeout_s=20))
    assert calls, "the accelerator was never asked"
    monkeypatch.setattr(curator_mod, "decode_reports", lambda *a: None)
    slow = run_inproc(cfg, Limits(timeout_s=20))
    assert _record(fast) == _record(slow)
