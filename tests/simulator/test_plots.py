"""The ``[plot]`` table: validation against the scenario, the papers' default metrics, lines,
facets, log axes and formats as asked, and ``ldpsim summary DIR --plots`` redrawing them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator.sweep import scenario as sc
from ldpsim.simulator.sweep.plots import PlotSpec, default_metrics, plot

from tests.simulator.test_results import rec

FIG5 = "scenarios/paper000_fig5_epsilon.toml"


def _problems(overrides: list[str], path: str = FIG5) -> str:
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(path, overrides)
    return str(e.value)


def test_the_plot_table_is_checked_against_the_scenario() -> None:
    msg = _problems(['plot.y=["err_rate"]'])
    assert "[plot] y: 'err_rate'" in msg and "allowed: error_rate, kendall_tau" in msg
    assert "did you mean 'error_rate'?" in msg
    msg = _problems(['plot.x="params.eps"'])
    assert "allowed: params.epsilon, data.theta" in msg and "did you mean 'params.epsilon'" in msg
    assert "[plot] hue: got 3; allowed: one of protocol, params.epsilon, data.theta" in \
        _problems(["plot.hue=3"])
    assert "[plot] colour: unknown key; allowed: y, x" in _problems(["plot.colour=1"])
    assert "'jpg' is not one of the file formats; allowed: png, pdf, svg" in \
        _problems(['plot.formats=["jpg"]'])
    assert "[plot] logy: got 'yes'" in _problems(['plot.logy="yes"'])
    msg = _problems(['plot.x="data.n"', "plot.costs=1"])  # every problem at once
    assert msg.startswith("2 problems") and "data.n" in msg and "[plot] costs: got 1" in msg


def test_the_default_figures_are_the_papers() -> None:
    assert sc.load(FIG5).plot.y == ("error_rate", "kendall_tau")  # Yan, Li & Liu, 2020, Figs. 3-6
    assert sc.load("scenarios/paper001_fig2_epsilon.toml").plot.y == ("mae_change",)
    assert sc.load("scenarios/paper002_tables3_4.toml").plot.y == (
        "correct", "sq_err_q", "sq_err_w", "sq_err_phi")  # the union, in order
    assert sc.load("scenarios/paper004_fig4_compare.toml").plot.y == ("accuracy",)
    assert default_metrics([("a",), ()]) == ()  # one protocol declares none: plot them all
    s = sc.load(FIG5, ['plot.y=["kendall_tau", "bytes_up"]', "plot.logx=true",
                       'plot.facet=[]', 'plot.formats=["png", "pdf"]'])
    assert s.plot == PlotSpec(y=("kendall_tau", "bytes_up"), x=("params.epsilon",), logx=True,
                              facet=(), formats=("png", "pdf"))  # x: the file's [plot]
    assert PlotSpec.from_table(s.plot.as_table()) == s.plot
    assert PlotSpec.from_table(PlotSpec().as_table()) == PlotSpec()


def _records() -> list[dict[str, Any]]:
    recs = []
    for proto in ("a", "b"):
        for solver in ("nnls", "cd"):
            for eps in (0.5, 1.0, 2.0):
                for i in range(2):
                    recs.append(rec(f"{proto}-{solver}-{eps}-{i}",
                                    {"protocol": proto, "params.epsilon": eps,
                                     "params.solver": solver},
                                    {"acc": 0.2 * eps + 0.01 * i, "err": 1 / eps},
                                    comm={"bytes_up_per_agent_mean": 10 * eps}))
    return recs


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[Any, ...]]:
    from matplotlib.axes import Axes

    calls: list[tuple[Any, ...]] = []
    real = getattr(Axes, name)

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        calls.append((self, a, k))
        return real(self, *a, **k)

    monkeypatch.setattr(Axes, name, spy)
    return calls


def test_plot_draws_what_the_spec_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    lines = _spy(monkeypatch, "plot")
    scales = _spy(monkeypatch, "set_xscale")
    recs = _records()
    # default: every metric and cost; lines per protocol, one panel per solver
    names = sorted(p.name for p in plot(tmp_path / "all", recs))
    assert names == ["plot_acc_vs_params.epsilon.png",
                     "plot_comm.bytes_up_per_agent_mean_vs_params.epsilon.png",
                     "plot_err_vs_params.epsilon.png"]
    acc = lines[:4]  # the first figure drawn is the first metric's, acc
    assert len({id(c[0].figure) for c in acc}) == 1 and acc[0][0].get_ylabel() == "acc"
    assert sorted(c[2]["label"] for c in acc) == ["a", "a", "b", "b"]  # 2 panels x 2 lines
    assert len({id(c[0]) for c in acc}) == 2
    assert scales == []
    lines.clear()
    # only acc, no costs, lines per solver, one panel per protocol, log x, pdf too
    spec = PlotSpec(y=("acc",), hue="params.solver", facet=("protocol",), logx=True,
                    costs=False, formats=("png", "pdf"))
    paths = plot(tmp_path / "some", recs, spec)
    assert sorted(p.name for p in paths) == ["plot_acc_vs_params.epsilon.pdf",
                                             "plot_acc_vs_params.epsilon.png"]
    assert [p.read_bytes()[:4] for p in paths] == [b"\x89PNG", b"%PDF"]
    assert sorted(c[2]["label"] for c in lines) == ["solver=cd", "solver=cd", "solver=nnls",
                                                    "solver=nnls"]
    assert [c[1][0] for c in scales] == ["log"]
    lines.clear()
    # no facets: every other setting goes into the label
    plot(tmp_path / "flat", recs, PlotSpec(y=("err",), facet=(), costs=False))
    assert sorted(c[2]["label"] for c in lines) == ["a (solver=cd)", "a (solver=nnls)",
                                                    "b (solver=cd)", "b (solver=nnls)"]
    assert len({id(c[0]) for c in lines}) == 1
    # an alias names a cost; y names that no record has draw nothing
    got = plot(tmp_path / "cost", recs, PlotSpec(y=("bytes_up", "missing"), costs=False))
    assert [p.name for p in got] == ["plot_comm.bytes_up_per_agent_mean_vs_params.epsilon.png"]


def test_summary_redraws_the_scenarios_figures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "r"
    args = [sys.executable, "-m", "ldpsim", "run", "demo", "--out", str(out), "-q",
            "--set", "runtime.backend=inproc", "--set", "data.n=60", "--set", "repeats=2",
            "--set", 'plot.y=["kendall_tau"]', "--set", "plot.costs=false",
            "--set", 'plot.formats=["svg"]']
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    drawn = sorted(p.name for p in out.glob("plot_*"))
    assert drawn == ["plot_kendall_tau_vs_params.epsilon.svg"]
    stored = json.loads((out / "scenario.json").read_text())["plot"]
    assert stored["y"] == ["kendall_tau"] and stored["formats"] == ["svg"]
    for p in out.glob("plot_*"):
        p.unlink()
    done = subprocess.run([sys.executable, "-m", "ldpsim", "summary", str(out), "--plots"],
                          check=True, capture_output=True, text=True, timeout=120)
    assert sorted(p.name for p in out.glob("plot_*")) == drawn
    assert "plot_kendall_tau_vs_params.epsilon.svg" in done.stdout


def test_a_point_without_a_facet_setting_is_drawn_in_every_panel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain kwiksort has no ε: against θ with a panel per ε, it is in every panel."""
    pytest.importorskip("matplotlib")
    lines = _spy(monkeypatch, "plot")
    recs = [rec(f"r-{e}-{t}", {"protocol": "rr", "params.epsilon": e, "data.theta": t},
                {"tau": t * e}) for e in (1.0, 2.0) for t in (0.25, 0.5)]
    recs += [rec(f"k-{t}", {"protocol": "kwiksort", "data.theta": t}, {"tau": t})
             for t in (0.25, 0.5)]
    plot(tmp_path, recs, PlotSpec(x=("data.theta",), costs=False))
    panels: dict[int, list[str]] = {}
    for ax, _, kw in lines:
        panels.setdefault(id(ax), []).append(kw["label"])
    assert sorted(sorted(v) for v in panels.values()) == [["kwiksort", "rr"]] * 2
    assert sorted(ax.get_title() for ax, _, _ in lines[::2]) == [
        "ε (privacy budget) = 1", "ε (privacy budget) = 2"]


def test_a_log_axis_band_stops_at_the_smallest_mean(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    bands = _spy(monkeypatch, "fill_between")
    recs = [rec(f"w{d}-{i}", {"protocol": "p", "data.d": d}, {"sse": 10.0 ** (d - 4) * (1 + i)})
            for d in (3, 5, 7, 9) for i in (0, 3)]  # wide: the lower CI ends are negative
    plot(tmp_path, recs, PlotSpec(costs=False))
    (_, (_, lo, _), _), = bands
    assert lo.min() == pytest.approx(0.25)  # the smallest mean: (0.1 + 0.4) / 2 at d = 3


def test_a_setting_paired_with_the_axis_varies_along_the_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``[sweep] paired = [["params.epsilon", "data.n"]]``: against ε, n changes along each line
    (no panel per n of one point each), and against n, ε does."""
    pytest.importorskip("matplotlib")
    lines = _spy(monkeypatch, "plot")
    recs = [rec(f"{p}-{e}", {"protocol": p, "params.epsilon": e, "data.n": n}, {"tau": e})
            for p in ("rr", "lap") for e, n in ((0.5, 100), (1.0, 200), (2.0, 300))]
    names = sorted(x.name for x in plot(tmp_path, recs, PlotSpec(costs=False)))
    assert names == ["plot_tau_vs_data.n.png", "plot_tau_vs_params.epsilon.png"]
    for ax, _, kw in lines:
        assert ax.get_title() == "" and kw["label"] in ("rr", "lap")
    assert len(lines) == 4 and all(len(a[0]) == 3 for _, a, _ in lines)  # 3 points a line
