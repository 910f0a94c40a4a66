"""Collusion mechanics: who is in the semi-honest coalition, and the adversary's view.

A run's ``collusion`` names the colluding agents (``colluders``: a fraction in [0, 1), a count,
or a list of agent ids, which a scenario gives as ``[collusion] agents``; a scenario's list of
``colluders`` is a sweep, one value per run) and whether the curator is in the coalition
(``curator = true``, the LDP threat model). Colluders follow the protocol and, when the curator
colludes, DISCLOSE their raw data and their random coins (the agent's stream key, from which
every draw it makes can be recomputed) to the curator. The adversary view is exactly what the
curator received (queries it sent, reports, broadcasts), the disclosures and the public output;
attacks (a later module) must use nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.simulator.codec import wire


def n_colluders(n: int, spec: Any) -> int | None:
    """How many colluders a fraction or count names (None for an explicit id list)."""
    if isinstance(spec, list):
        return None
    if isinstance(spec, float):  # a fraction in [0, 1)
        return int(round(spec * n))
    return int(spec)


def colluder_mask(n: int, collusion: dict[str, Any], key: int) -> np.ndarray:
    """Boolean mask of colluding agents.

    A fraction or count picks the agents with the smallest hash of (collusion key, agent id), so
    every pool computes the same set without talking to the others, independent of pool count.
    At most n - 1 agents collude (DPWeVote's maximal collusion); an explicit list is taken as is.
    """
    spec = collusion.get("colluders", 0)
    mask = np.zeros(n, dtype=bool)
    if isinstance(spec, list):
        ids = np.asarray(spec, dtype=np.int64)
        mask[ids[(ids >= 0) & (ids < n)]] = True
        return mask
    k = min(n_colluders(n, spec) or 0, max(n - 1, 0))
    if k <= 0:
        return mask
    h = rngm.bits(key, np.arange(n), 0, 1)[:, 0]
    mask[np.argsort(h, kind="stable")[:k]] = True
    return mask


#: agents hashed at a time when the coalition is selected (``Coalition``; a run passes its
#: ``[runtime] chunk``)
HASH_CHUNK = 1 << 20
#: the most hashes ``Coalition`` gathers to rank them exactly; a larger bucket of the radix
#: selection is split on the next 16 bits first
GATHER = 1 << 16


class Coalition:
    """The colluding agents of a run: the same agents as ``colluder_mask``, held without a
    mask over all ``n`` agents.

    An explicit list is kept as its sorted, distinct ids in ``[0, n)``. A fraction or count
    ``k`` is the ``k`` agents of the smallest (hash, id) pairs (the mask's stable sort of the
    hashes): the coalition keeps only the ``k``-th smallest pair, found by a radix selection
    over the hashes ``chunk`` agents at a time (integer work: a histogram of the top 16 bits,
    then the few hashes of the one bucket that holds it, ranked exactly), and an agent
    colludes exactly when its pair is not above it. The selection runs on first use (a run
    whose curator does not collude never needs it); its memory is a chunk's, whatever ``n``.

    Parameters
    ----------
    n : int
        The run's agents (ids in ``[0, n)``).
    collusion : dict
        The run's ``collusion`` (its ``colluders``: a fraction, a count or a list of ids).
    key : int
        The coalition's stream key.
    chunk : int
        Agents hashed at a time.
    """

    def __init__(self, n: int, collusion: dict[str, Any], key: int,
                 chunk: int = HASH_CHUNK) -> None:
        self.n, self.key, self.chunk = int(n), key, max(1, int(chunk))
        spec = collusion.get("colluders", 0)
        #: the sorted ids (an explicit list, or none), else None: the ``k``-th pair decides
        self._ids: np.ndarray | None = None
        self._kth: tuple[int, int] | None = None
        if isinstance(spec, list):
            ids = np.unique(np.asarray(spec, dtype=np.int64))
            self._ids = ids[(ids >= 0) & (ids < self.n)]
            self.k = len(self._ids)
        else:
            self.k = max(0, min(n_colluders(self.n, spec) or 0, max(self.n - 1, 0)))
            if not self.k:
                self._ids = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        """How many agents collude."""
        return self.k

    def _hashes(self, lo: int, hi: int) -> np.ndarray:
        """The hashes of agents ``[lo, hi)`` (``colluder_mask``'s)."""
        return rngm.bits(self.key, np.arange(lo, hi, dtype=np.int64), 0, 1)[:, 0]

    def _chunks(self, lo: int, hi: int) -> Any:
        for a in range(lo, hi, self.chunk):
            b = min(hi, a + self.chunk)
            yield a, self._hashes(a, b)

    def kth(self) -> tuple[int, int]:
        """The ``k``-th smallest (hash, id) pair (``k`` >= 1, no explicit list)."""
        if self._kth is None:
            self._kth = self._select()
        return self._kth

    def _select(self) -> tuple[int, int]:
        need, prefix, shift = self.k, 0, 64  # rank sought among the hashes of ``prefix``
        while True:
            shift -= 16
            counts = np.zeros(1 << 16, dtype=np.int64)
            for _, h in self._chunks(0, self.n):
                if shift < 48:
                    h = h[(h >> np.uint64(shift + 16)) == np.uint64(prefix)]
                digit = ((h >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.intp)
                counts += np.bincount(digit, minlength=1 << 16)
            cum = np.cumsum(counts)
            b = int(np.searchsorted(cum, need))  # the bucket of the need-th smallest
            need -= int(cum[b - 1]) if b else 0
            prefix = (prefix << 16) | b
            if counts[b] <= GATHER or shift == 0:
                break
        hs, ids = [], []
        for a, h in self._chunks(0, self.n):
            sel = np.flatnonzero((h >> np.uint64(shift)) == np.uint64(prefix))
            hs.append(h[sel])
            ids.append(sel + a)
        h, i = np.concatenate(hs), np.concatenate(ids)
        pick = np.lexsort((i, h))[need - 1]
        return int(h[pick]), int(i[pick])

    def members(self, agents: np.ndarray) -> np.ndarray:
        """Per agent id of ``agents``: whether it colludes. The first call lists the colluders
        (``ids``: as many integers as there are colluders, which disclose a row each anyway)."""
        agents = np.asarray(agents, dtype=np.int64)
        if self._ids is None:
            self._ids = self.ids()
        if not len(self._ids):
            return np.zeros(agents.shape, dtype=bool)
        at = np.minimum(np.searchsorted(self._ids, agents), len(self._ids) - 1)
        return self._ids[at] == agents

    def __contains__(self, agent: int) -> bool:
        return bool(self.members(np.array([agent]))[0])

    def ids(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """The colluders among agents ``[lo, hi)`` (default: all), sorted."""
        hi = self.n if hi is None else min(hi, self.n)
        lo = max(0, lo)
        if self._ids is not None:
            return self._ids[np.searchsorted(self._ids, lo):np.searchsorted(self._ids, hi)]
        if lo >= hi:
            return np.zeros(0, dtype=np.int64)
        h0, a0 = self.kth()
        out = []
        for a, h in self._chunks(lo, hi):
            ids = np.arange(a, a + len(h), dtype=np.int64)
            out.append(ids[(h < np.uint64(h0)) | ((h == np.uint64(h0)) & (ids <= a0))])
        return np.concatenate(out)

    def mask(self) -> np.ndarray:
        """The boolean mask over all ``n`` agents (what ``colluder_mask`` gives)."""
        out = np.zeros(self.n, dtype=bool)
        out[self.ids()] = True
        return out


def save_view(path: str | Path, view: dict[str, Any]) -> Path:
    """Write an adversary view as one msgpack file (numpy arrays as ext type)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgpack.packb(view, default=wire.pack_ext, use_bin_type=True))
    return path


def load_view(path: str | Path) -> dict[str, Any]:
    """Read back a view written by ``save_view``."""
    return msgpack.unpackb(Path(path).read_bytes(), ext_hook=wire.unpack_ext, raw=False,
                           strict_map_key=False)
