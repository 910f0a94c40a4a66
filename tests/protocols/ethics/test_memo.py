"""The per-process memory of the ethics family (Wang et al., 2019): every kept result is the one
the computation gives, bit for bit (the Eq. (3) estimates, the functional mechanism's exact
coefficients, the generated rows and the ground truth), with partial hits, bit-level
differences in the records, other keys and eviction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS
from ldpsim.protocols.ethics import fm, memo
from ldpsim.protocols.ethics.estimates import memo_mle
from ldpsim.protocols.ethics.mle import constrained_mle
from ldpsim.protocols.ethics.model import norm_of

KIND = DATA_KINDS["ethics_synthetic"]


def same_bits(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.fixture(autouse=True)
def empty_memory(empty_ethics_memory):
    """Each test with the ethics memories empty (``tests.conftest.empty_ethics_memory``)."""


def records(seed, voters=30, n=13, d=5):
    rng = np.random.default_rng(seed)
    beta = rng.uniform(0, 1, d) + rng.normal(size=(voters, d))
    z = math.sqrt(2.0) * rng.normal(size=(voters, n, d))
    win = (z @ beta[:, :, None])[:, :, 0] + rng.normal(size=(voters, n)) > 0
    return np.where(win[:, :, None], z, -z)


@pytest.mark.parametrize("norm", ["l2", "l1", "linf"])
def test_kept_estimates_equal_a_new_solve_with_partial_hits(norm):
    z = records(1, voters=24 if norm == "l2" else 8)
    ref = constrained_mle(z, 3.0, norm)
    half = len(z) // 2
    same_bits(memo_mle(z[:half], 3.0, norm), ref[:half])      # all solved
    same_bits(memo_mle(z, 3.0, norm), ref)                    # half kept, half solved
    same_bits(memo_mle(z[::-1], 3.0, norm), ref[::-1])         # all kept, other order
    same_bits(memo_mle(z, 2.0, norm), constrained_mle(z, 2.0, norm))  # another ball


def test_records_differing_in_one_bit_are_solved_again():
    z = records(2, voters=6)
    z[:, :, 0] = np.where(np.abs(z[:, :, 0]) < 0.3, 0.0, z[:, :, 0])
    memo_mle(z, 3.0, "l2")
    flipped = z.copy()
    flipped[0, 0, 0] = np.nextafter(flipped[0, 0, 0], np.inf)
    zero = np.argwhere(z[1] == 0.0)[0]
    flipped[1, zero[0], zero[1]] = -0.0  # equal as numbers, not as bits
    same_bits(memo_mle(flipped, 3.0, "l2"), constrained_mle(flipped, 3.0, "l2"))
    same_bits(memo_mle(z, 3.0, "l2"), constrained_mle(z, 3.0, "l2"))


def test_records_of_another_shape_are_not_confused():
    z = records(3, voters=4, n=6, d=4)
    memo_mle(z, 3.0, "l2")
    other = z.reshape(4, 8, 3)  # the same bytes, other records
    same_bits(memo_mle(other, 3.0, "l2"), constrained_mle(other, 3.0, "l2"))


@pytest.mark.parametrize("noise", fm.NOISE_FORMS)
@pytest.mark.parametrize("domain", fm.DOMAINS)
def test_kept_coefficients_equal_the_computation(noise, domain):
    z = records(4, voters=20, n=40, d=6)

    def ref(block):
        alpha, m = fm.coefficients(fm.preprocess(block, 2.5, domain))
        return fm.coefficient_vector(alpha, m, noise)

    same_bits(fm.voter_coefficients(z[5:12], 2.5, domain, noise), ref(z[5:12]))
    same_bits(fm.voter_coefficients(z, 2.5, domain, noise), ref(z))
    same_bits(fm.voter_coefficients(z, 2.5, domain, noise), ref(z))
    other = fm.coefficient_vector(*fm.coefficients(fm.preprocess(z, 3.5, domain)), noise)
    same_bits(fm.voter_coefficients(z, 3.5, domain, noise), other)  # another radius


def test_a_voter_alone_gets_the_coefficients_of_her_block():
    """What lets a voter's kept vector serve any block (d = 1 reduces along records only)."""
    rng = np.random.default_rng(5)
    for d in (1, 3, 10, 40):
        for n in (1, 9, 130, 1000):
            z = rng.normal(size=(3, n, d))
            for noise in fm.NOISE_FORMS:
                def f(b, noise=noise):
                    return fm.coefficient_vector(*fm.coefficients(fm.preprocess(b, 2.0, "l2")),
                                                 noise)

                same_bits(np.concatenate([f(z[i:i + 1]) for i in range(3)]), f(z))


def test_eviction_keeps_within_the_budget_and_stays_exact():
    small = memo.VoterMemo(budget=3 * (13 * 5 + 5) * 8)
    z = records(6, voters=10)
    ref = constrained_mle(z, 3.0, "l2")
    for _ in range(2):
        same_bits(small.results("t", z, 5, lambda b: constrained_mle(b, 3.0, "l2")), ref)
        assert len(small) <= 3


def rows_reference(ds, start, stop):
    return ds._generate(np.arange(start, stop))


def test_kept_rows_equal_the_generator_in_any_split():
    ds = KIND.build({"n": 60, "d": 3, "records": 5, "eps_mode": "uniform"}, keys=1234)
    whole = rows_reference(ds, 0, 60)[0]
    same_bits(ds.rows(0, 7), whole[:7])
    same_bits(ds.rows(7, 31), whole[7:31])
    same_bits(ds.rows(0, 31), whole[:31])     # two kept blocks joined
    same_bits(ds.rows(3, 20), whole[3:20])    # pieces of both
    same_bits(ds.rows(0, 60), whole)          # kept, then generated: not kept whole
    same_bits(ds.rows(40, 45), whole[40:45])
    assert ds.rows(0, 60).flags.writeable     # callers get their own copy
    other = KIND.build({"n": 60, "d": 3, "records": 5, "eps_mode": "uniform"}, keys=99)
    same_bits(other.rows(0, 60), rows_reference(other, 0, 60)[0])
    assert not np.array_equal(other.rows(0, 60), whole)
    wider = KIND.build({"n": 60, "d": 3, "records": 5, "eps_mode": "uniform",
                        "alt_sd": 2.0}, keys=1234)
    same_bits(wider.rows(0, 60), rows_reference(wider, 0, 60)[0])


def test_the_truth_with_kept_rows_and_estimates_equals_the_direct_computation():
    ds = KIND.build({"n": 40, "d": 4, "records": 9}, keys=77)
    ds.rows(0, 25)  # a pool's rows first: the truth joins them with new ones
    truth = ds.truth()
    row, beta = rows_reference(ds, 0, 40)
    est = constrained_mle(row[:, 1:].reshape(40, 9, 4), ds.bound, ds.norm)
    same_bits(truth["beta_bar"], est.sum(axis=0) / 40)
    same_bits(truth["beta_generating"], beta.sum(axis=0) / 40)
    assert truth["mle_on_boundary"] == (norm_of(est, "l2") >= ds.bound * (1 - 1e-9)).mean()
    same_bits(ds.truth()["beta_bar"], truth["beta_bar"])


def test_evaluate_decides_each_parameter_once_with_the_same_accuracies():
    from ldpsim.protocols import PROTOCOLS
    from ldpsim.protocols.ethics.model import agreement

    rng = np.random.default_rng(9)
    test = rng.normal(size=(500, 3, 4))
    est, ref, gen = rng.normal(size=(3, 4))
    got = PROTOCOLS["ethics_vldp"].evaluate({"beta": est}, {"beta_bar": ref,
                                                            "beta_generating": gen,
                                                            "test": test})
    assert got["accuracy"] == agreement(est, ref, test)
    assert got["accuracy_generating"] == agreement(est, gen, test)
    assert got["accuracy_reference"] == agreement(ref, gen, test)


def test_a_kept_block_is_returned_as_a_copy():
    z = records(10, voters=5)
    first = memo_mle(z, 3.0, "l2")
    ref = first.copy()
    first[:] = 0.0  # the caller's to change
    same_bits(memo_mle(z, 3.0, "l2"), ref)
    again = memo_mle(z, 3.0, "l2")
    again[0, 0] = 99.0
    same_bits(memo_mle(z, 3.0, "l2"), ref)


def test_the_suggested_clip_is_scipys_chi_square_quantile_bit_for_bit():
    from ldpsim.protocols.ethics.data import suggested_clip
    from scipy import stats

    for d in range(1, 201):
        for alt_sd in (0.5, 1.0, 3.0):
            for coverage in (0.5, 0.95, 0.99):
                ref = float(alt_sd * math.sqrt(2.0 * stats.chi2.ppf(coverage, d)))
                assert suggested_clip(d, alt_sd, coverage) == ref


def test_a_memory_without_budget_keeps_nothing_and_is_exact():
    none = memo.VoterMemo(budget=0)
    z = records(11, voters=9)
    ref = constrained_mle(z, 3.0, "l2")
    solve = lambda b: constrained_mle(b, 3.0, "l2")  # noqa: E731
    same_bits(none.results("t", z[:4], 5, solve), ref[:4])
    same_bits(none.results("t", z, 5, solve), ref)
    assert len(none) == 0


def test_ranges_of_kept_blocks_are_found_and_joined():
    z = records(12, voters=30)
    ref = constrained_mle(z, 3.0, "l2")
    calls = []

    def solve(b):
        calls.append(len(b))
        return constrained_mle(b, 3.0, "l2")

    kept = memo.VoterMemo()
    same_bits(kept.results("t", z[:12], 5, solve), ref[:12])
    same_bits(kept.results("t", z[12:], 5, solve), ref[12:])
    same_bits(kept.results("t", z, 5, solve), ref)            # two kept blocks joined
    same_bits(kept.results("t", z[5:20], 5, solve), ref[5:20])  # across both
    same_bits(kept.results("t", z[12:], 5, solve), ref[12:])
    assert calls == [12, 18]
    other = z[5:20].copy()
    other[3, 0, 0] = np.nextafter(other[3, 0, 0], np.inf)  # one bit of one voter
    same_bits(kept.results("t", other, 5, solve), constrained_mle(other, 3.0, "l2"))
    assert calls == [12, 18, 15]
    same_bits(kept.results("u", z[:12], 5, solve), ref[:12])  # another tag: computed
    assert calls == [12, 18, 15, 12]
    same_bits(kept.results("t", z[::-1], 5, solve), ref[::-1])  # 30 pieces: computed
    assert calls == [12, 18, 15, 12, 30]


def test_duplicate_voters_are_found():
    z = records(13, voters=6)
    z[2:5] = z[1]  # four equal voters
    ref = constrained_mle(z, 3.0, "l2")
    kept = memo.VoterMemo()
    same_bits(kept.results("t", z, 5, lambda b: constrained_mle(b, 3.0, "l2")), ref)
    same_bits(kept.results("t", z[3:], 5, lambda b: constrained_mle(b, 3.0, "l2")), ref[3:])


def test_no_voters_and_no_records():
    same_bits(memo_mle(np.zeros((0, 13, 5)), 3.0, "l2"), constrained_mle(np.zeros((0, 13, 5)),
                                                                         3.0, "l2"))
    same_bits(fm.voter_coefficients(np.zeros((0, 4, 3)), 2.0), np.zeros((0, 9)))
