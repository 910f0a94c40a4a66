"""The compiled discrete Laplace sampler's engines give the same values from the same words.

``protocols/_dlapc.c`` runs the state machine of ``protocols.mechanisms.dlap`` either stream
after stream (the stream engine, ``scalar=True``: the reference) or 16 streams side by side
with masks instead of branches and Bernoulli draws decided without dividing (the lane engine:
8 lanes a vector with AVX-512, 4 with AVX2, chosen at import by the CPU). Each test runs every
engine this CPU has (``use_engine``: on a CPU with AVX-512 the AVX2 engine as well) and
compares them. Every test is exact: the same z, the same words used, the same count of
streams past their limit, element for element, on fixed seeds; and for given words the numpy
state machine as well. Where the CPU has neither, and for streams limited to fewer than
3 words, every call runs the stream engine and the tests hold trivially.
"""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import rng
from ldpsim.protocols.mechanisms import dlap
from ldpsim.protocols.words import REGION, WORD_BASE

TWO64 = 1 << 64
SCALES = [1, 2, 1 << 10, 1 << 20, 1 << 32]
UNSET = np.iinfo(np.int64).min  # no value: |z| < 2^49

pytestmark = pytest.mark.skipif(
    dlap.DLAP.built is None or not hasattr(dlap.DLAP.built, "engine"),
    reason="the compiled sampler (with its two engines) was not built")


def _engines():
    """(name, scalar) of every way to run a call: ``scalar=True`` (the stream engine, the
    reference, under the name "streams"), and each engine this CPU runs made the one in use
    (the previous one restored after the last)."""
    before = dlap.DLAP.built.engine()
    try:
        yield "streams", True
        for name in dlap.DLAP.built.engines():
            dlap.DLAP.built.use_engine(name)
            yield f"engine {name}", False
    finally:
        dlap.DLAP.built.use_engine(before)


def _agents(keys: np.ndarray, rnd: int, first: int, cols: int, region: int, t: int
            ) -> dict[str, tuple[np.ndarray, int]]:
    """z and the count of streams past their region, by each engine."""
    out = {}
    for name, scalar in _engines():
        z = np.full((len(keys), cols), UNSET, dtype=np.int64)
        failed = dlap.DLAP.built.dlap_agents(keys, rnd, first, cols, region, t, z, scalar)
        out[name] = (z, failed)
    return out


def _given(words: np.ndarray, t: int, numpy: bool = True
           ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(z, words used) per row of ``words`` by each engine and (``numpy``) by numpy."""
    words = np.ascontiguousarray(words, dtype=np.uint64)
    out = {}
    for name, scalar in _engines():
        z = np.full(len(words), UNSET, dtype=np.int64)
        used = np.full(len(words), -7, dtype=np.int64)
        dlap.DLAP.built.dlap(words, words.shape[1], t, z, used, scalar)
        out[name] = (z, used)
    if numpy:
        out["numpy"] = dlap._kernel_numpy(words, t)
    return out


def _same(out: dict) -> None:
    first, *rest = out.values()
    for other in rest:
        for a, b in zip(first, other, strict=True):
            assert np.array_equal(a, b)


def test_the_engine_is_named():
    """The engine in use after import is the fastest this CPU runs; the stream engine runs
    everywhere."""
    built = dlap.DLAP.built
    engines = built.engines()
    assert engines[-1] == "streams" and set(engines) <= {"avx512", "avx2", "streams"}
    assert list(engines) == [e for e in ("avx512", "avx2", "streams") if e in engines]
    assert built.engine() == engines[0]


def test_an_engine_is_forced_and_restored():
    """``use_engine`` makes any engine this CPU runs the one in use and returns the one before;
    an unknown name is refused and changes nothing."""
    built = dlap.DLAP.built
    first = built.engine()
    try:
        for name in built.engines():
            before = built.engine()
            assert built.use_engine(name) == before and built.engine() == name
        with pytest.raises(ValueError, match="not one of"):
            built.use_engine("lanes")
        assert built.engine() == "streams"
    finally:
        built.use_engine(first)
    assert built.engine() == first


@pytest.mark.parametrize("t", SCALES)
def test_a_million_agents_streams_alike(t):
    """10^6 agents' streams of one column (the Laplace mechanism's usual block), every scale."""
    keys = rng.agent_keys(rng.stream_key(11, "lanes"), np.arange(1_000_000))
    out = _agents(np.ascontiguousarray(keys, dtype=np.uint64), 3, WORD_BASE, 1, REGION, t)
    _same(out)
    assert out["streams"][1] == 0 and (out["streams"][0] != UNSET).all()


@pytest.mark.parametrize("t", [1, 1 << 20, 1 << 32])
@pytest.mark.parametrize("n, cols", [(1, 1), (5, 3), (17, 1), (40_000, 3), (2000, 41)])
def test_columns_and_small_blocks_alike(t, n, cols):
    """Several columns (their own word bases), blocks smaller than the 16 lanes, a column
    offset and a round near 2^32."""
    keys = np.array([rng.stream_key(i, "cols") for i in range(n)], dtype=np.uint64)
    out = _agents(keys, (1 << 32) - 1, WORD_BASE + 5 * REGION, cols, REGION, t)
    _same(out)
    assert (out["streams"][0] != UNSET).all()


def test_no_agents():
    z = np.empty((0, 2), dtype=np.int64)
    keys = np.empty(0, dtype=np.uint64)
    assert dlap.DLAP.built.dlap_agents(keys, 0, WORD_BASE, 2, REGION, 4, z) == 0


@pytest.mark.parametrize("region", [1, 2, 3, 4, 5, 6, 9])
def test_streams_past_a_short_region_alike(region):
    """A stream that needs more words than its region is counted and its z is 0, by both
    engines alike (the regions here are short enough that many do)."""
    keys = np.array([rng.stream_key(i, "short") for i in range(30_000)], dtype=np.uint64)
    for t in (1, 1 << 20):
        out = _agents(keys, 2, WORD_BASE, 2, region, t)
        _same(out)
        z, failed = out["streams"]
        assert failed > 0 if region < 9 else failed >= 0
        assert (z == 0).sum() >= failed


@pytest.mark.parametrize("t", SCALES)
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6, 10, 40])
def test_given_words_alike(t, width):
    """Given words, wide and narrow (narrow rows run out: used = -1, z = 0)."""
    words = np.random.default_rng(width).integers(0, TWO64, size=(50_000, width),
                                                  dtype=np.uint64, endpoint=False)
    _same(_given(words, t))


@pytest.mark.parametrize("t", SCALES)
def test_words_that_can_be_rejected_alike(t):
    """Words in the top 8t of the range, where a Bernoulli(n/d) draw may reject (w >= 2^64 - d):
    the lane engine hands them to the stream engine's step. Rows of random words with such
    words put in at every position, and rows made of them only."""
    g = np.random.default_rng(t % 1000 + 1)
    n, width = 40_000, 30
    words = g.integers(0, TWO64, size=(n, width), dtype=np.uint64, endpoint=False)
    top = (TWO64 - 1 - g.integers(0, 16 * t + 64, size=(n, width), dtype=np.uint64,
                                  endpoint=False).astype(object)).astype(np.uint64)
    pick = g.random((n, width)) < 0.25
    words[pick] = top[pick]
    words[: n // 10] = top[: n // 10]  # rows of top words only
    words[n // 10: n // 5, 1:] = np.uint64(TWO64 - 1)  # all rejected where d is not 2^k
    _same(_given(words, t))


@pytest.mark.parametrize("t", SCALES)
def test_large_k_alike(t):
    """Runs of zero words (0 is a multiple of every K, and 0 < U): Algorithm 1 goes on to large
    K in both phases, beyond the lane engine's table of K < 8, up to K = 60."""
    g = np.random.default_rng(7)
    n, width = 20_000, 64
    words = g.integers(0, TWO64, size=(n, width), dtype=np.uint64, endpoint=False)
    runs = g.integers(1, width, size=n)
    starts = g.integers(0, 4, size=n)
    for i in range(n):
        words[i, starts[i] + 1: starts[i] + 1 + runs[i]] = 0
    out = _given(words, t)
    _same(out)
    assert (out["streams"][1] > 20).sum() > 100  # long streams: large K reached


def test_negative_zeros_alike():
    """A sign bit with U = 0 kept and V = 0 is a negative zero: drawn again, by both engines
    (t = 1 makes U = 0 always, so half the first attempts are negative zeros)."""
    words = np.random.default_rng(3).integers(0, TWO64, size=(100_000, 20), dtype=np.uint64,
                                              endpoint=False)
    out = _given(words, 1)
    _same(out)
    assert (out["streams"][0] == 0).any() and (out["streams"][1] > 3).any()


@pytest.mark.parametrize("key", [0, 12345, (1 << 64) - 5])
def test_keys_made_inside_are_the_agents_keys(key):
    """Given one stream key, the sampler makes each agent's key mix(key + id GOLDEN) from its
    id (``rng.agent_keys``) itself: the same values as from the keys made beforehand, by both
    engines, ids not in order and not from 0."""
    agents = np.random.default_rng(5).permutation(np.arange(7, 60_007, 3, dtype=np.int64))
    keys = np.ascontiguousarray(rng.agent_keys(key, agents), dtype=np.uint64)
    for cols in (1, 3):
        for _, scalar in _engines():
            a = np.full((len(agents), cols), UNSET, dtype=np.int64)
            b = a.copy()
            fa = dlap.DLAP.built.dlap_agents(keys, 4, WORD_BASE, cols, REGION, 1 << 20, a,
                                             scalar)
            fb = dlap.DLAP.built.dlap_agents(agents.view(np.uint64), 4, WORD_BASE, cols, REGION,
                                             1 << 20, b, scalar, key)
            assert fa == fb == 0 and np.array_equal(a, b)


@pytest.mark.parametrize("t", [1 << 40, 1 << 60, 1 << 61, 1 << 62, 1 << 63])
def test_scales_beyond_the_mechanisms_alike(t):
    """Scales above the mechanisms' 2^32, which the compiled sampler accepts: the lane engines
    hold a stream's sign and U + tV in one word, which tV may overflow there, so every engine
    runs the stream engine's steps (before, the AVX-512 engine gave other values from 2^60 on,
    where U + tV reaches 2^63); words in the top of the range at every position. The numpy
    state machine divides by tK, which overflows at 2^63, so it is compared below 2^61 only."""
    g = np.random.default_rng(t % 997 + 2)
    words = g.integers(0, TWO64, size=(20_000, 24), dtype=np.uint64, endpoint=False)
    pick = g.random(words.shape) < 0.2
    words[pick] = np.uint64(TWO64 - 1) - (words[pick] >> np.uint64(40))
    _same(_given(words, t, numpy=t < 1 << 61))
    keys = np.array([rng.stream_key(i, "huge") for i in range(5000)], dtype=np.uint64)
    out = _agents(keys, 6, WORD_BASE, 2, REGION, t)
    _same(out)
    assert out["streams"][1] == 0
