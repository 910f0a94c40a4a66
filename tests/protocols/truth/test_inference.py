"""Algorithm 1 of Sun et al., 2018 (Eq. 1-3): exact checks on hand-made answers, its fixed point,
and a statistical check that it recovers the workers' error deviations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.truth.inference import SIGMA_FLOOR, infer_truth, mae, truths

NAN = np.nan


def _loop_sigma(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Eq. (2) written with explicit loops (the reference for the vectorised form)."""
    out = []
    for row in x:
        res = [(a - m) ** 2 for a, m in zip(row, mu, strict=True) if not math.isnan(a)]
        out.append(math.sqrt(sum(res) / len(res)) if res else math.nan)
    return np.array(out)


def test_eq1_weighted_mean_by_hand():
    x = np.array([[1.0, NAN, 3.0], [2.0, 4.0, NAN], [NAN, 8.0, 5.0]])
    mask = np.isfinite(x)
    q = np.array([0.5, 0.25, 0.25])
    mu = truths(np.where(mask, x, 0.0), mask.astype(float), q)
    # task 0: (0.5*1 + 0.25*2)/0.75; task 1: (0.25*4 + 0.25*8)/0.5; task 2: (0.5*3 + 0.25*5)/0.75
    assert mu == pytest.approx([1.0 / 0.75, 6.0, 2.75 / 0.75], abs=1e-15)


def test_first_iteration_is_plain_mean_then_eq2_qualities():
    x = np.array([[1.0, 2.0, NAN, 0.0], [3.0, 2.0, 1.0, NAN], [2.0, NAN, 4.0, 1.0]])
    res = infer_truth(x, max_iter=1)
    assert res.iterations == 1 and not res.converged
    # q_i = 1/m for every worker: Eq. (1) is the plain mean of each column's answers
    assert res.mu == pytest.approx([2.0, 2.0, 2.5, 0.5], abs=1e-15)
    sigma = _loop_sigma(x, res.mu)
    assert res.sigma == pytest.approx(sigma, abs=1e-12)
    q = 1.0 / sigma
    assert res.quality == pytest.approx(q / q.sum(), abs=1e-12)
    assert res.quality.sum() == pytest.approx(1.0)


def test_converged_result_is_a_fixed_point_of_eq1_and_eq2():
    u = rngm.uniform(9, np.arange(40), 0, 30)
    x = np.floor(u * 10)
    x[rngm.uniform(9, np.arange(40), 1, 30) < 0.6] = np.nan
    x[:, 0] = 3.0  # every worker answers task 0
    res = infer_truth(x, tol=1e-12, max_iter=10000)
    assert res.converged
    mask = np.isfinite(x)
    again = truths(np.where(mask, x, 0.0), mask.astype(float), res.quality)
    assert again == pytest.approx(res.mu, abs=1e-10)
    sigma = _loop_sigma(x, res.mu)
    q = 1.0 / np.maximum(sigma, SIGMA_FLOOR)
    assert res.quality == pytest.approx(q / q.sum(), rel=1e-8)


def test_null_handling_unanswered_task_and_silent_worker():
    x = np.array([[1.0, NAN, NAN], [3.0, NAN, 5.0], [NAN, NAN, NAN]])
    res = infer_truth(x, max_iter=50)
    assert res.quality[2] == 0.0 and math.isnan(res.sigma[2])
    assert np.isfinite(res.mu).all()
    # the unanswered task gets the weighted mean of all answers
    q = res.quality
    fallback = (q[0] * 1 + q[1] * 3 + q[1] * 5) / (q[0] + 2 * q[1])
    assert res.mu[1] == pytest.approx(fallback)
    assert res.quality.sum() == pytest.approx(1.0)


def test_perfect_worker_gets_floored_sigma_not_infinite_weight():
    x = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [5.0, 0.0, 9.0]])
    res = infer_truth(x, max_iter=200)
    assert np.isfinite(res.quality).all()
    assert res.mu == pytest.approx([1.0, 2.0, 3.0], abs=1e-4)


def test_mae_eq3_ignores_tasks_without_truth():
    assert mae(np.array([1.0, 2.0, 5.0]), np.array([0.0, NAN, 3.0])) == pytest.approx(1.5)
    assert mae(np.array([0.0, 1.0]), np.array([0.5, -0.5])) == pytest.approx(1.0)
    assert math.isnan(mae(np.array([1.0]), np.array([NAN])))


def test_recovers_worker_deviations_and_beats_the_plain_mean():
    """Continuous answers μ_j + N(0, σ_i²), σ_i ∈ {1, 5}, every worker answers every task.

    With n tasks, σ̂_i² ≈ σ_i² (1 + O(1/sqrt(n))): for n = 400 a 5-SE band around σ_i is
    ±5 σ_i / sqrt(2n) ≈ ±0.18 σ_i (plus the small error of the estimated truths).
    """
    m, n = 60, 400
    g = rngm.party_generator(rngm.stream_key(3, "test-inference"))
    mu = g.standard_normal(n)
    sigma = np.where(np.arange(m) % 2 == 0, 1.0, 5.0)
    x = mu[None, :] + sigma[:, None] * g.standard_normal((m, n))
    res = infer_truth(x)
    assert res.converged
    band = 5 * sigma / math.sqrt(2 * n) + 0.05 * sigma
    assert np.all(np.abs(res.sigma - sigma) < band)
    plain = x.mean(axis=0)
    assert mae(res.mu, mu) < 0.8 * mae(plain, mu)
