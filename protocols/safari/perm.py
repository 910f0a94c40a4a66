"""Indexing of permutations and combinations, vectorised over many rankings.

Conventions used throughout the SAFARI family (Cheng et al., 2021):

* a *ranking* is a row of item ids, best first: ``ranking[r]`` is the item at rank ``r``
  (0-based; the paper's ranks are 1-based, σ(j) = x_k);
* its *positions* are the inverse: ``pos[k]`` is the rank of item ``k`` (the paper's σ^{-1});
* a permutation of ``k`` symbols is indexed by its lexicographic rank in ``[0, k!)`` (Lehmer
  code), which orders relative rankings as Example 7 lists them (⟨B, W⟩ before ⟨W, B⟩);
* a ``p``-subset of ``{0, .., N-1}`` is indexed by its lexicographic rank among the sorted
  ``p``-tuples (``itertools.combinations`` order), which orders interleavings as Example 7
  lists them (⟨l2, l2, l3, l3⟩, ⟨l2, l3, l2, l3⟩, ...).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the passes over all d! rankings (CALM's maximum-entropy fit, a weight vector's marginals):
#: compiled (``protocols/_safaric.c``) or numpy, the same bits; ``LDPSIM_ORDERED=numpy`` chooses
#: numpy
RANKINGS = Accelerator.load("passes over all rankings", "ldpsim.protocols._safaric",
                            environment.ORDERED, "protocols/_safaric.c",
                            needs=("ipf_triple", "ipf_pass", "marginals"))


def positions(rankings: np.ndarray) -> np.ndarray:
    """Inverse permutations: ``pos[i, k]`` = rank of item ``k`` in ranking ``i`` (0 = best).

    Parameters
    ----------
    rankings : (n, d) array of item ids, best first (each row a permutation of 0..d-1).

    Returns
    -------
    (n, d) int64 array.
    """
    r = np.asarray(rankings, dtype=np.int64)
    n, d = r.shape
    pos = np.empty((n, d), dtype=np.int64)
    np.put_along_axis(pos, r, np.broadcast_to(np.arange(d, dtype=np.int64), (n, d)), axis=1)
    return pos


def rankings_from_positions(pos: np.ndarray) -> np.ndarray:
    """Inverse of :func:`positions` (the same operation: a permutation's inverse)."""
    return positions(pos)


def is_permutation(rows: np.ndarray) -> np.ndarray:
    """Boolean per row: is it a permutation of ``0 .. d-1``?"""
    r = np.asarray(rows)
    d = r.shape[1]
    inside = ((r >= 0) & (r < d)).all(axis=1)
    if 1 < d <= TABLE_K and len(r) and r.dtype.kind in "iu":  # looked up (``lex_rank``)
        return inside & (_rank_table(d)[_base_k(np.where(inside[:, None], r, 0), d)] >= 0)
    s = np.sort(np.where(inside[:, None], r, 0), axis=1)
    return inside & (s == np.arange(d)).all(axis=1)


@lru_cache(maxsize=64)
def _factorials(k: int) -> np.ndarray:
    return np.array([math.factorial(i) for i in range(k + 1)], dtype=np.int64)


#: largest k whose permutations ``lex_rank`` looks up in a table of k^k entries (7^7 = 823,543
#: int32s, 3.3 MB) instead of computing their Lehmer digits
TABLE_K = 7


def _base_k(rows: np.ndarray, k: int) -> np.ndarray:
    """Each row of digits in ``[0, k)`` read as one base-k number (int64), first digit most
    significant: its index in ``_rank_table``."""
    code = rows[:, 0].astype(np.int64)
    for r in range(1, rows.shape[1]):
        code *= k
        code += rows[:, r]
    return code


@lru_cache(maxsize=TABLE_K + 1)
def _rank_table(k: int) -> np.ndarray:
    """``lex_rank`` of every row of k digits in ``[0, k)``, read as a base-k number; -1 where
    the row is not a permutation."""
    table = np.full(k ** k, -1, dtype=np.int32)
    perms = np.array(list(itertools.permutations(range(k))), dtype=np.int64).reshape(-1, k)
    table[_base_k(perms, k)] = np.arange(len(perms))
    return table


def lex_rank(perms: np.ndarray) -> np.ndarray:
    """Lexicographic index in ``[0, k!)`` of each row, a permutation of ``0 .. k-1`` (k <= 20).

    The Lehmer digit of position ``r`` counts the later entries smaller than ``perm[r]``; the
    index is ``sum_r digit_r * (k-1-r)!``. For k <= ``TABLE_K`` each row, read as a base-k
    number, is looked up in a table of these indices (itertools' order is the lexicographic
    one), about 7x faster; a row that is not a permutation takes the digits' way, as before.
    """
    p = np.asarray(perms, dtype=np.int64)
    n, k = p.shape
    if 1 < k <= TABLE_K and n and p.min() >= 0 and p.max() < k:
        idx = _rank_table(k)[_base_k(p, k)].astype(np.int64)
        if idx.min() >= 0:
            return idx
    f = _factorials(k)
    idx = np.zeros(n, dtype=np.int64)
    for r in range(k - 1):
        digit = (p[:, r + 1:] < p[:, r:r + 1]).sum(axis=1)
        idx += digit * f[k - 1 - r]
    return idx


@lru_cache(maxsize=TABLE_K + 1)
def _unrank_table(k: int) -> np.ndarray:
    """Every permutation of ``0 .. k-1`` by its lexicographic index, as int64 (read-only)."""
    table = all_permutations(k).astype(np.int64)
    table.flags.writeable = False
    return table


def lex_unrank(index: np.ndarray, k: int) -> np.ndarray:
    """Inverse of :func:`lex_rank`: the permutations of ``0 .. k-1`` with the given indices
    (for k <= ``TABLE_K`` and indices in ``[0, k!)``, rows of a table of all of them)."""
    idx = np.asarray(index, dtype=np.int64).copy()
    n = len(idx)
    if 0 < k <= TABLE_K and n and idx.min() >= 0 and idx.max() < math.factorial(k):
        return _unrank_table(k)[idx]
    f = _factorials(k)
    used = np.zeros((n, k), dtype=bool)
    out = np.empty((n, k), dtype=np.int64)
    for r in range(k):
        digit, idx = np.divmod(idx, f[k - 1 - r])
        free_rank = np.cumsum(~used, axis=1) - 1  # rank of each symbol among the unused ones
        choice = np.argmax((free_rank == digit[:, None]) & ~used, axis=1)
        out[:, r] = choice
        used[np.arange(n), choice] = True
    return out


def all_permutations(k: int) -> np.ndarray:
    """All ``k!`` permutations of ``0 .. k-1`` in lexicographic order, shape ``(k!, k)``, int8.

    Built by prefixing each first symbol to the permutations of the remaining ones; row ``i``
    is ``lex_unrank(i)``. Memory: ``k * k!`` bytes (36 MB for k = 10).
    """
    if k > 12:
        raise ValueError(f"all_permutations: k = {k} is too large to enumerate")
    perms = np.zeros((1, 0), dtype=np.int8)
    for m in range(1, k + 1):
        prev = perms  # permutations of 0..m-2, lexicographic
        blocks = []
        for first in range(m):
            tail = prev + (prev >= first).astype(np.int8)
            blocks.append(np.hstack([np.full((len(prev), 1), first, dtype=np.int8), tail]))
        perms = np.vstack(blocks)
    return perms


@lru_cache(maxsize=256)
def combinations_table(n_slots: int, p: int) -> np.ndarray:
    """All sorted ``p``-subsets of ``0 .. n_slots-1`` in lexicographic order, ``(C(N,p), p)``."""
    t = np.array(list(itertools.combinations(range(n_slots), p)), dtype=np.int64)
    t = t.reshape(math.comb(n_slots, p), p)
    t.setflags(write=False)
    return t


def comb_rank(subsets: np.ndarray, n_slots: int) -> np.ndarray:
    """Lexicographic index of each row, a strictly increasing ``p``-subset of ``0 .. N-1``.

    With ``c_{-1} = -1``, the index is ``sum_i [C(N-1-c_{i-1}, p-i) - C(N-c_i, p-i)]`` (the
    hockey-stick identity summed over the values skipped before each ``c_i``).
    """
    c = np.asarray(subsets, dtype=np.int64)
    n, p = c.shape
    binom = np.array([[math.comb(a, b) for b in range(p + 1)] for a in range(n_slots + 2)],
                     dtype=np.int64)
    idx = np.zeros(n, dtype=np.int64)
    prev = np.full(n, -1, dtype=np.int64)
    for i in range(p):
        idx += binom[n_slots - 1 - prev, p - i] - binom[n_slots - c[:, i], p - i]
        prev = c[:, i]
    return idx


@lru_cache(maxsize=12)
def all_positions_shared(k: int) -> np.ndarray:
    """:func:`all_positions`, made once per process and read-only (the full-domain baselines
    read it in every run, a sweep over d in turn: 40 MB in all for k <= 10, about 0.1 s to make
    for k = 10)."""
    out = all_positions(k)
    out.setflags(write=False)
    return out


def all_positions(k: int, chunk: int = 1 << 18) -> np.ndarray:
    """Positions (inverse permutations) of :func:`all_permutations`, ``(k!, k)`` int8."""
    perms = all_permutations(k)
    out = np.empty_like(perms)
    cols = np.arange(k, dtype=np.int8)
    for s in range(0, len(perms), chunk):
        block = perms[s:s + chunk].astype(np.int64)
        rows = np.arange(len(block))[:, None]
        tmp = np.empty(block.shape, dtype=np.int8)
        tmp[rows, block] = cols
        out[s:s + chunk] = tmp
    return out
