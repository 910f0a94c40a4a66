"""The exact Laplace mechanism (``protocols.mechanisms.Laplace``): the discrete Laplace on the grid
Λ = Δ / (⌊εt⌋ + 1/2 - 5c/4).

The privacy claim is pinned at its boundary, exactly: for neighbouring inputs at distance Δ
(and every float rounding case we can construct) the largest log-ratio of the output pmf is
⌊εt⌋/t, at most ε and above ε - 1/t. The law of the release is checked exactly at a small
scale t = 4 and statistically at t = 2^20 (5 standard errors). The sampler itself is tested in
``test_dlap.py``, the attack on the support in ``test_laplace_support.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng
from ldpsim.protocols.mechanisms.laplace import LATTICE_LIMIT, T
from ldpsim.protocols.words import AgentWords, GeneratorWords

from tests.conftest import each_implementation

implementation = each_implementation(mech.dlap.DLAP)

KEY = rng.stream_key(99, "laplace-tests")
Z = 5.0
EPSILONS = [0.1, 0.5, 1.0, 1.0 + 2.0**-21, 2.0, 4.0, 7.3]


def _words(n: int, rnd: int = 0) -> AgentWords:
    return AgentWords(KEY, np.arange(n), rnd)


def _max_log_ratio(lap: mech.Laplace, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per pair (row), the largest |log P(y | v) - log P(y | w)| over all outputs y, from the
    stated log-pmf at the outputs where it is reached (beyond both inputs' grid points, summed
    over the components) and a few others."""
    k, kw = lap.lattice(v), lap.lattice(w)
    lo, hi = np.minimum(k, kw) - 3, np.maximum(k, kw) + 3
    worst = np.zeros(len(v))
    for n in (lo, hi, (k + kw) // 2, k, kw):
        y = n * lap.grid
        d = lap.log_likelihood(y, v) - lap.log_likelihood(y, w)
        worst = np.maximum(worst, np.abs(d.sum(axis=1)))
    return worst


# ----------------------------------------------------------------- ε, pinned at the boundary


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("sens", [1.0, 2.0, 0.37])
def test_neighbours_at_distance_delta_reach_floor_eps_t_and_no_more(eps, sens):
    lap = mech.Laplace(eps, sens)
    lam, f = lap.grid, math.floor(eps * T)
    assert lam == sens / (f - 0.75)
    assert lap.privacy.delivered == f / T and eps - 1 / T < lap.privacy.delivered <= eps
    # the worst case: v/Λ just below a half-integer, v' = v + Δ just below F + 1/2
    v = np.array([[(0.5 - 2.0**-20) * lam], [-(0.5 - 2.0**-20) * lam - sens],
                  [(37.5 - 2.0**-19) * lam]])
    w = v + sens
    assert np.abs(lap.lattice(w) - lap.lattice(v)).max() == f
    ratio = _max_log_ratio(lap, v, w)
    assert ratio.max() == pytest.approx(f / T, abs=1e-12) and ratio.max() <= eps


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_no_neighbours_exceed_the_claim_in_a_million_rounding_cases(eps):
    """Random inputs over a wide range and near |v/Λ| = 2^50 (where float64 rounds v/Λ by up to
    1/8), neighbours at distance Δ exactly and below: |k - k'| <= ⌊εt⌋ always, the bound the
    docstring proves, and it is reached."""
    sens = 1.3
    lap = mech.Laplace(eps, sens)
    g = np.random.default_rng(int(eps * 10))
    n = 1_000_000
    scale = np.concatenate([np.full(n // 2, 1e3 * sens),
                            np.full(n // 2, 0.999 * LATTICE_LIMIT * lap.grid)])
    v = g.uniform(-1, 1, n) * (scale - 2 * sens)
    frac = np.where(g.random(n) < 0.5, 1.0, g.random(n))
    w = v + np.where(g.random(n) < 0.5, 1, -1) * frac * sens
    gap = np.abs(lap.lattice(v) - lap.lattice(w))
    assert gap.max() == math.floor(eps * T)


@pytest.mark.parametrize("c", [2, 3, 10])
def test_vector_neighbours_share_the_budget(c):
    """c components sharing the L1 sensitivity: Σ|k_j - k'_j| <= ⌊εt⌋ for vectors at L1
    distance Δ, with the difference spread over the components in every proportion."""
    eps, sens = 0.8, 2.0
    lap = mech.Laplace(eps, sens, components=c)
    assert lap.grid == sens / (math.floor(eps * T) + 0.5 - 1.25 * c)
    g = np.random.default_rng(c)
    n = 200_000
    v = g.uniform(-50, 50, (n, c))
    share = g.dirichlet(np.full(c, 0.3), n)
    w = v + sens * share * np.where(g.random((n, c)) < 0.5, 1, -1)
    # worst rounding: every component just below a half-integer step
    v[:1000] = (np.rint(v[:1000] / lap.grid) + 0.5 - 2.0**-20) * lap.grid
    w[:1000] = v[:1000] + sens * share[:1000]
    gap = np.abs(lap.lattice(v) - lap.lattice(w)).sum(axis=1)
    assert gap.max() <= math.floor(eps * T)
    assert gap.max() >= math.floor(eps * T) - c  # and the loss is within c/t of ε
    assert _max_log_ratio(lap, v[:50], w[:50]).max() <= eps


def test_per_row_epsilon_arrays():
    """One ε per row (the ethics family's voters): each row's grid, and each row's neighbours
    reach ⌊ε_i t⌋/t <= ε_i."""
    eps = np.array([0.3, 1.0, 2.5])[:, None]
    lap = mech.Laplace(eps, 2.0, components=1)
    assert lap.grid.shape == (3, 1) and lap.privacy.delivered == math.floor(2.5 * T) / T
    v = (0.5 - 2.0**-20) * lap.grid
    ratio = _max_log_ratio(lap, v, v + 2.0)
    np.testing.assert_allclose(ratio, np.floor(eps[:, 0] * T) / T, atol=1e-12)
    assert (ratio <= eps[:, 0]).all() and (ratio > eps[:, 0] - 1 / T).all()


def test_small_scale_exhaustive_ratio():
    """t = 4, ε = 1.5 (εt = 6): over a fine scan of inputs and their neighbours at distance
    <= Δ, every output's pmf ratio is at most e^(6/4), and the bound is reached."""
    lap = mech.Laplace(1.5, 1.0, _t=4)
    assert lap.grid == 1.0 / 5.25
    v = np.linspace(-3, 3, 60_001)[:, None]
    worst = 0.0
    for d in (1.0, 0.999, 0.5, -1.0):
        worst = max(worst, _max_log_ratio(lap, v, v + d).max())
    assert worst == pytest.approx(1.5, abs=1e-12)


def test_refuses_what_the_argument_does_not_cover():
    with pytest.raises(ValueError, match="epsilon > 0"):
        mech.Laplace(0.0)
    with pytest.raises(ValueError, match="too small"):
        mech.Laplace(5e-7)  # ⌊εt⌋ = 0: no room for the rounding of 5/4
    assert mech.Laplace(1e-6).grid == 4.0  # ⌊εt⌋ = 1: Λ = Δ / (1 + 1/2 - 5/4)
    with pytest.raises(ValueError, match="too small"):
        mech.Laplace(1e-4, components=100)
    mech.Laplace(1e-4, components=80)  # ⌊εt⌋ = 104 > 5 80 / 4 - 1/2
    with pytest.raises(ValueError, match="below 2"):
        mech.Laplace(2.0**30)
    with pytest.raises(ValueError, match="components"):
        mech.Laplace(1.0, components=0)
    with pytest.raises(ValueError, match="power of two"):
        mech.Laplace(1.0, _t=3)
    lap = mech.Laplace(1.0)
    for bad in (np.nan, np.inf, LATTICE_LIMIT * lap.grid):
        with pytest.raises(ValueError, match="2\\^50"):
            lap.perturb(np.array([0.0, bad]), _words(2))


# ------------------------------------------------------------------------- the law


def test_log_likelihood_is_the_exact_pmf():
    lap = mech.Laplace(0.5, 1.0, _t=4)  # εt = 2, Λ = 1 / 1.25
    a = math.exp(-0.25)
    zs = np.arange(-300, 301)
    v = 0.3  # k = rint(0.375) = 0
    y = zs * lap.grid
    p = np.exp(lap.log_likelihood(y, v))
    np.testing.assert_allclose(p, (1 - a) / (1 + a) * a ** np.abs(zs), rtol=1e-12)
    assert p.sum() == pytest.approx(1 - 2 * a**301 / (1 + a), rel=1e-12)
    off = np.array([y[5] + lap.grid / 2, np.nextafter(y[7], 0.0), np.nan, np.inf])
    assert (lap.log_likelihood(off, v) == -np.inf).all()


def test_release_is_the_grid_point_of_the_value_plus_the_sampled_noise():
    lap = mech.Laplace(1.0, 1.0)
    n = 2000
    v = np.random.default_rng(2).uniform(-5, 5, (n, 3))
    out = lap.perturb(v, _words(n, 3))
    z = mech.dlap.sample(_words(n, 3), n, 3, T)
    assert np.array_equal(out, (np.rint(v / lap.grid) + z) * lap.grid)
    assert np.array_equal(out, lap.from_noise(v, z))
    n_back = np.rint(out / lap.grid)
    assert np.array_equal(n_back * lap.grid, out)  # every release maps back to its integer
    assert np.array_equal(n_back - np.rint(v / lap.grid), z)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_release_mean_and_variance(eps):
    lap = mech.Laplace(eps, 1.0)
    n = 300_000
    v = 3.0 + 0.1234567
    out = lap.perturb(np.full(n, v), _words(n, 4))
    var = lap.variance()
    a = math.exp(-1 / T)
    assert var == pytest.approx(lap.grid**2 * 2 * a / (1 - a) ** 2, rel=1e-9)
    assert var == pytest.approx(2 * (1.0 / eps) ** 2, rel=5e-6)  # about 2 b²
    assert lap.mean(v) == np.rint(v / lap.grid) * lap.grid
    assert abs(lap.bias(v)) <= lap.grid / 2 and lap.bias(v) == lap.mean(v) - v
    assert abs(out.mean() - lap.mean(v)) <= Z * math.sqrt(var / n)
    assert abs(out.var() - var) <= Z * math.sqrt(20 * (var / 2) ** 2 / n)


def test_variance_is_exact_at_a_small_scale():
    lap = mech.Laplace(0.5, 1.0, _t=4)
    zs = np.arange(-2000, 2001)
    p = np.exp(lap.log_likelihood(zs * lap.grid, 0.0))
    assert (p * (zs * lap.grid) ** 2).sum() == pytest.approx(lap.variance(), rel=1e-12)


def test_threshold_probabilities_are_exact():
    """P(release >= threshold) summed from the pmf at t = 4 equals ``prob_at_least``; at
    t = 2^20 the keep probabilities of LDP-KwikSort:Lap are the continuous 1 - e^(-ε/2)/2 to
    within 1e-5, and the sampled rates match them (5 SE)."""
    lap = mech.Laplace(0.5, 1.0, _t=4)
    zs = np.arange(-400, 401)
    for v in (0.0, 1.0, 0.37):
        k = np.rint(v / lap.grid)
        y = (k + zs) * lap.grid
        p = np.exp(lap.log_likelihood(y, v))
        for thr in (0.5, 0.0, -1.3, 2.4, y[410]):
            assert lap.prob_at_least(v, thr) == pytest.approx(p[y >= thr].sum(), abs=1e-12)
    n = 200_000
    for eps in (0.5, 2.0):
        keep0, keep1 = mech.laplace_threshold_keep_probabilities(eps)
        ideal = 1 - 0.5 * math.exp(-eps / 2)
        assert keep0 == pytest.approx(ideal, abs=1e-5) and keep1 == pytest.approx(ideal, abs=1e-5)
        lap = mech.Laplace(eps, 1.0)
        for o, keep in ((0.0, keep0), (1.0, keep1)):
            out = lap.perturb(np.full(n, o), _words(n, 5 + int(o)))
            kept = (out >= 0.5) == bool(o)
            assert abs(kept.mean() - keep) <= Z * math.sqrt(keep * (1 - keep) / n)


def test_scale_grid_and_spec():
    lap = mech.Laplace(0.5, 2.0)
    assert mech.laplace_scale(2.0, 0.5) == 4.0
    assert lap.scale == T * lap.grid and lap.scale == pytest.approx(4.0, rel=5e-6)
    values, scales, grids = lap.release_spec(np.zeros((4, 3)))
    assert values.shape == scales.shape == grids.shape == (4, 3)
    assert (grids == lap.grid).all() and (scales == lap.scale).all()


def test_central_release_from_a_generator_is_deterministic():
    lap = mech.Laplace(1.0, 2.0, components=3)
    a = lap.perturb_from(np.random.default_rng(3), np.array([1.0, -2.0, 0.5]))
    b = lap.perturb(np.array([1.0, -2.0, 0.5]), GeneratorWords(np.random.default_rng(3)))
    c = lap.perturb_from(np.random.default_rng(4), np.array([1.0, -2.0, 0.5]))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(np.rint(a / lap.grid) * lap.grid, a)
    scalar = lap.perturb_from(np.random.default_rng(3), 1.0)
    assert np.ndim(scalar) == 0 and scalar == a[0]
