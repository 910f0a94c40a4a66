"""The pages of ``ldpsim reproduce``: one per paper (``OUT/paperNNN/index.html``), linking each
scenario's report with its description, runs, time and how our means meet the paper's printed
numbers, and one (``OUT/index.html``) linking the papers. Self-contained, like the reports
(``results.report.CSS``): nothing to fetch."""

from __future__ import annotations

import html
from typing import Any

from ldpsim.simulator.results.report import CSS
from ldpsim.simulator.scenario.measured import duration_text

#: each page's file name
INDEX = "index.html"
#: what each paper is about (its scenarios' descriptions cite it)
TOPICS = {"paper000": "rank aggregation", "paper001": "truth inference",
          "paper002": "weighted voting (DPWeVote)", "paper003": "ranking collection (SAFARI)",
          "paper004": "ethical decisions"}


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _doc(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1>{body}</body></html>\n")


def _table(head: list[str], rows: list[list[str]]) -> str:
    return ("<div class=\"wide\"><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>"
                                for r in rows) + "</table></div>")


def published_text(published: list[int] | None) -> str:
    """``"20 printed numbers: 18 of 20 within 2 SE"`` (``[printed, compared, within]``), or
    "" without printed numbers."""
    if not published:
        return ""
    printed, compared, within = published
    return (f"{printed} printed number{'s' if printed != 1 else ''}: {within} of {compared} "
            "within 2 SE of ours")


def _time(o: Any) -> str:
    took = duration_text(o.seconds) if o.status == "done" or o.seconds else "-"
    measured = f" (measured ~{duration_text(o.measured)})" if o.measured is not None else ""
    return _e(took + measured)


def _name_cell(o: Any) -> str:
    name = f"<a href=\"{_e(o.report)}\">{_e(o.name)}</a>" if o.report else _e(o.name)
    return name + f"<div class=\"note\">{_e(o.description)}</div>"


def _status_cell(o: Any) -> str:
    cls = {"done": "near", "failed": "far"}.get(o.status, "")
    why = f"<div class=\"note\">{_e(o.reason)}</div>" if o.reason else ""
    return f"<span class=\"{cls}\">{_e(o.status)}</span>{why}"


def paper_page(paper: str, outcomes: list[Any], measured_s: float) -> str:
    """The page of one paper: a row per scenario (``reproduce.Outcome``), its report linked."""
    rows = [[_name_cell(o), _status_cell(o), _e(o.runs), _time(o),
             _e(published_text(o.published) or "-")] for o in outcomes]
    counts = ", ".join(f"{sum(o.status == s for o in outcomes)} {s}"
                       for s in ("done", "skipped", "failed"))
    body = (f"<p>{_e(TOPICS.get(paper, ''))}: {len(outcomes)} scenarios ({_e(counts)}); "
            f"measured time of the whole paper at its settings ~{_e(duration_text(measured_s))}"
            " with --jobs 1. Each scenario's report sets the paper's printed numbers beside "
            "our means, where the paper prints them.</p><p><a href=\"../" + INDEX +
            "\">all papers</a></p>"
            + _table(["scenario", "status", "runs", "time", "paper's printed numbers"], rows))
    return _doc(f"ldpsim reproduce: {paper}", body)


def index_page(papers: dict[str, list[Any]]) -> str:
    """The page linking each paper's page, with its scenarios' outcomes."""
    rows = []
    for paper, outcomes in papers.items():
        counts = ", ".join(f"{n} {s}" for s in ("done", "skipped", "failed")
                           if (n := sum(o.status == s for o in outcomes)))
        printed = [o.published for o in outcomes if o.published]
        within = (f"{sum(p[2] for p in printed)} of {sum(p[1] for p in printed)} within 2 SE"
                  if printed else "-")
        rows.append([f"<a href=\"{_e(paper)}/{INDEX}\">{_e(paper)}</a>",
                     _e(TOPICS.get(paper, "")), _e(counts),
                     _e(sum(o.runs for o in outcomes if o.status == "done")), _e(within)])
    body = ("<p>Each paper's figures and tables, ours, reproduced by <code>ldpsim reproduce"
            "</code>; each paper's page links its scenarios' reports.</p>"
            + _table(["paper", "topic", "scenarios", "runs", "printed numbers"], rows))
    return _doc("ldpsim reproduce", body)
