"""What a sweep costs the agents: each run's spending in its record, the sweep's total per data
set in the summary, and the agents' lifetime budget across the runs of a sweep on the local
backends (the orchestrator keeps the one-run pools' odometer)."""

from __future__ import annotations

import pytest
from ldpsim.simulator.results.results import privacy_spent
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep.runner import print_summary, run_scenario


def _raw(**over):
    raw = {"name": "spend", "protocols": ["ldp_kwiksort_rr", "ldp_kwiksort_lap"], "seed": 2,
           "repeats": 2, "data": {"kind": "mallows", "n": 200, "m": 5},
           "params": {"epsilon": [0.5, 1.0], "queries": 1},
           "runtime": {"backend": "inproc", "pools": 2, "jobs": 1, "progress": False},
           "output": {"plots": False}}
    raw.update(over)
    return raw


def test_records_and_the_summary_say_what_the_agents_spent(tmp_path):
    records, _ = run_scenario(sc.load(raw=_raw()), tmp_path, show_progress=False)
    assert len(records) == 8
    for r in records:  # every agent answers its one round: it spends the run's epsilon
        eps = r["params"]["epsilon"]
        assert r["privacy"]["epsilon_spent_max"] == pytest.approx(eps)
        assert r["privacy"]["epsilon_spent_mean"] == pytest.approx(eps)
        assert r["privacy"]["epsilon_lifetime_max"] == pytest.approx(eps)  # one-run pools
    spent = privacy_spent(records)  # two protocols x (0.5 + 1.0) on each repetition's data
    assert spent == {"epsilon_per_agent_max": pytest.approx(3.0), "data_sets": 2,
                     "runs_per_data_set_max": 4, "runs_without_local_max": 0}
    lines = []
    print_summary(records, echo=lines.append)
    assert "over them an agent spent at most epsilon = 3 on its data (2 data sets)" in lines[-1]


def test_the_summary_counts_the_runs_that_send_answers_unnoised(tmp_path):
    """A non-private baseline beside an LDP protocol: its runs spend no odometer, but its
    agents' answers reach the curator as they are; the summary says how many such runs."""
    raw = _raw(protocols=["kwiksort", "ldp_kwiksort_rr"], repeats=1)
    records, _ = run_scenario(sc.load(raw=raw), tmp_path, show_progress=False)
    spent = privacy_spent(records)
    assert spent["epsilon_per_agent_max"] == pytest.approx(1.5)
    assert spent["runs_without_local_max"] == 1
    lines = []
    print_summary(records, echo=lines.append)
    assert lines[-1].endswith("and up to 1 run without one sent its answers to the curator "
                              "unnoised")


def test_the_agents_lifetime_budget_spans_the_sweep(tmp_path):
    """lifetime_epsilon = 1.6: on each repetition's data set the agents answer runs while
    their total stays within it (0.5 and 1.0 of the first protocol) and refuse the rest,
    round by round, with the reason in the record."""
    raw = _raw(agents={"lifetime_epsilon": 1.6})
    records, _ = run_scenario(sc.load(raw=raw), tmp_path, show_progress=False)
    by = {(r["repeat"], r["protocol"], r["params"]["epsilon"]): r for r in records}
    for rep in (0, 1):
        assert by[(rep, "ldp_kwiksort_rr", 0.5)]["refused"] == 0
        assert by[(rep, "ldp_kwiksort_rr", 1.0)]["refused"] == 0
        for eps in (0.5, 1.0):  # 1.5 spent already: no room for either
            late = by[(rep, "ldp_kwiksort_lap", eps)]
            assert late["refused"] == 200 and "lifetime" in late["refusal"]
            assert late["privacy"]["epsilon_spent_max"] == 0.0
            assert late["privacy"]["epsilon_lifetime_max"] == pytest.approx(1.5)
    assert privacy_spent(records)["epsilon_per_agent_max"] == pytest.approx(1.5)


def test_a_lifetime_budget_with_the_dask_executor_is_refused():
    with pytest.raises(sc.ScenarioError, match=r"\[agents\] lifetime_epsilon"):
        sc.load(raw={**_raw(agents={"lifetime_epsilon": 2.0}, runtime={"executor": "dask"}),
                     "dask": {"address": "local:1"}})


@pytest.mark.parametrize(("table", "needle"), [
    ({"max_epsilon": -1}, r"\[agents\] max_epsilon: got -1"),
    ({"protocols": ["no_such"]}, r"\[agents\] protocols: unknown protocol 'no_such'"),
    ({"protocols": "ldp_kwiksort_rr"}, r"\[agents\] protocols: got 'ldp_kwiksort_rr'; allowed: "
                                       r"a list"),
    ({"limit": 3}, r"\[agents\] limit: unknown key")])
def test_bad_agents_tables_name_the_key(table, needle):
    with pytest.raises(sc.ScenarioError, match=needle):
        sc.load(raw=_raw(agents=table))
