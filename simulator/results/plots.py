"""Figures of a sweep: each metric's mean with a 95% confidence band against a swept setting.

What a scenario draws is its ``[plot]`` table (:class:`PlotSpec`, ``plot_spec``): which
metrics against which swept settings, which setting tells the lines apart (``hue``), which make
one panel each (``facet``), log axes, whether to add the communication and time costs, and the
file formats. ``plot_layout`` chooses what each figure holds and where: the settings and
metrics drawn, the panels (by default every other swept setting, up to ``MAX_PANELS`` panels,
but not one paired with the x axis: that one varies along each line), the lines and their
labels; this module draws them.

Panels, lines and legends follow the settings' values (``results.in_value_order``: numbers
by value, then the sweep's order); ``figures`` yields each figure, ``plot`` writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.results import plot_style as paper
from ldpsim.simulator.results.metrics import CHANCE, registry
from ldpsim.simulator.results.plot_cache import figures_key, forget, kept, remember
from ldpsim.simulator.results.plot_draw import (  # noqa: F401 - re-exported: plots.DODGE, ...
    BAND_ALPHA,
    BAND_TEXT,
    DODGE,
    EXACT_BAND_TEXT,
    MARKERS,
    NO_MATPLOTLIB,
    PLOT_INSTALL,
    TITLE_Y,
    PlotLibraryMissing,
    band,
    ci_half_width,
    dodge,
    exact_band,
    label_few_trials,
    load_matplotlib,
    panel_grid,
    spread,
    title,
)
from ldpsim.simulator.results.plot_layout import (  # noqa: F401 - re-exported: plots.axis_label
    BOUND,
    SYMBOLS,
    Layout,
    Sweep,
    axis_label,
    layout_of,
    sweep_of,
)
from ldpsim.simulator.results.plot_rounds import DROPOUT, dropout_figure, rounds_figure
from ldpsim.simulator.results.plot_spec import (  # noqa: F401 - re-exported: plots.check_table, ...
    COST_ALIASES,
    PlotSpec,
    check_table,
    default_metrics,
    styled,
)
from ldpsim.simulator.results.table import cell_text

BOUND_LABEL = "LDP bound e^ε/(1+e^ε) (dash-dot)"
CHANCE_LABEL = "chance: guessing (dotted)"
#: the paper's legend says what each line is; its handle shows how it is drawn
PAPER_LABELS = {BOUND_LABEL: r"LDP bound $e^\varepsilon/(1+e^\varepsilon)$",
                CHANCE_LABEL: "chance (guessing)"}
#: the half-width of a mean's 95% interval (kept under its former name)
_ci_half_width = ci_half_width


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _panel_title(panel_id: str) -> str:
    values = json.loads(panel_id)
    return ", ".join(f"{axis_label(k)} = {cell_text(v)}" for k, v in values.items()
                     if v is not None)


def figures(records: list[dict[str, Any]], spec: PlotSpec | None = None
            ) -> Iterator[tuple[str, Any]]:
    """The figures ``plot`` writes, each as (file name without its format, matplotlib
    Figure), drawn one at a time as the iterator is read.

    Raises
    ------
    PlotLibraryMissing
        An ImportError naming the extra to install, at once, when there is a figure to draw
        and matplotlib is not installed (when there is none, matplotlib is not imported).
    """
    spec = spec or PlotSpec()
    sweep = sweep_of(records, spec)
    if sweep is None:
        return iter(())
    return _draw(sweep, spec, load_matplotlib())


def plot(out_dir: str | Path, records: list[dict[str, Any]], spec: PlotSpec | None = None,
         note: Callable[[str], Any] | None = None) -> list[Path]:
    """Draw each chosen metric's mean, with a 95% confidence band over the repeats, against
    each chosen swept setting; also the communication and time costs, likewise, and the
    wire bytes and report bits per agent by round.

    Writes ``<out_dir>/plot_<metric>_vs_<axis>.<format>`` with one line per value of
    ``spec.hue`` (by default one per protocol), each with its own colour and marker, human
    axis labels, and one panel per combination of the facet settings. Panels, lines and the
    legend follow the settings' values, numbers by value (``in_value_order``). Bands of
    metrics that live in [0, 1] are clipped to it, those of costs at 0. Points without that
    axis (a protocol lacking the parameter, e.g. plain kwiksort has no epsilon) are drawn as
    horizontal dashed lines at their mean. The notebook's cost figures move their lines a
    little sideways (``DODGE`` of the x range per line, centred on the true value): costs are
    often equal between protocols, and lines drawn over each other would hide all but the
    last. The paper style (``spec.style``, ``plot_style``) draws every point at its value,
    the lines told apart by marker and dash, at the declared width, as vector files.

    The communication costs are two, each in figures of its own: the wire bytes
    (``comm.bytes_up_per_agent_mean``, ``comm.bytes_down_per_agent_mean``: the msgpack
    envelopes, in B) and the report bits (``comm.report_bits_per_agent_mean``: the
    information-theoretic size of an agent's reports, what the papers count, in bits).

    When a run had more than one round and ``spec.costs``, also
    ``plot_per_round_bytes.<format>``: the wire bytes each asked agent sent and received in
    each round and the report bits of one report (``per_round.csv``), one panel each (the
    bits on an axis of their own), one line per protocol, its mean over the protocol's runs
    with their 95% confidence band.

    Parameters
    ----------
    out_dir : str or Path
        Destination directory (created if missing).
    records : list of dict
        Result records.
    spec : PlotSpec, optional
        What to draw (default ``PlotSpec()``: every metric and cost against every numeric
        swept setting, lines per protocol, automatic facets).
    note : callable, optional
        Told ``NO_MATPLOTLIB`` (one line) when there is a figure to draw and matplotlib is
        not installed.

    Returns
    -------
    list of Path
        The files written; ``[]`` when matplotlib is not installed or there is nothing to
        draw (no numeric setting with two values or more, e.g. a sweep of one point: then
        matplotlib is not even imported). Figures this function already wrote into
        ``out_dir`` from the same numbers, labels and spec, and left unchanged, are kept,
        not drawn again (``plot_cache``: its ``FIGURES_FILE`` beside them says what they
        were drawn from).
    """
    spec = spec or PlotSpec()
    sweep = sweep_of(records, spec)
    if sweep is None:
        return []
    out = Path(out_dir)
    key = figures_key(sweep, spec)
    paths = kept(out, key, spec.formats)
    if paths is not None:  # already drawn from the same numbers, and intact
        return paths
    try:
        mpl = load_matplotlib()
    except PlotLibraryMissing:
        if note is not None:
            note(NO_MATPLOTLIB)
        return []
    forget(out)
    paths = []
    for stem, fig in _draw(sweep, spec, mpl):
        out.mkdir(parents=True, exist_ok=True)
        for fmt in spec.formats:
            path = out / f"{stem}.{fmt}"
            _save(fig, path, fmt, spec)
            paths.append(path)
    if paths:
        remember(out, key, spec.formats, paths)
    return paths


def _save(fig: Any, path: Path, fmt: str, spec: PlotSpec) -> None:
    """Write ``fig`` as it was laid out: a notebook PNG at 100 dpi; a paper figure at its
    size, its PNG at ``plot_style.PAPER_DPI``, its PDF and SVG the same from the same figure
    (no date in them)."""
    if not spec.paper:
        fig.savefig(path, dpi=100 if fmt == "png" else "figure")
        return
    with paper.paper_context():
        fig.savefig(path, dpi=paper.PAPER_DPI if fmt == "png" else "figure",
                    metadata=None if fmt == "png" else {"Date": None} if fmt == "svg"
                    else {"CreationDate": None})


def _draw(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]]
          ) -> Iterator[tuple[str, Any]]:
    """Each figure of ``sweep`` as (file stem, Figure), drawn as the iterator is read (a
    paper figure inside ``plot_style.paper_context``)."""
    style = paper.paper_context if spec.paper else nullcontext
    for stem, _, draw_one in _planned(sweep, spec, mpl):
        with style():
            fig = draw_one()
        if fig is not None:
            yield stem, fig


def _planned(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]]
             ) -> Iterator[tuple[str, tuple[str, Layout, str] | None, Callable[[], Any]]]:
    """Each figure ``_draw`` may draw: its stem, the (axis, layout, metric) of a metric's
    figure (None for the others), and what draws it (None when no point has its metric)."""
    for axis in sweep.axes:
        layout = layout_of(sweep, spec, axis)
        for metric in sweep.chosen:
            yield (f"plot_{_safe(metric)}_vs_{_safe(axis)}", (axis, layout, metric),
                   lambda a=axis, lay=layout, m=metric: _metric_figure(sweep, spec, mpl, a,
                                                                      lay, m))
    if sweep.rounds:
        yield "plot_per_round_bytes", None, lambda: rounds_figure(sweep.rounds, spec, mpl)
    if DROPOUT in sweep.costs and len({p.costs.get(DROPOUT) for p in sweep.points}) > 1:
        for metric in sweep.chosen:
            if metric not in sweep.costs:
                yield (f"plot_{_safe(metric)}_vs_dropout_rate", None,
                       lambda m=metric: dropout_figure(sweep, spec, mpl, m))


def stems(records: list[dict[str, Any]], spec: PlotSpec) -> list[str]:
    """The file stems of the figures ``plot`` draws of ``records`` for ``spec``, in order,
    found without drawing them (nor importing matplotlib)."""
    sweep = sweep_of(records, spec)
    if sweep is None:
        return []
    return [stem for stem, of, _ in _planned(sweep, spec, (None, None, []))
            if of is None or _series(sweep, of[1], of[0], of[2]).lines]


@dataclass
class _Series:
    """One metric's means against one axis, by panel and line (``_series``)."""

    # panel -> line key -> (label, [(x, mean, half-width of the 95% CI)])
    lines: dict[str, dict[str, tuple[str, list[tuple[float, float, float]]]]]
    # panel -> line key -> (label, [mean]) of the points without the axis (drawn flat)
    flats: dict[str, dict[str, tuple[str, list[float]]]]
    # a leakage figure's LDP bound, where the runs state one: panel -> line key -> [(x, bound)]
    bounds: dict[str, dict[str, list[tuple[float, float]]]]
    # an attack's accuracy: panel -> line key -> [(x, trials, low, high)], the exact interval
    # of its trials pooled over the repeats (``summary.pooled_leakage``), drawn as its band
    exact: dict[str, dict[str, list[tuple[float, int, float, float]]]] = field(
        default_factory=dict)


def _series(sweep: Sweep, layout: Layout, axis: str, metric: str) -> _Series:
    """Each point's mean of ``metric`` (or cost) with its 95% half-width, in its panels and
    on its line: at its value of ``axis``, or flat when it has none."""
    is_cost = metric in sweep.costs
    series = _Series({}, {}, {})
    for p in sweep.points:
        stats = p.cost_stats if is_cost else p.metrics
        mean, std, count = stats.get(metric, (None, None, 0))
        if mean is None:
            continue
        half = ci_half_width(std, count)
        key, label = layout.line_of[id(p)]
        bound = p.metrics.get(BOUND, (None,))[0] if metric == "leakage.report_accuracy" \
            else None
        exact = p.intervals.get(metric)
        for panel in layout.panels_of[id(p)]:
            if p.point.get(axis) is not None:
                series.lines.setdefault(panel, {}).setdefault(key, (label, []))[1].append(
                    (float(p.point[axis]), mean, half))
                if exact is not None:
                    series.exact.setdefault(panel, {}).setdefault(key, []).append(
                        (float(p.point[axis]), *exact))
                if bound is not None:
                    series.bounds.setdefault(panel, {}).setdefault(key, []).append(
                        (float(p.point[axis]), bound))
            else:
                series.flats.setdefault(panel, {}).setdefault(key, (label, []))[1].append(mean)
    return series


@dataclass
class _Scales:
    """A figure's axes: its lines' x range, which axes are logarithmic, and the smallest
    positive mean (where a band stops on a log y axis)."""

    lo: float
    hi: float
    logx: bool
    logy: bool
    floor: float


def _scales(spec: PlotSpec, series: _Series) -> _Scales:
    """The axes of a figure of ``series``: log where the spec says, or (automatic) where x
    is positive over more than a factor 50 and y over 1000."""
    ys_all = [m for panel in series.lines.values() for _, pts in panel.values()
              for _, m, _ in pts]
    ys_all += [m for panel in series.flats.values() for _, ms in panel.values() for m in ms]
    ylo, yhi = min(ys_all), max(ys_all)
    # e.g. raw-estimate errors over 5 decades
    logy = bool(spec.logy or (spec.logy is None and ylo > 0 and yhi / ylo > 1000))
    floor = min((y for y in ys_all if y > 0), default=1.0)
    xs_all = [x for panel in series.lines.values() for _, pts in panel.values()
              for x, _, _ in pts]
    lo, hi = min(xs_all), max(xs_all)
    logx = bool(spec.logx or (spec.logx is None and lo > 0 and hi / lo > 50))
    return _Scales(lo, hi, logx, logy, floor)


@dataclass
class _Look:
    """What every panel of one metric's figure shares: its lines in order, their colours,
    markers and dashes, the axes, the metric's range and the style."""

    metric: str
    axis: str
    is_cost: bool  # a cost: the notebook moves its lines sideways (``plot_draw.dodge``)
    declared: Any  # the metric's declared range (``simulator.results.metrics``), or None
    bounded: bool  # an undeclared metric whose values all lie in [0, 1]
    keys: list[str]  # every line's key, in order
    drawn: list[str]  # the keys with a line (not only flat points)
    style: dict[str, tuple[str, str, dict[str, Any]]]  # key -> (colour, marker, its kwargs)
    scales: _Scales
    paper: bool = False  # the paper style: no move sideways, the legend's own labels


def _line(ax: Any, look: _Look, key: str, xs: np.ndarray, ys: np.ndarray, hs: np.ndarray,
          exact: list[tuple[float, int, float, float]], label: str) -> tuple[Any, bool]:
    """One line of a panel with its band (an attack's exact interval, else the repeats'
    95% CI where it has a width); its handle, and whether a band was drawn."""
    color, marker, kw = look.style[key]
    sc = look.scales
    if look.is_cost and not look.paper:
        xs = dodge(xs, look.drawn.index(key), len(look.drawn), sc.lo, sc.hi, sc.logx)
    handle, = ax.plot(xs, ys, marker=marker, color=color, label=label, **kw)
    if len(exact) == len(xs):  # an attack: its trials' exact interval, not the repeats'
        exact_band(ax, xs, exact, color)
        return handle, True
    lo_band, hi_band = band(ys, hs, look.declared, look.bounded)
    if sc.logy:  # a band reaching 0 or below stops at the smallest mean drawn
        lo_band = np.maximum(lo_band, sc.floor)
    if not spread(ys, hs):
        return handle, False
    ax.fill_between(xs, lo_band, hi_band, color=color, alpha=BAND_ALPHA, linewidth=0)
    return handle, True


def _draw_panel(ax: Any, look: _Look, layout: Layout, series: _Series, panel: str,
                legend: dict[str, tuple[tuple[int, ...], bool, Any]]) -> bool:
    """One panel: each line with its band, the flat lines of points without the axis, the
    LDP bound and chance of a leakage figure; their handles added to ``legend`` (label ->
    (rank, flat, handle)). Whether a band was drawn."""
    banded = False
    name = (lambda lab: PAPER_LABELS.get(lab, lab)) if look.paper else (lambda lab: lab)
    for key in look.keys:
        color = look.style[key][0]
        if key in series.lines.get(panel, {}):
            label, pts = series.lines[panel][key]
            pts.sort()
            xs, ys, hs = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
            exact = sorted(series.exact.get(panel, {}).get(key, []))
            handle, drew = _line(ax, look, key, xs, ys, hs, exact, label)
            legend.setdefault(label, (layout.rank[key], False, handle))
            banded = banded or drew
        if key in series.flats.get(panel, {}):
            label, means = series.flats[panel][key]
            setting = look.axis.split(".", 1)[-1]
            if look.paper:
                setting = SYMBOLS.get(look.axis, setting)
            label = f"{label} (no {setting})"
            handle = ax.axhline(float(np.mean(means)), color=color, label=label,
                                linestyle=paper.FLAT_DASH if look.paper else "--")
            legend.setdefault(label, (layout.rank[key], True, handle))
        if key in series.bounds.get(panel, {}):
            bx, by = (np.array(v, dtype=float) for v in zip(*sorted(series.bounds[panel][key]),
                                                            strict=True))
            handle, = ax.plot(bx, by, color=color, **(paper.BOUND_KW if look.paper else
                                                      {"linestyle": "-.", "linewidth": 1}))
            legend.setdefault(name(BOUND_LABEL), ((10**6,), True, handle))
    if look.metric.startswith("leakage.") and look.metric != BOUND:
        handle = ax.axhline(CHANCE, linestyle=":", color="0.4", linewidth=1)
        legend.setdefault(name(CHANCE_LABEL), ((10**6 + 1,), True, handle))
    if layout.facet:
        ax.set_title(paper.panel_title(json.loads(panel)) if look.paper else
                     _panel_title(panel), fontsize="medium", y=TITLE_Y)
    if not look.paper:
        ax.grid(True, alpha=0.3)
    return banded


def _metric_figure(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]], axis: str,
                   layout: Layout, metric: str) -> Any:
    """One metric (or cost) against ``axis``: its panels and lines; None if no point has
    it."""
    series = _series(sweep, layout, axis, metric)
    if not series.lines:
        return None
    names = [n for n in layout.panels if n in series.lines or n in series.flats]
    keys = sorted({k for d in (*series.lines.values(), *series.flats.values()) for k in d},
                  key=layout.rank.__getitem__)
    colors = mpl[2]
    look = _Look(metric, axis, metric in sweep.costs, registry().get(metric),
                 sweep.bounded.get(metric, False), keys,
                 [k for k in keys if any(k in d for d in series.lines.values())],
                 {k: (colors[i % len(colors)], MARKERS[i % len(MARKERS)],
                      paper.line_kw(i) if spec.paper else {}) for i, k in enumerate(keys)},
                 _scales(spec, series), spec.paper)
    rows, cols = paper.grid_of(len(names), spec.inches) if spec.paper else \
        panel_grid(len(names))
    fig, grid = paper.frame(spec, mpl, len(names), legend_outside=len(names) == rows * cols)
    legend: dict[str, tuple[tuple[int, ...], bool, Any]] = {}  # label -> (rank, flat, handle)
    banded = False
    for i, panel in enumerate(names):
        banded = _draw_panel(grid[i // cols][i % cols], look, layout, series, panel,
                             legend) or banded
    xs = sorted({x for d in series.lines.values() for _, pts in d.values() for x, _, _ in pts})
    factor, unit = 1.0, None
    if spec.paper:
        ys = [m for d in series.lines.values() for _, pts in d.values() for _, m, _ in pts]
        factor, unit = paper.seconds_scale(metric, max(ys))
        paper.axes_look(grid, len(names), xs, look.scales.logx, look.scales.logy,
                        min(ys), max(ys), look.is_cost, factor)
    else:
        if look.scales.logx:
            grid[0][0].set_xscale("log")
        if look.scales.logy:
            grid[0][0].set_yscale("log")
    order = sorted(legend, key=lambda lab: legend[lab][:2])
    band_text = None if not banded else EXACT_BAND_TEXT if series.exact else BAND_TEXT
    hue = paper.SETTINGS.get(spec.hue, axis_label(spec.hue)) if spec.paper else \
        axis_label(spec.hue)
    paper.complete(spec, fig, grid, len(names), ([legend[lab][2] for lab in order], order),
                   hue, band_text, title(metric, axis),
                   paper.x_label(axis, xs) if spec.paper else axis_label(axis),
                   paper.y_label(metric, unit=unit) if spec.paper else axis_label(metric),
                   (xs, look.scales.logx))
    return fig
