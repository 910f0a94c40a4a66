"""Exact tests of the SAFARI family's combinatorics: permutation/combination indexing, the
transformation rules on the paper's running example (Examples 3-5 and 7), the RI model
(Example 2's Pr[σ0] = 0.0009) and its sampler."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.safari import lade, perm, riffle, rules
from ldpsim.protocols.safari.riffle import Chain, RIModel

# Example 1: X = {Beer, Cola, Fanta, Potato, Whisky} = items 0..4; σ0 = ⟨W, B, C, F, P⟩.
B, C, F, P, W = range(5)
SIGMA0 = np.array([[W, B, C, F, P]])
POS0 = perm.positions(SIGMA0)
FIG1_CHAIN = Chain.of([[P], [B, W], [C, F]])  # Fig. 1(a): l1 = {P}, l2 = {B, W}, l3 = {C, F}


def test_lex_rank_is_itertools_order_and_unrank_inverts():
    for k in (1, 2, 4, 6):
        allp = np.array(list(itertools.permutations(range(k))))
        assert (perm.all_permutations(k) == allp).all()
        assert (perm.lex_rank(allp) == np.arange(math.factorial(k))).all()
        assert (perm.lex_unrank(np.arange(math.factorial(k)), k) == allp).all()
        assert (perm.all_positions(k) == perm.positions(allp)).all()
    r = rngm.party_generator(1).permuted(np.tile(np.arange(12), (50, 1)), axis=1)
    assert (perm.lex_unrank(perm.lex_rank(r), 12) == r).all()


@pytest.mark.parametrize("k", [2, 3, 5, 7, 8])
def test_lex_rank_table_agrees_with_the_lehmer_digits(k, monkeypatch):
    """The table lookups (k <= TABLE_K) against the digits' computation: ranks of random
    rankings and of rows that are not permutations (which take the digits' way), unranking,
    and the permutation check (repeated items, items out of range, negative items)."""
    gen = rngm.party_generator(k)
    rows = gen.permuted(np.tile(np.arange(k), (2000, 1)), axis=1)
    bad = rows.copy()
    bad[::7, 0] = bad[::7, 1]  # a repeated item
    bad[1::7, -1] = k  # an item out of range
    idx = np.concatenate([gen.integers(0, math.factorial(k), 500), [0, math.factorial(k) - 1]])
    got = (perm.lex_rank(rows), perm.lex_rank(bad), perm.lex_unrank(idx, k),
           perm.is_permutation(rows), perm.is_permutation(bad), perm.is_permutation(bad - 1))
    monkeypatch.setattr(perm, "TABLE_K", 0)
    want = (perm.lex_rank(rows), perm.lex_rank(bad), perm.lex_unrank(idx, k),
            perm.is_permutation(rows), perm.is_permutation(bad), perm.is_permutation(bad - 1))
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert got[0].max() < math.factorial(k) and got[3].all() and not got[4].all()


def test_comb_rank_is_itertools_order():
    for n_slots, p in ((5, 1), (4, 2), (7, 3), (9, 4)):
        table = np.array(list(itertools.combinations(range(n_slots), p)))
        assert (perm.combinations_table(n_slots, p) == table).all()
        assert (perm.comb_rank(table, n_slots) == np.arange(math.comb(n_slots, p))).all()


def test_positions_and_permutation_check():
    assert POS0.tolist() == [[1, 2, 3, 4, 0]]  # B is 2nd, C 3rd, F 4th, P 5th, W 1st
    assert (perm.rankings_from_positions(POS0) == SIGMA0).all()
    rows = np.array([[0, 1, 2], [0, 0, 2], [2, 1, 3], [2, 0, 1]])
    assert perm.is_permutation(rows).tolist() == [True, False, False, True]


def test_rule_I_example5():
    rule = rules.Rule("I", 5)
    assert rule.n_attrs == 5 and (rule.domains == 5).all()
    t0 = rule.tuple_of(POS0)[0] + 1  # the paper's 1-based ranks
    assert t0[B] == 2 and t0[C] == 3  # "t0[A1] = 2 and t0[A2] = 3"


def test_rule_IN_example3():
    rule = rules.Rule("IN", 5)
    assert rule.n_attrs == 30 and (rule.domains == 10).all()  # "A = {A_j | 1 <= j <= 30}"
    assert rules.triplets(5)[0].tolist() == [B, C, F]  # A1 ↔ (B, C, F)
    v = rule.values(POS0, np.array([0]))[0]
    assert rules.decode_in(int(v), 5) == (2, 1)  # "t0[A1] = (2, 1)"
    # domain order (1,1), (1,2), ..., (d,2)
    assert [rules.decode_in(i, 5) for i in range(4)] == [(1, 1), (1, 2), (2, 1), (2, 2)]


def test_rule_IC_example4():
    rule = rules.Rule("IC", 5)
    assert rule.n_attrs == 10 and (rule.domains == 20).all()  # C(5,2) pairs, d(d-1) values
    assert rules.pairs(5)[0].tolist() == [B, C]
    v = rule.values(POS0, np.array([0]))[0]
    assert rules.decode_ic(int(v), 5) == (2, 3)  # "t0[A1] = (2, 3)"
    assert [rules.decode_ic(i, 5) for i in range(5)] == [(1, 2), (1, 3), (1, 4), (1, 5),
                                                          (2, 1)]


def test_rule_II_example7():
    rule = rules.Rule("II", 5, FIG1_CHAIN)
    # A1 = l2 (2 relative rankings), A2 = l3 (2), A3 = g1 (5 interleavings), A4 = g2 (6)
    assert rule.domains.tolist() == [2, 2, 5, 6]
    t0 = rule.tuple_of(POS0)[0]
    # t0[A1] = ⟨W, B⟩ (2nd of ⟨B, W⟩, ⟨W, B⟩); t0[A2] = ⟨C, F⟩ (1st);
    # t0[A3] = ⟨g2, g2, g2, g2, l1⟩ (5th); t0[A4] = ⟨l2, l2, l3, l3⟩ (1st)
    assert t0.tolist() == [1, 0, 4, 0]
    # Example 7 lists dom(A4) as ⟨l2,l2,l3,l3⟩, ⟨l2,l3,l2,l3⟩, ⟨l2,l3,l3,l2⟩, ⟨l3,l2,l2,l3⟩, ...
    listed = ["2233", "2323", "2332", "3223", "3232", "3322"]
    slots = perm.combinations_table(4, 2)
    as_text = ["".join("2" if i in s else "3" for i in range(4)) for s in slots]
    assert as_text == listed
    # ⟨l1, g2, g2, g2, g2⟩ first ... ⟨g2, g2, g2, g2, l1⟩ last
    assert perm.combinations_table(5, 1)[:, 0].tolist() == [0, 1, 2, 3, 4]
    # K = 1: no leaf attributes ("A^L = ∅")
    k1 = rules.Rule("II", 5, Chain.of([[0], [1], [2], [3], [4]]))
    assert k1.leaf_attrs == [] and k1.domains.tolist() == [5, 4, 3, 2]


def fig1_model() -> RIModel:
    """Fig. 1(b)'s numbers that Example 2 uses, the other entries filled in to sum to 1."""
    leaf = [np.array([1.0]),            # Pr[⟨P⟩] = 1
            np.array([0.7, 0.3]),       # Pr[⟨B, W⟩], Pr[⟨W, B⟩] = 0.3
            np.array([0.1, 0.9])]       # Pr[⟨C, F⟩] = 0.1, Pr[⟨F, C⟩]
    g1 = np.array([0.2, 0.2, 0.3, 0.2, 0.1])  # Pr[⟨g2, g2, g2, g2, l1⟩] = 0.1
    g2 = np.array([0.3, 0.2, 0.1, 0.1, 0.2, 0.1])  # Pr[⟨l2, l2, l3, l3⟩] = 0.3
    return RIModel(FIG1_CHAIN, leaf, [g1, g2])


def test_ri_probability_example2():
    assert fig1_model().prob(SIGMA0)[0] == pytest.approx(0.0009, abs=1e-15)


def test_ri_probabilities_sum_to_one_and_match_sampling():
    model = fig1_model()
    allp = perm.all_permutations(5).astype(np.int64)
    p = model.prob(allp)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    n = 200_000
    syn = model.sample(n, rngm.party_generator(7))
    assert perm.is_permutation(syn).all()
    freq = np.bincount(perm.lex_rank(syn), minlength=len(p)) / n
    se = np.sqrt(p * (1 - p) / n)
    assert (np.abs(freq - p) <= 5 * se + 1e-12).all()
    # impossible rankings (zero-probability factors) never appear
    assert (freq[p == 0] == 0).all()


def test_fit_exact_recovers_parameters():
    model = fig1_model()
    syn = model.sample(100_000, rngm.party_generator(3))
    fit = riffle.fit_exact(syn, FIG1_CHAIN)
    for a, b in zip(fit.leaf_dists + fit.inter_dists, model.leaf_dists + model.inter_dists,
                    strict=True):
        se = np.sqrt(b * (1 - b) / 100_000)
        assert (np.abs(a - b) <= 5 * se + 1e-12).all()


def test_chain_validation_and_shape():
    assert FIG1_CHAIN.d == 5 and FIG1_CHAIN.n_internal == 2
    assert FIG1_CHAIN.internal(1) == (B, C, F, W)
    assert FIG1_CHAIN.internal_domain(0) == 5 and FIG1_CHAIN.leaf_domain(1) == 2
    with pytest.raises(ValueError):
        Chain.of([[0, 1], [1, 2]])
    with pytest.raises(ValueError):
        Chain(((1, 0), (2,)))


def test_example6_design_matrices():
    M2 = lade.pair_design(5)
    assert M2.shape == (10, 20)  # "M_{1,2} is a 10 × 20 binary matrix"
    assert (M2.sum(axis=1) == 4).all()  # "only four values in each row are 1"
    assert (M2.sum(axis=0) == 2).all()
    M3 = lade.triplet_design(5)
    assert M3.shape == (7, 10)
    assert (M3[:5].sum(axis=1) == 2).all() and (M3[5:].sum(axis=1) == 5).all()
    # y = M p for a true joint: the marginals
    joint = rngm.party_generator(2).dirichlet(np.ones(20))
    sq = lade.joint_to_square(joint, 5)[0]
    assert np.allclose(M2 @ joint, np.concatenate([sq.sum(1), sq.sum(0)]))
