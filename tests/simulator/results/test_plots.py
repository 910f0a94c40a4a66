"""The ``[plot]`` table: validation against the scenario, the papers' default metrics, lines,
facets, log axes and formats as asked, and ``ldpsim summary DIR --plots`` redrawing them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.results.plots import (
    DODGE,
    PlotSpec,
    default_metrics,
    figures,
    panel_grid,
    plot,
)
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep.runner import run_scenario

from tests.simulator.results.test_results import rec

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


# -- the order of panels and lines; the layout; the costs' bands and dodged lines


def _titles(fig: Any) -> list[str]:
    return [ax.get_title() for ax in fig.axes if ax.get_title()]


def test_panels_follow_the_values_of_paper002_numbers_by_value() -> None:
    """paper002_tables3_4 sweeps n = 10, 50, 100: its panels drew as "100 | 10 | 50" (the
    values sorted as text); a 3-panel figure is a 2 x 2 grid with the legend in the spare
    cell, not a thin strip."""
    pytest.importorskip("matplotlib")
    import ldpsim

    scen = sc.load("scenarios/paper002_tables3_4.toml", ["repeats=1",
                                                          "params.epsilon=[0.5, 1.0]"])
    res = ldpsim.run(scen, backend="inproc")
    drawn = figures(res.records, scen.plot)
    stem, fig = next(drawn)
    assert stem == "plot_correct_vs_params.epsilon"
    assert _titles(fig) == ["n (agents) = 10", "n (agents) = 50", "n (agents) = 100"]
    width, height = fig.get_size_inches()
    assert width / height < 1.6  # 2 x 2, not 3 x 1 (1983 x 377 pixels)
    spare = fig.axes[3]
    assert not spare.axison and spare.get_legend() is not None and not fig.legends
    assert [t.get_text() for t in spare.get_legend().get_texts()] == [
        "dpwevote_laplace", "dpwevote"]  # the scenario's order of its protocols
    assert panel_grid(1) == (1, 1) and panel_grid(2) == (1, 2) and panel_grid(4) == (2, 2)
    assert panel_grid(5) == (2, 3) and panel_grid(12) == (4, 3)


def test_lines_and_the_legend_follow_the_values(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    recs = [rec(f"k{k}-{e}", {"protocol": "p", "params.K": k, "params.epsilon": e},
                {"acc": e / k}) for k in (100, 10, 50) for e in (1.0, 2.0)]
    _, fig = next(figures(recs, PlotSpec(x=("params.epsilon",), hue="params.K",
                                         costs=False)))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["K=10", "K=50", "K=100"]
    assert [line.get_label() for line in fig.axes[0].get_lines()] == labels


def _cost_records() -> list[dict[str, Any]]:
    """Four protocols, each at 200 bytes per agent; one's wall time varies over repeats."""
    return [rec(f"{p}-{e}-{i}", {"protocol": p, "params.epsilon": e}, {"mae": 1 / e},
                repeat=i, comm={"bytes_up_per_agent_mean": 200.0},
                timing={"wall_s": 1.0 + (0.5 * i if p == "lp" else 0.0)})
            for p in ("plain", "lp", "rr", "mf") for e in (1.0, 2.0, 4.0) for i in range(3)]


def test_cost_lines_that_coincide_stay_visible_side_by_side(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Four protocols at 200 B/agent showed as the last one drawn: the cost figures move
    their lines sideways, by DODGE of the x range each, centred on the true value."""
    pytest.importorskip("matplotlib")
    bands = _spy(monkeypatch, "fill_between")
    drawn = dict(figures(_cost_records(), PlotSpec(x=("params.epsilon",))))
    lines = drawn["plot_comm.bytes_up_per_agent_mean_vs_params.epsilon"].axes[0].get_lines()
    xs = np.array([line.get_xdata() for line in lines])
    assert len({tuple(x) for x in xs}) == 4  # four lines, four sets of x positions
    assert np.allclose(xs.mean(axis=0), [1.0, 2.0, 4.0])  # centred on the true values
    assert np.abs(xs - [1.0, 2.0, 4.0]).max() <= 1.5 * DODGE * 3.0 + 1e-12
    # the costs have their 95% band over the repeats, as the metrics: only lp's wall time
    # varies between its repeats (equal repeats have no band to draw)
    wall = drawn["plot_timing.wall_s_vs_params.epsilon"]
    (ax, (_, lo, hi), kw), = bands
    assert ax.figure is wall and np.all(hi - lo > 0.5)
    assert kw["color"] == [line.get_color() for line in wall.axes[0].get_lines()
                           if line.get_label() == "lp"][0]
    metric = drawn["plot_mae_vs_params.epsilon"].axes[0].get_lines()
    assert all(list(line.get_xdata()) == [1.0, 2.0, 4.0] for line in metric)  # not moved


def test_a_sweep_of_several_rounds_draws_the_bytes_per_agent_by_round(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from tests.simulator.results.test_results import round_records

    names = [p.name for p in plot(tmp_path / "r", round_records())]
    assert "plot_per_round_bytes.png" in names
    fig = dict(figures(round_records()))["plot_per_round_bytes"]
    up, down = fig.axes[:2]
    assert [line.get_label() for line in up.get_lines()] == ["b", "a"]
    assert up.get_lines()[0].get_ydata()[0] == 8.0  # round 0: 8 bytes per asked agent
    one = [r for r in round_records() if len(r["comm"].get("per_round", [])) == 1]
    one += [rec("c-100", {"protocol": "c", "data.n": 100}, {"acc": 0.5},
                comm={"per_round": []})]
    assert "plot_per_round_bytes.png" not in [p.name for p in plot(tmp_path / "one", one)]
    assert "plot_per_round_bytes.png" not in [p.name for p in plot(
        tmp_path / "off", round_records(), PlotSpec(costs=False))]


def test_without_matplotlib_one_line_says_so(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # its import fails
    notes: list[str] = []
    recs = _records()
    assert plot(tmp_path, recs, note=notes.append) == []
    assert notes == ["note: no plots: matplotlib is not installed "
                     "(pip install 'ldpsim[plot]')"]
    with pytest.raises(ImportError, match=r"pip install 'ldpsim\[plot\]'"):
        figures(recs)
    notes.clear()  # nothing to draw: nothing to say, and no import tried
    assert plot(tmp_path, recs[:1], note=notes.append) == [] and notes == []


def test_a_cost_band_stops_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seconds and bytes are never negative: a wide band of a cost stops at 0."""
    pytest.importorskip("matplotlib")
    bands = _spy(monkeypatch, "fill_between")
    recs = [rec(f"w{e}-{i}", {"protocol": "p", "params.epsilon": e}, {"acc": 0.5},
                timing={"wall_s": 0.01 + 0.2 * (i == 2)}) for e in (1.0, 2.0) for i in range(3)]
    dict(figures(recs))
    (_, (_, lo, hi), _), = bands
    assert lo.min() == 0.0 and hi.min() > 0.2


def test_a_leakage_figure_draws_chance_and_the_ldp_bound(tmp_path: Path) -> None:
    """What the coalition learned is drawn beside guessing (0.5) and the bound e^ε/(1+e^ε)
    no test on an ε-LDP agent's reports beats; the bound gets no figure of its own."""
    pytest.importorskip("matplotlib")
    raw = {"protocol": "ldp_kwiksort_rr", "seed": 1, "repeats": 2,
           "data": {"kind": "mallows", "n": 200, "m": 5, "theta": 0.5},
           "params": {"epsilon": [0.5, 2.0]},
           "runtime": {"backend": "inproc", "pools": 1, "progress": False},
           "collusion": {"colluders": 0.5, "attacks": True, "attack_targets": 20}}
    s = sc.validate(raw)
    records, _ = run_scenario(s, tmp_path, show_progress=False, echo=lambda *a, **k: None)
    drawn = dict(figures(records, s.plot))
    assert "plot_leakage.report_bound_vs_params.epsilon" not in drawn
    ax = drawn["plot_leakage.report_accuracy_vs_params.epsilon"].axes[0]
    ys = [tuple(np.round(np.asarray(line.get_ydata(), dtype=float), 9)) for line in ax.lines]
    assert (0.5, 0.5) in ys  # axhline: chance
    bound = tuple(np.round([1 / (1 + math.exp(-e)) for e in (0.5, 2.0)], 9))
    assert bound in ys
    labels = ax.figure.legends[0].get_texts() if ax.figure.legends else []
    assert any("LDP bound" in t.get_text() for t in labels)
    assert any("chance" in t.get_text() for t in labels)
    # labels from the metric's declaration, the title says which direction is better
    assert ax.get_ylabel() == "coalition's accuracy from the reports"
    assert ax.figure._suptitle.get_text().endswith("(lower is better)")


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
