"""LADE: Lasso-based estimation of S2 and S3 from S1 (Cheng et al., 2021, §5.2.3), its regression
alternatives (Fig. 7) and the NAIVE derivation (§5.2.1); simplex projection.

Notation (Definition 1): φ_k = rank of item x_k, λ_{k2,k3} = 1 iff x_k2 is ranked above x_k3.

* S1 = {Pr[φ_k]}: a (d, d) array, row k = distribution of item k's rank.
* S2 = {Pr[λ_{k2,k3}]}: one number Pr[λ = 1] per pair k2 < k3 (:func:`rules.pairs` order).
* S3 = {Pr[φ_k1, λ_{k2,k3}]}: a (T, 2d) array, one row per triplet of :func:`rules.triplets`,
  column 2a + (λ - 1) (the Rule I^N value order).

LADE fits, per pair, the length-d(d-1) joint Pr[φ_k2, φ_k3] (diagonal excluded: mutual
exclusivity) to the 2d marginals y = (Pr[φ_k2]; Pr[φ_k3]) through the binary system y = M p
(Example 6), reads Pr[λ] off the joint, then per triplet fits the 2d-vector Pr[φ_k1, λ] to
(Pr[φ_k1]; Pr[λ]) the same way. The paper fits each system by Lasso via least angle regression
(Efron et al. 2004, [40]). We solve the same non-negative Lasso problem exactly through an
equivalent non-negative least-squares problem (:func:`lasso_positive`, Lawson–Hanson's active-
set solver in a fixed order, ``ordered.nnls``), checked in the tests against coordinate descent
and the KKT conditions; the reason is given there. The optimum is not unique on these designs:
NNLS gives a sparse vertex, ``lasso_solver = "cd"`` the coordinate-descent limit
(:func:`lasso_cd`), and the two can differ in S2/S3 while fitting S1 equally well. The
regularisation level is not given in the paper; ``alpha`` is a parameter (sklearn's scaling:
(1/(2m))||y - Mp||² + α||p||₁, m = rows).

Every fitted vector is projected onto the probability simplex (Euclidean projection, Duchi et
al. 2008; for inputs summing to 1 it equals the fixed point of CALM's Norm-Sub), so Pr[λ] and
the MI computed from them are those of proper distributions.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.safari import rules

REGRESSIONS = ("lasso", "stepwise", "ridge")
#: How the Lasso is solved. Its optimum is not unique on LADE's rank-deficient designs (every
#: optimum has the same fitted marginals, the joints differ): "nnls" reaches a sparse vertex
#: optimum (Lawson-Hanson active set), "cd" the limit of cyclic coordinate descent from zero
#: (Friedman, Hastie & Tibshirani 2010; what glmnet and scikit-learn's Lasso compute), which
#: spreads mass over the columns that tie.
LASSO_SOLVERS = ("nnls", "cd")


# ------------------------------------------------------------------------ simplex projection


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of ``v`` onto the probability simplex.

    Sort-based algorithm (Duchi, Shalev-Shwartz, Singer & Chandra, ICML 2008): the result is
    max(v - θ, 0) with the θ that makes it sum to 1. For vectors that sum to 1 (unbiased
    frequency estimates) this is also where CALM's Norm-Sub (zero the negatives, shift the
    positives equally, repeat) converges.
    """
    x = np.asarray(v, dtype=float)
    one = x.ndim == 1
    x = np.atleast_2d(x)
    k = x.shape[1]
    u = -np.sort(-x, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    ind = np.arange(1, k + 1)
    cond = u - css / ind > 0
    rho = k - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(len(x)), rho] / (rho + 1)
    out = np.maximum(x - theta[:, None], 0.0)
    return out[0] if one else out


def norm_sub(v: np.ndarray, max_iter: int = 10_000) -> np.ndarray:
    """CALM's Norm-Sub on one vector: repeat {zero the negatives; add (1 - Σ)/#positive to the
    positive cells} until nothing is negative (reference for :func:`project_simplex`)."""
    x = np.array(v, dtype=float)
    for _ in range(max_iter):
        x[x < 0] = 0.0
        pos = x > 0
        if not pos.any():
            return np.full(len(x), 1.0 / len(x))
        x[pos] += (1.0 - x.sum()) / pos.sum()
        if (x >= -1e-15).all():
            return np.maximum(x, 0.0)
    return np.maximum(x, 0.0)


# ---------------------------------------------------------------------------- regressions


def lasso_positive(X: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Non-negative Lasso: argmin_{β >= 0} (1/(2m))||y - Xβ||² + α Σβ, m = len(y).

    For designs whose row space contains the all-ones vector (LADE's: the rows of one marginal
    block sum to 1ᵀ), take any v with Xᵀv = 1; then Σβ = vᵀXβ and

        (1/(2m))||y - Xβ||² + α vᵀXβ = (1/(2m))||(y - mαv) - Xβ||² + const,

    so the Lasso is exactly the non-negative least-squares problem with target y - mαv. We
    solve it with Lawson–Hanson's active-set NNLS (``ordered.nnls``), which, like least angle
    regression, lets in the variable most correlated with the residual at each step and ends at
    a sparse optimum. (The paper names least angle regression; on these rank-deficient designs many
    columns reach the maximal correlation together and the LARS path is not uniquely defined,
    while the Lasso optimum — what LARS computes in general position — is reached exactly here.)
    Raises ValueError for a design without the all-ones vector in its row space.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    m, p = X.shape
    v = ordered.basic_solution(X.T, np.ones(p))
    if not np.allclose(ordered.matmul(X.T, v), 1.0, atol=1e-9):
        raise ValueError("lasso_positive needs the all-ones vector in the row space of X")
    return ordered.nnls(X, y - m * alpha * v)


def lasso_cd(X: np.ndarray, Y: np.ndarray, alpha: float, tol: float = 1e-12,
             max_sweeps: int = 100_000) -> np.ndarray:
    """Non-negative Lasso by cyclic coordinate descent from zero, for every column of ``Y``.

    Minimises (1/(2m))||y - Xβ||² + α Σβ over β >= 0 (m = rows) for each column y of ``Y``
    (m, r) at once (Friedman, Hastie & Tibshirani, J. Stat. Softw. 2010, Eq. 5 with the
    positivity constraint): one sweep updates β_j ← max(0, β_j + (x_jᵀr/m - α) / (||x_j||²/m))
    for j = 0..p-1 in order, keeping the residuals r = y - Xβ. It stops when a sweep moves no
    coefficient by more than ``tol`` (or after ``max_sweeps``). Deterministic; returns (r, p).
    """
    X = np.asarray(X, dtype=float)
    R = np.array(np.asarray(Y, dtype=float).reshape(len(X), -1))  # residuals, (m, r)
    m, p = X.shape
    B = np.zeros((p, R.shape[1]))
    sq = (X * X).sum(axis=0) / m
    for _ in range(max_sweeps):
        moved = 0.0
        for j in range(p):
            if sq[j] == 0.0:
                continue
            xj = X[:, j]
            new = np.maximum(0.0, B[j] + (ordered.matmul(xj, R) / m - alpha) / sq[j])
            step = new - B[j]
            if step.any():
                R -= np.outer(xj, step)
                B[j] = new
                moved = max(moved, float(np.abs(step).max()))
        if moved <= tol:
            break
    return B.T


def lasso_objective(X: np.ndarray, y: np.ndarray, beta: np.ndarray, alpha: float) -> float:
    """(1/(2m))||y - Xβ||² + α||β||₁."""
    r = y - ordered.matmul(X, beta)
    return float(ordered.dot(r, r) / (2 * len(y)) + alpha * np.abs(beta).sum())


def forward_stepwise(X: np.ndarray, y: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Forward stepwise regression: repeatedly add the column most correlated with the residual
    (columns normalised) and refit ordinary least squares on the selected columns, until the
    residual vanishes, the correlation does, or the fit stops improving (Fig. 7's "Stepwise")."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    m, p = X.shape
    norms = np.linalg.norm(X, axis=0)
    norms[norms == 0] = 1.0
    active: list[int] = []
    beta = np.zeros(p)
    r = y.copy()
    rss = float(ordered.dot(r, r))
    for _ in range(min(m, p)):
        c = np.abs(ordered.matmul(X.T, r)) / norms
        c[active] = -1.0
        j = int(np.argmax(c))
        if c[j] <= tol:
            break
        trial = active + [j]
        coef = ordered.lstsq(X[:, trial], y)
        r_new = y - ordered.matmul(X[:, trial], coef)
        rss_new = float(ordered.dot(r_new, r_new))
        if rss_new >= rss - tol * max(1.0, rss):
            break
        active, r, rss = trial, r_new, rss_new
        beta[:] = 0.0
        beta[active] = coef
        if rss <= tol * max(1e-300, float(ordered.dot(y, y))):
            break
    return beta


def ridge(X: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge regression argmin ||y - Xβ||² + α||β||², in dual form Xᵀ(XXᵀ + αI)⁻¹y."""
    X = np.asarray(X, dtype=float)
    gram = ordered.matmul(X, X.T) + alpha * np.eye(len(X))
    return ordered.matmul(X.T, ordered.solve(gram, np.asarray(y, dtype=float)))


def regress(X: np.ndarray, Y: np.ndarray, method: str, alpha: float,
            solver: str = "nnls") -> np.ndarray:
    """Fit every column of ``Y`` (m, r) on X (m, p); returns (r, p) coefficients. ``solver``
    picks the Lasso's optimum (``LASSO_SOLVERS``)."""
    Y = np.asarray(Y, dtype=float).reshape(len(X), -1)
    if method == "ridge":
        X = np.asarray(X, dtype=float)
        gram = ordered.matmul(X, X.T) + alpha * np.eye(len(X))
        return ordered.matmul(X.T, ordered.solve(gram, Y)).T
    if method == "lasso":
        if solver == "cd":
            return lasso_cd(X, Y, alpha)
        if solver != "nnls":
            raise ValueError(f"unknown Lasso solver {solver!r}; allowed: "
                             f"{', '.join(LASSO_SOLVERS)}")
        return np.stack([lasso_positive(X, Y[:, i], alpha) for i in range(Y.shape[1])])
    if method == "stepwise":
        return np.stack([forward_stepwise(X, Y[:, i]) for i in range(Y.shape[1])])
    raise ValueError(f"unknown regression {method!r}; allowed: {', '.join(REGRESSIONS)}")


# ------------------------------------------------------------------------ design matrices


@lru_cache(maxsize=32)
def pair_design(d: int) -> np.ndarray:
    """M_{k2,k3} of §5.2.3 (2d × d(d-1)): column (a, b), a ≠ b (a-major) has ones in row a
    (Pr[φ_k2 = a]) and row d + b (Pr[φ_k3 = b]). Example 6 shows it for d = 5 (10 × 20)."""
    cols = [(a, b) for a in range(d) for b in range(d) if a != b]
    M = np.zeros((2 * d, len(cols)))
    for j, (a, b) in enumerate(cols):
        M[a, j] = M[d + b, j] = 1.0
    M.setflags(write=False)
    return M


@lru_cache(maxsize=32)
def triplet_design(d: int) -> np.ndarray:
    """M_{k1,k2,k3} of §5.2.3 ((d+2) × 2d): column 2a + (λ-1) has ones in row a (Pr[φ_k1 = a])
    and row d + λ - 1 (Pr[λ]). Example 6 shows it for d = 5 (7 × 10)."""
    M = np.zeros((d + 2, 2 * d))
    for a in range(d):
        for lam in range(2):
            M[a, 2 * a + lam] = M[d + lam, 2 * a + lam] = 1.0
    M.setflags(write=False)
    return M


def joint_to_square(p: np.ndarray, d: int) -> np.ndarray:
    """Rows of length d(d-1) (off-diagonal, a-major) → (.., d, d) with a zero diagonal."""
    p = np.atleast_2d(p)
    out = np.zeros((len(p), d, d))
    mask = ~np.eye(d, dtype=bool)
    out[:, mask] = p
    return out


def s2_from_joint(joint: np.ndarray) -> np.ndarray:
    """Pr[λ_{k2,k3} = 1] = Σ_{a<b} Pr[φ_k2 = a, φ_k3 = b] for (.., d, d) joints."""
    d = joint.shape[-1]
    return (joint * np.triu(np.ones((d, d)), 1)).sum(axis=(-2, -1))


# ---------------------------------------------------------------------------------- LADE


def lade(s1: np.ndarray, method: str = "lasso", alpha: float = 1e-4, solver: str = "nnls"
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """S2 and S3 from S1 (§5.2.3, Example 6). Returns (S2, S3, pairwise joints (P, d, d)).

    ``s1`` should already be a set of distributions (rows on the simplex).
    """
    s1 = np.asarray(s1, dtype=float)
    d = len(s1)
    pr = rules.pairs(d)
    Y2 = np.concatenate([s1[pr[:, 0]], s1[pr[:, 1]]], axis=1).T  # (2d, P)
    p2 = project_simplex(regress(pair_design(d), Y2, method, alpha, solver))
    joints = joint_to_square(p2, d)
    s2 = s2_from_joint(joints)
    tr = rules.triplets(d)
    lam = s2[rules.pair_index(d)[tr[:, 1], tr[:, 2]]]
    Y3 = np.concatenate([s1[tr[:, 0]], lam[:, None], 1.0 - lam[:, None]], axis=1).T
    s3 = project_simplex(regress(triplet_design(d), Y3, method, alpha, solver))
    return s2, s3, joints


def naive(s3: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """NAIVE (§5.2.1): S1 and S2 by integrating the collected S3 (Eq. (1)), averaged over the
    C(d-1, 2) (resp. d - 2) triplets that carry each of them. Returns (S1, S2)."""
    s3 = np.asarray(s3, dtype=float).reshape(-1, d, 2)
    tr = rules.triplets(d)
    s1 = np.zeros((d, d))
    np.add.at(s1, tr[:, 0], s3.sum(axis=2))
    s1 /= np.bincount(tr[:, 0], minlength=d)[:, None]
    pidx = rules.pair_index(d)[tr[:, 1], tr[:, 2]]
    n_pairs = len(rules.pairs(d))
    s2 = np.bincount(pidx, weights=s3[:, :, 0].sum(axis=1), minlength=n_pairs)
    s2 /= np.bincount(pidx, minlength=n_pairs)
    return s1, s2
