"""A streamed round's reports in agent order, for a curator that sums floats in the reports'
order (``Curator.absorbs_in_order``: Harmony's ``bincount`` of ±c, the ethics average's
``sum(axis=0)``). Such a sum, carried on part after part, has the bits of one sum over the
whole round only when the parts come in increasing agent order; the pools answer in parallel,
so their batches arrive in any order.

``InOrder`` holds the stored batches that came early and hands them to the curator once every
agent before them is settled: its batch answered (a report, an out-of-domain one or a refusal)
or never to be. Where that is lies with the round (``Round.frontier``): the first agent of a
batch still unanswered or unsent. Its ``hold`` bounds what waits: past it, a pool whose batches
lie ahead of the frontier gets no new one (``Round.next_batch``) until the frontier moves, so a
round holds about ``hold`` reports however many agents it asks, and gives up the pools'
parallelism for it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np


class InOrder:
    """The early reports of a streamed round whose curator absorbs them in agent order.

    Parameters
    ----------
    absorb : callable
        The curator's sink, ``absorb(agents, reports)``: called with sorted agents, each call's
        all above every earlier call's.
    hold : int
        Reports that may wait before the pools ahead of the frontier are held back.
    """

    def __init__(self, absorb: Callable[[np.ndarray, np.ndarray], None], hold: int) -> None:
        self.absorb = absorb
        self.hold = max(1, int(hold))
        #: waiting parts (sorted ids, their reports), by first id
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._firsts: list[int] = []
        #: reports waiting
        self.waiting = 0
        #: every agent below it is absorbed or will never be: a report of one comes too late
        self.cursor = 0

    @property
    def full(self) -> bool:
        """Whether the pools ahead of the frontier are held back."""
        return self.waiting >= self.hold

    def push(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Keep a stored batch (sorted ``ids``, all at or above ``cursor``) until its turn."""
        if len(ids):
            self._insert(ids, values)
            self.waiting += len(ids)

    def _insert(self, ids: np.ndarray, values: np.ndarray) -> None:
        at = bisect.bisect_right(self._firsts, int(ids[0]))
        self.parts.insert(at, (ids, values))
        self._firsts.insert(at, int(ids[0]))

    def release(self, frontier: float) -> bool:
        """Absorb, in one call and in agent order, the waiting reports of agents below
        ``frontier`` (every agent before it settled); the cursor moves to it. True if any
        report was absorbed."""
        k = bisect.bisect_left(self._firsts, frontier)  # the parts that start below it
        take = self.parts[:k]
        del self.parts[:k], self._firsts[:k]
        ready: list[tuple[np.ndarray, np.ndarray]] = []
        for ids, values in take:
            if ids[-1] >= frontier:  # its tail waits on
                j = int(np.searchsorted(ids, frontier))
                self._insert(ids[j:], values[j:])
                ids, values = ids[:j], values[:j]
            ready.append((ids, values))
        if frontier > self.cursor:
            self.cursor = frontier  # type: ignore[assignment]
        if not ready:
            return False
        ids = np.concatenate([p[0] for p in ready]) if len(ready) > 1 else ready[0][0]
        values = np.concatenate([p[1] for p in ready]) if len(ready) > 1 else ready[0][1]
        if len(ready) > 1 and not (ids[1:] > ids[:-1]).all():  # parts that interleave
            order = np.argsort(ids, kind="stable")
            ids, values = ids[order], values[order]
        self.waiting -= len(ids)
        self.absorb(ids, values)
        return True

    def flush(self) -> bool:
        """The round is over: absorb every waiting report, in agent order."""
        return self.release(float("inf"))
