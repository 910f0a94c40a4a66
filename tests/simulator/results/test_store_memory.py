"""Tests of ``ResultStore.records`` after appends: the records it keeps are those reading the
file again gives (values, types, order, superseded degraded runs), handed out once."""

from __future__ import annotations

import gc
import json
import os

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


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_the_file_is_kept_open_between_appends_and_closed_by_sync(tmp_path):
    before = _open_fds()
    store = ResultStore(tmp_path / "c")
    for i in range(3):
        store.append(_record(i))
        # each record is in the file (the kernel's copy) as soon as append returns
        assert len(store.path.read_text().splitlines()) == i + 1
    store.sync()
    assert _open_fds() == before
    store.append(_record(3))  # after a sync: opened again, appended to the same file
    assert [r["key"] for r in ResultStore(tmp_path / "c").records()] == ["k0", "k1", "k2", "k3"]
    del store
    gc.collect()
    assert _open_fds() == before


def test_an_append_after_a_repair_goes_to_the_repaired_file(tmp_path):
    store = ResultStore(tmp_path / "d")
    store.append(_record(0))
    store.append(_record(1))
    with open(store.path, "ab") as f:
        f.write(b'{"key": "torn')  # a crash left half a line
    assert store.done_keys() == {"k0", "k1"}  # repaired: the file replaced without it
    store.append(_record(2))
    store.sync()
    lines = store.path.read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == ["k0", "k1", "k2"]


def test_records_handed_out_are_each_lines_parse(tmp_path):
    """The appended lines are parsed together when handed out: each record as reading its
    line alone gives it, the collector left as it was."""
    store = ResultStore(tmp_path / "e")
    store.done_keys()
    recs = [_record(i) for i in range(6)]
    for r in recs:
        store.append(r)
    was = gc.isenabled()
    kept = store.records()
    assert gc.isenabled() == was
    assert kept == [json.loads(record_line(r)) for r in recs]


def test_lines_parsed_in_groups_are_the_files_records(tmp_path, monkeypatch):
    """Appended lines are parsed ``PARSE_LINES`` at a time (and the rest when handed out):
    the same records, in the same order, degraded ones superseded, as reading the file."""
    from ldpsim.simulator.results import store as store_mod

    monkeypatch.setattr(store_mod, "PARSE_LINES", 3)
    store = ResultStore(tmp_path / "f")
    store.done_keys()
    for i in range(8):
        store.append(_record(i, status="degraded") if i == 2 else _record(i))
        if i == 4:
            assert len(store._pending) == 2 and len(store._records) == 3
    store.append(_record(2))  # supersedes the degraded one
    kept = store.records()
    again = ResultStore(tmp_path / "f").records()
    assert json.dumps(kept) == json.dumps(again)
    assert [r["key"] for r in kept] == ["k0", "k1", "k3", "k4", "k5", "k6", "k7", "k2"]
