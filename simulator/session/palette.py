"""The values of many agents that take few distinct values: a code per agent (a bit or a byte)
into those values, for a store of runs that a scattered pattern broke up (``piecewise``).

A pool's odometer, its lifetime ledger and its record of who answered a round are runs of
equal values while a run asks its agents in whole batches (``piecewise.Piecewise``). A pattern
that asks a random subset of them (the online agents of a ``[deployment]``, a split of the
users between rounds) breaks them into as many runs as agents, yet the values stay few: an
agent has spent 0, one round's ε or two. ``Palette`` keeps them as a code an agent, the index
of its value among at most ``CODES`` distinct ones: a bit while they are two (``BitCodes``, a
64th of a float64 array: an odometer after one round, a record of who answered), a byte from
the third on (an eighth). Every update is the same float operation on each distinct value that
the array would make on each agent's (``update``): each agent's value keeps the array's bits.
Its sums are numpy's pairwise float64 sums of the values as an array, evaluated on the tree's
nodes a leaf at a time (``pairwise``). Past ``CODES`` distinct values it holds the plain array
(``plain``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: distinct values a palette holds at most (a code is one byte)
CODES = 255
#: the tree's nodes ``pairwise`` hands to numpy whole (agents)
LEAF = 1 << 16


def counts(codes: Any, size: int, a: int = 0, b: int | None = None) -> np.ndarray:
    """How many of ``codes[a:b]`` (uint8, or ``BitCodes``) are each of ``0 .. size - 1``, a
    ``LEAF`` at a time (``numpy.bincount`` widens what it counts to 8 bytes each)."""
    b = len(codes) if b is None else b
    out = np.zeros(size, dtype=np.int64)
    for s in range(a, b, LEAF):
        out += np.bincount(codes[s:min(b, s + LEAF)], minlength=size)
    return out


def apply(arr: Any, at: Any, op: str, value: Any) -> None:
    """Agents ``at`` (a slice or distinct indices) of ``arr`` get ``v + value`` ("add"),
    ``v - value`` ("sub") or ``value`` ("set"): a ``Palette``'s ``update``, or the array's own
    ``arr[at] += value``."""
    if isinstance(arr, Palette):
        arr.update(at, op, value)
    elif op == "add":
        arr[at] += value
    elif op == "sub":
        arr[at] -= value
    else:
        arr[at] = value


class BitCodes:
    """The codes of a palette of at most two values: a bit an agent, read and written like
    the uint8 array of them (slices of step 1, index arrays; ``widened`` gives that array)."""

    __slots__ = ("n", "bits")

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.bits = np.zeros((self.n + 7) >> 3, dtype=np.uint8)

    def __len__(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes

    def copy(self) -> BitCodes:
        out = BitCodes(0)
        out.n, out.bits = self.n, self.bits.copy()
        return out

    def widened(self) -> np.ndarray:
        """The uint8 array of the codes (a ``LEAF`` at a time)."""
        out = np.empty(self.n, dtype=np.uint8)
        for s in range(0, self.n, LEAF):
            out[s:s + LEAF] = self[s:min(self.n, s + LEAF)]
        return out

    def _range(self, key: slice) -> tuple[int, int]:
        a, b, step = key.indices(self.n)
        if step != 1:
            raise IndexError("a step other than 1")
        return a, max(a, b)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            a, b = self._range(key)
            first = a >> 3
            flags = np.unpackbits(self.bits[first:(b + 7) >> 3], bitorder="little")
            return flags[a - (first << 3):b - (first << 3)]
        idx = np.asarray(key, dtype=np.int64)
        return (self.bits[idx >> 3] >> (idx & 7).astype(np.uint8)) & np.uint8(1)

    def __setitem__(self, key: Any, codes: Any) -> None:
        codes = np.asarray(codes, dtype=np.uint8)
        if isinstance(key, slice):
            a, b = self._range(key)
            if a >= b:
                return
            if codes.ndim == 0:
                self._fill(a, b, int(codes))
                return
            first, last = a >> 3, (b + 7) >> 3
            flags = np.unpackbits(self.bits[first:last], bitorder="little")
            flags[a - (first << 3):b - (first << 3)] = codes
            self.bits[first:last] = np.packbits(flags, bitorder="little")
            return
        idx = np.asarray(key, dtype=np.int64).reshape(-1)
        ones = np.broadcast_to(codes, idx.shape).reshape(-1).astype(bool)
        byte = idx >> 3
        bit = np.left_shift(np.uint8(1), (idx & 7).astype(np.uint8))
        np.bitwise_or.at(self.bits, byte[ones], bit[ones])
        np.bitwise_and.at(self.bits, byte[~ones], ~bit[~ones])

    def _fill(self, a: int, b: int, code: int) -> None:
        """Agents ``[a, b)`` all get ``code``: whole bytes at once, the edges' bits alone."""
        full_a, full_b = (a + 7) >> 3, b >> 3
        if full_a < full_b:
            self.bits[full_a:full_b] = 0xFF if code else 0
            edges = ((a, min(b, full_a << 3)), (max(a, full_b << 3), b))
        else:
            edges = ((a, b),)
        for x, y in edges:
            if x < y:
                self[x:y] = np.full(y - x, code, dtype=np.uint8)


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
        elif len(out.values) <= 2:  # a bit an agent
            out.codes = BitCodes(int(lengths.sum()))
            at = starts[0]
            for c, m in zip(run_codes.tolist(), lengths.tolist(), strict=True):
                if c:
                    out.codes[at - starts[0]:at - starts[0] + m] = np.uint8(1)
                at += m
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
            if len(self.values) > 2 and isinstance(self.codes, BitCodes):
                self.codes = self.codes.widened()  # a third value: a byte an agent
        table = np.array([self._index[k] for k in keys], dtype=np.uint8)
        return table[inv].reshape(values.shape)

    def _compact(self) -> None:
        """Forget the values no agent holds any more (an update leaves its old ones)."""
        used = np.flatnonzero(counts(self.codes, len(self.values)))
        if len(used) == len(self.values):
            return
        remap = np.zeros(len(self.values), dtype=np.uint8)
        remap[used] = np.arange(len(used), dtype=np.uint8)
        for s in range(0, len(self.codes), LEAF):
            part = slice(s, min(len(self.codes), s + LEAF))
            self.codes[part] = remap[self.codes[part]]
        self.values = self.values[used]
        self._index = {k: i for i, k in enumerate(self._keys(self.values))}

    def _go_plain(self) -> np.ndarray:
        """Hold the plain array from now on; returns it."""
        if self.plain is None:
            n = len(self.codes)
            self.plain = np.empty(n, dtype=self.dtype)
            for s in range(0, n, LEAF):
                self.plain[s:s + LEAF] = self.values[self.codes[s:min(n, s + LEAF)]]
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
                if isinstance(at, slice):
                    a, b, _ = at.indices(len(self.codes))
                    held = counts(self.codes, len(self.values), a, max(a, b))
                else:
                    part = self.codes[at]
                    held = counts(part, len(self.values))
                used = np.flatnonzero(held)
                vals = self.values[used] + value if op == "add" else self.values[used] - value
                got = self._codes_of(vals, compact=False)  # (a third value widens the codes)
                if got is not None:
                    table = np.arange(len(used) and int(used[-1]) + 1, dtype=np.uint8)
                    table[used] = got
                    if not isinstance(at, slice):
                        self.codes[at] = table[part]
                    elif not np.array_equal(table, np.arange(len(table))):
                        for x in range(a, b, LEAF):
                            y = min(b, x + LEAF)
                            self.codes[x:y] = table[self.codes[x:y]]
                    return
        apply(self._go_plain(), at, op, value)

    def held(self, a: int, b: int) -> np.ndarray:
        """The values agents ``[a, b)`` hold (``b > a``), for their max or truth: each distinct
        one once, found from the codes without an array of the values (held plain: the
        slice)."""
        if self.plain is not None:
            return self.plain[a:b]
        return self.values[np.flatnonzero(counts(self.codes, len(self.values), a, b))]

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
