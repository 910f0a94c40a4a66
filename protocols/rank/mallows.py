"""Mallows rankings by repeated insertion, generated per agent from a counter-based stream.

Seed 000 (§5.2.1) defines the dispersion as ``theta = 1 - q_M / p_M`` in [0, 1], where ``p_M`` is
the probability that a pair keeps the reference order. With Mallows' adjacent-swap ratio
``phi = q_M / p_M`` (P(pi) ∝ phi^d_K(pi, pi0)) that is ``phi = 1 - theta``: ``theta = 0`` is the
uniform distribution, ``theta -> 1`` concentrates on the reference ranking. (PerMallows, used by
the paper, writes ``theta_exp = -ln phi``; we take ``theta`` as the paper defines it and accept
``phi`` too.)

Repeated insertion (Doignon et al. 2004): item ``c_i`` (the i-th of the reference ranking) is
inserted above ``v_i`` of the ``i - 1`` items already placed, with P(v_i = v) ∝ phi^v, v in
0..i-1; the total number of inversions is sum v_i = d_K, so P(pi) ∝ phi^d_K.

Agent ``a``'s ranking uses only draws keyed by ``a``, so a pool generates exactly its own block.
"""

from __future__ import annotations

import functools

import numpy as np

from protocols import rng as rng_mod


def phi_from(theta: float | None = None, phi: float | None = None) -> float:
    """Mallows' phi from the paper's theta (phi = 1 - theta) or phi itself."""
    if (theta is None) == (phi is None):
        raise ValueError("give exactly one of theta or phi")
    return 1.0 - float(theta) if phi is None else float(phi)


def reference_ranking(key: int, m: int) -> np.ndarray:
    """The ground-truth central ranking (best first), a random permutation of the items."""
    return rng_mod.party_generator(rng_mod.stream_key(key, "mallows-reference")).permutation(m)


def insertion_pmf(phi: float, i: int) -> np.ndarray:
    """P(v = 0..i-1) ∝ phi^v for the i-th inserted item (uniform when phi = 1)."""
    w = np.power(float(phi), np.arange(i, dtype=np.float64)) if phi > 0 else np.eye(1, i)[0]
    return w / w.sum()


_BLOCK = 8192  # agents per pass: the block's draws and positions stay in cache
_BUCKET_BITS = 14
_BUCKET_SHIFT = np.uint64(64 - _BUCKET_BITS)


@functools.lru_cache(maxsize=32)
def _column_tables(phi: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each item's cdf of v and a lookup table of v by the top bits of the draw, items 2..m.

    A 64-bit draw ``d`` gives ``u = rng.uniform_of(d)``, and ``v = #{k : cdf[k] <= u}``
    (``searchsorted(cdf, u, "right")``). Draws whose top 14 bits equal b have u in
    [b, b + 1] * 2^-14 (the upper end by rounding), so the table holds v at the bucket's
    lower edge unless some cdf value lies in (lo, hi]; then it holds -1 (at most i - 1 of the
    2^14 buckets) and those draws compute u and count exactly. The lookup is exact, only
    faster. Row i - 2 of both arrays is item i's: cdfs (m - 1, m) padded with inf, tables
    (m - 1, 2^14). (Item 1 has one place: v = 0 always, and its draw is never needed.)
    """
    edges = np.arange((1 << _BUCKET_BITS) + 1, dtype=np.float64) * 2.0**-_BUCKET_BITS
    cdfs = np.full((max(m - 1, 0), m), np.inf)
    tables = np.empty((max(m - 1, 0), 1 << _BUCKET_BITS), dtype=np.int16)
    for i in range(2, m + 1):
        cdf = np.cumsum(insertion_pmf(phi, i))
        cdf[-1] = 1.0
        at = np.searchsorted(cdf, edges, side="right")  # v at each bucket edge
        cdfs[i - 2, :i] = cdf
        tables[i - 2] = np.where(at[1:] != at[:-1], -1, at[:-1])
    return cdfs, tables


def _counts(draws: np.ndarray, cdfs: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """v for draws of shape (N, m - 1), column c holding item c + 2's: ``searchsorted(cdf,
    rng.uniform_of(draw), "right")`` through the bucket tables, one gather for all columns."""
    idx = (draws >> _BUCKET_SHIFT).view(np.int64)
    idx += np.arange(draws.shape[1], dtype=np.int64) << _BUCKET_BITS
    v = tables.reshape(-1)[idx].reshape(-1)
    edge = np.flatnonzero(v < 0)  # draws in a bucket that holds a cdf value: count exactly
    if len(edge):
        col = edge % draws.shape[1]
        u = rng_mod.uniform_of(draws.reshape(-1)[edge])
        v[edge] = (cdfs[col] <= u[:, None]).sum(axis=1)
    return v.reshape(draws.shape)


def sample(key: int, agents: np.ndarray, m: int, phi: float) -> np.ndarray:
    """Rankings (best first) of the given agents, shape ``(len(agents), m)``, dtype int16.

    Item i of the reference is inserted ``v_i`` places above the bottom of the i - 1 items
    already placed, ``v_i = #{k : cdf_i[k] <= u_i}`` for the agent's own uniform ``u_i``
    (draw index i - 1 of round 0).
    """
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    ref = reference_ranking(key, m).astype(np.int16)
    cdfs, tables = _column_tables(float(phi), m)
    small = np.int16 if m < 2**15 else np.int64
    ranking = np.empty((n, m), dtype=np.int16)
    base = (np.arange(min(n, _BLOCK), dtype=np.intp) * m)[:, None]  # row offsets, flat index
    items = np.tile(ref, min(n, _BLOCK))
    for s in range(0, n, _BLOCK):
        blk = agents[s:s + _BLOCK]
        b = len(blk)
        # column c: the draw of item c + 2 (draw index c + 1)
        v = np.ascontiguousarray(_counts(rng_mod.bits(key, blk, 0, m - 1, offset=1), cdfs,
                                         tables).T)
        # pos[k] = position (0 = top) of reference item k among those inserted so far
        pos = np.empty((m, b), dtype=small)
        pos[0] = 0
        for i in range(2, m + 1):
            p = (i - 1) - np.minimum(v[i - 2], i - 1)  # insertion position from the top
            head = pos[: i - 1]
            head += head >= p
            pos[i - 1] = p
        flat = pos.T + base[:b]  # ranking[r, pos[k, r]] = ref[k]
        ranking[s:s + b].reshape(-1)[flat.reshape(-1)] = items[: b * m]
    return ranking
