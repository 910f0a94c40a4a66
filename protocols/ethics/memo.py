"""A process's memory of results that depend on one voter's records only (Wang et al., 2019).

A voter's Eq. (3) estimate is a deterministic function of her records, the ball (C, norm) and
the solver's settings, and it is bit-identical whether she is solved alone or inside any block
of voters (``mle``'s batch invariance). A sweep asks for the same estimate many times: the
ground truth of a data set solves every voter, and each run of Algorithms 1-2 on that data set
(one per protocol and parameter point) solves them again. ``VoterMemo`` keeps each voter's
result beside a copy of her records and the settings (found by the records' CRC-32, then
compared bit for bit), so every repetition after the first is a look-up, and the result
returned is the one a new solve would give, bit for bit. Records that differ in any bit (the
privacy audit's neighbouring rows) are solved.

The data generator's rows are kept too (``RowMemo``): every run of one repetition draws the
same rows, a deterministic function of the agents' data keys and ids and the generator's
public settings: a range of agents inside a kept block (the ground truth draws every agent,
each pool its own range) is a slice of it when their keys are the same.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

#: bytes of voters' records (kept beside their results) one process keeps
VOTER_BYTES = 96 << 20
#: bytes of generated rows one process keeps
ROW_BYTES = 160 << 20


class _Kept:
    """Arrays of records (as uint64) with their results under a key (a CRC-32 and settings),
    compared bit for bit on look-up; least recently used dropped beyond ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.store: OrderedDict[tuple, list[tuple[np.ndarray, np.ndarray]]] = OrderedDict()
        self.bytes = 0

    def clear(self) -> None:
        self.store.clear()
        self.bytes = 0

    def find(self, key: tuple, bits: np.ndarray) -> np.ndarray | None:
        """The result kept for exactly the records ``bits``."""
        for kept, result in self.store.get(key, ()):
            if np.array_equal(kept, bits):
                self.store.move_to_end(key)
                return result
        return None

    def keep(self, key: tuple, bits: np.ndarray, result: np.ndarray) -> None:
        size = bits.nbytes + result.nbytes
        if size > self.budget or self.find(key, bits) is not None:
            return
        self.store.setdefault(key, []).append((bits, result))
        self.store.move_to_end(key)
        self.bytes += size
        while self.bytes > self.budget and self.store:
            _, old = self.store.popitem(last=False)
            self.bytes -= sum(b.nbytes + r.nbytes for b, r in old)


class VoterMemo:
    """Per-voter results of a function of each voter's records, least recently used dropped.

    A voter's records are found by their CRC-32 and then compared bit for bit with the records
    kept beside the result, so a result is only ever returned for exactly the same records.
    Whole blocks of voters are kept the same way (a pool asks for the same block in every run
    on a data set: one comparison instead of one per voter).

    Parameters
    ----------
    budget : int
        Bytes of records (and results) kept per voter (0: whole blocks only).
    blocks : int
        Bytes of records (and results) kept as whole blocks.
    """

    def __init__(self, budget: int = VOTER_BYTES, blocks: int = VOTER_BYTES) -> None:
        self._voters = _Kept(budget)
        self._blocks = _Kept(blocks)
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every result."""
        with self._lock:
            self._voters.clear()
            self._blocks.clear()

    def __len__(self) -> int:
        """How many voters' results are kept."""
        return sum(len(v) for v in self._voters.store.values())

    def results(self, tag: str, z: np.ndarray, width: int,
                compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``compute(z)`` (one row of ``width`` float64 per voter), computed only for the
        voters whose result under ``tag`` is not kept.

        ``compute`` must treat voters independently (a voter's row the same, bit for bit, in
        any block), which is what makes a block of the voters not kept equal to the whole.

        Parameters
        ----------
        tag : str
            The settings ``compute`` depends on besides the records (and their shape).
        z : ndarray, shape (B, ...)
            Each voter's records.
        width : int
            The length of a voter's result.
        compute : callable
            ``(b, ...) -> (b, width)`` for any block of voters.

        Returns
        -------
        ndarray, shape (B, width)
        """
        z = np.ascontiguousarray(z, dtype=np.float64)
        if len(z) == 0 or z.size == 0:
            return np.asarray(compute(z), dtype=np.float64).reshape(len(z), width)
        bits = z.reshape(len(z), -1).view(np.uint64)
        whole = (tag, z.shape, zlib.crc32(bits))
        with self._lock:
            got = self._blocks.find(whole, bits)
        if got is not None:
            return got.copy()
        head = (tag, z.shape[1:])
        per_voter = self._voters.budget > 0
        keys = [head + (zlib.crc32(row),) for row in bits] if per_voter else []
        out = np.empty((len(z), width))
        miss = [] if per_voter else list(range(len(z)))
        with self._lock:
            for i, key in enumerate(keys):
                got = self._voters.find(key, bits[i])
                if got is None:
                    miss.append(i)
                else:
                    out[i] = got
        if miss:
            new = np.asarray(compute(z[miss]), dtype=np.float64).reshape(len(miss), width)
            out[miss] = new
            if per_voter:
                with self._lock:
                    for i, row in zip(miss, new, strict=True):
                        self._voters.keep(keys[i], bits[i].copy(), row.copy())
        with self._lock:
            self._blocks.keep(whole, bits.copy(), out.copy())
        return out


class RowMemo:
    """Generated blocks of rows (and each agent's generating parameter), least recently used
    dropped beyond a byte budget.

    A block is kept with its generator's settings, its first agent and its agents' data keys;
    any range of agents covered by kept blocks with the same settings and the same keys is made
    of slices of them (an agent's row depends on her key, her id and the settings only).

    Parameters
    ----------
    budget : int
        Bytes of rows kept; a block larger than it is not kept.
    """

    def __init__(self, budget: int = ROW_BYTES) -> None:
        self.budget = budget
        self._store: OrderedDict[int, tuple[bytes, int, np.ndarray, np.ndarray, np.ndarray]] = (
            OrderedDict())
        self._bytes = 0
        self._next = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every block."""
        with self._lock:
            self._store.clear()
            self._bytes = 0

    def _find(self, settings: bytes, start: int, keys: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray] | None:
        """The agents ``start .. start + len(keys) - 1`` from kept blocks (slices of one, or
        pieces of several joined), or None where one of them is in none."""
        pieces: list[tuple[np.ndarray, np.ndarray]] = []
        pos, stop = start, start + len(keys)
        while pos < stop:
            for ident, (sett, first, kept, rows, extra) in self._store.items():
                off = pos - first
                end = min(stop, first + len(kept))
                if sett == settings and 0 <= off < len(kept) and np.array_equal(
                        kept[off:end - first], keys[pos - start:end - start]):
                    self._store.move_to_end(ident)
                    pieces.append((rows[off:end - first], extra[off:end - first]))
                    pos = end
                    break
            else:
                return None
        if len(pieces) == 1:
            return pieces[0]
        rows = np.concatenate([p[0] for p in pieces])
        extra = np.concatenate([p[1] for p in pieces])
        rows.setflags(write=False)
        extra.setflags(write=False)
        return rows, extra

    def block(self, settings: bytes, start: int, keys: np.ndarray,
              make: Callable[[], tuple[np.ndarray, np.ndarray]]
              ) -> tuple[np.ndarray, np.ndarray]:
        """The rows and generating parameters of the agents ``start ..`` whose data keys are
        ``keys``, made by ``make`` unless a kept block holds them (read-only: copy them to
        change them).

        Parameters
        ----------
        settings : bytes
            The generator's public settings (rows of other settings are never returned).
        start : int
            The first agent's id (the agents are consecutive).
        keys : ndarray of uint64
            The agents' data keys.
        make : callable
            ``() -> (rows, parameters)``, one row each per agent.
        """
        keys = np.array(keys, dtype=np.uint64)
        with self._lock:
            got = self._find(settings, start, keys)
        if got is not None:
            return got
        rows, extra = (np.asarray(a, dtype=np.float64) for a in make())
        rows.setflags(write=False)
        extra.setflags(write=False)
        size = rows.nbytes + extra.nbytes + keys.nbytes
        if size <= self.budget:
            with self._lock:
                self._store[self._next] = (settings, start, keys, rows, extra)
                self._next += 1
                self._bytes += size
                while self._bytes > self.budget:
                    _, (_, _, k, r, e) = self._store.popitem(last=False)
                    self._bytes -= r.nbytes + e.nbytes + k.nbytes
        return rows, extra


#: the process's voters' Eq. (3) estimates
MLE = VoterMemo()
#: the process's voters' exact functional-mechanism coefficients (Algorithm 3): whole blocks
#: only (no ground truth asks for them, so a pool's block is what comes back)
FM = VoterMemo(budget=0)
#: the process's generated rows of synthetic voters
ROWS = RowMemo()
