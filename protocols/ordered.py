"""Linear algebra whose every sum is taken in an order this code fixes.

``a @ b``, ``numpy.dot``, ``numpy.linalg.solve``, ``eigh`` and ``lstsq`` on floats call the BLAS
and LAPACK kernels that OpenBLAS (or MKL, or Accelerate) picks for the processor at start-up,
and each kernel sums in its own order (its SIMD width, its blocking, its thread split). Their
results differ in the last bits from one processor to another, and an estimate computed from
them, a decision taken on it or a metric read from it then differs between the machine that
wrote a record and the machine that re-executes it. Everything here is made of elementwise
operations (each one IEEE-754 rounded, never fused into a multiply-add) and of sums in one
fixed tree (``_tree_sum``: numpy's pairwise summation, written out), computed by a small C
kernel (``_orderedc.c``) where the install built it and by numpy otherwise, to the same bits.
So the same inputs give the same bits on any machine (the docs' determinism page states the
contract).

Every function also works along leading (batch) axes, and each matrix's result depends on that
matrix alone: a row solved alone or inside a block of rows gives the same bits (what keeps a
run independent of how its agents are split between pools).
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the compiled matrix product (``_orderedc.c``: the same tree, the same bits) or numpy's
KERNEL = Accelerator.load("ordered matmul", "ldpsim.protocols._orderedc", environment.ORDERED,
                          "protocols/_orderedc.c",
                          needs=("vecmat", "solve", "jacobi", "sparse_tree"))
#: Elements of the largest temporary product numpy's ``matmul`` forms at once (rows and columns
#: are processed in blocks below it; an entry's result does not depend on its block).
BLOCK = 1 << 20
#: Jacobi sweeps after which ``eigh`` stops even if some rotation is still applied (a sweep
#: converges quadratically: 6 to 12 sweeps are typical for d <= 200).
MAX_SWEEPS = 60
#: An off-diagonal entry below this fraction of its matrix's Frobenius norm is zero for ``eigh``.
OFF_FLOOR = 2.0**-80


def _tree_sum(p: np.ndarray) -> np.ndarray:
    """The sum along the last axis in a fixed tree: numpy's pairwise summation, written out
    (fewer than 8 terms: from 0.0 in order; up to 128: eight running sums over the blocks of
    eight, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in
    order; more: the two halves split at a multiple of 8, each summed so, then added), plus 0.0
    (numpy >= 2 starts its reduction from the identity). Elementwise numpy only, vectorised over
    the leading axes; ``_orderedc.c`` computes the same bits."""
    return 0.0 + _tree(p)


def _tree(p: np.ndarray) -> np.ndarray:
    n = p.shape[-1]
    if n < 8:
        res = np.zeros(p.shape[:-1])
        for i in range(n):
            res = res + p[..., i]
        return res
    if n <= 128:
        full = n - n % 8
        r = p[..., :8].copy()
        for i in range(8, full, 8):
            r += p[..., i:i + 8]
        res = ((r[..., 0] + r[..., 1]) + (r[..., 2] + r[..., 3])) + (
            (r[..., 4] + r[..., 5]) + (r[..., 6] + r[..., 7]))
        for i in range(full, n):
            res = res + p[..., i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _tree(p[..., :n2]) + _tree(p[..., n2:])


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (numpy's broadcasting and 1-d rules) with each dot product summed in a fixed
    tree (``_tree_sum``).

    Parameters
    ----------
    a : ndarray, shape (..., n, k) or (k,)
    b : ndarray, shape (..., k, m) or (k,)

    Returns
    -------
    ndarray
        Shape as ``numpy.matmul`` gives it; float64. Entry (i, j) is ``_tree_sum`` of the
        products ``a[i, t] * b[t, j]``: the same bits on every processor, whatever the batch
        around it, from the compiled kernel (``_orderedc.c``) or from numpy.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: scalar operands are not allowed, use *")
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = a[None, :]
    if vb:
        b = b[:, None]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
    bt = b.swapaxes(-1, -2)  # (..., m, k)
    # (ndarray methods and np.broadcast, not numpy's Python wrappers: no per-call Python)
    batch = np.broadcast(a[..., :1, :1], b[..., :1, :1]).shape[:-2]
    n, k, m = a.shape[-2], a.shape[-1], bt.shape[-2]
    if KERNEL.module is not None and va and b.ndim == 2:
        # a vector times a matrix: the same tree over b's rows, read in order (no transpose)
        out = np.empty((1, m))
        KERNEL.module.vecmat(np.ascontiguousarray(a[0]), np.ascontiguousarray(b), out, k, m)
    elif KERNEL.module is not None:
        out = _compiled(KERNEL.module, a, bt, batch, n, k, m)
    else:
        out = np.empty(batch + (n, m))
        per_cell = max(1, math.prod(batch) * max(k, 1))
        cols = max(1, min(m, BLOCK // per_cell))
        rows = max(1, BLOCK // (per_cell * cols))
        for s in range(0, n, rows):
            for c in range(0, m, cols):
                prod = np.multiply(a[..., s:s + rows, None, :], bt[..., None, c:c + cols, :],
                                   order="C")
                out[..., s:s + rows, c:c + cols] = _tree_sum(prod)
    if va:
        out = out[..., 0, :]
    if vb:
        out = out[..., 0]
    return out


def _compiled(kernel, a: np.ndarray, bt: np.ndarray, batch: tuple[int, ...], n: int, k: int,
              m: int) -> np.ndarray:
    """``matmul`` by ``_orderedc.matmul``: each operand read in place where it is a C-contiguous
    matrix or the transpose of one (strides in elements), batch stride 0 where one matrix serves
    the whole batch; a contiguous copy otherwise."""
    out = np.empty(batch + (n, m))

    def strides(x: np.ndarray, rows: int) -> tuple[np.ndarray, int, int, int]:
        """(buffer, batch stride, row stride, contracted-axis stride) of a (..., rows, k)."""
        shared = x.ndim == 2
        if not shared and x.shape[:-2] != batch:
            x = np.broadcast_to(x, batch + x.shape[-2:])
        if x.flags.c_contiguous:
            return x, 0 if shared else rows * k, k, 1
        xt = x.swapaxes(-1, -2)
        if xt.flags.c_contiguous:  # the transpose of a contiguous (..., k, rows)
            return xt, 0 if shared else rows * k, 1, rows
        return np.ascontiguousarray(x), 0 if shared else rows * k, k, 1

    fa, sa, ra, ka = strides(a, n)
    fb, sb, rb, kb = strides(bt, m)
    kernel.matmul(fa, sa, ra, ka, fb, sb, rb, kb, out, math.prod(batch), n, k, m)
    return out


def segment_sums(values: np.ndarray, positions: np.ndarray, starts: np.ndarray,
                 n: int) -> np.ndarray:
    """Sums of sparse segments, each as ``matmul`` sums a dense row of length ``n`` whose other
    entries are zero: the same tree (``_tree_sum``), the same bits.

    Parameters
    ----------
    values : ndarray, shape (nnz,)
        The present terms, segment after segment.
    positions : ndarray of int, shape (nnz,)
        Each term's position in its dense row, in [0, n) and ascending within a segment.
    starts : ndarray of int, shape (segments + 1,)
        Segment s holds ``values[starts[s]:starts[s + 1]]`` (``starts[0] = 0``, the last is nnz).
    n : int
        Length of the dense rows.

    Returns
    -------
    ndarray, shape (segments,)
        ``0.0 + tree`` of each dense row: an absent term is an exact zero, which changes no sum
        of the tree except in the sign of a zero, and the final ``0.0 +`` makes that +0.0 as
        the dense sum does.
    """
    v = np.ascontiguousarray(values, dtype=np.float64)
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    st = np.ascontiguousarray(starts, dtype=np.int64)
    segs = len(st) - 1
    out = np.empty(max(segs, 0))
    if KERNEL.module is not None:
        KERNEL.module.sparse_tree(v, pos, st, out, segs, int(n))
        return out
    # numpy: the segments scattered into dense rows, a block of rows at a time
    rows = max(1, BLOCK // max(int(n), 1))
    for s in range(0, segs, rows):
        e = min(segs, s + rows)
        dense = np.zeros((e - s, int(n)))
        lo, hi = st[s], st[e]
        seg = np.repeat(np.arange(e - s), np.diff(st[s:e + 1]))
        dense[seg, pos[lo:hi]] = v[lo:hi]
        out[s:e] = _tree_sum(dense)
    return out


def dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Σ_i x_i y_i`` along the last axis (broadcast), summed in ``matmul``'s tree."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    return matmul(x[..., None, :], y[..., :, None])[..., 0, 0]


def norm(x: np.ndarray) -> np.ndarray:
    """The Euclidean norm along the last axis, ``sqrt(dot(x, x))``."""
    return np.sqrt(dot(x, x))


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``numpy.linalg.solve(a, b)`` by Gaussian elimination with partial pivoting, in a fixed
    order: eliminate column 0, 1, ..., d - 1 (pivot: the first row of largest magnitude), then
    substitute back from row d - 1, each row's sum of known terms in ``matmul``'s tree.

    Parameters
    ----------
    a : ndarray, shape (..., d, d)
    b : ndarray, shape (..., d) or (..., d, k)
        Right-hand side(s): one vector per matrix when ``b.ndim == a.ndim - 1`` (numpy 1's
        rule), else one (d, k) block per matrix, broadcast against ``a``'s batch.

    Returns
    -------
    ndarray
        Shape of ``b`` (broadcast against ``a``'s batch). A singular matrix gives inf or NaN
        in its own rows (no exception: the other matrices of the batch are unaffected).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = a.shape[-1]
    if a.ndim < 2 or a.shape[-2] != d:
        raise ValueError(f"solve: a must be (..., d, d), got {a.shape}")
    vec = b.ndim == a.ndim - 1
    if vec:
        b = b[..., None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    k = b.shape[-1]
    lu = np.array(np.broadcast_to(a, batch + (d, d)), order="C").reshape(-1, d, d)
    rhs = np.array(np.broadcast_to(b, batch + (d, k)), order="C").reshape(-1, d, k)
    if KERNEL.module is not None:
        x = np.empty_like(rhs)
        KERNEL.module.solve(lu, rhs, x, len(lu), d, k)
        x = x.reshape(batch + (d, k))
        return x[..., 0] if vec else x
    rows = np.arange(len(lu))
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(d):
            p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
            swap = p != j
            if swap.any():
                r, pr = rows[swap], p[swap]
                lu[r, j], lu[r, pr] = lu[r, pr], lu[r, j].copy()
                rhs[r, j], rhs[r, pr] = rhs[r, pr], rhs[r, j].copy()
            f = lu[:, j + 1:, j] / lu[:, j, j][:, None]
            lu[:, j + 1:, j + 1:] -= f[:, :, None] * lu[:, j, None, j + 1:]
            rhs[:, j + 1:] -= f[:, :, None] * rhs[:, j, None, :]
        x = np.empty_like(rhs)
        for i in range(d - 1, -1, -1):
            done = matmul(lu[:, i, None, i + 1:], x[:, i + 1:])[:, 0]  # Σ_{c>i} u_ic x_c
            x[:, i] = (rhs[:, i] - done) / lu[:, i, i, None]
    x = x.reshape(batch + (d, k))
    return x[..., 0] if vec else x


def _round_robin(d: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The d - 1 (d even) or d (d odd) rounds of disjoint pairs (p < q) that together meet every
    pair once: the circle method (Brent & Luk's parallel Jacobi ordering)."""
    players = list(range(d + d % 2))
    half = len(players) // 2
    rounds = []
    for _ in range(len(players) - 1):
        pairs = [(min(players[i], players[-1 - i]), max(players[i], players[-1 - i]))
                 for i in range(half)]
        pairs = [pq for pq in pairs if pq[1] < d]
        rounds.append((np.array([p for p, _ in pairs], dtype=np.intp),
                       np.array([q for _, q in pairs], dtype=np.intp)))
        players = [players[0], players[-1]] + players[1:-1]
    return rounds


def eigh(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices, by cyclic
    Jacobi rotations in a fixed order (Golub & Van Loan, Algorithm 8.5.3, with the round-robin
    ordering of disjoint pairs so that one round is one vectorised step).

    A rotation is skipped where its off-diagonal entry is negligible (100 |a_pq| is below half
    an ulp of both diagonal entries, or |a_pq| is below ``OFF_FLOOR`` times the matrix's
    norm); a converged matrix is left exactly as it is, so each matrix's result does not
    depend on the others in the batch.

    Parameters
    ----------
    a : ndarray, shape (..., d, d)
        Symmetric (only what the rotations read is used: the whole matrix, symmetrised first).

    Returns
    -------
    w : ndarray, shape (..., d)
        Eigenvalues in ascending order (ties in their diagonal order).
    v : ndarray, shape (..., d, d)
        Orthonormal eigenvectors, ``v[..., :, i]`` for ``w[..., i]``; signs are not
        normalised (as with LAPACK, an eigenvector's sign is arbitrary).
    """
    a = np.asarray(a, dtype=np.float64)
    d = a.shape[-1]
    if a.ndim < 2 or a.shape[-2] != d:
        raise ValueError(f"eigh: a must be (..., d, d), got {a.shape}")
    batch = a.shape[:-2]
    m = a.reshape(-1, d, d)
    m = 0.5 * (m + np.swapaxes(m, 1, 2))
    v = np.broadcast_to(np.eye(d), m.shape).copy()
    floor = OFF_FLOOR * norm(m.reshape(len(m), -1))
    rounds = _round_robin(d)
    if KERNEL.module is not None:
        m = np.ascontiguousarray(m)
        pairs_p = np.concatenate([p for p, _ in rounds] or [np.zeros(0)]).astype(np.int64)
        pairs_q = np.concatenate([q for _, q in rounds] or [np.zeros(0)]).astype(np.int64)
        sizes = np.array([len(p) for p, _ in rounds], dtype=np.int64)
        KERNEL.module.jacobi(m, v, np.ascontiguousarray(floor), pairs_p, pairs_q, sizes,
                             len(m), d, MAX_SWEEPS)
        return _sorted(m, v, batch, d)
    for _ in range(MAX_SWEEPS):
        rotated = False
        for p, q in rounds:
            apq = m[:, p, q]
            app, aqq = m[:, p, p], m[:, q, q]
            g = 100.0 * np.abs(apq)
            rot = ((np.abs(app) + g != np.abs(app)) | (np.abs(aqq) + g != np.abs(aqq)))
            rot &= np.abs(apq) > floor[:, None]
            if not rot.any():
                continue
            rotated = True
            with np.errstate(divide="ignore", invalid="ignore"):
                theta = (aqq - app) / (2.0 * np.where(rot, apq, 1.0))
                t = np.where(theta >= 0, 1.0, -1.0) / (np.abs(theta) + np.hypot(theta, 1.0))
            c = 1.0 / np.sqrt(t * t + 1.0)
            s = t * c
            rc, c_, s_ = rot[:, None, :], c[:, None, :], s[:, None, :]
            # columns p, q of m and of v: m J, v J (J the disjoint rotations of this round)
            for x in (m, v):
                xp, xq = x[:, :, p], x[:, :, q]
                x[:, :, p], x[:, :, q] = (np.where(rc, c_ * xp - s_ * xq, xp),
                                          np.where(rc, s_ * xp + c_ * xq, xq))
            # rows p, q of m: J^T (m J)
            rr, cr, sr = rot[:, :, None], c[:, :, None], s[:, :, None]
            mp, mq = m[:, p, :], m[:, q, :]
            m[:, p, :], m[:, q, :] = (np.where(rr, cr * mp - sr * mq, mp),
                                      np.where(rr, sr * mp + cr * mq, mq))
            # the annihilated pair is zero (not the few ulps the rotation leaves)
            b_ = np.nonzero(rot)
            m[b_[0], p[b_[1]], q[b_[1]]] = 0.0
            m[b_[0], q[b_[1]], p[b_[1]]] = 0.0
        if not rotated:
            break
    return _sorted(m, v, batch, d)


def _sorted(m: np.ndarray, v: np.ndarray, batch: tuple[int, ...], d: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues (the diagonal of the rotated matrices) in ascending order, ties in
    diagonal order, with their eigenvectors."""
    w = np.diagonal(m, axis1=1, axis2=2)
    order = np.argsort(w, axis=1, kind="stable")
    w = np.take_along_axis(w, order, axis=1)
    v = np.take_along_axis(v, order[:, None, :], axis=2)
    return w.reshape(batch + (d,)), v.reshape(batch + (d, d))


def lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The least-squares solution x of ``a x ≈ b`` for a full-column-rank ``a`` (n, d), by the
    normal equations ``(aᵀa) x = aᵀb`` (``matmul`` and ``solve``); ``b`` is (n,) or (n, k)."""
    a = np.asarray(a, dtype=np.float64)
    at = np.ascontiguousarray(a.T)
    return solve(matmul(at, a), matmul(at, b))


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's correlation of two vectors, its dot products in ``matmul``'s tree
    (``numpy.corrcoef``'s value up to rounding, without its BLAS dot product)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    den = float(np.sqrt(dot(dx, dx) * dot(dy, dy)))
    return float(dot(dx, dy)) / den if den > 0 else float("nan")


def basic_solution(a: np.ndarray, b: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """A solution x of the consistent (possibly rank-deficient) system ``a x = b`` with the
    free variables at zero: row echelon form by Gaussian elimination with partial pivoting,
    column after column (a column whose largest remaining entry is below ``rtol`` times the
    largest of ``a`` has no pivot), then back substitution left to right.

    The caller checks ``matmul(a, x)`` against ``b``: an inconsistent system gives an x that
    does not solve it.
    """
    a = np.array(a, dtype=np.float64)
    b = np.array(b, dtype=np.float64)
    r, c = a.shape
    scale = float(np.abs(a).max()) if a.size else 0.0
    pivots: list[int] = []
    row = 0
    for col in range(c):
        if row == r:
            break
        i = row + int(np.argmax(np.abs(a[row:, col])))
        if not abs(a[i, col]) > rtol * scale:
            continue
        if i != row:
            a[[row, i]] = a[[i, row]]
            b[[row, i]] = b[[i, row]]
        f = a[row + 1:, col] / a[row, col]
        a[row + 1:, col:] -= f[:, None] * a[row, col:]
        b[row + 1:] -= f * b[row]
        pivots.append(col)
        row += 1
    x = np.zeros(c)
    for k in range(len(pivots) - 1, -1, -1):
        s = b[k]
        for col in pivots[k + 1:]:
            s -= a[k, col] * x[col]
        x[pivots[k]] = s / a[k, pivots[k]]
    return x


def nnls(a: np.ndarray, b: np.ndarray, maxiter: int | None = None) -> np.ndarray:
    """argmin_{x >= 0} ||a x - b||₂ by Lawson & Hanson's active-set method (Solving Least
    Squares Problems, 1974, Algorithm NNLS, §23.3), each least-squares step on the passive
    columns by ``lstsq`` (normal equations in a fixed order): the problem ``scipy.optimize.nnls``
    solves, without its BLAS-dependent rounding.

    Parameters
    ----------
    a : ndarray, shape (m, n)
    b : ndarray, shape (m,)
    maxiter : int, optional
        Cap on the inner (back-tracking) iterations; 3 n by default, as scipy's.

    Returns
    -------
    ndarray, shape (n,)
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m, n = a.shape
    at = np.ascontiguousarray(a.T)
    maxiter = 3 * n if maxiter is None else int(maxiter)
    tol = 10.0 * max(m, n) * np.finfo(np.float64).eps * max(1.0, float(np.abs(a).max(
        initial=0.0)))
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)

    def passive_fit() -> np.ndarray:
        s = np.zeros(n)
        s[passive] = lstsq(a[:, passive], b)
        return s

    w = matmul(at, b - matmul(a, x))
    it = 0
    while (~passive).any() and np.where(passive, -np.inf, w).max() > tol:
        passive[int(np.argmax(np.where(passive, -np.inf, w)))] = True
        s = passive_fit()
        while passive.any() and s[passive].min() <= 0.0 and it < maxiter:
            it += 1
            neg = passive & (s <= 0.0)
            den = x[neg] - s[neg]
            step = float(np.where(den > 0, x[neg] / np.where(den > 0, den, 1.0), 0.0).min())
            x = x + step * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
            s = passive_fit()
        x = s
        if it >= maxiter:
            break
        w = matmul(at, b - matmul(a, x))
    return x
