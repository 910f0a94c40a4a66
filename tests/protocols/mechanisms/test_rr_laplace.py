"""Tests of ``protocols.mechanisms``: randomized response and the Laplace mechanism.

Randomness comes from ``protocols.rng`` with fixed keys; tolerances are 5 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng

KEY = rng.stream_key(99, "mechanism-tests")
Z = 5.0
EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]


def _uniforms(n: int, rnd: int = 0) -> np.ndarray:
    return rng.uniform(KEY, np.arange(n), rnd, 1)[:, 0]


def _test_bits(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, size=n)


def _binomial_se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


# --------------------------------------------------------------------------- RR, exact


def test_rr_keep_probability_values():
    assert mech.GRR(0.0).p == 0.5
    assert mech.GRR(math.log(3)).p == pytest.approx(0.75, abs=1e-15)
    assert mech.GRR(1.0).p == pytest.approx(math.e / (1 + math.e), abs=1e-15)
    assert mech.GRR(800.0).p == 1.0  # no overflow for huge epsilon
    ps = [mech.GRR(e).p for e in (0.1, 0.5, 1, 2, 5, 20)]
    assert all(a < b for a, b in zip(ps, ps[1:], strict=False))


@pytest.mark.parametrize("eps", EPSILONS)
def test_rr_ratio_is_exactly_e_eps(eps):
    p = mech.GRR(eps).p
    assert p / (1 - p) == pytest.approx(math.exp(eps), rel=1e-12)


def test_rr_keeps_exactly_when_u_below_p():
    eps = 1.0
    p = mech.GRR(eps).p
    u = np.array([1e-9, np.nextafter(p, 0), p, np.nextafter(p, 1), 1 - 1e-9])
    for bit in (0, 1):
        out = mech.GRR(eps).perturb(np.full(5, bit), u)
        assert out.tolist() == [bit, bit, 1 - bit, 1 - bit, 1 - bit]


# --------------------------------------------------------------------------- RR, statistical


@pytest.mark.parametrize("eps", EPSILONS)
def test_rr_keep_rate_matches_theory(eps):
    n = 200_000
    bits = _test_bits(n, seed=1)
    out = mech.GRR(eps).perturb(bits, _uniforms(n))
    assert set(np.unique(out).tolist()) <= {0, 1}
    p = mech.GRR(eps).p
    for b in (0, 1):
        sel = bits == b
        kept = (out[sel] == b).mean()
        assert abs(kept - p) <= Z * _binomial_se(p, sel.sum())


@pytest.mark.parametrize("eps", [0.25, 1.0, 2.0])
def test_rr_empirical_likelihood_ratio(eps):
    # P(out = y | in = y) / P(out = y | in = 1 - y) should be e^eps for both outputs y.
    # By the delta method, Var[log(q1 / q0)] ~ (1 - q1) / (n q1) + (1 - q0) / (n q0).
    n = 200_000
    p = mech.GRR(eps).p
    out1 = mech.GRR(eps).perturb(np.ones(n, dtype=np.int64), _uniforms(n, rnd=1))
    out0 = mech.GRR(eps).perturb(np.zeros(n, dtype=np.int64), _uniforms(n, rnd=2))
    for y in (0, 1):
        q_same = ((out1 if y == 1 else out0) == y).mean()
        q_other = ((out0 if y == 1 else out1) == y).mean()
        se = math.sqrt((1 - p) / (n * p) + p / (n * (1 - p)))
        assert abs(math.log(q_same / q_other) - eps) <= Z * se


# --------------------------------------------------------------------------- Laplace


def test_laplace_scale():
    assert mech.laplace_scale(1.0, 1.0) == 1.0
    assert mech.laplace_scale(2.0, 0.5) == 4.0
    assert mech.laplace_scale(1.0, 4.0) == 0.25


def test_laplace_mechanism_adds_inverse_cdf_noise():
    u = _uniforms(1000)
    values = np.arange(1000) % 2
    out = mech.laplace_mechanism(values, u, 2.0, 0.5)
    assert out.dtype == np.float64
    ideal = values + rng.laplace_from_uniform(u, 4.0)
    grid = 2.0 ** (2 - mech.GRID_BITS)  # b = 4 = 2^2
    assert np.abs(out - ideal).max() <= grid / 2
    assert np.array_equal(out, np.round(ideal / grid) * grid)


def test_snapped_laplace_hides_the_low_bits_of_the_input():
    """Mironov's attack: 0 + noise and 1 + noise land on different float grids unless snapped.

    With the same uniforms, every snapped output for input 1 is exactly 1 + the snapped output
    for input 0 (shifted grid, same cells), so no bit pattern tells the inputs apart.
    """
    u = _uniforms(20000)
    raw0, raw1 = rng.laplace_from_uniform(u, 1.0), 1.0 + rng.laplace_from_uniform(u, 1.0)
    def fine(x):  # has bits below 2^-53: impossible for 1 + noise, common for 0 + noise
        return np.modf(np.abs(x) * 2.0**53)[0] != 0

    assert fine(raw0).mean() > 0.2 and not fine(raw1).any()  # the leak
    s0 = mech.laplace_mechanism(np.zeros(20000), u, 1.0, 1.0)
    s1 = mech.laplace_mechanism(np.ones(20000), u, 1.0, 1.0)
    assert not fine(s0 * 2.0**33).any() and not fine(s1 * 2.0**33).any()  # on the 2^-20 grid
    assert (s1 - s0 != 1.0).mean() < 1e-3  # only ulp-boundary cases may differ


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_laplace_mechanism_noise_variance(eps):
    n = 200_000
    b = mech.laplace_scale(1.0, eps)
    noise = mech.laplace_mechanism(np.zeros(n), _uniforms(n, rnd=3), 1.0, eps)
    assert abs(noise.mean()) <= Z * math.sqrt(2 * b**2 / n)
    assert abs((noise**2).mean() - 2 * b**2) <= Z * math.sqrt(20 * b**4 / n)


def test_laplace_threshold_keep_probability_values():
    assert mech.laplace_threshold_keep_probability(0.0) == 0.5
    assert mech.laplace_threshold_keep_probability(2.0) == pytest.approx(1 - 0.5 / math.e)
    assert mech.laplace_threshold_keep_probability(200.0) == pytest.approx(1.0)


@pytest.mark.parametrize("eps", EPSILONS)
def test_laplace_threshold_keep_rate_matches_theory(eps):
    n = 200_000
    o = _test_bits(n, seed=2)
    noisy = mech.laplace_mechanism(o, _uniforms(n, rnd=4), 1.0, eps)
    decided = (noisy >= 0.5).astype(np.int64)
    p = mech.laplace_threshold_keep_probability(eps)
    for b in (0, 1):
        sel = o == b
        assert abs((decided[sel] == b).mean() - p) <= Z * _binomial_se(p, sel.sum())


def test_laplace_object_states_its_scale_and_law():
    lap = mech.Laplace(0.5, 2.0)
    assert lap.scale == 4.0 and lap.privacy == 0.5 and lap.bias() == 0.0
    assert lap.variance() == pytest.approx(32.0)
    assert mech.Laplace.with_scale(4.0).scale == 4.0
    # the density integrates to 1 and its log-ratio between neighbours is at most ε
    y = np.linspace(-200, 200, 400_001)
    dens = np.exp(lap.log_likelihood(y, 0.0))
    assert np.trapezoid(dens, y) == pytest.approx(1.0, abs=1e-6)
    ratio = lap.log_likelihood(y, 0.0) - lap.log_likelihood(y, 2.0)
    assert np.abs(ratio).max() == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(ValueError):
        mech.Laplace(0.0)


def test_laplace_object_release_is_snapped_and_has_its_variance():
    lap = mech.Laplace(1.0, 1.0)
    n = 200_000
    u = _uniforms(n, rnd=7)
    out = lap.perturb(np.full(n, 3.0), u)
    assert np.array_equal(out, mech.snap_to_grid(out, 1.0))  # on the grid already
    assert np.array_equal(out, mech.snapped_laplace(np.full(n, 3.0), u, 1.0))
    se_mean = math.sqrt(2.0 / n)
    assert abs(out.mean() - 3.0) < 5 * se_mean
    # Var of a sample variance of Laplace(b): (μ4 - σ^4) / n with μ4 = 24 b^4
    assert abs(out.var() - lap.variance()) < 5 * math.sqrt((24.0 - 4.0) / n)
    gen_a = np.random.default_rng(3)
    gen_b = np.random.default_rng(3)
    central = lap.perturb_from(gen_a, np.zeros(5))
    assert np.array_equal(central, mech.snap_to_grid(gen_b.laplace(0.0, 1.0, 5), 1.0))
