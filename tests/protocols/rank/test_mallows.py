"""Tests of ``protocols.rank.mallows``: the repeated-insertion Mallows sampler.

The paper's dispersion is theta = 1 - phi with P(pi) proportional to phi^d_K(pi, pi0).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols import rng
from ldpsim.protocols.rank import mallows
from ldpsim.protocols.rank.profile import kendall_distance
from scipy import stats

KEY = 424242
Z = 5.0
P_MIN = 1e-4


# --------------------------------------------------------------------------- helpers


def _perm_counts(rankings: np.ndarray) -> dict[tuple[int, ...], int]:
    keys, counts = np.unique(np.asarray(rankings, dtype=np.int64), axis=0, return_counts=True)
    return {tuple(int(x) for x in k): int(c) for k, c in zip(keys, counts, strict=True)}


def _mallows_pmf(ref: np.ndarray, phi: float) -> dict[tuple[int, ...], float]:
    """Exact P(pi) = phi^d(pi, ref) / Z over all permutations (brute force)."""
    m = len(ref)
    w = {p: phi ** kendall_distance(p, ref) for p in itertools.permutations(range(m))}
    total = sum(w.values())
    return {p: v / total for p, v in w.items()}


def _chisquare_against(rankings: np.ndarray, pmf: dict[tuple[int, ...], float]) -> float:
    counts = _perm_counts(rankings)
    assert set(counts) <= set(pmf)
    perms = sorted(pmf)
    obs = np.array([counts.get(p, 0) for p in perms], dtype=np.float64)
    exp = np.array([pmf[p] for p in perms]) * obs.sum()
    return stats.chisquare(obs, exp).pvalue


def _insertion_moments(m: int, phi: float) -> tuple[float, float]:
    """Mean and variance of d_K = sum_i v_i, v_i independent with P(v) ∝ phi^v on 0..i-1."""
    mean = var = 0.0
    for i in range(1, m + 1):
        v = np.arange(i)
        p = phi**v / (phi**v).sum()
        mu = (v * p).sum()
        mean += mu
        var += (v**2 * p).sum() - mu**2
    return mean, var


# --------------------------------------------------------------------------- conversions


def test_phi_from():
    assert mallows.phi_from(theta=0.3) == pytest.approx(0.7)
    assert mallows.phi_from(theta=1.0) == 0.0
    assert mallows.phi_from(theta=0.0) == 1.0
    assert mallows.phi_from(phi=0.4) == 0.4
    with pytest.raises(ValueError):
        mallows.phi_from()
    with pytest.raises(ValueError):
        mallows.phi_from(theta=0.2, phi=0.8)


def test_insertion_pmf():
    assert np.allclose(mallows.insertion_pmf(0.5, 3), np.array([4, 2, 1]) / 7)
    assert np.array_equal(mallows.insertion_pmf(0.0, 4), [1.0, 0.0, 0.0, 0.0])
    assert np.allclose(mallows.insertion_pmf(1.0, 5), np.full(5, 0.2))
    assert mallows.insertion_pmf(0.3, 1).tolist() == [1.0]
    for phi in (0.0, 0.2, 0.9, 1.0):
        assert mallows.insertion_pmf(phi, 6).sum() == pytest.approx(1.0)


def test_reference_ranking_is_a_deterministic_permutation():
    ref = mallows.reference_ranking(KEY, 12)
    assert sorted(ref.tolist()) == list(range(12))
    assert np.array_equal(ref, mallows.reference_ranking(KEY, 12))
    others = [mallows.reference_ranking(KEY + d, 12).tolist() for d in range(1, 6)]
    assert any(o != ref.tolist() for o in others)


# --------------------------------------------------------------------------- sampler, exact


def test_sample_shape_dtype_and_permutation_rows():
    r = mallows.sample(KEY, np.arange(500), 9, 0.6)
    assert r.shape == (500, 9) and r.dtype == np.int16
    assert np.array_equal(np.sort(r, axis=1), np.tile(np.arange(9), (500, 1)))


@pytest.mark.parametrize("m", [2, 5, 17])
def test_phi_zero_everyone_has_the_reference(m):
    ref = mallows.reference_ranking(KEY, m)
    r = mallows.sample(KEY, np.arange(300), m, mallows.phi_from(theta=1.0))
    assert np.array_equal(r, np.tile(ref, (300, 1)))


def test_block_split_gives_the_same_rows():
    full = mallows.sample(KEY, np.arange(1000), 8, 0.7)
    parts = [mallows.sample(KEY, np.arange(a, b), 8, 0.7)
             for a, b in ((0, 1), (1, 333), (333, 334), (334, 1000))]
    assert np.array_equal(np.vstack(parts), full)
    pick = np.array([999, 5, 400, 0])
    assert np.array_equal(mallows.sample(KEY, pick, 8, 0.7), full[pick])


def test_different_keys_give_different_rows():
    a = mallows.sample(KEY, np.arange(200), 8, 0.9)
    b = mallows.sample(KEY + 1, np.arange(200), 8, 0.9)
    assert not np.array_equal(a, b)


# --------------------------------------------------------------------------- sampler, statistical


def test_phi_one_is_uniform_over_permutations_m3():
    r = mallows.sample(KEY, np.arange(30_000), 3, mallows.phi_from(theta=0.0))
    pmf = {p: 1 / 6 for p in itertools.permutations(range(3))}
    assert _chisquare_against(r, pmf) > P_MIN


@pytest.mark.parametrize("phi", [0.5, 0.8])
def test_m4_distribution_is_phi_to_the_distance(phi):
    m = 4
    r = mallows.sample(KEY, np.arange(48_000), m, phi)
    pmf = _mallows_pmf(mallows.reference_ranking(KEY, m), phi)
    # normaliser Z = prod_i (1 - phi^i) / (1 - phi)
    z = math.prod((1 - phi**i) / (1 - phi) for i in range(1, m + 1))
    assert pmf[tuple(mallows.reference_ranking(KEY, m).tolist())] == pytest.approx(1 / z)
    assert _chisquare_against(r, pmf) > P_MIN


@pytest.mark.parametrize("theta", [0.2, 0.5, 0.8])
def test_mean_kendall_distance_m10(theta):
    m, n = 10, 20_000
    phi = mallows.phi_from(theta=theta)
    ref = mallows.reference_ranking(KEY, m)
    r = mallows.sample(KEY, np.arange(n), m, phi)
    d = np.array([kendall_distance(row, ref) for row in r])
    mean, var = _insertion_moments(m, phi)
    assert abs(d.mean() - mean) <= Z * math.sqrt(var / n)


def test_adjacent_pair_agreement_probability():
    # Reference-adjacent items keep their order with probability 1 / (1 + phi).
    m, n, phi = 6, 40_000, 0.6
    ref = mallows.reference_ranking(KEY, m)
    r = mallows.sample(KEY, np.arange(n), m, phi)
    pos = np.argsort(r, axis=1)
    p = 1 / (1 + phi)
    for a, b in zip(ref[:-1], ref[1:], strict=True):
        frac = (pos[:, a] < pos[:, b]).mean()
        assert abs(frac - p) <= Z * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(("m", "phi"), [(1, 0.5), (2, 0.3), (5, 0.8), (10, 0.5), (10, 1.0),
                                        (10, 0.0), (23, 0.93)])
def test_sample_equals_plain_insertion_from_the_same_draws(m, phi):
    agents = np.arange(5, 2005)
    want = mallows.sample_reference(KEY, agents, m, phi)
    assert np.array_equal(mallows.sample(KEY, agents, m, phi), want)
    assert np.array_equal(mallows.sample_positions(KEY, agents, m, phi),
                          np.argsort(want, axis=1))


def test_groups_share_draws_within_the_outcome_limit():
    sizes = [(g.first, g.last) for g in mallows._groups(0.5, 10)]
    assert sizes == [(0, 5), (5, 8), (8, 10)]  # 5! = 120, 6*7*8 = 336, 9*10 = 90 outcomes
    for m in (1, 2, 7, 40):
        groups = mallows._groups(0.7, m)
        assert groups[0].first == 0 and groups[-1].last == m
        assert all(a.last == b.first for a, b in itertools.pairwise(groups))
        for g in groups:
            outcomes = math.prod(range(g.first + 1, g.last + 1))
            assert len(g.cdf) == outcomes and g.cdf[-1] == 1.0
            assert outcomes <= mallows._GROUP_OUTCOMES or g.last == g.first + 1


@pytest.mark.parametrize("phi", [1.0, 0.5, 0.93, 0.0])
def test_bucket_table_equals_search_at_every_bucket_edge(phi):
    # draws at both ends of every 14-bit bucket, where rounding can put u on the next edge
    top = np.arange(1 << 14, dtype=np.uint64) << np.uint64(50)
    offsets = np.array([0, 1, 2, 1 << 49, (1 << 50) - 2, (1 << 50) - 1], dtype=np.uint64)
    draws = (top[:, None] + offsets[None, :]).ravel()
    u = rng.uniform_of(draws)
    for grp in mallows._groups(phi, 10):
        want = np.searchsorted(grp.cdf, u, side="right")
        assert np.array_equal(mallows._outcomes(draws, grp), want)
        assert (grp.table < 0).sum() > 0  # the exact path is exercised


def test_uniform_of_matches_uniform():
    b = rng.bits(KEY, np.arange(3000), 2, 4)
    assert np.array_equal(rng.uniform_of(b), rng.uniform(KEY, np.arange(3000), 2, 4))
    edge = np.array([0, (1 << 64) - 1, (1 << 63) + (1 << 11) - 1], dtype=np.uint64)
    u = rng.uniform_of(edge)
    assert (u > 0).all() and (u < 1).all()


def test_theta_conventions():
    """Yan, Li & Liu, 2020's theta = 1 - q/p, and PerMallows' theta = -ln(q/p) (the paper's
    generator)."""
    assert mallows.phi_from(theta=0.75) == 0.25
    assert mallows.phi_from(theta=0.75, convention="permallows") == pytest.approx(0.4723665527)
    assert mallows.phi_from(theta=0.0, convention="permallows") == 1.0
    assert mallows.phi_from(theta=3.0, convention="permallows") == pytest.approx(math.exp(-3))
    assert mallows.phi_from(phi=0.3, convention="permallows") == 0.3
    with pytest.raises(ValueError, match="outside"):
        mallows.phi_from(theta=1.5)
    with pytest.raises(ValueError, match="negative"):
        mallows.phi_from(theta=-0.1, convention="permallows")
    with pytest.raises(ValueError, match="allowed: paper, permallows"):
        mallows.phi_from(theta=0.5, convention="perm")


@pytest.mark.parametrize("kind,size", [("mallows", "m"), ("safari_mallows", "d")])
def test_theta_convention_in_the_data_kinds(kind, size):
    from ldpsim.protocols import ParamError, get_data_kind

    k = get_data_kind(kind)
    args = {"n": 10, size: 5, "theta": 0.75}
    assert k.build(args, 1).phi == 0.25
    assert k.build(args | {"theta_convention": "permallows"}, 1).phi == pytest.approx(
        math.exp(-0.75))
    assert k.build(args | {"theta": 2.0, "theta_convention": "permallows"}, 1).phi == \
        pytest.approx(math.exp(-2.0))
    with pytest.raises(ParamError, match="theta = 2 is outside"):
        k.build(args | {"theta": 2.0}, 1)
    with pytest.raises(ParamError, match="theta_convention: got 'per'; allowed: one of "
                                         "'paper', 'permallows'"):
        k.build(args | {"theta_convention": "per"}, 1)


@pytest.mark.parametrize("theta", [0.25, 0.75])
def test_permallows_theta_gives_its_kendall_distance(theta):
    """Sampled Kendall distance at PerMallows' theta matches the Mallows theory (5 s.e.)."""
    m, n = 10, 20_000
    phi = mallows.phi_from(theta=theta, convention="permallows")
    ref = mallows.reference_ranking(KEY, m)
    d = np.array([kendall_distance(row, ref) for row in mallows.sample(KEY, np.arange(n), m,
                                                                          phi)])
    mean, var = _insertion_moments(m, phi)
    assert abs(d.mean() - mean) <= Z * math.sqrt(var / n)
    # and it is not the paper convention's distance (phi 0.25 vs 0.47 at theta = 0.75)
    other, _ = _insertion_moments(m, mallows.phi_from(theta=theta))
    assert abs(d.mean() - other) > 10 * math.sqrt(var / n)
