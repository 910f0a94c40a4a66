"""Cell-level local randomizers of Sun et al., 2018, §IV, and the 2-Layer baseline of §VI-A.

Answers are integers in Γ = {0, 1, ..., L-1} (L = ``levels`` = |Γ|); NULL is NaN in a data row
and the code ``L`` in an integer report. Every randomizer here is applied to every cell of a
worker's answer vector, NULL cells included, so a report does not reveal which tasks the worker
answered. Each mechanism states its per-cell ε (Definition II.1, ε-cell LDP) and sensitivity in
its ``privacy`` (``mechanisms.MechanismPrivacy``); the protocols bind them once per run
(``Protocol.rounds``) and their claims are composed from them.

All functions are vectorised over a block of workers (one row each) and take their randomness
as uniforms in (0, 1) or words (``protocols.words``) drawn per agent, so a row depends only on
that agent's data and coins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy
from ldpsim.protocols.words import WordSource

# --------------------------------------------------------------------------- codes


def to_codes(rows: np.ndarray, levels: int) -> np.ndarray:
    """Answer rows (float, NaN = NULL) to integer codes: the answer itself, ``levels`` for NULL."""
    r = np.asarray(rows, dtype=np.float64)
    null = np.isnan(r)
    with np.errstate(invalid="ignore"):  # the NaN cells' casts are overwritten
        codes = r.astype(np.int64)
    codes[null] = levels
    return codes


def from_codes(codes: np.ndarray, levels: int) -> np.ndarray:
    """Integer codes back to answer rows (float, NaN = NULL)."""
    c = np.asarray(codes)
    out = c.astype(np.float64)
    out[c == levels] = np.nan
    return out


# --------------------------------------------------------------------------- LP (Eq. 6-7)


def lp_sensitivity(levels: int) -> float:
    """Sensitivity of one cell under LP as the paper sets it: Δ = |Γ| (Eq. 7, Theorem 1).

    After the NULL replacement g of Eq. (6) every cell lies in [0, L-1], so the true L1
    sensitivity of a cell is L-1 <= |Γ|; the paper's Lap(|Γ|/ε) is therefore (ε(L-1)/L)-cell
    LDP, slightly better than claimed. We keep the paper's scale for reproduction.
    """
    return float(levels)


def lp_scale(levels: int, epsilon: float) -> float:
    """Nominal Laplace scale b = |Γ|/ε of Eq. (7); ε-cell LDP (Theorem 1) with
    Δ = ``lp_sensitivity``. The release is ``lp_mechanism``'s."""
    return mech.laplace_scale(lp_sensitivity(levels), epsilon)


def lp_mechanism(levels: int, epsilon: float) -> mech.Laplace:
    """The release of one cell, Eq. (7): the exact discrete ``Laplace(ε, |Γ|)``; each cell is
    its own query (ε-cell LDP), so one component."""
    return mech.Laplace(epsilon, lp_sensitivity(levels))


def null_fill(rows: np.ndarray, u: np.ndarray, levels: int, mode: str,
              value: float) -> np.ndarray:
    """Eq. (6): g(a) = a for an answer, v for NULL.

    ``mode`` "uniform" draws v uniformly from Γ (one uniform of ``u`` per cell; E[v] = (L-1)/2,
    as in the paper's experiments), "constant" uses ``value`` (any number in [0, L-1]: Theorem 1
    only needs v inside the answer range).
    """
    r = np.asarray(rows, dtype=np.float64)
    if mode == "uniform":
        v = np.minimum(np.floor(u * levels), levels - 1)
    elif mode == "constant":
        v = np.full(r.shape, float(value))
    else:
        raise ValueError(f"unknown NULL fill {mode!r}")
    return np.where(np.isnan(r), v, r)


def lp_perturb(rows: np.ndarray, u_fill: np.ndarray, words: WordSource, levels: int,
               epsilon: float, mode: str = "uniform", value: float = 0.0) -> np.ndarray:
    """Eq. (7): g(a_ij) + Lap(|Γ|/ε) for every cell, NULL cells included (Theorem 1), by the
    exact discrete mechanism (``lp_mechanism``).

    Parameters
    ----------
    rows : ndarray, shape (B, n)
        Answer rows, NaN = NULL.
    u_fill : ndarray, shape (B, n)
        The workers' uniforms for the NULL replacement of Eq. (6).
    words : WordSource
        The workers' words for the Laplace noise (``Block.words``), one stream per cell.
    levels : int
        |Γ| = L (answers 0..L-1).
    epsilon : float
        Per-cell budget; each cell is ε-cell LDP with Δ = ``lp_sensitivity(levels)``.
    mode, value
        NULL replacement, see ``null_fill``.

    Returns
    -------
    ndarray, shape (B, n)
        Finite reports; a NULL cell is indistinguishable in kind from an answered one.
    """
    filled = null_fill(rows, u_fill, levels, mode, value)
    # the exact discrete mechanism: textbook float Laplace keeps no ε
    # (``simulator.audit.float_attack``)
    return lp_mechanism(levels, epsilon).perturb(filled, words)


def lp_log_likelihood(reports: np.ndarray, rows: np.ndarray, levels: int, epsilon: float,
                      mode: str = "uniform", value: float = 0.0) -> np.ndarray:
    """Exact log-pmf of LP reports given the rows (sum over cells).

    A NULL cell is a mixture: uniform fill gives (1/L) Σ_v P(y | v); constant fill gives
    P(y | value).
    """
    return lp_log_likelihood_of(lp_mechanism(levels, epsilon), reports, rows, levels, mode,
                                value)


def lp_log_likelihood_of(lap: mech.Laplace, reports: np.ndarray, rows: np.ndarray,
                         levels: int, mode: str = "uniform", value: float = 0.0) -> np.ndarray:
    """``lp_log_likelihood`` for the bound release ``lap`` (``lp_mechanism``)."""
    y = np.asarray(reports, dtype=np.float64)
    r = np.asarray(rows, dtype=np.float64)
    null = np.isnan(r)
    ans = lap.log_likelihood(y, np.nan_to_num(r))
    if mode == "uniform":
        fills = np.arange(levels, dtype=np.float64)
        from scipy.special import logsumexp

        with np.errstate(divide="ignore"):  # a report off the grid: -inf for every fill
            mix = logsumexp(lap.log_likelihood(y[..., None], fills), axis=-1) - math.log(levels)
    else:
        mix = lap.log_likelihood(y, np.full(y.shape, float(value)))
    return np.where(null, mix, ans).sum(axis=-1)


# --------------------------------------------------------------------------- RR (Eq. 8)


def rr_epsilon(epsilon: float) -> float:
    """Per-cell ε of RR with NULL (Eq. 8): the ratio of any output's probability under two
    inputs is at most e^ε / 1, so each cell (NULL or not) is ε-cell LDP; sensitivity does not
    apply (randomized response over the |Γ| + 1 symbols Γ ∪ {NULL})."""
    return float(epsilon)


def rr(levels: int, epsilon: float | np.ndarray) -> mech.GRR:
    """Eq. (8) as a mechanism: GRR over the |Γ| + 1 symbols Γ ∪ {NULL} (codes 0..L, L = NULL).

    P(report = input) = e^ε / (|Γ| + e^ε); each of the |Γ| other symbols has probability
    1 / (|Γ| + e^ε). ``epsilon`` may be one per row (shape (B,)), the 2-Layer mechanism's ε_i.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    return mech.GRR(e[:, None] if e.ndim == 1 else e, levels + 1)


def rr_keep_probability(levels: int, epsilon: float | np.ndarray) -> float | np.ndarray:
    """Eq. (8): P(report = input) = e^ε / (|Γ| + e^ε)."""
    p = mech.GRR(np.asarray(epsilon, dtype=np.float64), levels + 1).p
    return p


def rr_transition_matrix(levels: int, epsilon: float) -> np.ndarray:
    """P[x, y] = P(report y | input x) over codes 0..L (L = NULL), Eq. (8) (symmetric)."""
    return rr(levels, epsilon).matrix()


def rr_perturb(codes: np.ndarray, u: np.ndarray, levels: int,
               epsilon: float | np.ndarray) -> np.ndarray:
    """Eq. (8) on every cell, one uniform per cell.

    Keeps the code when ``u < p``; otherwise reports one of the other L symbols uniformly,
    counting on cyclically from the code (``GRR.perturb(others="cyclic")``).

    Parameters
    ----------
    codes : ndarray of int, shape (B, n)
        Answer codes 0..L-1, and L for NULL (``to_codes``).
    u : ndarray, shape (B, n)
        One uniform per cell.
    levels : int
        |Γ| = L; the randomizer works over the L + 1 symbols Γ ∪ {NULL}.
    epsilon : float or ndarray of shape (B,)
        Per-cell budget, or one per row (the 2-Layer mechanism's ε_i).

    Returns
    -------
    ndarray of int, shape (B, n)
        Codes 0..L; every cell is ε-cell LDP (``rr_epsilon``).
    """
    return rr(levels, epsilon).perturb(codes, u, others="cyclic")


def rr_log_likelihood(reports: np.ndarray, codes: np.ndarray, levels: int,
                      epsilon: float) -> np.ndarray:
    """Exact log P(report | row) of Eq. (8), summed over cells."""
    return rr(levels, epsilon).log_likelihood(np.asarray(reports, dtype=np.int64),
                                              np.asarray(codes, dtype=np.int64)).sum(axis=-1)


# --------------------------------------------------------------------------- 2-Layer


def two_layer_epsilons(u: np.ndarray, epsilon: float, spread: float) -> np.ndarray:
    """Layer 1 of the 2-Layer baseline as Sun et al. (2018, §VI-D) run it: each worker draws its own
    budget ε_i ~ Uniform[ε(1 - spread), ε(1 + spread)] (mean ε) from one uniform ``u``.

    Li et al. (KDD 2018) let each worker draw its own perturbation probability from a public
    hyper-distribution; Sun et al. (2018) describe the budget form, which we follow.
    """
    lo = epsilon * (1.0 - spread)
    return lo + 2.0 * epsilon * spread * np.asarray(u, dtype=np.float64)


def two_layer_max_epsilon(epsilon: float, spread: float) -> float:
    """Worst-case per-cell ε of the 2-Layer baseline: ε(1 + spread).

    Layer 2 is Eq. (8) with the worker's ε_i, so every cell is ε_i-cell LDP given ε_i. The
    worker's other cells leak information about ε_i, so the guarantee that holds for the whole
    report is the largest ε_i the hyper-distribution allows, not its mean ε (the paper's
    nominal budget). With ``spread`` = 0 it is plain RR.
    """
    return float(epsilon * (1.0 + spread))


@dataclass(frozen=True)
class TwoLayer:
    """The 2-Layer mechanism as one object: ε_i ~ Uniform[ε(1 - spread), ε(1 + spread)] per
    worker (``two_layer_epsilons``), then Eq. (8) with ε_i on every cell (``rr_perturb``).

    Its guarantee is the worst case ε(1 + spread) per cell (``two_layer_max_epsilon``).
    """

    levels: int
    epsilon: float
    spread: float

    @property
    def privacy(self) -> MechanismPrivacy:
        """Worst-case ε-cell LDP, ε(1 + spread); randomized response (no sensitivity)."""
        return MechanismPrivacy(two_layer_max_epsilon(self.epsilon, self.spread), None,
                                "two_layer_randomized_response")

    def perturb(self, codes: np.ndarray, u_eps: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Each worker's ε_i from its uniform ``u_eps`` (shape (B,)), then Eq. (8) on its codes
        with one uniform of ``u`` per cell."""
        eps_i = two_layer_epsilons(u_eps, self.epsilon, self.spread)
        return rr_perturb(codes, u, self.levels, eps_i)

    def log_likelihood(self, reports: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """``two_layer_log_likelihood`` (summed over cells)."""
        return two_layer_log_likelihood(reports, codes, self.levels, self.epsilon, self.spread)


def two_layer_log_likelihood(reports: np.ndarray, codes: np.ndarray, levels: int,
                             epsilon: float, spread: float, nodes: int = 64) -> np.ndarray:
    """log P(report | row) of the 2-Layer mechanism: the RR likelihood averaged over ε_i.

    The average over ε_i ~ Uniform is a one-dimensional integral, computed by Gauss-Legendre
    quadrature with ``nodes`` nodes (the integrand is smooth in ε_i; 64 nodes are exact to
    double precision for the report lengths used here).
    """
    y = np.asarray(reports, dtype=np.int64)
    c = np.asarray(codes, dtype=np.int64)
    same = (y == c).sum(axis=-1).astype(np.float64)
    diff = y.shape[-1] - same
    if spread == 0:
        return rr_log_likelihood(y, c, levels, epsilon)
    from scipy.special import logsumexp, roots_legendre

    x, w = roots_legendre(nodes)
    lo, hi = epsilon * (1 - spread), epsilon * (1 + spread)
    e = 0.5 * (hi - lo) * x + 0.5 * (hi + lo)
    p = rr_keep_probability(levels, e)
    terms = (same[..., None] * np.log(p) + diff[..., None] * np.log((1 - p) / levels)
             + np.log(0.5 * w))
    return logsumexp(terms, axis=-1)
