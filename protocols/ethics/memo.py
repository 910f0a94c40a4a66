"""A process's memory of results that depend on one voter's records only (Wang et al., 2019).

A voter's Eq. (3) estimate is a deterministic function of her records, the ball (C, norm) and
the solver's settings, and it is bit-identical whether she is solved alone or inside any block
of voters (``mle``'s batch invariance). A sweep asks for the same estimate many times: the
ground truth of a data set solves every voter, and each run of Algorithms 1-2 on that data set
(one per protocol and parameter point) solves them again. ``VoterMemo`` keeps the results of
each computed block of voters beside a copy of their records and the settings; a block asked
for again, or a range of voters of a kept block (a pool's voters inside the ground truth's),
or a few such ranges joined, is found (by a fingerprint, then compared bit for bit) and its
kept results are returned: the ones a new solve would give, bit for bit. Records that differ
in any bit (the privacy audit's neighbouring rows) are solved.

The data generator's rows are kept too (``RowMemo``): every run of one repetition draws the
same rows, a deterministic function of the agents' data keys and ids and the generator's
public settings: a range of agents inside a kept block (the ground truth draws every agent,
each pool its own range) is a slice of it when their keys are the same.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

#: bytes of voters' records (kept beside their results) one process keeps
VOTER_BYTES = 128 << 20
#: bytes of generated rows one process keeps
ROW_BYTES = 160 << 20


def _fingerprints(bits: np.ndarray) -> np.ndarray:
    """One uint64 per row of ``bits`` (B, L): sum_k bits[:, k] (2k + 1) phi mod 2^64, phi the
    golden-ratio constant (only to find candidate rows; every match is compared bit for bit)."""
    mix = (np.arange(bits.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)) * _PHI
    return (bits * mix).sum(axis=1, dtype=np.uint64)


_PHI = np.uint64(0x9E3779B97F4A7C15)
#: a block found in more pieces than this (or through more candidate rows per piece) is
#: computed instead: the look-up stays a few vectorised steps whatever the block's size
PIECES = 16
CANDIDATES = 8


class _Budgeted:
    """Kept entries by insertion number, least recently used dropped beyond ``budget`` bytes
    (under a lock: a process's threads share them)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._store: OrderedDict[int, tuple] = OrderedDict()
        self._bytes = 0
        self._next = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._store.clear()
            self._bytes = 0


class VoterMemo(_Budgeted):
    """Results of a function of each voter's records, kept per computed block of voters and
    least recently used dropped beyond a byte budget.

    A block asked for is looked up as consecutive runs of voters inside kept blocks (a pool's
    voters are a range of the ground truth's, or the same block as in the run before): each
    run is found by a fingerprint of its first voter's records, then compared bit for bit, all
    vectorised. A block not covered so is computed whole and kept.

    Parameters
    ----------
    budget : int
        Bytes of records (and results) kept.
    """

    def __init__(self, budget: int = VOTER_BYTES) -> None:
        super().__init__(budget)

    def __len__(self) -> int:
        """How many voters' results are kept."""
        return sum(len(v[1]) for v in self._store.values())

    def _piece(self, head: tuple, bits: np.ndarray, fps: np.ndarray
               ) -> tuple[int, np.ndarray] | None:
        """(length, results) of the longest run of ``bits``' first voters found in one kept
        block, or None."""
        for ident, (h, kfp, kbits, kres) in self._store.items():
            if h != head:
                continue
            for j in np.flatnonzero(kfp == fps[0])[:CANDIDATES]:
                k = min(len(kfp) - j, len(fps))
                same = (kfp[j:j + k] == fps[:k]) & (kbits[j:j + k] == bits[:k]).all(axis=1)
                bad = np.flatnonzero(~same)
                k = int(bad[0]) if len(bad) else k
                if k > 0:
                    self._store.move_to_end(ident)
                    return k, kres[j:j + k]
        return None

    def _find(self, head: tuple, bits: np.ndarray, fps: np.ndarray) -> np.ndarray | None:
        pieces, pos = [], 0
        while pos < len(bits) and len(pieces) < PIECES:
            got = self._piece(head, bits[pos:], fps[pos:])
            if got is None:
                return None
            pieces.append(got[1])
            pos += got[0]
        return np.concatenate(pieces) if pos == len(bits) else None

    def _keep(self, head: tuple, fps: np.ndarray, bits: np.ndarray, res: np.ndarray) -> None:
        size = fps.nbytes + bits.nbytes + res.nbytes
        if size > self.budget:
            return
        self._store[self._next] = (head, fps, bits, res)
        self._next += 1
        self._bytes += size
        while self._bytes > self.budget:
            _, (_, f, b, r) = self._store.popitem(last=False)
            self._bytes -= f.nbytes + b.nbytes + r.nbytes

    def results(self, tag: str, z: np.ndarray, width: int,
                compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``compute(z)`` (one row of ``width`` float64 per voter), or the kept results when
        every voter's records (bit for bit) and ``tag`` are kept.

        ``compute`` must treat voters independently (a voter's row the same, bit for bit, in
        any block), which is what makes kept results of other blocks equal to ``compute(z)``.

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
        fps = _fingerprints(bits)
        head = (tag, z.shape[1:])
        with self._lock:
            got = self._find(head, bits, fps)
        if got is not None:
            return got.copy()
        out = np.asarray(compute(z), dtype=np.float64).reshape(len(z), width)
        with self._lock:
            self._keep(head, fps, bits.copy(), out.copy())
        return out


class RowMemo(_Budgeted):
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
        super().__init__(budget)

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
#: the process's voters' exact functional-mechanism coefficients (Algorithm 3)
FM = VoterMemo()
#: the process's generated rows of synthetic voters
ROWS = RowMemo()
