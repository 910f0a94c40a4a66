"""The numbers a paper prints, beside ours: a scenario's ``[[published]]`` tables.

A scenario that reproduces a printed table carries it, one ``[[published]]`` entry per printed
row::

    [[published]]
    source = "Table 3"                        # where the paper prints it
    metric = "correct"                        # the metric whose mean it is
    where = { protocol = "dpwevote", "data.n" = 10 }   # the settings the row holds fixed
    x = "params.epsilon"                      # the setting along the row
    at = [0.1, 0.2, 0.3]                      # its values
    values = [0.50680, 0.51265, 0.51665]      # the paper's numbers

``ldpsim report`` sets each printed number beside our mean over the repeats of the same point
and their difference in standard errors of our mean, (ours − paper) / (s / √repeats): within
about ±2 the paper's number is what our runs estimate; far outside it, one of the two differs.
"""

from __future__ import annotations

import math
from typing import Any

from ldpsim.simulator.results.store import jsonable
from ldpsim.simulator.results.summary import finite_number, mean_std, record_metrics

#: the keys of one ``[[published]]`` entry, and whether each is required
KEYS = {"source": True, "metric": True, "where": False, "x": True, "at": True, "values": True}


def check_published(entries: Any) -> list[str]:
    """Every problem of a scenario's ``published`` list, each naming the key."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return [f"[[published]]: got {entries!r}; allowed: tables (one [[published]] per "
                "printed row)"]
    errs = []
    for i, e in enumerate(entries):
        at = f"[[published]] #{i + 1}"
        for k in e:
            if k not in KEYS:
                errs.append(f"{at}: {k}: unknown key; allowed: {', '.join(KEYS)}")
        for k, required in KEYS.items():
            if required and k not in e:
                errs.append(f"{at}: {k}: missing")
        if not isinstance(e.get("source", ""), str) or not isinstance(e.get("metric", ""), str) \
                or not isinstance(e.get("x", ""), str):
            errs.append(f"{at}: source, metric and x: allowed: text")
        if not isinstance(e.get("where", {}), dict):
            errs.append(f"{at}: where: got {e.get('where')!r}; allowed: a table of settings")
        at_, values = e.get("at", []), e.get("values", [])
        if not isinstance(at_, list) or not isinstance(values, list) or len(at_) != len(values):
            errs.append(f"{at}: at and values: allowed: two lists of equal length")
        elif not all(finite_number(v) is not None for v in values):
            errs.append(f"{at}: values: allowed: numbers")
    return errs


def _matches(rec: dict[str, Any], where: dict[str, Any], x: str, value: Any) -> bool:
    point = {**(rec.get("point") or {}), "protocol": rec.get("protocol")}
    for k, v in {**where, x: value}.items():
        got = point.get(k)
        if got is None and "." in k:  # a fixed setting is not in the point: the record's own
            section, name = k.split(".", 1)
            got = (rec.get("params_requested" if section == "params" else section)
                   or {}).get(name)
        if jsonable(got) != jsonable(v) and not (finite_number(got) is not None
                                                 and finite_number(v) is not None
                                                 and math.isclose(float(got), float(v))):
            return False
    return True


def compare(entries: list[dict[str, Any]], records: list[dict[str, Any]]
            ) -> list[dict[str, Any]]:
    """One row per printed number: ``source``, ``metric``, the point (``where`` and the x
    value), ``paper``, ``ours`` (mean over the matching records; None when the results hold
    no such run), ``se`` (standard error of our mean), ``repeats`` and ``z``
    ((ours − paper) / se; None without a spread)."""
    rows = []
    for e in entries:
        where = dict(e.get("where") or {})
        for value, paper in zip(e["at"], e["values"], strict=True):
            got = [finite_number(record_metrics(r).get(e["metric"])) for r in records
                   if _matches(r, where, e["x"], value)]
            vals = [v for v in got if v is not None]
            ours, std, _ = mean_std(vals)
            se = z = None
            if len(vals) > 1:
                se = std / math.sqrt(len(vals))
                z = (ours - float(paper)) / se if se > 0 else None
            rows.append({"source": e["source"], "metric": e["metric"], "where": where,
                         "x": e["x"], "at": value, "paper": float(paper), "ours": ours,
                         "se": se, "repeats": len(vals), "z": z})
    return rows
