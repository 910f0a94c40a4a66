"""Sweep axes: one collusion vocabulary (``colluders`` a value or a list of values, ``agents`` a
list of agent ids), paired axes (``[sweep] paired``: keys that vary together, one axis of the
grid), malformed ``--set`` lists and scenario names that are not found.

Everything here expands scenarios without running them (the audit aside); the runs of a paired
sweep, its resume and its verification are in ``tests/simulator/scenario/test_identity.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib

import pytest
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.tables import ScenarioError, ScenarioWarning

import ldpsim
from ldpsim.api import _scenario
from tests.conftest import ROOT

SCEN_DIR = ROOT / "scenarios"


def small(**changes) -> dict:
    """A scenario of two protocols, an ε axis and an n axis (nothing is run)."""
    raw = {"name": "axes", "protocols": ["kwiksort", "ldp_kwiksort_rr"], "repeats": 2,
           "seed": 4, "data": {"kind": "mallows", "n": [100, 200, 300], "m": 5},
           "params": {"epsilon": [0.5, 1.0, 2.0]},
           "runtime": {"backend": "inproc", "pools": 1}, "collusion": {"curator": True}}
    raw.update(changes)
    return raw


def specs_of(scenario: sc.Scenario) -> list[dict]:
    """Every run of a scenario, field for field, in run order."""
    return [dataclasses.asdict(s) for s in scenario.runs()]


def digest(values: list) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# [collusion] colluders: a value, or a list of values (a sweep axis); agents: a list of ids


def test_a_list_of_colluders_is_the_sweep_the_former_sweep_key_made():
    new = sc.load(raw=small(collusion={"colluders": [0.0, 0.1, 5], "curator": True}))
    with pytest.warns(ScenarioWarning, match=r"\[collusion\] sweep: renamed \[collusion\] "
                                             r"colluders \(a list of values is a sweep\); read "
                                             r"as colluders = \[0.0, 0.1, 5\]"):
        old = sc.load(raw=small(collusion={"sweep": [0.0, 0.1, 5], "curator": True}))
    assert new.axes() == old.axes() == ["params.epsilon", "data.n", "collusion.colluders"]
    assert new.collusion == old.collusion  # what the runs and the stored tables hold
    assert specs_of(new) == specs_of(old)  # the same runs, points and keys, in the same order
    assert len(new.runs()) == 3 * 3 * 2 + 3 * 3 * 3 * 2  # kwiksort has no ε
    assert {s.point["collusion.colluders"] for s in new.runs()} == {0.0, 0.1, 5}
    for s in new.runs():
        assert s.config()["collusion"]["colluders"] == s.point["collusion.colluders"]


def test_the_shipped_collusion_sweep_keeps_its_run_keys():
    """collusion_leakage.toml, now ``colluders = [...]``, has the runs its former ``sweep``
    had: the run keys and points as they were (their digests, taken before the change)."""
    raw = tomllib.loads((SCEN_DIR / "collusion_leakage.toml").read_text())
    assert "sweep" not in raw["collusion"]
    assert raw["collusion"]["colluders"] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    s = sc.load(SCEN_DIR / "collusion_leakage.toml")
    keys = [r.key for r in s.runs()]
    assert len(keys) == 150 and keys[:2] == ["1985401f3a709e7f28d8", "c52ce21647283ba43fdb"]
    assert hashlib.sha256(" ".join(keys).encode()).hexdigest()[:16] == "73da9af87021c6ed"
    assert digest([r.point for r in s.runs()]) == "35ca95bc520da7fd"
    assert s.axes() == ["params.epsilon", "collusion.colluders"]


def test_agents_are_the_former_list_of_ids():
    s = sc.load(SCEN_DIR / "audit_rank.toml", ["collusion.agents=[9, 1, 5, 1]"])
    assert s.collusion["colluders"] == [1, 5, 9]  # what the runtime receives, as before
    assert "collusion.colluders" not in s.axes()
    assert all("collusion.colluders" not in r.point for r in s.runs())
    # the keys the same coalition had as ``colluders = [1, 5, 9]``
    assert [r.key for r in s.runs()] == ["74fc44c44faad6888907", "f57ea5d7f8758390e757",
                                         "e24f4aae764b4ada99ee", "63b6195842a432d61412"]
    assert sc.load(raw=small(collusion={"agents": []})).collusion["colluders"] == []


def test_agents_and_colluders_together_are_refused():
    for both in ({"agents": [1], "colluders": 0.1}, {"agents": [1], "sweep": [0.1]},
                 {"colluders": 0.1, "sweep": [0.1]}):
        with pytest.raises(ScenarioError) as e:
            sc.load(raw=small(collusion=both))
        msg = str(e.value)
        assert "\n" not in msg and "give one of them" in msg, msg
        assert all(k in msg for k in both), msg


@pytest.mark.parametrize("colluders, needle", [
    ([0.5, "x"], "[collusion] colluders: got [0.5, 'x']; allowed: a fraction in [0, 1), a count "
                 "(integer >= 0), or a list of them (a sweep); a list of agent ids goes in "
                 "[collusion] agents"),
    ([[1, 2]], "[collusion] colluders: got [[1, 2]]; allowed: a fraction in [0, 1)"),
    ([0.1, 1.5], "[collusion] colluders: got [0.1, 1.5]; allowed: a fraction in [0, 1)"),
    ([True], "[collusion] colluders: got [True]; allowed:"),
    ([], "[collusion] colluders: an empty list sweeps nothing; allowed: a fraction in [0, 1), "
         "a count (integer >= 0), or a non-empty list of them"),
    (1.5, "[collusion] colluders: got 1.5; allowed: a fraction in [0, 1)"),
])
def test_bad_colluders_name_the_key_and_the_allowed_values(colluders, needle):
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=small(collusion={"colluders": colluders}))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_misspelt_coalition_key_is_named_with_the_closest():
    with pytest.raises(ScenarioError, match=r"\[collusion\] agent: unknown key; allowed: "
                                            r"curator, save_view, attacks, attack_targets, "
                                            r"colluders, agents; did you mean 'agents'\?"):
        sc.load(raw=small(collusion={"agent": [1, 2]}))


@pytest.mark.parametrize("agents, needle", [
    (5, "[collusion] agents: got 5; allowed: a list of agent ids (integers >= 0"),
    ([1, -1], "[collusion] agents: got [1, -1]; allowed: a list of agent ids"),
    ([0.5], "a fraction or a count goes in [collusion] colluders"),
])
def test_bad_agents_name_the_key_and_the_allowed_values(agents, needle):
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=small(collusion={"agents": agents}))
    assert needle in str(e.value)


def test_ids_and_counts_beyond_the_agents_name_their_key():
    with pytest.raises(ScenarioError, match=r"\[collusion\] agents: got agent id 100; allowed: "
                                            r"ids in \[0, 100\)"):
        sc.check_runs(sc.load(raw=small(data={"kind": "mallows", "n": 100, "m": 4},
                                        collusion={"agents": [3, 100]})).runs())
    with pytest.raises(ScenarioError, match=r"\[collusion\] colluders: got 100; allowed: a count "
                                            r"of at most n - 1 = 99"):
        sc.check_runs(sc.load(raw=small(data={"kind": "mallows", "n": 100, "m": 4},
                                        collusion={"colluders": [1, 100]})).runs())


def test_set_one_collusion_key_replaces_the_others():
    with pytest.warns(ScenarioWarning):
        legacy = small(collusion={"sweep": [0.1, 0.2], "curator": True})
        sc.load(raw=legacy)
    ids = small(collusion={"agents": [1, 2], "curator": True})
    for raw in (legacy, ids):
        s = sc.load(raw=raw, overrides=["collusion.colluders=[0, 0.5]"])
        assert s.axes()[-1] == "collusion.colluders" and s.collusion["sweep"] == [0, 0.5]
        assert set(s.raw["collusion"]) == {"colluders", "curator"}
    s = sc.load(raw=small(collusion={"colluders": [0.1, 0.2]}),
                overrides=["collusion.agents=[3]"])
    assert s.collusion["colluders"] == [3] and "collusion.colluders" not in s.axes()
    with pytest.warns(ScenarioWarning):
        s = sc.load(raw=ids, overrides=["collusion.sweep=[0.3]"])
    assert s.collusion["sweep"] == [0.3]
    # from Python, a dict of overrides replaces the same way
    s = _scenario(ids, {"collusion.colluders": [0.0, 0.5]})
    assert s.collusion["sweep"] == [0.0, 0.5]


SETS_COLLUDERS = [p for p in sorted(SCEN_DIR.glob("*.toml"))
                  if "colluders" in tomllib.loads(p.read_text()).get("collusion", {})]


def test_the_shipped_scenarios_set_colluders():
    assert len(SETS_COLLUDERS) >= 30 and SCEN_DIR / "audit_rank.toml" in SETS_COLLUDERS


@pytest.mark.parametrize("path", SETS_COLLUDERS, ids=lambda p: p.stem)
def test_set_colluders_sweeps_on_every_shipped_scenario(path, recwarn):
    base = sc.load(path, ["repeats=1"])  # (a paper's grid has up to 216,000 runs)
    s = sc.load(path, ["repeats=1", "collusion.colluders=[0.0, 0.5]"])
    assert s.axes() == [a for a in base.axes() if a != "collusion.colluders"] + [
        "collusion.colluders"]
    single = len({(r.protocol, json.dumps(r.params), json.dumps(r.data)) for r in base.runs()})
    runs = s.runs()
    assert len(runs) == 2 * single
    assert {r.point["collusion.colluders"] for r in runs} == {0.0, 0.5}
    if "collusion.colluders" not in base.axes():  # (a [plot] may draw against the axis)
        ids = sc.load(path, ["collusion.agents=[0, 1]"])
        assert ids.collusion["colluders"] == [0, 1] and ids.axes() == base.axes()
    assert not [w for w in recwarn if issubclass(w.category, ScenarioWarning)]


def test_the_audit_sweeps_colluder_counts():
    """``ldpsim audit audit_rank --set collusion.colluders=[1,5,9]``: one audited setting per
    count, each with its count of colluders and the count in its point."""
    records = ldpsim.audit("audit_rank", overrides=["protocols=['ldp_kwiksort_rr']",
                                                    "collusion.colluders=[1, 5, 9]"],
                           trials=40)
    assert [r["colluders"] for r in records] == [1, 5, 9]
    assert [r["point"] for r in records] == [{"collusion.colluders": c} for c in (1, 5, 9)]
    ids, = ldpsim.audit("audit_rank", overrides=["protocols=['ldp_kwiksort_rr']",
                                                 "collusion.agents=[1, 5, 9]"], trials=40)
    assert ids["colluders"] == 3 and ids["point"] == {}


# --------------------------------------------------------------------------------------------
# [sweep] paired: keys that vary together


PAIRED = {"paired": [["params.epsilon", "data.n"]]}


def test_a_paired_sweep_gives_the_zipped_points():
    grid = sc.load(raw=small())
    paired = sc.load(raw=small(sweep=PAIRED))
    assert paired.paired == [["params.epsilon", "data.n"]]
    assert paired.axes() == grid.axes() == ["params.epsilon", "data.n"]
    rr = [s for s in paired.runs() if s.protocol == "ldp_kwiksort_rr"]
    assert [(s.point, s.repeat) for s in rr] == [
        ({"protocol": "ldp_kwiksort_rr", "params.epsilon": e, "data.n": n}, r)
        for e, n in ((0.5, 100), (1.0, 200), (2.0, 300)) for r in (0, 1)]
    assert [(s.params["epsilon"], s.data["n"]) for s in rr] == [
        (e, n) for e, n in ((0.5, 100), (1.0, 200), (2.0, 300)) for _ in (0, 1)]
    # kwiksort takes no ε: its runs vary n alone, once per value
    ks = [s for s in paired.runs() if s.protocol == "kwiksort"]
    assert [s.point for s in ks] == [{"protocol": "kwiksort", "data.n": n}
                                     for n in (100, 100, 200, 200, 300, 300)]
    assert len(paired.runs()) == 6 + 6
    # a run's key depends only on its settings: each paired run is the grid's run
    by_key = {s.key: s for s in grid.runs()}
    for s in paired.runs():
        assert dataclasses.asdict(by_key[s.key]) == dataclasses.asdict(s)


def test_a_paired_group_is_one_axis_of_the_grid():
    raw = small(sweep=PAIRED, data={"kind": "mallows", "n": [100, 200, 300], "m": [4, 5]},
                collusion={"colluders": [0.0, 0.5]}, protocols=["ldp_kwiksort_rr"],
                repeats=1)
    points = [s.point for s in sc.load(raw=raw).runs()]
    assert len(points) == 3 * 2 * 2
    assert points[:4] == [
        {"protocol": "ldp_kwiksort_rr", "params.epsilon": 0.5, "data.n": 100, "data.m": 4,
         "collusion.colluders": 0.0},
        {"protocol": "ldp_kwiksort_rr", "params.epsilon": 0.5, "data.n": 100, "data.m": 4,
         "collusion.colluders": 0.5},
        {"protocol": "ldp_kwiksort_rr", "params.epsilon": 0.5, "data.n": 100, "data.m": 5,
         "collusion.colluders": 0.0},
        {"protocol": "ldp_kwiksort_rr", "params.epsilon": 0.5, "data.n": 100, "data.m": 5,
         "collusion.colluders": 0.5}]
    assert {(p["params.epsilon"], p["data.n"]) for p in points} == {
        (0.5, 100), (1.0, 200), (2.0, 300)}
    # the colluders pair as well: all agents but one, as n grows
    raw = small(sweep={"paired": [["data.n", "collusion.colluders"]]},
                collusion={"colluders": [99, 199, 299]}, protocols=["kwiksort"], params={},
                repeats=1)
    s = sc.load(raw=raw)
    assert [(r.data["n"], r.collusion["colluders"]) for r in s.runs()] == [
        (100, 99), (200, 199), (300, 299)]
    sc.check_runs(s.runs())


def test_an_unpaired_scenario_keeps_its_runs():
    """``paired = []`` pairs nothing: the grid, run for run."""
    assert specs_of(sc.load(raw=small(sweep={"paired": []}))) == specs_of(sc.load(raw=small()))


@pytest.mark.parametrize("paired, needle", [
    ([["params.epsilon", "data.m"]],
     "[sweep] paired: data.m is not a list (one value); allowed: swept settings (a list of "
     "values) of this scenario: params.epsilon, data.n, collusion.colluders"),
    ([["params.epsilon", "data.nn"]],
     "[sweep] paired: data.nn is not a swept setting of this scenario; allowed: "
     "params.epsilon, data.n, collusion.colluders; did you mean 'data.n'?"),
    ([["params.epsilon", "data.n"], ["data.n", "collusion.colluders"]],
     "[sweep] paired: data.n is in two groups; allowed: each key in one group"),
    ([["params.epsilon"]], "[sweep] paired: got ['params.epsilon']; allowed: a group of two or "
                           "more swept settings"),
    (["params.epsilon", "data.n"], "[sweep] paired: got ['params.epsilon', 'data.n']; allowed: "
                                   "a list of groups, each a list of two or more swept "
                                   "settings, e.g. [[\"params.epsilon\", \"data.n\"]]"),
    ("params.epsilon", "[sweep] paired: got 'params.epsilon'; allowed: a list of groups"),
])
def test_paired_errors_name_the_key(paired, needle):
    raw = small(sweep={"paired": paired}, collusion={"colluders": [0.0, 0.1, 0.2]})
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=raw)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_paired_lists_of_unequal_length_are_refused():
    raw = small(sweep=PAIRED, params={"epsilon": [0.5, 1.0]})
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=raw)
    assert str(e.value) == ("[sweep] paired: params.epsilon has 2 values, data.n has 3; "
                            "allowed: lists of equal length (one point per position)")
    with pytest.raises(ScenarioError, match=r"\[sweep\] zip: unknown key; allowed: paired"):
        sc.load(raw=small(sweep={"zip": [["params.epsilon", "data.n"]]}))


def test_paired_from_the_command_line():
    s = sc.load(raw=small(), overrides=['sweep.paired=[["params.epsilon","data.n"]]'])
    assert specs_of(s) == specs_of(sc.load(raw=small(sweep=PAIRED)))
    # one key of a group set to another length: the error names both
    with pytest.raises(ScenarioError, match="params.epsilon has 4 values, data.n has 3"):
        sc.load(raw=small(sweep=PAIRED), overrides=["params.epsilon=[0.5,1,2,4]"])
    s = sc.load(raw=small(sweep=PAIRED), overrides=["sweep.paired=[]"])
    assert specs_of(s) == specs_of(sc.load(raw=small()))


# --------------------------------------------------------------------------------------------
# A malformed --set list; a scenario name that is not found


@pytest.mark.parametrize("text, needle", [
    ("params.epsilon=[0.5,,1]", "--set 'params.epsilon=[0.5,,1]': malformed TOML value at "
                                "character 6 of [0.5,,1] (invalid value); allowed: a TOML "
                                "value, e.g. a list [0.5, 1.0] (a sweep)"),
    ("params.epsilon=[0.5, 1", "--set 'params.epsilon=[0.5, 1': malformed TOML value "
                               "(unclosed array)"),
    ('data.path="a.soc', "--set 'data.path=\"a.soc': malformed TOML value (unterminated "
                         "string)"),
])
def test_a_malformed_list_is_named_as_such(text, needle):
    with pytest.raises(ScenarioError) as e:
        sc.load(raw=small(), overrides=[text])
    assert needle in str(e.value), str(e.value)


def test_a_scenario_name_that_is_not_found_suggests_the_closest():
    with pytest.raises(ScenarioError, match=r"scenario not found: 'dem' .*; did you mean "
                                            r"'demo'\?"):
        ldpsim.run("dem")
    with pytest.raises(ScenarioError, match=r"scenario file not found: audit_rnk; did you "
                                            r"mean 'audit_rank'"):
        sc.load(sc.find("audit_rnk"))
    with pytest.raises(ScenarioError) as e:
        sc.load(sc.find("zzzzzz"))
    assert "did you mean" not in str(e.value)
