"""Structure learning: tripletwise mutual information (Cheng et al., 2021, Definition 1) and the
Anchors method of Huang & Guestrin (ICML 2010, the paper's [5]) building a K-thin chain top-down.

Anchors, for a leaf of p >= 2 items: for every pair of items (a1, a2) assumed to lie in the
leaf, rank the other items by I(x; a1, a2) and complete the leaf with the p - 2 highest; keep
the candidate with the smallest cross-term objective

    F(A, B) = Σ_{i∈A} Σ_{{j,k}⊂B} I(i; j, k) + Σ_{i∈B} Σ_{{j,k}⊂A} I(i; j, k),

which is zero for a riffle-independent split. For p = 1 every single item is a candidate.
Ties go to the first candidate in lexicographic order.

The chain peels leaves off until at most K items remain (they form the last leaf). Under LDP
the curator only has the tripletwise MI of the full rankings (from S3), so every level uses
those values restricted to the remaining items (Huang & Guestrin recompute the MI on the
rankings restricted to the remaining items, which the curator cannot see).

``leaf_size``: ``"K"`` peels leaves of exactly K items (Huang's ``createChain``); ``"upto_K"``
lets Anchors pick any size 1..K by the mean cross-term MI (F divided by its number of terms),
which can produce chains like Fig. 1(a), whose top leaf {P} is smaller than K = 2.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ldpsim.protocols.safari import rules
from ldpsim.protocols.safari.riffle import Chain

LEAF_SIZES = ("K", "upto_K")


def tripletwise_mi(s3: np.ndarray, d: int) -> np.ndarray:
    """I(x_k1; x_k2, x_k3) of Definition 1 for every triplet, as a (d, d, d) array symmetric
    in its last two indices (zero where indices repeat).

    Each S3 row is normalised to a distribution and the marginals Pr[φ_k1], Pr[λ] in the
    definition are taken from that joint (so I >= 0; the plug-in MI, natural log, 0 log 0 = 0).
    """
    P = np.clip(np.asarray(s3, dtype=float).reshape(-1, d, 2), 0.0, None)
    tot = P.sum(axis=(1, 2), keepdims=True)
    P = np.where(tot > 0, P / np.where(tot > 0, tot, 1.0), 1.0 / (2 * d))
    pa = P.sum(axis=2, keepdims=True)
    pl = P.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(P > 0, P * np.log(P / (pa * pl)), 0.0)
    mi = np.maximum(terms.sum(axis=(1, 2)), 0.0)
    out = np.zeros((d, d, d))
    tr = rules.triplets(d)
    out[tr[:, 0], tr[:, 1], tr[:, 2]] = mi
    out[tr[:, 0], tr[:, 2], tr[:, 1]] = mi
    return out


def split_cost(A: list[int] | tuple[int, ...], B: list[int] | tuple[int, ...],
               mi: np.ndarray) -> float:
    """F(A, B): the cross-term tripletwise MI of splitting A | B (zero when riffle
    independent). ``mi[i, j, j]`` is zero, so each unordered pair is half the ordered sum."""
    A, B = list(A), list(B)
    t1 = mi[np.ix_(A, B, B)].sum() / 2.0 if len(B) > 1 else 0.0
    t2 = mi[np.ix_(B, A, A)].sum() / 2.0 if len(A) > 1 else 0.0
    return float(t1 + t2)


def n_cross_terms(p: int, q: int) -> int:
    """Number of triplets in F(A, B) for |A| = p, |B| = q."""
    return p * math.comb(q, 2) + q * math.comb(p, 2)


def anchors_split(items: list[int] | tuple[int, ...], mi: np.ndarray,
                  p: int) -> tuple[tuple[int, ...], float]:
    """The Anchors method: the leaf A ⊂ items of size p minimising F(A, items \\ A).

    Returns (sorted leaf, its F).
    """
    items = sorted(items)
    if not 1 <= p < len(items):
        raise ValueError(f"leaf size {p} must be in [1, {len(items) - 1}]")
    best: tuple[tuple[int, ...], float] | None = None
    if p == 1:
        cands = [(i,) for i in items]
    else:
        cands = []
        for a1, a2 in itertools.combinations(items, 2):
            others = [x for x in items if x not in (a1, a2)]
            score = mi[others, a1, a2]
            top = np.argsort(-score, kind="stable")[:p - 2]
            cands.append(tuple(sorted([a1, a2] + [others[i] for i in top])))
    for A in cands:
        B = [x for x in items if x not in A]
        f = split_cost(A, B, mi)
        if best is None or f < best[1] - 1e-15:
            best = (A, f)
    return best


def learn_chain(mi: np.ndarray, K: int, leaf_size: str = "K") -> Chain:
    """A K-thin chain over all d items, top-down by :func:`anchors_split` (§3.2 phase 1)."""
    d = mi.shape[0]
    if not 1 <= K:
        raise ValueError("K must be >= 1")
    rest = list(range(d))
    leaves: list[tuple[int, ...]] = []
    while len(rest) > K:
        if leaf_size == "K":
            A, _ = anchors_split(rest, mi, K)
        elif leaf_size == "upto_K":
            best = None
            for p in range(1, min(K, len(rest) - 1) + 1):
                A_p, f = anchors_split(rest, mi, p)
                score = f / max(1, n_cross_terms(p, len(rest) - p))
                if best is None or score < best[1] - 1e-15:
                    best = (A_p, score)
            A = best[0]
        else:
            raise ValueError(f"unknown leaf_size {leaf_size!r}; allowed: {LEAF_SIZES}")
        leaves.append(A)
        rest = [x for x in rest if x not in A]
    leaves.append(tuple(rest))
    return Chain(tuple(leaves))
