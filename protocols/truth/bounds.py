"""Expected-error bounds of Sun et al., 2018: Theorem 2 (LP), Theorem 3 (RR) and Theorem 5 (MF).

Each bound is written as printed, as a pure function of the workers' qualities q_i, answer
fractions s_i (1 - sparsity), error deviations σ_i and the tasks' truths μ_j. The worked
examples of §IV-V evaluate to 14.13 (Theorem 2), about 3.55 (Theorem 3; the paper prints 3.551,
see ``rr_cell_error``) and 1.798 (Theorem 5, "does not exceed 1.8").
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.truth.mechanisms import rr_transition_matrix


def lp_cell_error(s: np.ndarray, sigma: np.ndarray, phi: np.ndarray, levels: int,
                  epsilon: float) -> np.ndarray:
    """e^LP_ij of Theorem 2: (1 - s_i)(φ_j + |Γ|/ε) + s_i(σ_i √(2/π) + |Γ|/ε).

    φ_j = |μ_j - E(v)| is the distance between the truth and the mean NULL replacement of
    Eq. (6). Broadcasts over (workers, tasks): pass ``s``/``sigma`` as (m, 1) and ``phi`` as (n,).
    """
    noise = levels / epsilon
    return (1 - s) * (phi + noise) + s * (sigma * math.sqrt(2 / math.pi) + noise)


def lp_error_bound(q: np.ndarray, s: np.ndarray, sigma: np.ndarray, mu: np.ndarray,
                   fill_mean: float, levels: int, epsilon: float) -> float:
    """Theorem 2: E[MAE(A^P)] <= (1/n) Σ_j Σ_i q_i e^LP_ij, with φ_j = |μ_j - fill_mean|.

    Parameters
    ----------
    q : ndarray, shape (m,)
        Worker qualities normalised to sum to 1 (Algorithm 1 starts from q_i = 1/m).
    s : ndarray, shape (m,)
        Fraction of the tasks each worker answers (1 - sparsity).
    sigma : ndarray, shape (m,)
        Standard deviations of the workers' answer errors.
    mu : ndarray, shape (n,)
        Ground truths μ_j.
    fill_mean : float
        E(v) of the NULL replacement of Eq. (6) ((L-1)/2 for a uniform v over 0..L-1).
    levels : int
        |Γ|.
    epsilon : float
        Per-cell budget.

    Returns
    -------
    float
    """
    q, s, sigma = (np.asarray(x, dtype=np.float64)[:, None] for x in (q, s, sigma))
    phi = np.abs(np.asarray(mu, dtype=np.float64) - fill_mean)[None, :]
    e = lp_cell_error(s, sigma, phi, levels, epsilon)
    return float((q * e).sum(axis=0).mean())


def answer_weights(mu: float, sigma: float, levels: int, weights: str = "normalized"
                   ) -> np.ndarray:
    """Weights N(x; μ, σ) of Theorem 3 on the answers x ∈ Γ = {0..L-1}.

    "density": the normal density at x, as printed (these do not sum to 1).
    "normalized": the density at x renormalised over Γ, i.e. the probability of picking x
    from Γ "by following the normal distribution", as the theorem's text describes it.
    """
    x = np.arange(levels, dtype=np.float64)
    from scipy.stats import norm  # scipy.stats costs ~0.5 s to import: only when used

    w = norm.pdf(x, loc=mu, scale=sigma)
    if weights == "density":
        return w
    if weights == "normalized":
        return w / w.sum()
    raise ValueError(f"unknown weights {weights!r}")


def rr_cell_error(mu: float, s: float, sigma: float, levels: int, epsilon: float,
                  weights: str = "normalized") -> float:
    """e^RR_ij of Theorem 3.

    (1 - s_i) |μ_j - Σ_{y∈Γ} y / (e^ε + |Γ|)|  +  Σ_{x∈Γ} s_i N(x; μ_j, σ_i) |μ_j - Σ_{y∈Γ} y P_xy|

    with P_xy from Eq. (8). For the worked example (σ = 1, Γ = 0..9, μ = 0, ε = 1, s = 0.1) the
    normalised weights give 3.545 and the printed densities 3.437; the paper prints 3.551,
    which neither reading (nor rounding-and-clipping weights, 3.543) reproduces to the third
    digit. We take the normalised reading (0.17 % from the printed value).
    """
    y = np.arange(levels, dtype=np.float64)
    p = rr_transition_matrix(levels, epsilon)[:levels, :levels]  # x, y in Γ
    null_term = abs(mu - (y / (math.exp(epsilon) + levels)).sum())
    w = answer_weights(mu, sigma, levels, weights)
    ans_term = (w * np.abs(mu - ordered.matmul(p, y))).sum()
    return float((1 - s) * null_term + s * ans_term)


def rr_error_bound(q: np.ndarray, s: np.ndarray, sigma: np.ndarray, mu: np.ndarray,
                   levels: int, epsilon: float, performs: np.ndarray | None = None,
                   weights: str = "normalized") -> float:
    """Theorem 3: E[MAE] <= (1/n) Σ_j Σ_{i∈W_j} q_i e^RR_ij / Σ_{i∈W_j} q_i.

    Parameters
    ----------
    q, s, sigma : ndarray, shape (m,)
        Qualities, answered fractions and error deviations, as in ``lp_error_bound``.
    mu : ndarray, shape (n,)
        Ground truths.
    levels : int
        |Γ| (Γ = 0..L-1).
    epsilon : float
        Per-cell budget of Eq. (8).
    performs : ndarray of bool, shape (m, n), optional
        W_j, who performs task j; default every worker.
    weights : str
        Reading of N(x; μ, σ), see ``answer_weights``.

    Returns
    -------
    float

    Notes
    -----
    Algorithm 1 drops NULL reports, so the non-NULL reports of a NULL cell average (L-1)/2,
    not Σ_y y/(e^ε + |Γ|) as the first term assumes; at the worked example the measured MAE
    (about 4.4) exceeds the value of this expression (3.545).
    """
    q, s, sigma = (np.asarray(x, dtype=np.float64) for x in (q, s, sigma))
    mu = np.asarray(mu, dtype=np.float64)
    m, n = len(q), len(mu)
    w = np.ones((m, n), dtype=bool) if performs is None else np.asarray(performs, dtype=bool)
    cache: dict[tuple[float, float, float], float] = {}
    e = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            k = (float(mu[j]), float(s[i]), float(sigma[i]))
            if k not in cache:
                cache[k] = rr_cell_error(k[0], k[1], k[2], levels, epsilon, weights)
            e[i, j] = cache[k]
    qw = q[:, None] * w
    return float(((qw * e).sum(axis=0) / qw.sum(axis=0)).mean())


def mf_error_bound(q_max: float, m: int, d: int, levels: int, n: int, epsilon: float) -> float:
    """Theorem 5: E[MAE] <= q̃ m (√(2/π) + d |Γ| / (n ε)), q̃ = max_i q_i.

    Worked example: q̃ = 1/m, n = 1000, d = 100, |Γ| = 10, ε = 1 gives 1.798 ("does not exceed
    1.8"). The bound does not depend on the sparsity.
    """
    return float(q_max * m * (math.sqrt(2 / math.pi) + d * levels / (n * epsilon)))
