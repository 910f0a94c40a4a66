"""Figures of a sweep: each metric's mean with a 95% confidence band against a swept setting.

What a scenario draws is its ``[plot]`` table (:class:`PlotSpec`): which metrics (``y``,
default: the ones the protocols' papers plot, ``Protocol.figure_metrics``), against which swept
settings (``x``, default: every numeric one), which setting tells the lines apart (``hue``,
default the protocol), which make one panel each (``facet``, default: every other swept
setting, up to ``MAX_PANELS`` panels, but not one paired with the x axis: that one varies along
each line), log axes, whether to add the communication and time costs, and the file formats.
The spec is stored beside the results (``scenario.json``), so ``ldpsim summary DIR --plots``
redraws the same figures.

Panels, lines and legends follow the settings' values (``results.in_value_order``: numbers
by value, then the sweep's order); ``figures`` yields each figure, ``plot`` writes them.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.results.metrics import CHANCE, registry
from ldpsim.simulator.results.summary import (
    COST_COLUMNS,
    finite_number,
    group_points,
    in_value_order,
    is_number,
    mean_std,
    per_round,
    point_id,
    record_metrics,
    value_rank,
)
from ldpsim.simulator.results.table import cell_text

#: most panels (one per combination of the other swept settings) an automatic facet makes
MAX_PANELS = 12
#: human axis labels
LABELS = {"params.epsilon": "ε (privacy budget)", "data.n": "n (agents)",
          "data.theta": "θ (Mallows dispersion)",
          "data.d": "d (items)", "data.sparsity": "sparsity (fraction of NULL cells)",
          "params.K": "K", "params.queries": "queries per agent",
          "collusion.colluders": "colluders (fraction or count)",
          "deployment.round_deadline_s": "round deadline (virtual s)",
          "deployment.availability": "availability (chance online per round)",
          "deployment.quota": "quota (share of asked agents)",
          "deployment.latency_ms": "one-way latency (ms)"}
#: what a leakage figure draws beside the attacks' accuracies
BOUND = "leakage.report_bound"
#: the cost column a deployment's dropout figure puts on its x axis
DROPOUT = "virtual.dropout_rate"
BOUND_LABEL = "LDP bound e^ε/(1+e^ε) (dash-dot)"
CHANCE_LABEL = "chance: guessing (dotted)"
#: short names a ``[plot] y`` may use for the cost columns
COST_ALIASES = {"bytes_up": "comm.bytes_up_per_agent_mean",
                "bytes_down": "comm.bytes_down_per_agent_mean",
                "agent_cpu_s": "timing.agent_cpu_s_mean", "wall_s": "timing.wall_s",
                "virtual_wall_s": "virtual.wall_s", "dropout_rate": "virtual.dropout_rate"}
FORMATS = ("png", "pdf", "svg")
AUTO = "auto"
#: each line's marker (with its colour: the two cycle together)
MARKERS = "osD^vP*Xh<>p"
#: how far the cost figures move each line sideways, as a fraction of the x range (``_dodge``)
DODGE = 0.012
#: what installs the figures' library (pyproject.toml's extra)
PLOT_INSTALL = "pip install 'ldpsim[plot]'"
#: the one line ``ldpsim run`` and ``ldpsim summary --plots`` print without it
NO_MATPLOTLIB = f"note: no plots: matplotlib is not installed ({PLOT_INSTALL})"


@dataclass(frozen=True)
class PlotSpec:
    """What to draw (a scenario's ``[plot]`` table).

    Attributes
    ----------
    y : tuple of str
        Metrics to plot (names ``evaluate`` returns, ``leakage.*``, or cost columns and their
        aliases ``bytes_up``, ``bytes_down``, ``agent_cpu_s``, ``wall_s``); empty: every metric.
    x : tuple of str
        Swept settings to plot against (``params.*``, ``data.*``, ``collusion.colluders``);
        empty: every numeric one with at least two values.
    hue : str
        The setting whose values are the lines (default ``protocol``).
    facet : tuple of str or None
        Settings that make one panel per combination; None: every other varying setting when
        that gives 2..``MAX_PANELS`` panels (else they go into the line labels); empty: none.
    logx, logy : bool or None
        Logarithmic axes; None: automatic (x positive over more than a factor 50, y over 1000).
    costs : bool
        Also plot bytes per agent and time against each x.
    formats : tuple of str
        File formats, among ``png``, ``pdf``, ``svg``.
    """

    y: tuple[str, ...] = ()
    x: tuple[str, ...] = ()
    hue: str = "protocol"
    facet: tuple[str, ...] | None = None
    logx: bool | None = None
    logy: bool | None = None
    costs: bool = True
    formats: tuple[str, ...] = ("png",)

    def as_table(self) -> dict[str, Any]:
        """The spec as a JSON/TOML-able table (``PlotSpec.from_table`` reads it back)."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            out[k] = AUTO if v is None else (list(v) if isinstance(v, tuple) else v)
        return out

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> PlotSpec:
        """Read a table written by ``as_table`` (already validated: ``check_table``)."""
        kw: dict[str, Any] = {}
        for k, v in table.items():
            if k in ("x", "y", "facet", "formats"):
                kw[k] = None if v == AUTO else tuple([v] if isinstance(v, str) else v)
            elif k in ("logx", "logy"):
                kw[k] = None if v == AUTO else bool(v)
            else:
                kw[k] = v
        return cls(**kw)


def check_table(table: dict[str, Any], axes: list[str], metrics: list[str] | None
                ) -> list[str]:
    """Every problem of a ``[plot]`` table, each naming the key and the allowed values.

    Parameters
    ----------
    table : dict
        The raw ``[plot]`` table.
    axes : list of str
        The scenario's swept settings (``params.*``, ``data.*``, ``collusion.colluders``).
    metrics : list of str or None
        Every metric the scenario's protocols declare (None: a protocol declares none, so
        ``y`` is not checked).
    """
    def names(key: str, value: Any, allowed: list[str], what: str) -> None:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or \
                not all(isinstance(v, str) for v in items):
            errs.append(f"[plot] {key}: got {value!r}; allowed: a name or a list of names of "
                        f"{what}: {', '.join(allowed) or '(none)'}")
            return
        for v in items:
            if v not in allowed:
                errs.append(f"[plot] {key}: {v!r} is not one of the {what}; allowed: "
                            f"{', '.join(allowed) or '(none)'}{hint(v, allowed)}")

    errs: list[str] = []
    keys = list(PlotSpec.__dataclass_fields__)
    for k, v in table.items():
        if k not in keys:
            errs.append(f"[plot] {k}: unknown key; allowed: {', '.join(keys)}{hint(k, keys)}")
        elif k == "y":
            if metrics is not None:
                names(k, v, [*metrics, *COST_ALIASES, *(c for c, _, _ in COST_COLUMNS)],
                      "metrics of this scenario's protocols or costs")
            elif not isinstance(v, str | list):
                errs.append(f"[plot] y: got {v!r}; allowed: a metric name or a list of them")
        elif k == "x":
            names(k, v, axes, "swept settings of this scenario")
        elif k == "hue":
            if not isinstance(v, str) or v not in ["protocol", *axes]:
                allowed = ["protocol", *axes]
                errs.append(f"[plot] hue: got {v!r}; allowed: one of {', '.join(allowed)}"
                            f"{hint(v, allowed)}")
        elif k == "facet":
            if v not in (AUTO, []):
                names(k, v, ["protocol", *axes], 'swept settings of this scenario (or "auto", '
                      "or [] for none)")
        elif k in ("logx", "logy"):
            if v != AUTO and not isinstance(v, bool):
                errs.append(f'[plot] {k}: got {v!r}; allowed: true, false or "auto"')
        elif k == "costs":
            if not isinstance(v, bool):
                errs.append(f"[plot] costs: got {v!r}; allowed: true/false")
        elif k == "formats":
            names(k, v, list(FORMATS), "file formats")
    return errs


def default_metrics(figure_metrics: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The metrics a scenario plots when ``[plot] y`` is not given: the union of its
    protocols' ``figure_metrics`` in order, or () (every metric) if one declares none."""
    if not figure_metrics or any(not f for f in figure_metrics):
        return ()
    out: dict[str, None] = {}
    for f in figure_metrics:
        out.update(dict.fromkeys(f))
    return tuple(out)


def axis_label(name: str) -> str:
    """A readable label: a setting's (``params.epsilon`` -> ``ε (privacy budget)``,
    ``data.m`` -> ``m``), a metric's or cost's as declared (``kendall_tau`` -> ``Kendall tau
    distance (normalised)``, ``comm.bytes_up_per_agent_mean`` -> ``bytes up per agent (B)``;
    ``simulator.results.metrics``), else the name in words."""
    if name in LABELS:
        return LABELS[name]
    if not name.startswith(("params.", "data.", "collusion.")):
        described = registry().get(name)
        if described is not None:
            return described.axis_label
    return name.split(".", 1)[-1].replace("_", " ")


def _title(metric: str, axis: str) -> str:
    """A figure's title: what is drawn against what, and which direction is better."""
    better = registry().get(metric)
    return f"{axis_label(metric)} vs {axis_label(axis)}" + (
        f" ({better.direction})" if better is not None and better.better else "")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _value_label(key: str, value: Any) -> str:
    return str(value) if key == "protocol" else f"{axis_label(key)}={cell_text(value)}"


def _panel_title(panel_id: str) -> str:
    values = json.loads(panel_id)
    return ", ".join(f"{axis_label(k)} = {cell_text(v)}" for k, v in values.items()
                     if v is not None)


def _line(p: Any, label_keys: list[str]) -> tuple[str, str]:
    """A point's line: its key (the values of ``label_keys``) and its label, the first value
    with the others in parentheses, e.g. ``ldp_kwiksort_rr (theta=0.5)``."""
    values = {a: (p.protocol if a == "protocol" else p.point.get(a)) for a in label_keys}
    parts = [_value_label(a, v) for a, v in values.items() if v is not None]
    label = parts[0] + (f" ({', '.join(parts[1:])})" if parts[1:] else "") if parts else ""
    return point_id(values), label


def _panels(p: Any, facet_keys: list[str], panel_sets: dict[str, list[Any]]) -> list[str]:
    """The panels a point is drawn in: its own values of the facet settings; every value of a
    setting it lacks (a protocol without that parameter)."""
    combos = [[(a, p.point[a])] if a in p.point else [(a, v) for v in panel_sets[a]]
              for a in facet_keys]
    return [point_id(dict(c)) for c in itertools.product(*combos)]


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


@dataclass
class _Sweep:
    """What ``figures`` draws from: the records' points and the figures' choices."""

    points: list[Any]
    axes: list[str]  # the numeric swept settings to plot against
    chosen: list[str]  # metrics and cost columns to plot
    costs: list[str]  # the cost columns among them
    varying: list[str]  # swept settings with more than one value
    bounded: dict[str, bool]  # metric -> all its values in [0, 1]
    rounds: list[dict[str, Any]]  # the per-round rows, when a run had more than one round


def _sweep(records: list[dict[str, Any]], spec: PlotSpec) -> _Sweep | None:
    """What to draw, or None when there is no figure (no numeric setting with two values or
    more, e.g. a sweep of one point)."""
    axes, metric_names, points = group_points(records)

    def axis_values(a: str) -> list[Any]:  # None: no limit (a deployment's inf)
        return [p.point[a] for p in points if p.point.get(a) is not None]

    plot_axes = []
    for a in (spec.x or axes):
        if not a.startswith(("params.", "data.", "collusion.", "deployment.")):
            continue
        vals = axis_values(a)
        if vals and all(is_number(v) for v in vals) and len({float(v) for v in vals}) >= 2:
            plot_axes.append(a)
    if not plot_axes:
        return None
    costs = [c for c, _, _ in COST_COLUMNS if any(c in p.costs for p in points)]
    if spec.y:
        wanted = [COST_ALIASES.get(m, m) for m in spec.y]
        chosen = [m for m in wanted if m in metric_names or m in costs]
        if spec.costs:
            chosen += [c for c in costs if c not in chosen]
    else:
        chosen = metric_names + (costs if spec.costs else [])
    if "leakage.report_accuracy" in chosen and BOUND in chosen:  # drawn on that figure
        chosen.remove(BOUND)
    bounded = {m: all(0.0 <= v <= 1.0 for p in points for rec in p.records
                      for v in [finite_number(record_metrics(rec).get(m))] if v is not None)
               for m in metric_names}
    rounds: list[dict[str, Any]] = []
    if spec.costs and any(len((r.get("comm") or {}).get("per_round") or []) > 1
                          for r in records):
        rounds = per_round(records)[1]
    return _Sweep(points, plot_axes, chosen, costs,
                  [a for a in axes if len(in_value_order(axis_values(a))) > 1], bounded, rounds)


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
    sweep = _sweep(records, spec)
    if sweep is None:
        return iter(())
    return _draw(sweep, spec, _matplotlib())


def plot(out_dir: str | Path, records: list[dict[str, Any]], spec: PlotSpec | None = None,
         note: Callable[[str], Any] | None = None) -> list[Path]:
    """Draw each chosen metric's mean, with a 95% confidence band over the repeats, against
    each chosen swept setting; also the communication and time costs, likewise, and the
    bytes per agent by round.

    Writes ``<out_dir>/plot_<metric>_vs_<axis>.<format>`` with one line per value of
    ``spec.hue`` (by default one per protocol), each with its own colour and marker, human
    axis labels, and one panel per combination of the facet settings. Panels, lines and the
    legend follow the settings' values, numbers by value (``in_value_order``). Bands of
    metrics that live in [0, 1] are clipped to it, those of costs at 0. Points without that
    axis (a protocol lacking the parameter, e.g. plain kwiksort has no epsilon) are drawn as
    horizontal dashed lines at their mean. The cost figures move their lines a little
    sideways (``DODGE`` of the x range per line, centred on the true value): costs are often
    equal between protocols, and lines drawn over each other would hide all but the last.

    When a run had more than one round and ``spec.costs``, also
    ``plot_per_round_bytes.<format>``: the bytes each asked agent sent and received in each
    round (``per_round.csv``), one line per protocol, its mean over the protocol's runs with
    their 95% confidence band.

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
        matplotlib is not even imported).
    """
    spec = spec or PlotSpec()
    try:
        drawn = figures(records, spec)
    except PlotLibraryMissing:
        if note is not None:
            note(NO_MATPLOTLIB)
        return []
    out = Path(out_dir)
    paths: list[Path] = []
    for stem, fig in drawn:
        out.mkdir(parents=True, exist_ok=True)
        for fmt in spec.formats:
            path = out / f"{stem}.{fmt}"
            fig.savefig(path, dpi=100 if fmt == "png" else "figure", bbox_inches="tight")
            paths.append(path)
    return paths


@dataclass
class _Layout:
    """One x axis's panels and lines: which panels (in order) and lines each point is in."""

    facet: bool
    panels: list[str]  # every panel's id, in order
    panels_of: dict[int, list[str]]  # id(point) -> its panels
    line_of: dict[int, tuple[str, str]]  # id(point) -> (line key, label)
    rank: dict[str, tuple[int, ...]]  # line key -> its place (the label settings' values)


def _follows(setting: str, axis: str, points: list[Any]) -> bool:
    """Whether ``setting`` takes one value per value of ``axis`` (keys paired in ``[sweep]
    paired``): then a panel or a line per value of it would hold one point each."""
    seen: dict[str, str] = {}
    for p in points:
        if setting in p.point and axis in p.point:
            x, v = point_id({"v": p.point[axis]}), point_id({"v": p.point[setting]})
            if seen.setdefault(x, v) != v:
                return False
    return bool(seen)


def _layout(sweep: _Sweep, spec: PlotSpec, axis: str) -> _Layout:
    points = sweep.points
    # a setting that follows the axis (paired with it) varies along each line
    rest_varying = [a for a in sweep.varying if a not in (axis, spec.hue)
                    and not _follows(a, axis, points)]
    facet_keys = rest_varying if spec.facet is None else [a for a in spec.facet if a != axis]
    # a point without a facet setting (kwiksort has no ε) is drawn in every panel
    panel_sets = {a: in_value_order(p.point.get(a) for p in points) for a in facet_keys}
    n_panels = math.prod(len(v) for v in panel_sets.values()) if facet_keys else 1
    facet = 1 < n_panels <= MAX_PANELS if spec.facet is None else bool(facet_keys)
    panels = ([point_id(dict(c)) for c in itertools.product(
        *([(a, v) for v in panel_sets[a]] for a in facet_keys))] if facet else [""])
    label_keys = [spec.hue] + [a for a in rest_varying if not (facet and a in facet_keys)]

    def value(p: Any, a: str) -> Any:
        return p.protocol if a == "protocol" else p.point.get(a)

    ranks = {a: value_rank(value(p, a) for p in points) for a in label_keys}
    line_of = {id(p): _line(p, label_keys) for p in points}
    rank = {line_of[id(p)][0]: tuple(ranks[a].get(point_id({"v": value(p, a)}), len(ranks[a]))
                                     for a in label_keys) for p in points}
    return _Layout(facet, panels, {id(p): _panels(p, facet_keys, panel_sets) if facet
                                   else [""] for p in points}, line_of, rank)


def _draw(sweep: _Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]]
          ) -> Iterator[tuple[str, Any]]:
    for axis in sweep.axes:
        layout = _layout(sweep, spec, axis)
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


def _new_figure(mpl: tuple[Any, Any, list[str]], n: int, legend_outside: bool
                ) -> tuple[Any, Any]:
    """A figure of ``n`` panels (``panel_grid``), shared axes; its grid of axes."""
    figure_cls, canvas, _ = mpl
    rows, cols = panel_grid(n)
    fig = figure_cls(figsize=(5.2 * cols + (1.8 if legend_outside else 0.4), 3.8 * rows))
    canvas(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)


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


def _metric_figure(sweep: _Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]], axis: str,
                   layout: _Layout, metric: str) -> Any:
    """One metric (or cost) against ``axis``: its panels and lines; None if no point has
    it."""
    is_cost = metric in sweep.costs
    declared = registry().get(metric)
    # panel -> line key -> (label, [(x, mean, half-width of the 95% CI)])
    lines: dict[str, dict[str, tuple[str, list[tuple[float, float, float]]]]] = {}
    flats: dict[str, dict[str, tuple[str, list[float]]]] = {}
    # a leakage figure's LDP bound, where the runs state one: panel -> line key -> [(x, bound)]
    bounds: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for p in sweep.points:
        stats = p.cost_stats if is_cost else p.metrics
        mean, std, count = stats.get(metric, (None, None, 0))
        if mean is None:
            continue
        half = _ci_half_width(std, count)
        key, label = layout.line_of[id(p)]
        bound = p.metrics.get(BOUND, (None,))[0] if metric == "leakage.report_accuracy" \
            else None
        for panel in layout.panels_of[id(p)]:
            if p.point.get(axis) is not None:
                lines.setdefault(panel, {}).setdefault(key, (label, []))[1].append(
                    (float(p.point[axis]), mean, half))
                if bound is not None:
                    bounds.setdefault(panel, {}).setdefault(key, []).append(
                        (float(p.point[axis]), bound))
            else:
                flats.setdefault(panel, {}).setdefault(key, (label, []))[1].append(mean)
    if not lines:
        return None
    names = [n for n in layout.panels if n in lines or n in flats]
    keys = sorted({k for d in (*lines.values(), *flats.values()) for k in d},
                  key=layout.rank.__getitem__)
    drawn = [k for k in keys if any(k in d for d in lines.values())]  # keys with a line
    colors = mpl[2]
    style = {k: (colors[i % len(colors)], MARKERS[i % len(MARKERS)]) for i, k in enumerate(keys)}
    rows, cols = panel_grid(len(names))
    fig, grid = _new_figure(mpl, len(names), legend_outside=len(names) == rows * cols)
    ys_all = [m for panel in lines.values() for _, pts in panel.values() for _, m, _ in pts]
    ys_all += [m for panel in flats.values() for _, ms in panel.values() for m in ms]
    ylo, yhi = min(ys_all), max(ys_all)
    # e.g. raw-estimate errors over 5 decades
    logy = spec.logy or (spec.logy is None and ylo > 0 and yhi / ylo > 1000)
    floor = min((y for y in ys_all if y > 0), default=1.0)
    xs_all = [x for panel in lines.values() for _, pts in panel.values() for x, _, _ in pts]
    lo, hi = min(xs_all), max(xs_all)
    logx = bool(spec.logx or (spec.logx is None and lo > 0 and hi / lo > 50))
    legend: dict[str, tuple[tuple[int, ...], bool, Any]] = {}  # label -> (rank, flat, handle)
    for i, panel in enumerate(names):
        ax = grid[i // cols][i % cols]
        for key in keys:
            color, marker = style[key]
            if key in lines.get(panel, {}):
                label, pts = lines[panel][key]
                pts.sort()
                xs, ys, hs = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
                if is_cost:
                    xs = _dodge(xs, drawn.index(key), len(drawn), lo, hi, logx)
                handle, = ax.plot(xs, ys, marker=marker, color=color, label=label)
                legend.setdefault(label, (layout.rank[key], False, handle))
                lo_band, hi_band = _band(ys, hs, declared, sweep.bounded.get(metric, False))
                if logy:  # a band reaching 0 or below stops at the smallest mean drawn
                    lo_band = np.maximum(lo_band, floor)
                if _spread(ys, hs):
                    ax.fill_between(xs, lo_band, hi_band, color=color, alpha=0.18,
                                    linewidth=0)
            if key in flats.get(panel, {}):
                label, means = flats[panel][key]
                label = f"{label} (no {axis.split('.', 1)[-1]})"
                handle = ax.axhline(float(np.mean(means)), linestyle="--", color=color,
                                    label=label)
                legend.setdefault(label, (layout.rank[key], True, handle))
            if key in bounds.get(panel, {}):
                bx, by = (np.array(v, dtype=float) for v in zip(*sorted(bounds[panel][key]),
                                                                strict=True))
                handle, = ax.plot(bx, by, linestyle="-.", linewidth=1, color=color)
                legend.setdefault(BOUND_LABEL, ((10**6,), True, handle))
        if metric.startswith("leakage.") and metric != BOUND:
            handle = ax.axhline(CHANCE, linestyle=":", color="0.4", linewidth=1)
            legend.setdefault(CHANCE_LABEL, ((10**6 + 1,), True, handle))
        if layout.facet:
            ax.set_title(_panel_title(panel), fontsize="medium")
        ax.grid(True, alpha=0.3)
    if logx:
        grid[0][0].set_xscale("log")
    if logy:
        grid[0][0].set_yscale("log")
    order = sorted(legend, key=lambda lab: legend[lab][:2])
    _finish(fig, grid, len(names), [legend[lab][2] for lab in order], order,
            f"{axis_label(spec.hue)} (band: 95% CI over repeats)", axis_label(axis),
            axis_label(metric))
    fig.suptitle(_title(metric, axis))
    fig.tight_layout()
    return fig


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


def _dropout_figure(sweep: _Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]],
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
        key, label = _line(p, label_keys)
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
    fig.suptitle(_title(metric, DROPOUT))
    fig.tight_layout()
    return fig


def _rounds_figure(rows: list[dict[str, Any]], mpl: tuple[Any, Any, list[str]]) -> Any:
    """Bytes per asked agent, up and down, by round: one line per protocol, its mean over
    the protocol's runs (every point and repeat) with their 95% confidence band."""
    from matplotlib.ticker import MaxNLocator

    protocols = in_value_order(r["protocol"] for r in rows)
    rounds = [r["round"] for r in rows if is_number(r["round"])]
    lo, hi = float(min(rounds)), float(max(rounds))
    fig, grid = _new_figure(mpl, 2, legend_outside=True)
    colors = mpl[2]
    handles: list[Any] = []
    for ax, way in zip(grid[0], ("up", "down"), strict=True):
        column = f"bytes_{way}_per_agent"
        for i, proto in enumerate(protocols):
            values: dict[float, list[float]] = {}
            for r in rows:
                if r["protocol"] == proto and r[column] is not None and is_number(r["round"]):
                    values.setdefault(float(r["round"]), []).append(float(r[column]))
            if not values:
                continue
            xs = np.array(sorted(values))
            stats = [mean_std(values[x]) for x in xs]
            ys = np.array([m for m, _, _ in stats], dtype=float)
            hs = np.array([_ci_half_width(sd, c) for _, sd, c in stats])
            xs = _dodge(xs, i, len(protocols), lo, hi, False)
            color = colors[i % len(colors)]
            handle, = ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=color,
                              label=str(proto))
            if way == "up":
                handles.append(handle)
            if _spread(ys, hs):
                ax.fill_between(xs, np.maximum(ys - hs, 0.0), ys + hs, color=color, alpha=0.18,
                                linewidth=0)
        ax.set_title(axis_label(f"comm.bytes_{way}_per_agent_mean"), fontsize="medium")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    _finish(fig, grid, 2, handles, [h.get_label() for h in handles],
            "protocol (band: 95% CI over runs)", axis_label("round"), "bytes per agent")
    fig.suptitle("bytes per agent by round")
    fig.tight_layout()
    return fig
