"""The paper style of the figures (``[plot] style = "paper"``): vector files of the declared
size, every point at its swept value (no line moved sideways), no band and ``n/a`` where there
is one repeat, readable log ticks, cost axes from 0, and its keys checked."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.results.plot_spec import PlotSpec, report_spec
from ldpsim.simulator.results.plots import figures, plot
from ldpsim.simulator.results.summary import summarize
from ldpsim.simulator.results.table import format_table
from ldpsim.simulator.scenario import scenario as sc

from tests.simulator.results.test_plots import _cost_records, _spy
from tests.simulator.results.test_results import rec, round_records

PAPER = PlotSpec(style="paper", formats=("png", "pdf", "svg"))
SVG = "{http://www.w3.org/2000/svg}"


def _media_box(pdf: bytes) -> tuple[float, float]:
    """The first page's size of a PDF, in points."""
    box = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", pdf)
    assert box is not None
    return float(box.group(1)), float(box.group(2))


def _svg_size(path: Path) -> tuple[float, float]:
    root = ET.parse(path).getroot()
    return tuple(float(root.get(k).removesuffix("pt")) for k in ("width", "height"))


def _drawn_xs(fig: Any) -> set[float]:
    """Every x of every line drawn through points (markers) in ``fig``."""
    return {float(x) for ax in fig.axes for line in ax.get_lines()
            if line.get_marker() not in (None, "None", "") for x in line.get_xdata()}


def test_paper_files_are_vector_and_of_the_declared_size(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    recs = _cost_records()
    drawn = dict(figures(recs, PAPER))
    paths = plot(tmp_path, recs, PAPER)
    stems = {p.stem for p in paths}
    assert stems == set(drawn) and len(paths) == 3 * len(stems)
    for stem in stems:
        w, h = (72 * v for v in drawn[stem].get_size_inches())
        assert w == pytest.approx(3.5 * 72)  # the declared width: one column
        pdf = (tmp_path / f"{stem}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF")
        assert b"/Subtype /Image" not in pdf  # no raster image: paths and text
        assert _media_box(pdf) == pytest.approx((w, h), abs=0.01)
        svg = tmp_path / f"{stem}.svg"
        root = ET.parse(svg).getroot()
        assert root.iter(f"{SVG}path") and next(root.iter(f"{SVG}path"), None) is not None
        assert next(root.iter(f"{SVG}image"), None) is None
        assert _svg_size(svg) == pytest.approx((w, h), abs=0.01)
        assert (tmp_path / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
    # a figure of [plot] width = 7: both columns of the page
    wide = plot(tmp_path / "wide", recs, PlotSpec(style="paper", width=7.0, formats=("pdf",)))
    assert all(_media_box(p.read_bytes())[0] == pytest.approx(504) for p in wide)


def test_paper_files_are_the_same_each_time(tmp_path: Path) -> None:
    """No date and fixed element ids: the same figure gives the same bytes (docs/img)."""
    pytest.importorskip("matplotlib")
    spec = PlotSpec(style="paper", formats=("pdf", "svg"), costs=False)
    a = plot(tmp_path / "a", _cost_records(), spec)
    b = plot(tmp_path / "b", _cost_records(), spec)
    assert a and [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_no_drawn_x_is_shifted(tmp_path: Path) -> None:
    """Four protocols at 200 B per agent: the notebook moves their lines sideways, the paper
    draws every point at its swept value and tells the lines apart by marker and dash."""
    pytest.importorskip("matplotlib")
    drawn = dict(figures(_cost_records(), PAPER))
    for stem, fig in drawn.items():
        assert _drawn_xs(fig) <= {1.0, 2.0, 4.0}, stem
    fig = drawn["plot_comm.bytes_up_per_agent_mean_vs_params.epsilon"]
    lines = fig.axes[0].get_lines()
    assert len(lines) == 4 and all(list(line.get_xdata()) == [1.0, 2.0, 4.0] for line in lines)
    # told apart by marker and dash instead: four of each
    assert len({line.get_marker() for line in lines}) == 4
    assert len({str(line._unscaled_dash_pattern) for line in lines}) == 4
    # in the SVG: the four lines' markers stand in three columns, one per swept value
    svg = [p for p in plot(tmp_path, _cost_records(), PlotSpec(style="paper", formats=("svg",)))
           if p.stem == "plot_comm.bytes_up_per_agent_mean_vs_params.epsilon"]
    assert [len(xs) for xs in _marker_columns(svg[0])] == [3]
    # the rounds figure: every point at its round
    rounds = dict(figures(round_records(), PAPER))["plot_per_round_bytes"]
    assert _drawn_xs(rounds) <= {0.0, 1.0}


def test_paper_labels_units_direction_and_no_title() -> None:
    pytest.importorskip("matplotlib")
    drawn = dict(figures(_cost_records(), PAPER))
    bytes_fig = drawn["plot_comm.bytes_up_per_agent_mean_vs_params.epsilon"]
    ax = bytes_fig.axes[0]
    assert bytes_fig.get_suptitle() == ""
    assert "(bytes)" in ax.get_ylabel() and "lower is better" in ax.get_ylabel().replace(
        "\n", " ")
    assert ax.get_xlabel() == "privacy budget ε"
    assert ax.get_ylim()[0] == 0.0  # a cost's axis from 0
    wall = drawn["plot_timing.wall_s_vs_params.epsilon"].axes[0]
    assert "(s)" in wall.get_ylabel() and wall.get_ylim()[0] == 0.0
    # the swept values label the x axis
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]


def test_one_repeat_no_band_and_n_a_in_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    bands = _spy(monkeypatch, "fill_between")
    recs = [rec(f"{p}-{e}", {"protocol": p, "params.epsilon": e}, {"mae": 1 / e + (p == "b")})
            for p in ("a", "b") for e in (1.0, 2.0, 4.0)]
    for spec in (PAPER, PlotSpec()):
        fig = dict(figures(recs, spec))["plot_mae_vs_params.epsilon"]
        assert bands == []
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        texts = [lg.get_title().get_text() for lg in legends] + [
            t.get_text() for lg in legends for t in lg.get_texts()]
        assert not any("band" in t for t in texts)  # no band promised
    columns, rows = summarize(recs)
    table = format_table(columns, rows, std=True)
    assert "± n/a" in table and "± 0" not in table
    two = recs + [rec(f"{r['key']}-1", r["point"], r["metrics"], repeat=1) for r in recs]
    assert "± n/a" not in format_table(*summarize(two), std=True)


def test_log_axes_label_no_minor_tick(tmp_path: Path) -> None:
    """A log axis over less than a decade labels 1, 2, 5 times a power of ten, never its
    minor ticks (no colliding ``3×10^-2 4×10^-2``); the labels do not overlap."""
    pytest.importorskip("matplotlib")
    recs = [rec(f"{p}-{x}", {"protocol": p, "params.epsilon": x}, {"err": 100 * x + i})
            for i, p in enumerate(("a", "b")) for x in (0.02, 0.025, 0.03, 0.04, 0.05)]
    spec = PlotSpec(style="paper", logx=True, logy=True, costs=False)
    fig = dict(figures(recs, spec))["plot_err_vs_params.epsilon"]
    fig.canvas.draw()
    ax = fig.axes[0]
    for axis in (ax.xaxis, ax.yaxis):
        assert all(t.label1.get_text() == "" for t in axis.get_minor_ticks())
    renderer = fig.canvas.get_renderer()
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        boxes = sorted((t.get_window_extent(renderer) for t in labels
                        if t.get_text() and t.get_visible()), key=lambda b: (b.x0, b.y0))
        assert boxes
        for a, b in zip(boxes, boxes[1:], strict=False):
            assert not a.overlaps(b)


def test_the_paper_keys_are_checked() -> None:
    path = "scenarios/demo.toml"
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(path, ['plot.style="papr"'])
    assert str(e.value).count("\n") == 0
    assert '[plot] style: got \'papr\'; allowed: "notebook", "paper"' in str(e.value)
    with pytest.raises(sc.ScenarioError, match=r"\[plot\] width: got 40"):
        sc.load(path, ["plot.width=40"])
    with pytest.raises(sc.ScenarioError, match=r"\[report\] figures: 'nope' is not one of"):
        sc.load(path, ['report.figures=["nope"]'])
    with pytest.raises(sc.ScenarioError, match=r"\[report\] colour: unknown key"):
        sc.load(path, ["report.colour=1"])
    s = sc.load(path, ['plot.style="paper"', "plot.width=7"])
    assert s.plot.paper and s.plot.inches == 7.0 and s.plot.formats == ("png", "pdf", "svg")
    assert PlotSpec.from_table(s.plot.as_table()) == s.plot


def test_the_reports_figures_are_the_scenarios_own() -> None:
    """A [plot] table that names its figures is the report's (the costs where it asks);
    without one, the report shows every figure the run draws; [report] figures adds."""
    coll = sc.load("scenarios/collusion_leakage.toml")
    assert coll.report == coll.plot  # x = colluders, three metrics, costs = false
    fig5 = sc.load("scenarios/paper000_fig5_epsilon.toml")
    assert fig5.plot.costs and not fig5.report.costs and fig5.report.x == ("params.epsilon",)
    demo = sc.load("scenarios/demo.toml")
    assert demo.report == demo.plot
    more = sc.load("scenarios/paper000_fig5_epsilon.toml",
                   ['report.figures=["costs", "data.theta", "bytes_up"]'])
    assert more.report.costs and more.report.x == ("params.epsilon", "data.theta")
    assert more.report.y == (*fig5.plot.y, "bytes_up")
    assert report_spec(PlotSpec(), {}, {"figures": ["all"]}, None) == PlotSpec()
    deployment = sc.load("scenarios/deployment_vote.toml")  # what it is about, beside [plot]
    assert deployment.report.y[-2:] == ("virtual_wall_s", "dropout_rate")
    assert not deployment.report.costs


def test_results_plot_in_the_paper_style(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    pytest.importorskip("pandas")
    import ldpsim

    res = ldpsim.run("demo", ["data.n=100", "repeats=1"], out=tmp_path / "d",
                     backend="inproc")
    fig = res.plot("error_rate", x="params.epsilon", style="paper")
    ax = fig.axes[0]
    assert tuple(fig.get_size_inches()) == pytest.approx((3.5, 3.5 * 0.75))
    assert "lower is better" in ax.get_ylabel().replace("\n", " ")
    assert ax.get_xlabel() == "privacy budget ε"
    assert len(ax.collections) == 0  # one repeat: no band
    assert _drawn_xs(fig) <= {0.5, 1.0, 2.0}
    with pytest.raises(ValueError, match='allowed: "notebook", "paper"'):
        res.plot("error_rate", style="poster")
    pdf = tmp_path / "f.pdf"
    fig.savefig(pdf)
    assert _media_box(pdf.read_bytes()) == pytest.approx((252, 189), abs=0.01)
    assert np.isfinite(ax.get_ylim()).all()


def _marker_columns(svg: Path) -> list[set[float]]:
    """Per panel of a matplotlib SVG, the x positions (points) of the markers its lines draw
    (``line2d`` groups clipped to the panel: not the tick marks, not the bands)."""
    root = ET.parse(svg).getroot()
    href = "{http://www.w3.org/1999/xlink}href"
    panels = []
    for ax in root.iter(f"{SVG}g"):
        if not (ax.get("id") or "").startswith("axes_"):
            continue
        xs = {round(float(u.get("x")), 2)
              for line in ax.iter(f"{SVG}g") if (line.get("id") or "").startswith("line2d_")
              for clip in line.iter(f"{SVG}g") if clip.get("clip-path")
              for u in clip.iter(f"{SVG}use") if u.get(href, "").startswith("#m")}
        if xs:
            panels.append(xs)
    return panels


def test_the_docs_figures_are_vector_of_their_width_and_unshifted() -> None:
    """Each family's headline figure in docs/img (``make figures``): an SVG of vector paths
    and no raster image, as wide as declared, and in each panel its lines' markers stand in
    as many columns as the axis has swept values: every line's points at the same x, none
    moved sideways (four lines moved apart would stand in four times as many)."""
    from ldpsim.simulator.bench.figures import DOCS_IMG, HEADLINES

    for family, h in HEADLINES.items():
        svg = DOCS_IMG / h.image
        assert svg.is_file(), f"{family}: {svg} missing: make figures"
        root = ET.parse(svg).getroot()
        assert next(root.iter(f"{SVG}path"), None) is not None
        assert next(root.iter(f"{SVG}image"), None) is None
        width, height = _svg_size(svg)
        assert width == pytest.approx(72 * h.width) and 72 <= height <= 72 * h.width
        axis = h.stem.rpartition("_vs_")[2]
        section, _, key = axis.partition(".")
        values = getattr(sc.load(f"scenarios/{h.scenario}.toml"), section)[key]
        panels = _marker_columns(svg)
        assert panels, family
        assert all(2 <= len(xs) <= len(set(values)) for xs in panels), (family, panels)
