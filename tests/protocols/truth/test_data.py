"""Crowdsourcing data of Sun et al., 2018: the synthetic generator (§VI-A) and the Web /
AdultContent loaders (skipped when the files are absent)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, ParamError
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.truth.inference import infer_truth, mae

from tests.conftest import ROOT

Z = 5.0
DATA = ROOT.parent / "shared" / "data"
SYN = DATA_KINDS["crowd_synthetic"]


def _syn(**kw):
    args = {"n": 400, "tasks": 50, "sparsity": 0.9}
    args.update(kw)
    return SYN.build(args, keys=rngm.stream_key(kw.pop("seed", 1), "data"))


def test_synthetic_shape_sparsity_domain():
    ds = _syn(n=300, tasks=60, sparsity=0.8)
    rows = ds.rows(0, ds.n)
    assert rows.shape == (300, 60) and rows.dtype == np.float64
    assert (np.isfinite(rows).sum(axis=1) == 12).all()  # round(0.2 * 60) answers each
    vals = rows[np.isfinite(rows)]
    assert set(np.unique(vals)) <= set(range(10))
    assert ds.public == {"tasks": 60, "levels": 10, "data_type": "answers"}
    assert _syn(sparsity=0.999).rows(0, 5).shape == (5, 50)  # at least one answer each
    assert (np.isfinite(_syn(sparsity=0.999).rows(0, 5)).sum(axis=1) == 1).all()
    assert np.isfinite(_syn(sparsity=0.0).rows(0, 5)).all()


def test_synthetic_blocks_do_not_depend_on_the_split():
    ds = _syn(n=500, tasks=40, sparsity=0.5)
    whole = ds.rows(0, 500)
    parts = np.concatenate([ds.rows(s, min(500, s + 77)) for s in range(0, 500, 77)])
    assert np.array_equal(whole, parts, equal_nan=True)
    again = _syn(n=500, tasks=40, sparsity=0.5).rows(0, 500)
    assert np.array_equal(whole, again, equal_nan=True)
    other = SYN.build({"n": 500, "tasks": 40, "sparsity": 0.5}, keys=rngm.stream_key(2, "data"))
    assert not np.array_equal(whole, other.rows(0, 500), equal_nan=True)


def test_synthetic_truths_and_worker_qualities():
    """Truths ~ N(0, 1) (5 SE on mean and variance); exactly half the workers have σ = 1;
    their answers sit closer to the truths than those of the σ = 5 workers."""
    ds = _syn(n=2000, tasks=2000, sparsity=0.9)
    mu = ds.ground_truth()
    n = len(mu)
    assert abs(mu.mean()) < Z / math.sqrt(n)
    assert abs(mu.var() - 1) < Z * math.sqrt(2 / n)
    sigma = ds.sigmas()
    assert (sigma == 1.0).sum() == 1000 and (sigma == 5.0).sum() == 1000
    rows = ds.rows(0, ds.n)
    err = np.abs(rows - mu[None, :])
    good = np.nanmean(err[sigma == 1.0])
    bad = np.nanmean(err[sigma == 5.0])
    assert good < 1.0 < 2.0 < bad  # clipping to Γ caps the σ = 5 errors (about 2.3)


def test_synthetic_answer_model_round_and_clip():
    """An answer is clip(round(μ_j + σ_i z), 0, 9): for the σ = 1 workers on tasks with μ ≈ 0,
    P(answer = 0) = Φ(0.5) = 0.69 (5-SE band, widened for the spread of μ near 0)."""
    ds = _syn(n=2000, tasks=400, sparsity=0.5)
    mu = ds.ground_truth()
    near = np.abs(mu) < 0.05
    rows = ds.rows(0, ds.n)[ds.sigmas() == 1.0][:, near]
    vals = rows[np.isfinite(rows)]
    p = 0.6915
    assert abs((vals == 0).mean() - p) < Z * math.sqrt(p * (1 - p) / vals.size) + 0.02


def test_synthetic_truth_record():
    ds = _syn(n=300, tasks=30)
    t = ds.truth()
    res = infer_truth(ds.rows(0, ds.n))
    assert np.array_equal(t["mu"], ds.ground_truth())
    assert t["mae_original"] == mae(res.mu, ds.ground_truth())
    assert np.array_equal(t["mu_hat_original"], res.mu)


def test_synthetic_parameter_errors():
    with pytest.raises(ParamError, match=r"\[data\] sparsity"):
        _syn(sparsity=1.0)
    with pytest.raises(ParamError, match=r"\[data\] levels"):
        SYN.build({"levels": 1}, keys=0)


# --------------------------------------------------------------------------- real data


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"data set not available: {path.name}")


def test_web_loader_counts():
    path = DATA / "web"
    _need(path / "web_crowd.txt")
    ds = DATA_KINDS["crowd_web"].build({"path": str(path)}, keys=0)
    rows = ds.rows(0, ds.n)
    assert rows.shape == (177, 2665) and ds.levels == 5
    assert np.isfinite(rows).sum() == 15567
    assert set(np.unique(rows[np.isfinite(rows)])) == {0, 1, 2, 3, 4}
    mu = ds.ground_truth()
    assert np.isfinite(mu).sum() == 2653
    assert ds.public == {"tasks": 2665, "levels": 5, "data_type": "answers"}
    assert DATA_KINDS["crowd_web"].build({"path": str(path), "levels": 6}, keys=0).levels == 6
    with pytest.raises(ParamError, match=r"\[data\] levels"):
        DATA_KINDS["crowd_web"].build({"path": str(path), "levels": 4}, keys=0)


def test_adultcontent_loader_counts_and_both_forms_agree():
    path = DATA / "adultcontent"
    _need(path / "zheng2017" / "answer.csv")
    ds = DATA_KINDS["crowd_adultcontent"].build({"path": str(path)}, keys=0)
    rows = ds.rows(0, ds.n)
    assert rows.shape == (825, 11040) and ds.levels == 4
    assert np.isfinite(rows).sum() == 89799  # unique (worker, task) pairs; first answer kept
    assert ds.stats["repeated_dropped"] == 92721 - 89799
    assert np.isfinite(ds.ground_truth()).sum() == 333
    # Table II's minimum and maximum sparsity are reproduced exactly
    assert ds.stats["sparsity_min"] == pytest.approx(0.316033, abs=5e-7)
    assert ds.stats["sparsity_max"] == pytest.approx(0.999909, abs=5e-7)
    if (path / "ipeirotis_gal" / "labels.txt").is_file():
        gal = DATA_KINDS["crowd_adultcontent"].build({"path": str(path / "ipeirotis_gal")}, 0)
        assert np.array_equal(gal.rows(0, gal.n), rows, equal_nan=True)
        assert np.array_equal(gal.ground_truth(), ds.ground_truth(), equal_nan=True)


def test_loaders_name_a_missing_path():
    for kind in ("crowd_web", "crowd_adultcontent"):
        with pytest.raises(ParamError, match=r"\[data\] path"):
            DATA_KINDS[kind].build({"path": "/nonexistent/dir"}, keys=0)
