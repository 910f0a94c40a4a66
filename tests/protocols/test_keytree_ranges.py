"""Tests of ``AgentKeys``'s ranges and ``covers``, joined once when the keys are built: the same
answers as joining the nodes on every call, over many sizes, pools and scattered ranges."""

from __future__ import annotations

import numpy as np
from ldpsim.protocols import keys as K
from ldpsim.protocols.keytree import AgentKeys, Node

MASTER = bytes(range(32))


def _joined(keys: AgentKeys) -> list[tuple[int, int]]:
    """The covered ranges joined node by node (how they were computed on every call)."""
    out: list[list[int]] = []
    for n in keys.nodes:
        if out and out[-1][1] == n.start:
            out[-1][1] = n.stop
        else:
            out.append([n.start, n.stop])
    return [(a, b) for a, b in out]


def _covers(keys: AgentKeys, start: int, stop: int) -> bool:
    return start >= stop or any(a <= start and stop <= b for a, b in _joined(keys))


def _of_ranges(ranges: list[tuple[int, int]]) -> AgentKeys:
    """Keys whose nodes exactly cover ``ranges`` (disjoint), with made-up key words."""
    nodes = [Node(lv, i, lv * 7 + 1, i + 3) for a, b in ranges for lv, i in K.cover(a, b)]
    return AgentKeys(tuple(reversed(nodes)))  # any order: the keys sort their nodes


def _check(keys: AgentKeys, g: np.random.Generator) -> None:
    want = _joined(keys)
    assert keys.ranges() == want
    keys.ranges().append((0, 0))  # a copy each call: the keys' own ranges stay as they are
    assert keys.ranges() == want
    edges = sorted({e for ab in want for e in ab} | {0, 1})
    probes = [(a, b) for a in edges for b in edges]
    probes += [(e + d, e + d2) for e in edges for d in (-1, 0, 1) for d2 in (-1, 1, 2)]
    hi = max(edges) + 2
    probes += [tuple(sorted(int(x) for x in g.integers(-1, hi, 2))) for _ in range(300)]
    probes += [(5, 3), (-3, -1), (-1, 2)]
    for a, b in probes:
        assert keys.covers(a, b) == _covers(keys, a, b), (a, b, want)


def test_the_ranges_and_covers_are_the_nodes_joined_over_many_sizes_and_pools():
    g = np.random.Generator(np.random.Philox(11))
    for n in (1, 2, 10, 100, 255, 256, 257, 500, 1000, 4097, 70_000, 1 << 17):
        for pools in (1, 2, 3, 4, 7):
            bounds = [n * p // pools for p in range(pools + 1)]
            blocks = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
            _check(_of_ranges(blocks), g)  # the whole population, in adjacent blocks
            for a, b in blocks:  # each pool's own block
                _check(_of_ranges([(a, b)]), g)
            _check(_of_ranges(blocks[::2]), g)  # every other pool: gaps between


def test_the_ranges_and_covers_of_scattered_ranges_and_restrictions():
    g = np.random.Generator(np.random.Philox(12))
    root = AgentKeys.root(MASTER)
    _check(root, g)
    _check(AgentKeys(()), g)
    for _ in range(60):
        cuts = np.unique(g.integers(0, 1 << 20, int(g.integers(2, 12))))
        ranges = [(int(a), int(b)) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
        _check(_of_ranges(ranges), g)
    for ranges in ([(1000, 70_000), (300_000, 300_005)], [(0, 500)], [(3, 4), (5, 9)]):
        _check(root.restrict(ranges), g)
        _check(root.restrict(ranges).with_devices(ranges[0][0], *root.device([ranges[0][0]])),
               g)
