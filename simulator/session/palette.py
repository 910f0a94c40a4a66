"""The values of many agents that take few distinct values: a code per agent (one byte) into
those values, for a store of runs that a scattered pattern broke up (``piecewise``).

A pool's odometer, its lifetime ledger and its record of who answered a round are runs of
equal values while a run asks its agents in whole batches (``piecewise.Piecewise``). A pattern
that asks a random subset of them (the online agents of a ``[deployment]``, a split of the
users between rounds) breaks them into as many runs as agents, yet the values stay few: an
agent has spent 0, one round's ε or two. ``Palette`` keeps them as one byte an agent, the
index of its value among at most ``CODES`` distinct ones, an eighth of a float64 array, and
every update is the same float operation on each distinct value that the array would make on
each agent's (``update``): each agent's value keeps the array's bits. Its sums are numpy's
pairwise float64 sums of the values as an array, evaluated on the tree's nodes a leaf at a
time (``pairwise``). Past ``CODES`` distinct values it holds the plain array (``plain``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: distinct values a palette holds at most (a code is one byte)
CODES = 255
#: the tree's nodes ``pairwise`` hands to numpy whole (agents)
LEAF = 1 << 16


def counts(codes: np.ndarray, size: int) -> np.ndarray:
    """How many of ``codes`` (uint8) are each of ``0 .. size - 1``, a ``LEAF`` at a time
    (``numpy.bincount`` widens what it counts to 8 bytes each)."""
    out = np.zeros(size, dtype=np.int64)
    for s in range(0, len(codes), LEAF):
        out += np.bincount(codes[s:s + LEAF], minlength=size)
    return out


class Palette:
    """Values of ``len`` agents, indexed like the array of them (see the module docstring).

    Parameters
    ----------
    values : ndarray
        The distinct values (float64 or bool), each once.
    codes : ndarray
        Each agent's index into ``values`` (uint8).
    """

    __slots__ = ("values", "codes", "plain", "_index")

    def __init__(self, values: np.ndarray, codes: np.ndarray) -> None:
        self.values = np.asarray(values)
        self.codes = codes
        #: the plain array, once the values were too many (then the rest is unused)
        self.plain: np.ndarray | None = None
        self._index = {k: i for i, k in enumerate(self._keys(self.values))}

    @classmethod
    def of_runs(cls, starts: list[int], vals: list[Any], hi: int, dtype: Any) -> Palette:
        """The values of runs starting at ``starts`` (the first the first agent) with
        ``vals``, up to agent ``hi``, without an array of the values themselves."""
        dtype = np.dtype(dtype)
        out = cls(np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.uint8))
        run_codes = out._codes_of(np.asarray(vals, dtype=dtype))
        lengths = np.diff(np.asarray([*starts, hi], dtype=np.int64))
        if run_codes is None:
            out.plain = np.repeat(np.asarray(vals, dtype=dtype), lengths)
        else:
            out.codes = np.repeat(run_codes, lengths)
        return out

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def __len__(self) -> int:
        return len(self.codes) if self.plain is None else len(self.plain)

    def copy(self) -> Palette:
        out = Palette(self.values.copy(), self.codes.copy())
        out.plain = None if self.plain is None else self.plain.copy()
        return out

    @staticmethod
    def _keys(values: np.ndarray) -> list[int]:
        """Each value's bits (0.0 and -0.0 differ, as in the array)."""
        v = np.ascontiguousarray(values)
        return (v.view(np.uint64) if v.dtype == np.float64 else v.astype(np.uint8)).tolist()

    def _codes_of(self, values: np.ndarray, compact: bool = True) -> np.ndarray | None:
        """The codes of ``values`` (each distinct one added to the palette if new), or None
        when they would make more than ``CODES`` (``compact``: even after forgetting the
        values no agent holds, which renumbers the codes)."""
        values = np.asarray(values, dtype=self.dtype)
        flat = values.reshape(-1)
        if len(flat) > 64:
            uniq, inv = np.unique(flat.view(np.uint64) if flat.dtype == np.float64 else flat,
                                  return_inverse=True)
            uniq = uniq.view(np.float64) if flat.dtype == np.float64 else uniq
        else:
            uniq, inv = flat, np.arange(len(flat))
        keys = self._keys(uniq)
        new = [k for k in dict.fromkeys(keys) if k not in self._index]
        if len(self._index) + len(new) > CODES:
            if not compact:
                return None
            self._compact()
            new = [k for k in dict.fromkeys(keys) if k not in self._index]
            if len(self._index) + len(new) > CODES:
                return None
        if new:
            at = {k: i for i, k in enumerate(keys)}
            add = np.asarray(uniq)[[at[k] for k in new]]
            for k in new:
                self._index[k] = len(self._index)
            self.values = np.concatenate([self.values, add])
        table = np.array([self._index[k] for k in keys], dtype=np.uint8)
        return table[inv].reshape(values.shape)

    def _compact(self) -> None:
        """Forget the values no agent holds any more (an update leaves its old ones)."""
        used = np.flatnonzero(counts(self.codes, len(self.values)))
        if len(used) == len(self.values):
            return
        remap = np.zeros(len(self.values), dtype=np.uint8)
        remap[used] = np.arange(len(used), dtype=np.uint8)
        np.take(remap, self.codes, out=self.codes)
        self.values = self.values[used]
        self._index = {k: i for i, k in enumerate(self._keys(self.values))}

    def _go_plain(self) -> np.ndarray:
        """Hold the plain array from now on; returns it."""
        if self.plain is None:
            self.plain = self.values[self.codes]
            self.codes = np.zeros(0, dtype=np.uint8)
        return self.plain

    # ------------------------------------------------------------------ like an array

    def __getitem__(self, key: Any) -> np.ndarray:
        if self.plain is not None:
            return self.plain[key]
        return self.values[self.codes[key]]

    def __setitem__(self, key: Any, values: Any) -> None:
        if self.plain is None:
            codes = self._codes_of(values)
            if codes is not None:
                self.codes[key] = codes
                return
        self._go_plain()[key] = values

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def update(self, at: Any, op: str, value: Any) -> None:
        """Agents ``at`` (a slice or distinct indices): ``v + value`` ("add"), ``v - value``
        ("sub") or ``value`` ("set"), as the array's ``arr[at] += value`` makes it, on each
        distinct value once."""
        if self.plain is None:
            if op == "set":
                new = self._codes_of(np.asarray([value]))
                if new is not None:
                    self.codes[at] = new[0]
                    return
            else:
                if len(self.values) + 16 > CODES:
                    self._compact()  # (not while the old codes index ``table``)
                part = self.codes[at]
                used = np.flatnonzero(counts(part, len(self.values)))
                vals = self.values[used] + value if op == "add" else self.values[used] - value
                got = self._codes_of(vals, compact=False)
                if got is not None:
                    table = np.arange(len(used) and int(used[-1]) + 1, dtype=np.uint8)
                    table[used] = got
                    if isinstance(at, slice):  # ``part`` is the codes' own
                        np.take(table, part, out=part)
                    else:
                        self.codes[at] = table[part]
                    return
        arr = self._go_plain()
        if op == "add":
            arr[at] += value
        elif op == "sub":
            arr[at] -= value
        else:
            arr[at] = value

    def held(self, a: int, b: int) -> np.ndarray:
        """The distinct values agents ``[a, b)`` hold (``b > a``), without an array of the
        values themselves."""
        if self.plain is not None:
            return self.plain[a:b]
        return self.values[np.flatnonzero(counts(self.codes[a:b], len(self.values)))]

    def pairwise(self, a: int, b: int) -> float:
        """``numpy.sum`` of the values ``[a, b)`` as a float64 array, to the bit: its pairwise
        tree (``piecewise.pairwise_sum``) descended to nodes of at most ``LEAF`` values, each
        summed by numpy itself (a node's sum is the same whole or alone: the tree below it
        depends on its length only). The top's ``0.0 +`` turns a zero's sign as numpy's."""
        if self.plain is not None:
            return float(np.asarray(self.plain[a:b], dtype=np.float64).sum())

        def part(x: int, m: int) -> float:
            if m <= LEAF:
                return float(self.values[self.codes[x:x + m]].sum())
            h = m // 2
            h -= h % 8
            return part(x, h) + part(x + h, m - h)

        return 0.0 + part(a, b - a) if b > a else 0.0
