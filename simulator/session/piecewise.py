"""Values over a range of agent ids, kept as runs of equal values: a pool's privacy odometer, its
lifetime ledger and its state file's reservations (``odometer``, ``policy``, ``poolstate``).

What a pool's agents have spent is piecewise constant over its block: a run asks its agents in
query batches of consecutive ids and charges each batch alike, so a round of a block of 10^9
agents leaves a handful of runs where an array would hold 8 GB. ``Piecewise`` keeps the runs
(their first agents and values) and every update is the same float operation, in the same order,
on each agent's value as on an array of them (``value + eps`` per round), so each agent's value
is bit-identical to the array's. A pattern that splits the block into many runs (a round asking a
random subset of the agents: a deployment's online ones) turns the store into an array
(``LIMIT``), which it stays: a code an agent among the few values the agents take (a bit while
they are two, a byte up to 255: ``palette.Palette``), or the plain array past them.

``Span`` is a window of a store read and written like a numpy array (slices, index arrays,
``sum``, ``max``); ``pairwise_sum`` is numpy's float64 summation (``numpy.sum`` of the values as
an array) evaluated on the runs, equal subtrees computed once.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import numpy as np
from ldpsim.simulator.session.palette import Palette, apply, counts

#: runs beyond which a store holds its values as an array (8 bytes per agent for float64)
LIMIT = 4096
#: numpy's pairwise summation block (``PW_BLOCKSIZE``): at most this many terms are summed with
#: eight running sums, more are split in two
PW_BLOCK = 128


def _same(x: Any, y: Any) -> bool:
    """Whether two values have the same bits (0.0 and -0.0 differ; NaN never joins)."""
    return x == y and (x != 0 or math.copysign(1.0, x) == math.copysign(1.0, y))


class Piecewise:
    """Values of agents ``[lo, hi)`` (float64 or bool), as runs of equal values or an array.

    Parameters
    ----------
    lo, hi : int
        The agents (absolute ids: every method takes them so).
    value : float or bool
        Every agent's value at first.
    dtype : data-type
        ``numpy.float64`` or ``bool``.
    """

    __slots__ = ("lo", "hi", "dtype", "starts", "vals", "arr")

    def __init__(self, lo: int, hi: int, value: Any = 0.0, dtype: Any = np.float64) -> None:
        self.lo, self.hi = int(lo), max(int(lo), int(hi))
        self.dtype = np.dtype(dtype)
        #: the first agent of each run, and its value (a Python float or bool)
        self.starts: list[int] = [self.lo] if self.hi > self.lo else []
        self.vals: list[Any] = [self._scalar(value)] if self.hi > self.lo else []
        #: the values as an array, once the runs were too many (``LIMIT``); then the runs are
        #: unused
        self.arr: Any = None  # a ``Palette`` (or an empty array)

    def _scalar(self, value: Any) -> Any:
        return bool(value) if self.dtype == bool else float(np.float64(value))

    def __len__(self) -> int:
        return self.hi - self.lo

    @property
    def runs_count(self) -> int:
        """How many runs hold the values (the agents, once they are an array)."""
        return len(self) if self.arr is not None else len(self.starts)

    def copy(self) -> Piecewise:
        out = Piecewise(self.lo, self.hi, dtype=self.dtype)
        out.starts, out.vals = list(self.starts), list(self.vals)
        out.arr = None if self.arr is None else self.arr.copy()
        return out

    @classmethod
    def of_runs(cls, lo: int, hi: int, starts: np.ndarray, values: np.ndarray,
                dtype: Any = np.float64) -> Piecewise:
        """The store of runs starting at agents ``starts`` (absolute, the first ``lo``,
        increasing) with ``values``."""
        out = cls(lo, hi, dtype=dtype)
        out.starts = [int(s) for s in np.asarray(starts).tolist()]
        out.vals = [out._scalar(v) for v in np.asarray(values, dtype=out.dtype).tolist()]
        if len(out.starts) > LIMIT:
            out._densify()
        return out

    @classmethod
    def of_array(cls, lo: int, values: np.ndarray) -> Piecewise:
        """The store of the values ``values`` of agents ``lo ..``."""
        values = np.asarray(values)
        out = cls(lo, lo + len(values), dtype=values.dtype if values.dtype == bool
                  else np.float64)
        if len(values):
            out.assign(lo, lo + len(values), values)
        return out

    # ------------------------------------------------------------------ the representation

    def _densify(self) -> None:
        """Hold the values as an array from now on: a code an agent into the few values they
        take (``palette.Palette``), made from the runs without an array of the values."""
        if self.arr is None:
            self.arr = Palette.of_runs(self.starts, self.vals, self.hi, self.dtype) \
                if self.hi > self.lo else np.zeros(0, dtype=self.dtype)
            self.starts, self.vals = [], []

    def _seg(self, x: int) -> int:
        """The run holding agent ``x``."""
        return bisect_right(self.starts, x) - 1

    def _cut(self, x: int) -> int:
        """Make agent ``x`` the first of a run (``x == hi``: the end); returns that run."""
        if x >= self.hi:
            return len(self.starts)
        i = bisect_right(self.starts, x) - 1
        if self.starts[i] != x:
            i += 1
            self.starts.insert(i, x)
            self.vals.insert(i, self.vals[i - 1])
        return i

    def _join(self, i: int) -> None:
        """Join run ``i`` to the one before when their values have the same bits."""
        if 0 < i < len(self.starts) and _same(self.vals[i - 1], self.vals[i]):
            del self.starts[i]
            del self.vals[i]

    def _check(self, a: int, b: int) -> None:
        if not self.lo <= a <= b <= self.hi:
            raise IndexError(f"agents [{a}, {b}) are outside [{self.lo}, {self.hi})")

    # ------------------------------------------------------------------ reading

    def dense(self, a: int, b: int) -> np.ndarray:
        """The values of agents ``[a, b)`` as a new array."""
        self._check(a, b)
        if self.arr is not None:
            return self.arr[a - self.lo:b - self.lo].copy()
        if a >= b:
            return np.zeros(0, dtype=self.dtype)
        i, j = self._seg(a), self._seg(b - 1)
        edges = np.array([a, *self.starts[i + 1:j + 1], b], dtype=np.int64)
        return np.repeat(np.array(self.vals[i:j + 1], dtype=self.dtype), np.diff(edges))

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The values of agents ``ids`` (any order, repeats allowed)."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (int(ids.min()) < self.lo or int(ids.max()) >= self.hi):
            raise IndexError(f"agents outside [{self.lo}, {self.hi})")
        if self.arr is not None:
            return self.arr[ids - self.lo]
        at = np.searchsorted(np.array(self.starts, dtype=np.int64), ids, side="right") - 1
        return np.array(self.vals, dtype=self.dtype)[at]

    def max_in(self, a: int, b: int) -> Any:
        """The largest value of agents ``[a, b)`` (``b > a``)."""
        self._check(a, b)
        if a >= b:
            raise ValueError("the maximum of no agents")
        if isinstance(self.arr, Palette):
            return self.arr.held(a - self.lo, b - self.lo).max()
        if self.arr is not None:
            return self.arr[a - self.lo:b - self.lo].max()
        return max(self.vals[self._seg(a):self._seg(b - 1) + 1])

    def any_in(self, a: int, b: int) -> bool:
        """Whether any agent of ``[a, b)`` has a true value."""
        self._check(a, b)
        if a >= b:
            return False
        if isinstance(self.arr, Palette):
            return bool(self.arr.held(a - self.lo, b - self.lo).any())
        if self.arr is not None:
            return bool(self.arr[a - self.lo:b - self.lo].any())
        return any(self.vals[self._seg(a):self._seg(b - 1) + 1])

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """The runs as (first agents, values) arrays, adjacent runs of equal values (``==``)
        joined: what ``poolstate`` writes."""
        if self.arr is not None:
            v = self.arr
            first = np.concatenate(([0], np.flatnonzero(v[1:] != v[:-1]) + 1)) if len(v) \
                else np.zeros(0, dtype=np.int64)
            return (first + self.lo).astype(np.int64), v[first]
        starts = np.array(self.starts, dtype=np.int64)
        vals = np.array(self.vals, dtype=self.dtype)
        if len(vals) > 1:
            keep = np.concatenate(([True], vals[1:] != vals[:-1]))
            starts, vals = starts[keep], vals[keep]
        return starts, vals

    def pairwise(self, a: int | None = None, b: int | None = None) -> float:
        """``numpy.sum`` of the values of agents ``[a, b)`` (default: all) as a float64
        array, to the bit (``pairwise_sum``)."""
        a = self.lo if a is None else a
        b = self.hi if b is None else b
        self._check(a, b)
        if isinstance(self.arr, Palette):
            return self.arr.pairwise(a - self.lo, b - self.lo)
        if self.arr is not None:
            return float(np.asarray(self.arr[a - self.lo:b - self.lo], dtype=np.float64).sum())
        return pairwise_sum(self.starts, [float(v) for v in self.vals], a, b)

    # ------------------------------------------------------------------ writing

    def update(self, a: int, b: int, op: str, value: Any = None) -> None:
        """Agents ``[a, b)``'s values ``v`` become ``v + value`` (``op`` "add"), ``v - value``
        ("sub") or ``value`` ("set")."""
        self._check(a, b)
        if a >= b:
            return
        if self.arr is not None:
            apply(self.arr, slice(a - self.lo, b - self.lo), op, value)
            return
        i, j = self._cut(a), self._cut(b)
        vals = self.vals
        if op == "add":
            for k in range(i, j):
                vals[k] = vals[k] + value
        elif op == "sub":
            for k in range(i, j):
                vals[k] = vals[k] - value
        else:
            value = self._scalar(value)
            del self.starts[i + 1:j], vals[i + 1:j]
            vals[i] = value
            j = i + 1
        self._join(j)
        self._join(i)
        if len(self.starts) > LIMIT:
            self._densify()

    def update_ids(self, ids: np.ndarray, op: str, value: Any = None) -> None:
        """``update`` of the agents ``ids`` (distinct, any order)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return
        if self.arr is None:
            ids = np.sort(ids)
            cuts = np.flatnonzero(np.diff(ids) != 1) + 1
            if len(self.starts) + 2 * (len(cuts) + 1) <= LIMIT:
                firsts = ids[np.concatenate(([0], cuts))].tolist()
                ends = (ids[np.concatenate((cuts - 1, [len(ids) - 1]))] + 1).tolist()
                for a, b in zip(firsts, ends, strict=True):
                    self.update(a, b, op, value)
                return
            self._densify()
        if int(ids.min()) < self.lo or int(ids.max()) >= self.hi:
            raise IndexError(f"agents outside [{self.lo}, {self.hi})")
        apply(self.arr, ids - self.lo, op, value)

    def assign(self, a: int, b: int, values: Any) -> None:
        """Agents ``[a, b)``'s values become ``values`` (one, or one per agent)."""
        self._check(a, b)
        values = np.broadcast_to(np.asarray(values, dtype=self.dtype), (b - a,))
        if a >= b:
            return
        if self.arr is not None:
            self.arr[a - self.lo:b - self.lo] = values
            return
        v = np.ascontiguousarray(values)
        bits = v if self.dtype == bool else v.view(np.uint64)
        first = np.concatenate(([0], np.flatnonzero(bits[1:] != bits[:-1]) + 1))
        if len(self.starts) + len(first) > LIMIT:
            self._densify()
            self.arr[a - self.lo:b - self.lo] = v
            return
        i, j = self._cut(a), self._cut(b)
        self.starts[i:j] = (first + a).tolist()
        self.vals[i:j] = [self._scalar(x) for x in v[first].tolist()]
        self._join(i + len(first))
        self._join(i)
        if len(self.starts) > LIMIT:
            self._densify()

    def add_positive(self, other: Piecewise) -> None:
        """Each agent of ``other``'s range gets ``v + numpy.maximum(o, 0.0)`` (``o``: its
        value in ``other``): a ledger with a run's reservations on top (``poolstate``)."""
        a, b = other.lo, other.hi
        if other.arr is not None or self.arr is not None:
            self._densify()
            self.arr[a - self.lo:b - self.lo] += np.maximum(other.dense(a, b), 0.0)
            return
        ends = [*other.starts[1:], b]
        for s, e, o in zip(other.starts, ends, other.vals, strict=True):
            self.update(s, e, "add", float(np.maximum(np.float64(o), 0.0)))

    def grown(self, lo: int, hi: int, value: Any) -> Piecewise:
        """A store of agents ``[min(lo, self.lo), max(hi, self.hi))``: these values, and
        ``value`` for the agents added."""
        lo, hi = min(lo, self.lo), max(hi, self.hi)
        out = Piecewise(lo, hi, value, self.dtype)
        if self.arr is not None:
            out.assign(self.lo, self.hi, self.arr)
            return out
        if len(self):
            i = out._cut(self.lo)
            j = out._cut(self.hi)
            out.starts[i:j] = list(self.starts)
            out.vals[i:j] = list(self.vals)
            out._join(i + len(self.starts))
            out._join(i)
        return out


def pairwise_sum(starts: list[int], vals: list[float], lo: int, hi: int) -> float:
    """``numpy.sum`` of the float64 values of agents ``[lo, hi)``, given as runs (agent
    ``starts[i]`` and on hold ``vals[i]``; ``starts[0] <= lo``), computed on the runs to the
    bit.

    numpy sums a contiguous float64 array from 0.0 plus a pairwise sum of it: fewer than 8
    terms from -0.0 in order; up to ``PW_BLOCK`` with eight running sums over the blocks of
    eight, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in
    order; more, the two halves split at a multiple of 8, each summed so, then added. Here a
    part inside one run is the sum of its length copies of one value, computed once per (length,
    value) (a level of the tree has at most two lengths); only the parts that cross a run's
    edge are summed term by term, so the cost grows with the runs, not with the agents.
    """
    n = hi - lo
    if n <= 0:
        return 0.0
    ends = [*starts[1:], hi]
    memo: dict[tuple[int, str], float] = {}

    def small(terms: list[float]) -> float:
        if len(terms) < 8:
            res = -0.0
            for x in terms:
                res += x
            return res
        r = terms[:8]
        m = len(terms)
        full = m - m % 8
        for i in range(8, full, 8):
            for k in range(8):
                r[k] += terms[i + k]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(full, m):
            res += terms[i]
        return res

    def const(m: int, v: float) -> float:
        key = (m, v.hex())
        got = memo.get(key)
        if got is None:
            if m <= PW_BLOCK:
                got = small([v] * m)
            else:
                h = m // 2
                h -= h % 8
                got = const(h, v) + const(m - h, v)
            memo[key] = got
        return got

    def part(a: int, m: int) -> float:
        i = bisect_right(starts, a) - 1
        if a + m <= ends[i]:
            return const(m, vals[i])
        if m <= PW_BLOCK:
            terms: list[float] = []
            x = a
            while x < a + m:
                e = min(ends[i], a + m)
                terms.extend([vals[i]] * (e - x))
                x, i = e, i + 1
            return small(terms)
        h = m // 2
        h -= h % 8
        return part(a, h) + part(a + h, m - h)

    return 0.0 + part(lo, n)


class Span:
    """The agents ``[lo, hi)`` of a store, indexed from 0 like the array of their values:
    ``span[key]`` (a slice, an index, an index array) is a new array, ``span[key] = values``
    writes them, and ``sum``, ``max``, ``all``, ``any`` and ``numpy.asarray`` read them.

    Parameters
    ----------
    store : Piecewise
    lo, hi : int, optional
        Absolute agents (default: the store's).
    """

    __slots__ = ("store", "lo", "hi")

    def __init__(self, store: Piecewise, lo: int | None = None, hi: int | None = None) -> None:
        self.store = store
        self.lo = store.lo if lo is None else int(lo)
        self.hi = store.hi if hi is None else int(hi)

    def __len__(self) -> int:
        return self.hi - self.lo

    @property
    def dtype(self) -> np.dtype:
        return self.store.dtype

    def _where(self, key: Any) -> tuple[int, int] | np.ndarray:
        """Absolute agents of ``key``: a range for a slice of step 1, else an id array."""
        if isinstance(key, slice):
            a, b, step = key.indices(len(self))
            if step == 1:
                return self.lo + a, self.lo + max(a, b)
            return self.lo + np.arange(a, b, step, dtype=np.int64)
        idx = np.asarray(key)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + len(self), idx)
        if len(idx.reshape(-1)) and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError("index out of range")
        return self.lo + idx

    def __getitem__(self, key: Any) -> Any:
        at = self._where(key)
        if isinstance(at, tuple):
            return self.store.dense(*at)
        return self.store.take(at.reshape(-1)).reshape(at.shape)[()]

    def __setitem__(self, key: Any, values: Any) -> None:
        at = self._where(key)
        if isinstance(at, tuple):
            self.store.assign(at[0], at[1], values)
            return
        flat = at.reshape(-1)
        vals = np.broadcast_to(np.asarray(values, dtype=self.dtype), at.shape).reshape(-1)
        for x, v in zip(flat.tolist(), vals.tolist(), strict=True):
            self.store.assign(x, x + 1, v)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.store.dense(self.lo, self.hi)
        return out if dtype is None else out.astype(dtype)

    def copy(self) -> np.ndarray:
        return self.store.dense(self.lo, self.hi)

    def tolist(self) -> list[Any]:
        return self.copy().tolist()

    def max(self) -> Any:
        return self.store.max_in(self.lo, self.hi)

    def any(self) -> bool:
        return self.store.any_in(self.lo, self.hi)

    def all(self) -> bool:
        if self.dtype != bool:
            return bool(np.asarray(self).all())
        return not _any_false(self.store, self.lo, self.hi)

    def sum(self) -> Any:
        """The sum numpy's ``sum`` of the values gives (float64: to the bit, ``pairwise``)."""
        if self.dtype == bool and isinstance(self.store.arr, Palette):
            p, a = self.store.arr, self.lo - self.store.lo
            if p.plain is None:  # the agents holding each true value, counted by code
                held = counts(p.codes, len(p.values), a, a + len(self))
                return int(held[p.values].sum())
        if self.dtype == bool:
            return int(np.count_nonzero(self.copy()))
        return np.float64(self.store.pairwise(self.lo, self.hi))


def _any_false(store: Piecewise, a: int, b: int) -> bool:
    """Whether some agent of ``[a, b)`` of a bool store is false."""
    if a >= b:
        return False
    if isinstance(store.arr, Palette):
        return not bool(store.arr.held(a - store.lo, b - store.lo).all())
    if store.arr is not None:
        return not bool(store.arr[a - store.lo:b - store.lo].all())
    return not all(store.vals[store._seg(a):store._seg(b - 1) + 1])
