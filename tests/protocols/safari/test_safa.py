"""Statistical tests of SAFA and the frequency oracles against their theory (Cheng et al., 2021,
§5.4: Algorithms 1-2, Theorems 3-5), with tolerances of 5 standard errors; the local randomizers'
likelihoods and privacy ratios; batched == per-agent reports; out-of-domain reports."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.mechanisms import GRR, OLH, Hadamard, hadamard
from ldpsim.protocols.mechanisms.olh import hash_values
from ldpsim.protocols.safari import perm, safa
from ldpsim.protocols.safari.riffle import Chain

LN3 = math.log(3.0)
SAFARI = PROTOCOLS["safari"]
KEY = rngm.stream_key(99, "agents")


def rankings(n: int, d: int, seed: int = 1) -> np.ndarray:
    """A fixed, non-uniform set of rankings: a mixture of two rough orders."""
    gen = rngm.party_generator(rngm.stream_key(seed, "test-rankings"))
    base = np.tile(np.arange(d), (n, 1))
    out = gen.permuted(base, axis=1)
    half = n // 2
    out[:half] = np.sort(out[:half], axis=1)  # half the users: identity ranking
    return out


def safari_params(**kw) -> dict:
    return SAFARI.resolve({"epsilon": 2 * LN3, **kw}, {"d": 4, "n": 1})


def test_grr_output_frequencies():
    n, k, eps = 200_000, 7, 1.0
    u = rngm.uniform(KEY, np.arange(n), 0, 2)
    rep = GRR(eps, k).perturb(np.full(n, 3), u[:, 0], u[:, 1])
    p, q = (GRR(eps, k).p, GRR(eps, k).q)
    freq = np.bincount(rep, minlength=k) / n
    expect = np.where(np.arange(k) == 3, p, q)
    assert np.abs(freq - expect).max() <= 5 * np.sqrt(expect * (1 - expect) / n).max()
    assert p / q == pytest.approx(math.exp(eps))
    assert (GRR(900.0, 5).p, GRR(900.0, 5).q)[0] == pytest.approx(1.0)


def simulate_safa(params: dict, data: np.ndarray, reps: int, estimator: str,
                  oracle: str = "safa"):
    """z estimates of `reps` independent SAFA collections over the same users (real agent
    path: curator-side attribute sampling, Safari.respond, safa.estimate)."""
    n, d = data.shape
    agents = np.arange(reps * n)
    u = rngm.uniform(rngm.stream_key(5, "curator"), agents, 0, 1)[:, 0]
    attrs = safa.sample_attributes(u, d)
    bound = SAFARI.bind(params, {"d": d, "n": reps * n}, resolved=True)
    reports = SAFARI.respond(Block(0, np.tile(data, (reps, 1)), agents, KEY, bound,
                                   queries=attrs[:, None]))
    eps = params["epsilon"] / 2
    z = np.stack([np.stack(safa.estimate(oracle, attrs[r * n:(r + 1) * n],
                                         reports[r * n:(r + 1) * n], np.full(d, d), eps,
                                         estimator))
                  for r in range(reps)])
    f = np.stack([np.bincount(perm.positions(data)[:, j], minlength=d) for j in range(d)]) / n
    return z, f


def test_safa_unbiased_with_theorem4_variance():
    """Theorem 3 (E z = f) and Eq. (7) / Theorem 4 (its variance), ε' = ln 3, |𝒜| = d = 4."""
    n, d, reps = 1000, 4, 1000
    z, f = simulate_safa(safari_params(), rankings(n, d), reps, "paper")
    var = safa.variance_eq7(f, LN3, d, d, n)
    mean_err = np.abs(z.mean(axis=0) - f)
    assert (mean_err <= 5 * np.sqrt(var / reps)).all()
    ratio = z.var(axis=0, ddof=1) / var
    assert (np.abs(ratio - 1) <= 5 * math.sqrt(2 / (reps - 1))).all()
    # Theorem 4 drops Eq. (7)'s f-term f (p-q)(|𝒜| - p - q) >= 0: equal at f = 0, a lower
    # bound elsewhere (about half the variance of a cell with f = 0.5 here)
    assert safa.variance_theorem4(LN3, d, d, n) == pytest.approx(
        float(safa.variance_eq7(0.0, LN3, d, d, n)))
    assert (var >= safa.variance_theorem4(LN3, d, d, n) - 1e-15).all()


def test_safa_group_estimator_is_unbiased_and_sums_to_one():
    n, d, reps = 1000, 4, 300
    z, f = simulate_safa(safari_params(estimator="group"), rankings(n, d, 2), reps, "group")
    assert np.allclose(z.sum(axis=2), 1.0)
    sd = np.sqrt(safa.variance_eq7(f, LN3, d, d, n) / reps)  # an upper bound for "group"
    assert (np.abs(z.mean(axis=0) - f) <= 5 * sd).all()


def test_sampled_harmony_variance_and_the_crossover_with_safa():
    """Harmony with SAFA's attribute sampling has variance (|𝒜| c_ε² - f)/n, not Eq. (8)'s
    (2|𝒜| - 1) c_ε²/n; the crossover of Theorem 5 then sits at safa_beats_hadamard_bound."""
    n, d, reps = 1000, 4, 600
    z, f = simulate_safa(safari_params(oracle="harmony"), rankings(n, d, 4), reps, "paper",
                         "harmony")
    var = (d * Hadamard(LN3).scale ** 2 - f) / n
    assert (np.abs(z.mean(axis=0) - f) <= 5 * np.sqrt(var / reps)).all()
    assert (np.abs(z.var(axis=0, ddof=1) / var - 1) <= 5 * math.sqrt(2 / (reps - 1))).all()
    for eps in (0.3, LN3 / 2, LN3, 2.5):
        for n_attrs in (3, 10, 45):
            bound = safa.safa_beats_hadamard_bound(eps, n_attrs)
            for k in range(2, 200):
                hadamard = n_attrs * Hadamard(eps).scale ** 2 / 1000
                if abs(k - bound) > 1e-9:
                    assert (safa.variance_theorem4(eps, k, n_attrs, 1000) < hadamard) == \
                        (k < bound)


def test_harmony_oracle_unbiased_with_its_variance():
    n, k, reps, eps = 500, 5, 600, LN3
    vals = np.repeat(np.arange(k), [200, 150, 100, 40, 10])
    f = np.bincount(vals, minlength=k) / n
    agents = np.arange(reps * n)
    u = rngm.uniform(KEY, agents, 0, 2)
    s, bit = Hadamard(eps).perturb(np.tile(vals, reps), k, u[:, 0], u[:, 1])
    z = np.stack([Hadamard(eps).estimate(s[r * n:(r + 1) * n], bit[r * n:(r + 1) * n], k, n)
                  for r in range(reps)])
    var = Hadamard(eps).variance(f, n)
    assert (np.abs(z.mean(axis=0) - f) <= 5 * np.sqrt(var / reps)).all()
    assert (np.abs(z.var(axis=0, ddof=1) / var - 1) <= 5 * math.sqrt(2 / (reps - 1))).all()
    big = Hadamard(eps).estimate(s[:n], bit[:n], 100, n)  # FWHT path = direct path
    direct = (hadamard.entry(np.arange(128)[:, None], np.arange(100)[None, :]) *
              np.bincount(s[:n], weights=Hadamard(eps).scale * (2.0 * bit[:n] - 1),
                          minlength=128)[:, None]).sum(0) / n
    assert np.allclose(big, direct)


def test_olh_oracle_unbiased_with_its_variance():
    n, k, reps, eps = 400, 20, 400, LN3
    vals = np.minimum(np.arange(n) // 15, k - 1)
    f = np.bincount(vals, minlength=k) / n
    agents = np.arange(reps * n)
    u = rngm.uniform(KEY, agents, 0, 2)
    seeds = (rngm.bits(KEY, agents, 0, 1, offset=2)[:, 0] >> np.uint64(32)).astype(np.int64)
    ys = OLH(eps).perturb(np.tile(vals, reps), seeds, u[:, 0], u[:, 1])
    g = OLH(eps).g
    assert g == 4  # ⌈e^{ln 3} + 1⌉
    z = np.stack([OLH(eps).estimate(OLH(eps).support_counts(
        seeds[r * n:(r + 1) * n], ys[r * n:(r + 1) * n], k), n) for r in range(reps)])
    var = OLH(eps).variance(f, n)
    assert (np.abs(z.mean(axis=0) - f) <= 5 * np.sqrt(var / reps)).all()
    assert (np.abs(z.var(axis=0, ddof=1) / var - 1) <= 5 * math.sqrt(2 / (reps - 1))).all()


def test_theorem5_condition_is_eq7_below_eq8():
    for eps in (0.2, LN3, 2.0, 4.0):
        for n_attrs in (1, 3, 10, 45):
            bound = safa.safa_beats_harmony_bound(eps, n_attrs)
            for k in range(2, 400):
                better = safa.variance_theorem4(eps, k, n_attrs, 1000) < \
                    safa.harmony_variance_eq8(eps, n_attrs, 1000)
                if abs(k - bound) > 1e-9:
                    assert better == (k < bound)


# ----------------------------------------------------------- likelihoods, privacy, batching


def all_reports(oracle: str, k: int, eps: float) -> np.ndarray:
    if oracle == "safa":
        return np.arange(k)[:, None]
    kp = hadamard.order(k)
    return np.array([(s, b) for s in range(kp) for b in (0, 1)])


@pytest.mark.parametrize("oracle", ["safa", "harmony"])
def test_log_likelihood_is_a_distribution_with_ratio_e_eps(oracle):
    eps, k = 0.8, 6
    reps = all_reports(oracle, k, eps)
    lik = np.stack([np.exp(safa.log_likelihood(oracle, reps, np.full(len(reps), v),
                                               np.full(len(reps), k), eps)) for v in range(k)])
    assert np.allclose(lik.sum(axis=1), 1.0)
    ratio = np.log(lik.max(axis=0) / lik.min(axis=0))
    assert ratio.max() == pytest.approx(eps)
    bad = np.array([[k + 3, 0]])[:, :reps.shape[1]]
    assert safa.log_likelihood(oracle, bad, np.array([0]), np.array([k]), eps)[0] == -np.inf


def test_safari_log_likelihood_matches_reports_and_bounds_the_privacy_loss():
    d, n = 5, 60_000
    params = SAFARI.resolve({"epsilon": 1.2}, {"d": d, "n": n})
    chain = {"chain": [[3], [0, 4], [1, 2]]}
    rows = np.tile(np.array([[4, 0, 1, 2, 3]]), (n, 1))
    bound = SAFARI.bind(params, {"d": d, "n": n}, resolved=True)
    for rnd, n_attrs, bc in ((0, d, None), (1, 4, chain)):
        q = np.full((n, 1), n_attrs - 1)
        rep = SAFARI.respond(Block(rnd, rows, np.arange(n), KEY, bound, queries=q, broadcast=bc))
        k = int(rep.max()) + 1
        cand = np.arange(k)[:, None]
        ll = SAFARI.log_likelihood(Block(rnd, rows[:k], bound=bound,
                                         queries=np.full((k, 1), n_attrs - 1), broadcast=bc), cand)
        freq = np.bincount(rep[:, 0], minlength=k) / n
        p = np.exp(ll)
        assert (np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n)).all()
        other = np.tile(np.array([[0, 1, 2, 3, 4]]), (k, 1))
        ll2 = SAFARI.log_likelihood(Block(rnd, other, bound=bound,
                                          queries=np.full((k, 1), n_attrs - 1), broadcast=bc), cand)
        assert np.abs(ll - ll2).max() <= 1.2 / 2 + 1e-12  # ε/2 per round (Theorem 6)


CASES = [("safari", {}, 0), ("safari", {}, 1), ("safari", {"oracle": "harmony"}, 1),
         ("safari", {"rule1": "calm"}, 0), ("safari", {"rule1": "naive"}, 0),
         ("safari_nopriv", {}, 0), ("rank_grr", {}, 0), ("rank_olh", {}, 0),
         ("rank_harmony", {}, 0), ("rank_calm", {}, 0)]


@pytest.mark.parametrize("name,extra,rnd", CASES)
def test_batched_respond_equals_per_agent(name, extra, rnd):
    proto = PROTOCOLS[name]
    d, n = 5, 40
    public = {"d": d, "m": d, "n": n}
    params = proto.resolve(extra, public)
    data = rankings(n, d, 3)
    agents = np.arange(100, 100 + n)
    bc = {"chain": [[3], [0, 4], [1, 2]]} if rnd == 1 else None
    queries = None
    if name == "safari":
        n_attrs = {0: {"lade": 5, "naive": 30, "calm": 10}[params["rule1"]], 1: 4}[rnd]
        queries = (np.arange(n) % n_attrs)[:, None]
    elif name == "rank_calm":
        queries = (np.arange(n) % 10)[:, None]
    bound = proto.bind(params, public, resolved=True)
    batched = proto.respond(Block(rnd, data, agents, KEY, bound, queries=queries, broadcast=bc))
    block = Block(rnd, data, agents, KEY, bound, queries=queries, broadcast=bc)
    single = np.concatenate([proto.respond(block.take(slice(i, i + 1))) for i in range(n)])
    assert batched.shape[0] == n and (batched == single).all()
    ll = proto.log_likelihood(Block(rnd, data, bound=bound, queries=queries, broadcast=bc),
                              batched)
    assert ll is not None and np.isfinite(ll).all()


def test_curator_ignores_and_counts_out_of_domain_reports():
    d = 5
    public = {"d": d, "m": d, "n": 50}
    params = SAFARI.resolve({"K": 2}, public)
    cur = SAFARI.make_curator(SAFARI.bind(params, public, resolved=True), np.arange(50), 7)
    plan = cur.plan(0)
    assert plan.schema.high == d - 1 and (plan.queries[:, 0] < d).all()
    cur.absorb(0, plan.agents, np.zeros((50, 1), dtype=np.int64))
    plan1 = cur.plan(1)
    chain = Chain.of(plan1.broadcast["chain"])
    assert [len(leaf) for leaf in chain.leaves] == [2, 2, 1]
    dom = cur.rules[1].domains[plan1.queries[:, 0]]
    assert plan1.schema.high == dom.max() - 1
    reports = np.where(dom == 2, 5, 0)[:, None]  # in the schema, outside a 2-value domain
    reports[:, 0] = np.minimum(reports[:, 0], plan1.schema.high)
    bad = int(((dom == 2) & (reports[:, 0] >= 2)).sum())
    assert bad > 0
    cur.absorb(1, plan1.agents, reports)
    assert cur.stats["out_of_domain"] == [0, bad]
    assert cur.stats["reports"] == [50, 50 - bad]
    out = cur.finish()
    assert out["synthetic_valid"] == 50


def test_hadamard_orders_equal_order_of_each_entry():
    k = np.concatenate([np.arange(-3, 2100), [2**31 - 1, 2**31, 2**31 + 1, 2**40 + 3, 2**62]])
    assert hadamard.orders(k, k.shape).tolist() == [hadamard.order(int(x)) for x in k]
    assert hadamard.orders(24, (3,)).tolist() == [32, 32, 32]
    assert hadamard.orders(np.zeros(0, dtype=np.int64), (0,)).shape == (0,)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
@pytest.mark.parametrize("domain", [1, 5, 24, 300])
def test_olh_support_counts_equal_counting_every_hash(domain, chunk):
    """The blocked, in-place count is the plain definition: for every value, the reports whose
    seed hashes it to their bucket (buckets outside [0, g) match nothing)."""
    o = OLH(1.0)
    n = 500
    seeds = (rngm.bits(KEY, np.arange(n), 0, 1)[:, 0] >> np.uint64(32)).astype(np.int64)
    ys = rngm.party_generator(5).integers(-2, o.g + 2, n)
    h = np.stack([hash_values(seeds, np.full(n, v), o.g) for v in range(domain)], axis=1)
    want = (h == ys[:, None]).sum(axis=0)
    assert o.support_counts(seeds, ys, domain, chunk=chunk).tolist() == want.tolist()
    assert o.support_counts(seeds[:0], ys[:0], domain).tolist() == [0] * domain


@pytest.mark.parametrize("oracle", ["safa", "harmony", "olh"])
@pytest.mark.parametrize("k", [2, 24, 720])
def test_one_domain_for_all_users_gives_the_per_user_domains_reports(oracle, k):
    """The full-domain protocols pass one k for every user: the reports and the domain check
    must be those of the same k given per user."""
    n = 3000
    gen = rngm.party_generator(k)
    values = gen.integers(0, k, n)
    u = rngm.uniform(rngm.stream_key(2, "agents"), np.arange(n), 0, 2)
    seeds = gen.integers(0, 2**63, n, dtype=np.uint64)
    one = safa.perturb(oracle, values, k, 1.5, u, seeds)
    each = safa.perturb(oracle, values, np.full(n, k), 1.5, u, seeds)
    assert np.array_equal(one, each)
    bad = one.copy()
    bad[::5, -1] = -1
    assert np.array_equal(safa.valid_reports(oracle, bad, k, 1.5),
                          safa.valid_reports(oracle, bad, np.full(n, k), 1.5))
