"""t-ary randomized response (Warner 1965; Wang, Wu & Hu 2016) and its inversion.

DPWeVote (seed 002) uses it twice: 3-ary for the weight group (matrix M_w, Eq. 9a) and binary for
each opinion (matrix M_φ, Eq. 9b). A value ``v`` in ``{0, .., t-1}`` is reported truthfully with
probability ``p`` and as each of the other ``t - 1`` values with probability ``r = (1 - p)/(t - 1)``
(seed 002 Theorem 4.2)::

    p = e^ε / (t - 1 + e^ε),     r = 1 / (t - 1 + e^ε),     p / r = e^ε.

The transformation matrix ``M[i, j] = P(report i | true j)`` is ``(p - r) I + r J`` (``J`` all
ones). Because ``p + (t - 1) r = 1``, its inverse has the closed form::

    M^{-1} = (I - r J) / (p - r),

so the unbiased count estimate of Eq. (2) / (3) / (5), ``x̂ = M^{-1} y``, is simply
``x̂_v = (y_v - r·N) / (p - r)`` for ``N`` reports. Every draw is made from one uniform per report
(``protocols.rng``), so a report is a pure function of (value, agent, round).
"""

from __future__ import annotations

import math

import numpy as np


def keep_probability(epsilon: float, t: int) -> float:
    """Probability ``p = e^ε / (t - 1 + e^ε)`` of reporting the true value (Theorem 4.2).

    Written as ``1 / (1 + (t - 1) e^{-ε})`` so that it does not overflow for large ε. For
    ``t = 2`` it is Theorem 4.1 / Eq. (1), the same as ``protocols.mechanisms.rr_keep_probability``.

    Parameters
    ----------
    epsilon : float
        Privacy budget of one report (> 0). The report is ε-LDP: ``p / r = e^ε`` exactly.
    t : int
        Number of possible values (>= 2).
    """
    if t < 2:
        raise ValueError(f"randomized response needs t >= 2 values, got {t}")
    return 1.0 / (1.0 + (t - 1) * math.exp(-epsilon))


def other_probability(epsilon: float, t: int) -> float:
    """Probability ``r = (1 - p) / (t - 1) = 1 / (t - 1 + e^ε)`` of each particular other value."""
    return math.exp(-epsilon) / (1.0 + (t - 1) * math.exp(-epsilon))


def privacy_epsilon(p: float, t: int) -> float:
    """The ε that keep probability ``p`` gives: ``ln(p / r) = ln((t - 1) p / (1 - p))``.

    Seed 002 §4.5 part (1) computes exactly this ratio, ``2 p_w / (1 - p_w) = e^{ε1}`` for t = 3.
    """
    return math.log((t - 1) * p / (1.0 - p)) if p < 1.0 else math.inf


def matrix(epsilon: float, t: int) -> np.ndarray:
    """The transformation matrix ``M[i, j] = P(report i | true j)`` (M_w for t=3, M_φ for t=2)."""
    p, r = keep_probability(epsilon, t), other_probability(epsilon, t)
    return (p - r) * np.eye(t) + r


def inverse_matrix(epsilon: float, t: int) -> np.ndarray:
    """Closed-form ``M^{-1} = (I - r J) / (p - r)`` (see the module docstring)."""
    p, r = keep_probability(epsilon, t), other_probability(epsilon, t)
    return (np.eye(t) - r) / (p - r)


def randomize(values: np.ndarray, u: np.ndarray, epsilon: float, t: int) -> np.ndarray:
    """Randomize ``values`` in ``{0, .., t-1}`` with one uniform ``u`` in (0, 1) each.

    ``u < p`` keeps the value; otherwise ``j = ⌊(u - p) / r⌋`` (clipped to ``t - 2``) picks the
    j-th of the other values in increasing order, each with probability ``r``.

    Parameters
    ----------
    values : ndarray of int
        True values, any shape.
    u : ndarray of float
        Uniforms of the same shape (``protocols.rng.uniform``).
    epsilon, t : float, int
        Budget of one report and number of values.

    Returns
    -------
    ndarray of int64, same shape as ``values``.
    """
    v = np.asarray(values, dtype=np.int64)
    p, r = keep_probability(epsilon, t), other_probability(epsilon, t)
    keep = u < p
    if r > 0:
        j = np.floor((np.asarray(u) - p) / r)
        j = np.clip(np.nan_to_num(j, nan=0.0), 0, t - 2).astype(np.int64)
    else:  # p == 1.0 in floating point: always truthful
        j = np.zeros(v.shape, dtype=np.int64)
    other = j + (j >= v)
    return np.where(keep, v, other)


def log_likelihood(reports: np.ndarray, values: np.ndarray, epsilon: float, t: int) -> np.ndarray:
    """Exact ``log P(report | value)``: ``log p`` if equal, ``log r`` otherwise, -inf off-domain.

    Where ``r`` underflows to 0 (huge ε), a report that differs has log-likelihood -inf, as the
    floating-point mechanism of :func:`randomize` is then truthful.
    """
    rep = np.asarray(reports)
    val = np.asarray(values)
    p, r = keep_probability(epsilon, t), other_probability(epsilon, t)
    with np.errstate(divide="ignore"):
        lp, lr = math.log(p), (math.log(r) if r > 0 else -math.inf)
    out = np.where(rep == val, lp, lr).astype(np.float64)
    inside = (rep >= 0) & (rep <= t - 1) & (rep == np.round(rep))
    return np.where(inside, out, -np.inf)


def counts(reports: np.ndarray, t: int) -> np.ndarray:
    """Observed numbers ``y_v`` of each reported value (the vector Y of Eq. 2), int64."""
    return np.bincount(np.asarray(reports, dtype=np.int64).ravel(), minlength=t)[:t]


def estimate(y: np.ndarray, epsilon: float, t: int) -> np.ndarray:
    """Unbiased counts ``x̂ = M^{-1} y`` (Eq. 2) along the last axis of ``y`` (leading axes are
    independent count vectors, e.g. repeated games)."""
    return np.asarray(y, dtype=np.float64) @ inverse_matrix(epsilon, t).T


def estimate_variance(x: np.ndarray, epsilon: float, t: int) -> np.ndarray:
    """Exact ``Var(x̂_v)`` of :func:`estimate` when the true counts are ``x`` (sum N).

    ``x̂_v = (y_v - rN)/(p - r)`` and ``y_v`` is a sum of independent indicators with success
    probability ``p`` (the ``x_v`` agents whose value is v) or ``r`` (the others)::

        Var(x̂_v) = [x_v p(1 - p) + (N - x_v) r(1 - r)] / (p - r)².
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.sum()
    p, r = keep_probability(epsilon, t), other_probability(epsilon, t)
    return (x * p * (1 - p) + (n - x) * r * (1 - r)) / (p - r) ** 2
