"""Scenario files: loading, ``--set`` overrides, sweep expansion, run keys, error messages (the
``ldpsim`` command line that runs them is tested in ``tests/test_cli.py``).

Everything here is exact and fast: expansion and validation tests need no process.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS
from ldpsim.protocols.datasets import data_dir, dataset_of, named
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.tables import ScenarioError, ScenarioWarning

from tests.conftest import ROOT

SCEN_DIR = ROOT / "scenarios"
SCENARIO_FILES = sorted(SCEN_DIR.glob("*.toml"))
FILE_DATA_KINDS = {k for k, d in DATA_KINDS.items() if "path" in d.params}  # file loaders
ALL_PROTOCOLS = ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr", "ldp_kwiksort_lap"]

# scenarios/demo.toml, key for key (test_demo_file_is_the_raw_dict checks they agree).
DEMO_RAW = {
    "name": "demo",
    "description": "Quick tour: LDP-KwikSort:RR against KwikSort and DP-KwikSort on generated "
                   "Mallows data",
    "protocols": ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr"],
    "repeats": 3,
    "seed": 1,
    "data": {"kind": "mallows", "n": 2000, "m": 10, "theta": 0.5},
    "params": {"epsilon": [0.5, 1.0, 2.0], "queries": "auto"},
    "runtime": {"backend": "processes", "pools": 2, "timeout_s": 30},
    "collusion": {"colluders": 0.0, "curator": True},
}

# The scenario shape of ../shared/DESIGN.md, verbatim ("these must work as written").
DESIGN_TOML = """
name = "demo"
protocol = "ldp_kwiksort_rr"     # or protocols = ["kwiksort", "ldp_kwiksort_rr"] to compare
repeats = 5                      # independent repetitions per parameter point
seed = 1

[data]                           # a generator or a loader, by name, with its arguments
kind = "mallows"
n = 2000
m = 10
theta = 0.5                      # `path = "..."` for file loaders

[params]                         # protocol parameters; a list here or in [data] is a sweep axis
epsilon = [0.5, 1.0, 2.0]
queries = "auto"

[runtime]
backend = "processes"            # "inproc" | "processes" | "hosts"
pools = 2
timeout_s = 30

[collusion]
colluders = 0.0                  # fraction, count, or list of agent ids
curator = true                   # the curator is in the coalition (the LDP threat model);
                                 # false models a trusted curator (central DP)
"""


def demo(**changes) -> dict:
    """A deep copy of DEMO_RAW with top-level keys replaced (None deletes the key)."""
    raw = json.loads(json.dumps(DEMO_RAW))
    for k, v in changes.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = v
    return raw


def raw_of(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def protocols_of(raw: dict) -> list[str]:
    p = raw.get("protocols", raw.get("protocol"))
    return list(dict.fromkeys(p if isinstance(p, list) else [p]))


def expected_run_count(raw: dict) -> int:
    """protocols × data grid × (the protocol's own) params grid × colluders sweep × repeats,
    computed from raw; the keys of a ``[sweep] paired`` group are one axis."""
    groups = raw.get("sweep", {}).get("paired", [])
    paired = {k for g in groups for k in g}
    data_axes = [len(v) for k, v in raw["data"].items()
                 if isinstance(v, list) and f"data.{k}" not in paired]
    colluders = raw.get("collusion", {}).get("colluders")
    data_axes += [len(colluders) if isinstance(colluders, list) else 1]
    data_axes += [len(v) for k, v in raw.get("deployment", {}).items()
                  if isinstance(v, list) and f"deployment.{k}" not in paired]
    section = {f"{t}.{k}": v for t in ("data", "params", "deployment")
               for k, v in raw.get(t, {}).items()}
    data_axes += [len(section[g[0]]) for g in groups]
    total = 0
    for p in protocols_of(raw):
        accepted = PROTOCOLS[p].params
        axes = data_axes + [len(v) for k, v in raw.get("params", {}).items()
                            if k in accepted and isinstance(v, list)
                            and f"params.{k}" not in paired]
        total += math.prod(axes) * raw.get("repeats", 1)
    return total


def expected_point(spec: sc.RunSpec, raw: dict) -> dict:
    point = {"protocol": spec.protocol}
    accepted = PROTOCOLS[spec.protocol].params
    for k, v in raw.get("params", {}).items():
        if k in accepted and isinstance(v, list):
            point[f"params.{k}"] = spec.params[k]
    for k, v in raw["data"].items():
        if isinstance(v, list):
            point[f"data.{k}"] = spec.data[k]
    if isinstance(raw.get("collusion", {}).get("colluders"), list):
        point["collusion.colluders"] = spec.collusion["colluders"]
    for k, v in raw.get("deployment", {}).items():
        if isinstance(v, list):
            point[f"deployment.{k}"] = spec.deployment[k]
    return point


def missing_data_file(raw: dict) -> str | None:
    """The data path (a named data set's, in the data folder) when the file is absent, else
    None."""
    data = raw["data"]
    if data.get("kind") in FILE_DATA_KINDS:
        rel = named(data["path"])
        where = data_dir() / rel if rel is not None else ROOT / data["path"]
        if not where.exists():
            return str(where)
    return None


def thin(specs: list[sc.RunSpec]) -> list[sc.RunSpec]:
    """One spec per (protocol, data, params other than epsilon).

    check_runs resolves each distinct (protocol, params, data) against the built data set; for
    file data that re-reads the file every time. Whether a run is valid for its data depends on
    the data and ``queries`` (<= C(m,2)), not on epsilon (checked on its own by load), so this
    subset checks exactly the same constraints, fast.
    """
    seen, out = set(), []
    for s in specs:
        sig = json.dumps([s.protocol, s.data, {k: v for k, v in s.params.items()
                                               if k != "epsilon"}], sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            out.append(s)
    return out


# --------------------------------------------------------------------------------------------
# The scenario files


PAPER_FILES = {  # file stem -> number of runs
    "demo": 21,
    "paper000_fig3_4_queries": 2 * 4 * 6 * 30,
    "paper000_fig5_epsilon": 3 * (1 + 3 * 11) * 30,
    "paper000_fig6_agents": 7 * 3 * 3 * 4 * 30,
    "paper000_theta": 3 * 4 * 30,
    "paper000_table3_time": 5 * 4 * 5,
    "paper000_sushi": (1 + 12 + 2 * 12 * 7) * 30,
    "paper000_turkdots": (1 + 12 + 2 * 12 * 7) * 30,
    "paper000_turkpuzzle": (1 + 12 + 2 * 12 * 7) * 30,
}


def test_scenario_catalogue_is_complete():
    assert set(PAPER_FILES) <= {f.stem for f in SCENARIO_FILES}


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.name)
def test_scenario_file_loads_and_expands(path):
    raw = raw_of(path)
    s = sc.load(path)
    assert s.name == raw.get("name", path.stem) == path.stem
    desc = raw.get("description", "")
    assert isinstance(desc, str) and desc and "\n" not in desc
    assert s.protocols == protocols_of(raw)
    for k, v in [*raw["data"].items(), *raw.get("params", {}).items()]:
        if isinstance(v, list):
            assert len(set(map(json.dumps, v))) == len(v), f"{path.name}: repeated {k} value"
    specs = s.runs()
    assert len(specs) == expected_run_count(raw)
    if path.stem in PAPER_FILES:
        assert len(specs) == PAPER_FILES[path.stem]
    assert len({x.key for x in specs}) == len(specs)
    for x in specs:
        assert x.scenario == path.stem
        assert x.point == expected_point(x, raw)
        assert set(x.params) <= set(PROTOCOLS[x.protocol].params)
        assert 0 <= x.repeat < s.repeats
        assert x.runtime["backend"] == raw["runtime"]["backend"]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.name)
def test_scenario_file_check_runs(path, monkeypatch):
    raw = raw_of(path)
    missing = missing_data_file(raw)
    if missing:
        pytest.skip(f"data file {missing} not present (loading is tested without it)")
    monkeypatch.chdir(ROOT)  # a plain data path is relative to the working directory
    sc.check_runs(thin(sc.load(path).runs()))


#: the source papers by the number their scenario files carry (paperNNN_*.toml)
CITATIONS = {"000": "Yan, Li & Liu, 2020", "001": "Sun et al., 2018",
             "002": "Yan, Liu & Liu, 2018", "003": "Cheng et al., 2021",
             "004": "Wang et al., 2019"}


@pytest.mark.parametrize("path", [f for f in SCENARIO_FILES if f.stem.startswith("paper")],
                         ids=lambda p: p.name)
def test_paper_file_descriptions(path):
    raw = raw_of(path)
    desc = raw["description"]
    paper = path.stem[len("paper"):len("paper") + 3]  # paper002_... describes paper 002
    assert CITATIONS[paper] in desc and any(w in desc for w in ("Fig.", "Figs.", "Table", "Sec."))
    if raw["data"]["kind"] in FILE_DATA_KINDS:
        assert "--set data.path=" in desc
        assert raw["data"]["path"].startswith("data:")  # a data set of the catalogue
        assert dataset_of(raw["data"]["path"]) is not None


def test_paper_files_use_the_papers_settings():
    f34 = raw_of(SCEN_DIR / "paper000_fig3_4_queries.toml")
    m = f34["data"]["m"]
    assert f34["params"]["queries"] == [1, 2, 3, 4, m + 1, math.comb(m, 2)]
    assert f34["params"]["epsilon"] == [1.0, 2.0, 4.0, 10.0]
    assert f34["protocols"] == ["ldp_kwiksort_rr", "ldp_kwiksort_lap"]
    assert f34["repeats"] == 30 and f34["runtime"]["backend"] == "inproc"

    f5 = raw_of(SCEN_DIR / "paper000_fig5_epsilon.toml")
    assert f5["params"]["epsilon"] == [0.1] + [x / 2 for x in range(1, 11)]
    assert (f5["data"]["n"], f5["data"]["m"], f5["data"]["theta"]) == (5000, 15,
                                                                     [0.25, 0.5, 0.75])
    assert f5["protocols"] == ALL_PROTOCOLS and f5["params"]["queries"] == "auto"

    f6 = raw_of(SCEN_DIR / "paper000_fig6_agents.toml")
    assert f6["data"]["n"] == [100, 500, 1000, 2500, 5000, 7500, 10000]
    assert f6["data"]["m"] == [15, 30, 45] and f6["data"]["theta"] == [0.25, 0.5, 0.75]
    assert f6["params"]["epsilon"] == 2.0 and f6["protocols"] == ALL_PROTOCOLS

    th = raw_of(SCEN_DIR / "paper000_theta.toml")
    assert (th["data"]["n"], th["data"]["m"], th["data"]["theta"]) == (5000, 45,
                                                                     [0.25, 0.5, 0.75])
    assert th["params"]["epsilon"] == 2.0 and th["protocols"] == ALL_PROTOCOLS

    t3 = raw_of(SCEN_DIR / "paper000_table3_time.toml")
    assert t3["data"]["m"] == [5, 10, 15, 30, 45] and t3["data"]["n"] == 5000
    assert t3["runtime"]["backend"] == "processes" and t3["repeats"] == 5
    assert t3["params"] == {"epsilon": 2.0, "queries": "auto"}

    for stem, m in (("paper000_sushi", 10), ("paper000_turkdots", 4),
                    ("paper000_turkpuzzle", 4)):
        r = raw_of(SCEN_DIR / f"{stem}.toml")
        assert r["protocols"] == ALL_PROTOCOLS
        assert r["params"]["queries"] == ["auto", 1, 2, 3, 4, m + 1, math.comb(m, 2)]
        assert {1.0, 2.0, 4.0, 10.0} <= set(r["params"]["epsilon"])
        assert set(f5["params"]["epsilon"]) <= set(r["params"]["epsilon"])


# --------------------------------------------------------------------------------------------
# The DESIGN shape, as written


def test_demo_file_is_the_raw_dict():
    assert raw_of(SCEN_DIR / "demo.toml") == DEMO_RAW


def test_every_key_of_the_design_shape_works_as_written():
    s = sc.load(raw=demo())
    assert s.name == "demo" and s.raw["description"] == DEMO_RAW["description"]
    assert s.protocols == ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr"]
    assert (s.repeats, s.seed) == (3, 1)
    assert s.data == {"kind": "mallows", "n": 2000, "m": 10, "theta": 0.5}
    assert s.params == {"epsilon": [0.5, 1.0, 2.0], "queries": "auto"}
    rt = s.runtime
    assert (rt["backend"], rt["pools"], rt["timeout_s"]) == ("processes", 2, 30.0)
    assert isinstance(rt["timeout_s"], float)
    assert (rt["agent_mode"], rt["batch"], rt["faults"]) == ("batched", "auto", [])
    assert s.collusion == {"colluders": 0.0, "curator": True, "save_view": False,
                           "attacks": False, "attack_targets": 200}
    assert s.output == {"dir": "", "plots": True, "per_round": True}
    specs = s.runs()
    assert len(specs) == 3 + 3 * 3 + 3 * 3
    rr = [x for x in specs if x.protocol == "ldp_kwiksort_rr"]
    assert {x.params["epsilon"] for x in rr} == {0.5, 1.0, 2.0}
    assert all(x.params["queries"] == "auto" for x in rr)
    cfg = rr[0].config()
    assert cfg["protocol"] == "ldp_kwiksort_rr" and cfg["pools"] == 2
    assert cfg["data"] == DEMO_RAW["data"]
    assert cfg["collusion"] == {"colluders": 0.0, "curator": True}
    assert cfg["faults"] == [] and cfg["seed"] == rr[0].seed


def test_design_md_scenario_verbatim():
    s = sc.load(raw=tomllib.loads(DESIGN_TOML))
    assert s.protocols == ["ldp_kwiksort_rr"]
    specs = s.runs()
    assert len(specs) == 3 * 5
    assert {x.point["params.epsilon"] for x in specs} == {0.5, 1.0, 2.0}
    assert sorted({x.repeat for x in specs}) == [0, 1, 2, 3, 4]


def test_optional_keys_of_the_readme():
    raw = demo(output={"dir": "results/x", "plots": False})
    raw["runtime"].update(agent_mode="exact", batch=128, endpoint="tcp://*:6000",
                          token="a token of 16+ chars",
                          max_frame_bytes=1 << 20, max_envelope_bytes=4096, progress=False,
                          faults=[{"pool": 1, "round": 0, "action": "kill"}])
    raw["collusion"] = {"agents": [3, 1, 3], "curator": False, "save_view": True}
    with pytest.warns(ScenarioWarning) as said:  # the hosts keys, on the demo's processes
        s = sc.load(raw=raw)
    assert [str(w.message).split(":")[0] for w in said] == ["[runtime] endpoint",
                                                            "[runtime] token"]
    assert s.runtime["faults"] == [{"pool": 1, "round": 0, "action": "kill"}]
    assert (s.runtime["agent_mode"], s.runtime["batch"], s.runtime["progress"]) == (
        "exact", 128, False)
    assert s.collusion == {"colluders": [1, 3], "curator": False, "save_view": True,
                           "attacks": False, "attack_targets": 200}
    assert s.output == {"dir": "results/x", "plots": False, "per_round": True}
    cfg = s.runs()[0].config()
    assert cfg["faults"] == [{"pool": 1, "round": 0, "action": "kill"}]
    assert cfg["agent_mode"] == "exact" and cfg["batch"] == 128
    for colluders in (0.25, 0, 7):
        assert sc.load(raw=demo(collusion={"colluders": colluders})).collusion[
            "colluders"] == colluders
    assert sc.load(raw=demo(collusion={"agents": []})).collusion["colluders"] == []


def test_data_variants_phi_and_file_kinds():
    s = sc.load(raw=demo(data={"kind": "mallows", "n": 50, "m": 4, "phi": [0.2, 0.8]}))
    assert len(s.runs()) == 2 * (1 + 3 + 3) * 3
    for kind in ("sushi", "preflib"):
        s = sc.load(raw=demo(data={"kind": kind, "path": "x.soc", "n": [10, 20]}))
        assert {x.point["data.n"] for x in s.runs()} == {10, 20}


# --------------------------------------------------------------------------------------------
# --set overrides


def test_override_epsilon_scalar_replaces_the_sweep():
    s = sc.load(raw=demo(), overrides=["params.epsilon=1.0"])
    assert s.params["epsilon"] == 1.0
    specs = s.runs()
    assert len(specs) == 3 * 3
    for x in specs:
        assert "params.epsilon" not in x.point
        if x.protocol != "kwiksort":
            assert x.params["epsilon"] == 1.0


def test_override_from_a_file_path_and_list_value():
    s = sc.load(SCEN_DIR / "demo.toml", overrides=["params.epsilon=[0.5,1,2,4]"])
    assert s.params["epsilon"] == [0.5, 1, 2, 4]
    assert len(s.runs()) == 3 + 4 * 3 + 4 * 3
    assert s.path == str(SCEN_DIR / "demo.toml")


def test_override_data_n():
    s = sc.load(raw=demo(), overrides=["data.n=100000"])
    assert s.data["n"] == 100000
    assert all(x.data["n"] == 100000 and type(x.data["n"]) is int for x in s.runs())


@pytest.mark.parametrize("text", ['runtime.backend="inproc"', "runtime.backend='inproc'",
                                  "runtime.backend=inproc", " runtime.backend = inproc "])
def test_override_backend(text):
    s = sc.load(raw=demo(), overrides=[text])
    assert s.runtime["backend"] == "inproc"
    assert all(x.runtime["backend"] == "inproc" for x in s.runs())


def test_override_protocol_replaces_protocols():
    raw = demo()
    s = sc.load(raw=raw, overrides=["protocol=ldp_kwiksort_rr"])
    assert s.protocols == ["ldp_kwiksort_rr"] and "protocols" not in s.raw
    assert len(s.runs()) == 3 * 3
    s = sc.load(raw=raw, overrides=["protocol=kwiksort", "params={}"])
    assert s.protocols == ["kwiksort"] and "protocols" not in s.raw
    specs = s.runs()
    assert len(specs) == 3 and all(x.point == {"protocol": "kwiksort"} for x in specs)
    assert raw == DEMO_RAW  # overrides work on a copy


def test_override_protocol_kwiksort_on_a_file_with_epsilon():
    s = sc.load(raw=demo(), overrides=["protocol=kwiksort"])
    assert len(s.runs()) == 3


def test_override_protocols_replaces_protocol():
    raw = tomllib.loads(DESIGN_TOML)
    s = sc.load(raw=raw, overrides=['protocols=["kwiksort", "ldp_kwiksort_lap"]'])
    assert s.protocols == ["kwiksort", "ldp_kwiksort_lap"] and "protocol" not in s.raw
    assert len(s.runs()) == 5 + 3 * 5


def test_override_bare_words_are_strings():
    s = sc.load(raw=demo(), overrides=["name=my_run", "data.kind=mallows",
                                       "runtime.agent_mode=exact", "params.queries=auto"])
    assert (s.name, s.data["kind"], s.runtime["agent_mode"], s.params["queries"]) == (
        "my_run", "mallows", "exact", "auto")
    raw = sc.apply_overrides({}, ["data.path=/data/sushi3a.5000.10.order",
                                  "data.path2=../a=b.soc"])
    assert raw == {"data": {"path": "/data/sushi3a.5000.10.order", "path2": "../a=b.soc"}}


def test_override_typed_values_and_new_tables():
    raw = sc.apply_overrides({}, ["repeats=2", "seed=7", "collusion.curator=false",
                                  "runtime.timeout_s=1.5", "output.dir=results/x",
                                  'runtime.faults=[{pool = 0, action = "kill"}]'])
    assert raw == {"repeats": 2, "seed": 7, "collusion": {"curator": False},
                   "runtime": {"timeout_s": 1.5, "faults": [{"pool": 0, "action": "kill"}]},
                   "output": {"dir": "results/x"}}


@pytest.mark.parametrize("text, needle", [
    ("params.epsilon", "expected KEY=VALUE"),
    ("params..epsilon=1", "empty key"),
    ("=1", "empty key"),
    ("data.n.x=1", "'n' is not a table"),
])
def test_bad_override(text, needle):
    with pytest.raises(ScenarioError, match=needle) as e:
        sc.load(raw=demo(), overrides=[text])
    assert repr(text) in str(e.value)


# --------------------------------------------------------------------------------------------
# Sweep expansion and keys


def test_kwiksort_is_not_repeated_per_epsilon():
    specs = sc.load(raw=demo()).runs()
    ks = [x for x in specs if x.protocol == "kwiksort"]
    assert len(ks) == 3 and [x.repeat for x in ks] == [0, 1, 2]
    assert all(x.params == {} and x.point == {"protocol": "kwiksort"} for x in ks)
    dp = [x for x in specs if x.protocol == "dp_kwiksort"]
    assert all(x.params.keys() == {"epsilon"} for x in dp)  # queries is not dp's parameter
    assert sorted(x.point["params.epsilon"] for x in dp) == [0.5] * 3 + [1.0] * 3 + [2.0] * 3
    points = {json.dumps(x.point, sort_keys=True) for x in specs}
    assert len(points) == 1 + 3 + 3


def test_grid_expansion_counts_and_points():
    raw = demo(protocols=ALL_PROTOCOLS, repeats=2,
               data={"kind": "mallows", "n": [100, 200], "m": 5, "theta": [0.25, 0.5]},
               params={"epsilon": [1.0, 2.0], "queries": [1, 2]})
    specs = sc.load(raw=raw).runs()
    by = {p: [x for x in specs if x.protocol == p] for p in ALL_PROTOCOLS}
    assert {p: len(v) for p, v in by.items()} == {
        "kwiksort": 4 * 2, "dp_kwiksort": 4 * 2 * 2, "ldp_kwiksort_rr": 4 * 2 * 2 * 2,
        "ldp_kwiksort_lap": 4 * 2 * 2 * 2}
    assert len(specs) == expected_run_count(raw) == 88
    assert {frozenset(x.point) for x in by["kwiksort"]} == {
        frozenset({"protocol", "data.n", "data.theta"})}
    assert {frozenset(x.point) for x in by["dp_kwiksort"]} == {
        frozenset({"protocol", "data.n", "data.theta", "params.epsilon"})}
    rr_points = {json.dumps(x.point, sort_keys=True) for x in by["ldp_kwiksort_rr"]}
    assert len(rr_points) == 16
    for x in specs:
        assert x.point == expected_point(x, raw)
        assert x.data["m"] == 5 and x.data["kind"] == "mallows"
        assert x.data["n"] == x.point["data.n"] and x.data["theta"] == x.point["data.theta"]
    # every point has each repeat exactly once
    reps: dict[str, list[int]] = {}
    for x in specs:
        reps.setdefault(json.dumps(x.point, sort_keys=True), []).append(x.repeat)
    assert all(sorted(r) == [0, 1] for r in reps.values())


def test_run_seeds_are_common_per_repeat():
    specs = sc.load(raw=demo()).runs()
    seeds = {r: {x.seed for x in specs if x.repeat == r} for r in range(3)}
    assert all(len(v) == 1 for v in seeds.values())
    assert len({next(iter(v)) for v in seeds.values()}) == 3
    other = sc.load(raw=demo(seed=2)).runs()
    assert not {x.seed for x in specs} & {x.seed for x in other}
    assert all(x.scenario_seed == 1 for x in specs)


def test_keys_are_stable():
    a = sc.load(raw=demo()).runs()
    b = sc.load(SCEN_DIR / "demo.toml").runs()
    assert [x.key for x in a] == [x.key for x in b]
    # Golden values: changing the key scheme makes every existing results directory re-run.
    first = {(x.protocol, x.params.get("epsilon"), x.repeat): x.key for x in a}
    assert first[("kwiksort", None, 0)] == "09710abf7746eb1beb6e"
    assert first[("dp_kwiksort", 0.5, 0)] == "7d333cb987709d4faa9b"
    assert all(len(x.key) == 20 and int(x.key, 16) >= 0 for x in a)


def test_keys_ignore_what_does_not_change_a_run():
    base = {x.key for x in sc.load(raw=demo()).runs()}
    same = [
        demo(name="other", description="other"),
        demo(protocols=["ldp_kwiksort_rr", "dp_kwiksort", "kwiksort"]),
        demo(params={"epsilon": [2.0, 1.0, 0.5], "queries": "auto"}),
        demo(runtime={"backend": "inproc", "pools": 3, "timeout_s": 5, "batch": 7}),
        demo(output={"dir": "elsewhere", "plots": False}),
        demo(collusion={"colluders": 0.0, "curator": True, "save_view": True}),
    ]
    for raw in same:
        assert {x.key for x in sc.load(raw=raw).runs()} == base


def test_keys_separate_what_changes_a_run():
    base = sc.load(raw=demo()).runs()
    keys = {x.key for x in base}
    data2 = dict(DEMO_RAW["data"], n=2001)
    variants = [demo(seed=2), demo(data=data2), demo(collusion={"colluders": 5}),
                demo(collusion={"colluders": 0.0, "curator": False}),
                demo(runtime={"pools": 2, "faults": [{"pool": 0, "action": "silent"}]})]
    for raw in variants:
        other = {x.key for x in sc.load(raw=raw).runs()}
        assert len(other) == len(keys) and not other & keys, raw
    # queries = 1 instead of "auto" changes the LDP runs only: the others do not take queries
    q1 = sc.load(raw=demo(params={"epsilon": [0.5, 1.0, 2.0], "queries": 1})).runs()
    assert {x.key for x in q1 if x.protocol != "ldp_kwiksort_rr"} <= keys
    assert not {x.key for x in q1 if x.protocol == "ldp_kwiksort_rr"} & keys
    # more repeats keep the first ones' keys: a resumed sweep only adds runs
    more = {x.key for x in sc.load(raw=demo(repeats=5)).runs()}
    assert keys < more and len(more) == 35


def test_repeated_sweep_values_give_one_run():
    specs = sc.load(raw=demo(params={"epsilon": [1.0, 1.0]})).runs()
    assert len(specs) == 3 + 3 + 3
    assert len({x.key for x in specs}) == len(specs)


def test_keys_do_not_depend_on_number_spelling():
    a = sc.load(raw=demo(), overrides=["params.epsilon=[0.5,1.0,2.0]"]).runs()
    b = sc.load(raw=demo(), overrides=["params.epsilon=[0.5,1,2]"]).runs()
    assert [x.key for x in a] == [x.key for x in b]


# --------------------------------------------------------------------------------------------
# Errors name the key and what is allowed


ALLOWED_TOP = "allowed: agents, collusion, dask, data, deployment, description, name, output, " \
              "params, plot, protocol, protocols, published, repeats, report, runtime, seed, sweep"


@pytest.mark.parametrize("overrides, needles", [
    (["epsilon=1"], ["epsilon: unknown top-level key", ALLOWED_TOP]),
    (["data.q=1"], ["[data] q: unknown argument for kind 'mallows'",
                    "allowed: m, n, phi, theta"]),
    (["data.kind=mallow"], ["[data] kind", "'mallow'", "allowed: " + ", ".join(
        sorted(DATA_KINDS))]),
    (["protocol=kwiksort_ldp"], ["protocol", "'kwiksort_ldp'", "allowed: " + ", ".join(
        sorted(PROTOCOLS))]),
    (["params.epsilon=-1"], ["[params] epsilon: got -1; allowed: a number > 0 and <= 1000"]),
    (["params.epsilon=x"], ["[params] epsilon: got 'x'; allowed: a number > 0"]),
    (["params.epsilon=0"], ["[params] epsilon: got 0; allowed: a number > 0"]),
    (["params.epsilon=[1.0, -2.0]"], ["[params] epsilon: got -2.0; allowed: a number > 0"]),
    (["params.epsilon=[]"], ["[params] epsilon: an empty list sweeps nothing"]),
    (["params.queries=0"], ['[params] queries: got 0; allowed: "auto" or an integer >= 1']),
    (["params.queries=1.5"], ["[params] queries: got 1.5; allowed:"]),
    (["params.epsilom=1"], ["[params] epsilom: not a parameter of",
                            "allowed for kwiksort, dp_kwiksort, ldp_kwiksort_rr: "
                            "epsilon, queries"]),
    (["runtime.backend=docker"], ["[runtime] backend: got 'docker'; allowed: one of "
                                  "'inproc', 'processes', 'hosts'"]),
    (["runtime.pools=0"], ["[runtime] pools: got 0; allowed: an integer >= 1 and <= 256"]),
    (["runtime.timeout_s=0"], ["[runtime] timeout_s: got 0; allowed: a number > 0"]),
    (["runtime.backnd=inproc"], ["[runtime] backnd: unknown key; allowed: backend, pools, "
                                 "timeout_s, agent_mode"]),
    (["collusion.colluders=1.5"], ["[collusion] colluders: got 1.5; allowed: a fraction in "
                                   "[0, 1), a count (integer >= 0), or a list of them (a "
                                   "sweep); a list of agent ids goes in [collusion] agents"]),
    (["collusion.colluders=true"], ["[collusion] colluders: got True; allowed: a fraction"]),
    (["collusion.colluders=-1"], ["[collusion] colluders: got -1; allowed:"]),
    (["collusion.colluders=[1, -1]"], ["[collusion] colluders: got [1, -1]; allowed:"]),
    (["collusion.curator=1"], ["[collusion] curator: got 1; allowed: true/false"]),
    (["collusion.spies=1"], ["[collusion] spies: unknown key; allowed: curator, save_view"]),
    (['runtime.faults=[{pool = 2, action = "kill"}]'],
     ["[runtime.faults] pool: got 2; allowed: 0 .. 1 (pools = 2)"]),
    (['runtime.faults=[{pool = 0, action = "explode"}]'],
     ["[runtime.faults] action: got 'explode'; allowed: one of 'kill', 'silent', 'raise'"]),
    (["runtime.faults=[{pool = 0}]"], ["[runtime.faults] action: required; allowed: one of"]),
    (["repeats=0"], ["repeats: got 0; allowed: an integer >= 1"]),
    (["seed=-1"], ["seed: got -1; allowed: an integer >= 0"]),
    (["data.n=0"], ["[data] n: got 0; allowed: an integer >= 1"]),
    (["data.m=[4, 500]"], ["[data] m: got 500; allowed: an integer >= 2 and <= 200"]),
    (["protocols=[]"], ["protocols: must not be empty"]),
    (["data=5"], ["[data]: must be a table"]),
])
def test_errors_name_the_key_and_allowed_values(overrides, needles):
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=demo(), overrides=overrides)
    for n in needles:
        assert n in str(e.value)


def test_protocol_and_protocols_together():
    with pytest.raises(ScenarioError, match="give one of them, not both"):
        sc.load(raw=demo(protocol="kwiksort"))
    with pytest.raises(ScenarioError, match="protocol: required; allowed: " + ", ".join(
            sorted(PROTOCOLS)[:2])):
        sc.load(raw=demo(protocols=None))
    with pytest.raises(ScenarioError, match=r"\[data\] kind: required; allowed: " + ", ".join(
            sorted(DATA_KINDS)[:2])):
        sc.load(raw=demo(data={"n": 10, "m": 3}))


def test_unhashable_data_kind_is_a_scenario_error():
    with pytest.raises(ScenarioError, match=r"\[data\] kind"):
        sc.load(raw=demo(), overrides=['data.kind=["mallows"]'])


def test_file_errors():
    with pytest.raises(ScenarioError, match="scenario file not found: /no/such.toml"):
        sc.load("/no/such.toml")


def test_bad_toml(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("name = \n")
    with pytest.raises(ScenarioError, match="bad.toml: not valid TOML"):
        sc.load(f)


def test_queries_beyond_the_pairs_fail_in_check_runs():
    s = sc.load(raw=demo(), overrides=["params.queries=46"])  # valid in isolation
    with pytest.raises(ScenarioError) as e:
        sc.check_runs(s.runs())
    msg = str(e.value)
    assert "[params] queries: got 46; allowed:" in msg and "[1, 45]" in msg and "m=10" in msg
    assert "protocol ldp_kwiksort_rr" in msg
    sc.check_runs(sc.load(raw=demo(), overrides=["params.queries=45"]).runs())


def test_check_runs_pools_and_data_arguments():
    with pytest.raises(ScenarioError, match=r"\[runtime\] pools: got 5; allowed: at most the "
                                            r"number of agents \(4\)"):
        sc.check_runs(sc.load(raw=demo(), overrides=["data.n=4", "runtime.pools=5"]).runs())
    with pytest.raises(ScenarioError, match=r"\[data\] theta/phi: give exactly one"):
        sc.check_runs(sc.load(raw=demo(), overrides=["data.phi=0.5"]).runs())


@pytest.mark.parametrize("kind", ["sushi", "preflib"])
def test_missing_data_file_fails_in_check_runs(kind, tmp_path):
    missing = str(tmp_path / "nowhere" / "sushi3a.5000.10.order")
    s = sc.load(raw=demo(data={"kind": kind, "path": missing}))  # loading needs no file
    with pytest.raises(ScenarioError) as e:
        sc.check_runs(s.runs())
    assert "[data] path" in str(e.value) and missing in str(e.value)


def test_path_override_of_a_real_data_scenario(tmp_path):
    missing = str(tmp_path / "sushi.order")
    s = sc.load(SCEN_DIR / "paper000_sushi.toml", overrides=[f"data.path={missing}"])
    assert all(x.data["path"] == missing for x in s.runs())
    with pytest.raises(ScenarioError, match="file not found"):
        sc.check_runs(s.runs()[:1])


def test_file_data_n_beyond_the_file(tmp_path):
    f = tmp_path / "tiny.soc"
    f.write_text("# NUMBER ALTERNATIVES: 3\n2: 1,2,3\n1: 3,2,1\n")
    s = sc.load(raw=demo(data={"kind": "preflib", "path": str(f), "n": [2, 4]},
                         runtime={"pools": 1}))
    with pytest.raises(ScenarioError, match=r"\[data\] n: the file has 3 agents, asked for 4"):
        sc.check_runs(s.runs())
    sc.check_runs(sc.load(raw=demo(data={"kind": "preflib", "path": str(f)},
                                   runtime={"pools": 3})).runs())


def test_every_validation_error_at_once_with_the_closest_name():
    raw = demo()
    raw["protocols"] = ["ldp_kwiksort_rr"]
    raw["repeat"] = 3  # typo of repeats
    raw["data"]["m"] = 1  # below its minimum
    raw["data"]["thetta"] = 0.5
    raw["params"]["epsilom"] = 1.0
    raw["runtime"]["backnd"] = "inproc"
    raw["collusion"]["curatr"] = True
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=raw)
    msg = str(e.value)
    assert msg.startswith("6 problems in the scenario:")
    for needle in ("repeat: unknown top-level key", "did you mean 'repeats'?",
                   "[data] m: got 1", "[data] thetta: unknown argument", "did you mean 'theta'?",
                   "[params] epsilom: not a parameter", "did you mean 'epsilon'?",
                   "[runtime] backnd: unknown key", "did you mean 'backend'?",
                   "[collusion] curatr: unknown key", "did you mean 'curator'?"):
        assert needle in msg, (needle, msg)
    # one problem: the message alone, as before
    one = demo()
    one["params"]["epsilom"] = 1.0
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=one)
    assert str(e.value).startswith("[params] epsilom: not a parameter")


# -- settings by scope: a setting the run's backend does not read is said, never dropped


@pytest.mark.parametrize(("backend", "key", "value"), [
    ("processes", "data_first", True), ("inproc", "endpoint", "tcp://*:6000"),
    ("processes", "curve", "keys/curve"), ("inproc", "token", "a token of 16+ chars")])
def test_a_setting_the_backend_does_not_read_is_warned_about(backend, key, value):
    raw = {**DEMO_RAW, "runtime": {"backend": backend, key: value}}
    with pytest.warns(ScenarioWarning, match=rf"\[runtime\] {key}: not read by the "
                                                 rf"{backend} backend \("):
        sc.load(raw=raw)


@pytest.mark.parametrize(("backend", "runtime"), [
    ("hosts", {"data_first": True}), ("inproc", {"data_first": True}),
    ("processes", {"data_first": False}), ("processes", {"pools": 3, "batch": 64})])
def test_a_setting_the_backend_reads_or_left_at_its_default_is_not(backend, runtime, recwarn):
    sc.validate({**DEMO_RAW, "runtime": {"backend": backend, **runtime}})
    assert not [w for w in recwarn if issubclass(w.category, ScenarioWarning)]


def test_every_shipped_scenario_loads_without_a_warning(recwarn):
    for path in SCENARIO_FILES:
        sc.load(path)
    assert not [f"{w.message}" for w in recwarn if issubclass(w.category, ScenarioWarning)]


def test_the_cli_shows_a_scenario_warning_as_one_line(tmp_path, capsys):
    from ldpsim.simulator import cli

    assert cli.main(["run", "demo", "--backend", "inproc", "--set", "data.n=60", "--set",
                     "repeats=1", "--set", "runtime.token='a token of 16+ chars'",
                     "--no-progress", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert ("warning: [runtime] token: not read by the inproc backend (only the hosts "
            "backend's pools register with a token); the runs go on without it\n") in err


def test_a_value_is_checked_once_where_the_scenario_is_validated(monkeypatch):
    """Issue 48: ε (and every parameter and data argument) is checked, and coerced to its kind,
    once per protocol taking it, where the scenario is validated; the runs are expanded from
    that (``Scenario.params_checked``, ``data_checked``) without another check. A stored sweep
    (no checked values kept) is checked once when its runs are expanded, with the same keys."""
    from ldpsim.protocols.base import ParamSpec

    calls: list[tuple[str, object]] = []
    real = ParamSpec.check

    def counting(self, value, where):
        calls.append((where, value))
        return real(self, value, where)

    monkeypatch.setattr(ParamSpec, "check", counting)
    raw = {"protocols": ["ldp_kwiksort_rr", "rank_grr"], "repeats": 2,
           "data": {"kind": "mallows", "n": 200, "m": 5, "theta": [1, 0.5]},
           "params": {"epsilon": [1, 2.0]}}
    scen = sc.validate(raw)
    eps = [v for w, v in calls if w == "[params] epsilon"]
    theta = [v for w, v in calls if w == "[data] theta"]
    assert sorted(eps) == [1, 1, 2.0, 2.0] and sorted(theta) == [0.5, 1]  # per protocol
    assert scen.params_checked["ldp_kwiksort_rr"]["epsilon"] == [1.0, 2.0]
    assert scen.data_checked["theta"] == [1.0, 0.5]
    calls.clear()
    runs = scen.runs()
    assert [w for w, _ in calls if w in ("[params] epsilon", "[data] theta")] == []
    assert len(runs) == 2 * 2 * 2 * 2
    assert {r.params["epsilon"] for r in runs} == {1.0, 2.0}
    assert all(isinstance(r.params["epsilon"], float) for r in runs)
    stored = sc.Scenario(scen.name, None, {}, scen.protocols, scen.repeats, scen.seed, scen.data,
                         scen.params, scen.runtime, scen.collusion, scen.output)
    assert [r.key for r in stored.runs()] == [r.key for r in runs]
