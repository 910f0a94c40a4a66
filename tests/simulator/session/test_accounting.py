"""Accounting owns the result record's schema: ``CommStats.FIELDS`` and ``Timing.FIELDS`` name
exactly the keys a run's record holds, and the documentation's results table (docs/results.md)
lists every one."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.session import CommStats, Limits, Timing
from ldpsim.simulator.session.accounting import zmtp_bytes

from tests.conftest import ROOT

RESULTS_PAGE = ROOT / "docs" / "results.md"


def _run(n: int | None = None) -> dict:
    data = example_data("ldp_kwiksort_rr")
    if n is not None:
        data = {**data, "n": n}
    cfg = {"protocol": "ldp_kwiksort_rr", "params": {}, "data": data, "seed": 3, "pools": 2,
           "batch": 16 if n is None else n, "collusion": {"colluders": 0, "curator": True},
           "faults": []}
    return run_inproc(cfg, Limits(timeout_s=20))


def test_the_record_holds_exactly_the_declared_keys():
    res = _run()
    assert set(res["comm"]) == set(CommStats.FIELDS)
    assert set(res["timing"]) | {"run_wall_s"} == \
        set(Timing.FIELDS) - set(Timing.OPTIONAL)  # run_wall_s: runner's


def test_the_docs_results_table_lists_every_key():
    text = RESULTS_PAGE.read_text(encoding="utf-8")
    for part, fields in (("comm", CommStats.FIELDS), ("timing", Timing.FIELDS)):
        row = re.search(rf"^\| `{part}` \|(.*)$", text, re.M)
        assert row, f"docs/results.md: no results-table row for {part}"
        listed = set(re.findall(r"`([a-z_]+)`", row.group(1)))
        missing = set(fields) - listed
        assert not missing, f"docs/results.md results table, {part}: {sorted(missing)} not listed"


def test_bytes_are_counted_exactly():
    """Per-agent bytes add up to the total; physical bytes include ZMTP framing."""
    res = _run()
    c = res["comm"]
    n = res["n_agents"]
    assert c["bytes_total"] == round((c["bytes_up_per_agent_mean"]
                                      + c["bytes_down_per_agent_mean"]) * n)
    assert sum(r["bytes_up"] for r in c["per_round"]) == round(c["bytes_up_per_agent_mean"] * n)
    assert c["physical_bytes_up"] > sum(r["bytes_up"] for r in c["per_round"])
    assert [zmtp_bytes(k) - k for k in (0, 255, 256, 10**6)] == [2, 2, 9, 9]


def test_comm_record_over_registered_agents_only():
    comm = CommStats()
    comm.start(4)
    comm.up[:] = [10, 20, 30, 40]
    comm.down[:] = [1, 1, 1, 1]
    comm.msgs_up, comm.msgs_down = 2, 2
    rec = comm.as_record(np.array([1, 3]))
    assert rec["bytes_up_per_agent_mean"] == 30.0 and rec["bytes_up_per_agent_max"] == 40
    assert rec["bytes_total"] == 62 and rec["messages_up_per_agent_mean"] == 1.0


def test_per_agent_counters_widen_before_any_can_overflow():
    """The counters start as int16 and widen, to int32 and then int64, as soon as one agent's
    bytes in a direction could pass the dtype's maximum, so every count stays exact."""
    comm = CommStats()
    comm.start(3)
    assert comm.up.dtype == np.int16 and comm.down.dtype == np.int16
    comm.count_up(slice(0, 2), np.array([32_000, 5]))
    comm.count_down(np.array([0, 2]), 7)
    assert comm.up.dtype == np.int16 and comm.up.tolist() == [32_000, 5, 0]
    comm.count_up(np.array([0, 2]), np.array([800, 1]))  # agent 0 passes 2^15 - 1
    assert comm.up.dtype == np.int32 and comm.up.tolist() == [32_800, 5, 1]
    big = 2**31 - 1 - 32_800  # the most any agent can have counted is now exactly 2^31 - 1
    comm.count_up(slice(1, 3), np.array([big, 2]))
    assert comm.up.dtype == np.int32 and comm.up.tolist() == [32_800, big + 5, 3]
    comm.count_up(np.array([1]), np.array([100]))  # now an agent could pass 2^31 - 1
    assert comm.up.dtype == np.int64 and comm.up.tolist() == [32_800, big + 105, 3]
    assert comm.down.dtype == np.int16 and comm.down.tolist() == [7, 0, 7]
    rec = comm.as_record(np.arange(3))
    assert rec["bytes_up_per_agent_max"] == big + 105
    assert rec["bytes_total"] == 32_800 + big + 105 + 3 + 14


def test_a_pool_that_never_registers_leaves_its_block_out():
    """Pools 0 and 2 of 3 register, then the registration times out: the curator is built over
    their two blocks, in order, and the record counts the missing block as dropouts."""
    from ldpsim.simulator.session import CuratorSession, PoolSession
    from ldpsim.simulator.session.common import block_of

    from tests import drivers

    cfg = {"protocol": "ldp_kwiksort_rr", "params": {}, "seed": 3, "pools": 3, "batch": 16,
           "data": {**example_data("ldp_kwiksort_rr"), "n": 90},
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    limits = Limits(timeout_s=20)
    cur = CuratorSession(0, drivers.parties(cfg).curator, drivers.AUTH, limits)
    pools = {i: PoolSession(i, 3, drivers.AUTH, limits, drivers.parties(cfg).pools[i])
             for i in (2, 0)}
    for i, pool in pools.items():
        for _, setup in cur.on_frame(b"p%d" % i, pool.hello()):
            for reg in pool.on_frames([setup]):
                list(cur.on_frame(b"p%d" % i, reg))
    queue = list(cur.on_timeout())  # pool 1 never came: the rounds start without it
    blocks = [block_of(i, 3, 90) for i in (0, 2)]
    expect = np.concatenate([np.arange(a, b) for a, b in blocks])
    assert cur.registered.tolist() == expect.tolist() == cur.curator.agents.tolist()
    while queue:  # pools 0 and 2 answer; the curator finishes and releases
        peer, frame = queue.pop(0)
        for back in pools[int(peer[1:])].on_frames([frame]):
            queue += cur.on_frame(peer, back)
    assert cur.finished
    gap = block_of(1, 3, 90)
    res = cur.result
    assert res["dropouts_registration"] == gap[1] - gap[0] and res["pools_registered"] == 2
    assert res["comm"]["per_round"][0]["asked"] == len(expect)


def test_one_size_for_every_agent_counts_and_widens_as_an_array_of_it():
    """``count_down(at, size)`` with one plain number: the same counts and the same widening
    as with an array holding that number once per agent."""
    one, each = CommStats(), CommStats()
    one.start(4)
    each.start(4)
    for at, size in ((slice(0, 3), 30_000), (np.array([1, 3]), 5_000), (slice(0, 4), 0),
                     (np.array([2]), 2**31 - 40_000), (slice(2, 4), 50_000)):
        one.count_down(at, size)
        n = len(range(4)[at]) if isinstance(at, slice) else len(at)
        each.count_down(at, np.full(n, size, dtype=np.int64))
        assert one.down.dtype == each.down.dtype
        assert one.down.tolist() == each.down.tolist()
    assert one.down.dtype == np.int64


class _Block:
    """A stand-in for a bound block of agents: ``take`` keeps a slice of its ids."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids

    def take(self, sl: slice) -> _Block:
        return _Block(self.ids[sl])


def test_the_clock_times_a_sample_alone_per_round_and_answers_every_agent_once():
    """Amortised: the first ``ALONE`` agents of a round's first call are answered one at a
    time, the rest as one batch (later calls of the round: one batch); each agent once, in
    order. Exact: every agent alone."""
    from ldpsim.simulator.session.accounting import AgentClock, alone_time

    seen = []

    def respond(block):
        seen.append(len(block.ids))
        return block.ids * 10

    ids = np.arange(100, 110)
    small = AgentClock()  # a call below ALONE_MIN agents: nobody alone
    assert small.respond(respond, _Block(ids), 10, rnd=0).tolist() == (ids * 10).tolist()
    assert seen == [10] and small.stats()["agent_alone_calls"] == 0
    seen.clear()
    clock = AgentClock(alone_min=2)
    assert clock.respond(respond, _Block(ids), 10, rnd=0).tolist() == (ids * 10).tolist()
    assert seen == [1] * AgentClock.ALONE + [10 - AgentClock.ALONE]
    seen.clear()
    assert clock.respond(respond, _Block(ids), 10, rnd=0).tolist() == (ids * 10).tolist()
    assert seen == [10]  # the round's sample is taken
    seen.clear()
    clock.respond(respond, _Block(ids[:2]), 2, rnd=1)
    assert seen == [1, 1]  # a call of 2: one alone, the rest (one) as the batch
    st = clock.stats()
    assert st["agent_alone_calls"] == AgentClock.ALONE + 1
    assert st["agent_calls"] == 10 - AgentClock.ALONE + 10 + 1
    assert st["agent_alone_cpu_s_max"] <= st["agent_alone_cpu_s"]
    exact = AgentClock(exact=True)
    seen.clear()
    assert exact.respond(respond, _Block(ids), 10, rnd=0).tolist() == (ids * 10).tolist()
    assert seen == [1] * 10
    st = exact.stats()
    assert st["agent_alone_calls"] == st["agent_calls"] == 10
    assert st["agent_alone_cpu_s"] == st["agent_cpu_s"]
    both = alone_time([{"agent_alone_calls": 2, "agent_alone_cpu_s": 3.0,
                        "agent_alone_cpu_s2": 5.0, "agent_alone_cpu_s_max": 2.0},
                       {"agent_alone_calls": 1, "agent_alone_cpu_s": 3.0,
                        "agent_alone_cpu_s2": 9.0, "agent_alone_cpu_s_max": 3.0}])
    assert both["agent_alone_samples"] == 3 and both["agent_alone_cpu_s_mean"] == 2.0
    assert both["agent_alone_cpu_s_std"] == pytest.approx(1.0)  # the sample 1, 2, 3
    assert both["agent_alone_cpu_s_max"] == 3.0


def test_a_run_times_a_sample_of_agents_alone_in_every_round_and_pool():
    from ldpsim.simulator.session.accounting import AgentClock

    res = _run(n=4 * AgentClock.ALONE_MIN)  # two pools' calls of at least ALONE_MIN agents
    t = res["timing"]
    rounds, pools = len(res["comm"]["per_round"]), 2
    assert t["agent_time_mode"] == "amortised"
    assert t["agent_alone_samples"] == AgentClock.ALONE * rounds * pools
    assert 0 < t["agent_alone_cpu_s_mean"] <= t["agent_alone_cpu_s_max"]
    assert t["agent_alone_cpu_s_std"] >= 0


@pytest.mark.parametrize("seed", range(8))
def test_one_rounds_totals_are_the_per_agent_counters_record(seed):
    """A run of one round without per-agent counters (``CommStats.start(per_agent=False)``):
    each agent gets the round's broadcast (if any, its pool's agents at once) and at most one
    query, and sends at most one report, in batches of any size and order; the record is the
    per-agent counters' to the bit, over every registered agent or a range of them."""
    from ldpsim.protocols.agentrange import AgentRange

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 500))
    blocks = [(0, n // 3), (n // 3, n)]
    bc = int(rng.integers(0, 60)) if seed % 2 else 0
    calls = []
    for start, stop in blocks:
        if bc and stop > start:
            calls.append(("down", slice(start, stop), bc))
    for way in ("down", "up"):
        ids = rng.permutation(n)[:int(rng.integers(0, n + 1))]
        for part in np.array_split(ids, int(rng.integers(1, 6))):
            part = np.sort(part)
            sizes = rng.integers(5, 300, len(part)).astype(np.int64)
            calls.append((way, slice(int(part[0]), int(part[0]) + len(part))
                          if len(part) and part[-1] - part[0] + 1 == len(part) else part,
                          sizes))
    records = []
    for per_agent in (True, False):
        comm = CommStats()
        comm.start(n, per_agent=per_agent)
        for way, at, sizes in calls:
            (comm.count_down if way == "down" else comm.count_up)(at, sizes)
        for registered in (np.arange(n), AgentRange(0, n)):
            records.append(comm.as_record(registered))
    assert all(r == records[0] for r in records)
    assert CommStats().as_record(AgentRange(0, 0))["bytes_up_per_agent_max"] == 0
