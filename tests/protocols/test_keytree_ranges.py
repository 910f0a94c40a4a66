"""Tests of ``AgentKeys``'s ranges and ``covers``, joined once when the keys are built: the same
answers as joining the nodes on every call, over many sizes, pools and scattered ranges."""

from __future__ import annotations

import numpy as np
import pytest
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


# ---------------------------------------------------------------- beyond 2^32 agents: a forest

def test_agents_below_2_32_keep_the_keys_of_the_single_tree():
    """Tree 0 of the forest is the tree of before: its root from the same messages, so every
    agent below 2^32 has the device key the one-tree derivation gave (``device_rows`` from
    ``root_words`` is that derivation, level by level)."""
    from ldpsim.protocols.keytree import _split, device_rows, root_words

    root = AgentKeys.root(MASTER)
    ids = np.array([0, 1, 255, 256, 65535, 1 << 24, (1 << 32) - 2, (1 << 32) - 1])
    k0, k1 = root_words(*_split(MASTER))
    want = device_rows(np.repeat(k0, len(ids)), np.repeat(k1, len(ids)), ids)
    got = root.device(ids)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("start", [(1 << 32) - 300, 1 << 32, 10**10 - 1000, (1 << 40) - 700])
def test_ranges_across_and_beyond_2_32_are_keyed_like_single_agents(start):
    """Agents past 2^32 (up to 2^40, past 10^10) get keys: a range's fast path equals each
    agent's own descent, and a pool's restriction gives the same keys as the root's."""
    root = AgentKeys.root(MASTER)
    stop = min(start + 1000, 1 << 40)
    ids = np.arange(start, stop, dtype=np.int64)
    fast = root.for_range(start, stop, coin_tag=7, data_tag=9, device=True)
    d0, d1 = root.device(ids)
    assert np.array_equal(fast["device0"], d0) and np.array_equal(fast["device1"], d1)
    assert np.array_equal(fast["coins"], root.coins(ids, 7))
    sub = root.restrict([(start + 10, stop)])
    assert np.array_equal(sub.for_range(start + 10, stop, coin_tag=7)["coins"],
                          fast["coins"][10:])
    again = AgentKeys.from_list(sub.to_list())
    assert np.array_equal(again.device(ids[10:])[0], d0[10:])


def test_trees_are_distinct_and_the_forest_ends_at_2_40():
    """The same leaf of two trees has different keys (each tree's root is its own), and no
    key exists for agent 2^40."""
    root = AgentKeys.root(MASTER)
    a = root.device(np.array([5, (1 << 32) + 5, (2 << 32) + 5]))[0]
    assert len(set(a.tolist())) == 3
    with pytest.raises(ValueError):
        root.restrict([(1 << 40, (1 << 40) + 1)])
    with pytest.raises(ValueError):
        from ldpsim.protocols.keytree import device_rows
        device_rows(np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.array([1 << 32]))
