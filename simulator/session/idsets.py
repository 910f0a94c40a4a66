"""Sets of agent ids a round keeps without a flag per agent: who reported, whose report was
invalid (``IdSet``), who was asked (``PlanMembers``).

A round of a chunked run (``rounds.Round``, ``streamed``) reads and writes them exactly as it
reads and writes boolean arrays over all ``n`` agents in any other run: indexed by a slice or
by an array of ids, they give a boolean array; assigned ``True`` or ``False`` at a slice or at
ids, they change. Honest pools answer whole query batches of consecutive agents, so an
``IdSet`` is a handful of intervals; a pool that fragments them (reports of scattered agents)
turns it into a bitset of ``n`` bits (``LIMIT``), as correct and still an eighth of the bytes
of the flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols.agentrange import AgentRange

#: intervals an ``IdSet`` holds at most; one more and it becomes a bitset over all agents
LIMIT = 1024


def _ids(index: Any) -> np.ndarray:
    """An index (a slice with both ends, ids, an ``AgentRange``) as int64 ids."""
    if isinstance(index, slice):
        return np.arange(index.start, index.stop, dtype=np.int64)
    return np.asarray(index, dtype=np.int64)


def _runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, distinct ``ids`` as the intervals ``[starts, ends)`` of their runs."""
    if not len(ids):
        return ids, ids
    cuts = np.flatnonzero(np.diff(ids) != 1) + 1
    return ids[np.r_[0, cuts]], ids[np.r_[cuts - 1, len(ids) - 1]] + 1


def _covered(starts: np.ndarray, ends: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per id: whether it lies in one of the intervals ``[starts, ends)`` (sorted, disjoint)."""
    if not len(starts):
        return np.zeros(ids.shape, dtype=bool)
    i = np.searchsorted(starts, ids, side="right") - 1
    return (i >= 0) & (ids < ends[np.maximum(i, 0)])


class IdSet:
    """A set of agent ids in ``[0, n)``, read and written like a boolean array over them (see
    the module docstring).

    Parameters
    ----------
    n : int
        The run's agents.

    Examples
    --------
    >>> s = IdSet(100)
    >>> s[slice(10, 20)] = True
    >>> s[np.array([12, 15])] = False
    >>> s[np.array([9, 10, 12, 19, 20])].tolist()
    [False, True, False, True, False]
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.starts = np.zeros(0, dtype=np.int64)
        self.ends = np.zeros(0, dtype=np.int64)
        #: the bitset over all agents, once the intervals are too many (else None)
        self.bits: np.ndarray | None = None

    @property
    def intervals(self) -> int:
        """Intervals held (0 once it is a bitset)."""
        return len(self.starts)

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, slice) and self.bits is None:
            return self._range(index.start, index.stop)
        ids = _ids(index)
        if self.bits is not None:
            return ((self.bits[ids >> 3] >> (ids & 7).astype(np.uint8)) & 1).astype(bool)
        return _covered(self.starts, self.ends, ids)

    def _range(self, a: int, b: int) -> np.ndarray:
        """The flags of agents ``[a, b)``."""
        out = np.zeros(max(0, b - a), dtype=bool)
        i0 = int(np.searchsorted(self.ends, a, side="right"))
        i1 = int(np.searchsorted(self.starts, b, side="left"))
        for s, e in zip(self.starts[i0:i1].tolist(), self.ends[i0:i1].tolist(), strict=True):
            out[max(s, a) - a:min(e, b) - a] = True
        return out

    def members(self, a: int, b: int) -> np.ndarray:
        """The ids of the set in ``[a, b)``, ascending."""
        if a >= b:
            return np.zeros(0, dtype=np.int64)
        if self.bits is None:
            i0 = int(np.searchsorted(self.ends, a, side="right"))
            i1 = int(np.searchsorted(self.starts, b, side="left"))
            parts = [np.arange(max(s, a), min(e, b), dtype=np.int64) for s, e in
                     zip(self.starts[i0:i1].tolist(), self.ends[i0:i1].tolist(), strict=True)]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        first = a >> 3
        flags = np.unpackbits(self.bits[first:(b + 7) >> 3], bitorder="little")
        ids = np.flatnonzero(flags[a - (first << 3):b - (first << 3)]).astype(np.int64)
        ids += a
        return ids

    def __setitem__(self, index: Any, value: bool) -> None:
        if isinstance(index, slice) and self.bits is None:  # one interval
            if index.start >= index.stop:
                return
            s2 = np.array([index.start], dtype=np.int64)
            e2 = np.array([index.stop], dtype=np.int64)
        else:
            ids = _ids(index)
            if not isinstance(index, slice) and len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
                ids = np.unique(ids)
            if not len(ids):
                return
            if self.bits is not None:
                self._set_bits(ids, bool(value))
                return
            s2, e2 = _runs(ids)
        if value:
            self._combine(s2, e2, np.logical_or)
        else:
            self._combine(s2, e2, lambda a, b: a & ~b)
        if len(self.starts) > LIMIT:
            self._to_bits()

    def _combine(self, s2: np.ndarray, e2: np.ndarray, op: Any) -> None:
        """The intervals of ``op(in self, in [s2, e2))`` over the elementary segments between
        every end of both, adjacent ones joined."""
        pts = np.unique(np.concatenate([self.starts, self.ends, s2, e2]))
        lo = pts[:-1]
        keep = op(_covered(self.starts, self.ends, lo), _covered(s2, e2, lo))
        prev = np.r_[False, keep[:-1]]
        nxt = np.r_[keep[1:], False]
        self.starts = lo[keep & ~prev]
        self.ends = pts[1:][keep & ~nxt]

    def _to_bits(self) -> None:
        """Become a bitset over all agents (too many intervals)."""
        self.bits = np.zeros((self.n + 7) >> 3, dtype=np.uint8)
        for s, e in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            self._set_bits(np.arange(s, e, dtype=np.int64), True)
        self.starts = self.ends = np.zeros(0, dtype=np.int64)

    def _set_bits(self, ids: np.ndarray, value: bool) -> None:
        """Set (or clear) the bits of sorted, distinct ``ids``: each byte once, its bits
        or-ed together first."""
        byte = ids >> 3
        bit = (np.uint8(1) << (ids & 7).astype(np.uint8)).astype(np.uint8)
        first = np.r_[0, np.flatnonzero(np.diff(byte)) + 1]
        mask = np.bitwise_or.reduceat(bit, first)
        at = byte[first]
        if value:
            self.bits[at] |= mask
        else:
            self.bits[at] &= ~mask


class PlanMembers:
    """Whether agents are among a plan's (sorted, distinct) ``agents``, read like a boolean
    array over all agents: from the range's ends for an ``AgentRange``, else by search."""

    def __init__(self, agents: Any) -> None:
        self.agents = agents

    def __getitem__(self, index: Any) -> np.ndarray:
        ids = _ids(index)
        agents = self.agents
        if isinstance(agents, AgentRange):
            return (ids >= agents.start) & (ids < agents.stop)
        if not len(agents):
            return np.zeros(ids.shape, dtype=bool)
        at = np.minimum(np.searchsorted(agents, ids), len(agents) - 1)
        return agents[at] == ids
