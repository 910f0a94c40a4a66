"""The Python API a notebook user guesses (``import ldpsim``): run, load, tabulate, plot and
audit a sweep without the CLI or a private module. The first test is the README's example."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ldpsim.simulator.scenario.scenario import ScenarioError

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
    assert ax.get_xlabel() == "ε"
    assert ax.get_ylabel() == "error rate (pairs against the majority)"  # as declared
    meaning = res.metrics().set_index("name")
    assert meaning.loc["kendall_tau", "better"] == "lower"
    assert meaning.loc["comm.bytes_up_per_agent_mean", "unit"] == "B"
    assert list(meaning.index[:2]) == ["error_rate", "kendall_tau"]
    # one row per metric and per cost column, none made of a cost column's name
    assert meaning.index.is_unique and "comm.bytes_up_per_agent" not in meaning.index
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


def test_the_api_imports_no_audit_and_no_heavy_library():
    """``import ldpsim.api`` (what ``ldpsim.run``, ``load`` and ``Results`` import) imports
    nothing of the audit room (``ldpsim.audit`` imports it when it runs: with scipy's special
    functions, about 0.13 s), no scipy, pandas or matplotlib: each where it is used. The time
    the audit would add is measured here."""
    unwanted = ("ldpsim.simulator.audit", "scipy", "pandas", "matplotlib")
    code = ("import sys, time; t = time.perf_counter(); import ldpsim.api; "
            "a = time.perf_counter() - t; "
            f"print(sorted(m for m in sys.modules if m.startswith({unwanted!r}))); "
            "t = time.perf_counter(); import ldpsim.simulator.audit.audit_harness; "
            "print(f'{a:.3f} {time.perf_counter() - t:.3f}')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-2] == "[]", res.stdout
    api_s, audit_s = map(float, lines[-1].split())
    print(f"the API {api_s * 1000:.0f} ms; the audit {audit_s * 1000:.0f} ms more")


def _big() -> ldpsim.Results:
    """20000 synthetic runs of 40 protocols (long names) at 50 points, in a long path."""
    recs = [{"key": f"k{i}", "protocol": f"protocol_with_a_rather_long_name_{i % 40}",
             "point": {"protocol": f"protocol_with_a_rather_long_name_{i % 40}",
                       "params.epsilon": (i // 40) % 50 / 10}, "repeat": i // 2000,
             "status": "degraded" if i % 997 == 0 else "complete",
             "metrics": {"acc": i % 7 / 7, "err": 1.0}, "comm": {}, "timing": {}}
            for i in range(20000)]
    return ldpsim.Results(recs, Path("results") / ("very_" * 40 + "deep"))


def test_a_results_prints_as_a_line_of_counts_whatever_its_size():
    big = _big()
    text = repr(big)
    assert len(text) <= 300 and text == str(big)
    assert text.startswith("Results(20000 runs, 2000 points, 21 degraded, protocols "
                           "protocol_with_a_rather_long_name_0, ")
    assert "protocol_with_a_rather_long_name_3 and 36 more, dir results/very_" in text
    small = ldpsim.Results([dict(big.records[1], key="x")], Path("results/demo"))
    assert repr(small) == ("Results(1 run, 1 point, protocol protocol_with_a_rather_long_"
                           "name_1, dir results/demo)")
    html = big._repr_html_()
    assert html.count("<tr>") == 1 + 20  # the header and 20 of the summary's 2000 rows
    assert "... 1980 more rows" in html and len(html) < 20_000
    assert "<th>acc_mean</th>" in html and "err_std" not in html


def test_per_round_plot_options_and_the_missing_library(monkeypatch):
    res = ldpsim.run("paper002_tables3_4", overrides={"repeats": 2, "data.n": [10, 20],
                                                      "params.epsilon": [0.5, 1.0]})
    rounds = res.per_round()
    assert len(rounds) == sum(len(r["comm"]["per_round"]) for r in res) == 16 * 2
    assert list(rounds.columns[:6]) == ["key", "status", "protocol", "params.epsilon",
                                        "data.n", "repeat"]
    # a run's rounds add up to its record's bytes (every registered agent was asked)
    for rec in res:
        mine = rounds[rounds["key"] == rec["key"]]
        assert mine["bytes_up"].sum() / rec["n_agents"] == rec["comm"]["bytes_up_per_agent_mean"]
        assert (mine["bytes_down_per_agent"] == mine["bytes_down"] / mine["asked"]).all()
    fig = res.plot("correct", x="data.n", logx=True, logy=True, title="Table 3")
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale(), ax.get_title()) == ("log", "log", "Table 3")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["dpwevote_laplace",
                                                                   "dpwevote"]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # its import fails
    with pytest.raises(ImportError, match=r"pip install 'ldpsim\[plot\]'"):
        res.plot("correct")
    with pytest.raises(ImportError, match=r"plots=True needs matplotlib: pip install "):
        ldpsim.run("demo", out=Path("never-written"), plots=True)
    assert not Path("never-written").exists()
