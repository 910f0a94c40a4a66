"""Results that prove themselves: every stored record must be one of its directory's runs, and
``ldpsim verify`` re-executes stored runs and reports each that differs.

The attacks: a foreign record appended to ``results.jsonl`` (a key no run of the directory has,
ε = 99) was averaged into the summary; a record whose settings were edited under its old key
likewise; a garbage line ended in a traceback; a record with a forged output was kept on resume
and used in the summary, and only a re-execution can tell.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ldpsim.simulator.results.results import ResultsCorruptError
from ldpsim.simulator.scenario import identity

import ldpsim
from tests.test_cli import cli, run_tiny


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The tiny CLI scenario run once; each test works on a copy of its directory."""
    scen, out, _, _ = run_tiny(tmp_path_factory.mktemp("verify"))
    return scen, out


def _copy(stored, tmp_path: Path) -> tuple[Path, Path]:
    scen, out = stored
    dst = tmp_path / "out"
    shutil.copytree(out, dst)
    return scen, dst


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


def _write(out: Path, lines: list[str]) -> None:
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")


def _refused_everywhere(scen: Path, out: Path, line: int, what: str) -> None:
    """``ldpsim summary``, a resume and ``ldpsim.load`` each refuse the directory with one line
    naming the file and the line; nothing is averaged in, no traceback."""
    where = f"results.jsonl: line {line}"
    for args in (("summary", str(out)), ("run", str(scen), "--out", str(out), "--no-progress")):
        res = cli(*args)
        assert res.returncode != 0, (args, res.stdout)
        err = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("scenario ")]
        assert len(err) == 1 and err[0].startswith("error: "), res.stderr
        assert where in err[0] and what in err[0], err[0]
        assert "Traceback" not in res.stderr and "repeats" not in res.stdout
    with pytest.raises(ResultsCorruptError, match=where):
        ldpsim.load(out)


def test_attack_a_foreign_record_is_refused_not_averaged_in(stored, tmp_path):
    scen, out = _copy(stored, tmp_path)
    lines = _lines(out)
    rec = json.loads(lines[-1])
    rec["params"]["epsilon"] = rec["params_requested"]["epsilon"] = 99.0
    rec["point"]["params.epsilon"] = 1.0  # as the issue's: it would land in the epsilon = 1 row
    rec["key"] = identity.record_key(rec)  # consistent with its own settings: a real run's
    _write(out, [*lines, json.dumps(rec)])
    _refused_everywhere(scen, out, len(lines) + 1, "no sweep written to")


def test_attack_settings_edited_under_an_old_key_are_refused(stored, tmp_path):
    scen, out = _copy(stored, tmp_path)
    lines = _lines(out)
    rec = json.loads(lines[2])
    rec["data"]["n"] = 61  # the key stays; the settings no longer give it
    lines[2] = json.dumps(rec)
    _write(out, lines)
    _refused_everywhere(scen, out, 3, "its settings give key")


@pytest.mark.parametrize("garbage", ["this is not json", '{"key": "abc"}', "[1, 2, 3]"])
def test_attack_a_garbage_line_is_one_line_error(stored, tmp_path, garbage):
    scen, out = _copy(stored, tmp_path)
    lines = _lines(out)
    _write(out, [*lines[:4], garbage, *lines[4:]])
    _refused_everywhere(scen, out, 5, "")


def test_a_clean_directory_verifies_and_reloads(stored, tmp_path):
    scen, out = _copy(stored, tmp_path)
    res = cli("verify", str(out), "--jobs", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    n = len(_lines(out))
    assert f"{n} of {n} runs re-executed" in res.stdout and "identical" in res.stdout
    assert len(ldpsim.load(out)) == n
    report = ldpsim.verify(out, sample=0.5)
    assert report.checked == (n + 1) // 2 and not report.differing


def test_attack_a_forged_output_is_kept_by_resume_but_reported_by_verify(stored, tmp_path):
    scen, out = _copy(stored, tmp_path)
    lines = _lines(out)
    rec = json.loads(lines[5])
    ranking = rec["output"]["ranking"]
    rec["output"]["ranking"] = ranking[::-1]
    rec["metrics"]["kendall_tau"] = 0.0
    lines[5] = json.dumps(rec)
    _write(out, lines)
    # its settings give its key: resume and summary cannot tell (only a re-execution can)
    assert cli("summary", str(out)).returncode == 0
    res = cli("verify", str(out))
    assert res.returncode == 1, res.stdout + res.stderr
    assert rec["key"] in res.stdout and "output.ranking" in res.stdout
    assert "metrics.kendall_tau" in res.stdout
    assert "1 of" in res.stdout
    report = ldpsim.verify(out)
    assert [d.key for d in report.differing] == [rec["key"]]
    # a byte count edited likewise
    rec2 = json.loads(lines[7])
    rec2["comm"]["bytes_up_per_agent_mean"] += 1
    lines[7] = json.dumps(rec2)
    _write(out, lines)
    assert {d.key for d in ldpsim.verify(out).differing} == {rec["key"], rec2["key"]}


def test_verify_refuses_what_is_not_a_results_directory(tmp_path):
    res = cli("verify", str(tmp_path / "nothing"))
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    bad = cli("verify", str(tmp_path), "--sample", "1.5")
    assert bad.returncode == 2 and "--sample" in bad.stderr


def test_the_demo_verifies_on_its_own_backend_and_an_edited_record_is_named(tmp_path):
    """``make demo``'s results (the processes backend: a curator and two pool processes per
    run) re-executed on the same backend reproduce every record; one edited record is named."""
    out = tmp_path / "demo"
    res = cli("run", "demo", "--out", str(out), "--no-progress", timeout=300)
    assert res.returncode == 0, res.stderr
    ok = cli("verify", str(out), "--no-progress", timeout=300)
    assert ok.returncode == 0 and "every one identical" in ok.stdout, ok.stdout + ok.stderr
    lines = _lines(out)
    rec = json.loads(lines[-1])
    rec["metrics"]["error_rate"] = 0.5
    lines[-1] = json.dumps(rec)
    _write(out, lines)
    bad = cli("verify", str(out), "--no-progress", timeout=300)
    assert bad.returncode == 1
    assert f"run {rec['key']} (results.jsonl line {len(lines)}" in bad.stdout
    assert "metrics.error_rate" in bad.stdout


def test_a_degraded_run_without_injected_faults_is_re_executed_and_unverifiable(stored,
                                                                            tmp_path):
    """A run that lost agents to a pool that died is not reproducible from its settings; a
    record marked so leaves the summary. verify re-executes it all the same, and since its
    re-execution loses no agent it reports the record unverifiable (``ldpsim run`` redoes it):
    a repeat is never hidden from the summary unchecked."""
    scen, out = _copy(stored, tmp_path)
    lines = _lines(out)
    rec = json.loads(lines[1])
    rec["status"], rec["lost_agents"] = "degraded", 30
    lines[1] = json.dumps(rec)
    _write(out, lines)
    report = ldpsim.verify(out, backend="inproc")
    assert not report.ok and report.degraded == 1 and report.checked == len(lines)
    assert [k for k, _ in report.unverifiable] == [rec["key"]]
    assert "beside the loss its fields reproduce" in report.unverifiable[0][1]
    res = cli("verify", str(out), "--no-progress")
    assert res.returncode == 1 and f"unverifiable: run {rec['key']}" in res.stdout
