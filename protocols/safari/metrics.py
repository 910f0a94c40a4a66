"""Utility metrics of Cheng et al., 2021, §6.1: AVD and SSE over first- and second-order marginals.

* Q1: for each item i, the distribution of its rank (d marginals of d cells): Pr[φ_i].
* Q2: for each pair of items i < k, the joint distribution of their ranks (C(d,2) marginals of
  d×d cells, zero diagonal): Pr[φ_i, φ_k]. These are the *ordered* second-order marginals of
  Huang, Guestrin & Guibas (the paper cites [4] without saying ordered or unordered; the
  unordered ones are a function of these).
* AVD(P, P') = ½ Σ|P - P'| (total variation), averaged over the marginals of Q1 (resp. Q2);
  SSE(P, P') = Σ (P - P')², also averaged over the marginals (the paper says "over all
  marginals" without saying sum or mean; the mean keeps numbers comparable across d).

Marginals of an estimated distribution may have negative cells (the paper's remark that a
baseline's AVD can exceed 1); nothing here clips them.
"""

from __future__ import annotations

import numpy as np
from ldpsim.protocols.safari import perm, rules


def q1_counts(pos: np.ndarray) -> np.ndarray:
    """(d, d) counts: [i, r] = number of rankings with item i at rank r."""
    pos = np.asarray(pos, dtype=np.int64)
    d = pos.shape[1]
    idx = np.arange(d)[None, :] * d + pos
    return np.bincount(idx.ravel(), minlength=d * d).reshape(d, d)


def q2_counts(pos: np.ndarray) -> np.ndarray:
    """(C(d,2), d, d) counts: [pair (i<k), a, b] = rankings with i at rank a and k at rank b."""
    pos = np.asarray(pos, dtype=np.int64)
    d = pos.shape[1]
    pr = rules.pairs(d)
    idx = (np.arange(len(pr))[None, :] * d * d + pos[:, pr[:, 0]] * d + pos[:, pr[:, 1]])
    return np.bincount(idx.ravel(), minlength=len(pr) * d * d).reshape(len(pr), d, d)


def s3_counts(pos: np.ndarray) -> np.ndarray:
    """(T, 2d) counts of Rule I^N values: [triplet, 2a + λ-1]."""
    pos = np.asarray(pos, dtype=np.int64)
    d = pos.shape[1]
    tr = rules.triplets(d)
    vals = 2 * pos[:, tr[:, 0]] + (pos[:, tr[:, 1]] > pos[:, tr[:, 2]])
    idx = np.arange(len(tr))[None, :] * 2 * d + vals
    return np.bincount(idx.ravel(), minlength=len(tr) * 2 * d).reshape(len(tr), 2 * d)


def distribution_marginals(f: np.ndarray, perm_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q1, Q2) of a (possibly signed) weight vector f over the rankings whose positions are
    ``perm_pos`` (all d! of them for the full-domain baselines). Compiled where it was built
    (``perm.RANKINGS``: one pass, each cell summed in the same order as ``np.bincount``)."""
    d = perm_pos.shape[1]
    f = np.asarray(f, dtype=float)
    kernel = perm.RANKINGS.module
    if kernel is not None and perm_pos.dtype == np.int8 and len(f) == len(perm_pos):
        pr = np.ascontiguousarray(rules.pairs(d), dtype=np.int64)
        q1, q2 = np.zeros((d, d)), np.zeros((len(pr), d, d))
        kernel.marginals(np.ascontiguousarray(perm_pos), d, np.ascontiguousarray(f), pr, q1, q2)
        return q1, q2
    q1 = np.stack([np.bincount(perm_pos[:, i], weights=f, minlength=d) for i in range(d)])
    pr = rules.pairs(d)
    q2 = np.stack([np.bincount(perm_pos[:, a].astype(np.int64) * d + perm_pos[:, b], weights=f,
                               minlength=d * d).reshape(d, d) for a, b in pr])
    return q1, q2


def avd(P: np.ndarray, Q: np.ndarray) -> float:
    """Mean total variation distance between matching marginals (rows after flattening)."""
    P = np.asarray(P, dtype=float).reshape(len(P), -1)
    Q = np.asarray(Q, dtype=float).reshape(len(Q), -1)
    return float(0.5 * np.abs(P - Q).sum(axis=1).mean())


def sse(P: np.ndarray, Q: np.ndarray) -> float:
    """Mean (over marginals) sum of squared errors."""
    P = np.asarray(P, dtype=float).reshape(len(P), -1)
    Q = np.asarray(Q, dtype=float).reshape(len(Q), -1)
    return float(((P - Q) ** 2).sum(axis=1).mean())


def truth_of(rankings_blocks, d: int) -> dict:
    """Ground truth for evaluation from an iterable of (n_i, d) ranking blocks.

    Returns probabilities ``q1`` (d, d), ``q2`` (P, d, d), ``s2`` (P,), ``s3`` (T, 2d) (None for
    d > 12, where it is not needed by any scenario and costs d·C(d-1,2) counters per agent),
    the pairwise count matrix ``counts`` ([a, b] = agents ranking a above b, as the rank
    family's truth) and ``n``.
    """
    return truth_of_counts(marginal_counts(rankings_blocks, d), d)


def marginal_counts(rankings_blocks, d: int) -> tuple:
    """The integer counts ``truth_of`` reads from ranking blocks: (n, Q1's counts, Q2's, S3's
    or None for d > 12). Counts of disjoint sets of rankings add up to those of their union
    (``add_counts``)."""
    n = 0
    c1 = np.zeros((d, d), dtype=np.int64)
    c2 = np.zeros((len(rules.pairs(d)), d, d), dtype=np.int64)
    c3 = np.zeros((len(rules.triplets(d)), 2 * d), dtype=np.int64) if d <= 12 else None
    for block in rankings_blocks:
        for s in range(0, len(block), 1 << 15):
            pos = perm.positions(block[s:s + (1 << 15)])
            n += len(pos)
            c1 += q1_counts(pos)
            c2 += q2_counts(pos)
            if c3 is not None:
                c3 += s3_counts(pos)
    return n, c1, c2, c3


def add_counts(a: tuple, b: tuple) -> tuple:
    """``marginal_counts`` of two disjoint sets of rankings, added."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], None if a[3] is None else a[3] + b[3])


def truth_of_counts(counts: tuple, d: int) -> dict:
    """``truth_of`` from its ``marginal_counts``."""
    n, c1, c2, c3 = counts
    n_ = max(n, 1)
    q2 = c2 / n_
    pr = rules.pairs(d)
    upper = np.triu(np.ones((d, d), dtype=bool), 1)
    above = (c2 * upper).sum(axis=(1, 2))
    counts = np.zeros((d, d), dtype=np.int64)
    counts[pr[:, 0], pr[:, 1]] = above
    counts[pr[:, 1], pr[:, 0]] = n - above
    return {"n": n, "d": d, "q1": c1 / n_, "q2": q2, "s2": above / n_,
            "s3": None if c3 is None else c3 / n_, "counts": counts}


def marginal_metrics(q1: np.ndarray, q2: np.ndarray, truth: dict) -> dict[str, float]:
    """avd_q1, avd_q2, sse_q1, sse_q2 of estimated marginals against the truth."""
    return {"avd_q1": avd(q1, truth["q1"]), "avd_q2": avd(q2, truth["q2"]),
            "sse_q1": sse(q1, truth["q1"]), "sse_q2": sse(q2, truth["q2"])}
