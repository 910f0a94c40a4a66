"""The papers' communication cost, the report bits per agent, beside the wire bytes: a sweep
over d of the SAFARI family carries it in ``summary.csv``, ``Results.summary()``, the terminal
table and the figures, with the values the protocols' plans state."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from ldpsim.protocols.mechanisms import olh
from ldpsim.simulator.results.summary import summarize
from ldpsim.simulator.results.table import format_table

import ldpsim

EPS = math.log(3)  # OLH's hash range g = round(e^ε) + 1 = 4
DS = (3, 4, 5)
BITS = "comm.report_bits_per_agent_mean"


def _sweep(out: Path) -> ldpsim.Results:
    scenario = {"name": "bits", "protocols": ["rank_grr", "rank_olh", "safari"], "repeats": 2,
                "seed": 5, "data": {"kind": "safari_mallows", "n": 300, "d": list(DS),
                                    "theta": 0.3},
                "params": {"epsilon": EPS}, "runtime": {"backend": "inproc", "pools": 1},
                "output": {"plots": False}}
    return ldpsim.run(scenario, out=out, backend="inproc")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ldpsim.Results]:
    out = tmp_path_factory.mktemp("bits") / "sweep"
    return out, _sweep(out)


def test_summary_csv_has_the_report_bits_of_each_plan(swept) -> None:
    out, res = swept
    with open(out / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {BITS, "comm.report_bits_per_agent_std", "comm.bytes_up_per_agent_mean"} <= \
        set(rows[0])
    bits = {(r["protocol"], int(r["data.d"])): float(r[BITS]) for r in rows}
    assert len(bits) == 3 * len(DS)
    for d in DS:
        # GRR over the d! rankings: log2 d! bits, growing with d (2.58, 4.58, 6.91)
        assert bits["rank_grr", d] == math.log2(math.factorial(d))
        # OLH: a 32-bit hash seed and a value in the hash range g, whatever d
        assert bits["rank_olh", d] == olh.SEED_BITS + math.log2(olh.hash_range(EPS))
    grr = [bits["rank_grr", d] for d in DS]
    assert grr == sorted(grr) and len(set(grr)) == len(DS)
    assert all(float(r["comm.report_bits_per_agent_std"]) == 0.0 for r in rows)
    # every protocol's: the sum over its rounds of one report's bits (SAFARI has two rounds)
    rounds = res.per_round()
    for (proto, d), b in bits.items():
        mine = rounds[(rounds["protocol"] == proto) & (rounds["data.d"] == d)]
        per_run = mine.groupby("key")["report_bits"].sum()
        assert len(per_run) == 2 and (per_run == b).all()
        assert mine.groupby("key").size().eq(2 if proto == "safari" else 1).all()


def test_results_summary_and_the_terminal_table_carry_the_report_bits(swept) -> None:
    pytest.importorskip("pandas")
    _, res = swept
    df = res.summary()
    assert BITS in df.columns and "comm.report_bits_per_agent_std" in df.columns
    grr = df[df["protocol"] == "rank_grr"].set_index("data.d")[BITS]
    assert [grr[d] for d in DS] == [math.log2(math.factorial(d)) for d in DS]
    meaning = res.metrics().set_index("name")
    assert meaning.loc[BITS, "unit"] == "bits" and meaning.loc[BITS, "better"] == "lower"
    assert "comm.report_bits_per_agent_std" not in meaning.index  # a spread, not a cost
    lines = format_table(*summarize(list(res)), std=True).splitlines()
    head = lines[0].split()
    assert head[-2:] == ["wire_bytes_up/agent", "report_bits/agent"]
    grr3 = next(ln for ln in lines if ln.startswith("rank_grr") and ln.split()[1] == "3")
    assert grr3.split()[-1] == f"{math.log2(6):.4g}"  # 2.585
    html = res._repr_html_()  # a notebook's view shows them as the terminal does
    assert f"<th>{BITS}</th>" in html and "<th>comm.bytes_up_per_agent_mean</th>" in html


def test_the_figures_draw_report_bits_in_a_figure_of_their_own(swept, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from ldpsim.simulator.results.plots import figures

    _, res = swept
    drawn = dict(figures(list(res)))
    fig = drawn[f"plot_{BITS}_vs_data.d"]
    assert fig.axes[0].get_ylabel() == "report bits per agent (bits)"
    assert "plot_comm.bytes_up_per_agent_mean_vs_data.d" in drawn  # beside the wire bytes
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert list(lines["rank_grr"].get_ydata()) == [math.log2(math.factorial(d)) for d in DS]
    # SAFARI has two rounds: the by-round figure has a panel of report bits on its own axis
    rounds = drawn["plot_per_round_bytes"]
    bits_ax = next(ax for ax in rounds.axes if ax.get_title() == "report bits per agent")
    assert bits_ax.get_ylabel() == "report bits per agent (bits)"
    up_ax = next(ax for ax in rounds.axes if ax.get_title() == "wire bytes up per agent")
    assert up_ax.get_ylabel() == "wire bytes per agent (B)"
    assert not bits_ax.get_shared_y_axes().joined(bits_ax, up_ax)
    safari = [line for line in bits_ax.get_lines() if line.get_label() == "safari"][0]
    assert len(safari.get_ydata()) == 2
