"""``ldpsim report DIR``: one self-contained HTML page per results directory.

The page holds what a reader of a paper's experiment section needs, with nothing to fetch: the
scenario (its stored sweeps), the figures (drawn afresh from the records, embedded as PNG),
the summary table with each metric's label, unit and which direction is better, the cost of
each round per agent, what a colluding coalition learned beside guessing and the LDP bound,
the environment the runs ran in, and, where the scenario carries a paper's printed numbers
(``[[published]]``, ``simulator.results.published``), those numbers beside ours with their
difference in standard errors.

A small script at the end of the page counts the images that decoded
(``data-images-loaded`` / ``data-images`` on ``<body>``): what a test in a headless browser
reads to know that every figure loads.
"""

from __future__ import annotations

import base64
import html
import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ldpsim.simulator.results.metrics import CHANCE, describe
from ldpsim.simulator.results.plot_cache import figures_key, kept
from ldpsim.simulator.results.plot_layout import sweep_of
from ldpsim.simulator.results.plot_spec import PlotSpec
from ldpsim.simulator.results.plot_style import SETTINGS
from ldpsim.simulator.results.plots import axis_label, plot, stems
from ldpsim.simulator.results.published import compare
from ldpsim.simulator.results.report_scenario import scenario_section
from ldpsim.simulator.results.store import RESULTS_FILE, is_degraded, usable
from ldpsim.simulator.results.summary import (
    COST_STD_COLUMNS,
    cost_names,
    metric_names,
    per_round,
    pooled_leakage,
    privacy_spent,
    summarize,
)
from ldpsim.simulator.results.table import cell_text, spread_text

REPORT_FILE = "report.html"

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; overflow-wrap: anywhere; }
h2 { border-bottom: 1px solid #ddd; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; }
th { background: #f4f4f4; vertical-align: bottom; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { min-width: 4em; } .wide { overflow-x: auto; }
th code { word-break: break-all; }
caption { text-align: left; font-size: 0.9em; color: #555; padding: 0.2em 0; }
details summary { cursor: pointer; color: #555; }
.better { font-weight: normal; font-size: 0.8em; color: #555; display: block; }
.far { background: #fde2e2; } .near { background: #e6f4e6; }
.figures { display: flex; flex-wrap: wrap; gap: 1em 2em; }
figure { margin: 1em 0; max-width: 100%; }
figure img { max-width: 100%; border: 1px solid #eee; box-sizing: border-box; }
.figures.paper figure { flex: 0 1 560px; } .figures.paper figure img { width: 100%; }
figcaption { font-size: 0.9em; color: #555; }
pre { background: #f8f8f8; padding: 0.8em; font-size: 0.85em; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.note { color: #555; font-size: 0.9em; }
"""

CHECK = """<script>
(function () {
  function count() {
    var imgs = document.images, ok = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
    }
    document.body.setAttribute("data-images", imgs.length);
    document.body.setAttribute("data-images-loaded", ok);
  }
  if (document.readyState === "complete") count(); else window.addEventListener("load", count);
})();
</script>"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _table(head: list[str], rows: list[list[str]], numeric: list[bool] | None = None,
           classes: list[str] | None = None, caption: str = "") -> str:
    """An HTML table; ``head`` cells are HTML, body cells and ``caption`` escaped text."""
    numeric = numeric or [False] * len(head)
    cells = "".join(f"<th>{h}</th>" for h in head)
    top = f"<caption>{_e(caption)}</caption>" if caption else ""
    out = [f'<div class="wide"><table>{top}<thead><tr>{cells}</tr></thead>', "<tbody>"]
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f'<td class="num">{_e(c)}</td>' if num else f"<td>{_e(c)}</td>"
                        for c, num in zip(row, numeric, strict=True))
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _mean_text(values: list[Any], empty: str) -> str:
    """The mean of the values that are not None, as a table shows it (``empty`` if none)."""
    present = [v for v in values if v is not None]
    return cell_text(sum(present) / len(present)) if present else empty


def _header(name: str, protocols: list[str]) -> str:
    """A column's header: its label and unit, with which direction is better under it."""
    m = describe(name, protocols)
    better = {"lower": "lower is better ↓", "higher": "higher is better ↑"}.get(m.better or "",
                                                                                  "")
    title = f' title="{_e(m.about)}"' if m.about else ""
    return (f"<span{title}>{_e(m.axis_label)}</span><code class=\"better\">{_e(name)}</code>"
            + (f'<span class="better">{better}</span>' if better else ""))


#: what a summary table may fill: the page's text column (px), one character of its cells
#: and headers (px, a generous estimate at the tables' 0.9em) and a cell's padding and border
PAGE_PX, CHAR_PX, CELL_PX = 1150, 8.0, 22
#: the narrowest a header is (characters): ``th { min-width }``
HEADER_CHARS = 7


def _column_px(cells: list[str], header_words: str) -> float:
    """A column's width on the page, estimated: its widest cell (never wrapped) or its
    header's longest word (headers wrap between words), plus its padding."""
    widest = max([len(c) for c in cells] + [HEADER_CHARS] +
                 [len(w) for w in header_words.split()])
    return widest * CHAR_PX + CELL_PX


def _groups(widths: list[float], room: float) -> list[list[int]]:
    """The columns ``0 .. len(widths) - 1`` in order, in groups each of which fits
    ``room`` (a column wider than it alone)."""
    groups: list[list[int]] = []
    used = room
    for i, w in enumerate(widths):
        if used + w > room:
            groups.append([])
            used = 0.0
        groups[-1].append(i)
        used += w
    return groups


def _summary_columns(rows: list[dict[str, Any]], metrics: list[str], costs: list[str],
                     protocols: list[str]) -> list[tuple[str, str, list[str]]]:
    """Each metric's and cost's column of the summary: its header (HTML), its header's
    words, its cells (mean ± standard deviation over the repeats; ``n/a`` with one)."""
    out = []
    for m in metrics:
        cells = []
        for r in rows:
            mean, std = r.get(f"{m}_mean"), r.get(f"{m}_std")
            cells.append("" if mean is None else cell_text(mean) if std is None
                         else f"{cell_text(mean)} ± {spread_text(std, r.get('repeats', 2))}")
        out.append((m, cells))
    for c in costs:
        cells = []
        for r in rows:
            sd = r.get(COST_STD_COLUMNS[c]) if c in COST_STD_COLUMNS else None
            cells.append(cell_text(r.get(c)) + (
                f" ± {spread_text(sd, r.get('repeats', 2))}"
                if sd is not None and r.get(c) is not None else ""))
        out.append((c, cells))
    return [(_header(name, protocols), describe(name, protocols).axis_label, cells)
            for name, cells in out]


def _summary_section(records: list[dict[str, Any]], protocols: list[str]) -> str:
    """The summary table, its columns in groups that each fit the page beside the settings
    (every group repeats them): the metrics, then the costs."""
    columns, rows = summarize(records)
    cut = columns.index("repeats") + 1
    axes = columns[:cut]
    metrics = metric_names(columns)
    costs = [c for c in cost_names(columns[cut:]) if c.startswith(("comm.", "timing."))]
    head = [_e(axis_label(a)) if a not in ("protocol", "repeats") else a for a in axes]
    left = [[cell_text(r.get(a)) for a in axes] for r in rows]
    room = PAGE_PX - sum(_column_px([row[j] for row in left], axis_label(a))
                         for j, a in enumerate(axes))
    values = _summary_columns(rows, metrics, costs, protocols)
    tables = []
    for kind, part in (("metrics", values[:len(metrics)]), ("costs", values[len(metrics):])):
        groups = _groups([_column_px(cells, words) for _, words, cells in part], room)
        for g, group in enumerate(groups):
            caption = kind + (f" ({g + 1} of {len(groups)})" if len(groups) > 1 else "")
            body = [left[i] + [part[j][2][i] for j in group] for i in range(len(rows))]
            numeric = [a != "protocol" for a in axes] + [True] * len(group)
            tables.append(_table(head + [part[j][0] for j in group], body, numeric,
                                 caption=caption))
    spent = privacy_spent(records)
    note = ""
    if spent is not None:
        note = (f"<p class=\"note\">Privacy spent: over the runs of one repetition's data set "
                f"an agent spent at most ε = {spent['epsilon_per_agent_max']:.4g} "
                f"({spent['data_sets']} data sets, up to {spent['runs_per_data_set_max']} "
                "runs each with a local claim).</p>")
    return ("<p class=\"note\">One row per parameter point: each metric's mean ± standard "
            "deviation over the repeats (n/a: one repeat), the costs as means (wire bytes per "
            "agent: the msgpack envelopes; report bits per agent ± std: the size of an agent's "
            "reports the papers count; seconds). Hover a header for its definition.</p>"
            + "\n".join(tables) + note)


def _caption(stem: str) -> str:
    """A figure's caption, from its file's stem: what is drawn against what, and which
    direction is better."""
    if stem == "plot_per_round_bytes":
        return "Wire bytes and report bits per agent, by round."
    metric, _, axis = stem.removeprefix("plot_").partition("_vs_")
    m = describe(metric)
    against = "the dropout rate measured" if axis == "dropout_rate" else \
        SETTINGS.get(axis, axis_label(axis))
    return f"{m.axis_label} against {against}" + (f"; {m.direction}." if m.better else ".")


def _from_run(out: Path, spec: PlotSpec, run_spec: Any, records: list[dict[str, Any]]
              ) -> list[Path] | None:
    """The report's figures among those the run drew into ``out`` in this process: the
    run's figures (``run_spec``) in the report's looks include each of the report's, drawn
    alike (a figure depends on its own metric and axis only), else None."""
    if run_spec is None or replace(run_spec, x=spec.x, y=spec.y, costs=spec.costs,
                                   formats=spec.formats) != spec:
        return None
    run_spec = replace(run_spec, formats=("png",))
    sweep = sweep_of(records, run_spec)
    drawn = None if sweep is None else kept(out, figures_key(sweep, run_spec), ("png",),
                                            drawn_here=True)
    files = {p.stem: p for p in drawn or []}
    wanted = stems(records, spec)
    return [files[s] for s in wanted] if all(s in files for s in wanted) else None


def _figures_section(out: Path, spec: Any, records: list[dict[str, Any]],
                     run_spec: Any = None) -> str:
    """The figures of ``spec`` (the report's), embedded: the PNGs this process drew into
    ``out`` from these records' numbers (``plot_cache``: ``ldpsim reproduce``'s run then
    report; those of the run's own figures ``run_spec`` among them), else drawn here."""
    spec = replace(spec or PlotSpec(), formats=("png",))
    sweep = sweep_of(records, spec)
    paths = None
    if sweep is not None:
        paths = kept(out, figures_key(sweep, spec), spec.formats, drawn_here=True) or \
            _from_run(out, spec, run_spec, records)
    parts = []
    with tempfile.TemporaryDirectory(prefix="ldpsim-report-") as tmp:
        if paths is None:
            paths = plot(tmp, records, spec)
        for p in paths:
            data = base64.b64encode(p.read_bytes()).decode("ascii")
            caption = _caption(p.stem)
            parts.append(f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{_e(caption)}</figcaption></figure>")
    if not parts:
        return ("<p class=\"note\">No figure: nothing numeric is swept, or matplotlib is not "
                "installed (pip install 'ldpsim[plot]').</p>")
    ones = all(len(p.records) < 2 for p in sweep.points)
    band = ("One repeat per point: no confidence band; an attack's band is the exact 95% "
            "interval of its trials." if ones else "Each line: the mean over the repeats with "
            "its 95% confidence band (an attack's: the exact 95% interval of its trials).")
    looks = " paper" if spec.paper else ""
    return (f'<p class="note">{band}</p><div class="figures{looks}">' + "\n".join(parts)
            + "</div>")


def _per_round_section(records: list[dict[str, Any]]) -> str:
    _, rows = per_round(records)
    if not rows:
        return "<p class=\"note\">The records keep no per-round costs.</p>"
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["protocol"], r["round"]), []).append(r)
    body = []
    for (proto, rnd), rs in groups.items():
        body.append([proto, str(rnd), str(len(rs))] + [
            _mean_text([r.get(k) for r in rs], "")
            for k in ("asked", "reported", "bytes_up_per_agent", "bytes_down_per_agent",
                      "report_bits", "wall_s")])
    head = ["protocol", "round", "runs", "agents asked", "reported", "bytes up per agent (B) "
            "↓", "bytes down per agent (B) ↓", "report bits ↓", "round wall time (s) ↓"]
    return ("<p class=\"note\">Each round's cost, averaged over the runs of the protocol "
            "(per_round.csv holds every run's rounds).</p>"
            + _table(head, body, [False] + [True] * 8))


def _leakage_section(records: list[dict[str, Any]]) -> str:
    leaky = [r for r in records if r.get("leakage")]
    if not leaky:
        return ("<p class=\"note\">No attack was run (<code>[collusion] attacks = true</code> "
                "records what the coalition learns).</p>")
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in leaky:
        point = json.dumps(r.get("point") or {"protocol": r.get("protocol")}, sort_keys=True)
        groups.setdefault(point, []).append(r)
    body = []
    for point, rs in groups.items():
        p = json.loads(point)
        where = ", ".join(f"{axis_label(k) if k != 'protocol' else 'protocol'} = {cell_text(v)}"
                          for k, v in p.items())
        acc = {k: _mean_text([r["leakage"].get(k) for r in rs], "–")
               for k in ("report_accuracy", "differencing_accuracy", "report_bound")}
        for name, (trials, lo, hi) in pooled_leakage(rs).items():
            k = name.split(".", 1)[1]  # what it rests on: its trials and their exact interval
            acc[k] += f" [{lo:.3g}, {hi:.3g}], {trials} trial{'s' if trials != 1 else ''}"
        body.append([where, str(len(rs)), acc["report_accuracy"], acc["differencing_accuracy"],
                     cell_text(CHANCE), acc["report_bound"]])
    head = ["point", "runs", _header("leakage.report_accuracy", []),
            _header("leakage.differencing_accuracy", []), "chance (guessing)",
            _header("leakage.report_bound", [])]
    return ("<p class=\"note\">How often the coalition told a target's row from a decoy: 0.5 "
            "is guessing; under ε-LDP the report attack cannot beat e^ε/(1+e^ε). Each "
            "accuracy: its mean over the runs, the exact 95% interval of the attack's trials "
            "over them (Clopper–Pearson), and how many trials it rests on.</p>"
            + _table(head, body, [False] + [True] * 5))


def _published_section(published: list[dict[str, Any]], records: list[dict[str, Any]]
                       ) -> str:
    if not published:
        return ""
    rows = compare(published, records)
    body, classes = [], []
    for r in rows:
        where = ", ".join(f"{k} = {cell_text(v)}" for k, v in {**r["where"], r["x"]: r["at"]}
                          .items())
        z = r["z"]
        body.append([r["source"], r["metric"], where, cell_text(r["paper"]),
                     "" if r["ours"] is None else cell_text(r["ours"]),
                     "" if r["se"] is None else cell_text(r["se"]), str(r["repeats"]),
                     "" if z is None else f"{z:+.2f}"])
        classes.append("" if z is None else "near" if abs(z) <= 2 else "far"
                       if abs(z) > 4 else "")
    scored = [r for r in rows if r["z"] is not None]
    near = sum(abs(r["z"]) <= 2 for r in scored)
    head = ["printed in", "metric", "point", "paper", "ours (mean)", "standard error",
            "repeats", "(ours − paper) / se"]
    return ("<h2>Beside the paper</h2>"
            f"<p class=\"note\">{near} of {len(scored)} printed numbers lie within 2 standard "
            "errors of our mean (green); red: beyond 4. A number with no run of ours at its "
            "point is left blank.</p>"
            + _table(head, body, [False, False, False] + [True] * 5, classes))


def _environment_section(records: list[dict[str, Any]]) -> str:
    versions: dict[str, set[str]] = {}
    for r in records:
        for k, v in (r.get("versions") or {}).items():
            versions.setdefault(k, set()).add(str(v))
    rows = [[k, ", ".join(sorted(v))] for k, v in versions.items()]
    for label, key in (("backend", "backend"), ("pools", "pools")):
        rows.append([label, ", ".join(sorted({str(r.get(key)) for r in records}))])
    degraded = sum(is_degraded(r) for r in records)
    rows.append(["runs", f"{len(records)} ({degraded} degraded, left out above)"])
    wall = sum(float((r.get("timing") or {}).get("wall_s") or 0.0) for r in records)
    rows.append(["sum of the runs' wall times", f"{wall:.1f} s"])
    return _table(["", "value"], rows)


#: what stands for the figures in a page drawn without them (``page(figures=False)``)
NO_FIGURES = "<p class=\"note\">(figures left out)</p>"


def comparable(page_text: str) -> str:
    """A report page as ``ldpsim verify`` compares it: its figures section replaced by
    ``NO_FIGURES`` (matplotlib draws them, which varies with the machine) and the results
    directory's name left out (a directory may be moved)."""
    text = re.sub(r"<code>[^<]*/" + re.escape(RESULTS_FILE) + "</code>",
                  f"<code>{RESULTS_FILE}</code>", page_text)
    head, found, rest = text.partition("<h2>Figures</h2>\n")
    if not found:
        return text
    _, nxt, tail = rest.partition("\n<h2>")
    return f"{head}{found}{NO_FIGURES}{nxt}{tail}"


def page(out_dir: str | Path, every: list[dict[str, Any]], name: str,
         tables: list[dict[str, Any]], spec: Any = None, figures: bool = True,
         run_spec: Any = None, written: dict[str, Any] | None = None) -> str:
    """The report page of the results directory ``out_dir``: its records ``every`` (each
    proven to be one of its runs, in run order), the ``name`` and stored ``tables`` of its
    sweeps, the ``PlotSpec`` of its figures (``spec``; None: the default figures; those the
    run drew, ``run_spec``, are reused where they are the report's), its figures drawn or,
    without ``figures``, left out (``NO_FIGURES``), and the scenario as written (``written``:
    ``report_scenario.scenario_section``). ``simulator.sweep.reporting`` reads them from the
    directory.

    The page reads as a paper's results section: the scenario's description, its figures,
    the summary table (its columns in groups that fit the page), the paper's printed numbers
    beside ours, the cost per round, what a coalition learned; then the scenario as written
    and the environment.
    """
    out = Path(out_dir)
    records = usable(every, False)
    protocols = list(dict.fromkeys(str(r.get("protocol")) for r in records))
    name, description, scenario, published = scenario_section(name, tables, written or {})
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>ldpsim report: {_e(name)}</title><style>{CSS}</style></head><body>",
             f"<h1>ldpsim report: {_e(name)}</h1>",
             f"<p class=\"note\">{len(records)} runs of {', '.join(map(_e, protocols))}; "
             f"results in <code>{_e(out.name)}/{RESULTS_FILE}</code>.</p>"]
    if description:
        parts.append(f"<p>{_e(description)}</p>")
    sections = [
        ("Figures", _figures_section(out, spec, records, run_spec) if figures
         else NO_FIGURES),
        ("Summary", _summary_section(records, protocols)),
    ]
    for title, body in sections:
        parts.append(f"<h2>{_e(title)}</h2>\n{body}")
    parts.append(_published_section(published, records))
    for title, body in (("Cost per round", _per_round_section(records)),
                        ("What the coalition learned", _leakage_section(records)),
                        ("Scenario", scenario),
                        ("Environment", _environment_section(every))):
        parts.append(f"<h2>{_e(title)}</h2>\n{body}")
    parts.append(CHECK + "</body></html>")
    return "\n".join(parts)
