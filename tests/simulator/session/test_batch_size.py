"""``[runtime] batch``: a number of agents per query batch, or "auto" (the default), sized per
round and pool by ``rounds.batch_size``. Batching moves frames, never results: every output,
report and per-agent byte count is the same whatever the batch size."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from ldpsim.protocols.base import ReportSchema, RoundPlan
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.codec import wire
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.rounds import (
    AUTO_FRAME_BYTES,
    AUTO_MAX,
    AUTO_MIN,
    ENVELOPE_HEAD,
    NUMBER_BYTES,
    batch_size,
    envelope_bound,
)
from ldpsim.simulator.session.runconfig import DEFAULTS, RunConfig

from tests.conftest import ROOT

LIMITS = Limits(timeout_s=30)


def _config(n: int, batch, protocol: str = "ldp_kwiksort_rr") -> dict:
    return {"protocol": protocol, "params": {"epsilon": 1.0},
            "data": {"kind": "mallows", "n": n, "m": 8, "theta": 0.4}, "seed": 3,
            "pools": 2, "agent_mode": "batched", "batch": batch,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def _without_frames(record: dict) -> dict:
    """A record without what batching changes: timing, physical frames, the batch size."""
    out = {k: v for k, v in record.items() if k not in ("timing", "pools")}
    comm = {k: v for k, v in record["comm"].items() if not k.startswith("physical")}
    comm["per_round"] = [{k: v for k, v in r.items()
                          if k not in ("wall_s", "curator_cpu_s", "batch")}
                         for r in comm["per_round"]]
    out["comm"] = comm
    return out


# -- the size rule, exactly -------------------------------------------------------------------

def test_a_number_is_used_as_it_is():
    assert batch_size(700, 10**6, 10**6) == 700
    assert batch_size(1, 5, 40) == 1


@pytest.mark.parametrize(("rows", "expected"), [
    (1, AUTO_MIN), (10, AUTO_MIN), (16 * AUTO_MIN, AUTO_MIN), (16 * AUTO_MIN + 1, AUTO_MIN + 1),
    (100_000, 6250), (500_000, 31250), (16 * AUTO_MAX, AUTO_MAX), (10**8, AUTO_MAX)])
def test_auto_asks_about_sixteen_batches_per_pool_within_its_bounds(rows, expected):
    assert batch_size("auto", rows, 41) == expected


def test_auto_keeps_every_frame_under_its_byte_target():
    # 1000-byte envelopes: 4 MiB hold 4194 of them, whatever the number of rows
    assert batch_size("auto", 10**7, 1000) == AUTO_FRAME_BYTES // 1000 == 4194
    # a small frame limit lowers it further (half the limit), never below one agent
    assert batch_size("auto", 10**7, 100, max_frame_bytes=4096) == 2048 // 100
    assert batch_size("auto", 10**7, 10**6, max_frame_bytes=4096) == 1
    # a frame of the chosen size fits, for every envelope size
    for env in (41, 1000, 12_345, 3 << 20):
        size = batch_size("auto", 10**6, env)
        assert size == 1 or size * env <= AUTO_FRAME_BYTES


def test_envelope_bound_covers_the_largest_envelope_of_a_round():
    agents = np.arange(50, dtype=np.int64)
    plan = RoundPlan(0, agents, None, None, ReportSchema("float", 20))
    assert envelope_bound(plan) == ENVELOPE_HEAD + 20 * NUMBER_BYTES
    rows = np.full((50, 3), 2**40, dtype=np.int64)
    plan = RoundPlan(0, agents, rows, None, ReportSchema("int", 1, 0, 1))
    assert envelope_bound(plan) == ENVELOPE_HEAD + 3 * NUMBER_BYTES
    # queries of any other shape are measured: the largest one encoded fits the bound
    queries = [{"tasks": list(range(i % 7))} for i in range(50)]
    plan = RoundPlan(0, agents, queries, None, ReportSchema("int", 1, 0, 1))
    largest = max(len(wire.encode(wire.QUERY, 2**31, 2**31, 2**62, q)) for q in queries)
    assert envelope_bound(plan) >= largest
    # and the report bound holds for the widest numbers the schema allows
    report = wire.encode(wire.REPORT, 2**31, 2**31, 2**62, [-(2**63)] * 20)
    assert len(report) <= envelope_bound(RoundPlan(0, agents, None, None,
                                                   ReportSchema("int", 20)))


# -- the setting ------------------------------------------------------------------------------

def test_auto_is_the_default_and_a_bad_value_names_the_key():
    assert DEFAULTS.batch == "auto"
    assert RunConfig.of({"protocol": "x", "params": {}, "data": {}}).batch == "auto"
    assert RunConfig.of({"protocol": "x", "params": {}, "data": {}, "batch": 64}).batch == 64
    raw = tomllib.loads((ROOT / "scenarios" / "demo.toml").read_text(encoding="utf-8"))
    assert sc.load(raw=raw).runtime["batch"] == "auto"
    assert sc.load(raw=raw, overrides=["runtime.batch=512"]).runtime["batch"] == 512
    for bad in ("fast", 0, 2.5, True):
        with pytest.raises(sc.ScenarioError) as e:
            sc.load(raw={**raw, "runtime": {**raw.get("runtime", {}), "batch": bad}})
        assert "batch" in str(e.value) and '"auto" or an integer' in str(e.value)


# -- batching changes frames, never results ----------------------------------------------------

def test_auto_batches_carry_the_same_run_as_one_agent_per_batch():
    ref = run_inproc(_config(3000, 1), LIMITS)
    auto = run_inproc(_config(3000, "auto"), LIMITS)
    assert _without_frames(auto) == _without_frames(ref)
    assert [r["batch"] for r in auto["comm"]["per_round"]] == [AUTO_MIN]
    assert [r["batch"] for r in ref["comm"]["per_round"]] == [1]
    # one query frame per pool and round, against one per agent
    assert auto["comm"]["physical_frames"] < ref["comm"]["physical_frames"] / 100


def test_auto_sizes_large_rounds_by_the_agents_a_pool_hosts():
    n = 2 * 16 * AUTO_MIN + 2 * 1600  # two pools of 16 batches of 4196 agents
    fixed = run_inproc(_config(n, AUTO_MIN), LIMITS)
    auto = run_inproc(_config(n, "auto"), LIMITS)
    assert _without_frames(auto) == _without_frames(fixed)
    assert [r["batch"] for r in auto["comm"]["per_round"]] == [AUTO_MIN + 100]


def test_the_processes_backend_matches_bit_for_bit_with_auto_batches():
    cfg = _config(40_000, "auto")
    a = run_processes(cfg, LIMITS)
    b = run_inproc(_config(40_000, 333), LIMITS)
    assert _without_frames(a) == _without_frames(b)


def test_queries_drawn_on_demand_go_out_before_the_round_has_drawn_them_all():
    """LDP-KwikSort plans with ``RowQueries``: the curator's first query batches leave while
    most of the round's queries are still undrawn, and the round's reports, output and
    per-agent bytes are those of the eager plan."""
    from ldpsim.protocols.queries import CHUNK, RowQueries
    from ldpsim.protocols.rank import protocols as rank
    from ldpsim.simulator.session import CuratorSession, PoolSession

    from tests import drivers

    config = _config(20 * CHUNK, 1024)
    cur = CuratorSession(0, drivers.parties(config).curator, drivers.AUTH, LIMITS)
    pools = [PoolSession(i, 2, drivers.AUTH, LIMITS, drivers.parties(config).pools[i])
             for i in range(2)]
    sent = []
    for i, pool in enumerate(pools):  # hello, set-up, registration
        pool.can_die = False
        for _, setup in cur.on_frame(b"p%d" % i, pool.hello()):
            for reg in pool.on_frames([setup]):
                sent += [out for _, out in cur.on_frame(b"p%d" % i, reg)]
    queries = cur.round.plan.queries
    assert isinstance(queries, RowQueries)
    window = [f for f in sent if f[2:3] == bytes([wire.QUERY])]
    assert len(window) == 16  # WINDOW batches per pool are out ...
    assert "chunks drawn 4/20" in repr(queries)  # ... and only their rows are drawn

    eager = rank._LDPCurator.plan

    def plan(self, rnd):
        p = eager(self, rnd)
        if p is not None:
            p.queries = np.asarray(p.queries)
        return p

    lazy = run_inproc(config, LIMITS)
    rank._LDPCurator.plan = plan
    try:
        assert _without_frames(run_inproc(config, LIMITS)) == _without_frames(lazy)
    finally:
        rank._LDPCurator.plan = eager
