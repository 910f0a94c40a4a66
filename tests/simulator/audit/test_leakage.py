"""What the coalition learned, per run (``[collusion] attacks``): the report attack never beats
the LDP ceiling and beats guessing when reports carry signal; a non-private protocol leaks
exactly what the data allow; differencing is exact with every other agent colluding; a trusted
curator hides the reports; the backends agree; a collusion sweep tabulates and plots leakage."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ldpsim.protocols import get_data_kind
from ldpsim.simulator.audit.leakage import _pick
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session.collusion import colluder_mask
from ldpsim.simulator.session.seeding import run_keys
from ldpsim.simulator.sweep.runner import execute, run_scenario


def _scenario(protocol: str, n: int, colluders: float | int, targets: int, curator: bool = True,
              eps: float = 1.0, backend: str = "inproc", m: int = 6) -> sc.Scenario:
    raw = {"protocol": protocol, "seed": 3,
           "data": {"kind": "mallows", "n": n, "m": m, "theta": 0.3},
           "params": {"epsilon": eps} if protocol != "kwiksort" else {},
           # the seed-only secret: the tests recompute a run's keys from its seed
           # (``run_keys``) and compare separately launched runs
           "runtime": {"backend": backend, "pools": 2, "secret": "seed"},
           "collusion": {"colluders": colluders, "curator": curator, "attacks": True,
                         "attack_targets": targets}}
    return sc.validate(raw)


def _leak(s: sc.Scenario) -> dict:
    rec = execute(s.runs()[0])
    assert rec["status"] == "complete"
    return rec["leakage"]


def test_the_report_attack_stays_under_the_ldp_ceiling_and_beats_guessing() -> None:
    """LDP-KwikSort:RR at ε = 2, 2000 honest targets: accuracy within 5 s.e. under
    e^ε/(1+e^ε) and more than 5 s.e. above ½ (the reports carry signal)."""
    leak = _leak(_scenario("ldp_kwiksort_rr", 4000, 0.5, 2000, eps=2.0))
    acc, bound, t = leak["report_accuracy"], leak["report_bound"], leak["targets"]
    assert t == 2000 and bound == pytest.approx(1 / (1 + math.exp(-2.0)))
    se = 0.5 / math.sqrt(t)  # the largest standard error of a mean of t scores in [0, 1]
    assert 0.5 + 5 * se < acc <= bound + 5 * se
    assert leak["colluders"] == 2000 and leak["curator"] is True


def test_a_non_private_protocol_leaks_what_the_data_allow() -> None:
    """kwiksort (truthful answers to every pair) with a colluding curator: the attack is right
    unless the decoy holds the very same ranking (a tie, scored ½): exactly that fraction."""
    s = _scenario("kwiksort", 600, 0.2, 300, m=4)
    spec = s.runs()[0]
    leak = _leak(s)
    keys = run_keys(spec.seed)
    ds = get_data_kind("mallows").build({"n": 600, "m": 4, "theta": 0.3}, keys.data)
    mask = colluder_mask(600, spec.collusion, keys.collusion)
    targets, decoys = _pick(spec.seed, np.flatnonzero(~mask), 600, 300)
    rows = ds.rows(0, 600)
    same = (rows[targets] == rows[decoys]).all(axis=1)
    assert 0 < same.sum() < len(same)  # m = 4: identical rankings happen; the check bites
    assert leak["report_accuracy"] == pytest.approx(1 - 0.5 * same.mean())
    assert leak["report_bound"] is None  # no LDP claim, no ceiling


def test_differencing_is_exact_when_every_other_agent_colludes() -> None:
    leak = _leak(_scenario("kwiksort", 300, 299, 50, curator=False))
    assert leak["targets"] == 1 and leak["differencing_accuracy"] == 1.0
    assert leak["report_accuracy"] is None  # a trusted curator: no reports in the view


def test_the_backends_record_the_same_leakage() -> None:
    a = _leak(_scenario("ldp_kwiksort_lap", 400, 0.3, 100))
    b = _leak(_scenario("ldp_kwiksort_lap", 400, 0.3, 100, backend="processes"))
    a.pop("seconds"), b.pop("seconds")
    assert a == b and a["report_accuracy"] is not None


def test_a_collusion_sweep_records_leakage_next_to_utility(tmp_path: Path) -> None:
    raw = {"protocol": "ldp_kwiksort_rr", "seed": 1, "repeats": 2,
           "data": {"kind": "mallows", "n": 300, "m": 5, "theta": 0.5},
           "params": {"epsilon": 1.0},
           "runtime": {"backend": "inproc", "pools": 1, "progress": False},
           "collusion": {"colluders": [0.0, 0.5, 0.9], "attacks": True, "attack_targets": 50}}
    s = sc.validate(raw)
    assert s.plot.y == ("error_rate", "kendall_tau", "leakage.report_accuracy",
                        "leakage.differencing_accuracy", "leakage.report_bound")
    records, summary = run_scenario(s, tmp_path, show_progress=False, echo=lambda *a, **k: None)
    assert len(records) == 6 and all("leakage" in r for r in records)
    header = summary.read_text().splitlines()[0].split(",")
    assert "leakage.report_accuracy_mean" in header and "error_rate_mean" in header
    if pytest.importorskip("matplotlib"):
        assert (tmp_path / "plot_leakage.report_accuracy_vs_collusion.colluders.png").is_file()
        assert (tmp_path / "plot_error_rate_vs_collusion.colluders.png").is_file()
    # the notebook view of the same directory
    pytest.importorskip("pandas")
    import ldpsim

    df = ldpsim.load(tmp_path).to_pandas()
    assert sorted(df["collusion.colluders"].unique()) == [0, 150, 270]
    assert df["leakage.report_accuracy"].between(0, 1).all()
    fig = ldpsim.load(tmp_path).plot("leakage.report_accuracy")  # x: the swept colluders
    assert fig.axes[0].get_xlabel().startswith("colluders")
    # the attack settings are part of what a record means: another target count is refused
    with pytest.raises(sc.ScenarioError, match="attack_targets"):
        raw["collusion"]["attack_targets"] = 60
        run_scenario(sc.validate(raw), tmp_path, show_progress=False, echo=lambda *a, **k: None)


def test_a_claim_per_cell_sets_no_ceiling_for_whole_rows() -> None:
    """truth_rr's ε protects one answer; a worker's row of many answers is told from another
    worker's far more often than e^ε/(1+e^ε): the record states no ceiling for it."""
    raw = {"protocol": "truth_rr", "seed": 2,
           "data": {"kind": "crowd_synthetic", "n": 1000, "tasks": 40, "sparsity": 0.3},
           "params": {"epsilon": 1.0}, "runtime": {"backend": "inproc", "pools": 1},
           "collusion": {"colluders": 0.2, "attacks": True, "attack_targets": 600}}
    leak = _leak(sc.validate(raw))
    se = 0.5 / math.sqrt(leak["targets"])
    assert leak["report_bound"] is None
    assert leak["report_accuracy"] > 1 / (1 + math.exp(-1.0)) + 5 * se


def test_the_exact_interval_is_clopper_pearsons() -> None:
    """Issue 49: each attack's accuracy comes with the trials and wins it rests on and their
    exact interval: Clopper–Pearson's, pinned at its textbook values (0, 5 and 10 wins of 10)
    and at a tie's half win (between its neighbours)."""
    from ldpsim.simulator.results.intervals import exact_interval

    assert exact_interval(0, 10) == pytest.approx([0.0, 0.30850], abs=5e-6)
    assert exact_interval(10, 10) == pytest.approx([0.69150, 1.0], abs=5e-6)
    assert exact_interval(5, 10) == pytest.approx([0.18709, 0.81291], abs=5e-6)
    lo, hi = exact_interval(5.5, 10)
    assert exact_interval(5, 10)[0] < lo < exact_interval(6, 10)[0]
    assert exact_interval(5, 10)[1] < hi < exact_interval(6, 10)[1]
    assert exact_interval(0, 0) is None


def test_the_n_minus_1_point_says_it_rests_on_one_target() -> None:
    """With every other agent colluding a run has one honest agent: one target, one trial, and
    an interval as wide as one trial leaves."""
    leak = _leak(_scenario("kwiksort", 300, 299, 50, curator=False))
    assert leak["targets"] == 1
    assert leak["differencing_trials"] == 1 and leak["differencing_wins"] == 1.0
    assert leak["differencing_interval"] == pytest.approx([0.025, 1.0])
    many = _leak(_scenario("ldp_kwiksort_rr", 600, 0.5, 200))
    assert many["report_trials"] == 200
    lo, hi = many["report_interval"]
    assert lo < many["report_accuracy"] < hi and hi - lo < 0.15


def test_a_sweeps_leakage_rests_on_its_pooled_trials(tmp_path: Path) -> None:
    """Issue 49: the summary gives each attack's accuracy with the trials it rests on, pooled
    over the repeats, and their exact interval; the figure's band is that interval and the
    n − 1 point (one target per run) says how many trials it has; the report lists them."""
    import csv

    raw = {"protocol": "kwiksort", "seed": 1, "repeats": 3,
           "data": {"kind": "mallows", "n": 200, "m": 5, "theta": 0.5},
           "runtime": {"backend": "inproc", "pools": 1, "progress": False, "secret": "seed"},
           "collusion": {"colluders": [0.0, 0.5, 199], "curator": False, "attacks": True,
                         "attack_targets": 40}}
    records, summary = run_scenario(sc.validate(raw), tmp_path, show_progress=False,
                                    echo=lambda *a, **k: None)
    rows = list(csv.DictReader(summary.open()))
    col = "leakage.differencing_accuracy"
    trials = [int(r[f"{col}_trials"]) for r in rows]
    assert trials == [120, 120, 3]  # 40 targets a run; at n - 1 colluders, one
    for r in rows:
        lo, mean, hi = float(r[f"{col}_lo"]), float(r[f"{col}_mean"]), float(r[f"{col}_hi"])
        assert 0 <= lo <= mean <= hi <= 1
    # every other agent colludes: one target a run, its exact interval from 3 trials (a win
    # each, unless the decoy's ranking is the target's: a tie, half a win)
    from ldpsim.simulator.results.intervals import exact_interval

    wins = sum(r["leakage"]["differencing_wins"] for r in records
               if r["collusion"]["colluders"] == 199)
    last = rows[-1]
    assert [float(last[f"{col}_lo"]), float(last[f"{col}_hi"])] == pytest.approx(
        exact_interval(wins, 3), abs=1e-12)
    if wins == 3:
        assert float(last[f"{col}_lo"]) == pytest.approx(0.025 ** (1 / 3), abs=1e-9)
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import ldpsim

    fig = ldpsim.load(tmp_path).plot(col)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "3 trials" in texts
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert "exact 95% interval" in legend.get_title().get_text()
    from ldpsim.simulator.results.plots import figures

    drawn = dict(figures(records))  # the figures ``ldpsim run`` writes
    fig = drawn[f"plot_{col}_vs_collusion.colluders"]
    assert "3 trials" in [t.get_text() for ax in fig.axes for t in ax.texts]
    titles = [lg.get_title().get_text() for lg in fig.legends] + [
        ax.get_legend().get_title().get_text() for ax in fig.axes if ax.get_legend()]
    assert any("exact 95% interval" in t for t in titles)
    page = ldpsim.report(tmp_path).read_text()
    assert "3 trials" in page and "120 trials" in page
