"""``ldpsim verify`` proves everything it prints, and says what it cannot (issue 46).

Each test builds an honest small directory, tampers with it as an attacker who can write the
directory would, and requires ``verify`` to fail naming the problem; the honest directories
pass. The lies: a record's ``point`` relabelled (the ε = 1 runs in the ε = 0.5 row); its
privacy fields rewritten (ε = 0.01 where the agents spent more); the worse repeat of a point
deleted, or marked degraded with a better metric; a ``--sample`` the forger knows in advance;
an edited ``summary.csv`` or ``per_round.csv``; a sweep renamed after a paper's scenario
getting that paper's printed numbers in its report; and the agents' lifetime odometer reading
its spend from ``results.jsonl`` (zero one record's spend, drop the refused run: the resumed
sweep spent past the lifetime budget).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from ldpsim.simulator.results.results import ResultsCorruptError
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep.reporting import write_report
from ldpsim.simulator.sweep.runner import run_scenario
from ldpsim.simulator.sweep.verify import verify

from tests.test_cli import cli


def _raw(**over):
    raw = {"name": "lies", "protocols": ["ldp_kwiksort_rr", "ldp_kwiksort_lap"], "seed": 5,
           "repeats": 2, "data": {"kind": "mallows", "n": 60, "m": 4},
           "params": {"epsilon": [0.5, 1.0], "queries": 1},
           "runtime": {"backend": "inproc", "pools": 2, "jobs": 1, "progress": False},
           "output": {"plots": False, "per_round": True}}
    raw.update(over)
    return raw


def _run(raw: dict, out: Path) -> Path:
    run_scenario(sc.load(raw=raw), out, show_progress=False, echo=lambda *a, **k: None)
    return out


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """Two protocols x two ε x two repeats, with per-round costs: run once."""
    return _run(_raw(), tmp_path_factory.mktemp("lies") / "out")


#: a lifetime budget of 2 on each data set: per repetition the runs spend 0.5, 1.0 and 0.5,
#: and the last one (ε = 1.0 of the second protocol) is refused
LIFETIME = {"agents": {"lifetime_epsilon": 2.0}, "repeats": 1}


@pytest.fixture(scope="module")
def lifetime(tmp_path_factory):
    return _run(_raw(**LIFETIME), tmp_path_factory.mktemp("lifetime") / "out")


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "out"
    shutil.copytree(src, dst)
    return dst


def _records(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]


def _write(out: Path, records: list[dict]) -> None:
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _problems(report) -> str:
    """Every problem a report names, one a line (what the tests search)."""
    return "\n".join([*map(str, report.differing), *(f"{k}: {w}" for k, w in report.failed),
                      *(f"{k}: {w}" for k, w in report.unverifiable),
                      *(f"missing {k}" for k in report.missing),
                      *(f"{f}: {w}" for f, w in report.files)])


def test_the_honest_directory_verifies(honest, tmp_path):
    out = _copy(honest, tmp_path)
    report = verify(out)
    assert report.ok, _problems(report)
    assert report.checked == report.total == 8 and not report.missing


def test_attack_a_relabelled_point_is_refused(honest, tmp_path):
    """The ε = 1 runs moved into the ε = 0.5 row of the summary, every record (so a sample
    cannot miss it either)."""
    out = _copy(honest, tmp_path)
    recs = _records(out)
    moved = [r for r in recs if r["point"].get("params.epsilon") == 1.0]
    for r in moved:
        r["point"]["params.epsilon"] = 0.5
    _write(out, recs)
    for sample in (1.0, 0.25):
        report = verify(out, sample=sample)
        assert not report.ok
        named = {d.key for d in report.differing if "point.params.epsilon" in d.fields}
        assert named == {r["key"] for r in moved}, _problems(report)


def test_attack_a_rewritten_seed_is_refused(honest, tmp_path):
    out = _copy(honest, tmp_path)
    recs = _records(out)
    recs[3]["seed"] += 1
    _write(out, recs)
    report = verify(out, sample=0.25)
    assert any(d.key == recs[3]["key"] and "seed" in d.fields for d in report.differing), \
        _problems(report)


def test_attack_rewritten_privacy_fields_are_refused(honest, tmp_path):
    """The record says the agents spent ε = 0.01 where they spent 1."""
    out = _copy(honest, tmp_path)
    recs = _records(out)
    rec = next(r for r in recs if r["params"]["epsilon"] == 1.0)
    for k in ("epsilon", "per_report_epsilon", "epsilon_spent_max", "epsilon_spent_mean",
              "epsilon_lifetime_max"):
        rec["privacy"][k] = 0.01
    _write(out, recs)
    report = verify(out)
    assert not report.ok
    (diff,) = report.differing
    assert diff.key == rec["key"]
    assert {"privacy.epsilon", "privacy.epsilon_spent_max",
            "privacy.epsilon_lifetime_max"} <= set(diff.fields)
    # the claim is recomputed from the spec for every record: a sample cannot miss it
    for _ in range(3):
        sampled = verify(out, sample=0.25)
        assert any(d.key == rec["key"] and "privacy.epsilon" in d.fields
                   for d in sampled.differing), _problems(sampled)


def test_attack_a_deleted_repeat_is_named_missing(honest, tmp_path):
    out = _copy(honest, tmp_path)
    recs = _records(out)
    gone = recs.pop(5)
    _write(out, recs)
    report = verify(out)
    assert not report.ok and report.missing == [gone["key"]], _problems(report)
    res = cli("verify", str(out), "--no-progress")
    assert res.returncode == 1 and f"missing: run {gone['key']}" in res.stdout, res.stdout


def test_attack_the_worse_repeat_marked_degraded_with_a_better_metric_is_refused(
        honest, tmp_path):
    """The worse repeat of a point marked degraded (it leaves the summary), its metric made
    better: the sweep injected no fault, so verify re-executes it and names it."""
    out = _copy(honest, tmp_path)
    recs = _records(out)
    rec = recs[1]
    rec["status"], rec["lost_agents"] = "degraded", 30
    rec["metrics"]["kendall_tau"] = 1.0
    _write(out, recs)
    report = verify(out)
    assert not report.ok
    assert [k for k, _ in report.unverifiable] == [rec["key"]], _problems(report)
    assert "metrics.kendall_tau" in dict(report.unverifiable)[rec["key"]]


def test_sample_draws_fresh_and_says_how_to_repeat_the_draw(honest, tmp_path):
    out = _copy(honest, tmp_path)
    draws = [verify(out, sample=0.25) for _ in range(6)]
    assert all(r.ok and r.checked == 2 for r in draws)
    assert len({tuple(r.sampled) for r in draws}) > 1  # nobody knows the sample in advance
    again = verify(out, sample=0.25, sample_seed=draws[0].sample_seed)
    assert again.sampled == draws[0].sampled
    res = cli("verify", str(out), "--sample", "0.25", "--no-progress")
    assert res.returncode == 0 and "--sample-seed " in res.stdout, res.stdout
    seed = re.search(r"--sample-seed (\d+)", res.stdout).group(1)
    res2 = cli("verify", str(out), "--sample", "0.25", "--sample-seed", seed, "--no-progress")
    assert res2.returncode == 0 and f"--sample-seed {seed}" in res2.stdout


@pytest.mark.parametrize("name", ["summary.csv", "per_round.csv"])
def test_attack_an_edited_table_is_named(honest, tmp_path, name):
    out = _copy(honest, tmp_path)
    path = out / name
    rows = list(csv.reader(path.read_text().splitlines()))
    col = rows[0].index("kendall_tau_mean" if name == "summary.csv" else "bytes_up")
    rows[1][col] = "0.99" if name == "summary.csv" else "1"
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    report = verify(out)
    assert not report.ok and [f for f, _ in report.files] == [name], _problems(report)
    res = cli("verify", str(out), "--no-progress")
    assert res.returncode == 1 and name in res.stdout


def test_verify_says_what_it_does_not_check(honest, tmp_path):
    out = _copy(honest, tmp_path)
    res = cli("verify", str(out), "--no-progress")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "not checked:" in res.stdout and "timings" in res.stdout and "memory" in res.stdout


def test_attack_a_sweep_renamed_after_a_paper_gets_no_printed_numbers(tmp_path):
    """The report's ``[[published]]`` is the one stored with the sweep, never that of the
    scenario file that has the sweep's name today."""
    out = _run(_raw(name="paper002_tables3_4", repeats=1), tmp_path / "renamed")
    page = write_report(out).read_text()
    assert "Beside the paper" not in page
    own = [{"source": "Table 1", "metric": "kendall_tau", "where": {"protocol":
            "ldp_kwiksort_rr"}, "x": "params.epsilon", "at": [0.5, 1.0],
            "values": [0.1, 0.2]}]
    out2 = _run(_raw(name="own", repeats=1, published=own), tmp_path / "own")
    page2 = write_report(out2).read_text()
    assert "Beside the paper" in page2 and "Table 1" in page2


def test_an_honest_directory_with_refused_runs_verifies(lifetime, tmp_path):
    """The lifetime odometer refused a run of each repetition: verify re-executes in the
    sweep's order with the odometer, and the refusal reproduces."""
    out = _copy(lifetime, tmp_path)
    refused = [r for r in _records(out) if r["refused"]]
    assert len(refused) == 1 and "lifetime" in refused[0]["refusal"]
    report = verify(out)
    assert report.ok, _problems(report)
    sampled = verify(out, sample=0.25)
    assert sampled.ok, _problems(sampled)


def _spend_forged(out: Path) -> tuple[dict, dict]:
    """Zero the spend of the ε = 1 run the odometer let through, drop the refused one."""
    recs = _records(out)
    refused = next(r for r in recs if r["refused"])
    zeroed = next(r for r in recs if not r["refused"] and r["params"]["epsilon"] == 1.0)
    for k in ("epsilon_spent_max", "epsilon_spent_mean"):
        zeroed["privacy"][k] = 0.0
    _write(out, [r for r in recs if r is not refused])
    return zeroed, refused


def test_attack_the_odometer_does_not_read_its_spend_from_the_results(lifetime, tmp_path):
    """Part 4: a resumed sweep recomputes each stored run's spend from its spec: the forged
    zero is found, and the dropped run is not re-run past the lifetime budget."""
    out = _copy(lifetime, tmp_path)
    zeroed, refused = _spend_forged(out)
    with pytest.raises(ResultsCorruptError, match=zeroed["key"]):
        run_scenario(sc.load(raw=_raw(**LIFETIME)), out, show_progress=False,
                     echo=lambda *a, **k: None)
    assert refused["key"] not in {r["key"] for r in _records(out)}


def test_attack_a_forged_spend_fails_verify(lifetime, tmp_path):
    out = _copy(lifetime, tmp_path)
    zeroed, refused = _spend_forged(out)
    report = verify(out)
    assert not report.ok and report.missing == [refused["key"]]
    assert any(d.key == zeroed["key"] and "privacy.epsilon_spent_max" in d.fields
               for d in report.differing), _problems(report)


def test_an_interrupted_lifetime_sweep_resumes_as_it_would_have_run(lifetime, tmp_path):
    """The spends recomputed on resume are those the records hold: a sweep stopped after its
    first two runs and resumed writes the records of the sweep that ran at once, refusal
    included, and verifies."""
    out = _copy(lifetime, tmp_path)
    whole = _records(out)
    _write(out, whole[:2])
    for name in ("summary.csv", "per_round.csv"):
        (out / name).unlink()
    _run(_raw(**LIFETIME), out)
    again = _records(out)
    assert [r["key"] for r in again] == [r["key"] for r in whole]
    for a, b in zip(again, whole, strict=True):
        assert (a["privacy"], a["refused"], a["output"]) == (b["privacy"], b["refused"],
                                                             b["output"])
    assert verify(out).ok


def test_a_fault_the_sweep_injected_replays_and_a_forged_degraded_record_is_named(tmp_path):
    """A pool the sweep kills in round 0: every run is degraded, and its loss is part of its
    settings, so verify re-executes it and compares it like any other run."""
    raw = _raw(protocols=["ldp_kwiksort_rr"], repeats=1)
    raw["runtime"] = {**raw["runtime"], "faults": [{"pool": 1, "round": 0, "action": "kill"}]}
    out = _run(raw, tmp_path / "faults")
    recs = _records(out)
    assert recs and all(r["status"] == "degraded" for r in recs)
    report = verify(out)
    assert report.ok and report.degraded == report.checked == len(recs), _problems(report)
    recs[0]["metrics"]["kendall_tau"] = 1.0
    _write(out, recs)
    report = verify(out)
    assert [d.key for d in report.differing] == [recs[0]["key"]]
    assert "metrics.kendall_tau" in report.differing[0].fields


def test_attack_an_edited_report_is_named_and_a_moved_one_is_not(honest, tmp_path):
    """``report.html`` is drawn again from the records (without its figures, which vary with
    the machine) and compared: a number edited in it is named; the directory moved is not."""
    out = _copy(honest, tmp_path)
    write_report(out)
    moved = tmp_path / "moved"
    out.rename(moved)
    report = verify(moved, sample=0.25)
    assert report.ok, _problems(report)
    text = (moved / "report.html").read_text()
    (moved / "report.html").write_text(text.replace("<td>ldp_kwiksort_rr</td>",
                                                    "<td>ldp_kwiksort_lap</td>", 1))
    report = verify(moved, sample=0.25)
    assert [f for f, _ in report.files] == ["report.html"], _problems(report)


def test_a_long_lived_pools_lifetime_reading_is_not_compared(honest):
    """On the hosts backend a pool's ledger spans its whole lifetime (other sweeps' runs
    too): its reading is not the run's, and is left out; every other field is compared."""
    from dataclasses import replace

    from ldpsim.simulator.scenario import identity
    from ldpsim.simulator.sweep.verify import Report, judge

    rec = _records(honest)[0]
    spec = next(s for s in identity.stored_scenarios(honest)[0].runs() if s.key == rec["key"])
    fresh = json.loads(json.dumps(rec))
    fresh["privacy"]["epsilon_lifetime_max"] += 3.0
    for backend, named in (("inproc", True), ("hosts", False)):
        report = Report(checked=0, total=1)
        judge(report, rec, replace(spec, runtime={**spec.runtime, "backend": backend}), 1,
               fresh)
        assert bool(report.differing) is named
    fresh["metrics"]["kendall_tau"] = 1.0
    report = Report(checked=0, total=1)
    judge(report, rec, replace(spec, runtime={**spec.runtime, "backend": "hosts"}), 1, fresh)
    assert report.differing[0].fields == ["metrics.kendall_tau"]
