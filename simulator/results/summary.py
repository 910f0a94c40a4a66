"""The summary of run records: one row per parameter point, and one per run and round.

:func:`summarize` aggregates the records per parameter point (mean and sample standard deviation
over repeats), :func:`write_summary` saves that as ``summary.csv``; :func:`per_round` is one row
per run and round (``per_round.csv``, ``Results.per_round``, the bytes-by-round figure). Both
group a record into its parameter point (``record_points``: the settings that differ between
stored runs) by one definition, so a summary never averages runs of different settings.
``simulator.results.table`` renders the summary for the terminal, ``simulator.results.plots``
draws the figures.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.results.intervals import exact_interval
from ldpsim.simulator.results.store import (
    PER_ROUND_FILE,
    SUMMARY_FILE,
    atomic_write_bytes,
    jsonable,
)

# (column name, section of the record, source keys tried in order); each is a mean over repeats.
# Two communication costs: the wire bytes (``bytes_*``: the msgpack envelopes an agent sent and
# received, framing included) and the report bits (the information-theoretic size of one
# agent's reports, summed over the rounds: the cost the papers count).
COST_COLUMNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("comm.bytes_up_per_agent_mean", "comm", ("bytes_up_per_agent_mean", "bytes_up_per_agent")),
    ("comm.bytes_down_per_agent_mean", "comm",
     ("bytes_down_per_agent_mean", "bytes_down_per_agent")),
    ("comm.report_bits_per_agent_mean", "comm", ("report_bits_per_agent",)),
    ("timing.agent_cpu_s_mean", "timing", ("agent_cpu_s_mean", "agent_cpu_s")),
    ("timing.wall_s", "timing", ("wall_s",)),
    # a ``[deployment]``'s virtual time (``session.network``): only records with one
    ("virtual.wall_s", "virtual", ("wall_s",)),
    ("virtual.dropout_rate", "virtual", ("dropout_rate",)),
)
#: cost columns the summary also gives a sample standard deviation over the repeats, in the
#: column after the mean (the report bits: a protocol whose rounds vary between runs varies)
COST_STD_COLUMNS: dict[str, str] = {
    "comm.report_bits_per_agent_mean": "comm.report_bits_per_agent_std"}



@dataclass
class Point:
    """All records of one parameter point, with their aggregates."""

    point: dict[str, Any]
    protocol: str
    records: list[dict[str, Any]] = field(default_factory=list)
    # metric name -> (mean, std, count); mean/std None when no usable value
    metrics: dict[str, tuple[float | None, float | None, int]] = field(default_factory=dict)
    # cost column -> its mean over the repeats that have it
    costs: dict[str, float | None] = field(default_factory=dict)
    # cost column -> (mean, std, count), as ``metrics`` (the cost plots' bands)
    cost_stats: dict[str, tuple[float | None, float | None, int]] = field(default_factory=dict)
    # leakage accuracy -> (trials, exact 95% interval low, high), pooled over the repeats
    # (``pooled_leakage``): what the figures' bands and the summary's columns show for it
    intervals: dict[str, tuple[int, float, float]] = field(default_factory=dict)


#: what ``[collusion] attacks`` records per run (``record["leakage"]``, see
#: ``simulator.audit.leakage``) and the summary and plots show as ``leakage.<name>``
LEAKAGE_METRICS = ("report_accuracy", "differencing_accuracy", "report_bound")
#: the attacks whose accuracy rests on counted trials (``leakage.<attack>_trials``, ``_wins``)
ATTACKS = ("report", "differencing")


def pooled_leakage(records: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """Each attack's trials and wins summed over ``records`` (a point's repeats), with the
    exact 95% interval of the pooled rate (``intervals.exact_interval``), by metric name
    (``leakage.report_accuracy``...); attacks no record scored are left out."""
    out = {}
    for attack in ATTACKS:
        trials = wins = 0.0
        for rec in records:
            leak = rec.get("leakage") or {}
            t, w = leak.get(f"{attack}_trials"), leak.get(f"{attack}_wins")
            if isinstance(t, int) and t > 0 and finite_number(w) is not None:
                trials, wins = trials + t, wins + float(w)
        if trials:
            lo, hi = exact_interval(wins, int(trials))
            out[f"leakage.{attack}_accuracy"] = (int(trials), lo, hi)
    return out


def record_metrics(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's metrics: the protocol's utility metrics, and what the coalition learned
    (``leakage`` of a run with ``[collusion] attacks``) as ``leakage.<name>``."""
    out = dict(rec.get("metrics") or {})
    leak = rec.get("leakage") or {}
    for k in LEAKAGE_METRICS:
        if k in leak:
            out[f"leakage.{k}"] = leak[k]
    return out


def finite_number(v: Any) -> float | None:
    """``v`` as a finite float, or None when missing / non-numeric / non-finite."""
    if type(v) is float:  # most values: the float itself
        return v if math.isfinite(v) else None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float | np.integer | np.floating):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def mean_std(values: list[float]) -> tuple[float | None, float | None, int]:
    """(mean, sample standard deviation (ddof 1; 0.0 of one value), count) of ``values``;
    (None, None, 0) of none."""
    if not values:
        return None, None, 0
    arr = np.asarray(values, dtype=float)
    # the array's own methods: ``np.std`` and ``np.mean`` call the same, the same bits
    std = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return float(arr.mean()), std, len(arr)


def point_id(point: dict[str, Any]) -> str:
    return json.dumps(jsonable(point), sort_keys=True, separators=(",", ":"))


#: the values whose ``point_id`` a point's ``_point_key`` may stand for (by exact type)
_KEYED = frozenset((str, int, bool, type(None)))


def _point_key(point: dict[str, Any]) -> tuple[Any, ...] | None:
    """A hashable stand-in for ``point_id(point)``: its items with each value's type, when
    every value is a str, int, bool, None or a float other than 0 and nan (equal stand-ins
    then have equal ids; -0.0 equals 0.0 and nan no nan); None otherwise."""
    out = []
    for k, v in point.items():
        kind = type(v)
        if kind not in _KEYED and not (kind is float and v == v and v != 0):
            return None
        out.append((k, kind, v))
    return tuple(out)


def in_value_order(values: Iterable[Any]) -> list[Any]:
    """The distinct ``values`` in the order the figures show them (panels, lines, legends)
    and the tables sort them: numbers by value (10 after 2, not before it as text), then
    every other value (text, booleans, lists) in the order first seen, which is the
    scenario's (its ``protocols`` list, a parameter's list of values). None is left out.

    Examples
    --------
    >>> in_value_order([100, 10, "b", 50, 2.5, "a", 10, None])
    [2.5, 10, 50, 100, 'b', 'a']
    """
    distinct: dict[str, Any] = {}
    for v in values:
        if v is not None:
            distinct.setdefault(point_id({"v": v}), v)
    numbers = sorted((v for v in distinct.values() if is_number(v)), key=float)
    return numbers + [v for v in distinct.values() if not is_number(v)]


def value_rank(values: Iterable[Any]) -> dict[str, int]:
    """Each distinct value's place in ``in_value_order``, by its ``point_id({"v": value})``
    (what sorts rows and lines by several settings at once)."""
    return {point_id({"v": v}): i for i, v in enumerate(in_value_order(values))}


def _setting(rec: dict[str, Any], key: str) -> Any:
    section, name = key.split(".", 1)
    table = rec.get("params_requested" if section == "params" else section) or {}
    return table.get(name)


def _varying_settings(records: list[dict[str, Any]]) -> list[str]:
    """``params.*`` (as requested) and ``data.*`` settings whose value differs between records:
    the sweep axes, and any setting a resumed or extended sweep changed."""
    keys: dict[str, None] = {}
    for rec in records:
        for section, table in (("params", rec.get("params_requested")),
                               ("data", rec.get("data"))):
            for k in table or {}:
                keys.setdefault(f"{section}.{k}", None)
    seen: dict[tuple[str, str], set[str]] = {}  # (protocol, key) -> values (one protocol's
    memo: dict[tuple[type, Any], str] = {}       # parameters differ from another's by design)
    varying: set[str] = set()  # the keys found to vary: not looked at again
    where = [(key, *key.split(".", 1)) for key in keys]  # (``_setting``'s section and name)
    for rec in records:
        protocol = str(rec.get("protocol"))
        tables = {"params": rec.get("params_requested") or {}, "data": rec.get("data") or {}}
        for key, section, name in where:
            if key in varying:
                continue
            values = seen.setdefault((protocol, key), set())
            values.add(_value_json(tables[section].get(name), memo))
            if len(values) > 1:
                varying.add(key)
    return [k for k in keys if k in varying]


def _value_json(value: Any, memo: dict[tuple[type, Any], str]) -> str:
    """``value`` as JSON (sorted keys), a plain scalar's found once in ``memo`` (by its type
    and value; a float 0 or nan apart: -0.0 equals 0.0, and nan no nan)."""
    kind = type(value)
    if kind in (str, int, bool) or (kind is float and value == value and value != 0):
        got = memo.get((kind, value))
        if got is None:
            got = memo[(kind, value)] = json.dumps(jsonable(value), sort_keys=True)
        return got
    return json.dumps(jsonable(value), sort_keys=True)


def record_points(records: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Each record's parameter point: its ``point`` (the swept values) with every setting
    whose value differs between the records (settings that differ between stored runs never
    average together). Returns the axes (first-seen order) and the points, one per record."""
    axes: dict[str, None] = {}
    out: list[dict[str, Any]] = []
    varying = _varying_settings(records)
    for rec in records:
        point = dict(rec.get("point") or {})
        for k in varying:
            if k not in point and _setting(rec, k) is not None:
                point[k] = _setting(rec, k)
        for a in point:
            axes.setdefault(a, None)
        out.append(point)
    return list(axes), out


def group_points(records: list[dict[str, Any]],
                 found: tuple[list[str], list[dict[str, Any]]] | None = None
                 ) -> tuple[list[str], list[str], list[Point]]:
    """Group records by their parameter point (``record_points``; first-appearance order)
    and aggregate. ``found``: ``record_points(records)``, when the caller has it.

    Returns the axes (first-seen order), the metric names (first-seen order), and the points.
    """
    metric_names: dict[str, None] = {}
    points: dict[str, Point] = {}
    axes, rec_points = record_points(records) if found is None else found
    metrics: dict[int, dict[str, Any]] = {}  # each record's, by its place in ``records``
    members: dict[str, list[int]] = {}
    ids: dict[tuple[Any, ...], str] = {}  # ``point_id`` by ``_point_key``: once per point
    for i, (rec, point) in enumerate(zip(records, rec_points, strict=True)):
        metrics[i] = record_metrics(rec)
        for m in metrics[i]:
            metric_names.setdefault(m, None)
        key = _point_key(point)
        pid = ids.get(key) if key is not None else None
        if pid is None:
            pid = point_id(point)
            if key is not None:
                ids[key] = pid
        if pid not in points:
            protocol = point.get("protocol", rec.get("protocol", ""))
            points[pid] = Point(point=dict(point), protocol=str(protocol))
            members[pid] = []
        points[pid].records.append(rec)
        members[pid].append(i)
    for pid, p in points.items():
        _aggregate(p, [metrics[i] for i in members[pid]], metric_names)
    return axes, list(metric_names), list(points.values())


def _aggregate(p: Point, metrics: list[dict[str, Any]], metric_names: dict[str, None]) -> None:
    """``p``'s metrics (``metrics``: its records', in order), leakage intervals and costs:
    each the mean and std of its finite values (``mean_std``, ``finite_number``)."""
    seen: dict[str, list[float]] = {}
    isfinite = math.isfinite
    for row in metrics:
        for m, v in row.items():
            vals = seen.get(m)
            if vals is None:
                vals = seen[m] = []
            if type(v) is float:  # ``finite_number`` of a float, without the call
                if isfinite(v):
                    vals.append(v)
            else:
                x = finite_number(v)
                if x is not None:
                    vals.append(x)
    p.metrics = {m: mean_std(seen[m]) for m in metric_names if m in seen}
    p.intervals = pooled_leakage(p.records)
    sections = {section: [rec.get(section) or {} for rec in p.records]
                for section in {section for _, section, _ in COST_COLUMNS}}
    for col, section, keys in COST_COLUMNS:
        vals = []
        for sec in sections[section]:
            for k in keys:
                x = finite_number(sec.get(k)) if k in sec else None
                if x is not None:
                    vals.append(x)
                    break
        if vals:
            p.cost_stats[col] = mean_std(vals)
            p.costs[col] = p.cost_stats[col][0]


def metric_names(columns: list[str]) -> list[str]:
    """The metrics of a :func:`summarize` column list, in its order: ``NAME`` of each
    ``NAME_mean`` after ``repeats`` that is no cost column (``comm.*``, ``timing.*``)."""
    start = columns.index("repeats") + 1 if "repeats" in columns else 0
    return [c[:-5] for c in columns[start:]
            if c.endswith("_mean") and not c.startswith(("comm.", "timing.", "virtual."))]


def cost_names(columns: list[str]) -> list[str]:
    """The cost columns of a :func:`summarize` column list, in its order (``comm.*``,
    ``timing.*``, ``virtual.*``; their means, not the ``COST_STD_COLUMNS``)."""
    stds = set(COST_STD_COLUMNS.values())
    return [c for c in columns
            if c.startswith(("comm.", "timing.", "virtual.")) and c not in stds]


def summarize(records: list[dict[str, Any]],
              found: tuple[list[str], list[dict[str, Any]]] | None = None
              ) -> tuple[list[str], list[dict[str, Any]]]:
    """Aggregate run records into one row per parameter point.

    Parameters
    ----------
    records : list of dict
        Result records (see :class:`ResultStore`); grouped by their ``point`` dict.
    found : tuple, optional
        ``record_points(records)``, when the caller has it (the same table either way).

    Returns
    -------
    columns : list of str
        The axes in first-seen order (``protocol``, ``params.<name>``, ``data.<name>``), then
        ``repeats``, then ``<metric>_mean`` and ``<metric>_std`` for each metric (first-seen
        order; after a coalition's attack accuracy, ``_trials``, ``_lo`` and ``_hi``: the
        trials pooled over the repeats and their exact 95% interval, ``pooled_leakage``), then
        whichever of ``COST_COLUMNS`` occur in the records:
        ``comm.bytes_up_per_agent_mean`` and ``comm.bytes_down_per_agent_mean`` (the wire
        bytes: msgpack envelopes, framing included), ``comm.report_bits_per_agent_mean`` with
        ``comm.report_bits_per_agent_std`` (the report bits: the information-theoretic size of
        one agent's reports over the run, what the papers count), ``timing.agent_cpu_s_mean``,
        ``timing.wall_s`` and a ``[deployment]``'s ``virtual.wall_s`` and
        ``virtual.dropout_rate``.
    rows : list of dict
        One dict per distinct point, in order of first appearance, with every column as a key.
        A point lacking an axis (a protocol without that parameter) or a metric has ``None``
        there (an empty CSV cell). Means are over the repeats' non-missing values (None and
        non-finite values are ignored); ``_std`` is the sample standard deviation (ddof=1),
        0.0 when there is one value. Cost columns are means over repeats, the
        ``COST_STD_COLUMNS`` their sample standard deviations.
    """
    axes, metric_names, points = group_points(records, found)
    cost_cols: list[str] = []
    for c, _, _ in COST_COLUMNS:
        if any(c in p.costs for p in points):
            cost_cols += [c, COST_STD_COLUMNS[c]] if c in COST_STD_COLUMNS else [c]
    stds = {s: m for m, s in COST_STD_COLUMNS.items()}
    columns = [*axes, "repeats"]
    exact = [m for m in metric_names if any(m in p.intervals for p in points)]
    for m in metric_names:
        columns += [f"{m}_mean", f"{m}_std"]
        if m in exact:  # what it rests on: the pooled trials and their exact interval
            columns += [f"{m}_trials", f"{m}_lo", f"{m}_hi"]
    columns += cost_cols
    rows: list[dict[str, Any]] = []
    for p in points:
        row: dict[str, Any] = {a: p.point.get(a) for a in axes}
        row["repeats"] = len(p.records)
        for m in metric_names:
            mean, std, _ = p.metrics.get(m, (None, None, 0))
            row[f"{m}_mean"], row[f"{m}_std"] = mean, std
            if m in exact:
                trials, lo, hi = p.intervals.get(m, (None, None, None))
                row[f"{m}_trials"], row[f"{m}_lo"], row[f"{m}_hi"] = trials, lo, hi
        for c in cost_cols:
            row[c] = p.cost_stats.get(stds[c], (None, None))[1] if c in stds else p.costs.get(c)
        rows.append(row)
    return columns, rows


#: the per-round table's columns after each run's key, status, protocol, settings and repeat:
#: the record's ``comm.per_round`` entry (``bytes_*`` over the round's agents, as stored),
#: with the bytes per asked agent derived from it
ROUND_COLUMNS = ("round", "asked", "reported", "invalid", "refused", "dropouts", "bytes_up",
                 "bytes_down", "bytes_up_per_agent", "bytes_down_per_agent", "report_bits",
                 "batch", "wall_s", "curator_cpu_s")
#: the per-round columns of a ``[deployment]`` (``session.network``), after those: when the
#: round started and how long it took in virtual time, its answers' completion times, its
#: dropouts by cause and its bytes with the transport's headers
VIRTUAL_ROUND_COLUMNS = ("virtual_start_s", "virtual_s", "completion_p50_s",
                         "completion_p95_s", "completion_p99_s", "dropouts_offline",
                         "dropouts_late", "wire_bytes_up", "wire_bytes_down")


def per_round(records: list[dict[str, Any]],
              found: tuple[list[str], list[dict[str, Any]]] | None = None
              ) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per (run, round): what each round of each run cost.

    Parameters
    ----------
    records : list of dict
        Result records; those without ``comm.per_round`` (``[output] per_round = false``)
        give no rows.
    found : tuple, optional
        ``record_points(records)``, when the caller has it.

    Returns
    -------
    columns : list of str
        ``key``, ``status``, ``protocol``, the swept settings (the summary's axes but
        ``protocol``, as ``record_points`` finds them), ``repeat``, then ``ROUND_COLUMNS``.
    rows : list of dict
        In the records' order, each run's rounds in order. From each ``comm.per_round``
        entry: ``round`` (its number), ``asked``, ``reported``, ``invalid``, ``refused``,
        ``dropouts`` (agents), ``bytes_up`` and ``bytes_down`` (exact envelope bytes, summed
        over the round's agents), ``report_bits`` (the information-theoretic size of one
        report), ``batch`` (the largest query batch), ``wall_s`` and ``curator_cpu_s`` (the
        curator's wall and CPU time for the round); derived: ``bytes_up_per_agent`` and
        ``bytes_down_per_agent`` (over the agents asked; None when none was). Runs with a
        ``[deployment]`` add ``VIRTUAL_ROUND_COLUMNS``: ``virtual_start_s`` and ``virtual_s``
        (when the round started, and its duration, in virtual seconds), the 50th, 95th and
        99th percentiles of its online answers' completion times (``completion_p*_s``),
        ``dropouts_offline`` and ``dropouts_late`` (``dropouts`` are those of a silent pool),
        and ``wire_bytes_up``/``wire_bytes_down`` (with the transport's headers). A key an
        entry lacks is None.
    """
    columns, rows = _round_rows(records, found)
    return columns, [dict(zip(columns, row, strict=True)) for row in rows]


def _round_rows(records: list[dict[str, Any]],
                found: tuple[list[str], list[dict[str, Any]]] | None = None
                ) -> tuple[list[str], list[list[Any]]]:
    """``per_round``'s columns and rows, each row its values in the columns' order."""
    axes, points = record_points(records) if found is None else found
    settings = [a for a in axes if a != "protocol"]
    virtual = VIRTUAL_ROUND_COLUMNS if any(rec.get("virtual") for rec in records) else ()
    entry_columns = (*ROUND_COLUMNS, *virtual)
    columns = ["key", "status", "protocol", *settings, "repeat", *entry_columns]
    up_at, down_at = (entry_columns.index(c) for c in ("bytes_up_per_agent",
                                                        "bytes_down_per_agent"))
    rows: list[list[Any]] = []
    for rec, point in zip(records, points, strict=True):
        head = [rec.get("key"), rec.get("status"), point.get("protocol", rec.get("protocol")),
                *[point.get(a) for a in settings], rec.get("repeat")]
        for entry in (rec.get("comm") or {}).get("per_round") or []:
            values = [entry.get(c) for c in entry_columns]
            asked = entry.get("asked")
            for at, total in ((up_at, entry.get("bytes_up")), (down_at, entry.get("bytes_down"))):
                total = finite_number(total)
                values[at] = (total / asked if total is not None and isinstance(asked, int)
                              and asked > 0 else None)
            rows.append(head + values)
    return columns, rows


def privacy_spent(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the sweep cost the agents: per data set (the runs of one repetition share it;
    ``seed`` tells them apart), the sum over its runs of the largest ε an agent spent in each
    (``privacy.epsilon_spent_max``): an upper bound of any agent's total on that data set,
    since every run's coins are its own and the runs compose. Returns the most over the data
    sets (``epsilon_per_agent_max``), how many data sets, the most runs one served with a
    local claim, and the most without one (``runs_without_local_max``: non-private or central
    protocols, whose agents' answers reach the curator unnoised); None when no record kept an
    odometer."""
    per: dict[Any, list[float]] = {}
    unnoised: dict[Any, int] = {}
    for r in records:
        priv = r.get("privacy") or {}
        eps = priv.get("epsilon_spent_max")
        if isinstance(eps, int | float) and math.isfinite(eps):
            per.setdefault(r.get("seed"), []).append(float(eps))
        elif priv.get("model") in ("central", "none"):
            unnoised[r.get("seed")] = unnoised.get(r.get("seed"), 0) + 1
    if not per:
        return None
    return {"epsilon_per_agent_max": max(sum(v) for v in per.values()),
            "data_sets": len(per), "runs_per_data_set_max": max(len(v) for v in per.values()),
            "runs_without_local_max": max(unnoised.values(), default=0)}


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, dict | list | tuple):
        return json.dumps(jsonable(v), separators=(",", ":"))
    return v


#: the cells ``_csv_cell`` leaves as they are, found by type alone
_PLAIN_CELLS = frozenset((str, int, float, bool))


def csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """The table as the CSV text ``summary.csv`` and ``per_round.csv`` hold (what
    ``ldpsim verify`` derives again from the records and compares): a header of
    ``columns``, then each row's cells in their order (``_csv_cell``: a missing one empty)."""
    return _csv_lines(columns, ([row.get(c) for c in columns] for row in rows))


def _csv_lines(columns: list[str], rows: Iterable[list[Any]]) -> str:
    """``csv_text`` of rows given as their values in the columns' order."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    plain = _PLAIN_CELLS
    for values in rows:
        writer.writerow([v if type(v) in plain else _csv_cell(v) for v in values])
    return buf.getvalue()


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> Path:
    """Replace ``path`` with the table as CSV, atomically (its directory is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, csv_text(columns, rows).encode("utf-8"))
    return path


def write_summary(out_dir: str | Path, records: list[dict[str, Any]],
                  found: tuple[list[str], list[dict[str, Any]]] | None = None) -> Path:
    """Write :func:`summarize` of ``records`` to ``<out_dir>/summary.csv`` atomically.

    Parameters
    ----------
    out_dir : str or Path
        Destination directory (created if missing).
    records : list of dict
        Result records.
    found : tuple, optional
        ``record_points(records)``, when the caller has it (``write_tables``).

    Returns
    -------
    Path
        The path of ``summary.csv``.
    """
    return _write_csv(Path(out_dir) / SUMMARY_FILE, *summarize(records, found))


def write_per_round(out_dir: str | Path, records: list[dict[str, Any]],
                    found: tuple[list[str], list[dict[str, Any]]] | None = None
                    ) -> Path | None:
    """Write :func:`per_round` of ``records`` to ``<out_dir>/per_round.csv`` atomically,
    when they keep their rounds (``[output] per_round``, the default). ``found``:
    ``record_points(records)``, when the caller has it.

    Returns
    -------
    Path or None
        The path of ``per_round.csv``; None (nothing written) when no record has a round.
    """
    columns, rows = _round_rows(records, found)
    if not rows:
        return None
    path = Path(out_dir) / PER_ROUND_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, _csv_lines(columns, rows).encode("utf-8"))
    return path


def write_tables(out_dir: str | Path, records: list[dict[str, Any]]) -> None:
    """``write_summary`` and ``write_per_round`` of ``records``, their parameter points
    (``record_points``) found once for both: the same files as each alone writes."""
    found = record_points(records)
    write_summary(out_dir, records, found)
    write_per_round(out_dir, records, found)
