"""Multi-round mechanics with a toy protocol: a subset of agents per round, a broadcast, per-agent
queries, curator state across rounds, broadcast bytes counted once per receiving agent."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from ldpsim.protocols.base import Curator, Protocol, ReportSchema, RoundPlan, Rounds
from ldpsim.protocols.rank.data import KINDS
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.seeding import run_keys

from ldpsim import protocols


class _ToyCurator(Curator):
    def plan(self, rnd):
        if rnd == 0:  # even agents, one broadcast, no per-agent query
            return RoundPlan(0, self.agents[self.agents % 2 == 0], None, {"offset": 3},
                             ReportSchema("int", 1, 0, 1000), report_bits=8)
        if rnd == 1:  # agents that reported an odd value in round 0, each with its own query
            asked = np.sort(self.odd)
            return RoundPlan(1, asked, (asked % 5)[:, None], None,
                             ReportSchema("int", 1, 0, 1000), report_bits=8)
        return None

    def absorb(self, rnd, agents, reports):
        if rnd == 0:
            self.odd = agents[reports[:, 0] % 2 == 1]
            self.sum0 = int(reports.sum())
        else:
            self.sum1 = int(reports.sum())
            self.n1 = len(agents)

    def finish(self):
        return {"sum0": self.sum0, "sum1": self.sum1, "n1": self.n1}


class Toy(Protocol):
    name = "toy_rounds"
    data_type = "ranking"
    params = {}

    def rounds(self, params, public):
        return Rounds.none()

    curator_cls = _ToyCurator

    def respond(self, block):
        if block.rnd == 0:
            return block.rows[:, :1].astype(np.int64) + block.broadcast["offset"]
        return np.asarray(block.queries, dtype=np.int64) + block.rows[:, 1:2]

    def evaluate(self, output, truth):
        return {}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(protocols.PROTOCOLS, "toy_rounds", Toy())


def expected(n: int, seed: int) -> dict:
    rows = KINDS["mallows"].build({"n": n, "m": 5, "theta": 0.2}, run_keys(seed).data).rows(0, n)
    ids = np.arange(n)
    r0 = rows[ids % 2 == 0, 0].astype(int) + 3
    odd = ids[ids % 2 == 0][r0 % 2 == 1]
    r1 = odd % 5 + rows[odd, 1]
    return {"sum0": int(r0.sum()), "sum1": int(r1.sum()), "n1": len(odd)}


def cfg(n=500, pools=2):
    return {"protocol": "toy_rounds", "params": {},
            "data": {"kind": "mallows", "n": n, "m": 5, "theta": 0.2}, "seed": 9,
            "pools": pools, "agent_mode": "batched", "batch": 64,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def test_multi_round_subsets_broadcast_and_state(toy):
    want = expected(500, 9)
    a = run_inproc(cfg(pools=3), Limits(timeout_s=5))
    b = run_processes(cfg(pools=2), Limits(timeout_s=5))
    assert a["output"] == want and b["output"] == want
    assert a["comm"]["rounds"] == 2 and a["comm"]["report_bits_per_agent"] == 16
    per_round = a["comm"]["per_round"]
    assert [r["asked"] for r in per_round] == [250, want["n1"]]
    # round 0 down bytes: a QUERY envelope per asked agent + the broadcast once per asked agent
    bcast = len(msgpack.packb([1, 2, 0, 0, -1, {"offset": 3}]))
    queries = sum(len(msgpack.packb([1, 1, 0, 0, int(i), None])) for i in range(0, 500, 2))
    assert per_round[0]["bytes_down"] == queries + 250 * bcast
    assert a["comm"]["bytes_total"] == b["comm"]["bytes_total"]


class _BoundedCurator(_ToyCurator):
    """Round 1 asks each agent for query + its value, allowing at most query + 2."""

    def plan(self, rnd):
        plan = super().plan(rnd)
        if plan is not None and rnd == 1:
            plan.report_high = (plan.agents % 5) + 2
        return plan


class Bounded(Toy):
    name = "toy_bounded"

    curator_cls = _BoundedCurator


@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_per_agent_report_bounds_reject_out_of_domain_reports(monkeypatch, backend):
    monkeypatch.setitem(protocols.PROTOCOLS, "toy_bounded", Bounded())
    c = dict(cfg(), protocol="toy_bounded")
    run = run_inproc if backend == "inproc" else run_processes
    res = run(c, Limits(timeout_s=10))
    rows = KINDS["mallows"].build({"n": 500, "m": 5, "theta": 0.2},
                                  run_keys(9).data).rows(0, 500)
    exp = expected(500, 9)
    ids = np.arange(500)
    r0 = rows[ids % 2 == 0, 0].astype(int) + 3
    odd = ids[ids % 2 == 0][r0 % 2 == 1]
    inside = rows[odd, 1] <= 2
    assert 0 < (~inside).sum() < len(odd)  # the test bites both ways
    assert res["rejected"] == int((~inside).sum())
    assert res["output"]["n1"] == int(inside.sum()) and res["output"]["sum0"] == exp["sum0"]
    assert res["output"]["sum1"] == int((odd % 5 + rows[odd, 1])[inside].sum())
    assert any("above this agent's bound" in r["reason"] for r in res["rejections"])


# -- a round's plan, checked ------------------------------------------------------------------

def _round(agents, n=10):
    from ldpsim.simulator.session.rounds import Round

    plan = RoundPlan(0, np.asarray(agents, dtype=np.int64), None, None,
                     ReportSchema("int", 1, 0, 1))
    return Round(0, 0, plan, n, "toy", 0.0, 0.0)


@pytest.mark.parametrize("agents", [[3, 4, 5], [0, 2, 9], list(range(10)), [7], []])
def test_a_round_asks_exactly_its_plans_agents(agents):
    asked = _round(agents).asked
    assert asked.tolist() == [i in agents for i in range(10)]


@pytest.mark.parametrize(("agents", "why"), [
    ([2, 1, 3], "sorted, distinct"), ([1, 1, 2], "sorted, distinct"),
    ([-1, 0, 1], "outside [0, 10)"), ([8, 9, 10], "outside [0, 10)"), ([10], "outside")])
def test_a_plan_asking_unsorted_or_unknown_agents_fails_the_run(agents, why):
    from ldpsim.simulator.session import RunFailed

    with pytest.raises(RunFailed, match=why.replace("[", r"\[").replace(")", r"\)")):
        _round(agents)
