"""Two figures beside the metrics' and costs' (``plots``): the wire bytes and report bits per
agent by round (a run of more than one round), and a metric against the dropout rate a
``[deployment]`` measured. Each in the ``[plot]`` style (``plot_style``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.results import plot_draw as draw
from ldpsim.simulator.results import plot_style as paper
from ldpsim.simulator.results.metrics import registry
from ldpsim.simulator.results.plot_layout import Sweep, axis_label, point_line
from ldpsim.simulator.results.plot_spec import PlotSpec
from ldpsim.simulator.results.summary import in_value_order, is_number, mean_std

#: the cost column a deployment's dropout figure puts on its x axis
DROPOUT = "virtual.dropout_rate"
#: the by-round figure's panels: (per-round column, panel title's cost column, y label); the
#: wire bytes share a y axis, the report bits have their own
ROUND_PANELS = (
    ("bytes_up_per_agent", "comm.bytes_up_per_agent_mean", "wire bytes per agent (B)"),
    ("bytes_down_per_agent", "comm.bytes_down_per_agent_mean", "wire bytes per agent (B)"),
    ("report_bits", "comm.report_bits_per_agent_mean", "report bits per agent (bits)"),
)
#: the by-round figure's panels in a paper: (title, y label), short enough for a column
PAPER_ROUND_PANELS = (("wire bytes up", "bytes per agent"),
                      ("wire bytes down", "bytes per agent"),
                      ("report bits", "bits per agent"))
#: the by-round figure's title (the notebook's)
ROUNDS_TITLE = "wire bytes and report bits per agent by round"


def dropout_figure(sweep: Sweep, spec: PlotSpec, mpl: tuple[Any, Any, list[str]],
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
        key, label = point_line(p, label_keys, spec.paper)
        lines.setdefault(key, (label, []))[1].append(
            (rate, mean, draw.ci_half_width(std, count)))
    fig, grid = paper.frame(spec, mpl, 1, legend_outside=True)
    ax = grid[0][0]
    colors = mpl[2]
    handles = []
    banded = False
    for i, (label, pts) in enumerate(lines.values()):
        xs, ys, hs = (np.array(v, dtype=float) for v in zip(*sorted(pts), strict=True))
        color = colors[i % len(colors)]
        handle, = ax.plot(xs, ys, marker=draw.MARKERS[i % len(draw.MARKERS)], color=color,
                          label=label, **(paper.line_kw(i) if spec.paper else {}))
        handles.append(handle)
        if draw.spread(ys, hs):
            lo, hi = draw.band(ys, hs, registry().get(metric), sweep.bounded.get(metric, False))
            ax.fill_between(xs, lo, hi, color=color, alpha=draw.BAND_ALPHA, linewidth=0)
            banded = True
    if spec.paper:
        paper.axes_look(grid, 1, [], False, False, 0.0, 0.0, False)
        ylabel = paper.y_label(metric)
    else:
        ax.grid(True, alpha=0.3)
        ylabel = axis_label(metric)
    paper.complete(spec, fig, grid, 1, (handles, [h.get_label() for h in handles]),
                   axis_label(spec.hue), draw.BAND_TEXT if banded else None,
                   draw.title(metric, DROPOUT), axis_label(DROPOUT), ylabel)
    return fig


def round_means(rows: list[dict[str, Any]], proto: Any, column: str
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
            np.array([draw.ci_half_width(sd, c) for _, sd, c in stats]))


def rounds_figure(rows: list[dict[str, Any]], spec: PlotSpec, mpl: tuple[Any, Any, list[str]]
                  ) -> Any:
    """Wire bytes per asked agent, up and down (one y axis), and the report bits of one
    agent's report (a panel and axis of their own), by round: one line per protocol, its
    mean over the protocol's runs (every point and repeat) with their 95% confidence band.
    The notebook moves the lines sideways (``plot_draw.dodge``); the paper tells them apart
    by marker and dash, and starts each axis at 0."""
    from matplotlib.ticker import MaxNLocator

    protocols = in_value_order(r["protocol"] for r in rows)
    rounds = [r["round"] for r in rows if is_number(r["round"])]
    lo, hi = float(min(rounds)), float(max(rounds))
    n = len(ROUND_PANELS)
    fig, grid = paper.frame(spec, mpl, n, legend_outside=False, sharey=False)
    cols = grid.shape[1]
    axes = [grid[i // cols][i % cols] for i in range(n)]
    axes[1].sharey(axes[0])  # up and down in bytes, on one scale
    colors = mpl[2]
    handles: dict[str, Any] = {}
    banded = False
    for j, (ax, (column, cost, _)) in enumerate(zip(axes, ROUND_PANELS, strict=True)):
        for i, proto in enumerate(protocols):
            means = round_means(rows, proto, column)
            if means is None:
                continue
            xs, ys, hs = means
            if not spec.paper:
                xs = draw.dodge(xs, i, len(protocols), lo, hi, False)
            color = colors[i % len(colors)]
            handle, = ax.plot(xs, ys, marker=draw.MARKERS[i % len(draw.MARKERS)], color=color,
                              label=str(proto), **(paper.line_kw(i) if spec.paper else {}))
            handles.setdefault(str(proto), handle)
            if draw.spread(ys, hs):
                ax.fill_between(xs, np.maximum(ys - hs, 0.0), ys + hs, color=color,
                                alpha=draw.BAND_ALPHA, linewidth=0)
                banded = True
        ax.set_title(PAPER_ROUND_PANELS[j][0] if spec.paper else
                     axis_label(cost).removesuffix(" (B)").removesuffix(" (bits)"),
                     fontsize="medium", y=draw.TITLE_Y)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    if spec.paper:  # from 0, a margin above the highest point (bytes up and down: one axis)
        for group in (axes[:2], axes[2:]):
            top = max(0.0, *(a.dataLim.y1 for a in group))
            group[0].set_ylim(0, top * 1.06 or 1.0)
    labels = [str(p) for p in protocols if str(p) in handles]
    paper.complete(spec, fig, grid, n, ([handles[lab] for lab in labels], labels), "protocol",
                   "band: 95% CI over runs" if banded else None, ROUNDS_TITLE,
                   axis_label("round"), [y for _, y in PAPER_ROUND_PANELS] if spec.paper
                   else [y for _, _, y in ROUND_PANELS])
    return fig
