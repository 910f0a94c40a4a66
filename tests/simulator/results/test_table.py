"""The terminal's table (simulator.results.table): a deployment's columns, ``inf`` and ``n/a``,
and columns grouped into stacked tables that fit the terminal's width."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from ldpsim.simulator.results.results import summarize
from ldpsim.simulator.results.table import (
    UNLIMITED,
    format_table,
    table_columns,
    terminal_width,
)
from ldpsim.simulator.scenario.deployment import UNBOUNDED
from ldpsim.simulator.sweep.runner import print_summary

from tests.conftest import ROOT
from tests.simulator.results.test_results import rec, sweep_records

METRICS = [f"metric_number_{i:02d}" for i in range(12)]
DEADLINES = (0.05, 0.5, None)  # None: the scenario's inf, no deadline


def wide_records() -> list[dict[str, Any]]:
    """Twelve metrics at three epsilons, two repeats each: a table about 600 characters wide."""
    out = []
    for eps in (0.5, 1.0, 2.0):
        for i in range(2):
            out.append(rec(f"w-{eps}-{i}", {"protocol": "ldp_kwiksort_rr", "params.epsilon": eps},
                           {m: (j + 1) / (eps * 7 + i) for j, m in enumerate(METRICS)},
                           repeat=i, comm={"bytes_up_per_agent_mean": 12.5 * (i + 1),
                                           "report_bits_per_agent": 3.0},
                           timing={"agent_cpu_s_mean": 0.5, "wall_s": 2.0}))
    return out


def deployment_records() -> list[dict[str, Any]]:
    """A deadline sweep under a [deployment] (no deadline stored as None), two repeats; the
    last point's runs lack ``kendall_tau``."""
    out = []
    for d in DEADLINES:
        for i in range(2):
            metrics = {"error_rate": 0.3 + 0.01 * i}
            if d is not None:
                metrics["kendall_tau"] = 0.5
            out.append(rec(f"d-{d}-{i}", {"protocol": "ldp_kwiksort_rr",
                                          "params.queries": 8,
                                          "deployment.round_deadline_s": d}, metrics,
                           repeat=i, comm={"bytes_up_per_agent_mean": 13.42,
                                           "bytes_down_per_agent_mean": 20.5,
                                           "report_bits_per_agent": 8.0},
                           timing={"agent_cpu_s_mean": 1e-7, "wall_s": 0.01},
                           virtual={"wall_s": d or 0.42, "dropout_rate": 0.2 + (d or 0)}))
    return out


def tables(text: str) -> int:
    """How many stacked tables ``text`` holds (one rule line each)."""
    return sum(1 for ln in text.splitlines() if re.fullmatch(r"-+( +-+)*", ln))


def row_cells(text: str, keys: int) -> dict[str, list[str]]:
    """Each data row's cells over all stacked tables, by its first ``keys`` cells (the point's
    settings, which every table repeats: left out of the later tables' cells)."""
    rows: dict[str, list[str]] = {}
    for block in text.split("\n\n"):
        lines = block.splitlines()
        rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
        spans = [m.span() for m in re.finditer(r"-+", lines[rule])]
        for ln in lines[rule + 1:]:
            cells = [ln[a:b].strip() for a, b in spans]
            k = " | ".join(cells[:keys])
            rows[k] = rows.get(k, cells[:keys]) + cells[keys:]
    return rows


def test_the_unlimited_settings_are_the_deployments_unbounded_keys():
    assert UNLIMITED == tuple(f"deployment.{k}" for k in UNBOUNDED)


def test_a_deployments_table_shows_its_costs_virtual_time_dropouts_inf_and_na():
    columns, rows = summarize(deployment_records())
    shown = table_columns(columns)
    assert shown[-5:] == ["comm.bytes_up_per_agent_mean", "comm.bytes_down_per_agent_mean",
                          "comm.report_bits_per_agent_mean", "virtual.wall_s",
                          "virtual.dropout_rate"]
    lines = format_table(columns, rows, std=True).splitlines()
    assert lines[0].split()[-5:] == ["wire_bytes_up/agent", "wire_bytes_down/agent",
                                     "report_bits/agent", "virtual.wall_s",
                                     "virtual.dropout_rate"]
    assert lines[2].split() == ["ldp_kwiksort_rr", "8", "0.05", "2", "0.305", "±", "0.007071",
                                "0.5", "±", "0", "13.42", "20.5", "8", "0.05", "0.25"]
    # no deadline prints inf; the metric its runs lack prints n/a
    assert lines[4].split() == ["ldp_kwiksort_rr", "8", "inf", "2", "0.305", "±", "0.007071",
                                "n/a", "13.42", "20.5", "8", "0.42", "0.2"]
    assert "timing" not in lines[0] and "agent_cpu" not in lines[0]


def test_a_table_without_a_deployment_is_todays_to_the_byte():
    # the hashes of the tables the summary printed before the deployment columns and the
    # grouping: one line per row, however wide (and the same for width None as before)
    want = {(False, None): "128abda20eec927363a2037a6ef636864d80e500058841c3b6dd386438e88c5e",
            (False, 2): "6c3525df938844c38b2e1785f7104e9bc7c252f120250a3d17edcaac935ad127",
            (True, None): "63f91eff92cbddb4390e4aba5cd98d40137488c609ad45fc9ea9c6ac3222713e",
            (True, 2): "a9c9f73ebe5971f1bbb9aa1a0636bcbccab86f0e664a5067c3d4a65983ede45f"}
    columns, rows = summarize(wide_records())
    for (std, max_rows), digest in want.items():
        text = format_table(columns, rows, max_rows=max_rows, std=std)
        assert hashlib.sha256(text.encode()).hexdigest() == digest
        # a terminal wide enough changes nothing
        assert format_table(columns, rows, max_rows=max_rows, std=std, width=1000) == text
    assert "n/a" not in format_table(*summarize(sweep_records()), std=True, width=60)


@pytest.mark.parametrize(("records", "keys"), [(wide_records, 2), (deployment_records, 3),
                                              (sweep_records, 3)])
def test_at_80_columns_no_line_is_longer_and_every_cell_is_kept(records, keys):
    columns, rows = summarize(records())
    whole = format_table(columns, rows, std=True)
    narrow = format_table(columns, rows, std=True, width=80)
    assert max(len(ln) for ln in narrow.splitlines()) <= 80
    if len(whole.splitlines()[0]) > 80:
        assert tables(narrow) > 1 or records is sweep_records
    # the same cells in the same order, whatever the grouping
    assert row_cells(narrow, keys) == row_cells(whole, keys)
    assert len(row_cells(whole, keys)) == len(rows)


def test_a_wider_terminal_takes_fewer_tables():
    columns, rows = summarize(wide_records())
    counts = [tables(format_table(columns, rows, std=True, width=w)) for w in (80, 200, 1000)]
    assert counts[0] > counts[1] > counts[2] == 1
    wide = format_table(columns, rows, std=True, width=200)
    assert max(len(ln) for ln in wide.splitlines()) <= 200
    # each stacked table repeats the point's settings
    blocks = wide.split("\n\n")
    assert all(b.splitlines()[-1].startswith("ldp_kwiksort_rr") for b in blocks)
    assert all(b.splitlines()[-1].split()[1] == "2" for b in blocks)
    deployment = summarize(deployment_records())
    assert tables(format_table(*deployment, std=True, width=80)) > 1
    assert tables(format_table(*deployment, std=True, width=200)) == 1


def test_the_more_rows_line_follows_the_last_table():
    columns, rows = summarize(wide_records())
    text = format_table(columns, rows, std=True, width=80, max_rows=1)
    assert text.endswith("\n... (2 more rows)") and text.count("more rows") == 1


def test_the_summary_its_legend_and_the_privacy_line_fit_the_width():
    got: list[str] = []
    records = deployment_records()
    for r in records:
        r["privacy"] = {"epsilon_spent_max": 1.0}
    print_summary(records, echo=got.append, width=80)
    lines = "\n".join(got).splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert any(ln.startswith("  virtual.wall_s: virtual run time") for ln in lines)
    assert any(ln.startswith("  virtual.dropout_rate: dropout rate") for ln in lines)
    assert sum(ln.startswith("privacy:") for ln in lines) == 1
    got.clear()
    print_summary(records, echo=got.append)  # not a terminal: one table, lines unwrapped
    assert tables("\n".join(got)) == 1


def test_the_width_is_the_terminals_and_none_for_a_pipe(monkeypatch):
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "93")
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert terminal_width() == 93
    monkeypatch.setattr(sys, "stdout", open(os.devnull, "w"))  # noqa: SIM115
    assert terminal_width() is None


def test_a_deployment_run_prints_its_virtual_time_dropouts_and_inf_on_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    scen = ROOT / "scenarios" / "deployment_rank.toml"
    args = [sys.executable, "-m", "ldpsim", "run", str(scen), "--set", "repeats=1",
            "--set", "data.n=600", "--set", "params.queries=1",
            "--set", "deployment.round_deadline_s=[0.05, inf]", "--jobs", "1",
            "--no-progress", "--secret", "seed", "--out", str(tmp_path / "out")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    piped = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    head, rule, first, second = piped.stdout.splitlines()[:4]
    assert head.split()[-3:] == ["report_bits/agent", "virtual.wall_s", "virtual.dropout_rate"]
    assert second.split()[1] == "inf" and first.split()[1] == "0.05"
    assert "virtual.wall_s: virtual run time" in piped.stdout
    master, slave = pty.openpty()
    with open(master, "rb", buffering=0) as reader:
        ran = subprocess.Popen(args, env=env, stdout=slave, stderr=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = reader.read(4096)
            except OSError:  # the terminal closed with the last writer
                break
            if not chunk:
                break
            chunks.append(chunk)
    assert ran.wait(timeout=120) == 0
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    table = shown.split("\nsecret:")[0]
    assert max(len(ln) for ln in table.splitlines()) <= 80
    assert tables(table) == 2 and "inf" in table
    assert "virtual." in table and "dropout_" in table


def test_a_notebooks_view_shows_the_deployments_columns_as_the_terminal_does():
    import ldpsim

    view = ldpsim.Results(deployment_records(), None)._repr_html_()
    heads = re.findall(r"<th>([^<]*)</th>", view)
    assert heads == table_columns(summarize(deployment_records())[0])
    assert heads[-2:] == ["virtual.wall_s", "virtual.dropout_rate"]
    assert "<td>inf</td>" in view and "<td>n/a</td>" in view
