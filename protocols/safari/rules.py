"""Transformation rules of Cheng et al., 2021: a ranking becomes a tuple of small-domain attributes.

* **Rule I** (§5.2.3, LADE): attribute A_j ↔ item x_j, value = its absolute rank; |dom| = d.
* **Rule I^N** (§5.2.1, NAIVE): attribute ↔ triplet (x_k1; x_k2, x_k3) with k2 < k3 and
  k1 ∉ {k2, k3}, value = (rank of x_k1, λ_k2,k3) with λ = 1 iff x_k2 is ranked above x_k3;
  |dom| = 2d; d·C(d-1, 2) attributes, ordered by k1 then (k2, k3) lexicographically.
* **Rule I^C** (§5.2.2, CALM): attribute ↔ pair (x_k1, x_k2) with k1 < k2, value = (rank of
  x_k1, rank of x_k2), ranks distinct; |dom| = d(d-1); C(d, 2) attributes, lexicographic.
* **Rule II** (§5.3): over a K-thin chain, first one attribute per leaf with at least two items
  (its relative ranking, |dom| = |ℓ|!), then one per internal set (its interleaving,
  |dom| = C(|g|, |A|)).

Values are 0-based indices into dom(A_j) (the paper's I(t[A_j]) minus one). Domains are ordered
as the paper's examples list them: Rule I^N as (1,1), (1,2), .., (d,2), i.e. ``2·rank + (λ-1)``;
Rule I^C as (1,2), (1,3), .., (1,d), (2,1), (2,3), ..; Rule II as in Example 7.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from ldpsim.protocols.safari import riffle
from ldpsim.protocols.safari.riffle import Chain

RULES = ("I", "IN", "IC", "II")


@lru_cache(maxsize=64)
def pairs(d: int) -> np.ndarray:
    """(C(d,2), 2) item pairs (k1 < k2), lexicographic."""
    t = np.array(list(itertools.combinations(range(d), 2)), dtype=np.int64).reshape(-1, 2)
    t.setflags(write=False)
    return t


@lru_cache(maxsize=64)
def triplets(d: int) -> np.ndarray:
    """(d·C(d-1,2), 3) triplets (k1; k2 < k3), k1 ∉ {k2, k3}: by k1, then (k2, k3)."""
    rows = [(k1, k2, k3) for k1 in range(d)
            for k2, k3 in itertools.combinations([k for k in range(d) if k != k1], 2)]
    t = np.array(rows, dtype=np.int64).reshape(-1, 3)
    t.setflags(write=False)
    return t


@lru_cache(maxsize=64)
def pair_index(d: int) -> np.ndarray:
    """(d, d) array: index of pair (min, max) in :func:`pairs`; -1 on the diagonal."""
    idx = np.full((d, d), -1, dtype=np.int64)
    for i, (a, b) in enumerate(pairs(d)):
        idx[a, b] = idx[b, a] = i
    idx.setflags(write=False)
    return idx


@dataclass(frozen=True)
class Rule:
    """One transformation rule for d items: its attributes' domain sizes and values."""

    name: str
    d: int
    chain: Chain | None = None
    domains: np.ndarray = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        d = self.d
        if self.name == "I":
            dom = np.full(d, d)
        elif self.name == "IN":
            dom = np.full(len(triplets(d)), 2 * d)
        elif self.name == "IC":
            dom = np.full(len(pairs(d)), d * (d - 1))
        elif self.name == "II":
            if self.chain is None or self.chain.d != d:
                raise ValueError("Rule II needs the K-thin chain over the d items")
            dom = np.array([self.chain.leaf_domain(j) for j in self.leaf_attrs]
                           + [self.chain.internal_domain(t)
                              for t in range(self.chain.n_internal)])
        else:
            raise ValueError(f"unknown rule {self.name!r}; allowed: {', '.join(RULES)}")
        object.__setattr__(self, "domains", dom.astype(np.int64))

    @property
    def n_attrs(self) -> int:
        return len(self.domains)

    @property
    def leaf_attrs(self) -> list[int]:
        """Rule II: the leaves (indices into chain.leaves) that get an attribute (size >= 2)."""
        return [j for j, leaf in enumerate(self.chain.leaves) if len(leaf) > 1]

    def values(self, pos: np.ndarray, attrs: np.ndarray) -> np.ndarray:
        """t_i[A_{attrs[i]}] for each ranking i (given as positions), 0-based.

        Parameters
        ----------
        pos : (n, d) positions (:func:`protocols.safari.perm.positions`).
        attrs : (n,) attribute index per ranking.
        """
        pos = np.asarray(pos, dtype=np.int64)
        attrs = np.asarray(attrs, dtype=np.int64)
        rows = np.arange(len(pos))
        d = self.d
        if self.name == "I":
            return pos[rows, attrs]
        if self.name == "IN":
            k1, k2, k3 = triplets(d)[attrs].T
            return 2 * pos[rows, k1] + (pos[rows, k2] > pos[rows, k3])
        if self.name == "IC":
            k1, k2 = pairs(d)[attrs].T
            a, b = pos[rows, k1], pos[rows, k2]
            return a * (d - 1) + b - (b > a)
        out = np.zeros(len(pos), dtype=np.int64)
        n_leaf = len(self.leaf_attrs)
        for j in np.unique(attrs):
            sel = attrs == j
            if j < n_leaf:
                out[sel] = riffle.leaf_values(pos[sel], self.chain.leaves[self.leaf_attrs[j]])
            else:
                out[sel] = riffle.interleaving_values(pos[sel], self.chain, int(j) - n_leaf)
        return out

    def tuple_of(self, pos: np.ndarray) -> np.ndarray:
        """The whole transformed tuple t_i of each ranking, shape (n, n_attrs)."""
        pos = np.atleast_2d(pos)
        n = len(pos)
        return np.stack([self.values(pos, np.full(n, j)) for j in range(self.n_attrs)],
                        axis=1)


def decode_in(value: int, d: int) -> tuple[int, int]:
    """Rule I^N value index → the paper's 1-based (rank of x_k1, λ)."""
    return value // 2 + 1, value % 2 + 1


def decode_ic(value: int, d: int) -> tuple[int, int]:
    """Rule I^C value index → the paper's 1-based (rank of x_k1, rank of x_k2)."""
    a, r = divmod(value, d - 1)
    b = r + (r >= a)
    return a + 1, b + 1
