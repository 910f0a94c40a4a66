"""Per-agent queries drawn a range of rows at a time, when the runtime first reads them.

A curator's ``plan`` may return, instead of the array of its round's queries, a ``RowQueries``
that draws any range of its rows on demand. The runtime reads the rows of each query batch
just before it sends that batch, so the first batches go out, and the pools start their
randomizers, while the rest of the round's queries are still to be drawn: the plan's cost
overlaps the round instead of preceding it. Everything else that reads the queries (the
curator's own ``absorb``, the adversary view, the audit, ``protocols.local``) gets the whole
array with ``np.asarray`` (or ``full``), which draws whatever is left.

It is meant for queries that are each a function of their own agent alone (draws keyed by the
agent, as ``protocols.rng`` makes them): then the array is the same whatever ranges are read,
in whatever order, which ``tests/protocols/test_queries.py`` checks for every protocol that
plans with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: rows drawn at least at a time (a range read is widened to whole chunks of this many rows)
CHUNK = 4096


class RowQueries:
    """The queries of a round's asked agents, one row each, drawn on first read.

    Parameters
    ----------
    draw : callable
        ``draw(lo, hi)`` returns rows ``lo .. hi-1`` of the queries, shape ``(hi - lo,
        width)``. Row ``i`` must depend only on the plan's ``i``-th agent (and the curator's
        key and round), never on which other rows are drawn with it.
    rows, width : int
        The array's shape: one row per asked agent, ``width`` numbers each.
    dtype : numpy dtype
        A bool, integer or float dtype of at most 8 bytes (what the batch codec carries).

    Examples
    --------
    >>> q = RowQueries(lambda lo, hi: np.arange(lo, hi)[:, None] * 2, 10, 1, np.int64)
    >>> q[3:5].ravel().tolist(), np.asarray(q).ravel().tolist()[:4]
    ([6, 8], [0, 2, 4, 6])
    """

    def __init__(self, draw: Callable[[int, int], np.ndarray], rows: int, width: int,
                 dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf" or self.dtype.itemsize > 8:
            raise TypeError(f"RowQueries: dtype {self.dtype} is not a bool, integer or float "
                            "of at most 64 bits")
        if rows < 0 or width < 1:
            raise ValueError(f"RowQueries: shape ({rows}, {width}) needs rows >= 0, width >= 1")
        self._draw = draw
        self.shape = (int(rows), int(width))
        self._out = np.empty(self.shape, dtype=self.dtype)
        self._done = np.zeros(-(-self.shape[0] // CHUNK), dtype=bool)  # chunks drawn
        self._left = len(self._done)

    ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def _ensure(self, lo: int, hi: int) -> None:
        """Draw the chunks of rows ``[lo, hi)`` not drawn yet, each run of them in one call."""
        if lo >= hi or not self._left:
            return
        c0, c1 = lo // CHUNK, -(-hi // CHUNK)
        todo = np.flatnonzero(~self._done[c0:c1])
        if not len(todo):
            return
        todo += c0
        # runs of consecutive missing chunks: one draw each
        cuts = np.flatnonzero(np.diff(todo) != 1) + 1
        for run in np.split(todo, cuts):
            a, b = int(run[0]) * CHUNK, min(int(run[-1] + 1) * CHUNK, self.shape[0])
            rows = np.asarray(self._draw(a, b))
            if rows.shape != (b - a, self.shape[1]):
                raise ValueError(f"RowQueries: draw({a}, {b}) gave shape {rows.shape}, "
                                 f"expected {(b - a, self.shape[1])}")
            if (rows.size and self.dtype.kind in "iu" and rows.dtype != self.dtype
                    and not np.can_cast(rows.dtype, self.dtype)):
                info = np.iinfo(self.dtype)  # a narrower integer dtype: every value must fit
                if rows.min() < info.min or rows.max() > info.max:
                    raise ValueError(f"RowQueries: draw({a}, {b}) gave values in "
                                     f"[{rows.min()}, {rows.max()}], outside {self.dtype}")
            if b - a == self.shape[0] and rows.dtype == self.dtype and rows.flags.c_contiguous:
                self._out = rows  # drawn whole in one call: kept as it is, not copied
            else:
                self._out[a:b] = rows
            self._done[run] = True
            self._left -= len(run)

    def __getitem__(self, index: Any) -> np.ndarray:
        """Rows of the queries: a slice with step 1 draws only what it covers (and returns a
        view); any other index reads the whole array."""
        if isinstance(index, slice) and index.step in (None, 1):
            lo, hi, _ = index.indices(self.shape[0])
            self._ensure(lo, hi)
            return self._out[lo:hi]
        return self.full()[index]

    def full(self) -> np.ndarray:
        """The whole array (drawing every row not drawn yet)."""
        self._ensure(0, self.shape[0])
        return self._out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The whole array (``np.asarray``); a copy when numpy asks for one (``np.array``), so
        that nobody writes into the plan's queries through it."""
        out = self.full()
        return out.astype(out.dtype if dtype is None else dtype, copy=bool(copy))

    def tolist(self) -> list:
        return self.full().tolist()

    def __repr__(self) -> str:
        drawn = len(self._done) - self._left
        return (f"RowQueries(shape={self.shape}, dtype={self.dtype}, "
                f"chunks drawn {drawn}/{len(self._done)})")


def full(queries: Any) -> Any:
    """``queries`` with a ``RowQueries`` replaced by its whole array (anything else as it is)."""
    return queries.full() if isinstance(queries, RowQueries) else queries
