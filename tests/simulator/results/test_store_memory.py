"""Tests of ``ResultStore.records`` after appends: the records it keeps are those reading the
file again gives (values, types, order, superseded degraded runs), handed out once."""

from __future__ import annotations

import json

import numpy as np
from ldpsim.simulator.results.store import ResultStore, record_line


def _record(i: int, **extra) -> dict:
    return {"key": f"k{i}", "point": {"protocol": "p", "params.epsilon": 0.5 * i},
            "metrics": {"err": np.float64(i / 3), "nan": float("nan"), "n": np.int64(i)},
            "comm": {"bytes": 10 * i, "pair": (1, 2.5), "set": {3, 1}},
            "text": "é ✓", 7: "seven", **extra}


def test_the_records_kept_after_appends_are_the_files_records(tmp_path):
    old = ResultStore(tmp_path / "a")
    old.append(_record(0))
    old.append(_record(1, status="degraded"))
    old.sync()
    store = ResultStore(tmp_path / "a")  # a resumed sweep: reads the file, then appends
    assert store.done_keys() == {"k0"}
    for i in (2, 1, 3):
        rec = _record(i)
        store.append(rec, record_line(rec) if i == 3 else None)  # a worker's line, or none
    store.append(_record(4, status="degraded"))
    kept = store.records()
    again = ResultStore(tmp_path / "a").records()
    assert json.dumps(kept) == json.dumps(again)
    assert [type(v) for r in kept for v in r["metrics"].values()] == \
        [type(v) for r in again for v in r["metrics"].values()]
    assert [r["key"] for r in kept] == ["k0", "k2", "k1", "k3", "k4"]
    # handed out once: the next call reads the file (a caller may have changed those dicts)
    kept[0]["metrics"]["err"] = 99
    assert json.dumps(store.records()) == json.dumps(again)


def test_a_new_directorys_records_are_kept_from_the_first_append(tmp_path):
    store = ResultStore(tmp_path / "b")
    for i in range(5):
        store.append(_record(i))
    assert store.records() == ResultStore(tmp_path / "b").records()
    assert len(store.records()) == 5


def test_the_tables_written_together_are_those_written_apart(tmp_path):
    from ldpsim.simulator.results.summary import write_per_round, write_summary, write_tables

    from tests.simulator.results.test_results import round_records

    recs = round_records() + [_record(i) for i in range(3)]
    write_tables(tmp_path / "both", recs)
    write_summary(tmp_path / "apart", recs)
    write_per_round(tmp_path / "apart", recs)
    for name in ("summary.csv", "per_round.csv"):
        assert (tmp_path / "both" / name).read_bytes() == (tmp_path / "apart" / name).read_bytes()
