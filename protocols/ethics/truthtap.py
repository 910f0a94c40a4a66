"""A pool's share of the ethics ground truth (Wang et al., 2019), summed as its run goes.

The ground truth (``PairwiseChoices.truth``) is the average of every voter's Eq. (3) estimate
and of her generating parameter beta_i, summed block by block: block k holds voters
``k * block .. (k + 1) * block - 1`` (the last one fewer), each block's (B, d) array is summed
over its voters (``block_sums``, ``generated_sum``) and the blocks' sums are added in order.
Algorithms 1-2 solve the same estimates in the agents' pools, and a pool generates its voters'
beta_i with their rows: a ``TruthTap`` hears both as they are made and sums every block that
lies in its pool's range with the very call ``truth`` makes on the same array, so the same bits.
It keeps the raw values of the (at most two) blocks its range shares with a neighbouring pool.
``join`` puts the parts of all pools together into the block sums in order, or None.

A tap hears an estimate only when it was solved from the pool's own rows in place: the records
``z`` handed to ``memo_mle`` are a view of the rows the tap watches (``watch``: the block's,
or a chunked pool's last chunks), so the ids are read from where they lie and nothing but those
rows can be counted. The part is None unless
every voter of its range was heard exactly once for each quantity (a voter not asked, refused,
asked twice or solved from a copy leaves it None, and the orchestrator computes the truth).
Nothing here leaves the pool but to the orchestrator: the curator never holds a tap's part.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ldpsim.protocols.ethics.model import norm_of


def block_sums(est: np.ndarray, bound: float, norm: str) -> tuple[np.ndarray, int]:
    """One block's share of the ground truth's Eq. (3) part: the sum of its voters' estimates
    ``est`` (B, d) and how many lie on the C-ball's boundary.

    Parameters
    ----------
    est : ndarray, shape (B, d)
        The block's Eq. (3) estimates, in voter order.
    bound, norm : float, str
        The ball ``||beta||_norm <= bound`` (C of Eq. 3).

    Returns
    -------
    (ndarray of shape (d,), int)
    """
    on = int((norm_of(est, norm) >= bound * (1 - 1e-9)).sum())
    return est.sum(axis=0), on


def generated_sum(beta: np.ndarray) -> np.ndarray:
    """One block's sum of its voters' generating parameters ``beta`` (B, d) (§5.1)."""
    return beta.sum(axis=0)


@dataclass
class TruthPart:
    """One pool's share of a data set's ground truth (its voters ``start .. stop - 1``).

    ``sums``: per block lying in the range, (sum of the Eq. (3) estimates, sum of the
    generating parameters, voters on the boundary); ``edges``: per block the range shares with
    a neighbour, the first voter of the range in it and its voters' (estimates, parameters).
    ``fingerprint``: the data set's (``PairwiseChoices.truth_fingerprint``).
    """

    fingerprint: bytes
    start: int
    stop: int
    block: int
    sums: dict[int, tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict)
    edges: dict[int, tuple[int, np.ndarray, np.ndarray]] = field(default_factory=dict)


class _Stream:
    """One per-voter quantity (estimates or parameters) of the voters ``start .. stop - 1``,
    gathered in (B, d) buffers per block; a block whose buffer is full is reduced
    (``reduce``) when it is a whole block, or kept as it is (an edge)."""

    def __init__(self, start: int, stop: int, n: int, block: int, d: int,
                 reduce: Callable[[np.ndarray], Any]) -> None:
        self.start, self.stop, self.n, self.block, self.d = start, stop, n, block, d
        self.reduce = reduce
        self.open: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # block -> (values, heard)
        self.sums: dict[int, Any] = {}
        self.edges: dict[int, np.ndarray] = {}
        self.broken = False
        #: the voters of each call, first -> stop (a chunked pool's chunk made again tells
        #: the same voters again: heard once)
        self.calls: dict[int, int] = {}

    def _span(self, k: int) -> tuple[int, int]:
        """The voters of block ``k`` in the range."""
        return max(self.start, k * self.block), min(self.stop, (k + 1) * self.block)

    def add(self, first: int, values: np.ndarray) -> None:
        """The values (B, d) of the voters ``first .. first + B - 1``."""
        stop = first + len(values)
        if first < self.start or stop > self.stop or values.shape[1:] != (self.d,):
            self.broken = True
            return
        if self.calls.get(first) == stop:
            return  # the same voters again (a chunk made again)
        self.calls[first] = stop
        pos = first
        while pos < stop:
            k = pos // self.block
            a, b = self._span(k)
            end = min(stop, b)
            if k in self.sums or k in self.edges:
                self.broken = True  # heard twice
                return
            buf, heard = self.open.get(k) or (np.empty((b - a, self.d)), np.zeros(b - a, bool))
            self.open[k] = (buf, heard)
            if heard[pos - a:end - a].any():
                self.broken = True
                return
            buf[pos - a:end - a] = values[pos - first:end - first]
            heard[pos - a:end - a] = True
            if heard.all():
                del self.open[k]
                whole = (a, b) == (k * self.block, min(self.n, (k + 1) * self.block))
                if whole:
                    self.sums[k] = self.reduce(buf)
                else:
                    self.edges[k] = buf
            pos = end

    @property
    def complete(self) -> bool:
        """Every voter of the range heard exactly once."""
        if self.broken or self.open or self.start >= self.stop:
            return False
        blocks = range(self.start // self.block, (self.stop - 1) // self.block + 1)
        return all(k in self.sums or k in self.edges for k in blocks)


class TruthTap:
    """What one pool hears of its voters' ground truth as its run makes it (module doc).

    Parameters
    ----------
    source : object
        The data set whose ``rows`` generate this pool's voters (``generated`` from it only).
    fingerprint : bytes
        The data set's (``PairwiseChoices.truth_fingerprint``), carried by the part.
    start, stop, n, block, d : int
        The pool's voters, the data set's size, the truth's block size and beta's length.
    bound, norm : float, str
        The data set's C-ball (Eq. 3): estimates solved in another ball are not heard.
    """

    #: hears a chunked pool's rows chunk by chunk (``TruthShare``)
    chunked = True
    #: the chunks watched at once (a chunked pool keeps its last two)
    WATCHED = 3

    def __init__(self, source: Any, fingerprint: bytes, start: int, stop: int, n: int,
                 block: int, d: int, bound: float, norm: str) -> None:
        self.source = source
        self.fingerprint = fingerprint
        self.start, self.stop, self.block = start, stop, block
        self.ball = (float(bound), norm)
        #: the rows watched, (first voter, rows): the block's, or the last chunks
        self.watched: deque[tuple[int, np.ndarray]] = deque(maxlen=self.WATCHED)
        self.mle = _Stream(start, stop, n, block, d, lambda b: block_sums(b, *self.ball))
        self.gen = _Stream(start, stop, n, block, d, generated_sum)

    def watch(self, rows: np.ndarray, first: int | None = None) -> None:
        """Hear the estimates solved from ``rows`` in place: the pool's voters' rows
        ``[eps_i, z_1, ..., z_n]`` (C-contiguous float64), one per voter of the range, or of
        a chunk's voters ``first ..``."""
        rows = np.asarray(rows)
        whole = first is None
        first = self.start if whole else int(first)
        if (rows.dtype == np.float64 and rows.ndim == 2 and rows.flags.c_contiguous
                and self.start <= first and first + len(rows) <= self.stop
                and (not whole or len(rows) == self.stop - self.start)):
            self.watched.append((first, rows))

    def adopt(self, source: Any) -> None:
        """A chunked pool makes its next chunk's rows from ``source`` (its data set keyed for
        the chunk): what it generates is heard (``generated``)."""
        self.source = source

    def look(self, rows: np.ndarray, first: int) -> None:
        """The pool's own rows of voters ``first ..``, put together from two chunks for a
        batch across a chunk's end: solves from them in place are heard too."""
        self.watch(rows, first)

    def locate(self, z: np.ndarray) -> int | None:
        """The first voter whose records ``z`` (B, n, d) are, in place, in the watched rows
        (``z`` a view of their columns 1..), or None."""
        if z.ndim != 3 or z.dtype != np.float64 or not len(z):
            return None
        for first, rows in reversed(self.watched):
            at = _located(z, rows)
            if at is not None:
                return first + at
        return None

    def solved(self, z: np.ndarray, est: np.ndarray, bound: float, norm: str) -> None:
        """Voters' Eq. (3) estimates ``est`` of records ``z`` in the ball (bound, norm)."""
        if (float(bound), norm) != self.ball:
            return
        first = self.locate(z)
        if first is not None:
            self.mle.add(first, np.asarray(est, dtype=np.float64))

    def generated(self, source: Any, first: int, beta: np.ndarray) -> None:
        """The generating parameters ``beta`` of ``source``'s voters ``first ..``."""
        if source is self.source:
            self.gen.add(first, np.asarray(beta, dtype=np.float64))

    def part(self) -> TruthPart | None:
        """This pool's share of the truth, or None unless every voter was heard once."""
        if not (self.mle.complete and self.gen.complete):
            return None
        sums = {k: (m, self.gen.sums[k], on) for k, (m, on) in self.mle.sums.items()}
        edges = {k: (max(self.start, k * self.block), e, self.gen.edges[k])
                 for k, e in self.mle.edges.items()}
        return TruthPart(self.fingerprint, self.start, self.stop, self.block, sums, edges)

    def close(self) -> None:
        """Hear nothing more (the process's taps no longer hold it)."""
        with _LOCK:
            if self in _OPEN:
                _OPEN.remove(self)
        self.watched.clear()


def _located(z: np.ndarray, rows: np.ndarray) -> int | None:
    """The row of ``rows`` whose columns 1.. the records ``z`` (B, n, d) start at, in place,
    or None."""
    width, item = rows.strides[0], rows.itemsize
    if (z.shape[1] * z.shape[2] != rows.shape[1] - 1
            or z.strides[1:] != (z.shape[2] * item, item)
            or (len(z) > 1 and z.strides[0] != width)):
        return None
    off = z.__array_interface__["data"][0] - rows.__array_interface__["data"][0] - item
    if off < 0 or off % width or off // width + len(z) > len(rows):
        return None
    return off // width


#: the taps this process's data sets and solver tell (a pool's, while its run lasts)
_OPEN: list[TruthTap] = []
_LOCK = threading.Lock()


def open_tap(*args: Any) -> TruthTap:
    """A ``TruthTap(*args)`` that hears this process's solves and rows until ``close``."""
    tap = TruthTap(*args)
    with _LOCK:
        _OPEN.append(tap)
    return tap


def solved(z: np.ndarray, est: np.ndarray, bound: float, norm: str) -> None:
    """Tell the open taps (if any) that ``est`` are the Eq. (3) estimates of records ``z``."""
    if _OPEN:
        for tap in list(_OPEN):
            tap.solved(z, est, bound, norm)


def generated(source: Any, first: int, beta: np.ndarray) -> None:
    """Tell the open taps (if any) that ``source`` generated voters ``first ..`` with
    parameters ``beta``."""
    if _OPEN:
        for tap in list(_OPEN):
            tap.generated(source, first, beta)


def join(parts: list[Any], fingerprint: bytes, n: int, block: int, bound: float, norm: str
         ) -> list[tuple[np.ndarray, int, np.ndarray]] | None:
    """Every block's (sum of Eq. (3) estimates, voters on the boundary, sum of generating
    parameters), in block order, from the pools' ``parts`` (``TruthPart``): a block one pool
    summed as it is, one its neighbours share summed here from their edges joined, with the
    same calls (``block_sums``, ``generated_sum``). None unless the parts are this data set's
    (``fingerprint``, ``block``) and cover its ``n`` voters exactly once.
    """
    if not parts or any(not isinstance(p, TruthPart) for p in parts):
        return None
    parts = sorted(parts, key=lambda p: p.start)
    if (any(p.fingerprint != fingerprint or p.block != block for p in parts)
            or parts[0].start != 0 or parts[-1].stop != n
            or any(a.stop != b.start for a, b in zip(parts, parts[1:], strict=False))):
        return None
    out = []
    for k in range((n + block - 1) // block):
        owner = next((p for p in parts if k in p.sums), None)
        if owner is not None:
            m, g, on = owner.sums[k]
            out.append((m, on, g))
            continue
        pieces = sorted((p.edges[k] for p in parts if k in p.edges), key=lambda e: e[0])
        first = k * block
        for a, est, _ in pieces:
            if a != first:
                return None
            first += len(est)
        if not pieces or first != min(n, (k + 1) * block):
            return None
        m, on = block_sums(np.concatenate([e[1] for e in pieces]), bound, norm)
        out.append((m, on, generated_sum(np.concatenate([e[2] for e in pieces]))))
    return out
