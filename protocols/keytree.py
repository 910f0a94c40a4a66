"""The device-key tree: every agent's 128-bit device key, and who may compute it.

Agent ``a``'s device key is the leaf ``a`` of a tree of keys over the agent ids ``0 .. 2^32 -
1``: four levels of 256 children each, the root derived from the experiment's master secret, and
child ``c`` of a node keyed ``K`` at level ``l`` keyed ``(PRF_K(l << 8 | c), PRF_K(2^62 | l << 8
| c))`` (SipHash-2-4, ``protocols.prf``; a GGM-style tree, Goldreich, Goldwasser & Micali 1986).
Whoever holds a node's key can compute the device keys below it and no other: ``AgentKeys``
holds the keys of the nodes that exactly cover some ranges of agents, and from them the agents'
coin and data keys (``PRF_device(run tag)``, ``PRF_device(2^63 | data tag)``). Why the keys are
built so, and the tags and secrets they derive from, is in ``protocols.keys``.

Beyond 2^32 agents the tree is one of a forest: agents ``[t 2^32, (t + 1) 2^32)`` are the leaves
of tree ``t`` (``t < 2^TREE_BITS``), whose root is read from the master with messages of their own
(``root_words(..., tree=t)``); tree 0 is the tree above, so no agent below 2^32 changes its keys.
A node's index counts across the forest (``Node``: level 0, index ``t`` is tree ``t``'s root).
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from ldpsim.protocols.prf import SIPHASH, prf, prf_tag

#: the agent ids of one tree: [0, 2^ID_BITS)
ID_BITS = 32
#: trees in the forest: agent ids live in [0, 2^(ID_BITS + TREE_BITS)) = [0, 2^40)
TREE_BITS = 8
#: one past the largest agent id a key can be derived for
ID_LIMIT = 1 << (ID_BITS + TREE_BITS)
#: bits of the id each level of the tree consumes (256 children per node)
LEVEL_BITS = 8
#: levels below the root; level LEVELS holds the agents' device keys
LEVELS = ID_BITS // LEVEL_BITS
_HALF = 1 << 62  # the second half of a child key
_DATA = np.uint64(1 << 63)  # data keys' messages; coin keys' messages stay below 2^63
TAG_BITS = 63
#: the messages that read the root of the device-key tree from a master secret's key
_ROOT_MSG = (np.uint64(0x726F6F742D6B3030), np.uint64(0x726F6F742D6B3031))


def root_words(m0: np.ndarray | int, m1: np.ndarray | int, tree: int | np.ndarray = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """The root key of device-key tree ``tree`` (agents ``[tree 2^32, (tree + 1) 2^32)``) of
    masters whose first 128 bits are ``(m0, m1)`` (one or many; one tree, or one per master).
    Tree 0's messages are ``_ROOT_MSG``; tree t's have their top byte XOR-ed with t."""
    t = np.asarray(tree, dtype=np.uint64)
    if ((t >> np.uint64(TREE_BITS)) != 0).any():
        raise ValueError(f"a tree of the forest is below 2^{TREE_BITS}")
    n = np.size(m0) if t.ndim == 0 else np.size(t)
    top = np.broadcast_to(t << np.uint64(56), (n,))
    return (prf(m0, m1, np.full(n, _ROOT_MSG[0], dtype=np.uint64) ^ top),
            prf(m0, m1, np.full(n, _ROOT_MSG[1], dtype=np.uint64) ^ top))


@functools.lru_cache(maxsize=64)
def _forest_keys(cls: type, master: bytes) -> AgentKeys:
    """``AgentKeys.root``'s keys: the roots of the forest of a master secret's first 128 bits,
    made once per master (every run of a sweep reads its agents' keys from them; the keys are
    immutable)."""
    m0, m1 = _split(master)
    k0, k1 = root_words(m0, m1, np.arange(1 << TREE_BITS, dtype=np.uint64))
    return cls(tuple(Node(0, t, a, b) for t, a, b in
                     zip(range(1 << TREE_BITS), k0.tolist(), k1.tolist(), strict=True)))


def device_rows(k0: np.ndarray, k1: np.ndarray, agents: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Row i's device key of agent ``agents[i]`` in the tree whose root key is ``(k0[i],
    k1[i])``: one agent under many masters at once (the privacy audit's trials). Agents of
    tree 0 only (below 2^32): another tree's root is read from the master (``root_words``)."""
    a = np.asarray(agents, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= 1 << ID_BITS):
        raise ValueError(f"device_rows: agent ids in [0, 2^{ID_BITS}) (tree 0) only")
    for level in range(1, LEVELS + 1):
        k0, k1 = _children(k0, k1, level, (a >> _shift(level)) & ((1 << LEVEL_BITS) - 1))
    return k0, k1


def _split(key: bytes) -> tuple[int, int]:
    return int.from_bytes(key[:8], "little"), int.from_bytes(key[8:16], "little")


def _shift(level: int) -> int:
    return ID_BITS - LEVEL_BITS * level


@dataclass(frozen=True)
class Node:
    """One node of the device-key forest: it covers agents ``[index << shift, (index + 1) <<
    shift)`` with ``shift = 32 - 8 level`` (level 0, index t: tree t's root); ``k0, k1`` are
    its key's halves."""

    level: int
    index: int
    k0: int
    k1: int

    @property
    def start(self) -> int:
        return self.index << _shift(self.level)

    @property
    def stop(self) -> int:
        return (self.index + 1) << _shift(self.level)


def _children(k0: np.ndarray, k1: np.ndarray, level: int, c: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The keys of children ``c`` (at ``level``) of nodes keyed ``(k0, k1)``."""
    m = (np.uint64(level) << np.uint64(LEVEL_BITS)) | np.asarray(c, dtype=np.uint64)
    return prf(k0, k1, m), prf(k0, k1, m | np.uint64(_HALF))


def cover(start: int, stop: int) -> list[tuple[int, int]]:
    """The fewest tree nodes (level, index) that exactly cover agents ``[start, stop)``."""
    if not 0 <= start <= stop <= ID_LIMIT:
        raise ValueError(f"agents [{start}, {stop}) are outside [0, 2^{ID_BITS + TREE_BITS})")
    out = []
    while start < stop:
        for level in range(LEVELS + 1):
            size = 1 << _shift(level)
            if start % size == 0 and start + size <= stop:
                out.append((level, start >> _shift(level)))
                start += size
                break
    return out


@dataclass(frozen=True)
class AgentKeys:
    """The device keys of the agents in some ranges: the keys of the tree nodes covering them.

    Build the whole tree's with ``root(master)``, a pool's share with ``restrict`` (only its
    ranges: nothing about any other agent can be computed from it), and read the agents' keys
    with ``device``, ``coins`` and ``data``. Serialises to plain lists (``to_list``) for key
    files and for handing to a process.
    """

    nodes: tuple[Node, ...]
    #: the device keys of one range, computed already: (first agent, k0s, k1s), the same keys
    #: the nodes give (``with_devices``); ``for_range`` then derives only the coin and data keys
    devices: tuple[int, np.ndarray, np.ndarray] | None = field(default=None, repr=False,
                                                              compare=False)
    _starts: np.ndarray = field(init=False, repr=False, compare=False)
    _stops: np.ndarray = field(init=False, repr=False, compare=False)
    #: the covered ranges (``ranges``), joined once when the keys are built
    _ranges: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    #: the ranges' first agents, for ``covers``'s bisection
    _range_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    #: the nodes' levels and keys as arrays (``_descend``)
    _levels: np.ndarray = field(init=False, repr=False, compare=False)
    _k0s: np.ndarray = field(init=False, repr=False, compare=False)
    _k1s: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = tuple(sorted(self.nodes, key=lambda n: n.start))
        starts = [n.index << _shift(n.level) for n in nodes]
        stops = [(n.index + 1) << _shift(n.level) for n in nodes]
        for i in range(1, len(nodes)):
            if starts[i] < stops[i - 1]:
                raise ValueError(f"overlapping key nodes: [{starts[i - 1]}, {stops[i - 1]}) "
                                 f"and [{starts[i]}, {stops[i]})")
        joined: list[list[int]] = []
        for a, b in zip(starts, stops, strict=True):
            if joined and joined[-1][1] == a:
                joined[-1][1] = b
            else:
                joined.append([a, b])
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "_starts", np.array(starts, dtype=np.int64))
        object.__setattr__(self, "_stops", np.array(stops, dtype=np.int64))
        object.__setattr__(self, "_ranges", tuple((a, b) for a, b in joined))
        object.__setattr__(self, "_range_starts", tuple(a for a, _ in joined))
        object.__setattr__(self, "_levels", np.array([n.level for n in nodes], dtype=np.int64))
        object.__setattr__(self, "_k0s", np.array([n.k0 for n in nodes], dtype=np.uint64))
        object.__setattr__(self, "_k1s", np.array([n.k1 for n in nodes], dtype=np.uint64))

    def with_devices(self, start: int, d0: np.ndarray, d1: np.ndarray) -> AgentKeys:
        """The same keys, with agents ``start ..``'s device keys ``(d0, d1)`` already computed
        (they must be the ones these nodes give: the orchestrator derives a sweep's device keys
        once and hands each pool its block's)."""
        if not self.covers(start, start + len(d0)):
            raise KeyError(f"device keys of agents [{start}, {start + len(d0)}) that these keys "
                           "do not cover")
        return replace(self, devices=(int(start), d0, d1))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the nodes alone (the device keys are a cache, derived again)."""
        return (AgentKeys, (self.nodes,))

    @classmethod
    def root(cls, master: bytes) -> AgentKeys:
        """Every agent's keys: the roots of the forest of the master secret ``master`` (keyed
        by its first 128 bits, ``root_words``), one tree per 2^32 agents."""
        return _forest_keys(cls, bytes(master[:16]))

    def ranges(self) -> list[tuple[int, int]]:
        """The agents covered, as disjoint ranges [start, stop) (adjacent nodes joined)."""
        return list(self._ranges)

    def covers(self, start: int, stop: int) -> bool:
        """Whether every agent of ``[start, stop)`` is covered."""
        if start >= stop:
            return True
        i = bisect_right(self._range_starts, start) - 1  # the last range starting by ``start``
        return i >= 0 and stop <= self._ranges[i][1]

    def restrict(self, ranges: Iterable[tuple[int, int]]) -> AgentKeys:
        """The keys of exactly the agents in ``ranges`` (each inside what this covers): the
        nodes covering them, derived from this one's. Holding the result, a party can compute
        those agents' keys and nothing about any other agent."""
        merged: list[list[int]] = []
        for a, b in sorted((int(a), int(b)) for a, b in ranges if int(b) > int(a)):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        want = sorted(node for a, b in merged for node in cover(a, b))
        if not want:
            return AgentKeys(())
        levels = np.array([lv for lv, _ in want])
        starts = np.array([i << _shift(lv) for lv, i in want], dtype=np.int64)
        k0, k1 = self._descend(starts, levels)
        return AgentKeys(tuple(Node(int(lv), int(i), int(a), int(b))
                               for (lv, i), a, b in zip(want, k0.tolist(), k1.tolist(),
                                                        strict=True)))

    def _descend(self, ids: np.ndarray, target: np.ndarray | int
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The keys of the ancestors at level ``target`` (one per id, or one level for all)
        of agents ``ids``: from the covering node down, each distinct ancestor computed once.
        ``ids`` must be sorted."""
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        target = np.broadcast_to(np.asarray(target, dtype=np.int64), (n,))
        at = np.searchsorted(self._starts, ids, side="right") - 1
        inside = at >= 0
        inside[inside] &= ids[inside] < self._stops[at[inside]]
        if not inside.all():
            bad = ids[~inside]
            raise KeyError(f"these keys do not cover agents {_show(bad)} (they cover "
                           f"{_show_ranges(self.ranges())})")
        lv = self._levels[at]
        if (lv > target).any():
            raise KeyError("a requested node lies above the nodes these keys hold")
        k0 = self._k0s[at]
        k1 = self._k1s[at]
        for level in range(1, LEVELS + 1):
            sel = np.flatnonzero((lv < level) & (target >= level))
            if not len(sel):
                continue
            anc = ids[sel] >> _shift(level)
            c = anc & ((1 << LEVEL_BITS) - 1)
            if level < LEVELS and len(sel) > 1:  # distinct ancestors once (ids sorted)
                first = np.flatnonzero(np.r_[True, anc[1:] != anc[:-1]])
                c0, c1 = _children(k0[sel[first]], k1[sel[first]], level, c[first])
                runs = np.diff(np.r_[first, len(sel)])
                k0[sel], k1[sel] = np.repeat(c0, runs), np.repeat(c1, runs)
            else:
                k0[sel], k1[sel] = _children(k0[sel], k1[sel], level, c)
            lv[sel] = level
        return k0, k1

    def device(self, agents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Agents' 128-bit device keys, as two uint64 arrays (KeyError for an agent these keys
        do not cover)."""
        agents = np.asarray(agents, dtype=np.int64).reshape(-1)
        if len(agents) > 1 and (np.diff(agents) < 0).any():  # the descent wants sorted ids
            order = np.argsort(agents, kind="stable")
            k0, k1 = self._descend(agents[order], LEVELS)
            back = np.empty_like(order)
            back[order] = np.arange(len(order))
            return k0[back], k1[back]
        return self._descend(agents, LEVELS)

    def coins(self, agents: np.ndarray, tag: int | np.ndarray,
              device: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Agents' 64-bit coin keys in the run tagged ``tag`` (one tag, or one per agent);
        ``device``: their device keys, if already computed."""
        d0, d1 = device if device is not None else self.device(agents)
        return prf(d0, d1, key_message(tag, len(d0), False))

    def data(self, agents: np.ndarray, tag: int | np.ndarray,
             device: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Agents' 64-bit data keys in the data set tagged ``tag``."""
        d0, d1 = device if device is not None else self.device(agents)
        return prf(d0, d1, key_message(tag, len(d0), True))

    def for_range(self, start: int, stop: int, coin_tag: int | None = None,
                  data_tag: int | None = None, device: bool = False
                  ) -> dict[str, np.ndarray]:
        """The keys of agents ``[start, stop)``, the fast way for a contiguous block: ``"coins"``
        (with ``coin_tag``), ``"data"`` (with ``data_tag``) and ``"device0"``, ``"device1"``
        (with ``device``), each a uint64 array of ``stop - start``; the same values as
        ``coins``, ``data`` and ``device`` give. KeyError where these keys do not cover the
        block."""
        n = stop - start
        want = {"device0": device, "device1": device, "coins": coin_tag is not None,
                "data": data_tag is not None}
        out = {k: np.empty(n, dtype=np.uint64) for k, w in want.items() if w}
        if n <= 0:
            return out
        if not self.covers(start, stop):
            raise KeyError(f"these keys do not cover agents [{start}, {stop}) (they cover "
                           f"{_show_ranges(self.ranges())})")
        if self.devices is not None:
            first, c0, c1 = self.devices
            if first <= start and stop <= first + len(c0):
                d0, d1 = c0[start - first:stop - first], c1[start - first:stop - first]
                if device:
                    out["device0"][...], out["device1"][...] = d0, d1
                if coin_tag is not None:
                    out["coins"] = prf_tag(d0, d1, int(key_message(coin_tag, 1, False)[0]))
                if data_tag is not None:
                    out["data"] = prf_tag(d0, d1, int(key_message(data_tag, 1, True)[0]))
                return out
        # the agents' parents (level LEVELS - 1) that lie in the block, from every node above
        # them, one level at a time for all nodes at once; single agents' nodes apart
        idx3, p0, p1 = [], [], []
        cur_i = np.zeros(0, dtype=np.int64)
        cur0 = cur1 = np.zeros(0, dtype=np.uint64)
        # the nodes that reach into the block: sorted and disjoint, so one run of them (a
        # pool's keys hold hundreds of nodes, and it asks for a chunk of its agents at a time)
        near = self.nodes[int(np.searchsorted(self._stops, start, side="right")):
                          int(np.searchsorted(self._starts, stop, side="left"))]
        singles = [nd for nd in near if nd.level == LEVELS]
        for level in range(LEVELS):
            here = [nd for nd in near if nd.level == level]
            cur_i = np.concatenate([cur_i, np.array([nd.index for nd in here], dtype=np.int64)])
            cur0 = np.concatenate([cur0, np.array([nd.k0 for nd in here], dtype=np.uint64)])
            cur1 = np.concatenate([cur1, np.array([nd.k1 for nd in here], dtype=np.uint64)])
            if level == LEVELS - 1:
                idx3, p0, p1 = cur_i, cur0, cur1
                break
            if not len(cur_i):
                continue
            # each node's children that reach into the block
            lo = np.maximum(cur_i << LEVEL_BITS, start >> _shift(level + 1))
            hi = np.minimum((cur_i << LEVEL_BITS) + (1 << LEVEL_BITS) - 1,
                            (stop - 1) >> _shift(level + 1))
            counts = np.maximum(hi - lo + 1, 0)
            owner = np.repeat(np.arange(len(cur_i)), counts)
            child = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(
                np.cumsum(counts) - counts, counts))
            cur0, cur1 = _children(cur0[owner], cur1[owner], level + 1,
                                   child & ((1 << LEVEL_BITS) - 1))
            cur_i = child
        if len(idx3):
            order = np.argsort(idx3, kind="stable")
            idx3, p0, p1 = idx3[order], p0[order], p1[order]
            breaks = np.flatnonzero(np.diff(idx3) != 1) + 1
            for run in np.split(np.arange(len(idx3)), breaks):
                a = max(start, int(idx3[run[0]]) << LEVEL_BITS)
                b = min(stop, (int(idx3[run[-1]]) + 1) << LEVEL_BITS)
                part = {k: v[a - start:b - start] for k, v in out.items()}
                _leaves(p0[run], p1[run], a, b - a, coin_tag, data_tag, part)
        if singles:  # agents whose node is their own device key
            at = np.array([nd.index for nd in singles], dtype=np.int64) - start
            d0 = np.array([nd.k0 for nd in singles], dtype=np.uint64)
            d1 = np.array([nd.k1 for nd in singles], dtype=np.uint64)
            got = {k: np.empty(len(at), dtype=np.uint64) for k in out}
            _products(d0, d1, coin_tag, data_tag, got)
            for k, v in got.items():
                out[k][at] = v
        return out

    def to_list(self) -> list[list[int]]:
        """The nodes as ``[level, index, k0, k1]`` lists (a key file, a process argument)."""
        return [[n.level, n.index, n.k0, n.k1] for n in self.nodes]

    @classmethod
    def from_list(cls, items: Sequence[Sequence[int]]) -> AgentKeys:
        """The inverse of ``to_list``; ValueError for anything that is not such a list."""
        try:
            nodes = tuple(Node(int(lv), int(i), int(a), int(b)) for lv, i, a, b in items)
        except (TypeError, ValueError) as e:
            raise ValueError(f"not a list of [level, index, k0, k1] key nodes: {e}") from None
        for n in nodes:
            if not (0 <= n.level <= LEVELS
                    and 0 <= n.index < 1 << (LEVEL_BITS * n.level + TREE_BITS)
                    and 0 <= n.k0 < 1 << 64 and 0 <= n.k1 < 1 << 64):
                raise ValueError(f"not a key node: {[n.level, n.index]}")
        return cls(nodes)


def _products(d0: np.ndarray, d1: np.ndarray, coin_tag: int | None, data_tag: int | None,
              out: dict[str, np.ndarray]) -> None:
    """Write device keys ``(d0, d1)`` and the coin and data keys they give into ``out``."""
    if "device0" in out:
        out["device0"][...] = d0
        out["device1"][...] = d1
    if "coins" in out:
        out["coins"][...] = prf(d0, d1, key_message(coin_tag, len(d0), False))
    if "data" in out:
        out["data"][...] = prf(d0, d1, key_message(data_tag, len(d0), True))


def _leaves(pk0: np.ndarray, pk1: np.ndarray, first: int, n: int, coin_tag: int | None,
            data_tag: int | None, out: dict[str, np.ndarray]) -> None:
    """The keys of agents ``first .. first + n - 1`` from their parents' keys (``pk0[i]``,
    ``pk1[i]``: parent ``(first >> 8) + i``), into ``out`` (``AgentKeys.for_range``): in one
    compiled pass, or with numpy."""
    for tag in (coin_tag, data_tag):
        if tag is not None and not 0 <= int(tag) < 1 << TAG_BITS:
            raise ValueError(f"a tag has {TAG_BITS} bits")
    module = SIPHASH.module
    if module is not None:
        module.tree_leaves(np.ascontiguousarray(pk0), np.ascontiguousarray(pk1), int(first),
                           int(n), int(coin_tag or 0), int(data_tag or 0), out.get("device0"),
                           out.get("device1"), out.get("coins"), out.get("data"))
        return
    ids = np.arange(first, first + n, dtype=np.int64)
    runs = np.bincount((ids >> LEVEL_BITS) - (first >> LEVEL_BITS))
    d0, d1 = _children(np.repeat(pk0[:len(runs)], runs), np.repeat(pk1[:len(runs)], runs),
                       LEVELS, ids & ((1 << LEVEL_BITS) - 1))
    _products(d0, d1, coin_tag, data_tag, out)


def key_message(tag: int | np.ndarray, n: int, data: bool) -> np.ndarray:
    """The messages that read ``n`` agents' coin keys (``data`` False) or data keys (True)
    of ``tag`` (one tag, or one per agent) from their device keys."""
    t = np.asarray(tag, dtype=np.uint64)
    if (t >> np.uint64(TAG_BITS)).any():
        raise ValueError(f"a tag has {TAG_BITS} bits")
    t = np.broadcast_to(t, (n,))
    return t | _DATA if data else np.array(t, dtype=np.uint64)


def _show(ids: np.ndarray) -> str:
    ids = np.unique(ids)
    head = ", ".join(str(int(a)) for a in ids[:3])
    return f"[{head}{', ...' if len(ids) > 3 else ''}] ({len(ids)} agents)"


def _show_ranges(ranges: list[tuple[int, int]]) -> str:
    if not ranges:
        return "no agent"
    text = ", ".join(f"[{a}, {b})" for a, b in ranges[:4])
    return text + (", ..." if len(ranges) > 4 else "")
