"""Runs that lose agents are marked degraded: left out of the summary, warned about, redone on
resume and superseded in the store."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator.cli import main
from ldpsim.simulator.results.results import ResultStore
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep.runner import execute, run_scenario

FAULT = {"pool": 1, "round": 0, "action": "silent"}


def raw(faults: list[dict[str, Any]] | None = None, repeats: int = 1) -> dict[str, Any]:
    return {"name": "deg", "protocol": "ldp_kwiksort_rr", "repeats": repeats, "seed": 4,
            "data": {"kind": "mallows", "n": 60, "m": 4, "theta": 0.5},
            "params": {"epsilon": 1.0},
            "runtime": {"backend": "inproc", "pools": 2, "timeout_s": 0.5,
                        "faults": faults or []},
            "output": {"plots": False}}


TOML = """
name = "deg"
protocol = "ldp_kwiksort_rr"
repeats = 2
seed = 4

[data]
kind = "mallows"
n = 60
m = 4
theta = 0.5

[params]
epsilon = 1.0

[output]
plots = false

[runtime]
backend = "inproc"
pools = 2
timeout_s = 0.5
{faults}
"""
FAULT_TOML = '[[runtime.faults]]\npool = 1\nround = 0\naction = "silent"\n'


def summary_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_lost_agents_make_a_degraded_record():
    bad = execute(sc.load(raw=raw([FAULT])).runs()[0])
    assert bad["status"] == "degraded"
    assert isinstance(bad["lost_agents"], int) and bad["lost_agents"] > 0
    assert bad["lost_agents"] == bad["dropouts"]
    good = execute(sc.load(raw=raw()).runs()[0])
    assert good["status"] == "complete" and good["lost_agents"] == 0


def test_cli_warns_exits_3_and_leaves_degraded_out(tmp_path, capsys):
    scen = tmp_path / "deg.toml"
    scen.write_text(TOML.format(faults=FAULT_TOML))
    out = tmp_path / "out"
    assert main(["run", str(scen), "--out", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    recs = ResultStore(out).records()
    lost = sum(r["lost_agents"] for r in recs)
    assert len(recs) == 2 and all(r["status"] == "degraded" for r in recs) and lost > 0
    assert f"warning: 2 of 2 runs degraded ({lost} agents lost" in err
    assert "excluded from the summary" in err and "re-running the same command" in err
    assert summary_rows(out) == []

    assert main(["summary", str(out)]) == 0
    assert summary_rows(out) == []
    assert main(["summary", str(out), "--include-degraded"]) == 0
    rows = summary_rows(out)
    assert len(rows) == 1 and rows[0]["repeats"] == "2"

    # the degraded runs are redone (and degraded again): still one record per key
    out2 = tmp_path / "out2"
    assert main(["run", str(scen), "--out", str(out2), "--no-progress"]) == 3
    assert f"ldpsim summary {out2} --include-degraded shows them" in capsys.readouterr().err
    assert main(["summary", str(out2), "--include-degraded"]) == 0
    assert [r["repeats"] for r in summary_rows(out2)] == ["2"]
    assert main(["run", str(scen), "--out", str(out2), "--no-progress"]) == 3
    assert len((out2 / "results.jsonl").read_text().splitlines()) == 4
    assert len(ResultStore(out2).records()) == 2
    assert summary_rows(out2) == []

    clean = tmp_path / "clean.toml"
    clean.write_text(TOML.format(faults=""))
    capsys.readouterr()
    assert main(["run", str(clean), "--out", str(tmp_path / "c"), "--no-progress"]) == 0
    assert "degraded" not in capsys.readouterr().err


def test_resume_redoes_and_supersedes_a_degraded_record(tmp_path):
    scenario = sc.load(raw=raw(repeats=3))
    out = tmp_path / "out"
    first, _ = run_scenario(scenario, out, show_progress=False, echo=lambda *a, **k: None)
    assert [r["status"] for r in first] == ["complete"] * 3
    path = out / "results.jsonl"
    lines = path.read_text().splitlines()
    marked = json.loads(lines[1])
    marked["status"], marked["metrics"] = "degraded", {"error_rate": 99.0}
    old = json.loads(lines[2])
    del old["status"]  # a record of an older file: counts as complete
    edited = [lines[0], json.dumps(marked), json.dumps(old)]
    path.write_text("\n".join(edited) + "\n")

    store = ResultStore(out)
    assert store.done_keys() == {json.loads(lines[0])["key"], old["key"]}
    records, _ = run_scenario(scenario, out, show_progress=False, echo=lambda *a, **k: None)
    new = path.read_text().splitlines()
    assert len(new) == 4 and new[:3] == edited  # only the degraded run was redone
    assert json.loads(new[3])["key"] == marked["key"]
    assert json.loads(new[3])["status"] == "complete"
    keys = [r["key"] for r in records]
    assert sorted(keys) == sorted(json.loads(ln)["key"] for ln in lines)
    assert keys.count(marked["key"]) == 1
    assert [r for r in ResultStore(out).records() if r["key"] == marked["key"]] == [
        json.loads(new[3])]
    assert all(float(r["error_rate_mean"]) < 99 for r in summary_rows(out))

    # a complete record is never redone, nor can it be superseded
    run_scenario(scenario, out, show_progress=False, echo=lambda *a, **k: None)
    assert path.read_text().splitlines() == new
    with pytest.raises(ValueError, match="already"):
        ResultStore(out).append(json.loads(new[3]))


def test_store_supersedes_only_degraded(tmp_path):
    store = ResultStore(tmp_path)
    store.append({"key": "a", "status": "degraded", "metrics": {"tau": 1.0}})
    assert store.done_keys() == set()
    store.append({"key": "b", "metrics": {"tau": 5.0}})
    store.append({"key": "a", "status": "degraded", "metrics": {"tau": 2.0}})
    store.append({"key": "a", "status": "complete", "metrics": {"tau": 3.0}})
    assert store.done_keys() == {"a", "b"}
    with pytest.raises(ValueError, match="already"):
        store.append({"key": "a", "status": "degraded", "metrics": {}})
    got = ResultStore(tmp_path).records()
    assert [(r["key"], r["metrics"]["tau"]) for r in got] == [("b", 5.0), ("a", 3.0)]
