"""Tests of simulator.results.results (store, summary, table, plots) and
simulator.results.progress."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.results.plots import plot
from ldpsim.simulator.results.progress import ProgressBar, _TextProgress, progress
from ldpsim.simulator.results.results import (
    PER_ROUND_FILE,
    RESULTS_FILE,
    ROUND_COLUMNS,
    ResultsCorruptError,
    ResultStore,
    format_table,
    group_points,
    in_value_order,
    jsonable,
    per_round,
    summarize,
    write_per_round,
    write_summary,
)


def rec(key: str, point: dict[str, Any], metrics: dict[str, Any], repeat: int = 0,
        **extra: Any) -> dict[str, Any]:
    """A minimal result record."""
    protocol = point.get("protocol", "ldp_kwiksort_rr")
    r = {"key": key, "scenario": "t", "protocol": protocol, "params": {}, "data": {"kind": "x"},
         "point": point, "repeat": repeat, "seed": 1, "backend": "inproc", "pools": 1,
         "n_agents": 10, "output": {}, "metrics": metrics, "comm": {}, "timing": {},
         "rejected": 0, "versions": {}}
    r.update(extra)
    return r


# ------------------------------------------------------------------------------------------
# ResultStore


def test_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "out" / "sub")
    assert store.path == tmp_path / "out" / "sub" / RESULTS_FILE
    assert store.done_keys() == set()
    assert store.records() == []
    a = rec("a", {"params.epsilon": 0.5}, {"tau": np.float64(0.25), "n": np.int64(3)},
            output={"ranking": np.arange(3)})
    b = rec("b", {"params.epsilon": 1.0}, {"tau": 0.5})
    store.append(a)
    store.append(b)
    assert store.done_keys() == {"a", "b"}
    again = ResultStore(tmp_path / "out" / "sub")
    assert again.done_keys() == {"a", "b"}
    got = again.records()
    assert [r["key"] for r in got] == ["a", "b"]
    assert got[0]["metrics"] == {"tau": 0.25, "n": 3}
    assert type(got[0]["metrics"]["n"]) is int
    assert got[0]["output"] == {"ranking": [0, 1, 2]}
    assert got[1] == b
    lines = store.path.read_text().splitlines()
    assert len(lines) == 2
    assert ", " not in lines[0] and ": " not in lines[0]  # compact separators


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the file name of every fsync ``simulator.results.store`` makes (it still fsyncs)."""
    import os

    from ldpsim.simulator.results import store

    names: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        names.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real(fd)

    monkeypatch.setattr(store.os, "fsync", fsync)
    return names


def test_append_fsyncs_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 quick records: at most one fsync while they are appended, not 50; ``sync`` makes the
    rest durable (the file, and once its directory entry); every record is in the file before
    ``append`` returns."""
    fsyncs = _count_fsyncs(monkeypatch)
    store = ResultStore(tmp_path / "out")
    for i in range(50):
        store.append(rec(f"k{i}", {}, {"tau": float(i)}))
        assert len(store.path.read_text().splitlines()) == i + 1
    assert fsyncs.count(RESULTS_FILE) <= 1, fsyncs  # 50 quick appends: one batch
    store.sync()
    assert fsyncs.count(RESULTS_FILE) in (1, 2) and fsyncs.count("out") == 1, fsyncs
    n = len(fsyncs)
    store.sync()  # nothing pending: no fsync
    assert len(fsyncs) == n
    assert [r["key"] for r in ResultStore(tmp_path / "out").records()] == \
        [f"k{i}" for i in range(50)]


def test_append_fsync_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``sync_records`` records (here 10: 5 fsyncs for 50), or every record with
    ``sync_interval_s = 0`` (a run longer than the interval is synced at once)."""
    fsyncs = _count_fsyncs(monkeypatch)
    store = ResultStore(tmp_path / "a", sync_interval_s=math.inf, sync_records=10)
    for i in range(50):
        store.append(rec(f"k{i}", {}, {"tau": float(i)}))
    assert fsyncs == [RESULTS_FILE, "a"] + [RESULTS_FILE] * 4
    store.sync()
    assert len(fsyncs) == 6
    fsyncs.clear()
    store = ResultStore(tmp_path / "b", sync_interval_s=0)
    for i in range(5):
        store.append(rec(f"k{i}", {}, {"tau": float(i)}))
    assert fsyncs == [RESULTS_FILE, "b"] + [RESULTS_FILE] * 4


def test_sigkill_keeps_written_unsynced_records(tmp_path: Path) -> None:
    """A process killed with SIGKILL after ``append`` returned but before any fsync: every such
    record is in the file and counts as done (never redone, never duplicated); at most a torn
    last line is dropped."""
    import os
    import signal
    import subprocess

    from tests.conftest import ROOT

    code = ("import sys, math\n"
            "from ldpsim.simulator.results.results import ResultStore\n"
            "s = ResultStore(sys.argv[1], sync_interval_s=math.inf, sync_records=10**9)\n"
            "for i in range(10**6):\n"
            "    s.append({'key': f'k{i}', 'metrics': {'x': 'y' * 5000}})\n"
            "    print(i, flush=True)\n")
    with subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT))) as proc:
        assert proc.stdout is not None
        last = -1
        for line in proc.stdout:
            last = int(line)
            if last >= 200:
                break
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    keys = [r["key"] for r in ResultStore(tmp_path).records()]
    assert len(keys) == len(set(keys)) and len(keys) > last
    assert keys == [f"k{i}" for i in range(len(keys))]


def test_duplicate_key_refused(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": 1.0}))
    with pytest.raises(ValueError, match="already"):
        store.append(rec("a", {}, {"tau": 2.0}))
    with pytest.raises(ValueError, match="already"):
        ResultStore(tmp_path).append(rec("a", {}, {"tau": 3.0}))
    with pytest.raises(ValueError, match="key"):
        store.append({"metrics": {}})
    assert len(store.records()) == 1
    assert store.records()[0]["metrics"]["tau"] == 1.0


def test_truncated_last_line_repaired(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": 1.0}))
    store.append(rec("b", {}, {"tau": 2.0}))
    good = store.path.read_bytes()
    partial = json.dumps(rec("c", {}, {"tau": 3.0}))[:25]
    with open(store.path, "a") as f:
        f.write(partial)  # crash in the middle of a write: no newline
    fresh = ResultStore(tmp_path)
    assert fresh.done_keys() == {"a", "b"}
    assert store.path.read_bytes() == good  # the partial line was removed from the file
    fresh.append(rec("c", {}, {"tau": 3.0}))
    assert [r["key"] for r in ResultStore(tmp_path).records()] == ["a", "b", "c"]
    assert not list(tmp_path.glob("*.tmp"))


def test_truncated_last_line_with_newline_and_bad_utf8(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": 1.0}))
    good = store.path.read_bytes()
    with open(store.path, "ab") as f:
        f.write(b'{"key":"b","x":"\xc3\n\n')  # cut inside a UTF-8 character, blank lines after
    assert ResultStore(tmp_path).records() == [rec("a", {}, {"tau": 1.0})]
    assert store.path.read_bytes() == good


def test_complete_last_line_missing_newline_kept(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": 1.0}))
    line = json.dumps(rec("b", {}, {"tau": 2.0}), separators=(",", ":"))
    with open(store.path, "a") as f:
        f.write(line)
    fresh = ResultStore(tmp_path)
    assert fresh.done_keys() == {"a", "b"}
    assert store.path.read_text().endswith(line + "\n")
    fresh.append(rec("c", {}, {"tau": 3.0}))
    assert [r["key"] for r in fresh.records()] == ["a", "b", "c"]


def test_corrupt_middle_line_raises(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": 1.0}))
    good_c = json.dumps(rec("c", {}, {"tau": 3.0}))
    with open(store.path, "a") as f:
        f.write('{"key": "b", "metr\n' + good_c + "\n")  # damage before the last line
    before = store.path.read_bytes()
    with pytest.raises(ResultsCorruptError, match="line 2"):
        ResultStore(tmp_path).done_keys()
    with pytest.raises(ValueError, match="line 2"):
        ResultStore(tmp_path).records()
    with pytest.raises(ValueError, match="line 2"):
        ResultStore(tmp_path).append(rec("d", {}, {"tau": 4.0}))
    assert store.path.read_bytes() == before  # the file is left untouched


def test_non_record_line_raises(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.path.write_text('{"key":"a"}\n[1,2]\n{"key":"b"}\n')
    with pytest.raises(ResultsCorruptError, match="line 2"):
        store.done_keys()


def test_nan_becomes_null(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append(rec("a", {}, {"tau": float("nan"), "err": np.float32(np.inf), "ok": 1.5},
                     output={"v": np.array([1.0, np.nan, -np.inf])}))
    text = store.path.read_text()
    assert '"tau":null' in text and '"err":null' in text and "NaN" not in text
    got = store.records()[0]
    assert got["metrics"] == {"tau": None, "err": None, "ok": 1.5}
    assert got["output"] == {"v": [1.0, None, None]}


def test_jsonable() -> None:
    x = {1: (np.int32(2), np.bool_(True)), "a": {np.float64(1.5), 2.0}, "p": Path("q"),
         "m": np.array([[1, 2], [3, 4]], dtype=np.int16), "n": -math.inf}
    got = jsonable(x)
    assert got == {"1": [2, True], "a": [1.5, 2.0], "p": "q", "m": [[1, 2], [3, 4]], "n": None}
    assert type(got["1"][0]) is int and type(got["1"][1]) is bool
    json.dumps(got, allow_nan=False)


# ------------------------------------------------------------------------------------------
# summarize / write_summary / format_table


def sweep_records() -> list[dict[str, Any]]:
    """ldp at two epsilons x 2 repeats, plain kwiksort (no epsilon axis) x 3 repeats."""
    out = []
    ldp = "ldp_kwiksort_rr"
    vals = {0.5: [(1.0, 10.0), (3.0, None)], 2.0: [(4.0, 20.0), (6.0, 40.0)]}
    for eps, reps in vals.items():
        for i, (tau, err) in enumerate(reps):
            metrics: dict[str, Any] = {"tau": tau}
            if err is not None:
                metrics["err"] = err
            out.append(rec(f"{ldp}-{eps}-{i}",
                           {"protocol": ldp, "params.epsilon": eps, "data.n": 100}, metrics,
                           repeat=i, comm={"bytes_up_per_agent_mean": 100.0 * (i + 1),
                                           "bytes_down_per_agent_mean": 8.0},
                           timing={"agent_cpu_s_mean": 0.5, "wall_s": 2.0 + i}))
    for i, tau in enumerate([0.5, 0.5, 2.0]):
        out.append(rec(f"ks-{i}", {"protocol": "kwiksort", "data.n": 100},
                       {"tau": tau, "err": None}, repeat=i, timing={"wall_s": 1.0}))
    return out


EXPECTED_COLUMNS = ["protocol", "params.epsilon", "data.n", "repeats", "tau_mean", "tau_std",
                    "err_mean", "err_std", "comm.bytes_up_per_agent_mean",
                    "comm.bytes_down_per_agent_mean", "timing.agent_cpu_s_mean", "timing.wall_s"]


def test_summarize_exact() -> None:
    columns, rows = summarize(sweep_records())
    assert columns == EXPECTED_COLUMNS
    assert len(rows) == 3
    assert all(list(r) == EXPECTED_COLUMNS for r in rows)
    r05, r2, ks = rows
    assert r05 == {"protocol": "ldp_kwiksort_rr", "params.epsilon": 0.5, "data.n": 100,
                   "repeats": 2, "tau_mean": 2.0, "tau_std": math.sqrt(2.0),
                   "err_mean": 10.0, "err_std": 0.0,  # one value: the other record lacks err
                   "comm.bytes_up_per_agent_mean": 150.0, "comm.bytes_down_per_agent_mean": 8.0,
                   "timing.agent_cpu_s_mean": 0.5, "timing.wall_s": 2.5}
    assert r2["tau_mean"] == 5.0 and r2["tau_std"] == math.sqrt(2.0)
    assert r2["err_mean"] == 30.0 and r2["err_std"] == math.sqrt(200.0)
    assert r2["repeats"] == 2
    assert ks == {"protocol": "kwiksort", "params.epsilon": None, "data.n": 100, "repeats": 3,
                  "tau_mean": 1.0, "tau_std": math.sqrt(0.75), "err_mean": None,
                  "err_std": None, "comm.bytes_up_per_agent_mean": None,
                  "comm.bytes_down_per_agent_mean": None, "timing.agent_cpu_s_mean": None,
                  "timing.wall_s": 1.0}


def test_summarize_order_and_empty() -> None:
    recs = [rec("b1", {"params.epsilon": 2.0}, {"m": 1.0}),
            rec("a1", {"params.epsilon": 1.0}, {"m": 2.0}),
            rec("b2", {"params.epsilon": 2.0}, {"m": 3.0})]
    columns, rows = summarize(recs)
    assert columns == ["params.epsilon", "repeats", "m_mean", "m_std"]
    assert [(r["params.epsilon"], r["repeats"], r["m_mean"]) for r in rows] == [
        (2.0, 2, 2.0), (1.0, 1, 2.0)]
    assert summarize([]) == (["repeats"], [])


def test_write_summary_csv(tmp_path: Path) -> None:
    path = write_summary(tmp_path / "o", sweep_records())
    assert path == tmp_path / "o" / "summary.csv"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        assert reader.fieldnames == EXPECTED_COLUMNS
    assert len(rows) == 3
    assert rows[0]["params.epsilon"] == "0.5" and rows[0]["tau_mean"] == "2.0"
    assert float(rows[0]["tau_std"]) == math.sqrt(2.0)
    assert rows[2]["protocol"] == "kwiksort"
    assert rows[2]["params.epsilon"] == "" and rows[2]["err_mean"] == ""
    assert rows[2]["repeats"] == "3"
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["summary.csv"]


def test_format_table() -> None:
    columns, rows = summarize(sweep_records())
    text = format_table(columns, rows)
    lines = text.splitlines()
    header = lines[0].split()
    # the metrics' means, then the wire bytes up (the records have no report bits)
    assert header == ["protocol", "params.epsilon", "data.n", "repeats", "tau_mean", "err_mean",
                      "wire_bytes_up/agent"]
    assert len(lines) == 2 + 3
    assert "ldp_kwiksort_rr" in lines[2] and "0.5" in lines[2] and "100" in lines[2]
    assert lines[3].split() == ["ldp_kwiksort_rr", "2", "100", "2", "5", "30", "150"]
    assert lines[4].split() == ["kwiksort", "100", "3", "1"]
    assert "1.414" not in text  # std columns are not shown
    assert len({len(ln) for ln in lines[:2]}) == 1
    short = format_table(columns, rows, max_rows=1)
    assert short.splitlines()[-1] == "... (2 more rows)"
    assert format_table(columns, []) == "(no results)"
    one = format_table(["x", "repeats", "m_mean"], [{"x": 1, "repeats": 1, "m_mean": 1 / 3}])
    assert "0.3333" in one and "0.33333" not in one


# ------------------------------------------------------------------------------------------
# value order, costs over repeats, the per-round table


def test_values_are_ordered_numbers_by_value_then_the_rest_as_first_seen() -> None:
    assert in_value_order([100, 10, 50, 10, None]) == [10, 50, 100]  # not "10" < "100" < "50"
    assert in_value_order([0.5, 2, 1.0, np.float64(0.1), np.int64(3)]) == [0.1, 0.5, 1.0, 2, 3]
    # text keeps the sweep's order (a scenario's protocols list), after the numbers
    assert in_value_order(["kwiksort", 5, "dp_kwiksort", "kwiksort", 1]) == [
        1, 5, "kwiksort", "dp_kwiksort"]
    assert in_value_order([True, [1, 2], "x", [1, 2]]) == [True, [1, 2], "x"]


def test_the_costs_have_their_spread_over_repeats() -> None:
    _, _, points = group_points(sweep_records())
    ldp = points[0]  # ldp at 0.5: bytes up 100 and 200 over its two repeats
    mean, std, count = ldp.cost_stats["comm.bytes_up_per_agent_mean"]
    assert (mean, count) == (150.0, 2) and std == pytest.approx(math.sqrt(5000))
    assert ldp.costs["comm.bytes_up_per_agent_mean"] == mean  # the summary's column
    assert points[2].cost_stats["timing.wall_s"] == (1.0, 0.0, 3)  # kwiksort: 3 equal


def _rounds(asked: list[int], up: list[int], down: list[int]) -> list[dict[str, Any]]:
    return [{"round": i, "asked": a, "reported": a, "invalid": 0, "refused": 0,
             "dropouts": 0, "bytes_up": u, "bytes_down": d, "report_bits": 8.0,
             "batch": 4096, "wall_s": 0.01, "curator_cpu_s": 0.005}
            for i, (a, u, d) in enumerate(zip(asked, up, down, strict=True))]


def round_records() -> list[dict[str, Any]]:
    """Two protocols of two rounds at two n, one run of one round, one without rounds."""
    out = []
    for proto in ("b", "a"):
        for n in (100, 10):
            for i in range(2):
                out.append(rec(f"{proto}-{n}-{i}", {"protocol": proto, "data.n": n},
                               {"acc": 0.5}, repeat=i, status="complete",
                               comm={"per_round": _rounds([n, n // 2], [8 * n, 4 * n + i],
                                                          [20 * n, 10 * n])}))
    out.append(rec("c-10", {"protocol": "c", "data.n": 10}, {"acc": 1.0}, status="degraded",
                   comm={"per_round": _rounds([0], [0], [30])}))
    out.append(rec("d-10", {"protocol": "d", "data.n": 10}, {"acc": 1.0}, comm={}))
    return out


def test_the_per_round_table_has_a_row_per_run_and_round() -> None:
    columns, rows = per_round(round_records())
    assert columns == ["key", "status", "protocol", "data.n", "repeat", *ROUND_COLUMNS]
    assert len(rows) == 8 * 2 + 1  # the run without rounds has none
    first, second = rows[:2]
    assert (first["key"], first["protocol"], first["data.n"], first["repeat"]) == (
        "b-100-0", "b", 100, 0)
    assert (first["round"], first["asked"], first["bytes_up"], first["bytes_down"]) == (
        0, 100, 800, 2000)
    # the byte fields are totals over the round's agents: per agent is over the asked ones
    assert (first["bytes_up_per_agent"], first["bytes_down_per_agent"]) == (8.0, 20.0)
    assert (second["round"], second["asked"], second["bytes_up_per_agent"]) == (1, 50, 8.0)
    assert first["report_bits"] == 8.0 and first["wall_s"] == 0.01
    nobody = rows[-1]  # a round that asked nobody has no bytes per agent
    assert (nobody["key"], nobody["status"], nobody["asked"]) == ("c-10", "degraded", 0)
    assert nobody["bytes_up_per_agent"] is None and nobody["bytes_down"] == 30


def test_per_round_csv_is_written_atomically_and_only_with_rounds(tmp_path: Path) -> None:
    path = write_per_round(tmp_path / "o", round_records())
    assert path == tmp_path / "o" / PER_ROUND_FILE
    assert [p.name for p in (tmp_path / "o").iterdir()] == [PER_ROUND_FILE]  # no temp file
    with open(path, newline="") as f:
        got = list(csv.DictReader(f))
    assert len(got) == 17 and got[0]["bytes_up_per_agent"] == "8.0"
    assert got[-1]["bytes_up_per_agent"] == ""  # None: an empty cell, as summary.csv has
    assert write_per_round(tmp_path / "none", [r for r in round_records()
                                               if not r["comm"]]) is None
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------------------------------------
# plot


def test_plot_writes_pngs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    recs = []
    for proto in ("ldp_kwiksort_rr", "ldp_kwiksort_lap"):
        for eps in (0.1, 1.0, 10.0):
            for n in (50, 100):
                for i in range(2):
                    recs.append(rec(f"{proto}-{eps}-{n}-{i}",
                                    {"protocol": proto, "params.epsilon": eps, "data.n": n},
                                    {"tau": eps / (1 + eps) + 0.01 * i, "err": 1 / eps}))
    for n in (50, 100):
        recs.append(rec(f"ks-{n}", {"protocol": "kwiksort", "data.n": n}, {"tau": 0.9}))
    paths = plot(tmp_path, recs)
    names = sorted(p.name for p in paths)
    assert names == ["plot_err_vs_data.n.png", "plot_err_vs_params.epsilon.png",
                     "plot_tau_vs_data.n.png", "plot_tau_vs_params.epsilon.png"]
    for p in paths:
        assert p.parent == tmp_path
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a single value per axis: nothing to plot
    assert plot(tmp_path / "none", [rec("a", {"params.epsilon": 1.0}, {"tau": 1.0})]) == []


def test_plot_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    recs = [rec(f"k{e}", {"params.epsilon": e}, {"tau": e}) for e in (1.0, 2.0)]
    assert plot(tmp_path, recs) == []


# ------------------------------------------------------------------------------------------
# progress


def test_progress_disabled_and_tqdm(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with progress(3, "runs", enabled=False) as bar:
        assert isinstance(bar, ProgressBar)
        assert not bar.shows  # a sweep makes no text for it
        bar.update()
        bar.set_postfix_str("x")
    assert capsys.readouterr().err == ""
    with progress(2, "runs") as bar:  # stderr captured: not a terminal, so no bar
        bar.update(2)
    assert capsys.readouterr().err == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with progress(2, "runs") as bar:
        assert bar.shows
        bar.update()
        bar.set_postfix_str("eps=1")
        bar.update(1)
    assert "runs" in term.getvalue() and "2/2" in term.getvalue()
    if importlib.util.find_spec("tqdm") is None:
        assert "\rruns: 2/2 eps=1" in term.getvalue()


def test_text_progress_fallback() -> None:
    buf = io.StringIO()
    with _TextProgress(3, "runs", buf, min_interval=0.0) as bar:
        bar.update()
        bar.set_postfix_str("last=a")
        bar.update(2)
    out = buf.getvalue()
    assert out.startswith("\rruns: 0/3")
    assert "\rruns: 1/3" in out and "\rruns: 3/3 last=a" in out
    assert out.endswith("\n")
    bar.update()  # ignored after close
    assert buf.getvalue() == out


def test_plot_uses_a_log_y_axis_for_values_over_decades(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    calls: list[str] = []
    real = Axes.set_yscale
    monkeypatch.setattr(Axes, "set_yscale",
                        lambda self, v, **k: (calls.append(v), real(self, v, **k))[1])
    wide = [rec(f"w{d}", {"protocol": "p", "data.d": d}, {"avd": 10.0 ** (d - 4)})
            for d in (3, 5, 7, 9)]  # 1e-1 .. 1e5
    narrow = [rec(f"n{d}", {"protocol": "p", "data.d": d}, {"avd": 0.1 * d}) for d in (3, 9)]
    plot(tmp_path / "wide", wide)
    assert calls == ["log"]
    plot(tmp_path / "narrow", narrow)
    assert calls == ["log"]  # unchanged: a linear axis


def test_the_terminal_table_shows_mean_and_std_and_every_row() -> None:
    columns, rows = summarize(sweep_records())
    many = rows * 30  # 90 rows
    text = format_table(columns, many, max_rows=None, std=True)
    lines = text.splitlines()
    assert len(lines) == 2 + 90 and "more rows" not in text
    assert "tau_mean ± std" in lines[0]
    assert "± 1.414" in text  # the std of the first point's two repeats
    assert format_table(columns, many, max_rows=10, std=True).splitlines()[-1] == \
        "... (80 more rows)"


def test_plot_draws_costs_facets_and_confidence_bands(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from ldpsim.simulator.results.plots import _ci_half_width, axis_label
    from matplotlib.axes import Axes

    assert axis_label("params.epsilon") == "ε (privacy budget)"
    assert axis_label("metrics.error_rate") == "error rate" and axis_label("data.m") == "m"
    # 95% t interval of a mean of 3 repeats with std 1: t(0.975, 2) = 4.303 / sqrt(3)
    assert _ci_half_width(1.0, 3) == pytest.approx(4.302652729911275 / math.sqrt(3))
    assert _ci_half_width(1.0, 1) == 0.0 and _ci_half_width(None, 5) == 0.0
    bands: list[int] = []
    real = Axes.fill_between
    monkeypatch.setattr(Axes, "fill_between",
                        lambda self, *a, **k: (bands.append(1), real(self, *a, **k))[1])
    recs = []
    for solver in ("nnls", "cd"):
        for eps in (0.5, 1.0, 2.0):
            for i in range(3):
                recs.append(rec(f"{solver}-{eps}-{i}", {"protocol": "p", "params.epsilon": eps,
                                                        "params.solver": solver},
                                {"acc": min(1.0, 0.5 + 0.2 * eps + 0.05 * i)},
                                comm={"bytes_up_per_agent_mean": 10 * eps},
                                timing={"wall_s": 0.1 * eps}))
    names = sorted(p.name for p in plot(tmp_path, recs))
    assert names == ["plot_acc_vs_params.epsilon.png",
                     "plot_comm.bytes_up_per_agent_mean_vs_params.epsilon.png",
                     "plot_timing.wall_s_vs_params.epsilon.png"]
    assert len(bands) == 2  # one band per panel (solver = nnls, cd) for the metric, none for costs
