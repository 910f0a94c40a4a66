"""Tests of ``ldpsim run --jobs N`` / ``[runtime] jobs``: runs of a sweep in worker processes."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator.results.results import ResultStore
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario.scenario import ScenarioError, load
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.sweep.runner import run_scenario

#: fields that differ between two executions of the same run
VOLATILE = ("timing", "versions", "run_wall_s", "wall_s", "started", "finished", "host")


def scenario(repeats: int = 3, jobs: int = 1, backend: str = "inproc", dask: str | None = None,
             **runtime: Any):
    """A small sweep; ``dask``: its ``[dask] address``. With the seed-only secret (unless
    ``runtime`` gives another): the tests compare separately launched sweeps run for run."""
    return load(raw={
        **({"dask": {"address": dask}} if dask is not None else {}),
        "name": "jobs", "protocols": ["ldp_kwiksort_rr", "kwiksort"], "repeats": repeats,
        "seed": 7, "data": {"kind": "mallows", "n": 60, "m": 4, "theta": 0.5},
        "params": {"epsilon": [0.5, 2.0]},
        "runtime": {"backend": backend, "pools": 2, "jobs": jobs, "progress": False,
                    "secret": "seed", **runtime},
        "output": {"plots": False}})


def _timeless(v: Any) -> Any:
    """``v`` without timing and memory fields (at any depth)."""
    if isinstance(v, dict):
        return {k: _timeless(x) for k, x in v.items()
                if not (k.endswith("_s") or "time" in k or "rss" in k or "cpu" in k)}
    if isinstance(v, list):
        return [_timeless(x) for x in v]
    return v


def stable(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The records by key, without the fields that change from one execution to the next."""
    return {r["key"]: _timeless(json.loads(json.dumps(
        {k: v for k, v in r.items() if k not in VOLATILE}, default=str))) for r in records}


def summary_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if not k.startswith(("timing", "wall"))} for r in rows]


def test_jobs_2_gives_the_records_of_a_serial_run(tmp_path):
    serial, _ = run_scenario(scenario(jobs=1), tmp_path / "one", show_progress=False)
    parallel, _ = run_scenario(scenario(jobs=2), tmp_path / "two", show_progress=False)
    assert len(serial) == len(parallel) == 9
    assert stable(serial) == stable(parallel)
    assert summary_rows(tmp_path / "one") == summary_rows(tmp_path / "two")
    # the returned records are in the sweep's order, whichever worker finished first
    assert [r["key"] for r in parallel] == [s.key for s in scenario().runs()]


def test_jobs_resume_and_extend(tmp_path):
    out = tmp_path / "r"
    first, _ = run_scenario(scenario(repeats=1, jobs=2), out, show_progress=False)
    assert len(first) == 3
    before = {r["key"]: r for r in first}
    records, _ = run_scenario(scenario(repeats=3, jobs=2), out, show_progress=False)
    assert len(records) == 9
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 9  # the first three were not run again
    for r in records:
        if r["key"] in before:
            assert r["timing"] == before[r["key"]]["timing"]
    serial, _ = run_scenario(scenario(repeats=3, jobs=1), tmp_path / "s", show_progress=False)
    assert stable(serial) == stable(records)
    # jobs is no part of the directory's identity: another count resumes it (nothing to do)
    again, _ = run_scenario(scenario(repeats=3, jobs=1), out, show_progress=False)
    assert len(again) == 9
    assert "runtime.jobs" not in identity.fingerprint(scenario(jobs=2))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, 10**6])
def test_bad_jobs_is_a_scenario_error(bad):
    with pytest.raises(ScenarioError, match=r"\[runtime\] jobs"):
        scenario(jobs=bad)


def test_hosts_refuses_jobs():
    with pytest.raises(ScenarioError, match=r"\[runtime\] jobs.*hosts"):
        scenario(jobs=2, backend="hosts", token="a token of 16+ chars")
    assert scenario(jobs=1, backend="hosts", token="a token of 16+ chars").runtime["jobs"] == 1


def test_explicit_jobs_is_kept_and_the_default_is_auto():
    assert scenario().runtime["jobs"] == 1
    assert scenario(jobs=3).runtime["jobs"] == 3
    s = load(raw={"name": "d", "protocol": "kwiksort",
                  "data": {"kind": "mallows", "n": 20, "m": 3}})
    assert s.runtime["jobs"] == "auto"
    assert scenario(jobs="auto").runtime["jobs"] == "auto"


def test_auto_jobs_fills_the_cores_a_run_leaves():
    import os

    from ldpsim.simulator.sweep.runner import resolve_jobs

    cores = len(os.sched_getaffinity(0))
    inproc = scenario(jobs="auto").runtime
    assert resolve_jobs(inproc, 1) == 1  # never more workers than runs
    assert resolve_jobs(inproc, 1000) == cores  # an inproc run keeps one core busy
    procs = scenario(jobs="auto", backend="processes", pools=2).runtime
    assert resolve_jobs(procs, 1000) == max(1, cores // 3)  # a curator and 2 pools per run
    hosts = scenario(jobs="auto", backend="hosts", token="a token of 16+ chars").runtime
    assert resolve_jobs(hosts, 1000) == 1
    assert resolve_jobs(scenario(jobs=4).runtime, 2) == 2
    assert resolve_jobs(scenario(jobs=4).runtime, 9) == 4


def test_processes_backend_with_jobs_2(tmp_path):
    s = load(raw={
        "name": "p", "protocol": "ldp_kwiksort_rr", "repeats": 2, "seed": 3,
        "data": {"kind": "mallows", "n": 40, "m": 4}, "params": {"epsilon": 1.0},
        # the seed-only secret: the two sweeps are compared run for run
        "runtime": {"backend": "processes", "pools": 2, "jobs": 2, "progress": False,
                    "secret": "seed"},
        "output": {"plots": False}})
    records, _ = run_scenario(s, tmp_path / "p", show_progress=False)
    assert len(records) == 2 and all(r["backend"] == "processes" for r in records)
    inproc, _ = run_scenario(load(raw={**s.raw, "runtime": {
        "backend": "inproc", "pools": 2, "progress": False, "secret": "seed"}}),
        tmp_path / "i", show_progress=False)
    assert {r["key"]: r["output"] for r in records} == {r["key"]: r["output"] for r in inproc}


def test_a_failed_run_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    """--jobs 2: one run fails; every other run is stored, the failed one is listed in
    failed.jsonl (not in the results) and named by the RunFailed that ends the sweep; the
    same command then redoes it alone."""
    from ldpsim.simulator.sweep import execute as run_one

    s = scenario(jobs=2)
    bad = s.runs()[5].key
    real = run_one.execute

    def execute(spec, *a, **k):
        if spec.key == bad:
            raise RunFailed("injected")
        return real(spec, *a, **k)

    monkeypatch.setattr(run_one, "execute", execute)  # inherited by the forked workers
    with pytest.raises(RunFailed, match=r"1 of 9 runs failed(.|\n)*injected"):
        run_scenario(s, tmp_path / "f", show_progress=False)
    stored = ResultStore(tmp_path / "f").records()
    assert len(stored) == 8 and bad not in {r["key"] for r in stored}
    failed = [json.loads(x) for x in (tmp_path / "f" / run_one.FAILED_FILE).read_text()
              .splitlines()]
    assert [f["key"] for f in failed] == [bad] and "injected" in failed[0]["error"]
    monkeypatch.setattr(run_one, "execute", real)
    records, _ = run_scenario(s, tmp_path / "f", show_progress=False)  # resumes
    assert len(records) == 9
    assert len(ResultStore(tmp_path / "f").records()) == 9  # each run once


def test_summary_command_orders_rows_by_the_sweep_not_by_arrival(tmp_path):
    from ldpsim.simulator.cli import main

    serial, _ = run_scenario(scenario(jobs=1), tmp_path / "one", show_progress=False)
    out = tmp_path / "two"
    run_scenario(scenario(jobs=2), out, show_progress=False)
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(reversed(lines)) + "\n")  # the last run arrived first
    (out / "summary.csv").unlink()
    assert main(["summary", str(out), "-q"]) == 0
    assert summary_rows(out) == summary_rows(tmp_path / "one")


def test_jobs_2_resumes_after_the_orchestrator_is_killed(tmp_path):
    """SIGKILL the orchestrator of `ldpsim run --jobs 2` mid-sweep (its workers die with it);
    the same command finishes the sweep: every run exactly once, records as a serial run's."""
    import os
    import signal
    import subprocess
    import sys
    import time

    raw = {"name": "killed", "protocols": ["ldp_kwiksort_rr", "kwiksort"], "repeats": 12,
           "seed": 5, "data": {"kind": "mallows", "n": 20000, "m": 6, "theta": 0.5},
           "params": {"epsilon": [0.5, 2.0]},
           "runtime": {"backend": "inproc", "pools": 2, "progress": False},
           "output": {"plots": False, "per_round": False}}
    path = tmp_path / "killed.toml"
    path.write_text(_toml(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ldpsim", "run", str(path), "--jobs", "2", "--out", str(out),
           "--no-progress", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 4:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    total = len(load(path).runs())
    assert total == 36
    written = results.read_text().count("\n")
    assert 4 <= written < total, "the sweep was not interrupted mid-way"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resuming:" not in done.stderr  # -q hides it; the count below says it all
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert len(lines) == total and len({r["key"] for r in lines}) == total
    # the resumed sweep kept the fresh secret its first part drew (out/secret.key); the
    # serial sweep is given it
    serial, _ = run_scenario(load(raw={**raw, "runtime": {
        **raw["runtime"], "jobs": 1, "secret": str(out / "secret.key")}}),
        tmp_path / "serial", show_progress=False)
    assert stable(lines) == stable(serial)


def _toml(raw: dict[str, Any]) -> str:
    """A scenario dict as TOML (flat tables of scalars and lists)."""
    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(v)

    top = [f"{k} = {val(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    tables = [f"\n[{k}]\n" + "\n".join(f"{a} = {val(b)}" for a, b in v.items())
              for k, v in raw.items() if isinstance(v, dict)]
    return "\n".join(top) + "\n" + "\n".join(tables) + "\n"


def test_workers_get_runs_of_the_data_sets_they_built():
    """``--jobs`` hands each worker the runs whose data set (hence ground truth) it already
    built: alternating workers, every data set is built by one worker only; every run is
    handed out exactly once."""
    from ldpsim.simulator.sweep.runner import _ByData

    specs = scenario(repeats=4).runs()  # 3 runs (protocol, epsilon) per repetition
    assert [s.repeat for s in specs[:4]] == [0, 1, 2, 3]  # run order: repeats innermost
    pending = _ByData(specs)
    got: dict[str, list] = {"a": [], "b": []}
    for i in range(len(specs)):
        got["ab"[i % 2]].append(pending.take("ab"[i % 2]))
    assert pending.take("a") is None
    assert sorted(s.key for s in got["a"] + got["b"]) == sorted(s.key for s in specs)
    built = {w: {s.repeat for s in runs} for w, runs in got.items()}
    assert built["a"].isdisjoint(built["b"]) and built["a"] | built["b"] == {0, 1, 2, 3}
