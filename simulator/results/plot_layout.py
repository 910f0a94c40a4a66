"""What a sweep's figures hold and where: the settings and metrics drawn, each axis's
panels and lines, and the labels they carry.

``sweep_of`` chooses, from the records and the ``[plot]`` spec (``plot_spec``), the numeric
settings to draw against and the metrics and costs to draw; ``layout_of`` lays out one x axis:
which settings make panels (at most ``MAX_PANELS``) and which tell the lines apart, each line's
label and its place in the legend. ``simulator.results.plots`` draws them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ldpsim.simulator.results.metrics import registry
from ldpsim.simulator.results.plot_spec import COST_ALIASES, PlotSpec
from ldpsim.simulator.results.summary import (
    COST_COLUMNS,
    finite_number,
    group_points,
    in_value_order,
    is_number,
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
#: the settings' symbols, in a paper figure's panel titles and line labels (``ε = 0.5``)
SYMBOLS = {"params.epsilon": "ε", "data.theta": "θ", "data.n": "n", "data.m": "m",
           "data.d": "d", "params.K": "K", "params.queries": "K",
           "data.sparsity": "sparsity", "collusion.colluders": "colluders",
           "deployment.round_deadline_s": "deadline",
           "deployment.availability": "availability", "deployment.quota": "quota",
           "deployment.latency_ms": "latency"}
#: what a leakage figure draws beside the attacks' accuracies
BOUND = "leakage.report_bound"


def axis_label(name: str) -> str:
    """A readable label: a setting's (``params.epsilon`` -> ``ε (privacy budget)``,
    ``data.m`` -> ``m``), a metric's or cost's as declared (``kendall_tau`` -> ``Kendall tau
    distance (normalised)``, ``comm.bytes_up_per_agent_mean`` -> ``wire bytes up per agent (B)``;
    ``simulator.results.metrics``), else the name in words."""
    if name in LABELS:
        return LABELS[name]
    if not name.startswith(("params.", "data.", "collusion.")):
        described = registry().get(name)
        if described is not None:
            return described.axis_label
    return name.split(".", 1)[-1].replace("_", " ")


def value_label(key: str, value: Any, paper: bool = False) -> str:
    """A setting's value as a line's label or a panel's title names it: a protocol by its
    name, a setting by its label (a paper's: by its symbol, ``SYMBOLS``) and value."""
    if key == "protocol":
        return str(value)
    if paper:
        return f"{SYMBOLS.get(key, axis_label(key))} = {cell_text(value)}"
    return f"{axis_label(key)}={cell_text(value)}"


def point_line(p: Any, label_keys: list[str], paper: bool = False) -> tuple[str, str]:
    """A point's line: its key (the values of ``label_keys``) and its label, the first value
    with the others in parentheses, e.g. ``ldp_kwiksort_rr (theta=0.5)`` (a paper's:
    ``ldp_kwiksort_rr (θ = 0.5)``)."""
    values = {a: (p.protocol if a == "protocol" else p.point.get(a)) for a in label_keys}
    parts = [value_label(a, v, paper) for a, v in values.items() if v is not None]
    label = parts[0] + (f" ({', '.join(parts[1:])})" if parts[1:] else "") if parts else ""
    return point_id(values), label


def _panels(p: Any, facet_keys: list[str], panel_sets: dict[str, list[Any]]) -> list[str]:
    """The panels a point is drawn in: its own values of the facet settings; every value of a
    setting it lacks (a protocol without that parameter)."""
    combos = [[(a, p.point[a])] if a in p.point else [(a, v) for v in panel_sets[a]]
              for a in facet_keys]
    return [point_id(dict(c)) for c in itertools.product(*combos)]


@dataclass
class Sweep:
    """What ``plots.figures`` draws from: the records' points and the figures' choices."""

    points: list[Any]
    axes: list[str]  # the numeric swept settings to plot against
    chosen: list[str]  # metrics and cost columns to plot
    costs: list[str]  # the cost columns among them
    varying: list[str]  # swept settings with more than one value
    bounded: dict[str, bool]  # metric -> all its values in [0, 1]
    rounds: list[dict[str, Any]]  # the per-round rows, when a run had more than one round


def sweep_of(records: list[dict[str, Any]], spec: PlotSpec) -> Sweep | None:
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
    return Sweep(points, plot_axes, chosen, costs,
                  [a for a in axes if len(in_value_order(axis_values(a))) > 1], bounded, rounds)


@dataclass
class Layout:
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


def layout_of(sweep: Sweep, spec: PlotSpec, axis: str) -> Layout:
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
    line_of = {id(p): point_line(p, label_keys, spec.style == "paper") for p in points}
    rank = {line_of[id(p)][0]: tuple(ranks[a].get(point_id({"v": value(p, a)}), len(ranks[a]))
                                     for a in label_keys) for p in points}
    return Layout(facet, panels, {id(p): _panels(p, facet_keys, panel_sets) if facet
                                   else [""] for p in points}, line_of, rank)


#: the space kept between the panels and a legend drawn beside them, and around the legend
#: where it reaches past the figure (inches)
LEGEND_PAD = 0.1


def lay_out(fig: Any, title: str) -> None:
    """Place a figure's panels once, before it is saved as it is (no second, "tight" pass
    when saving): ``tight_layout`` fits the panels, their labels, titles and the figure's
    title to the figure; a legend drawn beside the panels (``Figure.legend`` anchored at the
    figure's right edge) then gets a strip of its own: the figure is widened by the legend's
    width (and made taller, the panels centred, when the legend is taller than it), the
    panels keeping their size and place. The figure is left without a layout engine: saving
    it draws it once.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A figure with an Agg canvas, its panels drawn.
    title : str
        The figure's title (``Figure.suptitle``), above the panels.
    """
    from matplotlib.layout_engine import TightLayoutEngine

    text = fig.suptitle(title)
    # tight_layout's placement, the engine left off the figure: ``Figure.tight_layout`` leaves
    # a placeholder engine on it, and saving a figure with an engine draws it twice
    TightLayoutEngine().execute(fig)
    if not fig.legends:
        return
    legend = fig.legends[0]
    box = legend.get_window_extent(fig.canvas.get_renderer())
    w, h = fig.get_size_inches()
    need_w = box.width / fig.dpi + 2 * LEGEND_PAD
    need_h = max(h, box.height / fig.dpi + 2 * LEGEND_PAD)
    new_w, lift = w + need_w, (need_h - h) / 2
    sp = fig.subplotpars
    fig.set_size_inches(new_w, need_h)
    fig.subplots_adjust(left=sp.left * w / new_w, right=sp.right * w / new_w,
                        bottom=(sp.bottom * h + lift) / need_h, top=(sp.top * h + lift) / need_h)
    legend.set_bbox_to_anchor((w / new_w, 0.5), transform=fig.transFigure)
    x, y = text.get_position()  # centred over the panels, not the panels and the legend
    text.set_position((x * w / new_w, 1.0 - (1.0 - y) * h / need_h))
