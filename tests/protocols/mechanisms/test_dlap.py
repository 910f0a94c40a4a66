"""The exact discrete Laplace sampler (``protocols.mechanisms.dlap``, Canonne, Kamath & Steinke
2020, Algorithms 1-2) and its word sources (``protocols.words``).

Exact things are checked exactly (the rejection threshold of Bernoulli(n/d), per-row
independence of the batch, the two implementations' identity); laws statistically, with fixed
seeds: rates within 5 standard errors, chi-square goodness of fit with p > 1e-4. Every test runs
with the compiled state machine and with numpy's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import rng
from ldpsim.protocols.mechanisms import dlap
from ldpsim.protocols.words import MAX_COLUMNS, REGION, WORD_BASE, AgentWords, GeneratorWords
from scipy import stats

from tests.conftest import each_implementation

implementation = each_implementation(dlap.DLAP)

KEY = rng.stream_key(7, "dlap-tests")
Z = 5.0
P_MIN = 1e-4
TWO64 = 1 << 64
T20 = 1 << 20  # the scale the Laplace mechanism uses


def _words(n: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, TWO64, size=(n, width), dtype=np.uint64,
                                                endpoint=False)


def _rate_ok(hits: np.ndarray, p: float) -> bool:
    return abs(hits.mean() - p) <= Z * math.sqrt(p * (1 - p) / hits.size) + 1e-12


def _dlap_pmf(z: np.ndarray, t: int) -> np.ndarray:
    a = math.exp(-1.0 / t)
    return (1 - a) / (1 + a) * a ** np.abs(z)


def _chi_square_p(counts: np.ndarray, expected: np.ndarray) -> float:
    """p-value of the chi-square test of ``counts`` against ``expected`` (cells with an expected
    count below 5 merged into their neighbours)."""
    obs, exp = [], []
    o = e = 0.0
    for c, x in zip(counts, expected, strict=True):
        o, e = o + c, e + x
        if e >= 5:
            obs.append(o)
            exp.append(e)
            o = e = 0.0
    obs[-1] += o
    exp[-1] += e
    return float(stats.chisquare(obs, exp).pvalue)


# ------------------------------------------------------------------------ the primitives


@pytest.mark.parametrize("d", [1, 3, 7, 10**9 + 7, 3 << 20, (1 << 63) + 5])
def test_bernoulli_rejects_exactly_the_top_words(d):
    """Accepted: w < 2^64 - (2^64 mod d), a whole number of copies of 0 .. d-1; the first
    rejected word is 2^64 - (2^64 mod d); a power of two rejects nothing."""
    rem = TWO64 % d
    top = TWO64 - rem  # first rejected word (none when rem = 0)
    assert top % d == 0
    ws = np.array([0, d - 1, top - 1, top % TWO64, TWO64 - 1], dtype=np.uint64)
    ok, bit = dlap.bernoulli_step(ws, np.full(5, 1, dtype=np.uint64),
                                  np.full(5, d, dtype=np.uint64))
    assert ok.tolist() == [True, True, True, rem == 0, rem == 0]
    assert bit[:2].tolist() == [True, d == 1]
    assert bit[2] == ((top - 1) % d < 1)


@pytest.mark.parametrize("num, den", [(1, 3), (2, 7), (5, 5), (0, 4), (3, 1 << 20),
                                      (123_456_789, 10**9 + 7)])
def test_bernoulli_rational_rate(num, den):
    words = _words(200_000, 4, seed=num + den)
    bit, used = dlap.bernoulli_rational(words, num, den)
    assert (used == 1).mean() > 0.999  # rejections are rare for small d
    assert _rate_ok(bit, num / den)


def test_bernoulli_rational_consumes_rejected_words():
    words = np.array([[TWO64 - 1, TWO64 - 2, 5]], dtype=np.uint64)  # 2^64 mod 3 = 1
    bit, used = dlap.bernoulli_rational(words, 1, 3)
    assert used[0] == 2 and bit[0] == ((TWO64 - 2) % 3 < 1)
    bit, used = dlap.bernoulli_rational(np.full((1, 2), TWO64 - 1, dtype=np.uint64), 1, 3)
    assert used[0] == -1  # every word rejected: not finished


@pytest.mark.parametrize("num, den", [(0, 1), (1, 4), (1, 2), (1, 1), (3, 2), (5, 2), (7, 3),
                                      (11, 4)])
def test_bernoulli_exp_rate(num, den):
    """CKS20 Algorithm 1 (and its γ > 1 form): P(1) = e^(-γ)."""
    words = _words(200_000, 48, seed=10 * num + den)
    bit, used = dlap.bernoulli_exp(words, num, den)
    assert (used > 0).all()
    assert _rate_ok(bit, math.exp(-num / den))


# ------------------------------------------------------------------------ the sampler


@pytest.mark.parametrize("t", [1, 2, 4])
def test_small_scale_pmf_cell_by_cell(t):
    """P(Z = z) = (1 - α)/(1 + α) α^|z| checked at every z with an expected count >= 25 (each
    within 5 standard errors) and by chi-square over all of them."""
    n = 400_000
    z = dlap.sample(AgentWords(KEY, np.arange(n), 1), n, 1, t)[:, 0]
    zs = np.arange(-40 * t, 40 * t + 1)
    p = _dlap_pmf(zs, t)
    counts = np.array([(z == v).sum() for v in zs])
    assert counts.sum() == n  # nothing beyond the range (probability below 1e-10)
    big = n * p >= 25
    assert big.sum() >= 5
    se = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p)[big] <= Z * se[big]).all()
    assert _chi_square_p(counts, n * p) > P_MIN


def test_scale_2_20_goodness_of_fit_mean_and_variance():
    """t = 2^20: chi-square on 40 bins of z (equal probability under the stated law), mean 0
    and variance 2α/(1 - α)² within 5 standard errors (Var of the sample variance from the
    fourth moment, 24 t^4 to within 1e-6)."""
    t, n = T20, 300_000
    z = dlap.sample(AgentWords(KEY, np.arange(n), 2), n, 1, t)[:, 0].astype(np.float64)
    a = math.exp(-1.0 / t)
    var = 2 * a / (1 - a) ** 2
    assert abs(z.mean()) <= Z * math.sqrt(var / n)
    assert abs(z.var() - var) <= Z * math.sqrt((24 * t**4 - var**2) / n)
    # bins by |z| quantiles of the geometric tail, split by sign: P(|Z| >= m) = 2 α^m/(1 + α)
    edges = np.unique(np.round(-t * np.log(np.linspace(1, 0, 21)[1:-1] * (1 + a) / 2)))
    cdf_abs = np.concatenate([[0.0], 1 - 2 * a**edges / (1 + a), [1.0]])  # P(|Z| < edge)
    p_abs = np.diff(cdf_abs)
    p0 = (1 - a) / (1 + a)
    idx = np.searchsorted(edges, np.abs(z), side="right")
    counts, expected = [], []
    for b in range(len(p_abs)):
        for sign in (-1, 1):
            sel = (idx == b) & (np.sign(z) == sign)
            pb = p_abs[b] / 2 - (p0 / 2 if b == 0 else 0.0)  # z = 0 counted apart
            counts.append(sel.sum())
            expected.append(n * pb)
    counts.append((z == 0).sum())
    expected.append(n * p0)
    assert _chi_square_p(np.array(counts), np.array(expected)) > P_MIN


def test_words_used_on_average_and_their_tail():
    """E[words] = (2e - 1)/(1 - 1/e) = 7.02 (U: e per attempt, 1/(1 - 1/e) attempts; V: e - 1
    per Bernoulli(exp(-1)), 1/(1 - 1/e) of them); E[1.25^N] below ``words_tail_bound``'s moment,
    which bounds P(N >= 2^16) below 10^-6000."""
    n = 200_000
    _, used = dlap.kernel(_words(n, 256, seed=3), T20)
    assert (used > 0).all()
    mean = (2 * math.e - 1) / (1 - 1 / math.e)
    assert abs(used.mean() - mean) <= Z * used.std() / math.sqrt(n)
    moment = 10 ** dlap.words_tail_bound(0, T20, REGION)
    m = 1.25 ** used.astype(float)
    assert m.mean() <= moment + Z * m.std() / math.sqrt(n)
    assert dlap.words_tail_bound(REGION, T20, REGION) < -6000


def test_a_stream_past_its_limit_raises():
    src = GeneratorWords(np.random.default_rng(0), limit=3)
    with pytest.raises(RuntimeError, match="need more than 3 random words"):
        dlap.sample(src, 200, 1, 4)


# ------------------------------------------------------- batches, implementations, sources


def test_a_value_is_the_same_alone_in_any_batch_and_any_order():
    n, cols = 300, 3
    src = AgentWords(KEY, np.arange(100, 100 + n), 4)
    full = dlap.sample(src, n, cols, T20)
    for i in (0, 1, 137, n - 1):
        alone = dlap.sample(src.take(np.array([i])), 1, cols, T20)
        assert np.array_equal(alone[0], full[i])
    order = np.random.default_rng(1).permutation(n)
    assert np.array_equal(dlap.sample(src.take(order), n, cols, T20), full[order])
    old = dlap.CHUNK, dlap.FIRST_WIDTH
    try:
        dlap.CHUNK, dlap.FIRST_WIDTH = 1, 3  # tiny blocks, many regrown streams
        assert np.array_equal(dlap.sample(src, n, cols, T20), full)
    finally:
        dlap.CHUNK, dlap.FIRST_WIDTH = old
    keys = np.array([rng.stream_key(i, "per-row") for i in range(n)], dtype=np.uint64)
    per_key = dlap.sample(AgentWords(keys, np.arange(n), 4), n, cols, T20)
    for i in (0, 5):
        one = dlap.sample(AgentWords(keys[i:i + 1], np.array([i]), 4), 1, cols, T20)
        assert np.array_equal(one[0], per_key[i])


def test_the_compiled_and_numpy_state_machines_agree():
    if dlap.DLAP.built is None:
        pytest.skip("the compiled sampler was not built")
    words = _words(50_000, 24, seed=5)
    words[::5, 3] = np.uint64(TWO64 - 1)  # rejected words in the middle of the runs
    words[::7, 1] = np.uint64(TWO64 - 3)
    before = dlap.DLAP.name()
    try:
        out = {}
        for name in ("compiled", "numpy"):
            dlap.DLAP.use(name)
            out[name] = [dlap.kernel(words, t) for t in (1, 4, 1 << 20)]
            out[name].append(dlap.sample(AgentWords(KEY, np.arange(5000), 0), 5000, 2, 1 << 20))
    finally:
        dlap.DLAP.use(before)
    for a, b in zip(out["compiled"], out["numpy"], strict=True):
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,),
                        strict=True):
            assert np.array_equal(x, y)


def test_generator_words_are_deterministic_per_generator_state():
    a = dlap.sample(GeneratorWords(np.random.default_rng(11)), 500, 2, T20)
    b = dlap.sample(GeneratorWords(np.random.default_rng(11)), 500, 2, T20)
    c = dlap.sample(GeneratorWords(np.random.default_rng(12)), 500, 2, T20)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_agent_words_are_the_agents_draws_in_their_columns_regions():
    agents = np.array([3, 9, 4])
    src = AgentWords(KEY, agents, 5, column=2)
    w = src.words(np.array([0, 2, 1]), np.array([0, 1, 0]), 7, 4)
    for s, (i, j) in enumerate([(0, 0), (2, 1), (1, 0)]):
        idx = WORD_BASE + (2 + j) * REGION + 7 + np.arange(4)
        assert np.array_equal(w[s], rng.bits_at(KEY, agents[[i]], 5, idx[None, :])[0])
    assert WORD_BASE + MAX_COLUMNS * REGION == 1 << 32
    with pytest.raises(ValueError, match="beyond"):
        AgentWords(KEY, agents, 0, column=MAX_COLUMNS - 1).words(np.array([0]), np.array([1]),
                                                                 0, 1)
    with pytest.raises(ValueError, match="outside"):
        src.words(np.array([0]), np.array([0]), REGION - 2, 4)


def test_the_compiled_agents_path_makes_the_same_words_and_values():
    """With the compiled sampler, the agents' words are made inside it (``_sample_agents``):
    the values are those of the general path (words from ``rng.bits_at``, grown as needed),
    for one stream key, one key per agent and several columns from a column offset."""
    if dlap.DLAP.module is None:
        pytest.skip("numpy's sampler: it has the general path only")
    keys = np.array([rng.stream_key(i, "own") for i in range(700)], dtype=np.uint64)
    for key, agents in ((KEY, np.arange(50, 750)), (keys, np.arange(700))):
        src = AgentWords(key, agents, 6, 3)
        fast = dlap.sample(src, 700, 4, T20)
        srow, scol = np.repeat(np.arange(700), 4), np.tile(np.arange(4), 700)
        general = dlap._sample_streams(src, srow, scol, T20).reshape(700, 4)
        assert np.array_equal(fast, general)
    # a stream past its region is counted, never released: with a 3-word region most are
    z = np.empty((700, 2), dtype=np.int64)
    failed = dlap.DLAP.module.dlap_agents(keys, 6, WORD_BASE, 2, 3, T20, z)
    assert 0 < failed < 1400 and (z == 0).sum() >= failed
    with pytest.raises(ValueError, match="columns"):
        dlap.sample(AgentWords(KEY, np.arange(3), 0, MAX_COLUMNS - 1), 3, 2, T20)
