"""DPWeVote's estimators (Yan, Liu & Liu, 2018): the group sizes (Eq. 3), the quota (Eq. 4),
the opinions per weight group (Eq. 5, and the unbiased joint inversion), the weighted sum
(Eq. 8b), the decision (§4.4) and the exact expected quota error (Eq. 12, Table 4). Pure
functions; each works along the last axis (leading axes: repeated games).

How the paper's text is read (and the faithful estimator's bias) is in ``dpwevote``'s module
docstring.
"""

from __future__ import annotations

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import ordered
from ldpsim.protocols.vote.budget import Budget, laplace_mechanisms
from ldpsim.protocols.vote.data import WEIGHTS

G = np.asarray(WEIGHTS, dtype=np.float64)  # the weight of each group wI, wII, wIII
TIE_TOL = 1e-9  # relative; only absorbs floating-point rounding at exact ties


def estimate_weights(y_w: np.ndarray, eps_w: float) -> np.ndarray:
    """Eq. (3): ``x̂_w = M_w^{-1} y_w`` from the observed counts (y_wI, y_wII, y_wIII)."""
    return mech.GRR(eps_w, 3).estimate_counts(y_w)


def quota(x_w: np.ndarray) -> np.ndarray:
    """Eq. (4a)/(4b): ``q = ½ (1·x_wI + 2·x_wII + 3·x_wIII)`` (true or estimated counts).

    Like every estimator here it works along the last axis (leading axes: repeated games).
    """
    return 0.5 * ordered.matmul(x_w, G)


def opinion_table(w_reported: np.ndarray, phi_reported: np.ndarray) -> np.ndarray:
    """The 3x2 table ``Y[g, φ]`` of partners who reported weight group g+1 and opinion φ."""
    idx = (np.asarray(w_reported, dtype=np.int64) - 1) * 2 + np.asarray(phi_reported, np.int64)
    return np.bincount(idx.ravel(), minlength=6)[:6].reshape(3, 2)


def estimate_opinions_faithful(table: np.ndarray, eps_phi: float) -> np.ndarray:
    """Eq. (5) per *reported* weight group: ``x̂_{g̃,φY}`` = 'Yes' entry of ``M_φ^{-1} Y[g̃]``.

    Returns the three estimates (wI, wII, wIII as reported). Yan, Liu & Liu (2018) use them as
    counts of the true groups in Eq. (8b); they are biased for those (``dpwevote``'s module
    docstring).
    """
    t = np.asarray(table, dtype=np.float64)
    return ordered.matmul(t, mech.GRR(eps_phi, 2).inverse_matrix().T)[..., 1]


def estimate_table_joint(table: np.ndarray, eps_w: float, eps_phi: float) -> np.ndarray:
    """Unbiased 3x2 table of true (weight group, opinion) counts: ``M_w^{-1} Y M_φ^{-T}``.

    The pair of reports is randomized response on the pair of values with matrix M_w ⊗ M_φ
    (independent coins), whose inverse is M_w^{-1} ⊗ M_φ^{-1}.
    """
    t = np.asarray(table, dtype=np.float64)
    left = ordered.matmul(mech.GRR(eps_w, 3).inverse_matrix(), t)
    return ordered.matmul(left, mech.GRR(eps_phi, 2).inverse_matrix().T)


def estimate_opinions_joint(table: np.ndarray, eps_w: float, eps_phi: float) -> np.ndarray:
    """The 'Yes' column of :func:`estimate_table_joint`: unbiased ``x̂_{g,φY}`` per true group."""
    return estimate_table_joint(table, eps_w, eps_phi)[..., 1]


def weighted_sum(x_yes: np.ndarray) -> np.ndarray:
    """Eq. (8b): ``Σ ŵφ = 1·x̂_{wI,φY} + 2·x̂_{wII,φY} + 3·x̂_{wIII,φY}``."""
    return ordered.matmul(x_yes, G)


def quota_variance_per_partner(b: Budget, mechanism: str = "rr") -> np.ndarray:
    """``Var(q̂)`` contributed by one partner of weight 1, 2, 3 (Eq. 4b; baseline §5.1.3).

    RR: ``q̂ = ½ (Σ_i w̃_i - 6 r_w N) / (p_w - r_w)``, so a partner with weight w adds
    ``Var(w̃ | w) / (4 (p_w - r_w)²)`` with ``E[w̃|w] = p_w w + r_w (6 - w)`` and
    ``E[w̃²|w] = p_w w² + r_w (14 - w²)``. Laplace: ``q̂ = ½ Σ w̃`` adds a quarter of the
    release's variance (the exact discrete mechanism's, about ``2 (2/ε1)²``).
    """
    if mechanism == "laplace":
        lap_w, _ = laplace_mechanisms(b)
        return np.full(3, float(lap_w.variance()) / 4)
    rr = mech.GRR(b.eps_w, 3)
    p, r = rr.p, rr.q
    m1 = p * G + r * (6 - G)
    m2 = p * G**2 + r * (14 - G**2)
    return (m2 - m1**2) / (4 * (p - r) ** 2)


def expected_sq_err_q(n: int, b: Budget, mechanism: str = "rr",
                      weight_probs: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)) -> float:
    """Exact MSE_q of Eq. (12) over random games with i.i.d. weights (§5.1.1).

    ``E[(q̂ - q)² / (Σw)²] = E_x[ Σ_g x_g v_g / (Σ_g g x_g)² ]`` (q̂ is unbiased given the
    weights; ``v_g`` from :func:`quota_variance_per_partner`), the expectation taken exactly
    over the multinomial group sizes x (O(n²) terms). Reproduces Table 4 (docs/families/vote.md).
    """
    from scipy.stats import multinomial

    i, j = np.triu_indices(n + 1)
    x1, x2 = i, j - i
    x3 = n - j
    x = np.stack([x1, x2, x3], axis=1)
    pmf = multinomial.pmf(x, n, weight_probs)
    v = quota_variance_per_partner(b, mechanism)
    total_w = ordered.matmul(x, G)
    return float(np.sum(pmf * ordered.matmul(x, v) / total_w**2))


def decide(sum_hat: float | np.ndarray, q_hat: float | np.ndarray) -> bool | np.ndarray:
    """§4.4 with Definition 2.2's ``>=``: PASS iff ``Σ ŵφ >= q̂``.

    A relative tolerance of 1e-9 absorbs floating-point rounding so that an exact tie (e.g. the
    truthful limit ε -> ∞) is PASS, as Definition 2.2 says; §4.1's "larger than" is read as >=.
    """
    out = np.asarray(sum_hat) >= np.asarray(q_hat) - TIE_TOL * (1.0 + np.abs(q_hat))
    return bool(out) if out.ndim == 0 else out
