"""Pairwise comparison profiles and the utility metrics of Yan, Li & Liu, 2020 (Eq. 4, §6.1.3).

Items are 0..m-1; a ranking lists items best first, and its *positions* are the inverse
permutation, ``pos[item]`` = the item's place (0 = best). An agent's private row in the rank
aggregation data sets is its positions: answering "do you prefer a_j to a_l?" is then two
lookups, and the count matrix a comparison per pair. Pairs (j, l) with j < l are numbered in
``np.triu_indices(m, 1)`` order: pair p asks "do you prefer a_j to a_l?".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=64)
def pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(j, l) arrays of all C(m, 2) pairs with j < l, in pair-index order."""
    j, l = np.triu_indices(m, 1)
    j.setflags(write=False)
    l.setflags(write=False)
    return j, l


def positions(rankings: np.ndarray) -> np.ndarray:
    """Inverse permutations: ``positions[i, item]`` = place of item in agent i's ranking (0=top).

    A permutation's inverse is an involution, so this also turns positions back into rankings
    (``rankings``).
    """
    rankings = np.asarray(rankings)
    n, m = rankings.shape
    pos = np.empty((n, m), dtype=np.int16)
    flat = rankings.astype(np.intp) + (np.arange(n, dtype=np.intp) * m)[:, None]
    pos.reshape(-1)[flat.reshape(-1)] = np.tile(np.arange(m, dtype=np.int16), n)
    return pos


def rankings(pos: np.ndarray) -> np.ndarray:
    """Best-first rankings from positions (the inverse of ``positions``, the same operation)."""
    return positions(pos)


def answers(pos: np.ndarray, pair_idx: np.ndarray) -> np.ndarray:
    """True answers o (1 if the agent prefers a_j to a_l) to each agent's queried pairs.

    ``pos`` holds one row of positions per agent; ``pair_idx`` one row of pair indices per
    agent (K each). The result has ``pair_idx``'s shape, dtype int64: ``pos[j] < pos[l]``.
    """
    pos = np.asarray(pos)
    pair_idx = np.asarray(pair_idx)
    n, m = pos.shape
    j, l = pairs(m)
    flat = pos.reshape(-1)
    base = (np.arange(n, dtype=np.intp) * m)[:, None]
    return (flat[base + j[pair_idx]] < flat[base + l[pair_idx]]).astype(np.int64)


def count_matrix(pos: np.ndarray) -> np.ndarray:
    """C[a, b] = number of agents ranking a above b (int64, m x m), from positions rows.

    One pass per pair over the item's column of positions (the rows transposed once), an exact
    count: no sum whose order could matter.
    """
    pos = np.asarray(pos)
    m = pos.shape[1]
    cols = np.ascontiguousarray(pos.T)  # row a: every agent's position of item a
    c = np.zeros((m, m), dtype=np.int64)
    for a in range(m):
        for b in range(a + 1, m):
            c[a, b] = np.count_nonzero(cols[a] < cols[b])
            c[b, a] = np.count_nonzero(cols[b] < cols[a])
    return c


def cmp_from_counts(c: np.ndarray) -> np.ndarray:
    """cmp[a, b] = C_ab - C_ba."""
    return c - c.T


def error_rate(cmp_true: np.ndarray, cmp_hat: np.ndarray) -> float:
    """Yan, Li & Liu, 2020, Eq. (4): fraction of the C(m,2) pairs whose estimated sign is strictly
    flipped."""
    m = cmp_true.shape[0]
    j, l = pairs(m)
    t = cmp_true[j, l]
    h = cmp_hat[j, l]
    flips = ((t > 0) & (h < 0)) | ((t < 0) & (h > 0))
    return float(flips.sum() / len(j))


def kendall_tau(ranking: np.ndarray | list[int], c: np.ndarray) -> float:
    """Average Kendall tau distance between ``ranking`` and the profile, normalised by C(m,2).

    With C[a, b] the count of agents ranking a above b: every pair that ``ranking`` puts as
    (a before b) disagrees with the C[b, a] agents who rank b above a.
    """
    r = np.asarray(ranking)
    m = len(r)
    n = int(c[0, 1] + c[1, 0]) if m > 1 else 1
    pos = np.empty(m, dtype=np.int64)
    pos[r] = np.arange(m)
    before = pos[:, None] < pos[None, :]  # before[a, b]: a ranked above b
    disagreements = c.T[before].sum()
    return float(disagreements / max(n, 1) / (m * (m - 1) / 2))


def kendall_distance(r1: np.ndarray | list[int], r2: np.ndarray | list[int]) -> int:
    """Number of discordant pairs between two rankings."""
    r1, r2 = np.asarray(r1), np.asarray(r2)
    m = len(r1)
    p1 = np.empty(m, dtype=np.int64)
    p2 = np.empty(m, dtype=np.int64)
    p1[r1] = np.arange(m)
    p2[r2] = np.arange(m)
    d1 = np.sign(p1[:, None] - p1[None, :])
    d2 = np.sign(p2[:, None] - p2[None, :])
    return int((d1 * d2 < 0).sum() // 2)
