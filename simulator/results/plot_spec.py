"""What a scenario's figures show: its ``[plot]`` table (:class:`PlotSpec`) and its check.

Which metrics (``y``, default: the ones the protocols' papers plot, ``Protocol.figure_metrics``),
against which swept settings (``x``, default: every numeric one), which setting tells the lines
apart (``hue``, default the protocol), which make one panel each (``facet``), log axes, whether
to add the communication and time costs, and the file formats. The spec is stored beside the
results (``scenario.json``), so ``ldpsim summary DIR --plots`` redraws the same figures;
``simulator.results.plots`` draws them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.results.summary import COST_COLUMNS

#: short names a ``[plot] y`` may use for the cost columns
COST_ALIASES = {"bytes_up": "comm.bytes_up_per_agent_mean",
                "bytes_down": "comm.bytes_down_per_agent_mean",
                "report_bits": "comm.report_bits_per_agent_mean",
                "agent_cpu_s": "timing.agent_cpu_s_mean", "wall_s": "timing.wall_s",
                "virtual_wall_s": "virtual.wall_s", "dropout_rate": "virtual.dropout_rate"}
FORMATS = ("png", "pdf", "svg")
AUTO = "auto"
#: the figures' looks: ``notebook`` (a figure per screen: a title, a legend beside the panels)
#: and ``paper`` (a column of a paper: vector files, no title, lines told apart by marker and
#: dash; ``plot_style``)
STYLES = ("notebook", "paper")
#: the width of a paper-style figure: one column of a two-column paper (inches)
PAPER_WIDTH = 3.5
#: the widths a ``[plot] width`` may take (inches): a narrow column to a landscape page
WIDTH_RANGE = (1.5, 12.0)
#: the files a paper-style figure is written as when ``[plot] formats`` is not given: vector
#: files for the paper, a PNG for the report
PAPER_FORMATS = ("png", "pdf", "svg")


@dataclass(frozen=True)
class PlotSpec:
    """What to draw (a scenario's ``[plot]`` table).

    Attributes
    ----------
    y : tuple of str
        Metrics to plot (names ``evaluate`` returns, ``leakage.*``, or cost columns and their
        aliases ``bytes_up``, ``bytes_down`` (wire bytes), ``report_bits``, ``agent_cpu_s``,
        ``wall_s``); empty: every metric.
    x : tuple of str
        Swept settings to plot against (``params.*``, ``data.*``, ``collusion.colluders``);
        empty: every numeric one with at least two values.
    hue : str
        The setting whose values are the lines (default ``protocol``).
    facet : tuple of str or None
        Settings that make one panel per combination; None: every other varying setting when
        that gives 2..``MAX_PANELS`` panels (``plot_layout``; else they go into the line
        labels); empty: none.
    logx, logy : bool or None
        Logarithmic axes; None: automatic (x positive over more than a factor 50, y over 1000).
    costs : bool
        Also plot the costs against each x: wire bytes and report bits per agent, and time.
    formats : tuple of str
        File formats, among ``png``, ``pdf``, ``svg``.
    style : str
        ``notebook`` (the default: a title naming what is drawn and which direction is
        better, the legend beside the panels) or ``paper`` (``plot_style``: no title, the
        direction in the y label, lines told apart by marker and dash, the legend below,
        ``width`` inches wide; vector files).
    width : float or None
        A paper-style figure's width in inches; None: ``PAPER_WIDTH`` (3.5, one column of a
        two-column paper; 7 spans both). The notebook style sizes its figures itself.
    """

    y: tuple[str, ...] = ()
    x: tuple[str, ...] = ()
    hue: str = "protocol"
    facet: tuple[str, ...] | None = None
    logx: bool | None = None
    logy: bool | None = None
    costs: bool = True
    formats: tuple[str, ...] = ("png",)
    style: str = "notebook"
    width: float | None = None

    @property
    def paper(self) -> bool:
        """Whether the figures are drawn in the paper style."""
        return self.style == "paper"

    @property
    def inches(self) -> float:
        """A paper-style figure's width (inches): ``width``, or ``PAPER_WIDTH``."""
        return PAPER_WIDTH if self.width is None else float(self.width)

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
            elif k == "width":
                kw[k] = None if v == AUTO else float(v)
            else:
                kw[k] = v
        return cls(**kw)


def styled(spec: PlotSpec | None, style: str | None) -> PlotSpec | None:
    """``spec`` drawn in ``style`` (``--style``; None: as it is): a paper style asked of a
    notebook spec writes the vector files too (``PAPER_FORMATS``)."""
    if style is None or (spec is not None and spec.style == style):
        return spec
    spec = spec or PlotSpec()
    formats = PAPER_FORMATS if style == "paper" else spec.formats
    return replace(spec, style=style, formats=formats)


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
        elif k == "style":
            if v not in STYLES:
                errs.append(f"[plot] style: got {v!r}; allowed: "
                            + ", ".join(f'"{s}"' for s in STYLES) + hint(str(v), STYLES))
        elif k == "width":
            lo, hi = WIDTH_RANGE
            if v != AUTO and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not lo <= v <= hi):
                errs.append(f"[plot] width: got {v!r}; allowed: a paper-style figure's width in "
                            f'inches, {lo:g} to {hi:g} (e.g. 3.5 for one column, 7 for two), '
                            'or "auto"')
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


#: what ``[report] figures`` may name beside metrics, costs and swept settings: ``costs`` (the
#: cost figures against the report's axes, and by round) and ``all`` (every figure ``ldpsim
#: run`` draws)
FIGURE_SETS = ("costs", "all")
#: the keys of a ``[report]`` table
REPORT_KEYS = ("figures",)
#: the keys of a ``[plot]`` table that say what is drawn (the others say how)
WHAT_KEYS = ("x", "y", "costs")


def check_report(table: dict[str, Any], axes: list[str], metrics: list[str] | None
                 ) -> list[str]:
    """Every problem of a ``[report]`` table, each naming the key and the allowed values.

    Parameters
    ----------
    table : dict
        The raw ``[report]`` table.
    axes : list of str
        The scenario's swept settings.
    metrics : list of str or None
        Every metric the scenario's protocols declare (None: a protocol declares none, so
        any other name is taken for a metric).
    """
    errs: list[str] = []
    costs = [*COST_ALIASES, *(c for c, _, _ in COST_COLUMNS)]
    allowed = [*FIGURE_SETS, *axes, *(metrics or []), *costs]
    what = ('"costs", "all", a swept setting of this scenario, or a metric or cost of its '
            "protocols")
    for k, v in table.items():
        if k not in REPORT_KEYS:
            errs.append(f"[report] {k}: unknown key; allowed: {', '.join(REPORT_KEYS)}"
                        f"{hint(k, REPORT_KEYS)}")
            continue
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            errs.append(f"[report] figures: got {v!r}; allowed: a list of names, each {what}")
            continue
        for i in items:
            if i not in allowed and (metrics is not None or i.startswith(
                    ("params.", "data.", "collusion.", "deployment."))):
                errs.append(f"[report] figures: {i!r} is not one of {what}; allowed: "
                            f"{', '.join(allowed)}{hint(i, allowed)}")
    return errs


#: what a deployment is about: its report shows these beside the [plot] figures
DEPLOYMENT_FIGURES = ("virtual_wall_s", "dropout_rate")


def report_spec(spec: PlotSpec, plot_table: dict[str, Any], report_table: dict[str, Any],
                metrics: list[str] | None, deployment: bool = False) -> PlotSpec:
    """The figures a scenario's report shows (``results.report``), from its ``[plot]`` spec
    ``spec`` (resolved), its raw ``[plot]`` table and its ``[report]`` table (both checked).

    A ``[plot]`` table that names what it draws (``x``, ``y`` or ``costs``) is the report's
    figures: its metrics against its axes, the costs only where it asks for them
    (``costs = true``, or a cost in ``y``); one that does not (no ``[plot]`` table, or only
    its looks) gives every figure ``ldpsim run`` draws. ``[report] figures`` adds: ``costs``
    (the cost figures), ``all`` (every figure ``ldpsim run`` draws), a swept setting (every
    figure against it too) or a metric or cost (its figure against the report's axes).
    ``metrics``: every metric the protocols declare (None: unknown). A ``[deployment]``'s
    report shows its virtual run time and dropout rate too (``DEPLOYMENT_FIGURES``).
    """
    asked = report_table.get("figures", [])
    asked = [asked] if isinstance(asked, str) else list(asked)
    if deployment and any(k in plot_table for k in WHAT_KEYS):
        asked += [f for f in DEPLOYMENT_FIGURES if f not in asked]
    if "all" in asked or not any(k in plot_table for k in WHAT_KEYS):
        base = spec
    else:
        base = replace(spec, costs=plot_table.get("costs") is True)
    x, y, costs = list(base.x), list(base.y), base.costs
    for a in asked:
        if a in FIGURE_SETS:
            costs = costs or a == "costs"
        elif a.startswith(("params.", "data.", "collusion.", "deployment.")):
            x += [a] if x and a not in x else []
        elif y:
            y += [] if a in y else [a]
        elif metrics is not None:  # every metric (y empty) and this one
            y = [*metrics, *([] if a in metrics else [a])]
        else:  # every metric, of names unknown here: this cost with the others
            costs = costs or a in COST_ALIASES or a in (c for c, _, _ in COST_COLUMNS)
    return replace(base, x=tuple(x), y=tuple(y), costs=costs)
