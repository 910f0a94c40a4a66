"""SAFARI's curator in parts (``Curator.absorbs_in_parts``): with GRR and OLH it keeps each
round's integer counts (``safa.tally``), so reports absorbed in disjoint parts, in any order,
give the state and output of the whole-round curator, bit for bit. Harmony's estimate sums
floats in the reports' order (``safa.harmony_sums``): its curator takes the parts in agent
order (``Curator.absorbs_in_order``), and only so gives the whole round's bits.
The synthetic set is drawn and counted in parts (``RIModel.sample_part`` from the generator's
place, ``rng.party_generator_at``): the same rankings as one ``sample``."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.protocols.queries import RowQueries
from ldpsim.protocols.safari import protocols as sp
from ldpsim.protocols.safari import ranking, riffle
from ldpsim.simulator.session import ingest

from tests import drivers

SAFARI = PROTOCOLS["safari"]
#: SAFARI's counting settings: both splits, the three Rule I methods (CALM's round 0 is OLH),
#: the "group" estimator, leaves of two items, out-of-domain reports
SETTINGS = [{}, {"split": "users"}, {"rule1": "calm"}, {"rule1": "naive", "split": "users"},
            {"K": 2, "estimator": "group", "diagnostics": True},
            {"split": "users", "phase1_fraction": 0.3, "rule1": "calm", "K": 3}]


def _data(n: int, d: int = 6):
    return DATA_KINDS["safari_mallows"].build({"n": n, "d": d, "theta": 0.3}, 4)


def _bound(params: dict, d: int = 6):
    public = {"d": d, "m": d, "n": 100}
    return SAFARI.bind(SAFARI.resolve(params, public), public, resolved=True)


@pytest.mark.parametrize("params, ordered", [({"oracle": "harmony"}, True),
                                             ({"oracle": "harmony", "rule1": "calm"}, True),
                                             ({}, False), ({"rule1": "calm"}, False),
                                             ({"split": "users"}, False)])
def test_the_curator_absorbs_in_parts_in_agent_order_if_an_oracle_is_harmony(params, ordered):
    cls = SAFARI.curator_class(_bound(params))
    assert cls.absorbs_in_parts is True
    assert cls.absorbs_in_order is ordered
    assert cls is (sp._SafariOrderedCurator if ordered else sp._SafariPartsCurator)


def test_users_split_keeps_eight_bytes_an_agent():
    assert SAFARI.curator_agent_bytes(_bound({"split": "users"})) == 8
    assert SAFARI.curator_agent_bytes(_bound({})) == 0


def _spoil(values: np.ndarray, seed: int) -> np.ndarray:
    """A few reports outside their attribute's domain (the curator's own check counts them)."""
    out = values.copy()
    at = np.random.default_rng(seed).choice(len(out), size=max(1, len(out) // 50), replace=False)
    out[at, -1] = 10**6
    return out


def _run(params: dict, agents, parts: int, whole: bool, data, seed: int = 9,
         in_order: bool = False, state: list | None = None):
    """The output of a curator over ``agents`` whose rounds' reports (90% of the asked) come
    in ``parts`` parts in a shuffled order (``in_order``: in agent order); ``whole``: the
    whole-round curator. ``state`` gets each round's estimates."""
    resolved = SAFARI.resolve(params, data.public)
    bound = SAFARI.bind(resolved, data.public, resolved=True)
    cls = sp._SafariCurator if whole else SAFARI.curator_class(bound)
    cur = cls(SAFARI, bound, agents, rngm.stream_key(seed, "curator"))
    agent_key = rngm.stream_key(seed, "agents")
    rows = data.rows(0, data.n)
    for rnd in (0, 1):
        plan = cur.plan(rnd)
        asked = np.asarray(plan.agents)
        reports = drivers.respond(SAFARI, resolved, data, plan, agent_key, rnd, rows)
        values = _spoil(np.asarray(reports, dtype=np.int64), rnd)
        if isinstance(plan.queries, RowQueries) and parts > 1:
            plan.queries.streaming()  # drawn again for each part
        answered = np.flatnonzero(np.random.default_rng(rnd).random(len(asked)) < 0.9)
        pieces = np.array_split(answered, parts)
        order = range(parts) if in_order else np.random.default_rng(parts + rnd).permutation(
            parts)
        for i in order:
            cur.absorb(rnd, asked[pieces[i]], values[pieces[i]])
    assert cur.plan(2) is None
    out = cur.finish()
    if state is not None:
        state.extend(pickle.dumps(x) for x in (cur.phase1, cur.model.to_wire(17)))
    return pickle.dumps(out)


@pytest.mark.parametrize("params", SETTINGS)
def test_parts_in_any_order_give_the_whole_rounds_output(params):
    data = _data(3000)
    want = _run(params, np.arange(data.n), 1, True, data)
    assert _run(params, np.arange(data.n), 1, False, data) == want
    assert _run(params, AgentRange(0, data.n), 7, False, data) == want
    assert _run(params, np.arange(data.n), 4, False, data) == want


HARMONY = [{"oracle": "harmony"}, {"oracle": "harmony", "split": "users"},
           {"oracle": "harmony", "rule1": "calm", "estimator": "group", "K": 2}]


@pytest.mark.parametrize("params", HARMONY)
def test_harmonys_parts_in_agent_order_give_the_whole_rounds_state_and_output(params):
    data = _data(3000)
    params = {**params, "diagnostics": True}
    want_state: list = []
    want = _run(params, np.arange(data.n), 1, True, data, state=want_state)
    for agents, parts in ((np.arange(data.n), 1), (AgentRange(0, data.n), 7),
                          (np.arange(data.n), 40)):
        got_state: list = []
        assert _run(params, agents, parts, False, data, in_order=True,
                    state=got_state) == want
        assert got_state == want_state


def test_harmonys_parts_out_of_order_change_its_estimates():
    """The reason for the order: the same parts shuffled sum Harmony's floats in another order,
    and Phase 1's distributions come out different in their last bits."""
    data = _data(3000)
    params = {"oracle": "harmony", "diagnostics": True}
    want_state: list = []
    _run(params, np.arange(data.n), 1, True, data, state=want_state)
    got_state: list = []
    _run(params, np.arange(data.n), 40, False, data, state=got_state)
    assert got_state[0] != want_state[0]


def test_a_part_with_no_reports_is_absorbed():
    data = _data(500)
    want = _run({}, np.arange(data.n), 1, True, data)
    resolved = SAFARI.resolve({}, data.public)
    bound = SAFARI.bind(resolved, data.public, resolved=True)
    cur = SAFARI.make_curator(bound, AgentRange(0, data.n), rngm.stream_key(9, "curator"))
    assert isinstance(cur, sp._SafariPartsCurator)
    rows = data.rows(0, data.n)
    for rnd in (0, 1):
        plan = cur.plan(rnd)
        reports = drivers.respond(SAFARI, resolved, data, plan, rngm.stream_key(9, "agents"),
                                  rnd, rows)
        values = _spoil(np.asarray(reports, dtype=np.int64), rnd)
        answered = np.flatnonzero(np.random.default_rng(rnd).random(data.n) < 0.9)
        cur.absorb(rnd, answered[:0], values[:0])
        cur.absorb(rnd, answered, values[answered])
    assert pickle.dumps(cur.finish()) == want


def test_the_users_split_drawn_in_parts_is_the_whole_draw(monkeypatch):
    bound = _bound({"split": "users"})
    key = rngm.stream_key(3, "curator")
    agents = np.arange(5, 1005)
    u = rngm.uniform(rngm.stream_key(key, "safari-split"), agents, 0, 1)[:, 0]
    first = u < bound.params["phase1_fraction"]
    monkeypatch.setattr(sp, "SPLIT_ROWS", 37)
    for given in (agents, AgentRange(5, 1005)):
        cur = sp._SafariPartsCurator(SAFARI, bound, given, key)
        assert np.array_equal(cur.asked[0], agents[first])
        assert np.array_equal(cur.asked[1], agents[~first])
        assert cur.asked[0].dtype == cur.asked[1].dtype == np.int64


def test_the_attributes_drawn_by_range_are_those_drawn_whole():
    bound = _bound({})
    cur = sp._SafariPartsCurator(SAFARI, bound, AgentRange(0, 1000), 11)
    whole = cur.draw_attributes(0, 0, 1000)
    got = np.concatenate([cur.draw_attributes(0, lo, min(lo + 97, 1000))
                          for lo in range(0, 1000, 97)])
    assert np.array_equal(got, whole)


def test_a_per_agent_bound_is_screened_as_the_array_of_bounds():
    """Rule II's GRR bounds differ by attribute: drawn by range (``_AgentBounds``) the runtime
    rejects exactly the reports the whole array of bounds rejects, with the same reasons."""
    data = _data(400)
    resolved = SAFARI.resolve({}, data.public)
    bound = SAFARI.bind(resolved, data.public, resolved=True)
    cur = SAFARI.make_curator(bound, AgentRange(0, 400), 5)
    plan0 = cur.plan(0)
    cur.absorb(0, np.asarray(plan0.agents), np.zeros((400, 1), dtype=np.int64))
    plan = cur.plan(1)
    assert isinstance(plan.report_high, sp._AgentBounds)
    high = np.asarray(plan.report_high)
    assert high.shape == (400,) and len(np.unique(high)) > 1
    ids = np.array([3, 4, 4, 10, 399, 200, 7, 150])
    values = np.array([[0], [int(plan.schema.high)], [1], [2], [int(plan.schema.high)],
                       [1], [0], [int(plan.schema.high)]], dtype=np.int64)
    rows = np.minimum(np.searchsorted(plan.agents, ids), 399)
    assert np.array_equal(ingest._rows_of(plan.report_high, rows)[:, 0], high[rows])
    assert np.array_equal(ingest._rows_of(high, rows), high[rows])
    reports = ingest.Reports(ids, values, np.ones(len(ids), dtype=bool),
                             np.full(len(ids), 9, dtype=np.int64))
    asked, reported = np.ones(400, dtype=bool), np.zeros(400, dtype=bool)
    got = [ingest.screen(reports, 0, 400, 0, asked, reported, p, 1)
           for p in (plan, dataclasses.replace(plan, report_high=high))]
    assert got[0].rejects == got[1].rejects and len(got[0].rejects) >= 2
    for a, b in zip(dataclasses.astuple(got[0]), dataclasses.astuple(got[1]), strict=True):
        assert a == b if isinstance(a, list) else np.array_equal(a, b)


@pytest.mark.parametrize("K, d", [(1, 5), (2, 6), (3, 7), (7, 7)])
def test_a_sample_in_parts_is_the_sample(K, d):
    gen = np.random.default_rng(K)
    chain = riffle.Chain.of([list(range(i, min(d, i + K))) for i in range(0, d, K)])
    leaf = [gen.dirichlet(np.ones(chain.leaf_domain(j))) for j in range(len(chain.leaves))]
    inter = [gen.dirichlet(np.ones(chain.internal_domain(t))) for t in range(chain.n_internal)]
    model = riffle.RIModel(chain, leaf, inter)
    key, n = 1234567, 1001
    whole = model.sample(n, rngm.party_generator(key))

    def uniforms(offset, m):
        return rngm.party_generator_at(key, offset).random(m)

    for step in (1, 4, 97, 1000, 1001):
        parts = [model.sample_part(n, lo, min(n, lo + step), uniforms)
                 for lo in range(0, n, step)]
        assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4, 5, 7, 8, 1023, 10**6 + 3])
def test_a_generator_at_an_offset_continues_the_sequence(offset):
    key = rngm.stream_key(2, "safari-synthesis")
    seq = rngm.party_generator(key).random(offset + 9)
    assert np.array_equal(rngm.party_generator_at(key, offset).random(9), seq[offset:])


@pytest.mark.parametrize("n", [1, 64, 1000])
def test_the_synthesis_in_parts_gives_the_whole_sets_summary(monkeypatch, n):
    chain = riffle.Chain.of([[0], [1, 2], [3]])
    model = riffle.RIModel(chain, [np.ones(1), np.array([0.3, 0.7]), np.ones(1)],
                           [np.full(4, 0.25), np.array([0.5, 0.2, 0.3])])
    key = 77
    syn = model.sample(n, rngm.party_generator(rngm.stream_key(key, "safari-synthesis")))
    want = ranking.synthetic_output(syn, False)
    monkeypatch.setattr(ranking, "SYNTH_ROWS", 63)
    assert ranking.synthesis(model, n, key, False) == want
    assert ranking.synthesis(model, n, key, True) == ranking.synthetic_output(syn, True)


@pytest.mark.parametrize("params", SETTINGS, ids=repr)
def test_the_plans_ask_and_bound_what_the_whole_rounds_plans_do(params):
    """Each round's agents, queries (drawn by range), bounds and broadcast are the whole-round
    curator's, element for element."""
    data = _data(700)
    resolved = SAFARI.resolve(params, data.public)
    bound = SAFARI.bind(resolved, data.public, resolved=True)
    key = rngm.stream_key(4, "curator")
    whole = sp._SafariCurator(SAFARI, bound, np.arange(data.n), key)
    parts = sp._SafariPartsCurator(SAFARI, bound, AgentRange(0, data.n), key)
    rows = data.rows(0, data.n)
    for rnd in (0, 1):
        a, b = whole.plan(rnd), parts.plan(rnd)
        assert np.array_equal(np.asarray(a.agents), np.asarray(b.agents))
        assert np.array_equal(np.asarray(a.queries), np.asarray(b.queries))
        assert np.asarray(a.queries).dtype == np.asarray(b.queries).dtype
        assert np.array_equal(np.asarray(a.report_high), np.asarray(b.report_high))
        assert np.asarray(a.report_high).shape == np.asarray(b.report_high).shape
        assert a.broadcast == b.broadcast and a.schema == b.schema
        assert a.report_bits == b.report_bits
        reports = drivers.respond(SAFARI, resolved, data, a, rngm.stream_key(4, "agents"),
                                  rnd, rows)
        whole.absorb(rnd, np.asarray(a.agents), np.asarray(reports, dtype=np.int64))
        parts.absorb(rnd, np.asarray(b.agents), np.asarray(reports, dtype=np.int64))


@pytest.mark.parametrize("n", [7, 1 << 16, (1 << 16) + 1, 200_003])
@pytest.mark.parametrize("d", [4, 6])
def test_a_full_domain_release_in_parts_is_the_whole_draws(monkeypatch, n, d):
    """GRR's, OLH's and CALM's synthetic release (``baselines.release``) draws and counts
    ``SYNTH_ROWS`` rankings at a time: the same summary as the n drawn at once, which it
    never draws above a part."""
    import math

    from ldpsim.protocols.safari import baselines

    f = np.random.default_rng(d).normal(size=math.factorial(d))  # negative cells too
    parts = baselines.release(f, d, "synthetic", n, 11, False)
    draw = riffle.draw_indices
    if n > baselines.SYNTH_ROWS:
        def whole_only(*a, **k):
            raise AssertionError("drew every ranking at once")
        monkeypatch.setattr(riffle, "draw_indices", whole_only)
        assert baselines.release(f, d, "synthetic", n, 11, False) == parts
        monkeypatch.setattr(riffle, "draw_indices", draw)
    monkeypatch.setattr(baselines, "SYNTH_ROWS", 10**9)
    assert baselines.release(f, d, "synthetic", n, 11, False) == parts
    assert parts["n_synthetic"] == n
