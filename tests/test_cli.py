"""The ``ldpsim`` command line (list, run, resume after a crash, summary).

The command line tests run tiny ``inproc`` scenarios in a subprocess.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from ldpsim.protocols import DATA_KINDS
from ldpsim.simulator.scenario import scenario as sc

from tests.conftest import ROOT
from tests.simulator.scenario.test_scenario import ALL_PROTOCOLS


def cli(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ldpsim", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def python_c(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in a fresh interpreter, from the repository's root."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


TINY = """
name = "tiny"
description = "tiny inproc scenario for the CLI tests"
protocols = ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr", "ldp_kwiksort_lap"]
repeats = 2
seed = 3

[data]
kind = "mallows"
n = 60
m = 4
theta = 0.5

[params]
epsilon = [1.0, 2.0]
queries = "auto"

[runtime]
backend = "inproc"
pools = 2
timeout_s = 10

[collusion]
colluders = 0.0
curator = true

[output]
plots = false
per_round = false
"""
TINY_RUNS = 2 * (1 + 2 + 2 + 2)
TINY_POINTS = 1 + 2 + 2 + 2

RECORD_KEYS = {"scenario", "protocol", "params", "repeat", "seed", "backend", "pools",
               "n_agents", "output", "metrics", "comm", "timing", "rejected", "versions"}
COMM_KEYS = {"bytes_up_per_agent_mean", "bytes_down_per_agent_mean", "bytes_total",
             "messages_total", "rounds", "report_bits_per_agent"}
TIMING_KEYS = {"wall_s", "pools_ready_s", "curator_cpu_s", "pools_cpu_s", "agent_cpu_s_mean",
               "agent_time_mode"}


def read_lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


def run_tiny(d: Path) -> tuple[Path, Path, subprocess.CompletedProcess, float]:
    """``ldpsim run`` of the tiny scenario into ``d``: (scenario file, results directory, the
    finished command, its seconds)."""
    scen = d / "tiny.toml"
    scen.write_text(TINY)
    out = d / "out"
    t0 = time.monotonic()
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    return scen, out, res, elapsed


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Run the tiny scenario once; tests that modify the results work on copies."""
    return run_tiny(tmp_path_factory.mktemp("cli"))


def test_cli_list():
    res = cli("list")
    assert res.returncode == 0, res.stderr
    for name in [*ALL_PROTOCOLS, *DATA_KINDS, "demo.toml", "paper000_fig5_epsilon.toml"]:
        assert name in res.stdout
    assert {"mallows", "sushi", "preflib"} <= set(DATA_KINDS)
    assert "Yan, Li & Liu, 2020, Fig. 5(d-f)" in res.stdout


def test_every_shipped_scenario_has_a_current_duration():
    """``scenarios/durations.json`` (``ldpsim list``'s durations) holds every shipped scenario
    at its current run count: a sweep that changed is measured again
    (``python -m ldpsim.simulator.bench.durations NAME``)."""
    import warnings

    from ldpsim.simulator.bench.durations import load_durations, spread

    measured = load_durations(ROOT / "scenarios")
    names = sorted(f.stem for f in (ROOT / "scenarios").glob("*.toml"))
    assert sorted(measured) == names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stale = [n for n in names
                 if len(sc.load(ROOT / "scenarios" / f"{n}.toml").runs()) != measured[n]["runs"]]
    assert not stale, f"measure again: python -m ldpsim.simulator.bench.durations {' '.join(stale)}"
    assert all(e["seconds"] >= 0 and 1 <= e["sampled"] <= e["runs"] for e in measured.values())
    assert spread(5, 24) == [0, 1, 2, 3, 4] and spread(100, 3) == [0, 50, 99]
    assert spread(1000, 24)[-1] == 999 and len(spread(1000, 24)) == 24


def test_list_shows_each_scenarios_runs_and_duration(tmp_path):
    from ldpsim.simulator.bench.durations import duration_text, load_durations

    res = cli("list")
    lines = res.stdout.splitlines()
    demo = lines[lines.index("  scenarios/demo.toml") + 1].split()
    entry = load_durations(ROOT / "scenarios")["demo"]
    took = "~" + duration_text(entry["seconds"])
    assert demo[:2] == [str(entry["runs"]), "runs"] and " ".join(demo[2:]).startswith(took)
    assert [duration_text(s) for s in (0.2, 8, 75, 720, 12600)] == \
        ["< 1 s", "8 s", "75 s", "12 min", "3.5 h"]
    # a scenario of one's own is counted, not measured
    own = tmp_path / "scenarios"
    own.mkdir()
    (own / "mine.toml").write_text(TINY)
    res = subprocess.run([str(Path(sys.executable).parent / "ldpsim"), "list"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    mine = lines[lines.index("  scenarios/mine.toml") + 1].split()
    described = tomllib.loads(TINY)["description"].split()
    assert mine == [str(TINY_RUNS), "runs", "unmeasured", *described]


@pytest.mark.parametrize("cmd, flag, instead", [
    ("run", "--pools", "--set runtime.pools=N"),
    ("run", "--rows=5", "ldpsim summary DIR --rows N after the run"),
    ("run", "--include-degraded", "ldpsim summary DIR --include-degraded after the run"),
    ("curator", "--rows", "ldpsim summary DIR --rows N after the run"),
])
def test_a_retired_option_names_what_does_the_same(tmp_path, cmd, flag, instead):
    from ldpsim.simulator.cli import main

    out = tmp_path / "out"
    res = python_c("import sys; from ldpsim.simulator.cli import main; sys.exit(main())", cmd,
                   "demo", flag, "--out", str(out))
    assert res.returncode == 2 and res.stdout == "" and not out.exists()
    assert res.stderr.strip() == (f"error: ldpsim {cmd} {flag.split('=')[0]}: no longer an "
                                  f"option; use {instead}")
    # the same words from Python; an option after a value that looks like one is still seen
    assert main([cmd, "demo", "--out", str(out), flag]) == 2 and not out.exists()


@pytest.mark.parametrize("bad, key", [
    (["--set", "params.epsilom=1"], "epsilom"),
    (["--set", "colluders=0.1"], "colluders"),
    (["--set", "runtime.backend=docker"], "backend"),
    (["--set", "params.queries=7"], "queries"),  # m = 4: only C(4,2) = 6 pairs (check_runs)
])
def test_cli_run_bad_key_exits_2_before_any_process(tmp_path, bad, key):
    scen = tmp_path / "tiny.toml"
    scen.write_text(TINY.replace('backend = "inproc"', 'backend = "processes"'))
    out = tmp_path / "out"
    res = cli("run", str(scen), "--out", str(out), "--no-progress", *bad)
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and key in last
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert not out.exists()  # nothing was written, so no run (and no process) was started


def test_cli_run_writes_records(tiny_run):
    scen, out, res, elapsed = tiny_run
    assert f"scenario tiny: {TINY_RUNS} runs, backend inproc, 2 pools" in res.stderr
    assert "results.jsonl" in res.stdout and "error_rate_mean" in res.stdout
    lines = read_lines(out)
    assert len(lines) == TINY_RUNS
    recs = [json.loads(ln) for ln in lines]
    expected = {x.key: x for x in sc.load(scen).runs()}
    assert {r["key"] for r in recs} == set(expected)
    for r in recs:
        assert RECORD_KEYS <= set(r), RECORD_KEYS - set(r)
        assert COMM_KEYS <= set(r["comm"]), COMM_KEYS - set(r["comm"])
        assert TIMING_KEYS <= set(r["timing"]), TIMING_KEYS - set(r["timing"])
        assert 0 <= r["timing"]["pools_ready_s"] <= r["timing"]["wall_s"]
        spec = expected[r["key"]]
        assert (r["scenario"], r["protocol"], r["repeat"], r["seed"]) == (
            "tiny", spec.protocol, spec.repeat, spec.seed)
        assert (r["backend"], r["pools"], r["n_agents"], r["rejected"]) == ("inproc", 2, 60, 0)
        assert r["point"] == spec.point
        assert {"error_rate", "kendall_tau"} <= set(r["metrics"])
        assert sorted(r["output"]["ranking"]) == [0, 1, 2, 3]
        assert r["comm"]["rounds"] == 1
        assert "per_round" not in r["comm"]  # [output] per_round = false
        if spec.protocol.startswith("ldp_"):
            assert r["params"]["queries"] in range(1, 7)  # "auto" resolved
        assert isinstance(r["versions"], dict) and r["versions"]["ldpsim"]
    assert not list(out.glob("*.png"))  # [output] plots = false


def test_cli_run_summary_csv(tiny_run):
    _, out, _, _ = tiny_run
    with open(out / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == TINY_POINTS
    cols = set(rows[0])
    assert {"protocol", "params.epsilon", "repeats", "error_rate_mean", "error_rate_std",
            "kendall_tau_mean", "kendall_tau_std"} <= cols
    assert all(r["repeats"] == "2" for r in rows)
    assert [r["protocol"] for r in rows].count("kwiksort") == 1
    assert {(r["protocol"], r["params.epsilon"]) for r in rows} == {
        ("kwiksort", ""), *((p, e) for p in ALL_PROTOCOLS[1:] for e in ("1.0", "2.0"))}
    for r in rows:
        assert 0 <= float(r["error_rate_mean"]) <= 1
        assert 0 <= float(r["kendall_tau_mean"]) <= 1


def test_cli_resume_runs_nothing_new(tiny_run, tmp_path):
    scen, out0, _, _ = tiny_run
    out = tmp_path / "out"
    shutil.copytree(out0, out)
    before = (out / "results.jsonl").read_bytes()
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert f"resuming: {TINY_RUNS} of {TINY_RUNS} runs already in" in res.stderr
    assert (out / "results.jsonl").read_bytes() == before
    assert len(read_lines(out)) == TINY_RUNS


def test_cli_resume_after_a_truncated_last_line(tiny_run, tmp_path):
    scen, out0, _, _ = tiny_run
    out = tmp_path / "out"
    shutil.copytree(out0, out)
    path = out / "results.jsonl"
    lines = read_lines(out)
    lost = json.loads(lines[-1])
    # a crash in the middle of writing the last record
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert f"resuming: {TINY_RUNS - 1} of {TINY_RUNS} runs" in res.stderr
    new = read_lines(out)
    assert len(new) == TINY_RUNS
    assert new[:-1] == lines[:-1]
    keys = [json.loads(ln)["key"] for ln in new]
    assert len(set(keys)) == TINY_RUNS and set(keys) == {json.loads(ln)["key"] for ln in lines}
    redone = json.loads(new[-1])
    assert redone["key"] == lost["key"]
    assert (redone["output"], redone["metrics"]) == (lost["output"], lost["metrics"])
    # and once more: still nothing new
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0 and read_lines(out) == new


def test_cli_resume_after_sigkill(tmp_path):
    """kill -9 mid-sweep (records written, the last ones not yet fsync'ed): the same command
    keeps every complete line, redoes only the runs missing from the file, none twice."""
    import signal

    scen = tmp_path / "s.toml"
    scen.write_text('name = "many"\nprotocol = "ldp_kwiksort_rr"\nrepeats = 400\nseed = 1\n'
                    '[data]\nkind = "mallows"\nn = 10\nm = 4\n[runtime]\nbackend = "inproc"\n'
                    "[output]\nplots = false\n")
    out = tmp_path / "out"
    results = out / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen([sys.executable, "-m", "ldpsim", "run", str(scen), "--out", str(out),
                           "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                results.exists() and results.read_bytes().count(b"\n") >= 20):
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    data = results.read_bytes()
    kept = data[:data.rfind(b"\n") + 1].decode().splitlines()  # a torn last line may follow
    assert 20 <= len(kept) < 400
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert f"resuming: {len(kept)} of 400 runs" in res.stderr
    lines = read_lines(out)
    assert lines[:len(kept)] == kept
    keys = [json.loads(ln)["key"] for ln in lines]
    assert len(keys) == len(set(keys)) == 400


def test_cli_summary_reloads(tiny_run, tmp_path):
    _, out0, run_res, _ = tiny_run
    out = tmp_path / "out"
    shutil.copytree(out0, out)
    (out / "summary.csv").unlink()
    res = cli("summary", str(out))
    assert res.returncode == 0, res.stderr
    table = res.stdout.strip().splitlines()
    assert table[0].split()[:3] == ["protocol", "params.epsilon", "repeats"]
    assert "error_rate_mean" in table[0] and "kendall_tau_mean" in table[0]
    legend = [ln for ln in table if ln.startswith("  ")]  # what each metric column means
    assert [ln.split(":")[0].strip() for ln in legend] == ["error_rate", "kendall_tau",
                                                           "cap_hit"]
    assert all(ln.endswith("lower is better)") for ln in legend)
    # header, dashes, a row per point, a line per metric, privacy
    assert len(table) == 2 + TINY_POINTS + len(legend) + 1
    assert table[-1].startswith("privacy: each repetition's data set served")  # the sweep's cost
    assert res.stdout.strip() in run_res.stdout  # the same table as the run printed
    assert (out / "summary.csv").read_bytes() == (out0 / "summary.csv").read_bytes()
    empty = cli("summary", str(tmp_path / "nothing"))
    assert empty.returncode == 1 and "no results in" in empty.stderr


def test_no_command_prints_a_traceback_for_bad_input(tmp_path):
    """Every subcommand with bad arguments or a bad file: a one-line error, exit 1 or 2."""
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\x00\x01\xff\xfe")
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    from ldpsim.simulator.session.keyfiles import write_host_keys

    write_host_keys(tmp_path / "k", 2, [[(0, 50)], [(50, 100)]])
    cases = [
        (["run", str(binary)], "not a UTF-8 text file"),
        (["run", str(latin)], "not a UTF-8 text file"),
        (["audit", str(latin)], "not a UTF-8 text file"),
        (["run", "no_such_scenario"], "scenario file not found"),
        (["run", "dem"], "scenario file not found: dem; did you mean 'demo'?"),
        (["run", "demo", "--set", "params.epsilon=[0.5,,1]"], "malformed TOML value at "
                                                               "character 6"),
        (["agents", "--connect", "nonsense", "--keys", str(tmp_path / "k" / "pool-0.keys")],
         "expected tcp://HOST:PORT"),
        (["agents", "--connect", "tcp://h:1", "--keys", str(tmp_path / "k" / "pool-0.keys"),
          "--pool", "3/2"], "--pool"),
        (["agents", "--connect", "tcp://h:1", "--keys", str(tmp_path / "absent.keys")],
         "no such key file"),
        (["agents", "--connect", "tcp://h:1", "--keys", str(tmp_path / "k" / "pool-0.keys"),
          "--token", "short"], "use at least 16"),
        (["agents", "--connect", "tcp://h:1", "--keys", str(tmp_path / "k" / "pool-0.keys"),
          "--max-epsilon", "-1"], "max-epsilon"),
        (["keys", "/proc/no/such/dir", "--agents", "100"], "cannot write keys there"),
        (["keys", str(tmp_path / "k2"), "--agents", "many"], "--agents"),
        (["bench", "--sizes", "abc"], "expected positive integers"),
        (["summary", str(tmp_path / "typo_dir")], "not a results directory"),
        (["run", "demo", "--set", "params.K=3", "--set", "protocol=ldp_kwiksort_rr"],
         "[params] K: not a parameter of any protocol of this scenario"),
        (["run", "demo", "--set", "params.epsilom=1"], "did you mean 'epsilon'?"),
    ]
    for args, needle in cases:
        res = cli(*args)
        assert res.returncode in (1, 2), (args, res.returncode, res.stderr)
        assert needle in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr, (args, res.stderr)
    assert not (tmp_path / "typo_dir").exists()


def test_result_files_are_readable_by_others(tiny_run):
    _, out, _, _ = tiny_run
    for name in ("results.jsonl", "summary.csv", "scenario.json"):
        assert (out / name).stat().st_mode & 0o777 == 0o644, name


def test_version_and_help_import_no_family():
    """``ldpsim --version`` / ``--help`` stay fast: the CLI module imports no protocol family, no
    scipy and no ``importlib.metadata`` (about 13 ms, which reads the plugin families' entry
    points: the registry is built on first use)."""
    code = ("import sys, ldpsim.simulator.cli; "
            "print(sorted(m for m in sys.modules if m in ('scipy', 'importlib.metadata') "
            "or m.startswith("
            "('ldpsim.protocols.rank', 'ldpsim.protocols.safari', 'ldpsim.protocols.ethics', "
            "'ldpsim.protocols.truth', 'ldpsim.protocols.vote'))))")
    res = python_c(code)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr
    from ldpsim.simulator import __version__

    assert cli("--version").stdout.strip().endswith(__version__)


#: the rooms the command line imports per command, inside its functions: together they take
#: about 0.27 s to import on a 2-core machine, more than the command line itself (0.18-0.26 s
#: with numpy, ZeroMQ and the sessions), and ``ldpsim --help``, ``list``, ``keys`` and
#: ``agents`` never use them
LAZY_ROOMS = ("ldpsim.simulator.scenario", "ldpsim.simulator.results", "ldpsim.simulator.sweep",
              "ldpsim.simulator.audit", "ldpsim.simulator.bench")


def test_the_command_line_imports_a_commands_rooms_only_when_it_runs():
    """The imports inside ``simulator/cli.py``'s functions are what this measures: importing
    the command line loads none of the scenario, results, sweep, audit and bench rooms (every
    other import of it sits at the top of the module). The time they save is measured here, so
    that a lazy import that saves nothing shows."""
    code = ("import sys, time; t = time.perf_counter(); import ldpsim.simulator.cli; "
            "a = time.perf_counter() - t; "
            f"print(sorted(m for m in sys.modules if m.startswith({LAZY_ROOMS!r}))); "
            "import importlib; t = time.perf_counter(); "
            f"[importlib.import_module(m) for m in {LAZY_ROOMS!r}]; "
            "import ldpsim.simulator.sweep.runner, ldpsim.simulator.audit.audit_harness; "
            "print(f'{a:.3f} {time.perf_counter() - t:.3f}')")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-2] == "[]", res.stdout
    cli_s, rooms_s = map(float, lines[-1].split())
    print(f"the command line {cli_s * 1000:.0f} ms; "
          f"its commands' rooms {rooms_s * 1000:.0f} ms more")


#: the modules of ``ldpsim bench``'s parts, which ``simulator/bench/__init__.py`` imports when a
#: part runs: ``ldpsim list`` imports the bench package for the scenarios' durations only
BENCH_PARTS = tuple(f"ldpsim.simulator.bench.{m}" for m in (
    "headline", "calibrate", "deployment", "audit", "hardening", "keys", "kernels", "peers",
    "cluster"))


def test_list_imports_no_part_of_the_bench_and_no_sweep():
    """``ldpsim list`` reads the scenarios' durations (``bench.durations``, in the bench
    package): it imports none of the bench's parts (``bench.audit`` alone brings scipy and the
    audit room) and nothing of the sweep room, which ``bench.durations`` imports only to
    measure the durations. The time they would add is measured here."""
    parts = (*BENCH_PARTS, "ldpsim.simulator.sweep")
    code = ("import sys, time; from ldpsim.simulator import cli; t = time.perf_counter(); "
            "rc = cli.main(['list']); a = time.perf_counter() - t; "
            f"print(rc, sorted(m for m in sys.modules if m.startswith({parts!r}))); "
            "import importlib; t = time.perf_counter(); "
            f"[importlib.import_module(m) for m in {BENCH_PARTS!r}]; "
            "import ldpsim.simulator.sweep.execute; "
            "print(f'{a:.3f} {time.perf_counter() - t:.3f}')")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-2] == "0 []", res.stdout[-2000:]
    list_s, parts_s = map(float, lines[-1].split())
    print(f"ldpsim list {list_s * 1000:.0f} ms; the bench's parts and the sweep "
          f"{parts_s * 1000:.0f} ms more")


HEAVY = ("matplotlib", "pandas", "scipy.stats", "scipy.special", "scipy.optimize")


@pytest.mark.parametrize("plots", ["true", "false"])
def test_run_imports_only_what_it_uses(tmp_path, plots):
    """``ldpsim run`` of a small rank scenario imports no matplotlib (one point: no figure to
    draw; or plots off), no pandas and none of scipy's heavy submodules: start-up is most of a
    small run's wall time."""
    scen = tmp_path / "s.toml"
    scen.write_text('name = "one"\nprotocol = "ldp_kwiksort_rr"\nrepeats = 1\nseed = 1\n'
                    '[data]\nkind = "mallows"\nn = 10\nm = 4\n'
                    f'[runtime]\nbackend = "inproc"\n[output]\nplots = {plots}\n')
    argv = ["run", str(scen), "--out", str(tmp_path / "out"), "--no-progress", "-q"]
    if plots == "false":  # several points, which would have figures
        argv += ["--set", "params.epsilon=[0.5, 1.0]", "--set", "repeats=2"]
    code = (f"import sys; from ldpsim.simulator import cli; rc = cli.main({argv!r}); "
            f"print(rc, sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "0 []", res.stdout + res.stderr
    assert len(read_lines(tmp_path / "out")) == (1 if plots == "true" else 4)
    assert not list((tmp_path / "out").glob("plot_*"))


def test_quiet_and_verbose(tiny_run, tmp_path):
    scen, out0, _, _ = tiny_run
    out = tmp_path / "out"
    shutil.copytree(out0, out)
    normal = cli("run", str(scen), "--out", str(out), "--no-progress")
    quiet = cli("run", str(scen), "--out", str(out), "--no-progress", "-q")
    assert normal.returncode == quiet.returncode == 0
    assert "resuming:" in normal.stderr and "scenario " in normal.stderr
    assert quiet.stderr == ""  # nothing but warnings and errors
    assert quiet.stdout == normal.stdout  # the table is the output, not a log line
    loud = cli("run", str(scen), "--out", str(out), "--no-progress", "--verbose")
    assert loud.returncode == 0 and "resuming:" in loud.stderr


def test_a_reader_that_stops_early_gets_no_traceback():
    """``ldpsim list | head -1``: the pipe closes under the command, which ends quietly."""
    done = subprocess.run(f"{sys.executable} -m ldpsim list | head -1", shell=True,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout == "protocols:\n"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_summary_errors_start_with_error(tmp_path):
    for where in (tmp_path / "nonexistent", tmp_path / "empty"):
        if where.name == "empty":
            where.mkdir()
            (where / "results.jsonl").write_text("")
        res = cli("summary", str(where))
        assert res.returncode == 1 and res.stderr.startswith("error: no results in "), \
            res.stderr
        assert len(res.stderr.splitlines()) == 1


NO_MATPLOTLIB = "note: no plots: matplotlib is not installed (pip install 'ldpsim[plot]')"


def _cli_without_matplotlib(*args: str) -> subprocess.CompletedProcess:
    """``ldpsim ARGS`` where importing matplotlib fails, as without it installed."""
    code = ("import sys; sys.modules['matplotlib'] = None; from ldpsim.simulator.cli import "
            "main; sys.exit(main(sys.argv[1:]))")
    return python_c(code, *args, timeout=120)


def test_one_pool_its_rounds_and_no_matplotlib_said_in_one_line(tmp_path):
    """One pool is "1 pool"; the rounds' costs go to per_round.csv beside summary.csv (run
    and summary write the same); without matplotlib, run and summary --plots say so in one
    line instead of drawing nothing silently."""
    out = tmp_path / "out"
    res = _cli_without_matplotlib("run", "paper002_tables3_4", "--set", "repeats=1",
                                  "--set", "params.epsilon=[0.5, 1.0]", "--set",
                                  "data.n=[10, 20]", "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert ": 8 runs, backend inproc, 1 pool, " in res.stderr  # not "1 pools"
    assert res.stderr.splitlines().count(NO_MATPLOTLIB) == 1 and "Traceback" not in res.stderr
    assert not list(out.glob("plot_*"))
    assert f"per round: {out / 'per_round.csv'}" in res.stdout
    with open(out / "per_round.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 * 2 and rows[0]["protocol"] == "dpwevote_laplace"
    assert {"bytes_up_per_agent", "bytes_down_per_agent", "report_bits", "wall_s"} <= set(rows[0])
    written = (out / "per_round.csv").read_bytes()
    (out / "per_round.csv").unlink()
    again = _cli_without_matplotlib("summary", str(out), "--plots")
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines() == [NO_MATPLOTLIB]
    assert (out / "per_round.csv").read_bytes() == written


def test_audit_and_run_sweep_a_list_of_colluders(tmp_path):
    """``--set collusion.colluders=[...]`` is a sweep for ``audit`` as for ``run``: one audited
    setting per count, the count a column of the table."""
    res = cli("audit", "audit_rank", "--set", "protocols=['ldp_kwiksort_rr']", "--set",
              "collusion.colluders=[1,5,9]", "--trials", "20", "--out", str(tmp_path / "a"),
              "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "3 settings" in res.stderr and "collusion.colluders" in res.stdout.splitlines()[0]
    records = [json.loads(line) for line in
               (tmp_path / "a" / "audit.jsonl").read_text().splitlines()]
    assert [(r["colluders"], r["point"]["collusion.colluders"]) for r in records] == [
        (1, 1), (5, 5), (9, 9)]
    res = cli("run", "audit_rank", "--set", "protocols=['ldp_kwiksort_rr']", "--set",
              "collusion.colluders=[1,5]", "--out", str(tmp_path / "r"), "--no-progress")
    assert res.returncode == 0, res.stderr
    records = read_lines(tmp_path / "r")  # (in the order the parallel runs finished)
    assert sorted(json.loads(r)["collusion"]["colluders"] for r in records) == [1, 5]


def _orphan_fork_servers() -> set[int]:
    """Fork servers whose parent is gone (adopted by init): what a program that ended without
    its teardown could leave behind."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"forkserver" in args and ppid == 1:
            found.add(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_run_ends_quickly_with_everything_written_and_nothing_left_running(tmp_path):
    """``ldpsim run`` on the processes backend skips the interpreter's teardown: its output is
    whole, its files complete, and its fork server leaves with it."""
    scen = tmp_path / "tiny.toml"
    scen.write_text(TINY.replace('backend = "inproc"', 'backend = "processes"'))
    before = _orphan_fork_servers()
    out = tmp_path / "out"
    res = cli("run", str(scen), "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith(f"summary: {out / 'summary.csv'}")  # flushed
    assert len((out / "results.jsonl").read_text().splitlines()) == TINY_RUNS
    assert (out / "summary.csv").read_text().count("\n") == TINY_POINTS + 1
    deadline = time.monotonic() + 5
    while _orphan_fork_servers() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _orphan_fork_servers() - before


def test_start_begins_the_fork_server_before_numpy(tmp_path):
    """``ldpsim run`` on the processes backend begins the curator's fork server before the
    command line imports numpy or ZeroMQ (``simulator.start``): the two start-ups overlap. The
    fork server preloads every built-in family. ``simulator/backends/__init__.py`` (the
    package of ``launch``) imports each backend's modules when it is used: none is imported
    before the fork server begins."""
    from ldpsim.protocols import BUILTIN
    from ldpsim.simulator.backends.launch import PRELOAD

    assert set(BUILTIN) <= set(PRELOAD) and "ldpsim.simulator.backends.transport" in PRELOAD
    scen = tmp_path / "s.toml"
    scen.write_text('name = "one"\nprotocol = "ldp_kwiksort_rr"\nrepeats = 1\nseed = 1\n'
                    '[data]\nkind = "mallows"\nn = 10\nm = 4\n'
                    '[runtime]\nbackend = "processes"\npools = 2\n[output]\nplots = false\n')
    argv = ["run", str(scen), "--out", str(tmp_path / "out"), "--no-progress", "-q"]
    code = ("import sys; from ldpsim.simulator.backends import launch; seen = []; "
            "orig = launch.start_fork_server; "
            "launch.start_fork_server = lambda: (seen.append(sorted("
            "m for m in ('numpy', 'zmq') if m in sys.modules)), orig()); "
            f"from ldpsim.simulator import start; rc = start.main({argv!r}); print(rc, seen)")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "0 [[]]", res.stdout + res.stderr
    assert len(read_lines(tmp_path / "out")) == 1


def test_the_fork_servers_preload_imports_no_heavy_library():
    """The fork server imports ``launch.PRELOAD`` (the transport, every built-in family) before
    the first curator: none of ``HEAVY`` (each family imports scipy's parts where it uses
    them) and not ZeroMQ's authenticator (``zmq.auth.thread``, about 30 ms: only a hosts run
    with CurveZMQ starts it, ``curve.serve_curve``)."""
    unwanted = (*HEAVY, "zmq.auth.thread")
    code = ("import importlib, sys; from ldpsim.simulator.backends.launch import PRELOAD; "
            "[importlib.import_module(m) for m in PRELOAD]; "
            f"print(sorted(m for m in sys.modules if m.startswith({unwanted!r})))")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]", res.stdout + res.stderr


def test_start_reads_where_the_runs_execute(tmp_path):
    """``simulator.start`` begins the fork server only for runs that start a curator process
    here, and reads every option of ``ldpsim run`` (so that the scenario is the positional)."""
    from ldpsim.simulator.cli import build_parser
    from ldpsim.simulator.start import run_parser, starts_curator

    def options(parser):
        return {o for a in parser._actions for o in a.option_strings
                if a.option_strings and o not in ("-h", "--help")}

    sub = next(a for a in build_parser()._actions if a.choices and "run" in a.choices)
    assert options(run_parser()) == options(sub.choices["run"])
    proc = tmp_path / "p.toml"
    proc.write_text('name = "p"\nprotocol = "ldp_kwiksort_rr"\n[data]\nkind = "mallows"\n')
    inproc = tmp_path / "i.toml"
    inproc.write_text('name = "i"\nprotocol = "ldp_kwiksort_rr"\n[runtime]\nbackend = "inproc"\n')
    assert starts_curator(["run", str(proc)])  # the default backend: processes
    assert starts_curator(["run", "--out", "x", str(proc), "-q"])
    assert starts_curator(["run", str(inproc), "--backend", "processes"])
    assert starts_curator(["run", str(inproc), "--set", "runtime.backend=processes"])
    assert not starts_curator(["run", str(inproc)])
    assert not starts_curator(["run", str(proc), "--backend", "inproc"])
    assert not starts_curator(["run", str(proc), "--set", "runtime.backend='inproc'"])
    assert not starts_curator(["run", str(proc), "--executor", "dask"])
    assert not starts_curator(["run", str(tmp_path / "missing.toml")])
    assert not starts_curator(["list"]) and not starts_curator([])



def test_start_reads_the_command_lines_own_options_before_numpy():
    """``simulator.start`` reads ``ldpsim run``'s options from the table the command line's
    parser is built from (``simulator.options``), which imports the standard library only: no
    numpy, ZeroMQ or backend before the fork server has begun."""
    code = ("import sys; from ldpsim.simulator import start; start.run_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'zmq') "
            "or m.startswith(('ldpsim.protocols', 'ldpsim.simulator.backends', "
            "'ldpsim.simulator.session', 'ldpsim.simulator.cli'))))")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]", res.stdout + res.stderr

#: a module planted in the directory ``ldpsim run`` starts in: it leaves a marker file there
#: when imported, then hands over to the real module (so the run itself is not disturbed)
PLANTED = """
import importlib, os, sys
_here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(_here, "planted-" + __name__ + "-" + str(os.getpid())), "w").close()
_saved = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
try:
    sys.modules[__name__] = importlib.import_module(__name__)
finally:
    sys.path[:] = _saved
"""

#: a one-run scenario on the processes backend (a curator from the fork server, a pool)
TINY_PROCESSES = """
name = "tiny_processes"
protocols = ["ldp_kwiksort_rr"]
repeats = 1
seed = 1

[data]
kind = "mallows"
n = 50
m = 4
theta = 0.5

[params]
epsilon = 1.0

[runtime]
backend = "processes"
pools = 1
timeout_s = 30

[output]
plots = false
"""


@pytest.mark.parametrize("how", ["command", "module"])
def test_attack_modules_in_the_start_directory_are_never_imported(tmp_path, how):
    """A folder of downloaded scenarios holding ``msgpack.py``, ``json.py`` and ``zmq.py``:
    ``ldpsim run`` started there (the installed command, or ``python -m ldpsim``) imports
    none of them in any of its processes (the command line, the fork server and the curator
    it forks, the pools), and the run succeeds."""
    start = tmp_path / "downloads"
    start.mkdir()
    for name in ("msgpack", "json", "zmq"):
        (start / f"{name}.py").write_text(PLANTED)
    (start / "tiny.toml").write_text(TINY_PROCESSES)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["TMPDIR"] = str(tmp_path)
    cmd = ([str(Path(sys.executable).parent / "ldpsim")] if how == "command"
           else [sys.executable, "-m", "ldpsim"])
    res = subprocess.run([*cmd, "run", "tiny.toml", "--out", str(tmp_path / "out"), "-q"],
                         cwd=start, env=env, capture_output=True, text=True, timeout=60)
    planted = sorted(p.name for p in start.glob("planted-*"))
    assert planted == [], f"imported from the start directory: {planted}"
    assert res.returncode == 0, res.stderr
    assert len(read_lines(tmp_path / "out")) == 1


def test_a_run_leaves_no_multiprocessing_directory_behind(tmp_path):
    """The fork server's socket lives in a ``pymp-*`` directory of the temporary folder: it
    is gone once ``ldpsim run`` has ended (the command ends without the interpreter's
    teardown, which would have removed it)."""
    (tmp_path / "tiny.toml").write_text(TINY_PROCESSES)
    spool = tmp_path / "tmp"
    spool.mkdir()
    env = dict(os.environ, TMPDIR=str(spool))
    res = subprocess.run([str(Path(sys.executable).parent / "ldpsim"), "run", "tiny.toml",
                          "--out", "out", "-q"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in spool.iterdir()) == []


def test_out_naming_a_file_is_one_line_of_error(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "taken").write_text("not a directory\n")
    res = cli("run", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "taken"))
    assert res.returncode != 0
    assert res.stderr.startswith("error: --out ") and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert (tmp_path / "taken").read_text() == "not a directory\n"


@pytest.mark.parametrize("args", ["run --help", "run --help | head -1", "run -h | head -1"])
def test_run_help_prints_no_usage_errors(args):
    """``ldpsim run --help | head``: the help, and nothing on stderr (the fork server's hint
    parser does not complain that no scenario was named)."""
    done = subprocess.run(f"{sys.executable} -m ldpsim {args}", shell=True,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.startswith("usage: ldpsim run")
    assert done.stderr == "", done.stderr


def test_the_fork_servers_import_path_is_the_parents_with_the_implicit_directory_last(
        monkeypatch, tmp_path):
    """An interactive parent's implicit current directory (``""``) comes after the standard
    library and the installed packages: a user's protocol module there stays importable, a
    ``json.py`` there replaces nothing; the command line's parent has none."""
    from ldpsim.simulator.backends import launch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", "/lib/python", "/site-packages"])
    path = launch.import_path()
    assert path[1:] == ["/lib/python", "/site-packages", str(tmp_path)]
    monkeypatch.setattr(sys, "path", ["/bin", "/lib/python", "/site-packages"])
    assert str(tmp_path) not in launch.import_path()


def test_durations_measured_whole_come_from_what_reproduce_wrote(tmp_path):
    """``durations --from DIR``: a scenario ``ldpsim reproduce`` finished at its shipped
    settings is timed whole, with the jobs it ran with; one run with other settings, failed or
    unknown is not taken."""
    import json

    from ldpsim.simulator.bench.durations import from_reproduce

    runs = len(sc.load(ROOT / "scenarios" / "paper000_theta.toml").runs())
    paper = tmp_path / "paper000"
    paper.mkdir()
    (paper / "reproduce.json").write_text(json.dumps([
        {"name": "paper000_theta", "status": "done", "runs": runs, "seconds": 12.34},
        {"name": "paper000_fig5_epsilon", "status": "done", "runs": 3, "seconds": 1.0},
        {"name": "paper000_turkdots", "status": "failed", "runs": 5430, "seconds": 2.0},
        {"name": "paper000_nonesuch", "status": "done", "runs": 1, "seconds": 1.0}]))
    got = from_reproduce(tmp_path, 2)
    assert list(got) == ["paper000_theta"]
    assert got["paper000_theta"] == {"runs": runs, "seconds": 12.3, "sampled": runs,
                                     "cores": got["paper000_theta"]["cores"], "jobs": 2,
                                     "whole": True}
