"""Figures drawn once: a report embeds the PNGs its own process drew (not drawn again) from the
same numbers, and draws anew when the numbers, the spec or a file changed, or when another
process wrote them; each figure laid out in one pass keeps its panels, titles, labels and legend."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator.results import plots, report
from ldpsim.simulator.results.plot_cache import FIGURES_FILE
from ldpsim.simulator.results.plots import PlotSpec, figures, plot
from ldpsim.simulator.sweep import reporting

from tests.simulator.results.test_results import rec


def _records(scale: float = 1.0) -> list[dict[str, Any]]:
    """Two protocols, three ε, two solvers (a panel each), two repeats."""
    return [rec(f"{p}-{s}-{e}-{i}", {"protocol": p, "params.epsilon": e, "params.solver": s},
                {"acc": scale * (0.2 * e + 0.01 * i)}, repeat=i,
                comm={"bytes_up_per_agent_mean": 10 * e})
            for p in ("a", "b") for s in ("nnls", "cd") for e in (0.5, 1.0, 2.0)
            for i in range(2)]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every figure ``plots`` draws, by file stem, from here on."""
    drawn: list[str] = []
    real = plots._draw

    def spy(*a: Any, **k: Any) -> Any:
        for stem, fig in real(*a, **k):
            drawn.append(stem)
            yield stem, fig

    monkeypatch.setattr(plots, "_draw", spy)
    return drawn


def _embedded(page_text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in
            re.findall(r'src="data:image/png;base64,([^"]+)"', page_text)]


def test_plot_keeps_figures_drawn_from_the_same_numbers(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    pytest.importorskip("matplotlib")
    drawn = _counting(monkeypatch)
    first = plot(tmp_path, _records())
    assert len(drawn) == len(first) == 2 and (tmp_path / FIGURES_FILE).is_file()
    written = {p: p.read_bytes() for p in first}
    drawn.clear()
    assert plot(tmp_path, _records()) == first and drawn == []  # kept, in the same order
    assert {p: p.read_bytes() for p in first} == written
    # other numbers, another spec, another format, a changed or a missing file: drawn anew
    assert plot(tmp_path, _records(0.5)) == first and len(drawn) == 2
    drawn.clear()
    plot(tmp_path, _records(0.5), PlotSpec(costs=False))
    assert drawn == ["plot_acc_vs_params.epsilon"]
    drawn.clear()
    assert [p.suffix for p in plot(tmp_path, _records(0.5), PlotSpec(
        costs=False, formats=("png", "svg")))] == [".png", ".svg"] and len(drawn) == 1
    drawn.clear()
    assert len(plot(tmp_path, _records(0.5), PlotSpec(costs=False))) == 1 and drawn == []
    first[0].write_bytes(first[0].read_bytes() + b"\0")
    plot(tmp_path, _records(0.5), PlotSpec(costs=False))
    assert len(drawn) == 1
    drawn.clear()
    first[0].unlink()
    plot(tmp_path, _records(0.5), PlotSpec(costs=False))
    assert len(drawn) == 1 and first[0].is_file()


def test_the_report_embeds_the_figures_plot_wrote(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    recs = _records()
    paths = plot(tmp_path, recs)
    drawn = _counting(monkeypatch)
    text = report.page(tmp_path, recs, "t", [], None)
    assert drawn == [] and _embedded(text) == [p.read_bytes() for p in paths]
    # a figure changed since it was written is not embedded: all are drawn for the page
    paths[1].write_bytes(b"not the figure")
    text = report.page(tmp_path, recs, "t", [], None)
    assert len(drawn) == 2 and len(_embedded(text)) == 2
    assert _embedded(text)[0][:4] == b"\x89PNG" and paths[1].read_bytes() == b"not the figure"
    drawn.clear()  # other records than the figures': drawn for the page, the files untouched
    text = report.page(tmp_path, _records(0.5), "t", [], None)
    assert len(drawn) == 2 and _embedded(text)[0] != paths[0].read_bytes()


def test_the_report_reuses_the_figures_its_own_process_drew(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The records a run draws from and those its report reads give one key: a report written
    by the process that ran the sweep (``ldpsim reproduce``) draws nothing; ``ldpsim report``
    of a directory another process wrote draws its figures anew (the forgery test)."""
    pytest.importorskip("matplotlib")
    from ldpsim.simulator.cli import main

    out = tmp_path / "r"
    assert main(["run", "demo", "--out", str(out), "-q", "--no-progress", "--set",
                 "runtime.backend=inproc", "--set", "data.n=60", "--set", "repeats=2"]) == 0
    files = json.loads((out / FIGURES_FILE).read_text())["files"]
    assert files and all((out / name).is_file() for name, _ in files)
    drawn = _counting(monkeypatch)
    text = reporting.page(out)
    assert drawn == []
    assert _embedded(text) == [(out / name).read_bytes() for name, _ in files]


def test_a_figure_laid_out_once_keeps_its_panels_labels_and_legend(tmp_path: Path) -> None:
    """Two panels with the legend beside them (no spare cell): the legend has a strip of its
    own inside the saved figure, right of the panels; titles, labels and the figure's title
    are kept."""
    pytest.importorskip("matplotlib")
    stem, fig = next(figures(_records(), PlotSpec(costs=False)))
    assert stem == "plot_acc_vs_params.epsilon"
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["solver = nnls", "solver = cd"]
    assert [ax.get_xlabel() for ax in panels] == ["ε (privacy budget)"] * 2
    assert panels[0].get_ylabel() == "acc"
    assert fig.get_suptitle() == "acc vs ε (privacy budget)"
    legend, = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and 0 <= box.y0 and box.y1 <= fig.bbox.y1
    assert all(ax.get_tightbbox(renderer).x1 < box.x0 for ax in panels)
    left, right = (ax.get_tightbbox(renderer) for ax in panels)
    assert left.x1 < right.x0 + 1  # side by side, not over each other
    title = fig._suptitle.get_window_extent(renderer)
    assert all(title.y0 >= ax.get_tightbbox(renderer).y1 - 1 for ax in panels)
    assert 0 <= title.x0 and title.x1 <= box.x0  # over the panels
    width, height = fig.get_size_inches()
    path = tmp_path / "f.png"
    fig.savefig(path, dpi=100)
    from matplotlib.image import imread

    rows, cols = imread(path).shape[:2]  # saved as laid out: not cropped, not grown
    assert abs(rows - height * 100) <= 1 and abs(cols - width * 100) <= 1


def test_attack_a_forged_figure_with_its_record_is_not_embedded(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Whoever can write a results directory swaps a figure and updates ``figures.json`` to
    match: the report, which shows only what the directory's proven records say, draws its
    figures from those records and embeds none of the directory's files."""
    pytest.importorskip("matplotlib")
    from ldpsim.simulator.results import plot_cache

    out = tmp_path / "r"
    subprocess.run([sys.executable, "-m", "ldpsim", "run", "demo", "--out", str(out), "-q",
                    "--no-progress", "--set", "runtime.backend=inproc", "--set", "data.n=60",
                    "--set", "repeats=2"], check=True, capture_output=True, timeout=300)
    stored = json.loads((out / FIGURES_FILE).read_text())
    name = stored["files"][0][0]
    forged = (out / name).read_bytes()[:-16] + b"FORGED-FIGURE..."
    (out / name).write_bytes(forged)
    stored["files"][0][1] = plot_cache._digest(out / name)
    (out / FIGURES_FILE).write_text(json.dumps(stored))
    drawn = _counting(monkeypatch)
    text = reporting.page(out)
    assert drawn and b"FORGED-FIGURE" not in b"".join(_embedded(text))


def test_the_report_takes_its_figures_among_those_the_run_drew(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """A [plot] table that names its axis: the run draws the metrics and the costs, the report
    shows the metrics only, and takes them from the run's files (drawn in this process): one
    figure depends on its own metric and axis only. In another style, it draws its own."""
    pytest.importorskip("matplotlib")
    from ldpsim.simulator.cli import main

    out = tmp_path / "r"
    assert main(["run", "demo", "--out", str(out), "-q", "--no-progress", "--set",
                 "runtime.backend=inproc", "--set", "data.n=60", "--set", "repeats=2",
                 "--set", 'plot.x="params.epsilon"']) == 0
    files = {name: (out / name).read_bytes()
             for name, _ in json.loads((out / FIGURES_FILE).read_text())["files"]}
    metrics = ["plot_error_rate_vs_params.epsilon.png", "plot_kendall_tau_vs_params.epsilon.png"]
    assert set(metrics) < set(files)  # and the costs'
    drawn = _counting(monkeypatch)
    text = reporting.page(out)
    assert drawn == [] and _embedded(text) == [files[m] for m in metrics]
    text = reporting.page(out, style="paper")
    assert drawn == [m.removesuffix(".png") for m in metrics]
    assert not set(_embedded(text)) & set(files.values())
