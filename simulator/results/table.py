"""The summary as a plain-text table for the terminal (``ldpsim summary``, ``ldpsim audit``).

The table shows a parameter point's settings, ``repeats``, each metric's mean and the costs of
``TABLE_COSTS``; a ``[deployment]``'s summary adds ``DEPLOYMENT_COSTS`` (the bytes down and the
virtual time and dropout rate the deployment is run for). Wider than the terminal, its columns
are grouped into stacked tables, each repeating the point's settings, with headers wrapped at
their ``.``, ``_`` and ``/`` (:func:`format_table` with ``width``).
"""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any

import numpy as np
from ldpsim.simulator.results.summary import COST_COLUMNS, is_number, metric_names

#: the communication costs the table shows after the metrics, under short headers: the wire
#: bytes (the msgpack envelopes an agent sent) beside the report bits (the information-theoretic
#: size of its reports, what the papers count)
TABLE_COSTS = {"comm.bytes_up_per_agent_mean": "wire_bytes_up/agent",
               "comm.report_bits_per_agent_mean": "report_bits/agent"}
#: what a ``[deployment]``'s table shows besides: the bytes each agent receives, the run's
#: virtual time and the share of asked agents that dropped out (offline or late)
DEPLOYMENT_COSTS = {"comm.bytes_down_per_agent_mean": "wire_bytes_down/agent",
                    "virtual.wall_s": "virtual.wall_s",
                    "virtual.dropout_rate": "virtual.dropout_rate"}
#: the settings whose missing value is no limit: a scenario's ``inf``, stored as None (the
#: ``[deployment]`` keys of ``simulator.scenario.deployment.UNBOUNDED``); the table prints ``inf``
UNLIMITED = ("deployment.down_mbps", "deployment.up_mbps", "deployment.round_deadline_s",
             "deployment.curator_down_mbps", "deployment.curator_up_mbps")
#: what a deployment's table prints for a measurement a point lacks
MISSING = "n/a"
#: the column separator
GAP = "  "


def cell_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float | np.floating):
        return f"{float(v):.4g}"
    return str(v)


def is_deployment(columns: list[str]) -> bool:
    """Whether a :func:`summarize` column list is a ``[deployment]``'s (it has the virtual
    time of ``simulator.session.network``)."""
    return any(c.startswith("virtual.") for c in columns)


def table_columns(columns: list[str]) -> list[str]:
    """The columns of a :func:`summarize` result the table shows, in order.

    Parameters
    ----------
    columns : list of str
        As returned by :func:`summarize`.

    Returns
    -------
    list of str
        The axes, ``repeats``, the metrics' ``_mean`` columns, then the costs of
        ``TABLE_COSTS`` (and, in a deployment's table, of ``DEPLOYMENT_COSTS``) the summary
        has, in the summary's order; every column of a list without ``repeats``.
    """
    if "repeats" not in columns:
        return list(columns)
    cut = columns.index("repeats")
    costs = {**TABLE_COSTS, **(DEPLOYMENT_COSTS if is_deployment(columns) else {})}
    return (columns[:cut + 1] + [f"{m}_mean" for m in metric_names(columns)]
            + [c for c, _, _ in COST_COLUMNS if c in costs and c in columns])


def table_cell(row: dict[str, Any], column: str, std: bool = False, missing: str = "") -> str:
    """One cell of the table: ``inf`` for a setting of ``UNLIMITED`` without a limit,
    ``missing`` for a metric or cost the point lacks, ``mean ± std`` with ``std`` (a metric's
    ``_mean`` column whose ``_std`` the row has), else :func:`cell_text`."""
    v = row.get(column)
    if v is None:
        return "inf" if column in UNLIMITED else (missing if column.endswith("_mean")
                                                  or column in DEPLOYMENT_COSTS else "")
    sd = row.get(column[:-5] + "_std") if std and column.endswith("_mean") and \
        column not in TABLE_COSTS and column not in DEPLOYMENT_COSTS else None
    return cell_text(v) + (f" ± {spread_text(sd, row.get('repeats'))}" if sd is not None
                            else "")


def header_text(column: str, std: bool = False) -> str:
    """A column's header: the short name of a cost, ``NAME_mean ± std`` with ``std``."""
    costs = {**TABLE_COSTS, **DEPLOYMENT_COSTS}
    if column in costs:
        return costs[column]
    return column + " ± std" if std and column.endswith("_mean") else column


def terminal_width() -> int | None:
    """The terminal's width in characters (``shutil.get_terminal_size``: ``COLUMNS``, else the
    terminal's own) when standard output is a terminal; None (no wrapping) for a file or
    pipe."""
    isatty = getattr(sys.stdout, "isatty", None)
    return shutil.get_terminal_size().columns if isatty is not None and isatty() else None


def spread_text(std: Any, count: Any) -> str:
    """A standard deviation over ``count`` repeats as a table prints it: ``n/a`` when there
    is one repeat (no spread to tell), else ``cell_text``."""
    return "n/a" if isinstance(count, int) and count < 2 else cell_text(std)


def format_table(columns: list[str], rows: list[dict[str, Any]], max_rows: int | None = 50,
                 std: bool = False, width: int | None = None) -> str:
    """Render a :func:`summarize` result as a plain-text aligned table.

    Parameters
    ----------
    columns, rows
        As returned by :func:`summarize`.
    max_rows : int or None, default 50
        At most this many rows are shown (None: all); a final line tells how many were left out.
    std : bool, default False
        Show each metric as ``mean ± std`` over the repeats (column ``NAME_mean ± std``).
    width : int or None, default None
        The terminal's width (:func:`terminal_width`). A table wider than it is shown as
        several stacked tables, each repeating the point's settings (the columns before
        ``repeats``) with headers wrapped over lines, each as narrow as ``width`` allows.
        None: one table, however wide.

    Returns
    -------
    str
        The columns of :func:`table_columns` under their short headers (the other costs and
        every ``_std`` are left out); floats with 4 significant digits, numbers
        right-aligned; ``inf`` where a setting has no limit (``UNLIMITED``) and, in a
        deployment's table, ``n/a`` where a point lacks a metric or cost. No trailing newline.
    """
    shown = table_columns(columns)
    if not rows:
        return "(no results)"
    body = rows if max_rows is None else rows[:max_rows]
    missing = MISSING if is_deployment(columns) else ""
    cells = [[table_cell(r, c, std, missing) for c in shown] for r in body]
    numeric = [all(r.get(c) is None or is_number(r.get(c)) for r in body) for c in shown]
    heads = [header_text(c, std) for c in shown]
    keys = shown.index("repeats") if "repeats" in shown else 0
    out = _layout(heads, cells, numeric, keys, width)
    if max_rows is not None and len(rows) > max_rows:
        out.append(f"... ({len(rows) - max_rows} more rows)")
    return "\n".join(out)


def _layout(heads: list[str], cells: list[list[str]], numeric: list[bool], keys: int,
            width: int | None) -> list[str]:
    """The table's lines: one table when it fits ``width`` (or ``width`` is None), else
    stacked tables of the first ``keys`` columns and as many more as fit, headers wrapped."""
    natural = [max([len(h)] + [len(row[j]) for row in cells]) for j, h in enumerate(heads)]
    if width is None or _span(natural) <= width:
        return _lines([[h] for h in heads], cells, numeric, natural, list(range(len(heads))))
    narrow = [max([len(w) for w in _pieces(h)] + [len(row[j]) for row in cells])
              for j, h in enumerate(heads)]
    groups: list[list[int]] = [[]]
    for j in range(keys, len(heads)):
        if groups[-1] and _span([narrow[i] for i in [*range(keys), *groups[-1], j]]) > width:
            groups.append([])
        groups[-1].append(j)
    out: list[str] = []
    for group in groups:
        cols = [*range(keys), *group]
        widths = _widen(heads, cols, narrow, natural, width)
        if out:
            out.append("")
        out += _lines([_wrap(h, w) for h, w in zip(heads, widths, strict=True)], cells,
                      numeric, widths, cols)
    return out


def _widen(heads: list[str], cols: list[int], narrow: list[int], natural: list[int],
           width: int) -> list[int]:
    """The widths of one table's columns ``cols``: ``narrow``, widened within ``width`` (up
    to ``natural``) where that takes a line off the deepest header, the cheapest first."""
    widths = list(narrow)
    slack = width - _span([widths[j] for j in cols])
    while True:
        options = []
        for j in cols:
            depth = len(_wrap(heads[j], widths[j]))
            fewer = next((w for w in range(widths[j] + 1, natural[j] + 1)
                          if len(_wrap(heads[j], w)) < depth), None)
            if fewer is not None and fewer - widths[j] <= slack:
                options.append((-depth, fewer - widths[j], j, fewer))
        if not options:
            return widths
        _, cost, j, fewer = min(options)
        widths[j], slack = fewer, slack - cost


def _span(widths: list[int]) -> int:
    """The width of a table of columns this wide, ``GAP`` between them."""
    return sum(widths) + len(GAP) * max(len(widths) - 1, 0)


def _pieces(head: str) -> list[str]:
    """A header cut after each ``.``, ``_``, ``/`` and space (where it may wrap), ``± std``
    whole."""
    return [p for p in re.findall(r"± std|[^._/ ]*[._/ ]?", head) if p]


def _wrap(head: str, width: int) -> list[str]:
    """A header over as few lines of at most ``width`` characters as its pieces allow."""
    lines = [""]
    for piece in _pieces(head):
        if lines[-1] and len((lines[-1] + piece).rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return [ln.rstrip() for ln in lines]


def _lines(wrapped: list[list[str]], cells: list[list[str]], numeric: list[bool],
           widths: list[int], cols: list[int]) -> list[str]:
    """One table of the columns ``cols``: its header lines (bottom-aligned), the rule and the
    rows, each line without trailing blanks."""

    def line(vals: list[str]) -> str:
        return GAP.join(v.rjust(widths[j]) if numeric[j] else v.ljust(widths[j])
                        for v, j in zip(vals, cols, strict=True)).rstrip()

    depth = max(len(wrapped[j]) for j in cols)
    padded = {j: [""] * (depth - len(wrapped[j])) + wrapped[j] for j in cols}
    out = [line([padded[j][i] for j in cols]) for i in range(depth)]
    out.append(GAP.join("-" * widths[j] for j in cols))
    out += [line([row[j] for j in cols]) for row in cells]
    return out
