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
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.results.metrics import CHANCE, registry
from ldpsim.simulator.results.plot_cache import figures_key, forget, kept, remember
from ldpsim.simulator.results.plot_layout import (  # noqa: F401 - re-exported: plots.axis_label
    BOUND,
    Layout,
    Sweep,
    axis_label,
    lay_out,
    layout_of,
    point_line,
    sweep_of,
)
from ldpsim.simulator.results.plot_spec import (  # noqa: F401 - re-exported: plots.check_table, ...
    COST_ALIASES,
    PlotSpec,
    check_table,
    default_metrics,
)
from ldpsim.simulator.results.summary import in_value_order, is_number, mean_std
from ldpsim.simulator.results.table import cell_text

#: the cost column a deployment's dropout figure puts on its x axis
DROPOUT = "virtual.dropout_rate"
BOUND_LABEL = "LDP bound e^ε/(1+e^ε) (dash-dot)"
CHANCE_LABEL = "chance: guessing (dotted)"
#: each line's marker (with its colour: the two cycle together)
MARKERS = "osD^vP*Xh<>p"
#: how far the cost figures move each line sideways, as a fraction of the x range (``_dodge``)
DODGE = 0.012
#: where a panel's title sits: on its top edge (given, so matplotlib does not look for
#: decorations above each panel, which none has, every time the figure is measured or drawn)
TITLE_Y = 1.0
#: what installs the figures' library (pyproject.toml's extra)
PLOT_INSTALL = "pip install 'ldpsim[plot]'"
#: the one line ``ldpsim run`` and ``ldpsim summary --plots`` print without it
NO_MATPLOTLIB = f"note: no plots: matplotlib is not installed ({PLOT_INSTALL})"


def _title(metric: str, axis: str) -> str:
    """A figure's title: what is drawn against what, and which direction is better."""
    better = registry().get(metric)
    return f"{axis_label(metric)} vs {axis_label(axis)}" + (
        f" ({better.direction})" if better is not None and better.better else "")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _panel_title(panel_id: str) -> str:
    values = json.loads(panel_id)
    return ", ".join(f"{axis_label(k)} = {cell_text(v)}" for k, v in values.items()
                     if v is not None)


def _ci_half_width(std: float | None, count: int) -> float:
    """Half-width of the 95% confidence interval of a mean of ``count`` repeats (t quantile)."""
    if std is None or count < 2:
        return 0.0
    # the t quantile, as scipy.stats.t.ppf computes it, without importing scipy.stats (~0.5 s)
    from scipy.special import stdtrit

    return float(stdtrit(count - 1, 0.975) * std / math.sqrt(count))


def _spread(ys: np.ndarray, hs: np.ndarray) -> bool:
    """Whether a line's band has a width to draw: some half-width beyond the rounding of
    equal repeats (the mean of three equal costs may differ from them in the last bit)."""
    return bool(np.any(hs > 1e-9 * np.abs(ys)))


def _dodge(xs: np.ndarray, i: int, k: int, lo: float, hi: float, log: bool) -> np.ndarray:
    """Line ``i`` of ``k`` moved sideways by ``DODGE`` of the x range (``lo`` .. ``hi``) per
    line, the lines centred on the true x: equal values stay visible as ``k`` markers side by
    side. On a log axis the move is a factor, the same at every x."""
    shift = (i - (k - 1) / 2) * DODGE
    if log and lo > 0:
        return xs * (hi / lo) ** shift if hi > lo else xs * 10.0 ** shift
    return xs + shift * ((hi - lo) or 1.0)


class PlotLibraryMissing(ImportError):
    """matplotlib is not installed: no figure can be drawn (``NO_MATPLOTLIB`` says so)."""


def _matplotlib() -> tuple[Any, Any, list[str]]:
    """matplotlib's Figure, its Agg canvas and its colour cycle (~0.6 s to import: only once
    there is a figure to draw); ``PlotLibraryMissing`` naming the extra without it."""
    try:
        from matplotlib import rcParams
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotLibraryMissing(f"matplotlib is not installed ({PLOT_INSTALL})") from None
    return Figure, FigureCanvasAgg, list(rcParams["axes.prop_cycle"].by_key().get("color")
                                         or ["C0"])


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of ``n`` panels: one row of up to two, two columns for three or four
    (a 2 x 2 grid, not a thin strip of three), then three columns."""
    cols = n if n <= 2 else 2 if n <= 4 else 3
    return -(-n // cols), cols


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
    return _draw(sweep, spec, _matplotlib())


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
    horizontal dashed lines at their mean. The cost figures move their lines a little
    sideways (``DODGE`` of the x range per line, centred on the true value): costs are often
    equal between protocols, and lines drawn over each other would hide all but the last.

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
        mpl = _matplotlib()
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
            fig.savefig(path, dpi=100 if fmt == "png" else "figure")
            paths.append(path)
    if paths:
        remember(out, key, spec.formats, paths)
    return paths


def _draw(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]]
          ) -> Iterator[tuple[str, Any]]:
    for axis in sweep.axes:
        layout = layout_of(sweep, spec, axis)
        for metric in sweep.chosen:
            fig = _metric_figure(sweep, spec, mpl, axis, layout, metric)
            if fig is not None:
                yield f"plot_{_safe(metric)}_vs_{_safe(axis)}", fig
    if sweep.rounds:
        yield "plot_per_round_bytes", _rounds_figure(sweep.rounds, mpl)
    if DROPOUT in sweep.costs and len({p.costs.get(DROPOUT) for p in sweep.points}) > 1:
        for metric in sweep.chosen:
            if metric not in sweep.costs:
                yield (f"plot_{_safe(metric)}_vs_dropout_rate",
                       _dropout_figure(sweep, spec, mpl, metric))


def _new_figure(mpl: tuple[Any, Any, list[str]], n: int, legend_outside: bool,
                sharey: bool = True) -> tuple[Any, Any]:
    """A figure of ``n`` panels (``panel_grid``), a shared x axis and (``sharey``) y axis;
    its grid of axes."""
    figure_cls, canvas, _ = mpl
    rows, cols = panel_grid(n)
    fig = figure_cls(figsize=(5.2 * cols + (1.8 if legend_outside else 0.4), 3.8 * rows))
    canvas(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=sharey)


def _finish(fig: Any, grid: Any, n: int, handles: list[Any], labels: list[str],
            title: str, xlabel: str, ylabel: str) -> None:
    """Axis labels, the legend (in a spare cell of the grid if there is one, else to the
    right) and the title; the spare cells hidden."""
    rows, cols = grid.shape
    for j in range(n, rows * cols):
        grid[j // cols][j % cols].axis("off")
        above = grid[j // cols - 1][j % cols]  # the lowest panel of that column
        above.xaxis.set_tick_params(labelbottom=True)
        above.set_xlabel(xlabel)
    for ax in grid[-1][: n - (rows - 1) * cols]:
        ax.set_xlabel(xlabel)
    for r in grid:
        r[0].set_ylabel(ylabel)
    where = dict(loc="center", bbox_to_anchor=None) if n < rows * cols else \
        dict(loc="center left", bbox_to_anchor=(1.0, 0.5))
    kw = dict(fontsize="small", title=title, title_fontsize="small", **where)
    if n < rows * cols:
        grid[-1][-1].legend(handles, labels, **kw)
    else:
        fig.legend(handles, labels, **kw)


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
        half = _ci_half_width(std, count)
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
    """What every panel of one metric's figure shares: its lines in order, their colours and
    markers, the axes and the metric's range."""

    metric: str
    axis: str
    is_cost: bool  # a cost: its lines are moved sideways (``_dodge``)
    declared: Any  # the metric's declared range (``simulator.results.metrics``), or None
    bounded: bool  # an undeclared metric whose values all lie in [0, 1]
    keys: list[str]  # every line's key, in order
    drawn: list[str]  # the keys with a line (not only flat points)
    style: dict[str, tuple[str, str]]  # line key -> (colour, marker)
    scales: _Scales


def _draw_panel(ax: Any, look: _Look, layout: Layout, series: _Series, panel: str,
                legend: dict[str, tuple[tuple[int, ...], bool, Any]]) -> None:
    """One panel: each line with its band, the flat lines of points without the axis, the
    LDP bound and chance of a leakage figure; their handles added to ``legend`` (label ->
    (rank, flat, handle))."""
    sc = look.scales
    for key in look.keys:
        color, marker = look.style[key]
        if key in series.lines.get(panel, {}):
            label, pts = series.lines[panel][key]
            pts.sort()
            xs, ys, hs = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
            if look.is_cost:
                xs = _dodge(xs, look.drawn.index(key), len(look.drawn), sc.lo, sc.hi, sc.logx)
            handle, = ax.plot(xs, ys, marker=marker, color=color, label=label)
            legend.setdefault(label, (layout.rank[key], False, handle))
            exact = sorted(series.exact.get(panel, {}).get(key, []))
            if len(exact) == len(xs):  # an attack: its trials' exact interval, not the repeats'
                _exact_band(ax, xs, exact, color)
            else:
                lo_band, hi_band = _band(ys, hs, look.declared, look.bounded)
                if sc.logy:  # a band reaching 0 or below stops at the smallest mean drawn
                    lo_band = np.maximum(lo_band, sc.floor)
                if _spread(ys, hs):
                    ax.fill_between(xs, lo_band, hi_band, color=color, alpha=0.18, linewidth=0)
        if key in series.flats.get(panel, {}):
            label, means = series.flats[panel][key]
            label = f"{label} (no {look.axis.split('.', 1)[-1]})"
            handle = ax.axhline(float(np.mean(means)), linestyle="--", color=color, label=label)
            legend.setdefault(label, (layout.rank[key], True, handle))
        if key in series.bounds.get(panel, {}):
            bx, by = (np.array(v, dtype=float) for v in zip(*sorted(series.bounds[panel][key]),
                                                            strict=True))
            handle, = ax.plot(bx, by, linestyle="-.", linewidth=1, color=color)
            legend.setdefault(BOUND_LABEL, ((10**6,), True, handle))
    if look.metric.startswith("leakage.") and look.metric != BOUND:
        handle = ax.axhline(CHANCE, linestyle=":", color="0.4", linewidth=1)
        legend.setdefault(CHANCE_LABEL, ((10**6 + 1,), True, handle))
    if layout.facet:
        ax.set_title(_panel_title(panel), fontsize="medium", y=TITLE_Y)
    ax.grid(True, alpha=0.3)


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
                 {k: (colors[i % len(colors)], MARKERS[i % len(MARKERS)])
                  for i, k in enumerate(keys)}, _scales(spec, series))
    rows, cols = panel_grid(len(names))
    fig, grid = _new_figure(mpl, len(names), legend_outside=len(names) == rows * cols)
    legend: dict[str, tuple[tuple[int, ...], bool, Any]] = {}  # label -> (rank, flat, handle)
    for i, panel in enumerate(names):
        _draw_panel(grid[i // cols][i % cols], look, layout, series, panel, legend)
    if look.scales.logx:
        grid[0][0].set_xscale("log")
    if look.scales.logy:
        grid[0][0].set_yscale("log")
    order = sorted(legend, key=lambda lab: legend[lab][:2])
    _finish(fig, grid, len(names), [legend[lab][2] for lab in order], order,
            f"{axis_label(spec.hue)} ({_band_text(series)})", axis_label(axis),
            axis_label(metric))
    lay_out(fig, _title(metric, axis))
    return fig


def _band_text(series: _Series) -> str:
    """What a figure's bands are: the repeats' 95% CI, or an attack's exact interval."""
    if series.exact:
        return "band: exact 95% interval of the attack's trials over the repeats"
    return "band: 95% CI over repeats"


#: a point of an attack resting on fewer trials than this is labelled with its count
FEW_TRIALS = 30


def _exact_band(ax: Any, xs: np.ndarray, exact: list[tuple[float, int, float, float]],
                color: Any) -> None:
    """An attack's band: at each point the exact 95% interval of its pooled trials; a point
    resting on few trials (the n − 1 point: one target per run) says how many."""
    _, trials, lo, hi = zip(*exact, strict=True)
    ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
    label_few_trials(ax, xs, trials, hi, color)


def label_few_trials(ax: Any, xs: Any, trials: Any, highs: Any, color: Any) -> None:
    """Label each point of an attack that rests on fewer than ``FEW_TRIALS`` trials with
    their count, above its band's top ``highs`` (these figures and ``Results.plot``)."""
    for x, t, h in zip(xs, trials, highs, strict=True):
        if 0 < t < FEW_TRIALS:
            ax.annotate(f"{t} trial{'s' if t != 1 else ''}", (x, h), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=7, color=color)


def _band(ys: np.ndarray, hs: np.ndarray, declared: Any, bounded: bool
          ) -> tuple[np.ndarray, np.ndarray]:
    """A line's 95% band, ``ys`` ± ``hs``, stopped at the metric's declared range (bytes and
    seconds at 0), or at [0, 1] for an undeclared metric whose values all lie there."""
    lo, hi = ys - hs, ys + hs
    if declared is not None and (declared.low, declared.high) != (None, None):
        lo = lo if declared.low is None else np.maximum(lo, declared.low)
        hi = hi if declared.high is None else np.minimum(hi, declared.high)
    elif bounded:
        lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
    return lo, hi


def _dropout_figure(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]],
                    metric: str) -> Any:
    """A metric against the dropout rate the points measured (``virtual.dropout_rate``, the
    mean over their repeats): one line per hue value and setting that no deployment key
    sweeps, through its points in order of their rate, with the metric's 95% band."""
    label_keys = [spec.hue] + [a for a in sweep.varying if a != spec.hue
                               and not a.startswith("deployment.")]
    lines: dict[str, tuple[str, list[tuple[float, float, float]]]] = {}
    for p in sweep.points:
        mean, std, count = p.metrics.get(metric, (None, None, 0))
        rate = p.costs.get(DROPOUT)
        if mean is None or rate is None:
            continue
        key, label = point_line(p, label_keys)
        lines.setdefault(key, (label, []))[1].append((rate, mean, _ci_half_width(std, count)))
    fig, grid = _new_figure(mpl, 1, legend_outside=True)
    ax = grid[0][0]
    colors = mpl[2]
    handles = []
    for i, (label, pts) in enumerate(lines.values()):
        xs, ys, hs = (np.array(v, dtype=float) for v in zip(*sorted(pts), strict=True))
        color = colors[i % len(colors)]
        handle, = ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=color, label=label)
        handles.append(handle)
        if _spread(ys, hs):
            lo, hi = _band(ys, hs, registry().get(metric), sweep.bounded.get(metric, False))
            ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
    ax.grid(True, alpha=0.3)
    _finish(fig, grid, 1, handles, [h.get_label() for h in handles],
            f"{axis_label(spec.hue)} (band: 95% CI over repeats)", axis_label(DROPOUT),
            axis_label(metric))
    lay_out(fig, _title(metric, DROPOUT))
    return fig


#: the by-round figure's panels: (per-round column, panel title's cost column, y label); the
#: wire bytes share a y axis, the report bits have their own
ROUND_PANELS = (
    ("bytes_up_per_agent", "comm.bytes_up_per_agent_mean", "wire bytes per agent (B)"),
    ("bytes_down_per_agent", "comm.bytes_down_per_agent_mean", "wire bytes per agent (B)"),
    ("report_bits", "comm.report_bits_per_agent_mean", "report bits per agent (bits)"),
)


def _round_means(rows: list[dict[str, Any]], proto: Any, column: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A protocol's rounds, and its mean of ``column`` in each (over its runs) with the 95%
    half-width; None when no round has it."""
    values: dict[float, list[float]] = {}
    for r in rows:
        if r["protocol"] == proto and r.get(column) is not None and is_number(r["round"]):
            values.setdefault(float(r["round"]), []).append(float(r[column]))
    if not values:
        return None
    xs = np.array(sorted(values))
    stats = [mean_std(values[x]) for x in xs]
    return (xs, np.array([m for m, _, _ in stats], dtype=float),
            np.array([_ci_half_width(sd, c) for _, sd, c in stats]))


def _rounds_figure(rows: list[dict[str, Any]], mpl: tuple[Any, Any, list[str]]) -> Any:
    """Wire bytes per asked agent, up and down (one y axis), and the report bits of one
    agent's report (a panel and axis of their own), by round: one line per protocol, its
    mean over the protocol's runs (every point and repeat) with their 95% confidence band."""
    from matplotlib.ticker import MaxNLocator

    protocols = in_value_order(r["protocol"] for r in rows)
    rounds = [r["round"] for r in rows if is_number(r["round"])]
    lo, hi = float(min(rounds)), float(max(rounds))
    n = len(ROUND_PANELS)
    fig, grid = _new_figure(mpl, n, legend_outside=False, sharey=False)
    cols = grid.shape[1]
    axes = [grid[i // cols][i % cols] for i in range(n)]
    axes[1].sharey(axes[0])  # up and down in bytes, on one scale
    colors = mpl[2]
    handles: dict[str, Any] = {}
    for ax, (column, cost, _) in zip(axes, ROUND_PANELS, strict=True):
        for i, proto in enumerate(protocols):
            means = _round_means(rows, proto, column)
            if means is None:
                continue
            xs, ys, hs = means
            xs = _dodge(xs, i, len(protocols), lo, hi, False)
            color = colors[i % len(colors)]
            handle, = ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=color,
                              label=str(proto))
            handles.setdefault(str(proto), handle)
            if _spread(ys, hs):
                ax.fill_between(xs, np.maximum(ys - hs, 0.0), ys + hs, color=color, alpha=0.18,
                                linewidth=0)
        ax.set_title(axis_label(cost).removesuffix(" (B)").removesuffix(" (bits)"),
                     fontsize="medium", y=TITLE_Y)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    labels = [str(p) for p in protocols if str(p) in handles]
    _finish(fig, grid, n, [handles[lab] for lab in labels], labels,
            "protocol (band: 95% CI over runs)", axis_label("round"), "")
    for ax, (_, _, ylabel) in zip(axes, ROUND_PANELS, strict=True):
        ax.set_ylabel(ylabel)
    lay_out(fig, "wire bytes and report bits per agent by round")
    return fig
