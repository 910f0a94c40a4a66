"""Tests of ``protocols.mechanisms``: randomized response (the Laplace mechanism is tested in
``test_laplace.py``, its sampler in ``test_dlap.py``).

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
