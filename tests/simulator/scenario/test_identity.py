"""Result identity: a results directory never mixes runs of different settings silently."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ldpsim.simulator.results.results import summarize
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario.scenario import load
from ldpsim.simulator.scenario.tables import ScenarioError, ScenarioWarning
from ldpsim.simulator.sweep.runner import run_scenario

from tests.conftest import ROOT

BASE = """
name = "ident"
protocols = ["ldp_kwiksort_rr"]
repeats = 2
seed = 3
[data]
kind = "mallows"
n = {n}
m = 5
[params]
epsilon = {eps}
[runtime]
backend = "inproc"
pools = 1
progress = false
[output]
plots = false
"""


def _scenario(tmp_path: Path, n=200, eps="1.0", extra="") -> object:
    path = tmp_path / f"s{n}_{abs(hash((eps, extra)))}.toml"
    path.write_text(BASE.format(n=n, eps=eps) + extra)
    return load(str(path))


def _quiet(*a, **k):
    pass


def test_a_non_swept_change_is_refused_naming_the_keys(tmp_path):
    out = tmp_path / "res"
    run_scenario(_scenario(tmp_path, n=200), out, show_progress=False, echo=_quiet)
    with pytest.raises(identity.FingerprintMismatch) as info:
        run_scenario(_scenario(tmp_path, n=120), out, show_progress=False, echo=_quiet)
    msg = str(info.value)
    assert "data.n: 200 there, 120 here" in msg and "--beside" in msg
    same = _scenario(tmp_path, n=200)
    other_backend = replace(same, runtime={**same.runtime, "backend": "processes"})
    with pytest.raises(identity.FingerprintMismatch, match='runtime.backend: "inproc" there, '
                                                           '"processes" here'):
        run_scenario(other_backend, out, show_progress=False, echo=_quiet)
    # nothing was added by the refused runs
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_extending_a_sweep_is_a_resume_and_never_averages_different_settings(tmp_path):
    out = tmp_path / "res"
    run_scenario(_scenario(tmp_path, eps="1.0"), out, show_progress=False, echo=_quiet)
    # a sweep axis that includes the old value extends the directory
    records, _ = run_scenario(_scenario(tmp_path, eps="[1.0, 2.0]"), out, show_progress=False,
                              echo=_quiet)
    assert len(records) == 4
    _, rows = summarize(records)
    assert sorted(r["params.epsilon"] for r in rows) == [1.0, 2.0]
    assert all(r["repeats"] == 2 for r in rows)
    stored = json.loads((out / "scenario.json").read_text())["fingerprint"]
    assert stored["params.epsilon"] == [1.0, 2.0]


def _lines(out: Path) -> int:
    return len((out / "results.jsonl").read_text().splitlines())


PAIRED = '[sweep]\npaired = [["params.epsilon", "data.n"]]\n'


def test_a_paired_sweep_resumes_extends_verifies_and_refuses_another_pairing(tmp_path):
    import ldpsim

    out = tmp_path / "res"
    paired = _scenario(tmp_path, n="[150, 200]", eps="[1.0, 2.0]", extra=PAIRED)
    records, _ = run_scenario(paired, out, show_progress=False, echo=_quiet)
    assert sorted({(r["params"]["epsilon"], r["data"]["n"]) for r in records}) == [
        (1.0, 150), (2.0, 200)]
    assert all(r["point"] == {"protocol": "ldp_kwiksort_rr", "params.epsilon":
                              r["params"]["epsilon"], "data.n": r["data"]["n"]} for r in records)
    stored = json.loads((out / "scenario.json").read_text())["fingerprint"]
    assert stored["sweep.paired"] == [[["params.epsilon", "data.n"]]]
    run_scenario(paired, out, show_progress=False, echo=_quiet)  # a resume: nothing redone
    assert _lines(out) == 4
    more = _scenario(tmp_path, n="[150, 200, 250]", eps="[1.0, 2.0, 4.0]", extra=PAIRED)
    records, _ = run_scenario(more, out, show_progress=False, echo=_quiet)
    assert _lines(out) == 6 and len(records) == 6
    # the grid of the same values is another sweep: refused, naming the pairing
    grid = _scenario(tmp_path, n="[150, 200, 250]", eps="[1.0, 2.0, 4.0]")
    with pytest.raises(identity.FingerprintMismatch,
                       match=r'sweep.paired: \[\["params.epsilon", "data.n"\]\] there, '
                             r'"\(unset\)" here'):
        run_scenario(grid, out, show_progress=False, echo=_quiet)
    assert _lines(out) == 6
    # the stored sweeps keep their pairing: verify re-executes exactly the stored runs
    sweeps = identity.stored_scenarios(out)
    assert [s.paired for s in sweeps] == [[["params.epsilon", "data.n"]]] * 2
    assert {s.key for sweep in sweeps for s in sweep.runs()} == {r["key"] for r in records}
    report = ldpsim.verify(out)
    assert report.ok and report.checked == 6 and not report.failed


def test_a_directory_of_the_former_collusion_sweep_resumes_under_colluders(tmp_path):
    out = tmp_path / "res"
    with pytest.warns(ScenarioWarning, match=r"\[collusion\] sweep: renamed"):
        legacy = _scenario(tmp_path, extra="[collusion]\nsweep = [0.0, 0.5]\n")
    run_scenario(legacy, out, show_progress=False, echo=_quiet)
    stored = json.loads((out / "scenario.json").read_text())["fingerprint"]
    assert stored["collusion.colluders"] == [0.0, 0.5]
    said = []
    now = _scenario(tmp_path, extra="[collusion]\ncolluders = [0.0, 0.5]\n")
    run_scenario(now, out, show_progress=False, echo=lambda *a, **k: said.append(a[0]))
    assert _lines(out) == 4 and said[0].startswith("resuming: 4 of 4 runs")
    more = _scenario(tmp_path, extra="[collusion]\ncolluders = [0.0, 0.5, 3]\n")
    records, _ = run_scenario(more, out, show_progress=False, echo=_quiet)
    assert _lines(out) == 6 and len(records) == 6
    assert len(identity.stored_scenarios(out)) == 2  # the former sweep's table is the same


def test_the_secret_is_part_of_the_identity_as_a_salted_mac_only(tmp_path):
    """Runs with another master secret hold other data and coins: the fingerprint tells them
    apart, by a MAC under the directory's own salt (two directories store different values
    for one secret), never by the secret or an unsalted hash of it; the token, which only
    authenticates pools, changes no record and is not in it at all."""
    import hashlib

    from ldpsim.simulator.session.keyfiles import write_host_keys

    files = write_host_keys(tmp_path / "keys", 1, [[(0, 200)]])
    a = _scenario(tmp_path)
    a = replace(a, runtime={**a.runtime, "secret": "seed"})  # the seed's: no MAC to store
    b = replace(a, runtime={**a.runtime, "secret": str(files["secret"])})
    fa, fb = identity.fingerprint(a, b"salt-1"), identity.fingerprint(b, b"salt-1")
    diff = identity.differences(fa, fb)
    # (a secret of its own keys the run's seed first: another derivation of the keys too)
    assert diff == [f'keys: "{identity.KEYS}" there, "{identity.KEYS_KEYED}" here',
                    f'runtime.secret: "" there, "{fb["runtime.secret"][0]}" here']
    other_salt = identity.fingerprint(b, b"salt-2")["runtime.secret"]
    assert other_salt != fb["runtime.secret"]
    master = json.loads(files["secret"].read_text())["master"]
    stored = json.dumps(fb)
    assert master not in stored
    assert hashlib.sha256(bytes.fromhex(master)).hexdigest()[:12] not in stored
    c = replace(a, runtime={**a.runtime, "token": "a registration token"})
    assert identity.fingerprint(c, b"salt-1") == fa
    assert "registration" not in json.dumps(identity.fingerprint(c, b"salt-1"))


def test_results_of_another_key_derivation_are_not_mixed_in(tmp_path):
    """A directory written before agents had keys of their own (other data and coins for the
    same seed) is refused, naming why."""
    scen = _scenario(tmp_path)
    out = tmp_path / "old"
    out.mkdir()
    fp = identity.fingerprint(scen)
    del fp["keys"]  # as earlier versions stored it
    (out / "scenario.json").write_text(json.dumps({"fingerprint": fp}))
    (out / "results.jsonl").write_text('{"key": "x"}\n')
    with pytest.raises(identity.FingerprintMismatch, match='keys: "\\(unset\\)" there'):
        identity.check(out, scen, has_records=True)


def test_beside_writes_next_to_a_conflicting_directory(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(BASE.format(n=200, eps="1.0"))
    out = tmp_path / "res"

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "ldpsim", "run", str(scen), "--out",
                               str(out), "--no-progress", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    assert cli().returncode == 0
    refused = cli("--set", "data.n=150")
    assert refused.returncode == 2 and "data.n: 200 there, 150 here" in refused.stderr
    assert "Traceback" not in refused.stderr
    moved = cli("--set", "data.n=150", "--beside")
    assert moved.returncode == 0, moved.stderr
    assert (tmp_path / "res-2" / "results.jsonl").is_file()
    # the same settings again resume in place: nothing redone
    again = cli()
    assert again.returncode == 0 and "resuming: 2 of 2" in again.stderr


def test_the_colluding_fraction_is_a_sweep_axis(tmp_path):
    scen = _scenario(tmp_path, extra="[collusion]\ncolluders = [0.0, 0.5, 3]\ncurator = true\n")
    specs = scen.runs()
    assert len(specs) == 3 * 2
    assert sorted({s.point["collusion.colluders"] for s in specs}) == [0.0, 0.5, 3]
    assert len({s.key for s in specs}) == 6  # each colluding set is its own run
    records, _ = run_scenario(scen, tmp_path / "res", show_progress=False, echo=_quiet)
    by = {r["point"]["collusion.colluders"]: r["collusion"]["colluders"] for r in records}
    assert by == {0.0: 0, 0.5: 100, 3: 3}  # n = 200: half of them, or three
    _, rows = summarize(records)
    assert [r["collusion.colluders"] for r in rows] == [0.0, 0.5, 3]
    for bad, needle in (("colluders = []", "non-empty list"),
                        ("colluders = [[1, 2]]", r"list of agent ids goes in \[collusion\] agents"),
                        ("colluders = [1.5]", r"colluders: got \[1.5\]"),
                        ("sweep = [0.1]\ncolluders = 0.2", "give one of them")):
        with pytest.raises(ScenarioError, match=needle):
            _scenario(tmp_path, extra=f"[collusion]\n{bad}\n")
