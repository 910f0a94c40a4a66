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


def sample(key: int, agents: np.ndarray, m: int, phi: float) -> np.ndarray:
    """Rankings (best first) of the given agents, shape ``(len(agents), m)``, dtype int16."""
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    ref = reference_ranking(key, m)
    u = np.asfortranarray(rng_mod.uniform(key, agents, 0, m))
    # pos[:, k] = position (0 = top) of reference item k among those inserted so far.
    small = np.int16 if m < 2**15 else np.int64
    pos = np.zeros((n, m), dtype=small, order="F")  # column-wise updates below
    for i in range(1, m + 1):
        cdf = np.cumsum(insertion_pmf(phi, i))
        cdf[-1] = 1.0
        v = np.searchsorted(cdf, u[:, i - 1], side="right")  # items placed below the new one
        p = ((i - 1) - np.minimum(v, i - 1)).astype(small)  # insertion position from the top
        if i > 1:
            head = pos[:, : i - 1]
            head += head >= p[:, None]
        pos[:, i - 1] = p
    ranking = np.empty((n, m), dtype=np.int16)
    np.put_along_axis(ranking, pos.astype(np.intp), np.broadcast_to(
        ref.astype(np.int16), (n, m)), axis=1)
    return ranking
