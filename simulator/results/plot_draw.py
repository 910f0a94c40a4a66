"""What every figure of a sweep is drawn with: matplotlib (imported once there is a figure to
draw), the panels' grid, the 95% bands and their edges, a line's look, and the legend, labels
and title of the notebook style (``plot_style`` holds the paper style's).

``plots`` draws the metrics' and costs' figures with them, ``plot_rounds`` the figures by round
and against the dropout rate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ldpsim.simulator.results.metrics import registry
from ldpsim.simulator.results.plot_layout import axis_label

#: what installs the figures' library (pyproject.toml's extra)
PLOT_INSTALL = "pip install 'ldpsim[plot]'"
#: the one line ``ldpsim run`` and ``ldpsim summary --plots`` print without it
NO_MATPLOTLIB = f"note: no plots: matplotlib is not installed ({PLOT_INSTALL})"
#: each line's marker (with its colour: the two cycle together)
MARKERS = "osD^vP*Xh<>p"
#: how far the notebook's cost figures move each line sideways, as a fraction of the x range
#: (``dodge``); the paper style tells the lines apart by marker and dash instead
DODGE = 0.012
#: where a panel's title sits: on its top edge (given, so matplotlib does not look for
#: decorations above each panel, which none has, every time the figure is measured or drawn)
TITLE_Y = 1.0
#: a point of an attack resting on fewer trials than this is labelled with its count
FEW_TRIALS = 30
#: a band's opacity
BAND_ALPHA = 0.18


class PlotLibraryMissing(ImportError):
    """matplotlib is not installed: no figure can be drawn (``NO_MATPLOTLIB`` says so)."""


def load_matplotlib() -> tuple[Any, Any, list[str]]:
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


def title(metric: str, axis: str) -> str:
    """A notebook figure's title: what is drawn against what, and which direction is
    better."""
    better = registry().get(metric)
    return f"{axis_label(metric)} vs {axis_label(axis)}" + (
        f" ({better.direction})" if better is not None and better.better else "")


def ci_half_width(std: float | None, count: int) -> float:
    """Half-width of the 95% confidence interval of a mean of ``count`` repeats (t quantile);
    0 for one repeat (no interval: the figures draw no band, the tables print ``n/a``)."""
    if std is None or count < 2:
        return 0.0
    # the t quantile, as scipy.stats.t.ppf computes it, without importing scipy.stats (~0.5 s)
    from scipy.special import stdtrit

    return float(stdtrit(count - 1, 0.975) * std / math.sqrt(count))


def spread(ys: np.ndarray, hs: np.ndarray) -> bool:
    """Whether a line's band has a width to draw: some half-width beyond the rounding of
    equal repeats (the mean of three equal costs may differ from them in the last bit)."""
    return bool(np.any(hs > 1e-9 * np.abs(ys)))


def dodge(xs: np.ndarray, i: int, k: int, lo: float, hi: float, log: bool) -> np.ndarray:
    """Line ``i`` of ``k`` moved sideways by ``DODGE`` of the x range (``lo`` .. ``hi``) per
    line, the lines centred on the true x: equal values stay visible as ``k`` markers side by
    side. On a log axis the move is a factor, the same at every x."""
    shift = (i - (k - 1) / 2) * DODGE
    if log and lo > 0:
        return xs * (hi / lo) ** shift if hi > lo else xs * 10.0 ** shift
    return xs + shift * ((hi - lo) or 1.0)


def band(ys: np.ndarray, hs: np.ndarray, declared: Any, bounded: bool
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


def exact_band(ax: Any, xs: np.ndarray, exact: list[tuple[float, int, float, float]],
               color: Any) -> None:
    """An attack's band: at each point the exact 95% interval of its pooled trials; a point
    resting on few trials (the n − 1 point: one target per run) says how many."""
    _, trials, lo, hi = zip(*exact, strict=True)
    ax.fill_between(xs, lo, hi, color=color, alpha=BAND_ALPHA, linewidth=0)
    label_few_trials(ax, xs, trials, hi, color)


def label_few_trials(ax: Any, xs: Any, trials: Any, highs: Any, color: Any) -> None:
    """Label each point of an attack that rests on fewer than ``FEW_TRIALS`` trials with
    their count, above its band's top ``highs`` (these figures and ``Results.plot``)."""
    for x, t, h in zip(xs, trials, highs, strict=True):
        if 0 < t < FEW_TRIALS:
            ax.annotate(f"{t} trial{'s' if t != 1 else ''}", (x, h), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=7, color=color)


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of ``n`` panels: one row of up to two, two columns for three or four
    (a 2 x 2 grid, not a thin strip of three), then three columns."""
    cols = n if n <= 2 else 2 if n <= 4 else 3
    return -(-n // cols), cols


def new_figure(mpl: tuple[Any, Any, list[str]], n: int, legend_outside: bool,
               sharey: bool = True) -> tuple[Any, Any]:
    """A notebook figure of ``n`` panels (``panel_grid``), a shared x axis and (``sharey``)
    y axis; its grid of axes."""
    figure_cls, canvas, _ = mpl
    rows, cols = panel_grid(n)
    fig = figure_cls(figsize=(5.2 * cols + (1.8 if legend_outside else 0.4), 3.8 * rows))
    canvas(fig)
    return fig, fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=sharey)


def finish(fig: Any, grid: Any, n: int, handles: list[Any], labels: list[str],
           legend_title: str, xlabel: str, ylabel: str) -> None:
    """A notebook figure's axis labels, the legend (in a spare cell of the grid if there is
    one, else to the right) and the title; the spare cells hidden."""
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
    kw = dict(fontsize="small", title=legend_title, title_fontsize="small", **where)
    if n < rows * cols:
        grid[-1][-1].legend(handles, labels, **kw)
    else:
        fig.legend(handles, labels, **kw)


#: what the repeats' bands are (a notebook legend's title says it where one is drawn)
BAND_TEXT = "band: 95% CI over repeats"
#: what an attack's bands are
EXACT_BAND_TEXT = "band: exact 95% interval of the attack's trials over the repeats"
