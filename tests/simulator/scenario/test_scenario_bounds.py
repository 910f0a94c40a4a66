"""Upper bounds of scenario values: a value just inside a bound validates, one just outside fails
at validation time (before any process starts) with an error naming the key and the allowed
range. Colluder counts and ids are checked again against n once the data set is known.
"""

from __future__ import annotations

import json
import math

import pytest
from ldpsim.protocols import DATA_KINDS
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.simulator import cli
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario import tables
from ldpsim.simulator.scenario.scenario import ScenarioError

from tests.simulator.scenario.test_scenario import DEMO_RAW  # scenarios/demo.toml as a dict


def demo() -> dict:
    return json.loads(json.dumps(DEMO_RAW))


def test_the_bounds():
    assert MAX_AGENTS == 10**11  # memory bounds a run (issue 52); ids stay below 2^40
    assert tables.MAX_REPEATS == 10**6
    assert tables.MAX_TIMEOUT_S == 86400
    assert tables.MAX_FRAME_BYTES == 1 << 31
    assert tables.MAX_ENVELOPE_BYTES == 1 << 30
    assert tables.MAX_BATCH == 1 << 20


# (override key, a value just inside the bound, a value just outside, needles of the error)
BOUNDS = [
    ("data.n", MAX_AGENTS, MAX_AGENTS + 1,
     [f"[data] n: got {MAX_AGENTS + 1}; allowed: an integer >= 1 and <= 100000000000"]),
    ("data.n", 1, 0, ["[data] n: got 0; allowed: an integer >= 1 and <= 100000000000"]),
    ("repeats", 10**6, 10**6 + 1,
     ["repeats: got 1000001; allowed: an integer >= 1 and <= 1000000"]),
    ("runtime.timeout_s", 86400, 86400.5,
     ["[runtime] timeout_s: got 86400.5; allowed: a number > 0 and <= 86400"]),
    ("runtime.max_frame_bytes", 1 << 31, (1 << 31) + 1,
     ["[runtime] max_frame_bytes: got 2147483649; allowed: an integer >= 1024 and "
      "<= 2147483648"]),
    ("runtime.max_envelope_bytes", 1 << 30, (1 << 30) + 1,
     ["[runtime] max_envelope_bytes: got 1073741825; allowed: an integer >= 64 and "
      "<= 1073741824"]),
    ("runtime.batch", 1 << 20, (1 << 20) + 1,
     ['[runtime] batch: got 1048577; allowed: "auto" or an integer >= 1 and <= 1048576']),
    ("collusion.colluders", MAX_AGENTS - 1, MAX_AGENTS,
     [f"[collusion] colluders: got {MAX_AGENTS}; allowed:", "< 100000000000"]),
    ("collusion.colluders", [0, MAX_AGENTS - 1], [0, MAX_AGENTS],
     [f"[collusion] colluders: got [0, {MAX_AGENTS}]; allowed:", "< 100000000000"]),
    ("collusion.agents", [0, MAX_AGENTS - 1], [0, MAX_AGENTS],
     [f"[collusion] agents: got [0, {MAX_AGENTS}]; allowed:", "< 100000000000"]),
]


@pytest.mark.parametrize("key, inside, outside, needles", BOUNDS,
                         ids=[f"{b[0]}={b[2]}" for b in BOUNDS])
def test_just_inside_validates_just_outside_fails(key, inside, outside, needles):
    # the largest envelope needs a frame that holds it
    extra = [f"runtime.max_frame_bytes={1 << 31}"] if key == "runtime.max_envelope_bytes" else []
    s = sc.load(raw=demo(), overrides=[*extra, f"{key}={json.dumps(inside)}"])
    section, _, name = key.rpartition(".")
    if key == "collusion.colluders" and isinstance(inside, list):
        name = "sweep"  # a list of colluders is held as the sweep it makes
    elif key == "collusion.agents":
        name = "colluders"  # the ids, as the runs receive them
    got = getattr(s, section) if section else getattr(s, name)
    if section:
        got = got[name]
    assert got == inside
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=demo(), overrides=[*extra, f"{key}={json.dumps(outside)}"])
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("key, value, needle", [
    ("data.n", 10**12, "[data] n: got 1000000000000; allowed:"),
    ("data.n", "[100, 1000000000000]", "[data] n: got 1000000000000; allowed:"),
    ("data.n", 10**400, "[data] n: got 1000"),
    ("data.n", "inf", "[data] n: got inf; allowed:"),
    ("data.n", "nan", "[data] n: got nan; allowed:"),
    ("data.theta", 10**400, "[data] theta: got 1000"),
    ("repeats", 10**9, "repeats: got 1000000000; allowed:"),
    ("runtime.timeout_s", 1e300, "[runtime] timeout_s: got 1e+300; allowed:"),
    ("runtime.timeout_s", "inf", "[runtime] timeout_s: got inf; allowed:"),
    ("runtime.max_frame_bytes", 2**62, f"[runtime] max_frame_bytes: got {2**62}; allowed:"),
    ("runtime.max_envelope_bytes", 2**62, "[runtime] max_envelope_bytes: got"),
    ("runtime.batch", 2**62, f"[runtime] batch: got {2**62}; allowed:"),
    ("collusion.colluders", "[100000000000000000000]",
     "[collusion] colluders: got [100000000000000000000]; allowed:"),
    ("collusion.colluders", 10**20, "[collusion] colluders: got 100000000000000000000; "),
    ("collusion.colluders", "[1.0]", "[collusion] colluders: got [1.0]; allowed:"),
])
def test_far_outside_fails_with_the_key(key, value, needle):
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=demo(), overrides=[f"{key}={value}"])
    assert needle in str(e.value)


@pytest.mark.parametrize("kind", sorted(k for k, d in DATA_KINDS.items() if "n" in d.params))
def test_every_data_kind_bounds_n(kind):
    spec = DATA_KINDS[kind].params["n"]
    assert spec.high == MAX_AGENTS
    assert spec.check(MAX_AGENTS, "[data] n") == MAX_AGENTS
    with pytest.raises(ParamError,
                       match=r"\[data\] n: got 100000000001; allowed: .*<= 100000000000"):
        spec.check(MAX_AGENTS + 1, "[data] n")


def test_huge_numbers_are_param_errors_not_crashes():
    for spec in (ParamSpec("x", "int", low=0, high=10), ParamSpec("x", "float", low=0, high=10),
                 ParamSpec("x", "int_or_auto", low=1, high=10)):
        for value in (10**400, -(10**400), math.inf, -math.inf, math.nan):
            with pytest.raises(ParamError, match="x: got"):
                spec.check(value, "x")
    assert ParamSpec("x", "int").check(10**400, "x") == 10**400  # no bound: taken as is
    assert ParamSpec("x", "int", high=10).check(10.0, "x") == 10


def test_frame_must_hold_an_envelope():
    ok = sc.load(raw=demo(), overrides=["runtime.max_frame_bytes=4096",
                                        "runtime.max_envelope_bytes=4096"])
    assert ok.runtime["max_frame_bytes"] == ok.runtime["max_envelope_bytes"] == 4096
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=demo(), overrides=["runtime.max_frame_bytes=4096",
                                       "runtime.max_envelope_bytes=4097"])
    msg = str(e.value)
    assert "[runtime] max_envelope_bytes: got 4097; allowed:" in msg
    assert "max_frame_bytes (4096)" in msg
    # the defaults hold each other, and so do the two largest values
    s = sc.load(raw=demo(), overrides=[f"runtime.max_frame_bytes={1 << 31}",
                                       f"runtime.max_envelope_bytes={1 << 30}"])
    assert s.runtime["max_envelope_bytes"] < s.runtime["max_frame_bytes"]
    with pytest.raises(ScenarioError, match="max_frame_bytes"):
        sc.load(raw=demo(), overrides=["runtime.max_frame_bytes=1024"])  # default envelope 1 MiB


# --------------------------------------------------------------------------------------------
# Colluders against n (known once the data set is built, in check_runs)


def runs(*overrides: str, **data) -> list[sc.RunSpec]:
    raw = demo()
    raw["data"].update(data)
    return sc.load(raw=raw, overrides=list(overrides)).runs()


def _coalition(colluders) -> str:
    """The override of a coalition: a list is agent ids (``agents``), else ``colluders``."""
    key = "agents" if isinstance(colluders, list) else "colluders"
    return f"collusion.{key}={json.dumps(colluders)}"


@pytest.mark.parametrize("colluders", [0, 9, 0.5, 0.0, [], [0, 9], list(range(10))])
def test_colluders_within_n_pass_check_runs(colluders):
    sc.check_runs(runs(_coalition(colluders), n=10))


@pytest.mark.parametrize("colluders, needles", [
    (10, ["[collusion] colluders: got 10; allowed: a count of at most n - 1 = 9", "n = 10"]),
    (11, ["[collusion] colluders: got 11; allowed:"]),
    ([10], ["[collusion] agents: got agent id 10; allowed: ids in [0, 10)", "n = 10"]),
    ([3, 12], ["[collusion] agents: got agent id 12; allowed: ids in [0, 10)"]),
])
def test_colluders_beyond_n_fail_in_check_runs(colluders, needles):
    specs = runs(_coalition(colluders), n=10)  # valid in isolation
    with pytest.raises(ScenarioError) as e:
        sc.check_runs(specs)
    for needle in needles:
        assert needle in str(e.value)


def test_colluders_against_every_n_of_a_sweep():
    specs = runs("collusion.colluders=15", n=[20, 10])
    with pytest.raises(ScenarioError) as e:
        sc.check_runs(specs)
    assert "[collusion] colluders: got 15" in str(e.value) and "n = 10" in str(e.value)
    assert "'data.n': 10" in str(e.value)
    sc.check_runs(runs("collusion.colluders=9", n=[20, 10]))


def test_colluder_ids_against_a_file_loader(tmp_path):
    f = tmp_path / "tiny.soc"
    f.write_text("# NUMBER ALTERNATIVES: 3\n2: 1,2,3\n1: 3,2,1\n")  # 3 agents
    raw = demo()
    raw["data"] = {"kind": "preflib", "path": str(f)}
    raw["runtime"]["pools"] = 1
    for ok in ([0, 2], 2, 0.5):
        raw["collusion"] = {"agents" if isinstance(ok, list) else "colluders": ok}
        sc.check_runs(sc.load(raw=raw).runs())
    raw["collusion"] = {"agents": [2, 3]}
    with pytest.raises(ScenarioError, match=r"\[collusion\] agents: got agent id 3; "
                                            r"allowed: ids in \[0, 3\)"):
        sc.check_runs(sc.load(raw=raw).runs())


# --------------------------------------------------------------------------------------------
# The command line: exit status 2 and the key in the message, before any process starts


@pytest.fixture
def no_runs(monkeypatch):
    """Fail the test if the command line gets as far as running anything."""
    from ldpsim.simulator.sweep import runner

    def refuse(*a, **k):
        raise AssertionError("a run was started")

    monkeypatch.setattr(runner, "run_scenario", refuse)


@pytest.mark.parametrize("setting, needle", [
    ("data.n=1000000000000", "[data] n: got 1000000000000; allowed: an integer >= 1 and "
                             "<= 100000000000"),
    ("repeats=1000000000", "repeats: got 1000000000; allowed:"),
    ("runtime.timeout_s=1e300", "[runtime] timeout_s: got 1e+300; allowed:"),
    (f"runtime.max_frame_bytes={2**62}", "[runtime] max_frame_bytes: got"),
    ("runtime.batch=1048577", "[runtime] batch: got 1048577; allowed:"),
    ("collusion.colluders=[100000000000000000000]", "[collusion] colluders: got"),
])
def test_cli_rejects_out_of_bounds_values(setting, needle, tmp_path, capsys, no_runs):
    out = tmp_path / "out"
    rc = cli.main(["run", "scenarios/demo.toml", "--set", setting, "--out", str(out),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_cli_rejects_colluders_beyond_n_before_any_process(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "scenarios/demo.toml", "--set", "data.n=20", "--set",
                   "collusion.agents=[20]", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "[collusion] agents: got agent id 20; allowed: ids in [0, 20)" in err
    assert not (out / "results.jsonl").exists()
