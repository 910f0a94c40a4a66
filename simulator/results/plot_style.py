"""The paper style of the figures (``[plot] style = "paper"``, ``--style paper``,
``Results.plot(style="paper")``): a figure as a paper's column holds it.

* Its width is declared (``[plot] width``, default ``PAPER_WIDTH`` = 3.5 in, one column of a
  two-column paper; 7 in spans both) and its height follows from its panels and its legend
  (``lay_out``); the files are written at exactly that size, as vector PDF and SVG (fonts
  embedded as TrueType in the PDF, glyphs as paths in the SVG), with a PNG for the report.
* No title: the caption is the paper's. The axis labels carry the units (bytes, bits, s) and
  the y label which direction is better (``y_label``).
* Lines are told apart by colour, marker and dash (``DASHES``), never by moving them sideways:
  every point is drawn at its swept value.
* Log axes label their decades, or 1-2-5 within a decade and a half, never the minor ticks
  (``readable_log``); the x axis is labelled at the swept values when they fit.
* Cost axes (bytes, bits, seconds) start at 0.
* A band is drawn only where there is one: with one repeat, none (``plot_draw.ci_half_width``).

``PAPER_RC`` holds the sizes (8 pt text, 7 pt ticks and legend); the drawing happens inside
``paper_context`` (matplotlib reads them when an artist is made and a file is written).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ldpsim.simulator.results import plot_draw as draw
from ldpsim.simulator.results import plot_layout
from ldpsim.simulator.results.metrics import registry
from ldpsim.simulator.results.plot_draw import panel_grid
from ldpsim.simulator.results.plot_layout import axis_label, value_label
from ldpsim.simulator.results.plot_spec import PlotSpec

#: the text and line sizes of a paper's figure (points)
PAPER_RC: dict[str, Any] = {
    "font.size": 8, "axes.labelsize": 8, "axes.titlesize": 8, "xtick.labelsize": 7,
    "ytick.labelsize": 7, "legend.fontsize": 7, "legend.title_fontsize": 7,
    "lines.linewidth": 1.0, "lines.markersize": 4, "axes.linewidth": 0.6,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "xtick.minor.width": 0.4,
    "ytick.minor.width": 0.4, "xtick.major.size": 3, "ytick.major.size": 3,
    "xtick.minor.size": 1.5, "ytick.minor.size": 1.5, "grid.linewidth": 0.4,
    "legend.handlelength": 2.8, "legend.columnspacing": 1.2, "legend.borderaxespad": 0.2,
    # fonts embedded whole (TrueType), as publishers ask; the SVG's glyphs as paths
    "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "path",
    # the same SVG from the same figure (its element ids)
    "svg.hashsalt": "ldpsim",
}
#: each line's dash, cycling with its colour and marker
DASHES: tuple[Any, ...] = ("-", (0, (4, 1.5)), (0, (6, 1.5, 1.5, 1.5)), (0, (1.5, 1.5)),
                           (0, (8, 2, 1.5, 2, 1.5, 2)), (0, (3, 1, 1, 1)))
#: an LDP bound's line in a paper figure (thin, its own dash: not one of a line's)
BOUND_KW: dict[str, Any] = {"linestyle": (0, (5, 1, 1, 1, 1, 1)), "linewidth": 0.7}
#: a PNG of a paper figure (the report's): dots per inch
PAPER_DPI = 200
#: the narrowest a panel gets (inches): a figure this much narrower holds fewer columns
MIN_PANEL = 1.6
#: the most panels side by side
MAX_COLUMNS = 4
#: a panel's height against its width, and the lowest and tallest it gets (inches)
ASPECT, MIN_PANEL_HEIGHT, MAX_PANEL_HEIGHT = 0.72, 1.5, 2.6
#: the space kept around the legend below the panels (inches)
LEGEND_PAD = 0.04
#: the settings' labels in a paper: what they are, then their symbol
SETTINGS = {"params.epsilon": "privacy budget ε", "data.n": "agents n",
            "data.theta": "Mallows dispersion θ", "data.d": "items d", "data.m": "items m",
            "data.sparsity": "sparsity (share of NULL answers)",
            "params.K": "queries per agent K", "params.queries": "queries per agent K",
            "deployment.round_deadline_s": "round deadline (s)",
            "deployment.availability": "availability (chance online per round)",
            "deployment.quota": "quota (share of asked agents)",
            "deployment.latency_ms": "one-way latency (ms)", "round": "round",
            "collusion.colluders": "colluding agents"}
#: a flat line's dash (a point without the axis, drawn at its mean): none of a line's
FLAT_DASH = (0, (7, 2))
#: a unit as a paper's axis spells it
UNITS = {"B": "bytes"}
#: the widest a tick label of a plain number gets before it is written as m×10^k
PLAIN_RANGE = (1e-3, 1e4)


@contextmanager
def paper_context() -> Iterator[None]:
    """matplotlib's settings of ``PAPER_RC`` while a paper figure is drawn or written."""
    from matplotlib import rc_context

    with rc_context(PAPER_RC):
        yield


def x_label(axis: str, values: list[float]) -> str:
    """A paper's x label of ``axis``, swept over ``values``: the setting and its unit;
    colluders as a fraction of the agents or as a count, as the values are."""
    if axis == "collusion.colluders":
        return ("colluding agents (fraction of n)" if all(0 <= v < 1 for v in values)
                else "colluding agents (count)")
    return SETTINGS.get(axis) or y_label(axis, with_direction=False)


def y_label(metric: str, with_direction: bool = True, chars: int = 0,
            unit: str | None = None) -> str:
    """A paper's y label of ``metric``: its declared label and unit (``UNITS``; ``unit``
    instead, e.g. ``µs`` of ``seconds_scale``), and which direction is better (``lower is
    better``); wrapped at ``chars`` characters a line."""
    m = registry().get(metric)
    if m is None:
        text = axis_label(metric)
    else:
        unit = unit or UNITS.get(m.unit, m.unit)
        text = m.label + (f" ({unit})" if unit else "")
        if with_direction and m.better:
            text += f", {m.direction}"
    return textwrap.fill(text, chars, break_long_words=False) if chars else text


def seconds_scale(metric: str, top: float) -> tuple[float, str | None]:
    """The factor a time axis's labels are multiplied by and its unit, for its largest value
    ``top``: µs below a millisecond, ms below a second; (1, None) for any other metric."""
    m = registry().get(metric)
    if m is None or m.unit != "s" or not top > 0:
        return 1.0, None
    return (1e6, "µs") if top < 1e-3 else (1e3, "ms") if top < 1 else (1.0, "s")


def grid_of(n: int, width: float) -> tuple[int, int]:
    """(rows, columns) of ``n`` panels in a figure ``width`` inches wide: as many columns as
    the width holds panels of ``MIN_PANEL`` (up to ``MAX_COLUMNS``), then rows; three or
    four panels in a column's width make a 2 x 2 grid (``panel_grid``)."""
    cols = max(1, min(n, MAX_COLUMNS, int(width // MIN_PANEL)))
    if cols == 2 and n in (3, 4):
        cols = panel_grid(n)[1]
    return -(-n // cols), cols


def panel_height(width: float, cols: int) -> float:
    """A panel's height (inches) in a figure ``width`` inches wide of ``cols`` columns."""
    return min(MAX_PANEL_HEIGHT, max(MIN_PANEL_HEIGHT, ASPECT * width / cols))


def panel_title(values: dict[str, Any]) -> str:
    """A paper panel's title: each facet setting's symbol and value (``ε = 0.5``), a
    protocol by its name."""
    return ", ".join(value_label(k, v, True) for k, v in values.items() if v is not None)


def new_figure(mpl: tuple[Any, Any, list[str]], n: int, width: float, sharey: bool = True
               ) -> tuple[Any, Any]:
    """A paper figure ``width`` inches wide of ``n`` panels (``grid_of``), a shared x axis
    and (``sharey``) y axis; its grid of axes. ``lay_out`` gives it its height."""
    figure_cls, canvas, _ = mpl
    rows, cols = grid_of(n, width)
    fig = figure_cls(figsize=(width, rows * panel_height(width, cols)))
    canvas(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=sharey)


def line_dash(i: int) -> Any:
    """Line ``i``'s dash (``DASHES``)."""
    return DASHES[i % len(DASHES)]


def line_kw(i: int) -> dict[str, Any]:
    """How a paper draws line ``i`` beside its colour and marker: its dash, and its marker
    hollow, so that lines drawn over each other (equal costs) all stay visible."""
    return {"linestyle": line_dash(i), "markerfacecolor": "none", "markeredgewidth": 0.9}


def finish(fig: Any, grid: Any, n: int, handles: list[Any], labels: list[str],
           legend_title: str | None, xlabel: str, ylabel: str) -> None:
    """A paper figure's axis labels (the y label wrapped to its panel's height) and its
    legend: in a spare cell of the grid if there is one, else below the panels, in as many
    columns as the figure's width holds; the spare cells hidden."""
    rows, cols = grid.shape
    for j in range(n, rows * cols):
        grid[j // cols][j % cols].axis("off")
        grid[j // cols - 1][j % cols].xaxis.set_tick_params(labelbottom=True)
    per_char = PAPER_RC["axes.labelsize"] * 0.52 / 72  # a character's width (inches)
    # a panel's axes: its height but its title's and tick labels' (about 0.5 in)
    chars = max(16, int((fig.get_size_inches()[1] / rows - 0.5) / per_char))
    if cols > 1:  # one label under the columns
        fig.supxlabel(xlabel, fontsize=PAPER_RC["axes.labelsize"], va="bottom")
    else:
        grid[-1][0].set_xlabel(xlabel)
    if rows > 1:  # one label beside the rows
        fig.supylabel(textwrap.fill(ylabel, rows * chars, break_long_words=False),
                      fontsize=PAPER_RC["axes.labelsize"])
    elif ylabel:
        grid[0][0].set_ylabel(textwrap.fill(ylabel, chars, break_long_words=False))
    kw = dict(title=legend_title, frameon=False)
    if n < rows * cols:
        grid[-1][-1].legend(handles, labels, loc="center", **kw)
        return
    renderer = fig.canvas.get_renderer()
    for ncol in range(len(labels), 0, -1):  # as many columns as fit the width
        legend = fig.legend(handles, labels, loc="lower center", ncol=ncol,
                            bbox_to_anchor=(0.5, 0.0), **kw)
        if ncol == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width - 4:
            return
        legend.remove()


def lay_out(fig: Any) -> None:
    """Give a paper figure its height and place its panels once: the panels keep the height
    ``new_figure`` gave them, a legend below them (``finish``) gets a strip of its own, and
    ``tight_layout`` fits the panels and their labels into the rest. The width stays the
    declared one. The figure is left without a layout engine: saving it draws it once."""
    from matplotlib.layout_engine import TightLayoutEngine

    w, h = fig.get_size_inches()
    strip = 0.0
    if fig.legends:
        box = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
        strip = box.height / fig.dpi + 2 * LEGEND_PAD
        fig.set_size_inches(w, h + strip)
        fig.legends[0].set_bbox_to_anchor((0.5, LEGEND_PAD / (h + strip)),
                                          transform=fig.transFigure)
    if fig.get_supxlabel():  # above the legend's strip
        fig.supxlabel(fig.get_supxlabel(), y=strip / (h + strip) + 0.01, va="bottom",
                      fontsize=PAPER_RC["axes.labelsize"])
    TightLayoutEngine(pad=0.3, h_pad=0.5, w_pad=0.5, rect=(0, strip / (h + strip), 1, 1)
                      ).execute(fig)


def number(v: float, powers: bool = False) -> str:
    """A tick label: a plain number within ``PLAIN_RANGE``, else (or with ``powers``: every
    label of an axis that reaches beyond it) m×10^k, 10^k for m = 1."""
    if v == 0 or (not powers and PLAIN_RANGE[0] <= abs(v) < PLAIN_RANGE[1]):
        return f"{v:g}"
    k = math.floor(math.log10(abs(v)) + 1e-9)
    m = round(v / 10 ** k, 6)
    return (f"$10^{{{k}}}$" if m == 1 else f"${m:g}\\times10^{{{k}}}$").replace("-", "−")


def readable_log(axis: Any, lo: float, hi: float, factor: float = 1.0) -> None:
    """Ticks a reader can read on a log ``axis`` (an Axes' xaxis or yaxis) spanning ``lo`` ..
    ``hi``: over two decades or more, a label at each decade; within less, at 1, 2 and 5
    times a power of ten; the minor ticks never labelled (no ``3×10^-2 4×10^-2``). The
    labels show the values times ``factor`` (``seconds_scale``)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    subs = (1.0,) if decades >= 2 else (1.0, 2.0, 5.0)
    # decades reaching beyond plain numbers: every one as a power of ten, alike
    powers = decades >= 2 and not (PLAIN_RANGE[0] <= lo * factor and
                                   hi * factor < PLAIN_RANGE[1])
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10)), numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _: number(v * factor, powers)))
    axis.set_minor_formatter(NullFormatter())


def swept_ticks(ax: Any, values: list[float], log: bool) -> bool:
    """Label the x axis of ``ax`` at the swept ``values`` when their labels fit side by side
    (estimated from their length at the tick font's size); whether they did."""
    values = sorted(set(values))
    if not 2 <= len(values) <= 10 or (log and values[0] <= 0):
        return False
    lo, hi = ax.get_xlim()
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    if not hi > lo or (log and lo <= 0):
        return False
    width = ax.get_position().width * ax.figure.get_size_inches()[0] * 72  # points
    size = PAPER_RC["xtick.labelsize"] * 0.6  # a character's width (points)
    labels = [number(v) for v in values]
    at = [(f(v) - f(lo)) / (f(hi) - f(lo)) * width for v in values]
    for i in range(1, len(values)):
        if at[i] - at[i - 1] < size * (len(labels[i]) + len(labels[i - 1])) / 2 + 3:
            return False
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_major_formatter(FixedFormatter(labels))
    ax.xaxis.set_minor_formatter(NullFormatter())
    return True


def axes_look(grid: Any, n: int, xs: list[float], logx: bool, logy: bool, ys_lo: float,
              ys_hi: float, from_zero: bool, factor: float = 1.0) -> None:
    """A paper figure's axes, once its lines are drawn: log axes with ``readable_log``'s
    ticks, a cost's y axis (``from_zero``) from 0, the y labels times ``factor``
    (``seconds_scale``), and a light grid (``swept_ticks`` labels the x axis at the swept
    values ``xs`` once the figure is laid out)."""
    first = grid[0][0]
    cols = grid.shape[1]
    panels = [grid[i // cols][i % cols] for i in range(n)]
    if logx:
        first.set_xscale("log")
        readable_log(first.xaxis, min(xs), max(xs))
    if logy:
        first.set_yscale("log")
        readable_log(first.yaxis, ys_lo, ys_hi, factor)
    else:
        if from_zero:  # 0 at the bottom; a margin above the highest point
            top = max(ax.dataLim.y1 for ax in panels)
            first.set_ylim(0, top * 1.06 if top > 0 else 1.0)
        if factor != 1.0:
            from matplotlib.ticker import FuncFormatter

            first.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * factor:g}"))
    for ax in panels:
        ax.grid(True, alpha=0.3)


def frame(spec: PlotSpec, mpl: tuple[Any, Any, list[str]], n: int, legend_outside: bool,
          sharey: bool = True) -> tuple[Any, Any]:
    """A new figure of ``n`` panels in ``spec``'s style, and its grid of axes."""
    if spec.paper:
        return new_figure(mpl, n, spec.inches, sharey)
    return draw.new_figure(mpl, n, legend_outside, sharey)


def complete(spec: PlotSpec, fig: Any, grid: Any, n: int, legend: tuple[list[Any], list[str]],
             what: str, band_text: str | None, title: str, xlabel: str,
             ylabel: str | list[str], xs: tuple[list[float], bool] = ([], False)) -> None:
    """A figure's labels, legend and layout in ``spec``'s style. The notebook's: a title,
    the legend titled by ``what`` the lines are and ``band_text`` (what their bands are;
    None: no band is drawn, and none is promised). The paper's: no title, the legend titled
    by ``what`` unless the lines are the protocols, the x axis labelled at the swept values
    ``xs`` (and whether it is logarithmic) where they fit. ``ylabel``: the first column's,
    or each panel's (a list)."""
    handles, labels = legend
    own = ylabel if isinstance(ylabel, str) else ""
    if spec.paper:
        finish(fig, grid, n, handles, labels, None if what == "protocol" else what, xlabel,
               own)
    else:
        draw.finish(fig, grid, n, handles, labels,
                    what if band_text is None else f"{what} ({band_text})", xlabel, own)
    if not isinstance(ylabel, str):
        cols = grid.shape[1]
        for i, text in enumerate(ylabel):
            grid[i // cols][i % cols].set_ylabel(text)
    if not spec.paper:
        plot_layout.lay_out(fig, title)
        return
    lay_out(fig)
    if xs[0]:
        swept_ticks(grid[0][0], xs[0], xs[1])
