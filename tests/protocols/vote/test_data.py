"""The ``weighted_votes`` data kind (Yan, Liu & Liu, 2018, §5.1.1): row layout, split independence,
the generating distributions, the balanced design and the ground truth."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, ParamError
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.vote.data import parse_weight_probs

Z = 5.0
KIND = DATA_KINDS["weighted_votes"]


def _data(seed: int = 1, **args):
    return KIND.build(args, keys=rngm.stream_key(seed, "data"))


@pytest.mark.parametrize("design", ["iid", "balanced"])
def test_rows_layout_and_split_independence(design):
    ds = _data(n=257, candidates=3, design=design)
    rows = ds.rows(0, ds.n)
    assert rows.shape == (257, 4) and rows.dtype == np.int64
    assert set(np.unique(rows[:, 0])) <= {1, 2, 3}
    assert set(np.unique(rows[:, 1:])) <= {0, 1}
    parts = np.concatenate([ds.rows(0, 100), ds.rows(100, 101), ds.rows(101, 257)])
    assert np.array_equal(parts, rows)
    # a fresh object built with the same key gives the same rows (any pool, any split)
    assert np.array_equal(_data(n=257, candidates=3, design=design).rows(50, 60), rows[50:60])
    assert not np.array_equal(_data(seed=2, n=257, candidates=3, design=design).rows(0, 257),
                              rows)


def test_public_facts_hold_no_private_data():
    ds = _data(n=40, candidates=2, weight_probs="1,1,2", yes=0.3)
    assert ds.public == {"n": 40, "candidates": 2, "data_type": "weighted_votes",
                         "weights": [1, 2, 3], "prior_weights": [0.25, 0.25, 0.5],
                         "prior_yes": 0.3}


@pytest.mark.parametrize("probs,expect", [("uniform", (1 / 3, 1 / 3, 1 / 3)),
                                          ("1,2,1", (0.25, 0.5, 0.25))])
def test_iid_frequencies(probs, expect):
    n = 30_000
    rows = _data(n=n, candidates=2, weight_probs=probs, yes=0.3).rows(0, n)
    freq = np.bincount(rows[:, 0] - 1, minlength=3) / n
    expect = np.asarray(expect)
    assert np.all(np.abs(freq - expect) < Z * np.sqrt(expect * (1 - expect) / n))
    yes = rows[:, 1:].mean(axis=0)
    assert np.all(np.abs(yes - 0.3) < Z * np.sqrt(0.21 / n))
    # weights and opinions are independent: P(yes | w = 3) is still 0.3
    sel = rows[:, 0] == 3
    assert abs(rows[sel, 1].mean() - 0.3) < Z * np.sqrt(0.21 / sel.sum())


def test_balanced_design_has_equal_group_sizes():
    ds = _data(n=10, candidates=2, design="balanced")
    rows = ds.rows(0, 10)
    assert np.bincount(rows[:, 0], minlength=4)[1:].tolist() == [4, 3, 3]  # largest remainder
    assert rows[:, 1:].sum(axis=0).tolist() == [5, 5]
    rows = _data(n=300, design="balanced", weight_probs="1,0,2", yes=0.2).rows(0, 300)
    assert np.bincount(rows[:, 0], minlength=4)[1:].tolist() == [100, 0, 200]
    assert rows[:, 1].sum() == 60


@pytest.mark.parametrize("design", ["iid", "balanced"])
def test_truth_matches_rows(design):
    ds = _data(n=500, candidates=3, design=design)
    rows = ds.rows(0, 500)
    t = ds.truth()
    w = rows[:, 0]
    assert t["n"] == 500
    assert t["x_w"] == [int((w == g).sum()) for g in (1, 2, 3)]
    assert t["x_wy"] == [[int(((w == g) & (rows[:, 1 + c] == 1)).sum()) for g in (1, 2, 3)]
                         for c in range(3)]
    assert t["sum_w"] == int(w.sum()) and t["q"] == w.sum() / 2
    s = (w[:, None] * rows[:, 1:]).sum(axis=0)
    assert t["sum_wphi"] == s.tolist()
    assert t["passed"] == [bool(v >= w.sum() / 2) for v in s]


def test_truth_tie_is_pass():
    # Definition 2.2: a coalition wins with sum >= q. Find a game with an exact tie.
    for seed in range(200):
        t = _data(seed=seed, n=4).truth()
        if 2 * t["sum_wphi"][0] == t["sum_w"]:
            assert t["passed"] == [True]
            return
    pytest.fail("no tie found in 200 small games")


def test_parse_weight_probs():
    assert parse_weight_probs("UNIFORM") == pytest.approx((1 / 3,) * 3)
    assert parse_weight_probs(" 2, 1 ,1") == pytest.approx((0.5, 0.25, 0.25))
    for bad in ("1,2", "a,b,c", "-1,1,1", "0,0,0", "1,1,inf", ""):
        with pytest.raises(ParamError, match=r"\[data\] weight_probs: .*allowed"):
            parse_weight_probs(bad)


def test_build_validates_arguments():
    with pytest.raises(ParamError, match="candidates"):
        _data(n=10, candidates=0)
    with pytest.raises(ParamError, match="yes"):
        _data(n=10, yes=1.5)
    with pytest.raises(ParamError, match="design"):
        _data(n=10, design="stratified")
    with pytest.raises(ParamError, match="unknown argument"):
        _data(n=10, m=3)
    with pytest.raises(ParamError, match="n: required"):
        KIND.build({}, keys=1)


def test_yes_by_weight():
    n = 30_000
    ds = _data(n=n, candidates=2, weight_probs="1,1,2", yes_by_weight="0.7,0.5,0.2")
    assert ds.public["prior_yes_by_weight"] == [0.7, 0.5, 0.2]
    assert ds.public["prior_yes"] == pytest.approx(0.25 * 0.7 + 0.25 * 0.5 + 0.5 * 0.2)
    rows = ds.rows(0, n)
    for g, p in ((1, 0.7), (2, 0.5), (3, 0.2)):
        sel = rows[:, 0] == g
        assert np.all(np.abs(rows[sel, 1:].mean(axis=0) - p) < Z * np.sqrt(p * (1 - p) / sel.sum()))
    rows = _data(n=300, design="balanced", yes_by_weight="0.5,0.2,1").rows(0, 300)
    assert [int(rows[rows[:, 0] == g, 1].sum()) for g in (1, 2, 3)] == [50, 20, 100]
    for bad in ("0.5,0.5", "0.5,1.5,0", "x,y,z"):
        with pytest.raises(ParamError, match=r"\[data\] yes_by_weight: .*allowed"):
            _data(n=10, yes_by_weight=bad)
