"""t-ary randomized response of Yan, Liu & Liu, 2018 (``protocols.mechanisms.GRR``): Theorems
4.1/4.2, the closed-form inverse of Eq. (2)/(3)/(5), and the randomizer's law, tested exactly where
the mathematics is exact and statistically (5 standard errors) where it is random."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.mechanisms import GRR
from ldpsim.protocols.mechanisms.grr import epsilon_of

Z = 5.0
KEY = rngm.stream_key(11, "agents")


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.5, 10.0])
def test_keep_probability_is_theorem_4_1_and_4_2(eps):
    assert GRR(eps, 2).p == pytest.approx(1 / (1 + math.exp(-eps)), rel=1e-14)
    assert GRR(eps, 2).p == pytest.approx(math.exp(eps) / (1 + math.exp(eps)))
    assert GRR(eps, 3).p == pytest.approx(math.exp(eps) / (2 + math.exp(eps)))
    assert GRR(eps, 3).q == pytest.approx(1 / (2 + math.exp(eps)))
    for t in (2, 3, 5):
        p, r = GRR(eps, t).p, GRR(eps, t).q
        assert p + (t - 1) * r == pytest.approx(1.0, abs=1e-15)
        assert epsilon_of(p, t) == pytest.approx(eps, rel=1e-9)


def test_paper_values_eq_9():
    # eps = 0.1 split evenly: eps1 = eps2 = 0.05 (Sec. 5.1.1).
    e = math.exp(0.05)
    assert GRR(0.05, 3).p == pytest.approx(e / (2 + e))
    assert GRR(0.05, 3).p == pytest.approx(0.344535, abs=1e-6)
    assert GRR(0.05, 2).p == pytest.approx(0.512497, abs=1e-6)


def test_keep_probability_huge_epsilon_and_bad_t():
    assert GRR(1000.0, 3).p == 1.0
    assert GRR(1000.0, 3).q == 0.0
    assert epsilon_of(1.0, 3) == math.inf
    with pytest.raises(ValueError, match="k >= 1"):
        GRR(1.0, 0)
    with pytest.raises(ValueError, match="epsilon >= 0"):
        GRR(-1.0, 3)
    # k = 1: one possible value, always reported as it is
    assert GRR(1.0, 1).p == 1.0 and GRR(1.0, 1).q == 0.0
    assert GRR(1.0, 1).perturb(np.zeros(4, dtype=np.int64), np.full(4, 0.99)).tolist() == [0] * 4


@pytest.mark.parametrize("t", [2, 3, 4, 6])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_matrix_is_stochastic_with_privacy_ratio_eps(t, eps):
    m = GRR(eps, t).matrix()
    assert np.allclose(m.sum(axis=0), 1.0)
    assert np.allclose(m, m.T)
    # Sec. 4.5: the largest ratio P(report i | a) / P(report i | b) over i, a, b is e^eps.
    ratios = m[:, :, None] / m[:, None, :]
    assert np.log(ratios.max()) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("t", [2, 3, 5])
@pytest.mark.parametrize("eps", [0.05, 1.0, 7.0])
def test_closed_form_inverse(t, eps):
    inv = GRR(eps, t).inverse_matrix()
    assert np.allclose(inv @ GRR(eps, t).matrix(), np.eye(t), atol=1e-9)
    assert np.allclose(inv, np.linalg.inv(GRR(eps, t).matrix()), rtol=1e-9, atol=1e-9)


def test_worked_inverses():
    # eps = ln 2, t = 3: p = 1/2, r = 1/4, M^-1 = (I - J/4) / (1/4) = 4I - J.
    assert GRR(math.log(2), 3).p == pytest.approx(0.5)
    assert np.allclose(GRR(math.log(2), 3).inverse_matrix(), 4 * np.eye(3) - 1)
    # eps = ln 2, t = 2: p = 2/3, r = 1/3, M^-1 = 3I - J.
    assert np.allclose(GRR(math.log(2), 2).inverse_matrix(), 3 * np.eye(2) - 1)
    # Eq. (2): x = M^-1 y; y = (6, 6, 3) -> 4y - 15 = (9, 9, -3).
    assert np.allclose(GRR(math.log(2), 3).estimate_counts([6, 6, 3]), [9, 9, -3])
    # leading axes are independent vectors
    assert np.allclose(GRR(math.log(2), 3).estimate_counts([[6, 6, 3], [5, 5, 5]]),
                       [[9, 9, -3], [5, 5, 5]])


def test_randomize_edges_are_exact():
    p, r = GRR(1.0, 3).p, GRR(1.0, 3).q
    v = np.array([0, 0, 0, 1, 1, 2, 2])
    u = np.array([p / 2, p + r / 2, 1 - 1e-16, p + r / 2, p + 1.5 * r, p + r / 2, 1 - 1e-16])
    # keep, 1st other (=1), 2nd other (=2), 1st other of 1 (=0), 2nd other of 1 (=2),
    # 1st other of 2 (=0), 2nd other of 2 (=1)
    assert GRR(1.0, 3).perturb(v, u).tolist() == [0, 1, 2, 0, 2, 0, 1]
    # floating-point truthful limit
    assert GRR(1000.0, 3).perturb(v, np.full(7, 1 - 1e-16)).tolist() == v.tolist()


@pytest.mark.parametrize("t,eps", [(3, 1.0), (3, 0.2), (2, 0.7), (4, 2.0)])
def test_randomize_follows_the_matrix(t, eps):
    n = 40_000
    m = GRR(eps, t).matrix()
    for v in range(t):
        u = rngm.uniform(KEY, np.arange(v * n, (v + 1) * n), 0, 1)[:, 0]
        rep = GRR(eps, t).perturb(np.full(n, v), u)
        freq = GRR(1.0, t).counts(rep) / n
        se = np.sqrt(m[:, v] * (1 - m[:, v]) / n)
        assert np.all(np.abs(freq - m[:, v]) < Z * se), (v, freq, m[:, v])


def test_log_likelihood_is_the_matrix():
    for t, eps in ((3, 0.4), (2, 1.3)):
        m = GRR(eps, t).matrix()
        reps, vals = np.meshgrid(np.arange(t), np.arange(t), indexing="ij")
        ll = GRR(eps, t).log_likelihood(reps, vals)
        assert np.allclose(np.exp(ll), m)
        assert np.allclose(np.exp(ll).sum(axis=0), 1.0)
    assert GRR(1.0, 3).log_likelihood(np.array([3, -1, 0.5]), np.array([0, 0, 0])).tolist() == [
        -math.inf] * 3
    assert GRR(1000.0, 3).log_likelihood(np.array([0, 1]), np.array([0, 0])).tolist() == [
        0.0, -math.inf]


def _replicated_counts(x: np.ndarray, eps: float, t: int, reps: int) -> np.ndarray:
    """Counts y of ``reps`` independent populations with true counts x (distinct agent ids)."""
    n = int(x.sum())
    values = np.tile(np.repeat(np.arange(t), x), reps)
    agents = np.arange(reps * n)
    rep = GRR(eps, t).perturb(values, rngm.uniform(KEY, agents, 3, 1)[:, 0])
    return np.bincount((agents // n) * t + rep, minlength=reps * t).reshape(reps, t)


@pytest.mark.parametrize("t,x,eps", [(3, (30, 50, 20), 1.0), (3, (5, 0, 95), 0.3),
                                     (2, (40, 60), 0.8)])
def test_estimate_is_unbiased_with_the_stated_variance(t, x, eps):
    x = np.asarray(x)
    reps = 4000
    xh = GRR(eps, t).estimate_counts(_replicated_counts(x, eps, t, reps))
    var = GRR(eps, t).count_variance(x)
    assert np.all(np.abs(xh.mean(axis=0) - x) < Z * np.sqrt(var / reps))
    # sample variance against theory; its standard error from the sample fourth moment
    d = xh - xh.mean(axis=0)
    s2 = (d**2).sum(axis=0) / (reps - 1)
    se = np.sqrt(((d**4).mean(axis=0) - s2**2) / reps)
    assert np.all(np.abs(s2 - var) < Z * se), (s2, var, se)
    # the estimates always sum to the number of reports
    assert np.allclose(xh.sum(axis=1), x.sum())


@pytest.mark.parametrize("layout", ["ascending", "cyclic", "two-uniforms"])
@pytest.mark.parametrize("t,eps", [(3, 1.0), (5, 0.3), (2, 2.0)])
def test_every_coin_layout_follows_the_matrix(layout, t, eps):
    """The three ways a family may spend its uniforms give the same law (5 standard errors)."""
    n = 30_000
    m = GRR(eps, t).matrix()
    for v in range(t):
        u = rngm.uniform(KEY, np.arange(v * n, (v + 1) * n), 5, 2)
        mech_ = GRR(eps, t)
        if layout == "two-uniforms":
            rep = mech_.perturb(np.full(n, v), u[:, 0], u[:, 1])
        else:
            rep = mech_.perturb(np.full(n, v), u[:, 0], others=layout)
        freq = mech_.counts(rep) / n
        se = np.sqrt(m[:, v] * (1 - m[:, v]) / n)
        assert np.all(np.abs(freq - m[:, v]) < Z * se), (layout, v, freq, m[:, v])


def test_array_epsilon_and_domains_are_per_value():
    """ε and k broadcast against the values: each value is randomised with its own law."""
    eps = np.array([[0.5], [3.0]])
    rr = GRR(eps, 4)
    assert np.allclose(rr.p, 1 / (1 + 3 * np.exp(-eps)))
    u = np.full((2, 3), 0.5)
    out = rr.perturb(np.zeros((2, 3), dtype=np.int64), u)
    # p(0.5) = 0.354 < 0.5 <= p(3) = 0.870: row 0 is flipped, row 1 kept
    assert out[1].tolist() == [0, 0, 0] and (out[0] != 0).all()
    k = np.array([1, 2, 7])
    assert GRR(1.0, k).perturb(np.zeros(3, dtype=np.int64), np.full(3, 0.9999),
                               np.full(3, 0.9999)).tolist() == [0, 1, 6]
    with pytest.raises(ValueError, match="others"):
        GRR(1.0, 3).perturb(np.zeros(2, dtype=np.int64), np.full(2, 0.9), others="random")


@pytest.mark.parametrize("t", [1, 2, 3, 24, 720])
@pytest.mark.parametrize("eps", [0.0, 0.3, 2.0, 30.0, 40.0, 800.0])
@pytest.mark.parametrize("layout", ["ascending", "cyclic", "two-uniforms"])
def test_one_law_fast_path_gives_the_general_path_reports(t, eps, layout):
    """One ε and one k take ``_perturb_one_law``; the same values as arrays take the general
    path: every report must be the same, also for values outside [0, t) and at u's edges."""
    n = 4000
    gen = rngm.party_generator(t)
    v = gen.integers(-1, t + 1, (n, 2))
    u = rngm.uniform(KEY, np.arange(n), 1, 4).reshape(n, 2, 2)
    u[:5, 0, 0] = [1e-300, 0.5, 1 - 2**-53, GRR(eps, t).p, np.nextafter(GRR(eps, t).p, 0)]
    other = u[:, :, 1] if layout == "two-uniforms" else None
    kwargs = {} if layout == "two-uniforms" else {"others": layout}
    fast = GRR(eps, t).perturb(v, u[:, :, 0], other, **kwargs)
    general = GRR(np.full(v.shape, eps), np.full(v.shape, t)).perturb(v, u[:, :, 0], other,
                                                                      **kwargs)
    assert fast.dtype == general.dtype == np.int64
    assert np.array_equal(fast, general)
