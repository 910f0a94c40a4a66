"""Figures of a sweep: each metric's mean with a 95% confidence band against a swept setting.

What a scenario draws is its ``[plot]`` table (:class:`PlotSpec`): which metrics (``y``,
default: the ones the protocols' papers plot, ``Protocol.figure_metrics``), against which swept
settings (``x``, default: every numeric one), which setting tells the lines apart (``hue``,
default the protocol), which make one panel each (``facet``, default: every other swept
setting, up to ``MAX_PANELS`` panels, but not one paired with the x axis: that one varies along
each line), log axes, whether to add the communication and time
costs, and the file formats. The spec is stored beside the results (``scenario.json``), so
``ldpsim summary DIR --plots`` redraws the same figures.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.sweep.results import (
    COST_COLUMNS,
    cell_text,
    finite_number,
    group_points,
    is_number,
    point_id,
    record_metrics,
)

#: most panels (one per combination of the other swept settings) an automatic facet makes
MAX_PANELS = 12
#: human axis labels
LABELS = {"params.epsilon": "ε (privacy budget)", "data.n": "n (agents)",
          "data.theta": "θ (Mallows dispersion)",
          "data.d": "d (items)", "data.sparsity": "sparsity (fraction of NULL cells)",
          "params.K": "K", "params.queries": "queries per agent",
          "comm.bytes_up_per_agent_mean": "bytes up per agent",
          "comm.bytes_down_per_agent_mean": "bytes down per agent",
          "timing.agent_cpu_s_mean": "agent CPU s per agent", "timing.wall_s": "run wall time (s)",
          "collusion.colluders": "colluders (fraction or count)"}
#: short names a ``[plot] y`` may use for the cost columns
COST_ALIASES = {"bytes_up": "comm.bytes_up_per_agent_mean",
                "bytes_down": "comm.bytes_down_per_agent_mean",
                "agent_cpu_s": "timing.agent_cpu_s_mean", "wall_s": "timing.wall_s"}
FORMATS = ("png", "pdf", "svg")
AUTO = "auto"


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
    from difflib import get_close_matches

    def hint(name: Any, allowed: list[str]) -> str:
        close = get_close_matches(str(name), allowed, n=1)
        return f"; did you mean {close[0]!r}?" if close else ""

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
    """A readable label: ``params.epsilon`` -> ``ε (privacy budget)``, ``error_rate`` ->
    ``error rate``, ``data.m`` -> ``m``, ``leakage.report_accuracy`` -> ``leakage: report
    accuracy``."""
    if name in LABELS:
        return LABELS[name]
    if name.startswith("leakage."):
        return "leakage: " + name.split(".", 1)[1].replace("_", " ")
    return name.split(".", 1)[-1].replace("_", " ")


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


def _panels(p: Any, facet_keys: list[str], panel_sets: dict[str, list[str]]) -> list[str]:
    """The panels a point is drawn in: its own values of the facet settings; every value of a
    setting it lacks (a protocol without that parameter)."""
    combos = [[(a, p.point[a])] if a in p.point else
              [(a, json.loads(v)["v"]) for v in panel_sets[a]] for a in facet_keys]
    return [point_id(dict(c)) for c in itertools.product(*combos)]


def _ci_half_width(std: float | None, count: int) -> float:
    """Half-width of the 95% confidence interval of a mean of ``count`` repeats (t quantile)."""
    if std is None or count < 2:
        return 0.0
    # the t quantile, as scipy.stats.t.ppf computes it, without importing scipy.stats (~0.5 s)
    from scipy.special import stdtrit

    return float(stdtrit(count - 1, 0.975) * std / math.sqrt(count))


def plot(out_dir: str | Path, records: list[dict[str, Any]],
         spec: PlotSpec | None = None) -> list[Path]:
    """Draw each chosen metric's mean, with a 95% confidence band over the repeats, against
    each chosen swept setting; also the communication and time costs.

    Writes ``<out_dir>/plot_<metric>_vs_<axis>.<format>`` with one line per value of
    ``spec.hue`` (by default one per protocol), each with its own colour and marker, human
    axis labels, and one panel per combination of the facet settings. Bands of metrics that
    live in [0, 1] are clipped to it. Points without that axis (a protocol lacking the
    parameter, e.g. plain kwiksort has no epsilon) are drawn as horizontal dashed lines at
    their mean.

    Parameters
    ----------
    out_dir : str or Path
        Destination directory (created if missing).
    records : list of dict
        Result records.
    spec : PlotSpec, optional
        What to draw (default ``PlotSpec()``: every metric and cost against every numeric
        swept setting, lines per protocol, automatic facets).

    Returns
    -------
    list of Path
        The files written; ``[]`` when matplotlib is not installed or there is nothing to
        draw (no numeric setting with two values or more, e.g. a sweep of one point: then
        matplotlib is not even imported).
    """
    spec = spec or PlotSpec()
    out = Path(out_dir)
    axes, metric_names, points = group_points(records)

    def axis_values(a: str) -> list[Any]:
        return [p.point[a] for p in points if a in p.point]

    plot_axes = []
    for a in (spec.x or axes):
        if not a.startswith(("params.", "data.", "collusion.")):
            continue
        vals = axis_values(a)
        if vals and all(is_number(v) for v in vals) and len({float(v) for v in vals}) >= 2:
            plot_axes.append(a)
    if not plot_axes:
        return []
    try:  # ~0.6 s to import: only once there is a figure to draw
        from matplotlib import rcParams
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return []
    out.mkdir(parents=True, exist_ok=True)
    colors = rcParams["axes.prop_cycle"].by_key().get("color") or ["C0"]
    varying = [a for a in axes if len({point_id({"v": v}) for v in axis_values(a)}) > 1]
    costs = [c for c, _, _ in COST_COLUMNS if any(c in p.costs for p in points)]
    if spec.y:
        wanted = [COST_ALIASES.get(m, m) for m in spec.y]
        chosen = [m for m in wanted if m in metric_names or m in costs]
        if spec.costs:
            chosen += [c for c in costs if c not in chosen]
    else:
        chosen = metric_names + (costs if spec.costs else [])

    paths: list[Path] = []
    bounded = {m: all(0.0 <= v <= 1.0 for p in points for rec in p.records
                      for v in [finite_number(record_metrics(rec).get(m))] if v is not None)
               for m in metric_names}
    markers = "osD^vP*Xh<>p"
    for axis in plot_axes:
        # a setting that follows the axis (paired with it) varies along each line
        rest_varying = [a for a in varying if a not in (axis, spec.hue)
                        and not _follows(a, axis, points)]
        facet_keys = rest_varying if spec.facet is None else \
            [a for a in spec.facet if a != axis]
        # a point without a facet setting (kwiksort has no ε) is drawn in every panel
        panel_sets = {a: sorted({point_id({"v": p.point[a]}) for p in points if a in p.point})
                      for a in facet_keys}
        n_panels = math.prod(len(v) for v in panel_sets.values()) if facet_keys else 1
        facet = 1 < n_panels <= MAX_PANELS if spec.facet is None else bool(facet_keys)
        panels_of = {id(p): _panels(p, facet_keys, panel_sets) if facet else [""]
                     for p in points}

        label_keys = [spec.hue] + [a for a in rest_varying if not (facet and a in facet_keys)]
        line_of = {id(p): _line(p, label_keys) for p in points}  # (key, label) of each point
        for metric in chosen:
            is_cost = metric in costs
            # panel -> line key -> (label, [(x, mean, half-width of the 95% CI)])
            lines: dict[str, dict[str, tuple[str, list[tuple[float, float, float]]]]] = {}
            flats: dict[str, dict[str, tuple[str, list[float]]]] = {}
            for p in points:
                if is_cost:
                    mean, half = p.costs.get(metric), 0.0
                else:
                    mean, std, count = p.metrics.get(metric, (None, None, 0))
                    half = _ci_half_width(std, count)
                if mean is None:
                    continue
                key, label = line_of[id(p)]
                for panel in panels_of[id(p)]:
                    if axis in p.point:
                        lines.setdefault(panel, {}).setdefault(key, (label, []))[1].append(
                            (float(p.point[axis]), mean, half))
                    else:
                        flats.setdefault(panel, {}).setdefault(key, (label, []))[1].append(mean)
            if not lines:
                continue
            names = sorted(set(lines) | set(flats))
            cols = min(3, len(names))
            rows = -(-len(names) // cols)
            fig = Figure(figsize=(5.2 * cols + 1.8, 3.8 * rows))
            FigureCanvasAgg(fig)
            grid = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
            style: dict[str, tuple[str, str]] = {}  # line label -> (colour, marker)
            ys_all = [m for panel in lines.values() for _, pts in panel.values()
                      for _, m, _ in pts]
            ys_all += [m for panel in flats.values() for _, ms in panel.values() for m in ms]
            ylo, yhi = min(ys_all), max(ys_all)
            # e.g. raw-estimate errors over 5 decades
            logy = spec.logy or (spec.logy is None and ylo > 0 and yhi / ylo > 1000)
            floor = min((y for y in ys_all if y > 0), default=1.0)
            xs_all: list[float] = []
            for i, panel in enumerate(names):
                ax = grid[i // cols][i % cols]
                for label, pts in lines.get(panel, {}).values():
                    pts.sort()
                    xs, ys, hs = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
                    color, marker = style.setdefault(label, (
                        colors[len(style) % len(colors)], markers[len(style) % len(markers)]))
                    ax.plot(xs, ys, marker=marker, color=color, label=label)
                    lo, hi = ys - hs, ys + hs
                    if not is_cost and bounded.get(metric):
                        lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
                    if logy:  # a band reaching 0 or below stops at the smallest mean drawn
                        lo = np.maximum(lo, floor)
                    if hs.any():
                        ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
                    xs_all += list(xs)
                for label, means in flats.get(panel, {}).values():
                    color, _ = style.setdefault(label, (colors[len(style) % len(colors)], ""))
                    ax.axhline(float(np.mean(means)), linestyle="--", color=color,
                               label=f"{label} (no {axis.split('.', 1)[-1]})")
                if facet:
                    ax.set_title(_panel_title(panel), fontsize="medium")
                ax.grid(True, alpha=0.3)
            for j in range(len(names), rows * cols):
                grid[j // cols][j % cols].set_visible(False)
                above = grid[j // cols - 1][j % cols]  # the lowest panel of that column
                above.xaxis.set_tick_params(labelbottom=True)
                above.set_xlabel(axis_label(axis))
            lo, hi = min(xs_all), max(xs_all)
            ax0 = grid[0][0]
            if spec.logx or (spec.logx is None and lo > 0 and hi / lo > 50):
                ax0.set_xscale("log")
            if logy:
                ax0.set_yscale("log")
            for ax in grid[-1]:
                ax.set_xlabel(axis_label(axis))
            for r in grid:
                r[0].set_ylabel(axis_label(metric))
            handles, labels = [], []
            for ax in grid.flat:
                for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                    if lab not in labels:
                        handles.append(h)
                        labels.append(lab)
            band = "" if is_cost else " (band: 95% CI over repeats)"
            fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5),
                       fontsize="small", title=f"{axis_label(spec.hue)}{band}",
                       title_fontsize="small")
            fig.suptitle(f"{axis_label(metric)} vs {axis_label(axis)}")
            fig.tight_layout()
            for fmt in spec.formats:
                path = out / f"plot_{_safe(metric)}_vs_{_safe(axis)}.{fmt}"
                fig.savefig(path, dpi=100 if fmt == "png" else "figure", bbox_inches="tight")
                paths.append(path)
    return paths
