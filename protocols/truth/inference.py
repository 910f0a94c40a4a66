"""Iterative weighted truth inference (Sun et al., 2018, §II-B, Eq. 1-3 and Algorithm 1).

Workers' answers form an ``(m, n)`` float matrix, one row per worker and one column per task, with
NaN for NULL (the worker did not answer). Algorithm 1 alternates

* Eq. (1): the truth of task j is the quality-weighted mean of the answers it received,
  ``mu_j = sum_i q_i a_ij / sum_i q_i`` over the workers W_j who answered it;
* Eq. (2): the quality of worker i is ``q_i ∝ 1 / sigma_i`` with
  ``sigma_i = sqrt(mean_{j in T_i} (a_ij - mu_j)^2)`` (the weight form of Li et al. [32], which the
  paper adopts: the standard deviation, not the variance);

from ``q_i = 1/m``, until the truths move by less than ``tol`` (max-norm) or ``max_iter`` rounds
have run. The paper does not state its convergence condition; ours is stated here and reported
in the output (``iterations``, ``converged``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.truth.sparse import SPARSE_FILL, DenseAnswers, SparseAnswers

#: Default convergence tolerance on max_j |mu_j(t) - mu_j(t-1)| (answer units).
TOL = 1e-6
#: Default iteration cap of Algorithm 1.
MAX_ITER = 1000
#: Floor on sigma_i in Eq. (2): a worker whose answers all equal the current truths would get an
#: infinite quality; the floor keeps the weights finite (1e6 times a worker with sigma = 1).
SIGMA_FLOOR = 1e-6


@dataclass(frozen=True)
class Inference:
    """Result of Algorithm 1.

    Attributes
    ----------
    mu : ndarray, shape (n,)
        Estimated truths. A task nobody answered gets the quality-weighted mean of all answers.
    quality : ndarray, shape (m,)
        Worker qualities, normalised to sum to 1 (0 for a worker without answers).
    sigma : ndarray, shape (m,)
        Estimated error standard deviations of Eq. (2) (NaN for a worker without answers).
    iterations : int
        Number of (Eq. 1, Eq. 2) rounds run.
    converged : bool
        Whether the truths moved by less than ``tol`` in the last round.
    """

    mu: np.ndarray
    quality: np.ndarray
    sigma: np.ndarray
    iterations: int
    converged: bool


def infer_truth(answers: np.ndarray | SparseAnswers, tol: float = TOL,
                max_iter: int = MAX_ITER) -> Inference:
    """Algorithm 1 of Sun et al., 2018: alternate Eq. (1) and Eq. (2) until the truths converge.

    Parameters
    ----------
    answers : ndarray of shape (m, n), or SparseAnswers
        One row per worker; NaN (any non-finite value) marks NULL. A dense matrix with few
        answers is run on its answered cells only (``SparseAnswers``); the result has the same
        bits either way.
    tol : float
        Stop when ``max_j |mu_j(t) - mu_j(t-1)| < tol``.
    max_iter : int
        Iteration cap (>= 1).

    Returns
    -------
    Inference
    """
    ops = _operands(answers)
    m, n = ops.shape
    counts = ops.counts
    has = counts > 0
    sq = ops.squares()
    q = np.where(has, 1.0 / max(int(has.sum()), 1), 0.0)  # line 1: q_i = 1/m
    mu = np.zeros(n)
    sigma = np.full(m, np.nan)
    converged = False
    it = 0
    for it in range(1, max(1, int(max_iter)) + 1):
        new = _truths(ops, q)
        # Eq. (2): sum_j (a_ij - mu_j)^2 over T_i, expanded so each round is four mat-vecs
        # (each summed in a fixed order: ``ordered.matmul``, or its sparse form).
        ss = np.maximum(sq - 2.0 * ops.answers_times(new) + ops.mask_times(new * new), 0.0)
        sigma = np.where(has, np.sqrt(ss / np.maximum(counts, 1.0)), np.nan)
        q = np.where(has, 1.0 / np.maximum(np.nan_to_num(sigma, nan=1.0), SIGMA_FLOOR), 0.0)
        q = q / q.sum() if q.sum() > 0 else q
        delta = np.max(np.abs(new - mu)) if it > 1 else np.inf
        mu = new
        if delta < tol:
            converged = True
            break
    return Inference(mu, q, sigma, it, converged)


def truths(x0: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Eq. (1): quality-weighted mean of each task's answers.

    ``x0`` holds the answers with NULL set to 0 and ``w`` the 0/1 answered mask (one row per
    worker). A task without answers (possible after randomized response turned all its answers
    into NULL) gets the weighted mean of all answers, so the output is always finite. The sums
    over the workers run in ``ordered.matmul``'s fixed tree.
    """
    return _finish_truths(ordered.matmul(q, x0), ordered.matmul(q, w))


def _truths(ops: DenseAnswers | SparseAnswers, q: np.ndarray) -> np.ndarray:
    """``truths`` on the operands of ``_operands`` (the same sums, the same bits)."""
    return _finish_truths(ops.quality_times_answers(q), ops.quality_times_mask(q))


def _finish_truths(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Eq. (1) from the weighted sums of each task's answers and of its workers' qualities."""
    total = den.sum()
    fallback = num.sum() / total if total > 0 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), fallback)


def _operands(answers: np.ndarray | SparseAnswers) -> DenseAnswers | SparseAnswers:
    """The answers in the form Algorithm 1 runs on fastest: their answered cells when at most
    ``SPARSE_FILL`` of the cells are answered, else the dense matrix."""
    if isinstance(answers, SparseAnswers):
        return answers
    x = np.asarray(answers, dtype=np.float64)
    mask = np.isfinite(x)
    if x.size and np.count_nonzero(mask) <= SPARSE_FILL * x.size:
        return SparseAnswers.from_dense(x, mask)
    return DenseAnswers(x, mask)


def mae(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Eq. (3): mean absolute error over the tasks whose truth is known (finite).

    The real data sets have ground truth for a subset of the tasks only; NaN marks the rest.
    """
    t = np.asarray(truth, dtype=np.float64)
    sel = np.isfinite(t)
    if not sel.any():
        return float("nan")
    return float(np.mean(np.abs(np.asarray(estimate, dtype=np.float64)[sel] - t[sel])))
