"""The summary as a plain-text table for the terminal (``ldpsim summary``, ``ldpsim audit``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.results.summary import is_number, metric_names

#: the communication costs the table shows after the metrics, under short headers: the wire
#: bytes (the msgpack envelopes an agent sent) beside the report bits (the information-theoretic
#: size of its reports, what the papers count)
TABLE_COSTS = {"comm.bytes_up_per_agent_mean": "wire_bytes_up/agent",
               "comm.report_bits_per_agent_mean": "report_bits/agent"}


def cell_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float | np.floating):
        return f"{float(v):.4g}"
    return str(v)


def spread_text(std: Any, count: Any) -> str:
    """A standard deviation over ``count`` repeats as a table prints it: ``n/a`` when there
    is one repeat (no spread to tell), else ``cell_text``."""
    return "n/a" if isinstance(count, int) and count < 2 else cell_text(std)


def format_table(columns: list[str], rows: list[dict[str, Any]], max_rows: int | None = 50,
                 std: bool = False) -> str:
    """Render a :func:`summarize` result as a plain-text aligned table.

    Parameters
    ----------
    columns, rows
        As returned by :func:`summarize`.
    max_rows : int or None, default 50
        At most this many rows are shown (None: all); a final line tells how many were left out.
    std : bool, default False
        Show each metric as ``mean ± std`` over the repeats (column ``NAME_mean ± std``).

    Returns
    -------
    str
        The axes, ``repeats``, the metrics' ``_mean`` columns, then those of ``TABLE_COSTS``
        the summary has (means over the repeats, under their short headers; the other costs
        and every ``_std`` are left out); floats with 4 significant digits, numbers
        right-aligned. No trailing newline.
    """
    if "repeats" in columns:
        cut = columns.index("repeats")
        shown = columns[:cut + 1] + [f"{m}_mean" for m in metric_names(columns)]
        shown += [c for c in TABLE_COSTS if c in columns]
    else:
        shown = list(columns)
    if not rows:
        return "(no results)"
    body = rows if max_rows is None else rows[:max_rows]

    def cell(r: dict[str, Any], c: str) -> str:
        sd = r.get(c[:-5] + "_std") if std and c.endswith("_mean") and c not in TABLE_COSTS \
            else None
        shown_sd = sd is not None and r.get(c) is not None
        return cell_text(r.get(c)) + (f" ± {spread_text(sd, r.get('repeats'))}" if shown_sd
                                      else "")

    cells = [[cell(r, c) for c in shown] for r in body]
    numeric = [all(r.get(c) is None or is_number(r.get(c)) for r in body) for c in shown]
    shown = [TABLE_COSTS[c] if c in TABLE_COSTS else c + " ± std" if std and c.endswith("_mean")
             else c for c in shown]
    widths = [max([len(c)] + [len(row[j]) for row in cells]) for j, c in enumerate(shown)]

    def line(vals: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric,
                                                                          strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(shown), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    if max_rows is not None and len(rows) > max_rows:
        out.append(f"... ({len(rows) - max_rows} more rows)")
    return "\n".join(out)
