"""The riffle independent (RI) model over K-thin chains (Cheng et al., 2021, §3.2, §5.1 Phase 5).

A K-thin chain 𝒯 is a binary tree whose every internal item set g_t splits into a *leaf* A_t
(at most K items) and the rest X_{t+1} = g_t \\ A_t, which is split again; the last rest is a
leaf too. We store it as the tuple of its leaves, top-down: ``leaves[0] = A_0, ..,
leaves[T-1] = A_{T-1}, leaves[T] = X_T``; the internal sets are ``g_t = leaves[t] ∪ .. ∪
leaves[T]`` for ``t = 0 .. T-1``. Fig. 1(a) of the paper (P | {B, W} | {C, F}) is
``((P,), (B, W), (C, F))``.

Parameters of the model (Fig. 1(b)):

* a *relative ranking distribution* per leaf ℓ over its |ℓ|! relative rankings (indexed by
  :func:`protocols.safari.perm.lex_rank` of the order of ℓ's items, sorted by id);
* an *interleaving distribution* per internal set g_t over its C(|g_t|, |A_t|) interleavings
  (indexed by :func:`protocols.safari.perm.comb_rank` of the slots A_t's items occupy among
  g_t's |g_t| relative positions).

The probability of a ranking is the product of the probabilities of its relative rankings and
interleavings (§3.2, the worked example Pr[σ0] = 0.0009); sampling draws every factor
independently and riffles bottom-up (§5.1 Phase 5).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.safari import perm


@dataclass(frozen=True)
class Chain:
    """A K-thin chain, as its leaves top-down (each a sorted tuple of item ids)."""

    leaves: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        items = sorted(i for leaf in self.leaves for i in leaf)
        if not self.leaves or any(len(leaf) == 0 for leaf in self.leaves):
            raise ValueError("a chain needs at least one leaf and no empty leaf")
        if items != list(range(len(items))):
            raise ValueError(f"chain leaves must partition 0..d-1, got {self.leaves}")
        if any(list(leaf) != sorted(leaf) for leaf in self.leaves):
            raise ValueError("chain leaves must be sorted tuples")

    @classmethod
    def of(cls, leaves: Any) -> Chain:
        """A chain from any nested sequence of item ids (sorted here)."""
        return cls(tuple(tuple(sorted(int(i) for i in leaf)) for leaf in leaves))

    @property
    def d(self) -> int:
        return sum(len(leaf) for leaf in self.leaves)

    @property
    def n_internal(self) -> int:
        return len(self.leaves) - 1

    def internal(self, t: int) -> tuple[int, ...]:
        """The items of internal set g_t (sorted)."""
        return tuple(sorted(i for leaf in self.leaves[t:] for i in leaf))

    @property
    def max_leaf(self) -> int:
        return max(len(leaf) for leaf in self.leaves)

    def leaf_domain(self, j: int) -> int:
        """|ℓ_j|! relative rankings."""
        return math.factorial(len(self.leaves[j]))

    def internal_domain(self, t: int) -> int:
        """C(|g_t|, |A_t|) interleavings."""
        return math.comb(len(self.internal(t)), len(self.leaves[t]))

    def to_wire(self) -> list[list[int]]:
        return [list(leaf) for leaf in self.leaves]


def leaf_values(pos: np.ndarray, leaf: tuple[int, ...]) -> np.ndarray:
    """Index of each ranking's relative ranking of ``leaf`` (lexicographic over |leaf|!).

    ``pos`` are the rankings' positions (:func:`perm.positions`).
    """
    if len(leaf) == 1:
        return np.zeros(len(pos), dtype=np.int64)
    local = np.argsort(pos[:, list(leaf)], axis=1, kind="stable")  # leaf-local ids, best first
    return perm.lex_rank(local)


def interleaving_values(pos: np.ndarray, chain: Chain, t: int) -> np.ndarray:
    """Index of each ranking's interleaving at internal set g_t (lexicographic over subsets).

    The value is the set of relative positions (0 = best within g_t) that the leaf A_t's items
    occupy among the |g_t| items of g_t.
    """
    g = chain.internal(t)
    a = chain.leaves[t]
    rel = np.argsort(np.argsort(pos[:, list(g)], axis=1, kind="stable"), axis=1, kind="stable")
    col = [g.index(i) for i in a]
    slots = np.sort(rel[:, col], axis=1)
    return perm.comb_rank(slots, len(g))


def node_values(pos: np.ndarray, chain: Chain) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(values at every leaf, values at every internal set) of each ranking."""
    return ([leaf_values(pos, leaf) for leaf in chain.leaves],
            [interleaving_values(pos, chain, t) for t in range(chain.n_internal)])


@dataclass
class RIModel:
    """A riffle independent model: a chain and its distributions (each a 1-D array)."""

    chain: Chain
    leaf_dists: list[np.ndarray]
    inter_dists: list[np.ndarray]

    def __post_init__(self) -> None:
        c = self.chain
        if len(self.leaf_dists) != len(c.leaves) or len(self.inter_dists) != c.n_internal:
            raise ValueError("one distribution per leaf and per internal set is needed")
        for j, f in enumerate(self.leaf_dists):
            if len(f) != c.leaf_domain(j):
                raise ValueError(f"leaf {j}: {len(f)} probabilities for {c.leaf_domain(j)} "
                                 "relative rankings")
        for t, m in enumerate(self.inter_dists):
            if len(m) != c.internal_domain(t):
                raise ValueError(f"internal set {t}: {len(m)} probabilities for "
                                 f"{c.internal_domain(t)} interleavings")

    def prob(self, rankings: np.ndarray) -> np.ndarray:
        """Pr[σ] = Π_leaves Pr[σ^{l_j}] · Π_internal Pr[σ^{g_t}] for each ranking (§3.2)."""
        pos = perm.positions(rankings)
        lv, iv = node_values(pos, self.chain)
        p = np.ones(len(pos))
        for f, v in zip(self.leaf_dists, lv, strict=True):
            p *= np.asarray(f)[v]
        for m, v in zip(self.inter_dists, iv, strict=True):
            p *= np.asarray(m)[v]
        return p

    def sample(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """n rankings (best first), drawn bottom-up (§5.1 Phase 5).

        Draw a relative ranking for every leaf and an interleaving for every internal set, then
        riffle from the deepest internal set up: the interleaving marks which slots of g_t hold
        A_t's items (in their sampled relative order); the rest of g_t fills the other slots in
        its own (already riffled) order. Each factor takes ``n`` floats of ``gen`` in turn:
        the last leaf's, then leaf t's and internal set t's for t = T-1 .. 0.
        """
        return self._riffle(n, lambda _: gen.random(n))

    def sample_part(self, n: int, lo: int, hi: int,
                    uniforms: Callable[[int, int], np.ndarray]) -> np.ndarray:
        """Rankings ``lo .. hi - 1`` of ``sample(n, gen)``, where ``uniforms(offset, m)`` gives
        the ``m`` floats ``gen`` draws from its ``offset``-th on (``rng.party_generator_at``):
        the same rows, without drawing or holding the other ones (§5.1 Phase 5 in parts)."""
        return self._riffle(hi - lo, lambda b: uniforms(b * n + lo, hi - lo))

    def _riffle(self, m: int, u: Callable[[int], np.ndarray]) -> np.ndarray:
        """``m`` rankings from the floats ``u(b)`` of the b-th factor drawn (``sample``)."""
        c = self.chain
        T = c.n_internal
        current = self._leaf_orders(T, u(0))
        for b, t in enumerate(range(T - 1, -1, -1)):
            a_order = self._leaf_orders(t, u(2 * b + 1))
            g = len(c.internal(t))
            p = len(c.leaves[t])
            tau = indices_of(self.inter_dists[t], u(2 * b + 2))
            slots = perm.combinations_table(g, p)[tau]  # (m, p) sorted slots of A_t
            mask = np.zeros((m, g), dtype=bool)
            mask[np.arange(m)[:, None], slots] = True
            out = np.empty((m, g), dtype=np.int64)
            out[mask] = a_order.ravel()  # row-major: each row's slots ascending
            out[~mask] = current.ravel()
            current = out
        return current

    def _leaf_orders(self, j: int, u: np.ndarray) -> np.ndarray:
        leaf = np.asarray(self.chain.leaves[j], dtype=np.int64)
        v = indices_of(self.leaf_dists[j], u)
        return leaf[perm.lex_unrank(v, len(leaf))]

    def to_wire(self, digits: int = 9) -> dict[str, Any]:
        """Msgpack/JSON-able form (probabilities rounded to ``digits`` significant digits)."""
        return {"leaves": self.chain.to_wire(),
                "relative": [_round(f, digits) for f in self.leaf_dists],
                "interleaving": [_round(m, digits) for m in self.inter_dists]}


def _round(x: np.ndarray, digits: int) -> list[float]:
    return [float(f"{v:.{digits}g}") for v in np.asarray(x, dtype=float)]


def draw_indices(probs: np.ndarray, n: int, gen: np.random.Generator) -> np.ndarray:
    """n indices drawn from a probability vector (inverse CDF of one uniform each)."""
    return indices_of(probs, gen.random(n))


def indices_of(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The indices the uniforms ``u`` draw from a probability vector (inverse CDF; a vector
    of no mass draws uniformly)."""
    p = np.clip(np.asarray(probs, dtype=float), 0.0, None)
    s = p.sum()
    cdf = np.cumsum(p / s) if s > 0 else np.linspace(1 / len(p), 1.0, len(p))
    cdf[-1] = 1.0
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(p) - 1)


def fit_exact(rankings: np.ndarray, chain: Chain) -> RIModel:
    """Maximum-likelihood parameters: the empirical frequencies of every node's values."""
    pos = perm.positions(rankings)
    n = max(1, len(pos))
    lv, iv = node_values(pos, chain)
    leaf = [np.bincount(v, minlength=chain.leaf_domain(j)) / n for j, v in enumerate(lv)]
    inter = [np.bincount(v, minlength=chain.internal_domain(t)) / n for t, v in enumerate(iv)]
    return RIModel(chain, leaf, inter)
