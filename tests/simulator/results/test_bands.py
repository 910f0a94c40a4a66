"""Confidence bands stop at the metric's declared range: an error rate's or an accuracy's band
never above 1 or below 0, in ldpsim's figures and in the deployment example's."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
from ldpsim.simulator.results.plots import _ci_half_width, figures
from ldpsim.simulator.results.summary import mean_std

import ldpsim
from tests.conftest import ROOT
from tests.simulator.results.test_plots import _spy
from tests.simulator.results.test_results import rec


def _example():
    spec = importlib.util.spec_from_file_location(
        "deployment_compare", ROOT / "examples" / "deployment_compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_fraction_band_stops_at_one_and_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """error_rate is declared in [0, 1]: near 1 the band's top is 1, near 0 its bottom 0."""
    pytest.importorskip("matplotlib")
    bands = _spy(monkeypatch, "fill_between")
    values = {1.0: [0.9, 1.0, 1.0], 2.0: [0.0, 0.0, 0.1]}
    recs = [rec(f"e{e}-{i}", {"protocol": "ldp_kwiksort_rr", "params.epsilon": e},
                {"error_rate": v}, repeat=i) for e, vs in values.items()
            for i, v in enumerate(vs)]
    drawn = dict(figures(recs))
    fig = drawn["plot_error_rate_vs_params.epsilon"]
    (ax, (_, lo, hi), _), = [b for b in bands if b[0].figure is fig]
    (m1, sd1, n), (m2, sd2, _) = mean_std(values[1.0]), mean_std(values[2.0])
    h1, h2 = _ci_half_width(sd1, n), _ci_half_width(sd2, n)
    assert m1 + h1 > 1.1 and m2 - h2 < -0.1  # unclipped: 1.14 and -0.11
    assert list(hi) == [1.0, m2 + h2]
    assert list(lo) == [m1 - h1, 0.0]


def test_the_deployment_example_clips_its_bands() -> None:
    band = _example().band
    # 0.75 ± 0.5 and 0.25 ± 0.5 within [0, 1]; open ends leave the band as it is
    assert band([0.75, 0.25], [0.5, 0.5], 0.0, 1.0) == ([0.25, 0.0], [1.0, 0.75])
    assert band([0.75, 0.25], [0.5, 0.5]) == ([0.25, -0.25], [1.25, 0.75])
    assert band([0.75], [0.5], 0.0, None) == ([0.25], [1.25])


def test_the_deployment_example_reads_the_declared_range(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    example = _example()
    out = tmp_path / "deployment_ethics"
    res = ldpsim.run("deployment_ethics", out=out, backend="inproc", overrides={
        "data.n": 300, "data.test_instances": 200, "repeats": 3, "output.plots": False,
        "deployment.round_deadline_s": [0.02, 0.05, math.inf]})
    assert example.declared_range(res, "accuracy") == (0.0, 1.0)
    assert example.declared_range(res, "no_such_metric") == (None, None)
    (line,) = example.lines(out, "accuracy").values()
    assert len(line["lo"]) == len(line["hi"]) == 2
    for m, h, lo, hi in zip(line["metric"], line["half"], line["lo"], line["hi"], strict=True):
        assert lo == max(m - h, 0.0) and hi == min(m + h, 1.0)
