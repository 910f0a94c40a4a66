"""Norm-constrained Thurstone–Mosteller MLE (Wang et al., 2019, Eq. 3), batched over voters.

    beta_i = argmax_{||beta|| <= C} sum_j log Phi(beta^T z_ij)                         (Eq. 3)

Eq. (2) is concave but often has no maximiser: with few records (a Moral-Machine session has 13)
the choices are usually linearly separable and the unconstrained MLE runs off to infinity (the
paper's own example in §3). The ball makes the estimate exist and bounds its sensitivity
(Theorems 1 and 3). Which norm the paper bounds is not recoverable from the text, so the norm is a
parameter: ``"l2"`` (default), ``"l1"`` or ``"linf"``.

Solvers. Both work on a whole block of B voters at once, but every voter's iterates, step sizes
and stopping decisions depend on its own records only, so a voter gets bit-identical results alone
or in any block. Both start in the span of the voter's records (the L2 solver on the sphere along
the first Newton step from 0, the others at 0) and keep every iterate there, so when the records
do not span R^d (n_i < d; the likelihood is flat in the orthogonal directions) the minimum-norm
maximiser is returned (up to ``HESS_FLOOR``). The objective is f = -L_i (minimised).

* **L2 ball: active-set Newton with one constraint.** Inside the ball, a damped Newton step on f;
  a step that would leave the ball is cut where it meets the sphere (the voter then becomes
  "on the sphere"). On the sphere, a Riemannian Newton step: the KKT system of
  ``min f s.t. ||beta||^2 = C^2`` linearised at the current point, with the least-squares
  multiplier ``mu = -g^T beta / C^2``, solved in the tangent space and retracted onto the sphere;
  a voter leaves the sphere when ``mu < 0`` (the objective then decreases inwards). Each iteration
  costs one d x d solve with two right-hand sides. Armijo backtracking (with doubling while the
  objective keeps falling, because far out on separable data the Gaussian tail makes a Newton
  step under-shoot) makes it globally convergent; near the solution it is Newton's method on the
  KKT equations, so convergence is quadratic.
* **L1 ball and L-inf box: projected (proximal) Newton.** At each iterate the quadratic model is
  minimised over the ball by accelerated projected gradient (FISTA with restarts and the exact
  Euclidean projections: Duchi et al. 2008 for L1, clipping for L-inf), followed by the same
  Armijo search on the segment (feasible because the ball is convex). Slower (about a
  millisecond per voter on separable data); not the default.

A voter stops when half its Newton decrement ``-g^T step / 2`` (the predicted decrease, which
bounds f - f* near the optimum) falls below ``ftol * |f|``, when a step moves it by less than
``xtol * (1 + C)``, or when no step decreases f. The criterion is relative because on separable
data the maximiser lies on the boundary where f is tiny (every record explained with
probability ~1): ``log_ndtr`` keeps f's relative precision there, so the boundary optimum is
still resolved rather than abandoned wherever f first drops below an absolute threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.ethics.model import (
    NORMS,
    neg_log_likelihood_parts,
    norm_of,
    project,
    utilities,
)

#: Relative floor (times trace(H)/d) added to the Hessian's diagonal so that no solve is singular
#: (n_i < d, collinear records, or w -> 0 far out on separable data). It damps the Newton path
#: but does not move the fixed points (g = 0 inside, g + mu beta = 0 on the sphere); where the
#: likelihood is flat in some directions (rank-deficient records) the returned maximiser is the
#: minimum-norm one up to about this relative accuracy.
HESS_FLOOR = 1e-7
ARMIJO = 1e-4


@dataclass
class MLEStats:
    """Iteration counts of one batched solve (for tests and the bench)."""

    iterations: int = 0          # iterations of the slowest voter
    mean_iterations: float = 0.0
    unconverged: int = 0         # voters that hit the iteration cap
    on_boundary: int = 0         # voters whose optimum lies on the ball's boundary


def constrained_mle(z: np.ndarray, bound: float, norm: str = "l2", max_iter: int = 100,
                    xtol: float = 1e-12, ftol: float = 1e-14,
                    stats: MLEStats | None = None) -> np.ndarray:
    """Eq. (3): each voter's maximiser of Eq. (2) over ``||beta||_norm <= bound``.

    Parameters
    ----------
    z : array (B, n, d)
        Each voter's records, winner minus loser. All-zero records carry no information.
    bound : float
        The ball radius C > 0.
    norm : {"l2", "l1", "linf"}
        Which norm Eq. (3) bounds.
    max_iter : int
        Cap on Newton iterations per voter.
    xtol, ftol : float
        Stopping tolerances (see the module docstring).
    stats : MLEStats, optional
        Filled with iteration counts.

    Returns
    -------
    array (B, d)
        The constrained MLEs, each inside the ball.
    """
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    if not bound > 0:
        raise ValueError(f"bound must be > 0, got {bound!r}")
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 3:
        raise ValueError(f"z must have shape (voters, records, d), got {z.shape}")
    run = _l2_newton if norm == "l2" else _projected_newton
    beta, its, left = run(z, float(bound), norm, max_iter, xtol, ftol)
    beta = project(beta, norm, bound)
    if stats is not None:
        stats.iterations = int(its.max(initial=0))
        stats.mean_iterations = float(its.mean()) if len(its) else 0.0
        stats.unconverged = int(left.sum())
        stats.on_boundary = int((norm_of(beta, norm) >= bound * (1 - 1e-9)).sum())
    return beta


# ------------------------------------------------------------------------------- L2 ball


def _floor(h: np.ndarray) -> np.ndarray:
    d = h.shape[1]
    return HESS_FLOOR * np.trace(h, axis1=1, axis2=2) / d + 1e-100


def _l2_newton(z, bound, norm, max_iter, xtol, ftol):
    b, _, d = z.shape
    eye = np.eye(d)
    c2 = bound * bound
    beta = np.zeros((b, d))
    # start on the sphere, in the direction of the first Newton step from beta = 0
    # (sqrt(pi/2) (Z^T Z)^{-1} Z^T 1, the noise-free functional-mechanism estimate of §4.4):
    # about one iteration fewer than starting at 0 or along Z^T 1
    s = z.sum(axis=1)
    zz = ordered.matmul(np.swapaxes(z, 1, 2), z)
    x = ordered.solve(zz + _floor(zz)[:, None, None] * eye, s)
    nx = np.sqrt((x * x).sum(axis=1))
    sphere = nx > 0
    beta[sphere] = x[sphere] * (bound / nx[sphere])[:, None]
    fval = np.full(b, np.nan)
    active = np.ones(b, dtype=bool)
    its = np.zeros(b, dtype=np.int64)
    for it in range(max_iter):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        zi, bi = z[idx], beta[idx]
        f, g, h = neg_log_likelihood_parts(zi, bi, None if it == 0 else fval[idx])
        mu = -(g * bi).sum(axis=1) / c2
        sph = sphere[idx] & (mu >= 0.0)  # leave the sphere when f decreases inwards
        a = h + (_floor(h) + np.where(sph, mu, 0.0))[:, None, None] * eye
        x = ordered.solve(a, np.stack([g, bi], axis=2))
        x0, x1 = x[:, :, 0], x[:, :, 1]
        step = -x0
        if sph.any():
            den = (bi * x1).sum(axis=1)
            nu = -(bi * x0).sum(axis=1) / np.where(den > 0, den, 1.0)
            step = np.where(sph[:, None], -x0 - nu[:, None] * x1, step)
        # released from the sphere but Newton still points outwards: steepest descent inwards
        stuck = sphere[idx] & ~sph & ((bi * step).sum(axis=1) > 0)
        step[stuck] = -g[stuck]
        slope = (g * step).sum(axis=1)
        t, f_new, hit = _line_search_l2(zi, bi, step, f, slope, sph, bound)
        new = bi + t[:, None] * step
        on = sph | hit
        nn = np.sqrt((new * new).sum(axis=1))
        new[on] *= (bound / np.where(nn > 0, nn, 1.0))[on, None]
        moved = np.sqrt(((new - bi) ** 2).sum(axis=1))
        beta[idx] = new
        sphere[idx] = on
        fval[idx] = f_new  # f at the accepted point (the final rescaling only rounds)
        its[idx] += 1
        stop = (t == 0) | (moved <= xtol * (1.0 + bound)) | (-0.5 * slope <= ftol * np.abs(f))
        active[idx[stop]] = False
    return beta, its, active


def _objective(z: np.ndarray, beta: np.ndarray) -> np.ndarray:
    from scipy import special  # on first use: the registry imports every family

    return -special.log_ndtr(utilities(z, beta)).sum(axis=1)


def _accept(f: np.ndarray, f0: np.ndarray, t: np.ndarray, slope: np.ndarray) -> np.ndarray:
    # Armijo, with slack for rounding in f so that steps at convergence are not refused
    return f <= f0 + ARMIJO * t * slope + 4e-16 * np.abs(f0)


def _line_search_l2(z, beta, step, f0, slope, sph, bound, halvings=50, doublings=10):
    """Armijo backtracking from t = min(1, t_max), then doubling t while f falls.

    Off the sphere, t_max is where the ray leaves the ball (landing there sets ``hit``); on the
    sphere the trial points are retracted onto it. Returns (t, f(t), hit); t = 0 when no step
    decreases f.
    """
    a2 = (step * step).sum(axis=1)
    ab = (beta * step).sum(axis=1)
    rest = bound * bound - (beta * beta).sum(axis=1)
    disc = np.sqrt(np.maximum(ab * ab + a2 * np.maximum(rest, 0.0), 0.0))
    tmax = np.where(sph | (a2 == 0), np.inf, (-ab + disc) / np.where(a2 > 0, a2, 1.0))
    tmax = np.maximum(tmax, 0.0)

    def point(i, t):
        p = beta[i] + t[:, None] * step[i]
        r = sph[i]
        if r.any():
            nr = np.sqrt((p[r] * p[r]).sum(axis=1))
            p[r] *= (bound / np.where(nr > 0, nr, 1.0))[:, None]
        return p

    t = np.minimum(1.0, tmax)
    f_t = f0.copy()
    todo = (slope < 0) & (t > 0)
    t[~todo] = 0.0
    for _ in range(halvings):
        i = np.flatnonzero(todo)
        if len(i) == 0:
            break
        f = _objective(z[i], point(i, t[i]))
        ok = _accept(f, f0[i], t[i], slope[i])
        f_t[i[ok]] = f[ok]
        todo[i[ok]] = False
        t[i[~ok]] *= 0.5
    t[todo] = 0.0
    # double only where the full step gained about as much as the linear model predicts (for
    # a quadratic it gains half): the sign of a Newton step that under-shoots
    i = np.flatnonzero((t == 1.0) & (tmax > 1.0) & (f0 - f_t > -0.55 * slope))
    for _ in range(doublings):
        if len(i) == 0:
            break
        trial = np.minimum(2.0 * t[i], tmax[i])
        f = _objective(z[i], point(i, trial))
        better = f < f_t[i]
        t[i[better]] = trial[better]
        f_t[i[better]] = f[better]
        i = i[better & (trial < tmax[i])]
    hit = ~sph & (t > 0) & (t >= tmax)
    return t, f_t, hit


# ------------------------------------------------------------------ L1 ball, L-inf box


def _gershgorin(h: np.ndarray) -> np.ndarray:
    """An upper bound on the largest eigenvalue of each PSD matrix (max absolute row sum)."""
    return np.abs(h).sum(axis=2).max(axis=1)


def qp_over_ball(h: np.ndarray, c: np.ndarray, norm: str, radius: float, start: np.ndarray,
                 iters: int = 300, tol: float = 1e-14, rel: float = 1e-4) -> np.ndarray:
    """Minimise ``c^T y + 1/2 y^T H y`` (H PSD) over a norm ball, per voter.

    FISTA (Beck & Teboulle 2009) with step 1/L (L a Gershgorin bound on H) and gradient restarts
    (O'Donoghue & Candès 2015). A voter stops when an iteration moves it by at most
    ``tol * (1 + radius)`` or by at most ``rel`` times its distance from ``start`` (an inexact
    Newton step: the outer line search only needs a descent direction, and the tolerance
    tightens automatically as the outer iteration converges).
    """
    lip = _gershgorin(h) + 1e-300
    y = project(start, norm, radius)
    yprev = y.copy()
    mom = np.ones(len(c))
    todo = np.ones(len(c), dtype=bool)
    for _ in range(iters):
        i = np.flatnonzero(todo)
        if len(i) == 0:
            break
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * mom[i] ** 2))
        v = y[i] + ((mom[i] - 1.0) / t_new)[:, None] * (y[i] - yprev[i])
        grad = ordered.matmul(h[i], v[:, :, None])[:, :, 0] + c[i]
        ynew = project(v - grad / lip[i, None], norm, radius)
        restart = (grad * (ynew - y[i])).sum(axis=1) > 0
        moved = np.sqrt(((ynew - y[i]) ** 2).sum(axis=1))
        yprev[i] = y[i]
        y[i] = ynew
        mom[i] = np.where(restart, 1.0, t_new)
        far = np.sqrt(((ynew - start[i]) ** 2).sum(axis=1))
        small = (moved <= tol * (1.0 + radius)) | (moved <= rel * far)
        todo[i[small & ~restart]] = False
    return y


def _max_step(beta: np.ndarray, step: np.ndarray, norm: str, bound: float) -> np.ndarray:
    """Largest t >= 1 with ||beta + t step|| <= bound (beta + step is feasible), by bisection."""
    lo = np.ones(len(beta))
    hi = np.full(len(beta), 64.0)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        ok = norm_of(beta + mid[:, None] * step, norm) <= bound
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return lo


def _projected_newton(z, bound, norm, max_iter, xtol, ftol):
    b, _, d = z.shape
    beta = np.zeros((b, d))
    active = np.ones(b, dtype=bool)
    its = np.zeros(b, dtype=np.int64)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        zi, bi = z[idx], beta[idx]
        f, g, h = neg_log_likelihood_parts(zi, bi)
        c = g - ordered.matmul(h, bi[:, :, None])[:, :, 0]
        step = qp_over_ball(h, c, norm, bound, bi) - bi
        slope = (g * step).sum(axis=1)
        t = np.ones(len(idx))
        f_t = f.copy()
        todo = slope < 0
        t[~todo] = 0.0
        for _ in range(50):
            i = np.flatnonzero(todo)
            if len(i) == 0:
                break
            fi = _objective(zi[i], bi[i] + t[i, None] * step[i])
            ok = _accept(fi, f[i], t[i], slope[i])
            f_t[i[ok]] = fi[ok]
            todo[i[ok]] = False
            t[i[~ok]] *= 0.5
        t[todo] = 0.0
        i = np.flatnonzero((t == 1.0) & (f - f_t > -0.55 * slope))
        tmax = _max_step(bi[i], step[i], norm, bound) if len(i) else np.zeros(0)
        keep = tmax > 1.0
        i, tmax = i[keep], tmax[keep]
        for _ in range(10):
            if len(i) == 0:
                break
            trial = np.minimum(2.0 * t[i], tmax)
            fi = _objective(zi[i], bi[i] + trial[:, None] * step[i])
            better = fi < f_t[i]
            t[i[better]] = trial[better]
            f_t[i[better]] = fi[better]
            go = better & (trial < tmax)
            i, tmax = i[go], tmax[go]
        new = project(bi + t[:, None] * step, norm, bound)
        moved = np.sqrt(((new - bi) ** 2).sum(axis=1))
        beta[idx] = new
        its[idx] += 1
        stop = (t == 0) | (moved <= xtol * (1.0 + bound)) | (-0.5 * slope <= ftol * np.abs(f))
        active[idx[stop]] = False
    return beta, its, active
