"""Wang et al., 2019, §5.1's synthetic voters: layout, split invariance, the Thurstone–Mosteller
choice model, personal eps_i specifications, and the ground truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS
from ldpsim.protocols.base import ParamError
from ldpsim.protocols.ethics.data import EpsSpec, parse_eps_list, suggested_clip
from ldpsim.protocols.ethics.mle import constrained_mle
from scipy import special

KIND = DATA_KINDS["ethics_synthetic"]


def build(**args):
    return KIND.build({"n": 50, **args}, keys=1234)


def test_rows_layout_and_public_facts():
    ds = build(d=4, records=7, bound=3.0, norm="l1")
    rows = ds.rows(0, 50)
    assert rows.shape == (50, 1 + 7 * 4)
    assert np.isnan(rows[:, 0]).all()  # no personal eps by default
    assert ds.public == {"data_type": "pairwise", "n": 50, "d": 4, "records": 7, "norm": "l1",
                         "bound": 3.0, "clip": suggested_clip(4, 1.0),
                         "personal_epsilon": False, "eps_spec": ds.eps.describe(),
                         "eps_min": None, "eps_max": None}


def test_any_block_split_gives_the_same_rows():
    ds = build(d=3, records=5, eps_mode="uniform")
    whole = ds.rows(0, 50)
    parts = np.concatenate([ds.rows(0, 7), ds.rows(7, 31), ds.rows(31, 50)])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_array_equal(ds.rows(10, 11), whole[10:11])
    other = KIND.build({"n": 50, "d": 3, "records": 5, "eps_mode": "uniform"}, keys=99)
    assert not np.array_equal(other.rows(0, 50), whole)


def test_suggested_clip_covers_99_percent_of_records():
    ds = KIND.build({"n": 2000, "d": 10, "records": 20}, keys=5)
    z = ds.rows(0, 2000)[:, 1:].reshape(-1, 10)
    frac = (np.sqrt((z**2).sum(axis=1)) <= ds.public["clip"]).mean()
    se = math.sqrt(0.99 * 0.01 / len(z))
    assert abs(frac - 0.99) < 5 * se


def test_voters_parameters_are_normal_around_the_population_mean():
    ds = KIND.build({"n": 20000, "d": 3, "records": 1, "beta_sd": 0.5, "mean_low": -1.0,
                     "mean_high": 2.0}, keys=7)
    _, beta = ds._generate(np.arange(20000))
    assert ((ds.mean >= -1) & (ds.mean <= 2)).all()
    se = 0.5 / math.sqrt(20000)
    assert np.abs(beta.mean(axis=0) - ds.mean).max() < 5 * se
    assert np.abs(beta.std(axis=0) - 0.5).max() < 5 * 0.5 / math.sqrt(2 * 20000)


def test_choices_follow_thurstone_mosteller():
    """The kept difference z has density 2 phi_2(z) Phi(beta^T z) (z ~ N(0, 2 s^2 I)), whose mean
    is, by Stein's lemma, 2 * 2 s^2 beta E[phi(beta^T z)] = 4 s^2 beta / sqrt(2 pi (1 + 2 s^2
    |beta|^2)). Checked per voter with many records (5-SE)."""
    s, d, n = 0.7, 3, 20000
    ds = KIND.build({"n": 4, "d": d, "records": n, "alt_sd": s}, keys=11)
    rows = ds.rows(0, 4)
    _, beta = ds._generate(np.arange(4))
    z = rows[:, 1:].reshape(4, n, d)
    for i in range(4):
        b2 = beta[i] @ beta[i]
        expect = 4 * s**2 * beta[i] / math.sqrt(2 * math.pi * (1 + 2 * s**2 * b2))
        se = math.sqrt(2) * s / math.sqrt(n)
        assert np.abs(z[i].mean(axis=0) - expect).max() < 5 * se
    # the fraction of records agreeing with the voter's sign is E[Phi(|beta^T z|)]
    u = np.einsum("nk,k->n", z[0], beta[0])
    raw = np.abs(u)
    assert abs((u > 0).mean() - special.ndtr(raw).mean()) < 5 * math.sqrt(0.25 / n)


def test_eps_modes():
    assert (build(eps_mode="constant", eps_value=0.3).rows(0, 50)[:, 0] == 0.3).all()
    u = KIND.build({"n": 20000, "records": 1, "d": 1, "eps_mode": "uniform", "eps_low": 0.5,
                    "eps_high": 2.5}, keys=3).rows(0, 20000)[:, 0]
    assert u.min() >= 0.5 and u.max() <= 2.5
    assert abs(u.mean() - 1.5) < 5 * 2 / math.sqrt(12 * 20000)
    lst = KIND.build({"n": 30000, "records": 1, "d": 1, "eps_mode": "list",
                      "eps_list": "0.1, 1,4"}, keys=3).rows(0, 30000)[:, 0]
    vals, counts = np.unique(lst, return_counts=True)
    np.testing.assert_array_equal(vals, [0.1, 1.0, 4.0])
    assert np.abs(counts / 30000 - 1 / 3).max() < 5 * math.sqrt(2 / 9 / 30000)


def test_eps_groups_follow_the_personalised_specification():
    n = 40000
    ds = KIND.build({"n": n, "records": 1, "d": 1, "eps_mode": "groups"}, keys=4)
    eps = ds.rows(0, n)[:, 0]
    assert ds.public["personal_epsilon"] and ds.public["eps_max"] == 1.0
    assert ds.public["eps_min"] == 0.01
    liberal = eps == 1.0
    conservative = eps <= 0.2
    # rounded to the nearest hundredth
    np.testing.assert_allclose(eps, np.round(eps, 2), atol=1e-12)
    for frac, expect in ((liberal.mean(), 0.09), (conservative.mean(), 0.54)):
        assert abs(frac - expect) < 5 * math.sqrt(expect * (1 - expect) / n)
    assert eps.min() >= 0.01 and eps.max() <= 1.0


def test_eps_spec_draw_is_vectorised_over_two_uniforms():
    spec = EpsSpec(mode="groups", f_conservative=0.5, f_moderate=0.3, eps_conservative=1.0,
                   eps_moderate=2.0, eps_liberal=3.0)
    out = spec.draw(np.array([[0.1, 0.0], [0.1, 0.999], [0.7, 0.5], [0.99999, 0.5]]))
    np.testing.assert_allclose(out, [1.0, 2.0, 2.5, 3.0])
    assert spec.bounds() == (1.0, 3.0)


@pytest.mark.parametrize("args, key", [
    ({"eps_mode": "uniform", "eps_low": 2.0, "eps_high": 1.0}, "eps_high"),
    ({"eps_mode": "list", "eps_list": "0.1,-2"}, "eps_list"),
    ({"eps_mode": "list"}, "eps_list"),
    ({"eps_mode": "groups", "f_conservative": 0.8, "f_moderate": 0.3}, "f_moderate"),
    ({"eps_mode": "groups", "eps_moderate": 5.0}, "eps_moderate"),
    ({"mean_low": 2.0, "mean_high": 1.0}, "mean_high"),
    ({"norm": "l3"}, "norm"),
    ({"bound": 0.0}, "bound"),
])
def test_bad_arguments_name_the_key(args, key):
    with pytest.raises(ParamError, match=rf"\[data\] {key}"):
        build(**args)


def test_parse_eps_list():
    assert parse_eps_list("0.5;2") == [0.5, 2.0]
    with pytest.raises(ParamError):
        parse_eps_list("a,b")


def test_truth_is_the_average_mle_and_a_fixed_test_set():
    ds = KIND.build({"n": 300, "d": 4, "records": 13, "bound": 2.0, "test_instances": 50,
                     "test_alternatives": 3}, keys=8)
    t = ds.truth()
    z = ds.rows(0, 300)[:, 1:].reshape(300, 13, 4)
    np.testing.assert_allclose(t["beta_bar"], constrained_mle(z, 2.0).mean(axis=0), rtol=1e-12)
    _, beta = ds._generate(np.arange(300))
    np.testing.assert_allclose(t["beta_generating"], beta.mean(axis=0), rtol=1e-12)
    assert t["test"].shape == (50, 3, 4)
    np.testing.assert_array_equal(t["test"], ds.truth()["test"])
    assert 0.0 <= t["mle_on_boundary"] <= 1.0
