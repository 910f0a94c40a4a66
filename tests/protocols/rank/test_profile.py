"""Tests of ``protocols.rank.profile``: pairwise profiles and the paper's utility metrics.

Hand-made example (m = 3, items best first)::

    agent 0: 0 > 1 > 2
    agent 1: 2 > 0 > 1
    agent 2: 1 > 0 > 2

C[a, b] (agents ranking a above b) = [[0, 2, 2], [1, 0, 2], [1, 1, 0]]. The functions that
read agents' rows take them as positions (``POSITIONS``, the inverse permutations).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols.rank import profile

RANKINGS = np.array([[0, 1, 2], [2, 0, 1], [1, 0, 2]], dtype=np.int16)
POSITIONS = np.array([[0, 1, 2], [1, 2, 0], [1, 0, 2]], dtype=np.int16)
COUNTS = np.array([[0, 2, 2], [1, 0, 2], [1, 1, 0]], dtype=np.int64)


def _random_rankings(n: int, m: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng(seed)
    return np.array([gen.permutation(m) for _ in range(n)], dtype=np.int16)


def _brute_count_matrix(rankings: np.ndarray) -> np.ndarray:
    m = rankings.shape[1]
    c = np.zeros((m, m), dtype=np.int64)
    for r in rankings.tolist():
        for i, a in enumerate(r):
            for b in r[i + 1 :]:
                c[a, b] += 1
    return c


# --------------------------------------------------------------------------- exact examples


def test_pairs_order_and_read_only():
    j, l = profile.pairs(4)
    assert list(zip(j.tolist(), l.tolist(), strict=True)) == [
        (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    with pytest.raises(ValueError):
        j[0] = 3


def test_positions_are_inverse_permutations():
    assert profile.positions(RANKINGS).tolist() == POSITIONS.tolist()
    assert profile.rankings(POSITIONS).tolist() == RANKINGS.tolist()
    r = _random_rankings(200, 9, seed=5)
    assert np.array_equal(profile.positions(r), np.argsort(r, axis=1))
    assert np.array_equal(profile.rankings(profile.positions(r)), r)


def test_answers_hand_example():
    # pair indices for m=3: 0=(0,1), 1=(0,2), 2=(1,2)
    q = np.array([[0, 1, 2], [2, 1, 0], [1, 1, 1]])
    assert profile.answers(POSITIONS, q).tolist() == [[1, 1, 1], [0, 0, 1], [1, 1, 1]]
    assert profile.answers(POSITIONS, q).dtype == np.int64


def test_count_matrix_hand_example():
    assert profile.count_matrix(POSITIONS).tolist() == COUNTS.tolist()
    assert profile.cmp_from_counts(COUNTS).tolist() == [[0, 1, 1], [-1, 0, 1], [-1, -1, 0]]


def test_error_rate_hand_example():
    cmp = profile.cmp_from_counts(COUNTS)
    hat = np.array([[0, -1, 0], [1, 0, 1], [0, -1, 0]], dtype=np.float64)
    # pair (0,1) flipped, (0,2) estimated as a tie (not a strict flip), (1,2) right.
    assert profile.error_rate(cmp, hat) == pytest.approx(1 / 3)
    assert profile.error_rate(cmp, cmp) == 0.0
    assert profile.error_rate(cmp, -cmp) == 1.0
    # ties in the truth never count as errors
    assert profile.error_rate(np.zeros((3, 3)), hat) == 0.0


def test_kendall_distance_hand_examples():
    assert profile.kendall_distance([0, 1, 2, 3], [0, 1, 2, 3]) == 0
    assert profile.kendall_distance([0, 1, 2, 3], [1, 0, 2, 3]) == 1
    assert profile.kendall_distance([0, 1, 2, 3], [3, 2, 1, 0]) == 6
    assert profile.kendall_distance([0, 1, 2], [2, 0, 1]) == 2
    assert profile.kendall_distance([2, 0, 1], [0, 1, 2]) == 2


def test_kendall_tau_hand_example():
    # distances of [0,1,2] to the three agents: 0, 2, 1 -> mean 1, / C(3,2) = 1/3.
    assert profile.kendall_tau([0, 1, 2], COUNTS) == pytest.approx(1 / 3)
    # the reverse disagrees exactly where [0,1,2] agrees
    assert profile.kendall_tau([2, 1, 0], COUNTS) == pytest.approx(2 / 3)
    assert profile.kendall_tau(np.array([1, 0, 2]), COUNTS) == pytest.approx(4 / 9)


# --------------------------------------------------------------------------- properties


def test_count_matrix_matches_brute_force_and_sums_to_n():
    r = _random_rankings(300, 7, seed=1)
    c = profile.count_matrix(profile.positions(r))
    assert np.array_equal(c, _brute_count_matrix(r))
    assert np.array_equal(c + c.T, 300 * (1 - np.eye(7, dtype=np.int64)))


def test_answers_to_all_pairs_sum_to_counts():
    n, m = 200, 6
    r = _random_rankings(n, m, seed=2)
    allp = np.tile(np.arange(m * (m - 1) // 2), (n, 1))
    j, l = profile.pairs(m)
    pos = profile.positions(r)
    assert np.array_equal(profile.answers(pos, allp).sum(axis=0), profile.count_matrix(pos)[j, l])


def test_answers_with_random_queries_match_brute_force():
    n, m = 100, 6
    r = _random_rankings(n, m, seed=3)
    q = np.random.default_rng(4).integers(0, m * (m - 1) // 2, size=(n, 4))
    j, l = profile.pairs(m)
    got = profile.answers(profile.positions(r), q)
    for i in range(n):
        row = r[i].tolist()
        expected = [int(row.index(j[p]) < row.index(l[p])) for p in q[i]]
        assert got[i].tolist() == expected


@pytest.mark.parametrize("m", [2, 4, 8])
def test_kendall_tau_is_mean_normalised_kendall_distance(m):
    r = _random_rankings(150, m, seed=m)
    c = profile.count_matrix(profile.positions(r))
    gen = np.random.default_rng(100 + m)
    for _ in range(5):
        out = gen.permutation(m)
        brute = np.mean([profile.kendall_distance(out, row) for row in r]) / math.comb(m, 2)
        assert profile.kendall_tau(out, c) == pytest.approx(brute, rel=1e-12, abs=1e-15)
        assert profile.kendall_tau(out, c) + profile.kendall_tau(out[::-1], c) == pytest.approx(1)


def test_kendall_distance_brute_force_and_metric():
    gen = np.random.default_rng(7)
    for _ in range(50):
        m = int(gen.integers(2, 9))
        a, b, c = gen.permutation(m), gen.permutation(m), gen.permutation(m)
        pa = {x: i for i, x in enumerate(a.tolist())}
        pb = {x: i for i, x in enumerate(b.tolist())}
        brute = sum((pa[x] < pa[y]) != (pb[x] < pb[y])
                    for x, y in itertools.combinations(range(m), 2))
        d = profile.kendall_distance
        assert d(a, b) == brute == d(b, a)
        assert d(a, c) <= d(a, b) + d(b, c)
