"""The Python API behind ``import ldpsim``: ``run``, ``load``, ``audit`` and ``Results``."""

from __future__ import annotations

import copy
import html
import importlib.util
import math
import tempfile
import tomllib
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpsim.protocols.keys import Secrets
from ldpsim.simulator.results import plot_style
from ldpsim.simulator.results.intervals import exact_interval
from ldpsim.simulator.results.metrics import COSTS, describe, registry
from ldpsim.simulator.results.plot_spec import PAPER_WIDTH, STYLES
from ldpsim.simulator.results.plots import PLOT_INSTALL, label_few_trials
from ldpsim.simulator.results.results import (
    RESULTS_FILE,
    cost_names,
    in_value_order,
    is_degraded,
    metric_names,
    per_round,
    point_id,
    summarize,
    usable,
)
from ldpsim.simulator.results.table import MISSING, is_deployment, table_cell, table_columns
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.identity import proven_records, stored_order
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.session.keyfiles import (
    SECRET_FILE,
    read_host_keys,
    secret_kind,
    write_fresh_secret,
)
from ldpsim.simulator.sweep.reporting import write_report
from ldpsim.simulator.sweep.runner import in_run_order, run_scenario
from ldpsim.simulator.sweep.verify import verify as _verify

#: record sections flattened into ``section.key`` columns by ``Results.to_pandas``
SECTIONS = ("params", "data", "metrics", "comm", "timing", "privacy", "collusion", "leakage",
            "deployment", "virtual")
#: the cost columns (a paper's axis of them starts at 0)
COST_NAMES = frozenset(str(m) for m in COSTS)
#: top-level record fields kept as columns
FIELDS = ("key", "status", "scenario", "protocol", "repeat", "seed", "backend", "pools",
          "n_agents", "rejected", "dropouts", "refused", "lost_agents")


def _scenario(scenario: str | Path | dict[str, Any] | sc.Scenario,
              overrides: dict[str, Any] | list[str] | None, **runtime: Any) -> sc.Scenario:
    """A validated Scenario from a name (``demo``), a path, a raw dict or a Scenario, with
    ``overrides`` (``{"params.epsilon": [1, 2]}`` or ``["params.epsilon=[1,2]"]``) and the
    runtime keyword arguments that are not None applied."""
    texts = [o for o in overrides if isinstance(o, str)] if isinstance(overrides, list) else []
    pairs = dict(overrides) if isinstance(overrides, dict) else {}
    pairs.update({f"runtime.{k}" if k != "seed" else "seed": v
                  for k, v in runtime.items() if v is not None})
    if isinstance(scenario, sc.Scenario):
        raw = copy.deepcopy(scenario.raw)
    elif isinstance(scenario, dict):
        raw = copy.deepcopy(scenario)
    else:
        path = sc.find(scenario)
        if not Path(path).is_file():
            raise sc.ScenarioError(f"scenario not found: {scenario!r} (a path, or a name in "
                                   f"{', '.join(str(d) for d in sc.SCENARIO_DIRS)})"
                                   f"{sc.did_you_mean(scenario)}")
        try:
            raw = tomllib.loads(Path(path).read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise sc.ScenarioError(f"{path}: not a valid TOML scenario: {e}") from None
    for dotted, value in pairs.items():  # one key of sc.ONE_OF replaces the others
        sc.set_key(raw, dotted.split("."), value, f"override {dotted!r}")
    return sc.load(raw=sc.apply_overrides(raw, texts))


def run(scenario: str | Path | dict[str, Any] | sc.Scenario,
        overrides: dict[str, Any] | list[str] | None = None, out: str | Path | None = None,
        backend: str | None = None, pools: int | None = None, seed: int | None = None,
        progress: bool = False, plots: bool = False,
        secret: str | Path | None = None) -> Results:
    """Run (or, into an ``out`` directory that has them, resume) every run of a scenario.

    The runs' master secret (every agent's data and coins derive from it) is ``secret`` if
    given, else the scenario's ``[runtime] secret``, else a fresh one drawn for the sweep:
    kept in ``out`` as ``secret.key`` (owner-only; a resumed sweep reads it), or, without
    ``out``, on the returned ``Results`` (``secret``; ``Results.write_secret`` writes it as a
    key file, which ``secret=`` takes to run the same runs again). Never the seed, unless
    asked for with ``secret="seed"``: then the runs are reproducible from the scenario alone,
    and the seed is the only secret (a curator or a pool that guesses it rebuilds every key).

    Parameters
    ----------
    scenario : name, path, dict or Scenario
        ``"demo"`` (a file of ``scenarios/``), a TOML path, the scenario as a dict (the TOML
        tables as nested dicts), or a loaded Scenario.
    overrides : dict or list of str, optional
        ``{"params.epsilon": [0.5, 1], "data.n": 1000}`` (a list makes a sweep axis) or the
        CLI's ``["params.epsilon=[0.5,1]"]``.
    out : path, optional
        Results directory (``results.jsonl``, ``summary.csv``, ``scenario.json``). None: a
        temporary directory that is removed afterwards (nothing is left on disk).
    backend, pools, seed : optional
        Shortcuts for ``runtime.backend``, ``runtime.pools`` and ``seed``.
    progress, plots : bool
        Show a progress bar; draw the PNG plots into ``out`` (needs matplotlib: ``pip install
        'ldpsim[plot]'``, ImportError at once without it).
    secret : str or Path, optional
        Shortcut for ``runtime.secret``: the path of a key file ``secret.key`` (of ``ldpsim
        keys``, of a results directory, or of ``Results.write_secret``), or ``"seed"``.

    Returns
    -------
    Results
        The records; ``path`` the results directory (None without ``out``), ``secret`` the
        fresh master secret of a run without ``out`` (None otherwise: it is in ``out``, or
        was given).
    """
    if plots and out is not None and importlib.util.find_spec("matplotlib") is None:
        raise ImportError(f"plots=True needs matplotlib: {PLOT_INSTALL}")

    scen = _scenario(scenario, overrides, backend=backend, pools=pools, seed=seed,
                     secret=None if secret is None else str(secret))
    scen.output["plots"] = bool(plots and out is not None)
    if out is not None:
        records, _ = run_scenario(scen, out, show_progress=progress, echo=_quiet)
        return Results(records, Path(out))
    with tempfile.TemporaryDirectory(prefix="ldpsim-") as tmp:
        records, _ = run_scenario(scen, tmp, show_progress=progress, echo=_quiet)
        own = Path(tmp, SECRET_FILE)
        fresh = (read_host_keys(own).secrets.master
                 if secret_kind(scen.runtime, tmp) == "fresh" and own.is_file() else None)
    return Results(records, None, fresh)


def load(path: str | Path) -> Results:
    """The results stored in a directory written by ``ldpsim run`` or ``run(out=...)``, in the
    sweep's run order (as ``run`` returns them and ``ldpsim summary`` reads them), however the
    runs finished: parallel runs (``--jobs``, Dask) store each record when it is done."""
    directory = Path(path)
    if not (directory / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"{path}: no {RESULTS_FILE} (not a results directory)")
    # every record one of the directory's runs (else ResultsCorruptError naming the line)
    records = in_run_order(proven_records(directory), stored_order(directory))
    return Results(records, directory)


def report(path: str | Path, html: str | Path | None = None, style: str | None = None
           ) -> Path:
    """``ldpsim report``: write one self-contained HTML page of the results directory
    ``path`` (the scenario's figures, the summary with units and directions, a paper's
    printed numbers beside ours, per-round costs, leakage, the scenario as written, the
    environment) to ``html`` (default ``path/report.html``); returns where it is. ``style``:
    the figures' (``notebook`` or ``paper``; default: the stored ``[plot]`` style)."""
    return write_report(path, html, style=style)


def verify(path: str | Path, sample: float = 1.0, jobs: int = 1, backend: str | None = None,
           progress: bool = False, sample_seed: int | None = None,
           secret: str | Path | None = None) -> Any:
    """``ldpsim verify``: re-execute the runs stored in ``path`` (all, or a ``sample``
    fraction drawn afresh, or with ``sample_seed``) and compare each with its record; check
    every record's point and seed against its run, that every run has a record, and that
    ``summary.csv`` and ``per_round.csv`` are the records'. Returns a
    ``simulator.sweep.verify.Report`` (``ok``, ``checked``, ``differing``: each with its run key,
    line and differing fields; ``failed``, ``missing``, ``unverifiable``, ``files``,
    ``sampled``, ``sample_seed``). Every run is deterministic, so a results directory and the
    code version that wrote it reproduce bit for bit; timings and memory are not checked.
    ``secret``: the key file (or ``"seed"``) the runs were executed with; default the one
    each stored sweep names, else the directory's own ``secret.key``."""
    return _verify(path, sample, jobs, backend, progress, sample_seed,
                   None if secret is None else str(secret))


def audit(scenario: str | Path | dict[str, Any] | sc.Scenario,
          overrides: dict[str, Any] | list[str] | None = None, trials: int = 2000,
          target: int | None = None, out: str | Path | None = None,
          progress: bool = False, path: str = "auto", jobs: int = 1,
          until_lower: float | None = None, coins: str = "auto") -> list[dict[str, Any]]:
    """``ldpsim audit``: one record per audited (protocol, parameter point), with the attacks'
    success and the empirical ε lower bound against the claim (``flagged``). ``path``,
    ``jobs``, ``until_lower`` and ``coins`` are the command's ``--path``, ``--jobs``,
    ``--until-lower`` and ``--coins``."""
    from ldpsim.simulator.audit.audit_harness import audit_scenario

    scen = _scenario(scenario, overrides)
    kw = {"target": target, "show_progress": progress, "echo": _quiet, "path": path,
          "jobs": jobs, "until_lower": until_lower, "coins": coins}
    if out is not None:
        return audit_scenario(scen, out, trials, **kw)
    with tempfile.TemporaryDirectory(prefix="ldpsim-audit-") as tmp:
        return audit_scenario(scen, tmp, trials, **kw)


def _quiet(*args: Any, **kwargs: Any) -> None:
    pass


@dataclass(repr=False)
class Results:
    """The run records of a sweep (``records``: one dict per run, as in ``results.jsonl``) and
    the directory they live in, if any. Printed, a line of counts (``repr``); in a notebook,
    the first rows of its summary (``_repr_html_``)."""

    records: list[dict[str, Any]]
    path: Path | None = None
    #: the fresh master secret of a sweep run without a results directory (``run``); None
    #: when it is in ``path`` (``secret.key``) or the runs were given theirs
    secret: bytes | None = None

    def __len__(self) -> int:
        return len(self.records)

    def write_secret(self, path: str | Path) -> Path:
        """Write this sweep's fresh ``secret`` to ``path`` as ``ldpsim keys`` writes a
        ``secret.key`` (owner-only, atomically); ``run(..., secret=path)`` then runs the same
        runs again. ValueError when there is none to write (see ``secret``)."""
        if self.secret is None:
            raise ValueError("no fresh secret held: the runs' secret is their directory's "
                             "secret.key, or the one they were given")
        return write_fresh_secret(path, master=Secrets(self.secret).master)

    def __iter__(self):
        return iter(self.records)

    def __repr__(self) -> str:
        """``Results(27 runs, 9 points, protocols kwiksort, dp_kwiksort, ldp_kwiksort_rr, dir
        results/demo)``: counts and names, never the records (a few hundred characters at
        most, whatever the size)."""
        points = {point_id(r.get("point") or {}) for r in self.records}
        protocols = in_value_order(r.get("protocol") for r in self.records)
        shown: list[str] = []  # the first names, as many as REPR_NAMES characters hold
        for name in (_clip(str(p), 60) for p in protocols[:REPR_PROTOCOLS]):
            if shown and sum(len(n) + 2 for n in shown) + len(name) > REPR_NAMES:
                break
            shown.append(name)
        names = ", ".join(shown) + (f" and {len(protocols) - len(shown)} more"
                                    if len(protocols) > len(shown) else "")
        degraded = sum(is_degraded(r) for r in self.records)
        parts = [counted(len(self.records), "run"), counted(len(points), "point")]
        if degraded:
            parts.append(f"{degraded} degraded")
        if protocols:
            parts.append(f"{'protocol' if len(protocols) == 1 else 'protocols'} {names}")
        parts.append(f"dir {_clip(str(self.path), 60)}" if self.path is not None else "in memory")
        return f"Results({', '.join(parts)})"

    def _repr_html_(self) -> str:
        """The notebook's view: the counts, and the summary's first ``HTML_ROWS`` rows (the
        terminal table's columns and cells: its settings, ``repeats``, each metric's mean and
        the costs, a deployment's virtual time and dropouts) with how many more there are."""
        columns, rows = summarize(self.complete())
        shown, missing = table_columns(columns), MISSING if is_deployment(columns) else ""
        cells = "".join(f"<th>{html.escape(c)}</th>" for c in shown)
        body = "".join("<tr>" + "".join(
            f"<td>{html.escape(table_cell(r, c, missing=missing))}</td>" for c in shown)
            + "</tr>"
            for r in rows[:HTML_ROWS])
        more = (f"<p>... {counted(len(rows) - HTML_ROWS, 'more row')} (<code>.summary()</code> "
                "has them all)</p>" if len(rows) > HTML_ROWS else "")
        return (f"<p>{html.escape(repr(self))}</p><table><thead><tr>{cells}</tr></thead>"
                f"<tbody>{body}</tbody></table>{more}")

    def complete(self) -> list[dict[str, Any]]:
        """The records of runs that lost no agents (what the summary and plots use)."""
        return usable(self.records, False)

    def to_pandas(self, include_degraded: bool = True):
        """A tidy DataFrame: one row per run; ``key``, ``protocol``, ``repeat``, ... and every
        scalar of ``params`` (resolved), ``data``, ``metrics``, ``comm``, ``timing``,
        ``privacy``, ``collusion``, ``leakage`` (what the coalition learned, with
        ``[collusion] attacks``), ``deployment`` and ``virtual`` (a ``[deployment]``'s
        settings and its virtual time and dropouts) as a ``section.name`` column (needs pandas:
        ``pip install 'ldpsim[pandas]'``). Each run's rounds are ``per_round``'s."""
        pd = _pandas()
        rows = []
        for rec in self.records if include_degraded else self.complete():
            row = {k: rec.get(k) for k in FIELDS if k in rec}
            for section in SECTIONS:
                for k, v in (rec.get(section) or {}).items():
                    if v is None or isinstance(v, bool | int | float | str):
                        row[f"{section}.{k}"] = v
            rows.append(row)
        return pd.DataFrame(rows)

    def per_round(self, include_degraded: bool = True):
        """A tidy DataFrame of what each round cost: one row per (run, round), as
        ``per_round.csv`` has it (needs pandas).

        Columns: ``key``, ``status``, ``protocol``, the swept settings (``params.*``,
        ``data.*``, ...), ``repeat``; then the round's ``round`` (its number), ``asked``,
        ``reported``, ``invalid``, ``refused`` and ``dropouts`` (agents), ``bytes_up`` and
        ``bytes_down`` (exact envelope bytes over the round's agents),
        ``bytes_up_per_agent`` and ``bytes_down_per_agent`` (per asked agent),
        ``report_bits`` (the information-theoretic size of one report), ``batch`` (the
        largest query batch) and the curator's ``wall_s`` and ``curator_cpu_s`` for the
        round; with a ``[deployment]`` also the round's virtual times (``virtual_start_s``,
        ``virtual_s``, the completion times' ``completion_p50_s``, ``_p95_s`` and
        ``_p99_s``), its dropouts by cause (``dropouts_offline``, ``dropouts_late``) and its
        bytes with the transport's headers (``wire_bytes_up``, ``wire_bytes_down``). Empty
        when the records were written with ``[output] per_round = false``.
        """
        columns, rows = per_round(usable(self.records, include_degraded))
        return _pandas().DataFrame(rows, columns=columns)

    def summary(self, include_degraded: bool = False):
        """One row per parameter point: the swept settings, ``repeats``, and each metric's
        ``_mean`` and ``_std`` with the costs, as ``summary.csv`` has them (a DataFrame).

        The communication costs are two: ``comm.bytes_up_per_agent_mean`` and
        ``comm.bytes_down_per_agent_mean``, the wire bytes (the msgpack envelopes an agent
        sent and received, framing included), and ``comm.report_bits_per_agent_mean`` (with
        its ``_std`` over the repeats), the report bits (the information-theoretic size of
        one agent's reports over the run: the cost the papers count)."""
        columns, rows = summarize(usable(self.records, include_degraded))
        return _pandas().DataFrame(rows, columns=columns)

    def metrics(self):
        """What each metric and cost of these records means, as its protocol declares it
        (``Protocol.metrics``): ``name``, ``label``, ``unit``, ``low``, ``high`` (its range),
        ``better`` ("lower", "higher" or None) and ``about`` (a DataFrame, one row per
        metric in the summary's order)."""
        columns, _ = summarize(self.complete())
        protocols = list(dict.fromkeys(str(r.get("protocol")) for r in self.records))
        names = metric_names(columns) + cost_names(columns)
        return _pandas().DataFrame([describe(n, protocols).as_dict() | {"name": n}
                                    for n in names])

    def plot(self, y: str, x: str | None = None, hue: str = "protocol", ax: Any = None,
             include_degraded: bool = False, logx: bool = False, logy: bool = False,
             title: str | None = None, style: str = "notebook", width: float | None = None):
        """Mean of ``y`` (a metric name, or any column of ``to_pandas``) against ``x`` (default:
        the first swept numeric setting), one line per ``hue`` value (in the order of the
        values: numbers by value, then the sweep's order), with a 95% confidence band over
        the repeats (t quantile; clipped to [0, 1] for metrics that live there; none with
        one repeat, and then the legend promises none).

        Parameters
        ----------
        y, x, hue : str
            What to draw, against what, one line per what.
        ax : matplotlib Axes, optional
            Draw into it (default: a new figure).
        include_degraded : bool
            Keep the runs that lost agents.
        logx, logy : bool
            Logarithmic axes.
        title : str, optional
            The axes' title.
        style : str
            ``notebook`` (default) or ``paper`` (``simulator.results.plot_style``: a new
            figure ``width`` inches wide, default 3.5, one column of a paper; the units and
            which direction is better in the axis labels, lines told apart by marker and dash,
            readable log ticks, a cost's axis from 0; save it as PDF or SVG).
        width : float, optional
            The paper style's width in inches.

        Returns
        -------
        matplotlib.figure.Figure
            Needs matplotlib (``pip install 'ldpsim[plot]'``) and pandas
            (``pip install 'ldpsim[pandas]'``); ImportError naming them otherwise.
        """
        if style not in STYLES:
            raise ValueError(f"style: got {style!r}; allowed: "
                             + ", ".join(f'"{s}"' for s in STYLES))
        plt = _pyplot()
        df = self.to_pandas(include_degraded)
        ycol = y if y in df.columns else f"metrics.{y}"
        if ycol not in df.columns:
            raise KeyError(f"{y!r}: not a metric or column; metrics: "
                           f"{', '.join(c[8:] for c in df.columns if c.startswith('metrics.'))}")
        x = x or _first_swept(df)
        paper = style == "paper"
        with plot_style.paper_context() if paper else nullcontext():
            if ax is None:
                size = (6, 4) if not paper else (width or PAPER_WIDTH,
                                                  0.75 * (width or PAPER_WIDTH))
                fig, ax = plt.subplots(figsize=size, constrained_layout=True)
            else:
                fig = ax.figure
            banded = _lines(ax, df, x, ycol, hue, paper)
            _axes(ax, df, x, ycol, (logx, logy), paper)
            if title is not None:
                ax.set_title(title)
            band = ("exact 95% interval of the attack's trials over the repeats"
                    if _attack_trials(df, x, ycol) is not None else "95% CI over repeats")
            if paper:
                ax.legend(title=None if hue == "protocol" else _label(hue), frameon=False)
                fig.draw_without_rendering()  # the ticks made at the paper's sizes
            else:
                ax.legend(title=f"{hue} (band: {band})" if banded else hue, fontsize="small")
        return fig


def _first_swept(df: Any) -> str:
    """The first swept numeric setting of ``df`` (``Results.plot``'s default x)."""
    swept = [c for c in df.columns
             if (c.startswith(("params.", "data.")) or c == "collusion.colluders")
             and df[c].nunique(dropna=True) > 1 and _numeric(df[c])]
    if not swept:
        raise ValueError("nothing is swept: give x=")
    return swept[0]


def _lines(ax: Any, df: Any, x: str, ycol: str, hue: str, paper: bool) -> bool:
    """``Results.plot``'s lines, one per ``hue`` value, each with its band (an attack's exact
    interval, else the repeats' 95% CI); a paper's told apart by dash and hollow marker,
    with no band where there is one repeat. Whether a band was drawn."""
    from scipy import stats

    bounded = df[ycol].dropna().between(0, 1).all()
    markers = "osD^vP*Xh<>p"
    banded = False
    for i, name in enumerate(in_value_order(df[hue].dropna().tolist())):
        part = df[df[hue] == name]
        if part[x].isna().all():  # no such setting (kwiksort has no ε): its level, dashed
            ax.axhline(part[ycol].mean(), color=f"C{i}", label=f"{name} (no {_label(x)})",
                       linestyle=plot_style.FLAT_DASH if paper else "--")
            continue
        g = part.groupby(x)[ycol].agg(["mean", "std", "count"]).reset_index()
        trials = _attack_trials(part, x, ycol)
        lo, hi = _band_of(g, trials, bounded, stats)
        line, = ax.plot(g[x], g["mean"], marker=markers[i % len(markers)], color=f"C{i}",
                        label=str(name), **(plot_style.line_kw(i) if paper else {}))
        wide = trials is not None or bool((hi - lo).gt(0).any())
        if wide or not paper:
            ax.fill_between(g[x], lo, hi, alpha=0.2, color=line.get_color(), linewidth=0)
        banded = banded or wide
        if trials is not None:
            label_few_trials(ax, g[x], trials["trials"], trials["hi"], line.get_color())
    return banded


def _axes(ax: Any, df: Any, x: str, ycol: str, logs: tuple[bool, bool], paper: bool) -> None:
    """``Results.plot``'s axis labels and scales: a paper's with units and which direction
    is better, readable log ticks and a cost's axis from 0."""
    logx, logy = logs
    metric = ycol.removeprefix("metrics.")
    xs = [float(v) for v in df[x].dropna().unique()] if _numeric(df[x]) else []
    ax.set_xlabel(plot_style.x_label(x, xs) if paper else _label(x))
    ax.set_ylabel(plot_style.y_label(metric, chars=40) if paper else _label(ycol))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if not paper:
        return
    ys = df[ycol].dropna()
    if logx and xs:
        plot_style.readable_log(ax.xaxis, min(xs), max(xs))
    if logy and len(ys):
        plot_style.readable_log(ax.yaxis, float(ys.min()), float(ys.max()))
    elif metric in COST_NAMES or ycol in COST_NAMES:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def _band_of(g: Any, trials: Any, bounded: bool, stats: Any) -> tuple[Any, Any]:
    """A line's band: an attack's exact interval of its pooled ``trials``, else the 95% CI
    of the repeats' mean (``g``: mean, std and count per point), stopped at [0, 1] for a
    bounded metric."""
    if trials is not None:
        return trials["lo"], trials["hi"]
    t = stats.t.ppf(0.975, (g["count"] - 1).clip(lower=1))
    half = (t * g["std"] / g["count"] ** 0.5).fillna(0.0)
    lo, hi = g["mean"] - half, g["mean"] + half
    return (lo.clip(0, 1), hi.clip(0, 1)) if bounded else (lo, hi)


def _attack_trials(part: Any, x: str, ycol: str) -> Any:
    """For an attack's accuracy (``leakage.<attack>_accuracy``), per value of ``x``: its
    trials and wins summed over the repeats and their exact 95% interval (``lo``, ``hi``);
    None for any other column, or records from before attacks counted their trials."""
    if not (ycol.startswith("leakage.") and ycol.endswith("_accuracy")):
        return None
    base = ycol[: -len("accuracy")]
    tcol, wcol = base + "trials", base + "wins"
    if tcol not in part.columns or wcol not in part.columns:
        return None
    g = part.groupby(x)[[tcol, wcol]].sum(min_count=1).reset_index()
    bounds = [exact_interval(float(w), int(t)) if t == t and t > 0 else None
              for t, w in zip(g[tcol], g[wcol], strict=True)]
    g["trials"] = g[tcol].fillna(0).astype(int)
    g["lo"] = [b[0] if b else math.nan for b in bounds]
    g["hi"] = [b[1] if b else math.nan for b in bounds]
    return g


#: protocols a ``Results`` repr names, in at most so many characters (the rest are counted)
REPR_PROTOCOLS = 6
REPR_NAMES = 160
#: summary rows a notebook shows (``Results._repr_html_``)
HTML_ROWS = 20


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."




def _numeric(col: Any) -> bool:
    try:
        return all(isinstance(v, int | float) and math.isfinite(v) for v in col.dropna())
    except TypeError:
        return False


def _label(column: str) -> str:
    """``params.epsilon`` -> ``ε``; a metric's or cost's declared label
    (``metrics.kendall_tau`` -> ``Kendall tau distance (normalised)``, ``simulator.sweep.
    metrics``); else the name in words."""
    name = column.removeprefix("metrics.")
    if name in registry():
        return registry()[name].axis_label
    name = column.split(".", 1)[-1]
    return {"epsilon": "ε", "n": "n (agents)"}.get(name, name.replace("_", " "))


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("this needs pandas: pip install 'ldpsim[pandas]'") from None
    return pandas


def _pyplot():
    """matplotlib.pyplot on a backend that needs no display unless one is set; ImportError
    naming the extra without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"this needs matplotlib: {PLOT_INSTALL}") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt
