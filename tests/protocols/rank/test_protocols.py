"""Tests of the four rank-aggregation protocols of Yan, Li & Liu, 2020
(``protocols.rank.protocols``).

The helpers below drive a protocol the way the runtime does, in one process: resolve the
parameters, let the curator plan round 0, let the agents respond, validate, absorb, finish.
Agent randomness is keyed by an *agent* stream key and the curator's by a *curator* key.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS, ParamError, get_protocol
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.rank import profile
from ldpsim.protocols.rank.protocols import DPKwikSort, auto_queries, g_lap, g_rr
from scipy import stats

from tests import drivers

Z = 5.0
P_MIN = 1e-4
RR, LAP = PROTOCOLS["ldp_kwiksort_rr"], PROTOCOLS["ldp_kwiksort_lap"]
PLAIN, DP = PROTOCOLS["kwiksort"], PROTOCOLS["dp_kwiksort"]


# --------------------------------------------------------------------------- helpers


def _mallows(n: int, m: int, theta: float, seed: int = 1):
    return DATA_KINDS["mallows"].build({"n": n, "m": m, "theta": theta},
                                       keys=rngm.stream_key(seed, "data"))


def _curator(proto, params, data, seed: int = 1, agents: np.ndarray | None = None):
    """Resolved params and a curator that has planned round 0."""
    resolved, cur = drivers.curator(proto, params, data, seed, agents=agents)
    plan = cur.plan(0)
    return resolved, cur, plan


def _run(proto, params, data, seed: int = 1):
    """One full run (one round); returns (resolved params, curator, plan, reports, output)."""
    run = drivers.drive(proto, params, data, seed)
    assert len(run.plans) == 1
    return run.resolved, run.curator, run.plans[0], run.reports[0], run.output


def _true_answers(data, plan) -> np.ndarray:
    return profile.answers(data.rows(0, data.n)[plan.agents], np.asarray(plan.queries))


def _upper(sq: np.ndarray) -> np.ndarray:
    j, l = profile.pairs(sq.shape[0])
    return sq[j, l]


def _ordered_as(ranking: list[int], a: int, b: int) -> bool:
    return ranking.index(a) < ranking.index(b)


# --------------------------------------------------------------------------- registry / claims


def test_registry():
    assert {"kwiksort", "dp_kwiksort", "ldp_kwiksort_rr", "ldp_kwiksort_lap"} <= set(PROTOCOLS)
    assert get_protocol("ldp_kwiksort_rr") is RR
    with pytest.raises(ParamError, match="unknown protocol"):
        get_protocol("nope")


@pytest.mark.parametrize("proto,mechanism", [(RR, "randomized_response"), (LAP, "laplace")])
def test_ldp_claims(proto, mechanism):
    public = {"m": 10}
    params = proto.resolve({"epsilon": 3.0, "queries": 4}, public)
    claim = proto.claim(params, public)
    assert claim.model == "local" and not claim.trusts_curator
    assert claim.epsilon == 3.0
    assert claim.per_report_epsilon == pytest.approx(0.75)
    assert claim.sensitivity == 1.0 and claim.mechanism == mechanism
    assert claim.as_dict()["trusts_curator"] is False


def test_central_and_plain_claims():
    public = {"m": 10}
    claim = DP.claim(DP.resolve({"epsilon": 2.0}, public), public)
    assert claim.model == "central" and claim.trusts_curator
    assert claim.per_report_epsilon == pytest.approx(2.0 / (9 * math.log2(10)))
    assert claim.sensitivity == 2.0
    plain = PLAIN.claim(PLAIN.resolve({}, public), public)
    assert plain.model == "none" and plain.epsilon == math.inf and plain.trusts_curator


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("eps,k", [(0.1, 1), (1.0, 1), (2.0, 1), (3.0, 2), (4.0, 2),
                                   (5.0, 3), (10.0, 5), (11.0, 6)])
def test_auto_queries_rr_examples(eps, k):
    # e.g. eps = 3: g(1) = 9/25 < g(2) = 18/49; eps = 4: g(2) = 1/2 > g(1), g(3).
    assert auto_queries(eps, 45) == k
    assert RR.resolve({"epsilon": eps}, {"m": 10})["queries"] == k


def test_auto_queries_rr_is_integer_maximiser_near_eps_over_two():
    for eps in np.round(np.arange(0.1, 30.0, 0.1), 10):
        k = auto_queries(float(eps), 45)
        assert k in {max(1, math.floor(eps / 2)), max(1, math.ceil(eps / 2))}
        best = max(g_rr(kk, eps) for kk in range(1, 46))
        assert g_rr(k, eps) == pytest.approx(best, rel=1e-12)


def test_auto_queries_respects_number_of_pairs():
    assert auto_queries(100.0, 6) == 6
    assert RR.resolve({"epsilon": 100.0}, {"m": 4})["queries"] == 6
    assert auto_queries(0.01, 1) == 1


def test_auto_queries_lap_is_brute_force_maximiser():
    for eps in (0.5, 1.0, 2.0, 5.0, 8.0, 20.0, 60.0):
        k = LAP.resolve({"epsilon": eps}, {"m": 12})["queries"]
        ks = range(1, 67)
        best = max(ks, key=lambda kk: (g_lap(kk, eps), -kk))
        assert k == best


def test_g_functions_values():
    assert g_rr(2, 4.0) == pytest.approx(16 * 2 / 64)
    assert g_lap(1, 2.0) == pytest.approx((1 - math.exp(-1)) ** 2)


@pytest.mark.parametrize("proto", [RR, LAP])
def test_queries_bounds(proto):
    public = {"m": 4}  # C(4, 2) = 6 pairs
    assert proto.resolve({"epsilon": 1.0, "queries": 6}, public)["queries"] == 6
    for bad in (7, 0, -1, 2.5, "many"):
        with pytest.raises(ParamError, match="queries"):
            proto.resolve({"epsilon": 1.0, "queries": bad}, public)
    for bad in (0, -1.0, 1e9, float("nan"), True):
        with pytest.raises(ParamError, match="epsilon"):
            proto.resolve({"epsilon": bad}, public)


def test_dp_budget():
    cap, eps_cmp = DPKwikSort.budget(10, 1.5)
    assert cap == 29 == math.floor(9 * math.log2(10))
    assert eps_cmp == pytest.approx(1.5 / (9 * math.log2(10)))
    assert DPKwikSort.budget(2, 1.0) == (1, 1.0)


# --------------------------------------------------------------------------- plans and respond


@pytest.mark.parametrize("proto", [RR, LAP])
def test_plan_queries_distinct_in_range_and_keyed_by_agent(proto):
    data = _mallows(200, 6, 0.5)
    resolved, cur, plan = _curator(proto, {"epsilon": 2.0, "queries": 4}, data)
    q = np.asarray(plan.queries)
    assert q.shape == (200, 4)
    assert q.min() >= 0 and q.max() < 15
    assert all(len(set(row)) == 4 for row in q.tolist())
    assert plan.schema.length == 4
    assert plan.schema.dtype == ("int" if proto is RR else "float")
    # A curator that only knows a sub-block of agents plans the same queries for them.
    sub = np.arange(50, 120)
    _, _, plan_sub = _curator(proto, {"epsilon": 2.0, "queries": 4}, data, agents=sub)
    assert np.array_equal(np.asarray(plan_sub.queries), q[sub])


@pytest.mark.parametrize("proto", [RR, LAP])
def test_per_agent_respond_equals_batched(proto):
    data = _mallows(80, 7, 0.4)
    resolved, cur, plan = _curator(proto, {"epsilon": 3.0, "queries": 5}, data)
    key = rngm.stream_key(5, "agents")
    rows = data.rows(0, data.n)
    bound = proto.bind(resolved, data.public, resolved=True)
    batch = proto.respond(Block(0, rows, plan.agents, key, bound, queries=plan.queries))
    for i in range(data.n):
        one = proto.respond(Block(0, rows[i : i + 1], plan.agents[i : i + 1], key, bound,
                                  queries=plan.queries[i : i + 1]))
        assert one.shape == (1, 5)
        assert one.dtype == batch.dtype
        assert np.array_equal(one[0], batch[i])
    # a different agent key gives different reports
    other = proto.respond(Block(0, rows, plan.agents, key + 1, bound, queries=plan.queries))
    assert not np.array_equal(other, batch)


def test_plain_respond_is_all_true_answers():
    data = _mallows(50, 5, 0.5)
    _, cur, plan, reports, _ = _run(PLAIN, {}, data)
    assert plan.queries is None
    assert reports.shape == (50, 10)
    j, l = profile.pairs(5)
    assert np.array_equal(reports.sum(axis=0), data.truth()["counts"][j, l])


# --------------------------------------------------------------------------- RR statistics


@pytest.mark.parametrize("eps,k", [(1.0, 1), (2.0, 3), (6.0, 4)])
def test_rr_flip_rate(eps, k):
    data = _mallows(20_000, 6, 0.5)
    resolved, _, plan, reports, _ = _run(RR, {"epsilon": eps, "queries": k}, data)
    o = _true_answers(data, plan)
    flip = 1 / (1 + math.exp(eps / k))
    rate = (reports != o).mean()
    assert set(np.unique(reports).tolist()) <= {0, 1}
    assert abs(rate - flip) <= Z * math.sqrt(flip * (1 - flip) / o.size)


def test_rr_estimator_unbiased_given_the_queries():
    # Fixed data and queries (same curator key); only the agents' coins change between reps.
    n, m, eps, k, reps = 300, 5, 2.0, 3, 400
    data = _mallows(n, m, 0.3)
    params = {"epsilon": eps, "queries": k}
    resolved, _, plan = _curator(RR, params, data)
    q = np.asarray(plan.queries)
    o = _true_answers(data, plan)
    n_pairs = m * (m - 1) // 2
    truth = np.bincount(q.ravel(), weights=(2 * o - 1).ravel(), minlength=n_pairs)
    asked = np.bincount(q.ravel(), minlength=n_pairs)
    p = mech.GRR(eps / k).p
    var = asked * (1 / (2 * p - 1) ** 2 - 1)  # per report: Var[(2r-1)/(2p-1)] = 1/(2p-1)^2 - 1

    est = np.empty((reps, n_pairs))
    for rep in range(reps):
        _, cur, plan_rep = _curator(RR, params, data)
        assert np.array_equal(plan_rep.queries, q)
        reports = drivers.respond(RR, resolved, data, plan_rep, rngm.stream_key(rep, "rr-agents"))
        cur.absorb(0, plan_rep.agents, reports)
        est[rep] = _upper(cur.cmp_hat())
    assert np.all(np.abs(est.mean(axis=0) - truth) <= Z * np.sqrt(var / reps))
    # The empirical variance matches too: mean of s^2 / sigma^2 over the (independent) pairs
    # has standard error ~ sqrt(2 / (reps - 1) / n_pairs).
    ratio = (est.var(axis=0, ddof=1) / var).mean()
    assert abs(ratio - 1) <= Z * math.sqrt(2 / (reps - 1) / n_pairs)


def test_rr_cmp_hat_is_antisymmetric_and_scaled():
    data = _mallows(500, 4, 0.5)
    resolved, cur, plan, reports, out = _run(RR, {"epsilon": 2.0, "queries": 2}, data)
    c = cur.cmp_hat()
    assert np.array_equal(c, -c.T)
    p = mech.GRR(1.0).p
    q = np.asarray(plan.queries)
    raw = np.bincount(q.ravel(), weights=(2 * reports - 1).ravel(), minlength=6)
    assert np.allclose(_upper(c), raw / (2 * p - 1), rtol=1e-12)
    assert out["cmp_hat"] == pytest.approx(_upper(c).tolist())


# --------------------------------------------------------------------------- Lap statistics


@pytest.mark.parametrize("eps,k", [(1.0, 1), (4.0, 3)])
def test_lap_noise_distribution(eps, k):
    data = _mallows(20_000, 6, 0.5)
    _, _, plan, reports, _ = _run(LAP, {"epsilon": eps, "queries": k}, data)
    noise = (reports - _true_answers(data, plan)).ravel()
    b = k / eps
    n = noise.size
    assert reports.dtype == np.float64
    assert abs(noise.mean()) <= Z * math.sqrt(2 * b**2 / n)
    assert abs((noise**2).mean() - 2 * b**2) <= Z * math.sqrt(20 * b**4 / n)
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > P_MIN


def test_lap_threshold_classification_rate():
    eps, k = 3.0, 2
    data = _mallows(20_000, 6, 0.5)
    _, cur, plan, reports, _ = _run(LAP, {"epsilon": eps, "queries": k}, data)
    o = _true_answers(data, plan)
    for answer, keep in enumerate(mech.laplace_threshold_keep_probabilities(eps / k)):
        sel = o == answer
        rate = ((reports[sel] >= 0.5) == bool(answer)).mean()
        assert abs(rate - keep) <= Z * math.sqrt(keep * (1 - keep) / sel.sum())
    # the curator's counters are exactly the thresholded reports
    q = np.asarray(plan.queries)
    assert np.array_equal(cur.ones, np.bincount(q[reports >= 0.5], minlength=15))
    assert np.array_equal(cur.ones + cur.zeros, np.bincount(q.ravel(), minlength=15))


# --------------------------------------------------------------------------- absorb order


@pytest.mark.parametrize("proto", [RR, LAP, PLAIN])
def test_absorb_in_shuffled_chunks_equals_one_shot(proto):
    data = _mallows(400, 6, 0.5)
    params = {} if proto is PLAIN else {"epsilon": 2.0, "queries": 3}
    _, cur, plan, reports, out = _run(proto, params, data)
    _, cur2, plan2 = _curator(proto, params, data)
    order = np.random.default_rng(0).permutation(data.n)
    for chunk in np.array_split(order, 7):
        chunk = np.sort(chunk)
        cur2.absorb(0, plan2.agents[chunk], reports[chunk])
    assert np.array_equal(cur.ones, cur2.ones) and np.array_equal(cur.zeros, cur2.zeros)
    assert cur2.finish() == out


# --------------------------------------------------------------------------- DP-KwikSort


def test_dp_kwiksort_respects_cap_and_noise_scale():
    m, eps, runs = 10, 1.0, 300
    data = _mallows(300, m, 0.5)
    exact = profile.cmp_from_counts(data.truth()["counts"])
    _, _, _, reports, _ = _run(DP, {"epsilon": eps}, data)
    cap, eps_cmp = DPKwikSort.budget(m, eps)
    n_capped = 0
    noise = []
    for seed in range(runs):
        resolved, cur, plan = _curator(DP, {"epsilon": eps}, data, seed=seed)
        cur.absorb(0, plan.agents, reports)
        out = cur.finish()
        assert out["comparisons"] <= cap == out["max_comparisons"]
        assert sorted(out["ranking"]) == list(range(m))
        hat = np.array([np.nan if v is None else v for v in out["cmp_hat"]])
        assert np.isfinite(hat).sum() == out["comparisons"]  # one noisy value per comparison
        noise.extend((hat - _upper(exact))[np.isfinite(hat)])
        n_capped += out["capped"]
    assert 0 < n_capped < runs
    # Each comparison gets fresh Lap(2 / eps_cmp) noise (sensitivity 2).
    noise = np.array(noise)
    b = DPKwikSort.SENSITIVITY / eps_cmp
    assert abs((noise**2).mean() - 2 * b**2) <= Z * math.sqrt(20 * b**4 / noise.size)
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > P_MIN


# --------------------------------------------------------------------------- recovery


@pytest.fixture(scope="module")
def concentrated():
    """n = 2000 Mallows rankings of m = 10 items with theta = 0.8 (phi = 0.2)."""
    return _mallows(2000, 10, 0.8, seed=3)


def test_kwiksort_recovers_reference(concentrated):
    ref = concentrated.truth()["reference"]
    for seed in range(10):
        _, _, _, _, out = _run(PLAIN, {}, concentrated, seed=seed)
        assert out["ranking"] == ref


def test_dp_kwiksort_huge_epsilon_recovers_reference(concentrated):
    ref = concentrated.truth()["reference"]
    _, _, _, reports, _ = _run(DP, {"epsilon": 1000.0}, concentrated)
    j, l = profile.pairs(10)
    uncapped = 0
    for seed in range(20):
        _, cur, plan = _curator(DP, {"epsilon": 1000.0}, concentrated, seed=seed)
        cur.absorb(0, plan.agents, reports)
        out = cur.finish()
        # every pair the sort compared is ordered as in the reference ...
        for p, v in enumerate(out["cmp_hat"]):
            if v is not None:
                a, b = int(j[p]), int(l[p])
                assert _ordered_as(out["ranking"], a, b) == _ordered_as(ref, a, b)
        # ... so a run that the cap did not stop is exactly the reference
        if not out["capped"]:
            assert out["ranking"] == ref
            uncapped += 1
    assert uncapped > 0


@pytest.mark.parametrize("proto", [RR, LAP])
def test_ldp_huge_epsilon_recovers_reference(proto, concentrated):
    ref = concentrated.truth()["reference"]
    _, _, _, _, out = _run(proto, {"epsilon": 1000.0, "queries": 45}, concentrated)
    assert out["ranking"] == ref


# --------------------------------------------------------------------------- evaluate


def test_evaluate_exact_profile():
    data = _mallows(500, 8, 0.3, seed=4)
    _, _, _, _, out = _run(PLAIN, {}, data, seed=2)
    truth = data.truth()
    metrics = PLAIN.evaluate(out, truth)
    assert metrics["error_rate"] == 0.0
    assert metrics["kendall_tau"] == pytest.approx(
        profile.kendall_tau(out["ranking"], truth["counts"]), rel=1e-15)
    assert "cap_hit" not in metrics


def test_evaluate_fills_unestimated_pairs_from_the_ranking():
    # counts: [0,1,2] for agents 0>1>2, 2>0>1, 1>0>2 -> true cmp upper = (1, 1, 1)
    counts = np.array([[0, 2, 2], [1, 0, 2], [1, 1, 0]])
    truth = {"counts": counts, "n": 3}
    out = {"ranking": [0, 1, 2], "cmp_hat": [None, -1.0, None], "capped": True}
    metrics = DP.evaluate(out, truth)
    assert metrics["error_rate"] == pytest.approx(1 / 3)  # only pair (0, 2) is flipped
    assert metrics["kendall_tau"] == pytest.approx(1 / 3)
    assert metrics["cap_hit"] == 1.0
    out = {"ranking": [2, 1, 0], "cmp_hat": [None, None, None], "capped": False}
    metrics = DP.evaluate(out, truth)
    assert metrics["error_rate"] == 1.0 and metrics["cap_hit"] == 0.0
    assert metrics["kendall_tau"] == pytest.approx(2 / 3)
