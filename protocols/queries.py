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

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

#: rows drawn at least at a time (a range read is widened to whole chunks of this many rows)
CHUNK = 4096
#: rows ``RowQueries.take`` draws in one range when they are at most this far apart
GAP = 64


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
        self._out: np.ndarray | None = None  # the rows drawn so far (allocated on first use)
        self._done = np.zeros(-(-self.shape[0] // CHUNK), dtype=bool)  # chunks drawn
        self._left = len(self._done)
        #: no array of the rows is kept: each is drawn when read (``streaming``)
        self.streamed = False
        self._keep = 0
        self._sent: OrderedDict[int, tuple[int, np.ndarray]] = OrderedDict()
        self._sent_rows = 0

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
            rows = self._drawn(a, b)
            if b - a == self.shape[0] and rows.dtype == self.dtype and rows.flags.c_contiguous:
                self._out = rows  # drawn whole in one call: kept as it is, not copied
            else:
                if self._out is None:
                    self._out = np.empty(self.shape, dtype=self.dtype)
                self._out[a:b] = rows
            self._done[run] = True
            self._left -= len(run)

    def _drawn(self, a: int, b: int) -> np.ndarray:
        """Rows ``[a, b)`` drawn now (``draw``), checked."""
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
        return rows

    def streaming(self, keep: int = 0) -> None:
        """From now on, keep no array of the rows: a slice read (a query batch going out) is
        drawn afresh, and up to ``keep`` of the rows drawn so are kept, the oldest forgotten
        first, until ``rows`` reads them (a batch's reports absorbed); any other read is drawn
        again. (A run that holds its agents in chunks: the rows are a pure function of their
        agents, so a read drawn twice is the same.)"""
        self.streamed = True
        self._out = None
        self._done[:] = False
        self._left = len(self._done)
        self._keep = max(0, int(keep))
        #: rows drawn by slice reads and not read back yet: first row -> (end row, rows)
        self._sent: OrderedDict[int, tuple[int, np.ndarray]] = OrderedDict()
        self._sent_rows = 0

    def _send(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)`` of a streamed slice read: drawn, and kept for ``rows``."""
        out = self.rows(lo, hi)
        if self._keep and hi > lo:
            self._sent[lo] = (hi, out)
            self._sent_rows += hi - lo
            while self._sent_rows > self._keep:
                a, (b, _) = self._sent.popitem(last=False)
                self._sent_rows -= b - a
        return out

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)``: the kept ones (from the whole array, or a streamed slice read of
        rows from ``lo`` on, which forgets them), else drawn now without keeping them (as the
        rows the whole array would hold)."""
        lo, hi = max(0, lo), min(hi, self.shape[0])
        if lo >= hi:
            return np.empty((0, self.shape[1]), dtype=self.dtype)
        sent = self._sent.pop(lo, None) if self.streamed else None
        if sent is not None:
            end, kept = sent
            self._sent_rows -= end - lo
            if hi <= end:
                if hi < end:  # the rest stays kept for the read that starts there
                    self._sent[hi] = (end, kept[hi - lo:])
                    self._sent_rows += end - hi
                return kept[:hi - lo]
        c0, c1 = lo // CHUNK, -(-hi // CHUNK)
        if self._out is not None and self._done[c0:c1].all():
            return self._out[lo:hi]
        return self._drawn(lo, hi).astype(self.dtype, copy=False)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The rows at the sorted, distinct indices ``rows`` (``rows(lo, hi)`` over each group
        of them no more than ``GAP`` apart, then the ones asked for)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.empty((0, self.shape[1]), dtype=self.dtype)
        if int(rows[-1]) - int(rows[0]) + 1 == len(rows):  # one range
            return self.rows(int(rows[0]), int(rows[-1]) + 1)
        cuts = np.flatnonzero(np.diff(rows) > GAP) + 1
        parts = [self.rows(int(g[0]), int(g[-1]) + 1)[g - g[0]] for g in np.split(rows, cuts)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def __getitem__(self, index: Any) -> np.ndarray:
        """Rows of the queries: a slice with step 1 draws only what it covers (and returns a
        view); any other index reads the whole array."""
        if isinstance(index, slice) and index.step in (None, 1):
            lo, hi, _ = index.indices(self.shape[0])
            if self.streamed:
                return self._send(lo, hi)
            self._ensure(lo, hi)
            return self._out[lo:hi] if self._out is not None else self.rows(lo, hi)
        return self.full()[index]

    def full(self) -> np.ndarray:
        """The whole array (drawing every row not drawn yet; drawn whole again each time
        when ``streaming``)."""
        if self.streamed:
            return self.rows(0, self.shape[0])
        self._ensure(0, self.shape[0])
        if self._out is None:  # no rows at all
            self._out = np.empty(self.shape, dtype=self.dtype)
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


def rows_of(queries: Any, rows: np.ndarray) -> np.ndarray:
    """The rows at the sorted, distinct indices ``rows`` of a plan's ``queries`` (a
    ``RowQueries``: drawn if they are not kept; an array: indexed)."""
    if isinstance(queries, RowQueries):
        return queries.take(rows)
    return np.asarray(queries)[rows]


def full(queries: Any) -> Any:
    """``queries`` with a ``RowQueries`` replaced by its whole array (anything else as it is)."""
    return queries.full() if isinstance(queries, RowQueries) else queries
