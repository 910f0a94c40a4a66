"""Tests of ``protocols.rng``: counter-based streams, Laplace by inverse CDF, Floyd sampling.
Every test runs with both SplitMix64 finalisers: the compiled one (``protocols/_rngc.c``, where
the install built it) and numpy's.

Statistical checks use fixed stream keys (so they are deterministic) and tolerances of 5
standard errors derived from the theoretical variance, or goodness-of-fit p-values > 1e-4.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
from ldpsim.protocols import rng
from scipy import stats

from tests.conftest import each_implementation

KEY = rng.stream_key(20240601, "agents")
Z = 5.0  # tolerance in standard errors
P_MIN = 1e-4  # smallest goodness-of-fit p-value accepted

_MASK64 = (1 << 64) - 1
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_C = 0xD1B54A32D192ED03


mixer = each_implementation(rng.MIXER)  # every test with each finaliser


# --------------------------------------------------------------------------- helpers


def _mix_int(x: int) -> int:
    """``rng.mix`` on one Python int (an independent re-implementation of SplitMix64)."""
    x &= _MASK64
    x ^= x >> 30
    x = (x * _M1) & _MASK64
    x ^= x >> 27
    x = (x * _M2) & _MASK64
    return x ^ (x >> 31)


def _unxorshift(y: int, s: int) -> int:
    """Invert ``x ^ (x >> s)`` on 64-bit words."""
    x = y
    for _ in range(64 // s + 1):
        x = y ^ (x >> s)
    return x & _MASK64


def _unmix(y: int) -> int:
    """Inverse of the SplitMix64 finaliser."""
    y = _unxorshift(y, 31)
    y = (y * pow(_M2, -1, 1 << 64)) & _MASK64
    y = _unxorshift(y, 27)
    y = (y * pow(_M1, -1, 1 << 64)) & _MASK64
    return _unxorshift(y, 30)


def _key_giving_bits(target: int, rnd: int = 0, index: int = 0) -> int:
    """A stream key whose draw for agent 0, round ``rnd``, index ``index`` is ``target``."""
    ctr = ((rnd << 32) + index + _C) & _MASK64
    agent_key = _unmix(target) ^ _mix_int(ctr)
    return _unmix(agent_key)  # agent 0: agent_key = mix(key + 0 * GOLDEN)


def _within(est: float, expected: float, se: float) -> bool:
    return abs(est - expected) <= Z * se


# --------------------------------------------------------------------------- mix / stream_key


def test_mix_matches_reference_splitmix64():
    xs = [0, 1, 2, 12345, 2**63, _MASK64, 0x9E3779B97F4A7C15]
    got = rng.mix(np.array(xs, dtype=np.uint64))
    assert [int(v) for v in got] == [_mix_int(x) for x in xs]


def test_mix_is_a_bijection_on_a_sample():
    xs = np.arange(100_000, dtype=np.uint64)
    assert len(np.unique(rng.mix(xs))) == len(xs)
    # and the helper used below really inverts it
    for x in (0, 7, 2**40 + 3, _MASK64):
        assert _unmix(_mix_int(x)) == x


def test_stream_key_stable_and_label_sensitive():
    k = rng.stream_key(7, "agents")
    assert k == rng.stream_key(7, "agents")
    assert isinstance(k, int) and 0 <= k < 2**64
    others = {rng.stream_key(8, "agents"), rng.stream_key(7, "curator"), rng.stream_key(7),
              rng.stream_key(7, "agents", 0), rng.stream_key(7, "a", "gents"),
              rng.stream_key(7, "agents", "x"), rng.stream_key(7, "x", "agents")}
    assert k not in others
    assert len(others) == 7


def test_stream_key_regression_value():
    # Pinned once (blake2b-64 of "1" + 0x1f + "agents", little-endian): a change here changes
    # every simulation result for a given seed.
    assert rng.stream_key(1, "agents") == 11813990527962902448


# --------------------------------------------------------------------------- determinism


def test_same_coordinates_same_bits():
    agents = np.array([0, 1, 5, 1_000_000])
    a = rng.bits(KEY, agents, 3, 16)
    b = rng.bits(KEY, agents.copy(), 3, 16)
    assert a.dtype == np.uint64 and a.shape == (4, 16)
    assert np.array_equal(a, b)


def test_offset_selects_the_same_indices():
    agents = np.arange(10)
    full = rng.bits(KEY, agents, 2, 12)
    part = rng.bits(KEY, agents, 2, 5, offset=4)
    assert np.array_equal(full[:, 4:9], part)
    assert np.array_equal(rng.uniform(KEY, agents, 2, 12)[:, 4:9],
                          rng.uniform(KEY, agents, 2, 5, offset=4))


def test_batched_equals_per_agent_bit_for_bit():
    agents = np.array([0, 3, 17, 2**20 + 5, 2**40 + 1, 999_999], dtype=np.int64)
    batch = rng.uniform(KEY, agents, 1, 9)
    for i, a in enumerate(agents):
        alone = rng.uniform(KEY, np.array([a]), 1, 9)
        assert np.array_equal(alone[0].view(np.uint64), batch[i].view(np.uint64))
        scalar = rng.uniform(KEY, a, 1, 9)  # a scalar agent id works as a block of one
        assert np.array_equal(scalar, alone)
    # order of agents in the block does not matter either
    perm = np.array([4, 0, 5, 2, 1, 3])
    assert np.array_equal(rng.uniform(KEY, agents[perm], 1, 9), batch[perm])


@pytest.mark.parametrize("change", ["key", "round", "agent", "index"])
def test_different_coordinates_give_unrelated_streams(change):
    n = 20_000
    agents = np.arange(n)
    base = rng.uniform(KEY, agents, 0, 2)[:, 0]
    if change == "key":
        other = rng.uniform(rng.stream_key(20240601, "curator"), agents, 0, 2)[:, 0]
    elif change == "round":
        other = rng.uniform(KEY, agents, 1, 2)[:, 0]
    elif change == "agent":
        other = rng.uniform(KEY, agents + n, 0, 2)[:, 0]
    else:
        other = rng.uniform(KEY, agents, 0, 2)[:, 1]
    assert not np.any(base == other)
    # Correlation of independent uniforms has standard error 1/sqrt(n).
    r = np.corrcoef(base, other)[0, 1]
    assert abs(r) <= Z / math.sqrt(n)


def test_adjacent_agents_and_indices_jointly_uniform():
    # chi-square on a 10 x 10 grid of (u[a, 0], u[a, 1]) and of (u[a, 0], u[a + 1, 0]).
    n = 50_000
    u = rng.uniform(KEY, np.arange(n + 1), 4, 2)
    for x, y in ((u[:-1, 0], u[:-1, 1]), (u[:-1, 0], u[1:, 0])):
        cells = (np.floor(x * 10) * 10 + np.floor(y * 10)).astype(np.int64)
        counts = np.bincount(cells, minlength=100)
        assert stats.chisquare(counts).pvalue > P_MIN


# --------------------------------------------------------------------------- uniforms


def test_uniform_in_open_interval_on_a_large_sample():
    u = rng.uniform(KEY, np.arange(100_000), 0, 10)
    assert u.dtype == np.float64
    assert u.min() > 0.0 and u.max() < 1.0


def test_uniform_extreme_bits_stay_inside_open_interval():
    # Construct keys whose 64 raw bits are all ones / all zeros: the extreme uniforms.
    top = _key_giving_bits(_MASK64)
    assert int(rng.bits(top, np.array([0]), 0, 1)[0, 0]) == _MASK64
    u_top = float(rng.uniform(top, np.array([0]), 0, 1)[0, 0])
    assert u_top < 1.0
    assert np.isfinite(rng.laplace_from_uniform(np.array([u_top]), 1.0)).all()
    bottom = _key_giving_bits(0)
    assert int(rng.bits(bottom, np.array([0]), 0, 1)[0, 0]) == 0
    u_bottom = float(rng.uniform(bottom, np.array([0]), 0, 1)[0, 0])
    assert u_bottom == 2.0**-54
    assert np.isfinite(rng.laplace_from_uniform(np.array([u_bottom]), 1.0)).all()


def test_uniform_is_the_midpoint_of_the_top_53_bits():
    # u = (x + 1/2) / 2^53 with x the top 53 bits, up to float64 rounding (half an ulp <= 2^-54).
    b = rng.bits(KEY, np.arange(1000), 0, 4)
    u = rng.uniform(KEY, np.arange(1000), 0, 4)
    x = (b >> np.uint64(11)).astype(object)  # exact integers
    assert np.abs(u - ((x * 2 + 1) / 2**54).astype(np.float64)).max() <= 2.0**-54


def test_uniform_mean_and_variance():
    u = rng.uniform(KEY, np.arange(50_000), 0, 4).ravel()
    n = u.size
    assert _within(u.mean(), 0.5, math.sqrt(1 / 12 / n))
    # E[(U - 1/2)^2] = 1/12, Var[(U - 1/2)^2] = 1/80 - 1/144 = 1/180.
    assert _within(((u - 0.5) ** 2).mean(), 1 / 12, math.sqrt(1 / 180 / n))


def test_uniform_ks_and_chisquare():
    u = rng.uniform(KEY, np.arange(20_000), 7, 5).ravel()
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    counts = np.bincount(np.floor(u * 50).astype(np.int64), minlength=50)
    assert stats.chisquare(counts).pvalue > P_MIN


# --------------------------------------------------------------------------- Laplace


def test_laplace_from_uniform_is_the_inverse_cdf():
    u = np.array([1e-4, 0.01, 0.25, 0.5, 0.6, 0.9, 0.9999])
    for b in (0.3, 1.0, 4.0):
        x = rng.laplace_from_uniform(u, b)
        assert np.allclose(stats.laplace.cdf(x, scale=b), u, rtol=1e-9, atol=0)
        assert np.all(np.diff(x) > 0)
    assert rng.laplace_from_uniform(np.array([0.5]), 2.0)[0] == 0.0


def test_laplace_from_uniform_array_scale():
    u = np.array([0.1, 0.9, 0.3])
    scale = np.array([1.0, 2.0, 3.0])
    expected = [rng.laplace_from_uniform(np.array([ui]), si)[0]
                for ui, si in zip(u, scale, strict=True)]
    assert np.array_equal(rng.laplace_from_uniform(u, scale), expected)


@pytest.mark.parametrize("b", [0.5, 1.7])
def test_laplace_moments(b):
    u = rng.uniform(KEY, np.arange(50_000), 0, 4).ravel()
    x = rng.laplace_from_uniform(u, b)
    n = x.size
    # Laplace(0, b): variance 2 b^2, E[X^4] = 24 b^4 so Var[X^2] = 20 b^4.
    assert _within(x.mean(), 0.0, math.sqrt(2 * b**2 / n))
    assert _within((x**2).mean(), 2 * b**2, math.sqrt(20 * b**4 / n))


def test_laplace_ks():
    u = rng.uniform(KEY, np.arange(40_000), 3, 1).ravel()
    x = rng.laplace_from_uniform(u, 1.3)
    assert stats.kstest(x, stats.laplace(scale=1.3).cdf).pvalue > P_MIN


# --------------------------------------------------------------------------- Floyd


def _subset_codes(idx: np.ndarray) -> np.ndarray:
    """Encode each row's set of indices as a bitmask."""
    return (np.int64(1) << idx).sum(axis=1)


def test_distinct_indices_are_distinct_and_in_range():
    u = rng.uniform(KEY, np.arange(5000), 0, 7)
    idx = rng.distinct_indices(u, 10)
    assert idx.dtype == np.int64 and idx.shape == (5000, 7)
    assert idx.min() >= 0 and idx.max() < 10
    assert all(len(set(row)) == 7 for row in idx.tolist())


def test_distinct_indices_full_population_is_a_permutation():
    u = rng.uniform(KEY, np.arange(500), 0, 6)
    idx = rng.distinct_indices(u, 6)
    assert np.array_equal(np.sort(idx, axis=1), np.tile(np.arange(6), (500, 1)))


def test_distinct_indices_rows_depend_on_own_uniforms_only():
    u = rng.uniform(KEY, np.arange(100), 0, 3)
    full = rng.distinct_indices(u, 20)
    for i in (0, 41, 99):
        assert np.array_equal(rng.distinct_indices(u[i : i + 1], 20)[0], full[i])


def test_distinct_indices_edge_uniforms():
    u = np.array([[1.0 - 2.0**-53, 1.0 - 2.0**-53, 1.0 - 2.0**-53], [2.0**-54] * 3])
    idx = rng.distinct_indices(u, 5)
    assert all(len(set(r)) == 3 and max(r) < 5 for r in idx.tolist())


def test_distinct_indices_one_per_row_is_floor_of_u_times_population():
    u = np.vstack([rng.uniform(KEY, np.arange(2000), 4, 1), [[1.0 - 2.0**-53], [2.0**-54]]])
    for population in (1, 2, 45, 1000):
        idx = rng.distinct_indices(u, population)
        assert idx.dtype == np.int64 and idx.shape == (len(u), 1)
        want = [min(math.floor(x * population), population - 1) for x in u[:, 0].tolist()]
        assert idx[:, 0].tolist() == want


def test_distinct_indices_too_many_raises():
    with pytest.raises(ValueError):
        rng.distinct_indices(np.full((2, 4), 0.5), 3)


@pytest.mark.parametrize("population,k", [(5, 2), (5, 3), (6, 1)])
def test_distinct_indices_every_subset_equally_likely(population, k):
    n = 30_000
    u = rng.uniform(KEY, np.arange(n), 11, k)
    codes = _subset_codes(rng.distinct_indices(u, population))
    subsets = [sum(1 << i for i in c) for c in itertools.combinations(range(population), k)]
    counts = np.array([(codes == s).sum() for s in subsets])
    assert counts.sum() == n  # nothing outside the K-subsets
    assert stats.chisquare(counts).pvalue > P_MIN


# --------------------------------------------------------------------------- party generator


def test_party_generator_deterministic_per_key():
    a = rng.party_generator(KEY).random(8)
    b = rng.party_generator(KEY).random(8)
    c = rng.party_generator(KEY + 1).random(8)
    assert np.array_equal(a, b)
    assert not np.any(a == c)


def test_allocator_tuning_takes_effect_on_glibc():
    import platform

    from ldpsim.simulator.backends import alloc

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("allocator tuning is glibc-only")
    assert alloc.keep_freed_memory() is True
    # and the draws do not depend on it (the tuning only changes where memory comes from)
    assert np.array_equal(rng.bits(KEY, np.arange(5000), 0, 10)[4321],
                          rng.bits(KEY, np.array([4321]), 0, 10)[0])


def test_allocator_tuning_is_opt_in(monkeypatch):
    from ldpsim.simulator.backends import alloc

    calls = []
    monkeypatch.setattr(alloc, "keep_freed_memory", lambda: calls.append(1) or True)
    for unset in (None, "0", "", "yes"):
        if unset is None:
            monkeypatch.delenv(alloc.TUNE_MALLOC_ENV, raising=False)
        else:
            monkeypatch.setenv(alloc.TUNE_MALLOC_ENV, unset)
        assert alloc.tune_if_requested() is False
    assert calls == []
    monkeypatch.setenv(alloc.TUNE_MALLOC_ENV, "1")
    assert alloc.tune_if_requested() is True and calls == [1]
    # ``ldpsim bench`` asks for it, for itself and for the children it starts (the environment)
    monkeypatch.setenv(alloc.TUNE_MALLOC_ENV, "0")  # restored after the test
    assert alloc.request_tuning() is True and calls == [1, 1]
    assert os.environ[alloc.TUNE_MALLOC_ENV] == "1"


def test_one_key_per_agent_gives_each_agent_its_own_streams():
    """A block whose rows carry their own agent keys draws, row by row, what each agent draws
    alone with its key (the audit runs many runs' copies of one agent as one block), and the
    key is used as it is: a stream key's agent ``a`` draws what an agent whose own key is
    ``agent_keys(stream key, a)`` draws."""
    seeds = range(300)
    keys = np.array([rng.stream_key(s, "agents") for s in seeds], dtype=np.uint64)
    agents = np.arange(300, dtype=np.int64) % 7 + 3
    many = rng.uniform(keys, agents, 2, 3, offset=1)
    one_by_one = np.concatenate([rng.uniform(np.array([k]), [a], 2, 3, offset=1)
                                 for k, a in zip(keys, agents, strict=True)])
    assert np.array_equal(many, one_by_one)
    assert np.array_equal(rng.agent_keys(keys, agents), keys)  # one per agent: itself
    derived = rng.agent_keys(KEY, agents)  # a stream key: the agents' keys it gives
    assert np.array_equal(rng.bits(derived, agents, 0, 2), rng.bits(KEY, agents, 0, 2))
    assert np.array_equal(rng.bits(keys, agents, 0, 2),
                          np.concatenate([rng.bits(np.array([k]), [a], 0, 2)
                                          for k, a in zip(keys, agents, strict=True)]))
    # the agent id plays no part once the key is the agent's own
    assert np.array_equal(rng.bits(keys, agents + 1, 0, 2), rng.bits(keys, agents, 0, 2))
    wide = rng.bits(keys, agents, 1, 400)  # 64 agents per pass: the keys are cut with them
    assert np.array_equal(wide[200], rng.bits(keys[200:201], [agents[200]], 1, 400)[0])
    with pytest.raises(ValueError, match="one key per agent"):
        rng.uniform(keys[:5], agents, 0, 1)
    derived = rng.stream_key(keys[:4], "split", 2)
    assert derived.dtype == np.uint64
    assert derived.tolist() == [rng.stream_key(int(k), "split", 2) for k in keys[:4]]


# --------------------------------------------------------------------------- the two finalisers


@pytest.mark.parametrize("width", [1, 2, 7, 40])
def test_both_finalisers_give_the_same_bits(mixer, width):
    """The compiled finaliser against numpy's passes: mix, bits and uniforms, one stream key
    or one per agent, arrays of any length and layout."""
    agents = np.concatenate([np.arange(5000), [2**40, 2**62 + 3]]).astype(np.int64)
    keys = rng.agent_keys(KEY, agents[::-1].copy())
    words = rng.bits(KEY, agents, 3, 4).T  # a transposed (non-contiguous) view
    got = (rng.mix(words), rng.bits(KEY, agents, 2, width, offset=5),
           rng.bits(keys, agents, 0, width), rng.uniform(KEY, agents, 7, width))
    other = "numpy" if mixer == "compiled" else mixer
    rng.MIXER.use(other)
    try:
        want = (rng.mix(words), rng.bits(KEY, agents, 2, width, offset=5),
                rng.bits(keys, agents, 0, width), rng.uniform(KEY, agents, 7, width))
    finally:
        rng.MIXER.use(mixer)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_the_compiled_finaliser_refuses_bad_buffers(mixer):
    if mixer != "compiled":
        pytest.skip("the compiled finaliser's own arguments")
    with pytest.raises(ValueError, match="whole number"):
        rng.MIXER.module.mix_inplace(bytearray(12))
    with pytest.raises(BufferError):
        rng.MIXER.module.mix_inplace(b"\0" * 16)  # read-only
    with pytest.raises(ValueError, match="len\\(keys\\) x len\\(ctr\\)"):
        rng.MIXER.module.mix_xor(np.zeros(3, np.uint64), np.zeros(2, np.uint64),
                             np.zeros(5, np.uint64))


def test_distinct_indices_in_a_narrower_dtype_are_the_same_indices():
    u = rng.uniform(rng.stream_key(4, "x"), np.arange(500), 0, 3)
    wide = rng.distinct_indices(u, 32_768)
    narrow = rng.distinct_indices(u, 32_768, np.int16)
    assert narrow.dtype == np.int16 and np.array_equal(narrow, wide)
    with pytest.raises(ValueError, match="int16 cannot hold indices up to 32768"):
        rng.distinct_indices(u, 32_769, np.int16)


def test_bits_at_gives_each_row_the_word_at_its_own_index(mixer):
    """``bits_at`` reads draw ``idx[i, j]`` of agent i: the word ``bits`` has at that index,
    whatever the other rows' indices (one key or one per agent)."""
    agents = np.array([3, 9, 27, 81], dtype=np.int64)
    ref = rng.bits(KEY, agents, 5, 40)
    idx = np.array([[0, 39, 7], [2, 2, 2], [38, 1, 0], [11, 12, 13]], dtype=np.uint64)
    got = rng.bits_at(KEY, agents, 5, idx)
    assert np.array_equal(got, np.take_along_axis(ref, idx.astype(np.int64), axis=1))
    assert np.array_equal(rng.bits_at(KEY, agents, 5, idx[:, 1]), got[:, 1])
    alone = rng.bits_at(KEY, agents[2:3], 5, idx[2:3])
    assert np.array_equal(alone, got[2:3])
    with pytest.raises(ValueError, match="one row of draw indices per agent"):
        rng.bits_at(KEY, agents, 5, idx[:2])
