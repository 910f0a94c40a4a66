"""CALM-style consistency and maximum-entropy reconstruction over rank attributes.

Used twice in the family: by Rule I^C in SAFARI's first phase (§5.2.2: collect the 2-D marginals
S4 = {Pr[φ_k1, φ_k2]}, reconstruct the 3-D marginals S5, read S1, S2 and S3 off them) and by the
full-domain ``rank_calm`` baseline (§4.4: reconstruct the d-D distribution over all d!
rankings from all 2-D marginals).

What is simplified from CALM (Zhang et al., CCS 2018), as restated in the shared reference
notes: the marginal set is fixed to all C(d,2) pairs of rank attributes (CALM would choose
the marginals' width and number by its error estimate); each pair marginal is over the d(d-1)
rank pairs with distinct ranks (mutual exclusivity is public knowledge, so the impossible
diagonal is not collected); users are split uniformly at random between the pairs and report
with OLH. Post-processing is CALM's: Norm-Sub (here the equivalent Euclidean simplex
projection), then consistency of the shared 1-D marginals by inverse-variance averaging
(equal weights: every 1-D cell sums d-1 cells), repeated; maximum entropy by iterative
proportional fitting from the uniform distribution over valid cells.
"""

from __future__ import annotations

import itertools

import numpy as np
from ldpsim.protocols.safari import perm, rules
from ldpsim.protocols.safari.lade import joint_to_square, project_simplex


def make_consistent(joints: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Norm-Sub + 1-D consistency of the C(d,2) pair marginals (P, d, d), zero diagonals.

    For item i, the marginals containing it project to Pr[φ_i] (rows when i is the pair's
    first item, columns otherwise); their average is the target, and each marginal gets
    (target - its projection)/(d - 1) added to every off-diagonal cell of the matching slice.
    Rounds alternate projection onto the simplex and consistency; the last step is a
    projection, so the result is a set of distributions (consistent up to the last
    projection's small change).
    """
    J = np.array(joints, dtype=float)
    n_pairs, d, _ = J.shape
    pr = rules.pairs(d)
    off = ~np.eye(d, dtype=bool)
    for _ in range(rounds):
        J[:, off] = project_simplex(J[:, off])
        for i in range(d):
            first = np.flatnonzero(pr[:, 0] == i)
            second = np.flatnonzero(pr[:, 1] == i)
            proj = np.concatenate([J[first].sum(axis=2), J[second].sum(axis=1)])
            target = proj.mean(axis=0)
            delta = (target - proj) / (d - 1)
            J[first] += delta[:len(first), :, None] * off
            J[second] += delta[len(first):, None, :] * off
    J[:, off] = project_simplex(J[:, off])
    return J


def ipf_triple(p_ab: np.ndarray, p_ac: np.ndarray, p_bc: np.ndarray, iters: int = 500,
               tol: float = 1e-9) -> np.ndarray:
    """Maximum-entropy 3-D table T[a, b, c] over distinct ranks with the three given 2-D
    marginals, by iterative proportional fitting from the uniform table (stops when every
    marginal is within ``tol`` or after ``iters`` sweeps). The sweeps run compiled where they
    were built (``perm.RANKINGS``: numpy's products, quotients and sums in numpy's order)."""
    d = len(p_ab)
    idx = np.arange(d)
    valid = ((idx[:, None, None] != idx[None, :, None]) & (idx[:, None, None] != idx[None, None, :])
             & (idx[None, :, None] != idx[None, None, :]))
    T = valid / valid.sum()
    if perm.RANKINGS.module is not None:
        T = np.ascontiguousarray(T)
        perm.RANKINGS.module.ipf_triple(T, *(np.ascontiguousarray(p, dtype=np.float64)
                                             for p in (p_ab, p_ac, p_bc)), d, iters, tol)
        s = T.sum()
        return T / s if s > 0 else valid / valid.sum()

    def fit(cur: np.ndarray, target: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(cur > 0, target / cur, 0.0)

    for _ in range(iters):
        T = T * fit(T.sum(axis=2), p_ab)[:, :, None]
        T = T * fit(T.sum(axis=1), p_ac)[:, None, :]
        T = T * fit(T.sum(axis=0), p_bc)[None, :, :]
        if max(np.abs(T.sum(axis=2) - p_ab).max(), np.abs(T.sum(axis=1) - p_ac).max()) < tol:
            break
    s = T.sum()
    return T / s if s > 0 else valid / valid.sum()


def s3_from_joints(joints: np.ndarray, iters: int = 500) -> np.ndarray:
    """S3 (T, 2d) from the pair marginals via the max-entropy 3-D marginals S5 (§5.2.2)."""
    n_pairs, d, _ = joints.shape
    pidx = rules.pair_index(d)
    tr = rules.triplets(d)
    row_of = {tuple(t): i for i, t in enumerate(tr.tolist())}
    s3 = np.zeros((len(tr), 2 * d))
    upper = np.triu(np.ones((d, d), dtype=bool), 1)
    for a, b, c in itertools.combinations(range(d), 3):
        T = ipf_triple(joints[pidx[a, b]], joints[pidx[a, c]], joints[pidx[b, c]], iters)
        for k1, rest, axes in ((a, (b, c), (0, 1, 2)), (b, (a, c), (1, 0, 2)),
                               (c, (a, b), (2, 0, 1))):
            Tk = np.transpose(T, axes)  # (φ_k1, φ_k2, φ_k3) with k2 < k3
            above = (Tk * upper).sum(axis=(1, 2))
            below = (Tk * upper.T).sum(axis=(1, 2))
            s3[row_of[(k1, *rest)]] = np.stack([above, below], axis=1).ravel()
    return s3


def from_pair_frequencies(z: list[np.ndarray], d: int, rounds: int = 10,
                          iters: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rule I^C pipeline: estimated pair frequencies (one d(d-1) vector per pair) → consistent
    joints → (S1, S2, S3)."""
    joints = make_consistent(joint_to_square(np.asarray(z), d), rounds)
    pr = rules.pairs(d)
    s1 = np.zeros((d, d))
    cnt = np.zeros(d)
    for i, (a, b) in enumerate(pr):
        s1[a] += joints[i].sum(axis=1)
        s1[b] += joints[i].sum(axis=0)
        cnt[a] += 1
        cnt[b] += 1
    s1 /= cnt[:, None]
    s2 = (joints * np.triu(np.ones((d, d)), 1)).sum(axis=(1, 2))
    return s1, s2, s3_from_joints(joints, iters)


def maxent_rankings(joints: np.ndarray, perm_pos: np.ndarray, iters: int = 20,
                    tol: float = 1e-9) -> tuple[np.ndarray, bool]:
    """Maximum-entropy distribution over all d! rankings whose 2-D rank marginals match
    ``joints`` (P, d, d), by IPF over the pairs (§4.4's d-D reconstruction).

    ``perm_pos`` are the positions of all d! rankings (:func:`perm.all_permutations`); the work
    is iters × C(d,2) × d! (about 1.6e8 cell updates per sweep for d = 10).

    Returns (distribution, collapsed). Noisy marginals projected onto the simplex have zero
    cells; IPF zeroes every ranking that uses one, and when the zero cells of different pairs
    cover all rankings no distribution fits: IPF then loses all mass and we return the uniform
    distribution with ``collapsed = True``. Compiled where it was built (``perm.RANKINGS``:
    one pass per pair that applies the previous pair's ratio and sums the next marginal, each
    product and sum as numpy makes it, in the same order).
    """
    n_pairs, d, _ = joints.shape
    pr = rules.pairs(d)
    f = np.full(len(perm_pos), 1.0 / len(perm_pos))
    if perm.RANKINGS.module is not None and perm_pos.dtype == np.int8:
        return _maxent_compiled(joints, np.ascontiguousarray(perm_pos), f, iters, tol)
    for _ in range(iters):
        change = 0.0
        for i, (a, b) in enumerate(pr):
            idx = perm_pos[:, a].astype(np.int64) * d + perm_pos[:, b]
            cur = np.bincount(idx, weights=f, minlength=d * d)
            target = joints[i].ravel()
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(cur > 0, target / cur, 0.0)
            change = max(change, float(np.abs(cur - target).max()))
            f *= ratio[idx]
        if not f.sum() > 0:
            return np.full(len(f), 1.0 / len(f)), True
        if change < tol:
            break
    return f / f.sum(), False


def _maxent_compiled(joints: np.ndarray, pos: np.ndarray, f: np.ndarray, iters: int,
                     tol: float) -> tuple[np.ndarray, bool]:
    """``maxent_rankings`` by the compiled pass (``_safaric.ipf_pass``), the same bits: the
    scaling by one pair's ratio and the next pair's marginal share a pass over the rankings."""
    kernel = perm.RANKINGS.module
    d = joints.shape[1]
    pr = [(int(a), int(b)) for a, b in rules.pairs(d)]
    for _ in range(iters):
        change = 0.0
        cur = np.zeros(d * d)
        kernel.ipf_pass(pos, d, f, None, 0, 0, cur, *pr[0])
        for i, (a, b) in enumerate(pr):
            target = joints[i].ravel()
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.ascontiguousarray(np.where(cur > 0, target / cur, 0.0))
            change = max(change, float(np.abs(cur - target).max()))
            nxt = np.zeros(d * d) if i + 1 < len(pr) else None
            kernel.ipf_pass(pos, d, f, ratio, a, b, nxt, *(pr[i + 1] if nxt is not None
                                                           else (0, 0)))
            cur = nxt
        if not f.sum() > 0:
            return np.full(len(f), 1.0 / len(f)), True
        if change < tol:
            break
    return f / f.sum(), False
