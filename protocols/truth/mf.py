"""Matrix-factorisation perturbation (Sun et al., 2018, §V, Eq. 9-10, Algorithm 2, Theorem 4).

The curator draws a d × n task-profile matrix V, independent of the data, whose every column has
1-norm at most 1, and broadcasts it. Worker i minimises the perturbed objective (Eq. 9)

    L_DP(u) = Σ_{j ∈ T_i} (a_ij - u·v_j)^2 + 2 u·η_i + λ ||u||^2,   η_i ~ Lap(|Γ|/ε)^d

and reports u_i V. We add the ridge term λ||u||^2 (the paper has λ = 0) because without it the
minimiser does not exist whenever V_T V_T^T is singular (fewer answered tasks than d, the common
case in sparse data: the linear term 2u·η is then unbounded below), and Theorem 4's proof needs a
unique minimiser.

**Solver.** The objective is a strictly convex quadratic, so the minimiser is the closed form

    u = (V_T V_T^T + λ I)^{-1} (V_T a_T - η),

computed with one d × d LU solve per worker (``ordered.solve``: Gaussian elimination in a
fixed order, not the processor's LAPACK kernel), vectorised over a block.

**The noise, exactly.** V_T a_T - η is the Laplace mechanism applied to the vector
c = V_T a_T: two rows differing in one answer a_k give c - c' = v_k (a_k - a'_k), with L1 norm
at most ||v_k||_1 (L-1) <= |Γ| (Theorem 4). The worker releases y = c - η as the exact discrete
``Laplace(ε, |Γ|, components=d)`` of c (``mf_mechanism``, a grid vector) and solves
(G + λI) u = y from y alone (``release_profiles``), so u and u V are post-processing of an
exactly ε-DP release (G is the same for both rows); η = c - y is the objective's noise, i.i.d.
discrete Laplace of scale about |Γ|/ε plus the grid's rounding of c (below half a grid step).
This is the point Algorithm 2's gradient descent converges to ("until ∇L_DP = 0"), reached
exactly rather than approximately; a gradient-descent loop with a stopping rule would leave the
privacy proof's assumption (∇L_DP = 0 exactly) slightly violated.

**NULL cells (a slip in Theorem 4).** The proof compares two rows with the same answered set
T_i. A neighbouring row that answers one more task (NULL ↔ value) changes G by v_k v_k^T and
η - η' = v_k (a_k - v_k·u), which is unbounded in u, so answered-set privacy is not covered by
the proof. ``null_mode`` "skip" is the paper's Eq. (9) (sum over T_i); "uniform"/"constant"
first replace NULL by a value of Γ as LP's Eq. (6) does and then sum over all tasks, which makes
Theorem 4's argument hold for every cell (NULL included), at a cost in utility.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import ordered

#: Rows per internal chunk of ``solve_profiles``; bounds memory, does not change any result.
CHUNK = 512
#: Matrix elements of the systems ``release_profiles`` holds before it solves them together.
SOLVE_ELEMENTS = 1 << 21


def mf_sensitivity(levels: int) -> float:
    """L1 sensitivity of η in Theorem 4: ||η - η'||_1 <= ||v_k||_1 |a_k - a'_k| <= |Γ|.

    With ||v_k||_1 <= 1 and answers in [0, L-1] the bound is L-1; the paper uses |Γ| = L.
    """
    return float(levels)


def mf_noise_scale(levels: int, epsilon: float) -> float:
    """Nominal scale |Γ|/ε of each of the d Laplace components of η (Eq. 9); ε-cell LDP
    (Theorem 4). The release is ``mf_mechanism``'s."""
    return mech.laplace_scale(mf_sensitivity(levels), epsilon)


def mf_mechanism(levels: int, epsilon: float, d: int) -> mech.Laplace:
    """The release of y = V_T a_T - η: the exact discrete ``Laplace(ε, |Γ|)`` over the d
    components of one worker's vector, which share the sensitivity |Γ|."""
    return mech.Laplace(epsilon, mf_sensitivity(levels), components=d)


def task_profiles(gen: np.random.Generator, d: int, n: int, kind: str = "uniform") -> np.ndarray:
    """The curator's random task-profile matrix V (d × n), independent of the answers (§V).

    ``kind`` "uniform": i.i.d. Uniform(0, 1) entries; "gaussian": i.i.d. N(0, 1) entries. Each
    column is then divided by its 1-norm, so ||v_j||_1 = 1 (the paper requires <= 1 and does
    not say how V is drawn; these are our choices).
    """
    if kind == "uniform":
        v = gen.random((d, n))
    elif kind == "gaussian":
        v = gen.standard_normal((d, n))
    else:
        raise ValueError(f"unknown profile kind {kind!r}")
    return v / np.abs(v).sum(axis=0, keepdims=True)


def clip_profiles(v: np.ndarray) -> np.ndarray:
    """Agent-side check of the broadcast V: finite, and every column's 1-norm <= 1.

    The privacy argument of Theorem 4 rests on ||v_j||_1 <= 1, which a worker must not take on
    trust from an untrusted curator: columns with a larger norm are scaled down to norm 1, and
    non-finite entries are replaced by 0.
    """
    v = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    norm = np.abs(v).sum(axis=0, keepdims=True)
    return np.where(norm > 1.0, v / np.where(norm > 1.0, norm, 1.0), v)


def _normal_equations(a: np.ndarray, v: np.ndarray, ridge: float):
    """Yield (row indices, G + λI, V_T a_T) for the rows of ``a``, grouped by answered count.

    Rows are grouped by their number k of answered tasks (NaN cells are left out); within a
    group the gathered profiles V_T form a (g, d, k) stack and G_i = V_T V_T^T is one matrix
    product per worker. Every row goes through the same operations with the same shapes
    whether it comes alone or in a block, so per-row results do not depend on the batching.
    """
    d = v.shape[0]
    mask = ~np.isnan(a)
    counts = mask.sum(axis=1)
    cols = np.nonzero(mask)[1]  # answered tasks, row after row, sorted within a row
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(counts) else counts
    eye = ridge * np.eye(d)
    for k in np.unique(counts):
        rows = np.flatnonzero(counts == k)
        for s in range(0, len(rows), CHUNK):
            r = rows[s:s + CHUNK]
            if k == 0:
                yield r, np.broadcast_to(eye, (len(r), d, d)), np.zeros((len(r), d))
                continue
            idx = cols[starts[r][:, None] + np.arange(k)]  # (g, k) sorted answered tasks
            vt = np.ascontiguousarray(v[:, idx].transpose(1, 0, 2))  # (g, d, k)
            vals = np.take_along_axis(a[r], idx, axis=1)[:, :, None]  # (g, k, 1)
            gram = ordered.matmul(vt, vt.transpose(0, 2, 1))
            yield r, gram + eye, ordered.matmul(vt, vals)[:, :, 0]


def release_profiles(answers: np.ndarray, v: np.ndarray,
                     release: Callable[[np.ndarray, np.ndarray], np.ndarray],
                     ridge: float) -> np.ndarray:
    """u_i = (G_i + λI)^{-1} y_i with y_i = ``release(rows, V_T a_T)`` (Eq. 10 with the noisy
    right-hand side released first: ``release`` gets the indices of a group of rows and their
    c = V_T a_T, and returns the Laplace release of c for those rows; u depends on y alone).

    Bit-identical whether a row is solved alone or in a block (see ``solve_profiles``).
    """
    a = np.asarray(answers, dtype=np.float64)
    d = v.shape[0]
    out = np.empty((a.shape[0], d))
    # the groups' systems are solved together, SOLVE_ELEMENTS at a time (``ordered.solve``
    # runs d Python steps a call; each row's solution does not depend on its batch)
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    held = 0
    for r, g, rhs in _normal_equations(a, v, ridge):
        pending.append((r, g, np.asarray(release(r, rhs), dtype=np.float64)))
        held += len(r) * d * d
        if held >= SOLVE_ELEMENTS:
            _solve_pending(pending, out)
            held = 0
    _solve_pending(pending, out)
    return out


def _solve_pending(pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                   out: np.ndarray) -> None:
    """Solve the held (rows, G + λI, y) groups in one ``ordered.solve`` into ``out``; empties
    ``pending``."""
    if pending:
        rows, gs, ys = zip(*pending, strict=True)
        out[np.concatenate(rows)] = ordered.solve(np.concatenate(gs), np.concatenate(ys))
        pending.clear()


def solve_profiles(answers: np.ndarray, v: np.ndarray, eta: np.ndarray,
                   ridge: float) -> np.ndarray:
    """Eq. (10) in closed form for a block of workers: u_i = (G_i + λI)^{-1}(V_T a_T - η_i)
    for a given η (the paper's form; a worker releases through ``release_profiles``).

    Parameters
    ----------
    answers : ndarray, shape (B, n)
        Answer rows; NaN cells are left out of the sum (the paper's T_i). Fill NULLs first for
        the "uniform"/"constant" NULL modes.
    v : ndarray, shape (d, n)
        Task profiles (already checked by ``clip_profiles``).
    eta : ndarray, shape (B, d)
        The Laplace vectors η_i.
    ridge : float
        λ > 0.

    Returns
    -------
    ndarray, shape (B, d)
        The profiles u_i; bit-identical whether a row is solved alone or in a block (one LU
        solve of a d × d system per worker, see ``_normal_equations``).
    """
    return release_profiles(answers, v, lambda r, rhs: rhs - eta[r], ridge)


def reconstruct(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The report u_i V (Algorithm 2, line 6), one product per worker (batch-independent)."""
    return ordered.matmul(u[:, None, :], v)[:, 0, :]


def objective(answers: np.ndarray, u: np.ndarray, v: np.ndarray, eta: np.ndarray,
              ridge: float) -> np.ndarray:
    """L_DP of Eq. (9) plus λ||u||^2, per worker (for tests and diagnostics)."""
    a = np.asarray(answers, dtype=np.float64)
    mask = ~np.isnan(a)
    resid = np.where(mask, np.nan_to_num(a) - ordered.matmul(u, v), 0.0)
    return (resid**2).sum(axis=1) + 2.0 * (u * eta).sum(axis=1) + ridge * (u * u).sum(axis=1)


def gradient(answers: np.ndarray, u: np.ndarray, v: np.ndarray, eta: np.ndarray,
             ridge: float) -> np.ndarray:
    """∇_u L_DP (Theorem 4's proof: 2η - Σ_{T_i} 2 v_k (a_k - u·v_k), plus 2λu)."""
    a = np.asarray(answers, dtype=np.float64)
    mask = ~np.isnan(a)
    resid = np.where(mask, np.nan_to_num(a) - ordered.matmul(u, v), 0.0)
    return 2.0 * eta - 2.0 * ordered.matmul(resid, v.T) + 2.0 * ridge * u


def log_likelihood(profiles: np.ndarray, answers: np.ndarray, v: np.ndarray, levels: int,
                   epsilon: float, ridge: float, reports: np.ndarray | None = None
                   ) -> np.ndarray:
    """Exact log-pmf of the worker profiles u_i (or of the reports u_i V, ``reports``) given
    the (filled) answer rows.

    The worker released the grid vector y = Λ n (``mf_mechanism``) and sent u = solve(G + λI, y)
    (``release_profiles``). From a candidate row's G and the u at hand: n = rint((G + λI) u / Λ),
    and the report is possible under that row exactly when solving from Λ n gives back the same
    u (the same report u V) bit for bit; then P(report | row) = P(Z = n - rint(c/Λ)) with
    c = V_T a_T (n determines the report; distinct n give distinct reports), else -inf.
    """
    return log_likelihood_of(mf_mechanism(levels, epsilon, v.shape[0]), profiles, answers, v,
                             ridge, reports)


def log_likelihood_of(lap: mech.Laplace, profiles: np.ndarray, answers: np.ndarray,
                      v: np.ndarray, ridge: float, reports: np.ndarray | None = None
                      ) -> np.ndarray:
    """``log_likelihood`` for the bound release ``lap`` (``mf_mechanism``)."""
    a = np.asarray(answers, dtype=np.float64)
    u = np.asarray(profiles, dtype=np.float64)
    out = np.empty(len(a))
    for r, g, rhs in _normal_equations(a, v, ridge):
        with np.errstate(invalid="ignore", over="ignore"):
            n = np.rint(ordered.matmul(g, u[r][:, :, None])[:, :, 0] / lap.grid)
            ok = np.isfinite(n).all(axis=1)
            y = np.where(ok[:, None], n, 0.0) * lap.grid
            again = ordered.solve(g, y)
        if reports is None:
            ok &= (again == u[r]).all(axis=1)
        else:
            ok &= (reconstruct(again, v) == np.asarray(reports)[r]).all(axis=1)
        ll = lap.log_likelihood(y, rhs).sum(axis=1)
        out[r] = np.where(ok, ll, -np.inf)
    return out


def profiles_from_reports(reports: np.ndarray, v: np.ndarray,
                          rtol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Recover u_i from reports u_i V by least squares; also whether each report lies in the
    row space of V (a report off it is impossible under the mechanism)."""
    r = np.asarray(reports, dtype=np.float64)
    u = ordered.lstsq(v.T, r.T).T
    resid = np.abs(ordered.matmul(u, v) - r).max(axis=1)
    scale = np.maximum(np.abs(r).max(axis=1), 1.0)
    return u, resid <= rtol * scale
