"""Tests of ``protocols.rank.kwiksort``: ordering, tie placement, comparison counting, cap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols.rank.kwiksort import kwiksort
from scipy import stats

Z = 5.0
P_MIN = 1e-4


# --------------------------------------------------------------------------- helpers


def _transitive_cmp(order: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """cmp consistent with ``order`` (best first): cmp[a, b] > 0 iff a is above b."""
    m = len(order)
    pos = np.empty(m, dtype=np.int64)
    pos[order] = np.arange(m)
    sign = np.sign(pos[None, :] - pos[:, None]).astype(np.float64)
    if weights is None:
        return sign
    w = np.triu(weights, 1)
    w = w + w.T
    return sign * w


def _quicksort_comparison_pmf(m: int) -> np.ndarray:
    """Exact distribution of the comparisons random-pivot quicksort makes on m distinct keys.

    C_n = (n - 1) + C_{U-1} + C_{n-U} with U uniform on 1..n and independent sub-problems.
    """
    pmf = [np.array([1.0]), np.array([1.0])]
    for n in range(2, m + 1):
        acc = np.zeros(n * (n - 1) // 2 + 1)
        for k in range(1, n + 1):
            c = np.convolve(pmf[k - 1], pmf[n - k])
            acc[n - 1 : n - 1 + len(c)] += c / n
        pmf.append(acc)
    return pmf[m]


def _is_permutation(ranking: list[int], m: int) -> bool:
    return sorted(ranking) == list(range(m))


class _CountingCompare:
    """A compare callable that records every call."""

    def __init__(self, cmp: np.ndarray):
        self.cmp = cmp
        self.calls: list[tuple[int, int]] = []

    def __call__(self, a: int, p: int) -> float:
        self.calls.append((a, p))
        return float(self.cmp[a, p])


def _perm_index(rankings: list[list[int]], m: int) -> np.ndarray:
    index = {p: i for i, p in enumerate(itertools.permutations(range(m)))}
    return np.array([index[tuple(r)] for r in rankings])


# --------------------------------------------------------------------------- exact behaviour


@pytest.mark.parametrize("m", [1, 2, 3, 7, 12])
def test_transitive_profile_sorted_exactly_for_any_seed(m):
    gen = np.random.default_rng(m)
    for seed in range(40):
        order = gen.permutation(m)
        weights = gen.integers(1, 50, size=(m, m)).astype(np.float64)
        cmp = _transitive_cmp(order, weights)
        res = kwiksort(cmp, np.random.default_rng(seed))
        assert res.ranking == order.tolist()
        assert not res.capped
        assert m - 1 <= res.comparisons <= m * (m - 1) // 2


def test_single_item_and_errors():
    res = kwiksort(np.zeros((1, 1)), np.random.default_rng(0))
    assert res.ranking == [0] and res.comparisons == 0
    with pytest.raises(ValueError):
        kwiksort(None, np.random.default_rng(0))


@pytest.mark.parametrize("cap", [None, 5, 12])
def test_compare_called_once_per_counted_comparison(cap):
    m = 9
    gen = np.random.default_rng(3)
    for seed in range(30):
        raw = gen.integers(-3, 4, size=(m, m)).astype(np.float64)  # not transitive, has ties
        cmp = np.triu(raw, 1) - np.triu(raw, 1).T
        counter = _CountingCompare(cmp)
        res = kwiksort(None, np.random.default_rng(seed), compare=counter,
                       max_comparisons=cap, m=m)
        assert res.comparisons == len(counter.calls)
        assert all(a != p for a, p in counter.calls)
        # KwikSort compares any pair at most once.
        pairs = {frozenset(c) for c in counter.calls}
        assert len(pairs) == len(counter.calls)
        assert _is_permutation(res.ranking, m)


def test_compare_callable_gives_same_run_as_table():
    m = 8
    gen = np.random.default_rng(5)
    raw = gen.integers(-2, 3, size=(m, m)).astype(np.float64)
    cmp = np.triu(raw, 1) - np.triu(raw, 1).T
    for seed in range(20):
        a = kwiksort(cmp, np.random.default_rng(seed))
        b = kwiksort(None, np.random.default_rng(seed), compare=_CountingCompare(cmp), m=m)
        assert (a.ranking, a.comparisons) == (b.ranking, b.comparisons)


def test_output_always_a_permutation_on_arbitrary_profiles():
    gen = np.random.default_rng(11)
    for trial in range(200):
        m = int(gen.integers(2, 13))
        raw = gen.normal(size=(m, m)).round()  # many ties and cycles
        cmp = np.triu(raw, 1) - np.triu(raw, 1).T
        cap = None if trial % 2 else int(gen.integers(0, m * m))
        res = kwiksort(cmp, np.random.default_rng(trial), max_comparisons=cap)
        assert _is_permutation(res.ranking, m)
        assert all(isinstance(x, int) for x in res.ranking)


# --------------------------------------------------------------------------- the cap


def test_cap_never_exceeded_and_identical_when_not_hit():
    m, cap = 10, math.floor(9 * math.log2(10))
    assert cap == 29
    order = np.random.default_rng(0).permutation(m)
    cmp = _transitive_cmp(order)
    n_capped = 0
    for seed in range(1500):
        free = kwiksort(cmp, np.random.default_rng(seed))
        capped = kwiksort(cmp, np.random.default_rng(seed), max_comparisons=cap)
        assert capped.comparisons <= cap
        assert _is_permutation(capped.ranking, m)
        # The cap bites exactly when the uncapped run would need more comparisons; until it
        # bites the two runs draw the same pivots, so an un-capped run is the same run.
        assert capped.capped == (free.comparisons > cap)
        if not capped.capped:
            assert (capped.ranking, capped.comparisons) == (free.ranking, free.comparisons)
        n_capped += capped.capped
    assert n_capped > 0


def test_cap_zero_gives_random_order_without_comparisons():
    m = 4
    counter = _CountingCompare(np.zeros((m, m)))
    rankings = []
    for seed in range(4800):
        res = kwiksort(None, np.random.default_rng(seed), compare=counter, max_comparisons=0, m=m)
        assert res.capped and res.comparisons == 0
        rankings.append(res.ranking)
    assert counter.calls == []
    counts = np.bincount(_perm_index(rankings, m), minlength=24)
    assert stats.chisquare(counts).pvalue > P_MIN


def test_cap_hit_rate_matches_exact_quicksort_distribution():
    # m = 10, cap 29: P(C_10 > 29) = 0.1108 for random-pivot quicksort on distinct keys.
    m, cap, runs = 10, 29, 4000
    pmf = _quicksort_comparison_pmf(m)
    p_hit = pmf[cap + 1 :].sum()
    assert 0.10 < p_hit < 0.12  # "~11% of runs exceed it"
    cmp = _transitive_cmp(np.arange(m)[::-1].copy())
    results = [kwiksort(cmp, np.random.default_rng(s), max_comparisons=cap) for s in range(runs)]
    rate = np.mean([r.capped for r in results])
    assert abs(rate - p_hit) <= Z * math.sqrt(p_hit * (1 - p_hit) / runs)


def test_mean_comparisons_match_quicksort_theory():
    # E[C_m] = 2 (m + 1) H_m - 4 m; the variance comes from the exact distribution.
    m, runs = 10, 4000
    pmf = _quicksort_comparison_pmf(m)
    c = np.arange(len(pmf))
    mean = (c * pmf).sum()
    var = (c**2 * pmf).sum() - mean**2
    harmonic = sum(1 / k for k in range(1, m + 1))
    assert mean == pytest.approx(2 * (m + 1) * harmonic - 4 * m, rel=1e-12)
    cmp = _transitive_cmp(np.random.default_rng(1).permutation(m))
    comps = [kwiksort(cmp, np.random.default_rng(10_000 + s)).comparisons for s in range(runs)]
    assert abs(np.mean(comps) - mean) <= Z * math.sqrt(var / runs)


# --------------------------------------------------------------------------- ties


def test_tied_item_goes_before_the_pivot_half_the_time():
    # Every comparison is a tie; the recorded (item, pivot) calls tell which coin was tossed,
    # and the item ends before its pivot exactly when that coin said "left". Coins are
    # independent, so the count is binomial(n_calls, 1/2).
    m, runs = 8, 2000
    before = []
    for seed in range(runs):
        counter = _CountingCompare(np.zeros((m, m)))
        res = kwiksort(None, np.random.default_rng(seed), compare=counter, m=m)
        pos = {x: i for i, x in enumerate(res.ranking)}
        before.extend(pos[a] < pos[p] for a, p in counter.calls)
    frac = np.mean(before)
    assert abs(frac - 0.5) <= Z * math.sqrt(0.25 / len(before))


def test_two_item_tie_is_a_fair_coin():
    runs = 4000
    firsts = [kwiksort(np.zeros((2, 2)), np.random.default_rng(s)).ranking[0] for s in range(runs)]
    frac = np.mean(np.array(firsts) == 0)
    assert abs(frac - 0.5) <= Z * math.sqrt(0.25 / runs)


def test_tie_against_pivot_placed_on_either_side():
    # 0 beats everything, 1 and 2 tie: the output is [0, 1, 2] or [0, 2, 1], each w.p. 1/2.
    cmp = np.array([[0, 1, 1], [-1, 0, 0], [-1, 0, 0]], dtype=np.float64)
    runs = 4000
    rankings = [kwiksort(cmp, np.random.default_rng(s)).ranking for s in range(runs)]
    assert all(r in ([0, 1, 2], [0, 2, 1]) for r in rankings)
    frac = np.mean([r == [0, 1, 2] for r in rankings])
    assert abs(frac - 0.5) <= Z * math.sqrt(0.25 / runs)


def test_all_ties_give_uniform_permutation():
    # With every comparison tied the procedure is symmetric under relabelling the items,
    # so the output is a uniform random permutation.
    m, runs = 4, 4800
    rankings = [kwiksort(np.zeros((m, m)), np.random.default_rng(s)).ranking
                for s in range(runs)]
    counts = np.bincount(_perm_index(rankings, m), minlength=24)
    assert stats.chisquare(counts).pvalue > P_MIN
