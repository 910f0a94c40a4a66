"""The ids of a run's agents when they are one range, without an array of them.

A run's registered agents are ``0 .. n-1`` (or one range of them when a pool is missing), so a
curator that reads them a range at a time need not hold ``n`` integers: ``AgentRange`` answers
``len``, slices (each an ``np.arange`` of just that range), single ids, index arrays and
``np.searchsorted`` from its two ends, and becomes the whole array only when something asks
for one (``np.asarray``). A curator class that takes its reports in parts
(``Curator.absorbs_in_parts``) is built over one; every other curator gets the array, as
before.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np


class AgentRange:
    """The sorted ids ``start, start + 1, ..., stop - 1``, read like a read-only int64 array.

    Parameters
    ----------
    start, stop : int
        The first id and one past the last (``0 <= start <= stop``).

    Examples
    --------
    >>> r = AgentRange(10, 20)
    >>> len(r), r[2:5].tolist(), int(r[-1]), np.searchsorted(r, [12, 25]).tolist()
    (10, [12, 13, 14], 19, [2, 10])
    """

    __slots__ = ("start", "stop")

    dtype = np.dtype(np.int64)
    ndim = 1

    def __init__(self, start: int, stop: int) -> None:
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop:
            raise ValueError(f"AgentRange: need 0 <= start <= stop, got [{start}, {stop})")
        self.start = start
        self.stop = stop

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    def __getitem__(self, index: Any) -> Any:
        """A slice gives the ``np.arange`` of its ids, an integer one id (``np.int64``), an
        integer or boolean index array the ids it selects, as an array would."""
        n = len(self)
        if isinstance(index, slice):
            lo, hi, step = index.indices(n)
            return np.arange(self.start + lo, self.start + hi, step, dtype=np.int64)
        if isinstance(index, int | np.integer):
            i = operator.index(index)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for {n} agents")
            return np.int64(self.start + (i + n if i < 0 else i))
        idx = np.asarray(index)
        if idx.dtype == bool and idx.ndim == 1:
            if len(idx) != n:
                raise IndexError(f"boolean index of {len(idx)} for {n} agents")
            return self.start + np.flatnonzero(idx).astype(np.int64)
        if idx.dtype.kind in "iu":
            i = idx.astype(np.int64)
            if i.size and (int(i.min()) < -n or int(i.max()) >= n):
                raise IndexError(f"an index is out of bounds for {n} agents")
            return self.start + np.where(i < 0, i + n, i)
        return np.asarray(self)[index]

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """Where ``v`` would go in the ids (what ``np.searchsorted`` calls): computed from the
        range's ends for integer ``v``."""
        a = np.asarray(v)
        if a.dtype.kind not in "iu" or sorter is not None:
            return np.asarray(self).searchsorted(v, side=side, sorter=sorter)
        pos = a.astype(np.int64) - self.start + (1 if side == "right" else 0)
        out = np.clip(pos, 0, len(self)).astype(np.intp)
        return out[()] if out.ndim == 0 else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.arange(self.start, self.stop, dtype=np.int64)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __iter__(self) -> Any:
        return iter(np.asarray(self))

    def tolist(self) -> list[int]:
        return list(range(self.start, self.stop))

    def setflags(self, write: bool | None = None, **_: Any) -> None:
        """Nothing to set: the range is read-only already (as an array made read-only)."""
        if write:
            raise ValueError("an AgentRange is read-only")

    def __repr__(self) -> str:
        return f"AgentRange({self.start}, {self.stop})"


def whole(agents: Any) -> Any:
    """``agents`` as an array: an ``AgentRange`` made whole (read-only, as the runtime hands
    its arrays out), anything else as it is."""
    if not isinstance(agents, AgentRange):
        return agents
    out = np.asarray(agents)
    out.setflags(write=False)
    return out
