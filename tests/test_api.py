"""The Python API a notebook user guesses (``import ldpsim``): run, load, tabulate, plot and
audit a sweep without the CLI or a private module. The first test is the README's example."""

from __future__ import annotations

from pathlib import Path

import pytest
from ldpsim.simulator.sweep.scenario import ScenarioError

import ldpsim

pd = pytest.importorskip("pandas")


def test_the_readme_example(tmp_path):
    res = ldpsim.run("demo", overrides={"params.epsilon": [0.5, 2.0], "data.n": 300,
                                        "repeats": 2}, backend="inproc")
    df = res.to_pandas()
    # kwiksort has no epsilon: one point; dp_kwiksort and ldp_kwiksort_rr two each
    assert len(res) == len(df) == 2 * (1 + 2 + 2)
    assert {"protocol", "repeat", "params.epsilon", "metrics.error_rate", "comm.bytes_total",
            "timing.wall_s", "privacy.epsilon", "data.n"} <= set(df.columns)
    assert (df["data.n"] == 300).all() and res.path is None
    summary = res.summary()
    assert len(summary) == 5 and (summary["repeats"] == 2).all()
    assert {"error_rate_mean", "error_rate_std"} <= set(summary.columns)
    fig = res.plot("error_rate", x="params.epsilon")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "ε" and ax.get_ylabel() == "error rate"
    assert len(ax.get_lines()) == 3  # one line (and band) per protocol


def test_run_into_a_directory_reloads_the_same_records(tmp_path):
    out = tmp_path / "sweep"
    res = ldpsim.run("demo", overrides=["data.n=200", "protocols=['ldp_kwiksort_rr']",
                                        "repeats=1"], out=out, backend="inproc")
    assert (out / "results.jsonl").is_file() and not list(out.glob("*.png"))
    again = ldpsim.load(out)
    assert [r["key"] for r in again] == [r["key"] for r in res]
    assert again.to_pandas()["metrics.error_rate"].tolist() == \
        res.to_pandas()["metrics.error_rate"].tolist()
    # parallel runs store each record when it is done: the file's order is the runs' finishing
    # order, and the reloaded results are still in the sweep's run order
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(reversed(lines)))
    assert [r["key"] for r in ldpsim.load(out)] == [r["key"] for r in res]


def test_a_scenario_as_a_dict_and_clear_errors(tmp_path):
    raw = {"name": "nb", "protocols": ["yes"], "repeats": 1, "seed": 1,
           "data": {"kind": "mallows", "n": 50, "m": 4},
           "params": {"epsilon": 1.0}, "runtime": {"backend": "inproc", "pools": 1}}
    with pytest.raises(ScenarioError, match="unknown protocol 'yes'"):
        ldpsim.run(raw)
    res = ldpsim.run({**raw, "protocols": ["ldp_kwiksort_rr"]})
    assert len(res) == 1
    with pytest.raises(ScenarioError, match="scenario not found: 'no_such_scenario'"):
        ldpsim.run("no_such_scenario")
    missing = tmp_path / "typo_dir"
    with pytest.raises(FileNotFoundError, match="not a results directory"):
        ldpsim.load(missing)
    assert not missing.exists()  # loading never creates a directory
    with pytest.raises(KeyError, match="not a metric"):
        res.plot("nope", x="params.epsilon")


def test_audit_from_python_with_the_commands_options():
    """--path, --jobs and --until-lower from Python: the batch path stops at the first look."""
    rec, = ldpsim.audit("audit_rank", overrides={"protocols": ["ldp_kwiksort_rr"]},
                        trials=40000, until_lower=0.5, path="batch")
    assert rec["path"] == "batch" and rec["trials"] == 5000 and rec["epsilon_lower"] >= 0.5
    full, = ldpsim.audit("audit_rank", overrides={"protocols": ["ldp_kwiksort_rr"]},
                         trials=40, path="full", jobs=2)
    assert full["path"] == "full" and full["trials"] == 40


def test_audit_from_python():
    records = ldpsim.audit("audit_rank", overrides={"protocols": ["ldp_kwiksort_rr"],
                                                    "params.epsilon": 1.0}, trials=100)
    assert records and all("epsilon_lower" in r and "flagged" in r for r in records)


def test_the_package_exports():
    assert set(ldpsim.__all__) >= {"run", "load", "audit", "Results", "run_locally"}
    assert Path(ldpsim.__file__).parent.name == "ldpsim"
