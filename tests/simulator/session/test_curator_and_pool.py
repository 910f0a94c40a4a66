"""Inside the sessions: when a pool generates its data, in which order queries go out, and the
whole-batch checks of the curator's fast path.

None of these changes a result (the backend-equality tests pin that); the first two decide
whether the curator and the pools can work at the same time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import get_data_kind
from ldpsim.protocols.base import ReportSchema
from ldpsim.simulator.codec import wire, wire_numpy_read
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession
from ldpsim.simulator.session.seeding import run_keys

from tests import drivers

LIMITS = Limits(timeout_s=10.0)


def config(n: int = 5000, batch: int = 1000) -> dict:
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 1},
            "data": {"kind": "mallows", "n": n, "m": 6, "theta": 0.5}, "seed": 3, "pools": 2,
            "agent_mode": "batched", "batch": batch,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def test_pool_registers_before_it_generates_its_data():
    cfg = config()
    cur = CuratorSession(0, drivers.parties(cfg).curator, drivers.AUTH, LIMITS)
    pool = PoolSession(1, 2, drivers.AUTH, LIMITS, drivers.parties(cfg).pools[1])
    (_, setup), = cur.on_ready(b"p1")
    out = pool.on_frame(setup)
    assert [wire.decode_one(f).kind for f in out] == [wire.HELLO]  # the registration
    assert pool.data is None  # nothing generated yet
    pool.prepare()
    want = get_data_kind("mallows").build({"n": 5000, "m": 6, "theta": 0.5},
                                          run_keys(3).data).rows(2500, 5000)
    assert np.array_equal(pool.data, want)


def test_pool_without_prepare_generates_at_its_first_query():
    cfg = config()
    cur = CuratorSession(0, drivers.parties(cfg).curator, drivers.AUTH, LIMITS)
    pools = [PoolSession(i, 2, drivers.AUTH, LIMITS, drivers.parties(cfg).pools[i])
             for i in range(2)]
    frames = []
    for i, pool in enumerate(pools):
        (_, setup), = cur.on_ready(b"p%d" % i)
        for f in pool.on_frame(setup):
            frames.extend(cur.on_frame(b"p%d" % i, f))
    assert all(p.data is None for p in pools)
    peer, first = frames[0]
    assert pools[int(peer[1:])].on_frame(first)  # answered: the data were generated
    assert pools[int(peer[1:])].data is not None


def test_query_batches_go_to_the_pools_in_turn():
    cfg = config(n=5000, batch=1000)  # pool 0: agents 0..2499 (3 batches), pool 1: 2500..4999
    cur = CuratorSession(0, drivers.parties(cfg).curator, drivers.AUTH, LIMITS)
    frames = []
    for i in range(2):
        (_, setup), = cur.on_ready(b"p%d" % i)
        pool = PoolSession(i, 2, drivers.AUTH, LIMITS, drivers.parties(cfg).pools[i])
        for f in pool.on_frame(setup):
            frames.extend(cur.on_frame(b"p%d" % i, f))
    order = [(peer, wire_numpy_read.first_agent(f, wire.QUERY)[2]) for peer, f in frames]
    assert order == [(b"p0", 0), (b"p1", 2500), (b"p0", 1000), (b"p1", 3500), (b"p0", 2000),
                     (b"p1", 4500)]


@pytest.mark.parametrize("schema", [ReportSchema("int", 2, 0, 1), ReportSchema("float", 1),
                                    ReportSchema("float", 3, -1.5, 2.0)])
def test_all_inside_is_inside_for_every_row(schema):
    gen = np.random.default_rng(1)
    cases = [np.zeros((0, schema.length))]
    for bad in (None, -2.0, 3.0, math.inf, -math.inf, math.nan):
        v = gen.integers(0, 2, size=(50, schema.length)).astype(float)
        if bad is not None:
            v[17, schema.length - 1] = bad
        cases.append(v.astype(np.int64) if schema.dtype == "int" and math.isfinite(
            bad if bad is not None else 0) else v)
    for v in cases:
        assert schema.all_inside(v) == bool(schema.inside(v).all())


def _drive(cfg: dict, first_reply=None) -> dict:
    """Run curator and pools by hand; ``first_reply(peer, frame)`` may replace the frames a
    pool sends for its first query batch. Returns the curator's result."""
    cur = CuratorSession(0, drivers.parties(cfg).curator, drivers.AUTH, LIMITS)
    pools = {b"p%d" % i: PoolSession(i, 2, drivers.AUTH, LIMITS, drivers.parties(cfg).pools[i])
             for i in range(2)}
    queue = [(True, peer, f) for peer, p in pools.items() for f in [p.hello()]]
    hooked = False
    while not cur.finished:
        to_cur, peer, frame = queue.pop(0)
        if to_cur:
            queue += [(False, d, f) for d, f in cur.on_frame(peer, frame)]
            continue
        out = pools[peer].on_frame(frame)
        if first_reply and not hooked and wire_numpy_read.first_agent(frame, wire.QUERY):
            hooked, out = True, first_reply(peer, out)
        queue += [(True, peer, f) for f in out]
    return cur.result


def test_a_batch_that_repeats_an_earlier_report_keeps_the_first_and_rejects_the_rest():
    # agent 1's report arrives alone, then again inside its batch's canonical frame: the
    # batch's slice fast path must step aside, and the general path accept the others once
    cfg = config(n=3000, batch=500)

    def early(peer, frames):
        (frame,) = frames
        _, (obj, _), *_ = wire.iter_frame(frame, 1 << 20)
        return [wire.encode(*obj[1:5], obj[5]), frame]

    clean = _drive(cfg)
    res = _drive(cfg, early)
    assert res["rejected"] == 1 and "duplicate report from agent 1" in str(res["rejections"])
    assert res["output"] == clean["output"] and res["dropouts"] == 0
    assert res["comm"]["per_round"][0]["reported"] == 3000


def test_the_curators_patience_for_the_pools_statistics_grows_with_their_agents(monkeypatch):
    """After its DONE the curator waits ``done_timeout_s`` plus ``done_s_per_agent`` an agent
    of its largest pool for their statistics (a pool of 5 * 10^8 agents reads its odometer
    for seconds), and its usual timeout before."""
    import time

    from ldpsim.simulator.session.curator import State
    from ldpsim.simulator.session.registration import PoolSlot

    limits = Limits(timeout_s=30.0, done_timeout_s=2.0, done_s_per_agent=2e-8)
    cur = CuratorSession(0, drivers.parties(config()).curator, drivers.AUTH, limits)
    slots = {b"a": PoolSlot(b"a", 0, 0, 10**8), b"b": PoolSlot(b"b", 1, 10**8, 6 * 10**8)}
    monkeypatch.setattr(CuratorSession, "pools", property(lambda self: slots))
    for state, wait in ((State.ROUNDS, 30.0), (State.DONE, 12.0)):
        cur.state = state
        t = time.monotonic()
        cur._touch()
        assert wait - 0.5 < cur.next_deadline() - t < wait + 0.5
