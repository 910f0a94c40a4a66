"""The summary's paths through many records, each the same as the plain form it replaces:
the varying settings (``_varying_settings``), the points' ids found once per point
(``_point_key``), the per-round rows, and ``finite_number``; and the tables a sweep writes
the same bytes as before."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.results import summary
from ldpsim.simulator.results.store import jsonable

from tests.simulator.results.test_results import rec, round_records


def plain_varying(records: list[dict[str, Any]]) -> list[str]:
    """``_varying_settings`` as it was: every (protocol, setting)'s values, then those with
    more than one."""
    keys: dict[str, None] = {}
    for r in records:
        for section, table in (("params", r.get("params_requested")), ("data", r.get("data"))):
            for k in table or {}:
                keys.setdefault(f"{section}.{k}", None)
    seen: dict[tuple[str, str], set[str]] = {}
    for r in records:
        for key in keys:
            section, name = key.split(".", 1)
            table = r.get("params_requested" if section == "params" else section) or {}
            seen.setdefault((str(r.get("protocol")), key), set()).add(
                json.dumps(jsonable(table.get(name)), sort_keys=True))
    return [k for k in keys if any(len(v) > 1 for (_, kk), v in seen.items() if kk == k)]


def plain_finite(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float | np.integer | np.floating):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def sweep(values: list[Any]) -> list[dict[str, Any]]:
    """Records of two protocols over ``values`` of a parameter, a data setting that one
    protocol varies, and settings that vary only between stored sweeps."""
    out = []
    for proto, v, n, r in itertools.product(("p", "q"), values, (10, 20), range(2)):
        params = {"epsilon": v, "split": 0.5 if proto == "p" else [0.1, 0.2][r],
                  "estimator": "faithful"}
        data = {"kind": "x", "n": n if proto == "p" else 10, "file": None}
        out.append(rec(f"{proto}-{v!r}-{n}-{r}", {"protocol": proto, "params.epsilon": v},
                       {"m": float(r), "z": v if isinstance(v, float) else 1.0},
                       repeat=r, params_requested=params, data=data,
                       comm={"per_round": [{"round": 0, "asked": n, "bytes_up": 3 * n,
                                            "bytes_down": 5.0 * n, "report_bits": 1.0},
                                           {"round": 1, "asked": 0, "bytes_up": None}]}))
    out.append(rec("bare", {"protocol": "r"}, {"m": 1}, params_requested=None, data=None))
    return out


VALUES = [[0.5, 1.0, 2.0], [1, 1.0, True], [0.0, -0.0], [float("nan"), float("nan")],
          ["a", "b"], [None, 0], [[1, 2], [1, 2]], [{"a": 1}, {"a": 1.0}], [np.float64(0.5), 0.5]]


@pytest.mark.parametrize("values", VALUES, ids=str)
def test_varying_settings_are_the_plain_forms(values: list[Any]) -> None:
    records = sweep(values)
    assert summary._varying_settings(records) == plain_varying(records)


@pytest.mark.parametrize("values", VALUES, ids=str)
def test_points_are_grouped_by_their_ids(values: list[Any]) -> None:
    records = sweep(values)
    axes, points = summary.record_points(records)
    _, _, grouped = summary.group_points(records)
    by_id: dict[str, list[str]] = {}
    for r, p in zip(records, points, strict=True):
        by_id.setdefault(summary.point_id(p), []).append(r["key"])
    assert [[r["key"] for r in g.records] for g in grouped] == list(by_id.values())
    assert [summary.point_id(g.point) for g in grouped] == list(by_id)


def test_a_points_key_stands_only_for_its_id() -> None:
    points = [{"a": v} for v in (1, 1.0, True, 0.0, -0.0, float("nan"), "1", None, 2**70)]
    keys = [summary._point_key(p) for p in points]
    assert [k is None for k in keys] == [False, False, False, True, True, True, False, False,
                                         False]
    kept = [k for k in keys if k is not None]
    assert len(set(kept)) == len(kept)
    assert summary._point_key({"a": [1]}) is None and summary._point_key({}) == ()


@pytest.mark.parametrize("v", [0.5, -0.0, math.inf, -math.inf, math.nan, 3, True, False,
                               10**400, np.float32(0.1), np.int8(-3), np.float64(math.nan),
                               "1", None, [1.0]])
def test_finite_number_is_the_plain_form(v: Any) -> None:
    try:
        want = plain_finite(v)
    except OverflowError:
        with pytest.raises(OverflowError):
            summary.finite_number(v)
        return
    got = summary.finite_number(v)
    assert repr(got) == repr(want) and type(got) is type(want)


def plain_per_round(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``per_round``'s rows as they were built."""
    axes, points = summary.record_points(records)
    settings = [a for a in axes if a != "protocol"]
    rows = []
    for r, point in zip(records, points, strict=True):
        head = {"key": r.get("key"), "status": r.get("status"),
                "protocol": point.get("protocol", r.get("protocol")),
                **{a: point.get(a) for a in settings}, "repeat": r.get("repeat")}
        for entry in (r.get("comm") or {}).get("per_round") or []:
            row = {**head, **{c: entry.get(c) for c in summary.ROUND_COLUMNS}}
            asked = entry.get("asked")
            for way in ("up", "down"):
                total = plain_finite(entry.get(f"bytes_{way}"))
                row[f"bytes_{way}_per_agent"] = (total / asked if total is not None and
                                                 isinstance(asked, int) and asked > 0 else None)
            rows.append(row)
    return rows


@pytest.mark.parametrize("records", [round_records(), sweep([0.5, 1.0])], ids=["rounds", "sweep"])
def test_per_round_rows_are_the_plain_forms(records: list[dict[str, Any]]) -> None:
    _, rows = summary.per_round(records)
    want = plain_per_round(records)
    assert rows == want
    assert [list(r) for r in rows] == [list(r) for r in want]  # the keys in their order


def test_the_tables_are_the_same_bytes(tmp_path: Path) -> None:
    """What a sweep writes: the summary and per-round CSV of the records above, against the
    text the plain forms give (``csv.DictWriter``: ``test_per_run_paths``)."""
    from tests.simulator.test_per_run_paths import dict_writer_text

    records = sweep([0.5, 1.0, 2.0]) + round_records()
    summary.write_tables(tmp_path, records)
    columns, rows = summary.summarize(records)
    assert (tmp_path / "summary.csv").read_text() == dict_writer_text(columns, rows)
    columns, rows = summary.per_round(records)
    assert (tmp_path / "per_round.csv").read_text() == dict_writer_text(columns,
                                                                       plain_per_round(records))


def plain_mean_std(values: list[float]) -> tuple[Any, Any, int]:
    if not values:
        return None, None, 0
    arr = np.asarray(values, dtype=float)
    std = float(np.std(arr, ddof=1)) if len(arr) > 1 else 0.0
    return float(np.mean(arr)), std, len(arr)


def plain_aggregates(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each point's metrics and costs as ``group_points`` aggregated them before."""
    out = []
    _, names, points = summary.group_points(records)
    for p in points:
        seen: dict[str, list[float]] = {}
        for r in p.records:
            for m, v in summary.record_metrics(r).items():
                vals = seen.setdefault(m, [])
                x = plain_finite(v)
                if x is not None:
                    vals.append(x)
        metrics = {m: plain_mean_std(seen[m]) for m in names if m in seen}
        costs = {}
        for col, section, keys in summary.COST_COLUMNS:
            vals = []
            for r in p.records:
                sec = r.get(section) or {}
                for k in keys:
                    x = plain_finite(sec.get(k)) if k in sec else None
                    if x is not None:
                        vals.append(x)
                        break
            if vals:
                costs[col] = plain_mean_std(vals)
        out.append((metrics, costs))
    return out


def test_points_aggregate_as_before() -> None:
    rng = np.random.default_rng(5)
    records = sweep([0.5, 1.0, 2.0])
    odd = [math.nan, math.inf, None, 3, True, np.float64(0.25), np.int64(2), "x", -0.0]
    for i, r in enumerate(records):
        r["metrics"] = {"m": float(rng.standard_normal()) * 1e3, "odd": odd[i % len(odd)],
                        **({"late": 1.5} if i % 3 else {})}
        r["comm"] = {"bytes_up_per_agent": 10 + i, "report_bits_per_agent": 1.5 * (i % 2),
                     **({"bytes_down_per_agent_mean": math.nan} if i % 4 else {})}
        r["timing"] = {"wall_s": rng.random(), "agent_cpu_s": np.float32(0.5)}
    _, _, points = summary.group_points(records)
    got = [(p.metrics, p.cost_stats) for p in points]
    assert repr(got) == repr(plain_aggregates(records))
