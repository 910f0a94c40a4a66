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

A number the paper states as a gap between two protocols ("A beats B by 8.1%") names the
reference runs with ``versus``: settings that, laid over ``where``, pick B's runs. ``form``
says how the two means a (``where``) and b (``versus``) combine: ``"relative"`` (the default),
(b − a) / b, the share by which a lies below b; ``"difference"``, a − b. ``values`` are then
such gaps (8.1% is 0.081)::

    [[published]]
    source = "Sec. 6.5"
    metric = "kendall_tau"
    where = { protocol = "ldp_kwiksort_rr", "data.n" = 5000 }
    versus = { protocol = "ldp_kwiksort_lap" }
    x = "data.theta"
    at = [0.25, 0.5]
    values = [0.135, 0.334]

Its standard error is the delta method's over the two means' standard errors, taken as
independent.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ldpsim.simulator.results.store import jsonable
from ldpsim.simulator.results.summary import finite_number, mean_std, record_metrics

#: the keys of one ``[[published]]`` entry, and whether each is required
KEYS = {"source": True, "metric": True, "where": False, "versus": False, "form": False,
        "x": True, "at": True, "values": True}

#: how ``form`` combines a (the runs of ``where``) and b (those of ``versus``)
FORMS = {"relative": "(b − a) / b", "difference": "a − b"}


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
        if not isinstance(e.get("versus", {}), dict):
            errs.append(f"{at}: versus: got {e.get('versus')!r}; allowed: a table of settings")
        if "form" in e and e["form"] not in FORMS:
            errs.append(f"{at}: form: got {e['form']!r}; allowed: {', '.join(FORMS)}")
        if "form" in e and "versus" not in e:
            errs.append(f"{at}: form: needs versus (the runs the gap is taken against)")
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


def _mean_se(records: list[dict[str, Any]], metric: str, where: dict[str, Any], x: str,
             value: Any, groups: list[tuple[dict[str, Any], list[int]]] | None = None
             ) -> tuple[float | None, float | None, int]:
    """The mean of ``metric`` over the records that match (``_matches``), in the records'
    order, its standard error and their number. With ``groups`` (``_grouped``), each group's
    first record decides for the whole group."""
    if groups is None:
        chosen = [r for r in records if _matches(r, where, x, value)]
    else:
        at = sorted(i for rep, idx in groups if _matches(rep, where, x, value) for i in idx)
        chosen = [records[i] for i in at]
    got = [finite_number(record_metrics(r).get(metric)) for r in chosen]
    vals = [v for v in got if v is not None]
    ours, std, _ = mean_std(vals)
    se = std / math.sqrt(len(vals)) if len(vals) > 1 else None
    return (ours if vals else None), se, len(vals)


def _grouped(entries: list[dict[str, Any]], records: list[dict[str, Any]]
             ) -> list[tuple[dict[str, Any], list[int]]]:
    """The records in groups that every entry's settings match alike: the same point,
    protocol and sections the entries name (``_matches`` reads nothing else), each group as
    its first record and the indices of its records. A sweep's repeats of a point then cost
    one match per printed number, not one per record."""
    sections = {k.split(".", 1)[0] for e in entries
                for k in [*(e.get("where") or {}), *(e.get("versus") or {}), e["x"]]}
    sections = {"params_requested" if s == "params" else s for s in sections}
    groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for i, r in enumerate(records):
        sig = json.dumps([r.get("point"), r.get("protocol"),
                          [r.get(s) for s in sorted(sections)]], sort_keys=True, default=repr)
        if sig in groups:
            groups[sig][1].append(i)
        else:
            groups[sig] = (r, [i])
    return list(groups.values())


def _gap(form: str, a: float, sa: float | None, b: float, sb: float | None
         ) -> tuple[float | None, float | None]:
    """The gap ``form`` of the means a and b, and its standard error (delta method, the two
    means independent; None without both spreads)."""
    if form == "difference":
        se = math.hypot(sa, sb) if sa is not None and sb is not None else None
        return a - b, se
    if b == 0:
        return None, None
    se = (math.hypot(sa / b, a * sb / (b * b)) if sa is not None and sb is not None
          else None)
    return (b - a) / b, se


def _label(e: dict[str, Any]) -> str:
    if "versus" not in e:
        return e["metric"]
    vs = ", ".join(f"{k} = {v}" for k, v in e["versus"].items())
    return f"{e['metric']}: {FORMS[e.get('form', 'relative')]}, b: {vs}"


def compare(entries: list[dict[str, Any]], records: list[dict[str, Any]]
            ) -> list[dict[str, Any]]:
    """One row per printed number: ``source``, ``metric`` (for a gap, the metric with the form
    and the reference runs), the point (``where`` and the x value), ``paper``, ``ours`` (mean
    over the matching records, or the gap of two such means; None when the results hold no
    such run), ``se`` (its standard error), ``repeats`` (the fewer of the two, for a gap) and
    ``z`` ((ours − paper) / se; None without a spread)."""
    rows = []
    groups = _grouped(entries, records)
    for e in entries:
        where = dict(e.get("where") or {})
        for value, paper in zip(e["at"], e["values"], strict=True):
            ours, se, n = _mean_se(records, e["metric"], where, e["x"], value, groups)
            if "versus" in e:
                b, sb, nb = _mean_se(records, e["metric"], {**where, **e["versus"]}, e["x"],
                                     value, groups)
                n = min(n, nb)
                ours, se = ((None, None) if ours is None or b is None
                            else _gap(e.get("form", "relative"), ours, se, b, sb))
            z = (ours - float(paper)) / se if ours is not None and se else None
            rows.append({"source": e["source"], "metric": _label(e), "where": where,
                         "x": e["x"], "at": value, "paper": float(paper), "ours": ours,
                         "se": se, "repeats": n, "z": z})
    return rows
