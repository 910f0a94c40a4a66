"""Tests of ``protocols.keys``: the device-key tree, its restriction to ranges, the coin and data
keys, and the public tags. Every test runs with both SipHash implementations (compiled where
the install built it, and numpy's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import keys as K
from ldpsim.protocols import prf

from tests.conftest import each_implementation

implementation = each_implementation(prf.SIPHASH)

MASTER = bytes(range(32))


def test_cover_is_an_exact_partition_with_few_nodes():
    g = np.random.Generator(np.random.Philox(3))
    for _ in range(200):
        a, b = sorted(int(x) for x in g.integers(0, 1 << 26, 2))
        nodes = K.cover(a, b)
        spans = sorted((i << (32 - 8 * lv), (i + 1) << (32 - 8 * lv)) for lv, i in nodes)
        pos = a
        for lo, hi in spans:  # disjoint, adjacent, exactly [a, b)
            assert lo == pos
            pos = hi
        assert pos == b or (a == b and not nodes)
        assert len(nodes) <= 2 * 255 * 4 + 1
    assert K.cover(0, 1 << 32) == [(0, 0)]
    assert K.cover(5, 6) == [(4, 5)]
    with pytest.raises(ValueError, match="outside"):
        K.cover(-1, 3)


def test_a_restriction_computes_its_agents_keys_and_no_others():
    root = K.AgentKeys.root(MASTER)
    sub = root.restrict([(1000, 70_000), (300_000, 300_005)])
    assert sub.ranges() == [(1000, 70_000), (300_000, 300_005)]
    ids = np.r_[np.arange(1000, 70_000, 997), [300_000, 300_004]]
    for a, b in zip(sub.device(ids), root.device(ids), strict=True):
        assert np.array_equal(a, b)
    for outside in (999, 70_000, 299_999, 300_005, 0, 2**31):
        with pytest.raises(KeyError, match="do not cover"):
            sub.device([outside])
    # nothing in the restriction is an ancestor of an agent outside it: every node lies inside
    for node in sub.nodes:
        assert any(lo <= node.start and node.stop <= hi for lo, hi in sub.ranges())
    with pytest.raises(KeyError):
        sub.restrict([(0, 1001)])
    again = sub.restrict([(2000, 3000)])
    assert np.array_equal(again.device(np.arange(2000, 3000))[0],
                          root.device(np.arange(2000, 3000))[0])


def test_overlapping_ranges_are_merged():
    root = K.AgentKeys.root(MASTER)
    sub = root.restrict([(0, 500), (0, 5000), (250, 700), (5000, 5001)])
    assert sub.ranges() == [(0, 5001)]


def test_for_range_gives_the_per_agent_keys():
    root = K.AgentKeys.root(MASTER)
    for start, stop in ((0, 1), (255, 257), (1000, 70_123), (2**24 - 3, 2**24 + 300)):
        sub = root.restrict([(start, stop)])
        ids = np.arange(start, stop)
        d = root.device(ids)
        got = sub.for_range(start, stop, coin_tag=7, data_tag=11, device=True)
        assert np.array_equal(got["device0"], d[0]) and np.array_equal(got["device1"], d[1])
        assert np.array_equal(got["coins"], root.coins(ids, 7, d))
        assert np.array_equal(got["data"], root.data(ids, 11, d))
        assert np.array_equal(sub.for_range(start, stop, coin_tag=7)["coins"], got["coins"])
    with pytest.raises(KeyError, match="do not cover"):
        root.restrict([(10, 20)]).for_range(5, 15, coin_tag=1)


def test_coins_and_data_are_different_keys_per_run_and_data_set():
    root = K.AgentKeys.root(MASTER)
    ids = np.arange(50)
    c1, c2, d1 = root.coins(ids, 1), root.coins(ids, 2), root.data(ids, 1)
    assert len(set(c1.tolist()) | set(c2.tolist()) | set(d1.tolist())) == 150
    assert np.array_equal(root.coins(ids, np.full(50, 1)), c1)  # one tag per agent
    with pytest.raises(ValueError, match="63 bits"):
        root.coins(ids, 1 << 63)


def test_the_curators_coins_are_fresh_per_run_and_come_from_the_master():
    """A central mechanism's noise key: one per run id and master, and what the curator
    process gets, beside (not instead of) its public stream key."""
    from ldpsim.simulator.session.seeding import curator_config, public_config, run_id

    a, b = K.Secrets(b"A" * 32), K.Secrets(b"B" * 32)
    cfg = {"protocol": "dp_kwiksort", "params": {"epsilon": 0.5}, "seed": 7, "pools": 2,
           "data": {"kind": "mallows", "n": 50, "m": 5}, "collusion": {"colluders": 0}}
    other = {**cfg, "params": {"epsilon": 2.0}}
    assert run_id(cfg) != run_id(other)
    coins = {a.curator_coins(run_id(c)) for c in (cfg, other)} | {b.curator_coins(run_id(cfg))}
    assert len(coins) == 3  # per run, per master
    got = curator_config(cfg, a)["keys"]
    assert got["coins"] == a.curator_coins(run_id(cfg)) and got["coins"] != got["curator"]
    assert got["coins"] not in public_config(cfg).values()
    assert curator_config(cfg, a)["keys"]["curator"] == curator_config(other, b)["keys"]["curator"]


def test_the_keys_bits_look_uniform_and_independent_across_neighbours():
    """A sanity check of the keys as bits (a PRF's outputs are indistinguishable from random;
    this only catches gross mistakes such as a constant or a key that equals its id): the
    share of 1 bits in the coin keys and in the XOR of neighbours' keys, within 5 standard
    errors of 1/2, and every key distinct."""
    root = K.AgentKeys.root(MASTER)
    c = root.for_range(0, 50_000, coin_tag=3)["coins"]
    assert len(np.unique(c)) == len(c)
    for words in (c, c[1:] ^ c[:-1]):
        bits = np.unpackbits(words.view(np.uint8))
        se = math.sqrt(0.25 / len(bits))
        assert abs(bits.mean() - 0.5) < 5 * se


def test_serialised_keys_round_trip_and_bad_ones_are_refused():
    sub = K.AgentKeys.root(MASTER).restrict([(10, 700)])
    again = K.AgentKeys.from_list(sub.to_list())
    assert np.array_equal(again.device(np.arange(10, 700))[0], sub.device(np.arange(10, 700))[0])
    # the forest has 256 trees: level l holds indices below 2^(8 l + 8), no more
    for bad in ([[1, 2, 3]], [["x", 0, 1, 2]], [[9, 0, 1, 2]], [[1, 1 << 16, 1, 2]],
                [[0, 256, 1, 2]], [[4, 1 << 40, 1, 2]], 5):
        with pytest.raises(ValueError):
            K.AgentKeys.from_list(bad)
    with pytest.raises(ValueError, match="overlapping"):
        K.AgentKeys(tuple(sub.nodes) + (sub.nodes[0],))


def test_tags_are_canonical_and_distinct():
    base = ("ldp_kwiksort_rr", {"epsilon": 1}, {"kind": "mallows", "n": 100})
    t = K.run_tag(5, *base)
    assert t == K.run_tag(5, "ldp_kwiksort_rr", {"epsilon": 1.0}, {"kind": "mallows", "n": 100.0})
    others = {K.run_tag(6, *base), K.run_tag(5, "ldp_kwiksort_lap", *base[1:]),
              K.run_tag(5, base[0], {"epsilon": 2}, base[2]),
              K.run_tag(5, base[0], base[1], {"kind": "mallows", "n": 101})}
    assert t not in others and len(others) == 4
    seeds = np.array([0, 5, 2**62, 2**63 + 7], dtype=np.uint64)
    assert K.run_tags(seeds, *base).tolist() == [K.run_tag(int(s), *base) for s in seeds]
    assert K.data_tags(seeds).tolist() == [K.data_tag(int(s)) for s in seeds]
    assert all(0 <= x < 1 << 63 for x in K.run_tags(seeds, *base).tolist())
    assert K.data_tag(5) != K.data_tag(6) and K.data_tag(2**70) == K.data_tag(2**70)


def test_the_keys_of_many_seeds_at_once_are_each_seeds_keys():
    seeds = np.array([1, 2, 3, 10**12], dtype=np.uint64)
    d0, d1 = K.device_rows(*K.root_words(*K.master_words_of_seeds(seeds)),
                           np.array([7, 7, 900, 2**20]))
    for i, (s, a) in enumerate(zip(seeds.tolist(), (7, 7, 900, 2**20), strict=True)):
        one = K.Secrets.of_seed(s).agents.device([a])
        assert (int(d0[i]), int(d1[i])) == (int(one[0][0]), int(one[1][0]))


def test_the_coin_and_data_keys_of_many_runs_are_each_runs():
    """``seed_run_keys``: every agent's coin and data keys in many seed-keyed runs at once,
    as each run's own ``Secrets.of_seed`` gives them."""
    seeds = np.array([0, 1, 77, 2**62 + 3, 2**63 - 1, 2**63 + 9, 2**64 - 1], dtype=np.uint64)
    tags = K.run_tags(seeds, "p", {"epsilon": 1.0}, {"kind": "k", "n": 13})
    coins, data = K.seed_run_keys(seeds, 13, tags)
    assert coins.shape == data.shape == (len(seeds), 13) and coins.dtype == np.uint64
    agents = np.arange(13)
    for i, seed in enumerate(seeds.tolist()):
        sec = K.Secrets.of_seed(seed)
        assert coins[i].tolist() == sec.agents.coins(agents, int(tags[i])).tolist()
        assert data[i].tolist() == sec.data_keys(seed).range(0, 13).tolist()
    assert K.seed_run_keys(seeds[:0], 13, tags[:0])[0].shape == (0, 13)


def test_data_keys_read_a_block_whichever_way():
    keys = K.DataKeys.of_seed(4)
    assert np.array_equal(keys.range(100, 200), keys.of(np.arange(100, 200)))
    pick = np.array([150, 3, 199])
    assert np.array_equal(keys.of(pick), keys.range(0, 200)[pick])
    cached = keys.with_cache(100, keys.range(100, 200))
    assert np.array_equal(cached.range(120, 130), keys.range(120, 130))
    assert np.array_equal(cached.range(0, 10), keys.range(0, 10))  # outside the cache
    with pytest.raises(TypeError):
        K.as_data_keys("seven")


def test_a_master_secret_has_128_bits_at_least():
    with pytest.raises(ValueError, match="128 bits"):
        K.Secrets(b"short")
    assert K.Secrets.of_seed(3).from_seed and not K.Secrets(MASTER).from_seed


def test_device_keys_handed_over_give_the_same_keys_and_are_not_pickled():
    """A pool handed its block's device keys (the orchestrator derives a sweep's once) derives
    the same coin and data keys as from its nodes; pickled (a Dask task), only the nodes go."""
    import pickle

    root = K.AgentKeys.root(MASTER)
    whole = root.for_range(0, 5000, device=True)
    sub = root.restrict([(1000, 4000)])
    fast = sub.with_devices(1000, whole["device0"][1000:4000], whole["device1"][1000:4000])
    for a, b in ((1000, 4000), (1500, 2000)):
        want = sub.for_range(a, b, coin_tag=9, data_tag=10)
        got = fast.for_range(a, b, coin_tag=9, data_tag=10, device=True)
        assert np.array_equal(got["coins"], want["coins"])
        assert np.array_equal(got["data"], want["data"])
        assert np.array_equal(got["device0"], whole["device0"][a:b])
    again = pickle.loads(pickle.dumps(fast))
    assert again.devices is None and again.nodes == fast.nodes
    with pytest.raises(KeyError):
        sub.with_devices(0, whole["device0"][:10], whole["device1"][:10])
