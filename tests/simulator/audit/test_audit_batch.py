"""The audit's batch path (``simulator.audit.audit_batch``) against the full path it replaces: the
same records from the same seeds wherever it is used, the full path kept where it cannot be,
and the statistics around it (early stopping, trials needed, parallel full-path trials)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, get_protocol
from ldpsim.protocols.keys import run_seed
from ldpsim.protocols.safari import perm
from ldpsim.simulator.audit import audit_harness as harness
from ldpsim.simulator.audit.audit import _eps_lower, differencing_guess
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session.seeding import run_id, run_keys

from tests.conftest import ROOT

#: the record fields both paths must agree on exactly
SAME = ("epsilon_estimate", "epsilon_lower", "tpr", "fpr", "test", "float_epsilon_lower",
        "float_ruled_out", "float_own_failures", "bayes_accuracy", "differencing_accuracy",
        "trials", "confidence")
#: the settings that must run as a batch with fresh coalition coins in every trial (every
#: local protocol with a closed-form likelihood whose target's rounds read no broadcast that
#: changes from run to run, or whose statistic does not depend on it), and those that must run
#: as a batch with the coalition's coins fixed at trial 0's (SAFARI's second round reads the
#: chain learned from everyone's first reports). MF's curator draws V afresh in every run, but
#: its audit pair (NULL vs an answer, with different G) gives the exact grid release an
#: infinite likelihood ratio whatever V is: the fresh-coins batch reproduces the full runs.
BATCH = {"ldp_kwiksort_rr", "ldp_kwiksort_lap", "dp_kwiksort", "kwiksort", "dpwevote",
         "dpwevote_laplace", "truth_lp", "truth_rr", "truth_two_layer", "truth_plain",
         "rank_grr", "rank_olh", "rank_harmony", "rank_calm", "safari_nopriv", "ethics_vlcp",
         "ethics_vldp", "ethics_rldp_fm", "ethics_nonprivate"}
#: their later rounds read what the curator draws afresh in every run (SAFARI's chain, MF's V):
#: the batch reproduces the full runs (their reports, not only the test statistic) only with
#: the coalition's coins fixed
FIXED = {"safari", "truth_mf"}


def _settings():
    out = []
    for name in ("audit_rank", "audit_vote", "audit_truth", "audit_safari", "audit_ethics"):
        s = sc.load(ROOT / "scenarios" / f"{name}.toml")
        seen = set()
        for spec in s.runs():
            if spec.repeat == 0 and spec.protocol not in seen:
                seen.add(spec.protocol)  # one parameter point per protocol
                out.append(pytest.param(spec.config(), s.seed, id=spec.protocol))
    return out


@pytest.mark.parametrize(("config", "seed"), _settings())
def test_batch_and_full_paths_give_the_same_record(config, seed):
    setting = harness.make_setting(config, seed)
    auto = harness.audit_setting(setting, 40, differencing_trials=40)
    name = config["protocol"]
    assert name in BATCH | FIXED
    assert auto["path"] == "batch", auto["path_note"]
    assert auto["coalition_coins"] == ("fixed" if name in FIXED else "per-trial")
    full = harness.audit_setting(setting, 40, path="full", coins=auto["coalition_coins"])
    assert full["path"] == "full" and full["coalition_coins"] == auto["coalition_coins"]
    for k in SAME:
        a, b = auto[k], full[k]
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), k


def test_a_setting_that_cannot_run_as_a_batch_says_why():
    """Without the curator in the coalition the view is the released aggregate: full runs."""
    s = sc.load(ROOT / "scenarios" / "audit_safari.toml")
    spec = next(x for x in s.runs() if x.protocol == "safari")
    cfg = dict(spec.config(), collusion={"colluders": 9, "curator": False})
    setting = harness.make_setting(cfg, s.seed)
    with pytest.raises(ValueError, match="safari cannot run as a batch: the curator is not"):
        harness.audit_setting(setting, 40, path="batch")
    rec = harness.audit_setting(setting, 40)
    assert rec["path"] == "full" and "curator is not in the coalition" in rec["path_note"]
    assert rec["coalition_coins"] == "per-trial"


def _safari_setting():
    s = sc.load(ROOT / "scenarios" / "audit_safari.toml")
    spec = next(x for x in s.runs() if x.protocol == "safari")
    return harness.make_setting(spec.config(), s.seed)


def test_fresh_coalition_coins_cannot_batch_safari_and_say_why():
    """With fresh coalition coins every trial's chain is learned from other reports: only
    full runs reproduce it, so ``coins="per-trial"`` keeps SAFARI on the full path."""
    setting = _safari_setting()
    with pytest.raises(ValueError, match="safari cannot run as a batch with per-trial"):
        harness.audit_setting(setting, 40, path="batch", coins="per-trial")
    rec = harness.audit_setting(setting, 40, coins="per-trial")
    assert rec["path"] == "full" and rec["coalition_coins"] == "per-trial"
    assert "round 1" in rec["path_note"]


def test_fixed_coalition_coins_change_only_the_targets_coins():
    """In the fixed-coins experiment trial t is trial 0's run with the target's coins of run t:
    the coalition's own reports and the curator's queries stay put, the target's move, and
    with a different row the chain the curator learns (round 1's broadcast) follows the
    target's first report."""
    setting = _safari_setting()
    runner = harness.Trials(setting, harness.Limits(timeout_s=10), coins="fixed")
    fresh = harness.Trials(setting, harness.Limits(timeout_s=10))
    protocol = harness.get_protocol("safari")
    spec = protocol.audit_spec(protocol.bind(setting.config["params"], setting.public))
    row = spec.values[spec.pair[0]]
    t = setting.target
    v0 = fresh.view(0, row)
    assert _round0_reports(runner.view(0, row), t) == _round0_reports(v0, t)
    moved = 0
    for trial in range(1, 6):
        a, b = runner.view(trial, row), fresh.view(trial, row)
        others_a, mine_a = _round0_reports(a, t)
        others_b, _ = _round0_reports(b, t)
        assert others_a == _round0_reports(v0, t)[0]  # the coalition's reports: trial 0's
        assert others_b != others_a  # fresh coins would move them
        assert a["rounds"][0]["queries"].tolist() == v0["rounds"][0]["queries"].tolist()
        moved += mine_a != _round0_reports(v0, t)[1]
    assert moved >= 1  # the target's own coins are run t's


def _round0_reports(view, target):
    r = view["rounds"][0]
    ra = list(map(int, r["report_agents"]))
    reps = [list(map(int, np.ravel(x))) for x in r["reports"]]
    i = ra.index(target)
    return reps[:i] + reps[i + 1:], reps[i]


def _rank_setting(**over):
    cfg = {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 1},
           "data": {"kind": "mallows", "n": 10, "m": 4, "theta": 0.5}, "seed": 0, "pools": 1,
           "collusion": {"colluders": 9, "curator": True}}
    cfg.update(over)
    return harness.make_setting(cfg, 1)


@pytest.mark.parametrize(("config", "seed"), _settings())
def test_the_round_loop_gives_the_differencing_attack_what_full_runs_give(config, seed):
    """``Trials.local_view`` (the batch path's differencing runs, without the runtime):
    the same released aggregate, colluders' rows, parameters and public facts, bit for bit,
    in either experiment, so the same differencing guess."""
    setting = harness.make_setting(config, seed)
    coins = "fixed" if config["protocol"] in FIXED else "per-trial"
    runner = harness.Trials(setting, harness.Limits(timeout_s=10), coins)
    protocol = runner.protocol
    spec = protocol.audit_spec(protocol.bind(setting.config["params"], setting.public))
    for t in (1, 7):
        row = spec.values[t % len(spec.values)]
        full = runner.view(t, row)
        assert harness._same_differencing(runner, full, t, row)
        assert differencing_guess(runner.local_view(t, row), setting.target, protocol, spec) \
            == differencing_guess(full, setting.target, protocol, spec)


@pytest.mark.parametrize("coins", ["per-trial", "fixed"])
def test_the_round_loops_keys_are_the_runs(coins):
    """``Trials.local_keys`` of a range of trials: each trial's coin and data keys as its run
    keys them (in the fixed-coins experiment run 0's, but the target's coins of run t)."""
    setting = _rank_setting()
    runner = harness.Trials(setting, harness.Limits(timeout_s=10), coins)
    keys = runner.local_keys(3, 5)
    assert keys.first == 3 and keys.coins.shape == keys.data.shape == (5, setting.n)
    coins_k, data_k = keys.coins, keys.data
    cfg, agents = setting.config, np.arange(setting.n)
    for i, t in enumerate(range(3, 8)):
        seed = run_seed(setting.scenario_seed, 0 if coins == "fixed" else t)
        assert int(keys.seeds[i]) == seed
        assert int(keys.tags[i]) == run_id(dict(cfg, seed=seed))
        run = run_keys(seed)
        want = run.coins(cfg, agents)
        if coins == "fixed":
            want[setting.target] = harness.target_coins(setting, t)
        assert coins_k[i].tolist() == want.tolist()
        assert data_k[i].tolist() == run.data.range(0, setting.n).tolist()


def _differencing(rec):
    return rec["differencing_accuracy"], rec["differencing_trials"]


def test_the_batch_paths_differencing_statistics_are_the_full_paths(monkeypatch):
    """With all but the first two differencing runs made by the round loop, the batch path's
    differencing statistics are the full path's; a round loop that disagrees with the
    runtime's first runs leaves every run to the runtime."""
    setting = _rank_setting()
    full = harness.audit_setting(setting, 60, path="full")
    monkeypatch.setattr(harness, "DIFF_CHECK", 2)
    calls = []
    local_view = harness.Trials.local_view

    def counted(self, trial, row, keys=None):
        calls.append(trial)
        return local_view(self, trial, row, keys)

    monkeypatch.setattr(harness.Trials, "local_view", counted)
    batch = harness.audit_setting(setting, 60, path="batch", differencing_trials=60)
    assert batch["path"] == "batch" and _differencing(batch) == _differencing(full)
    assert full["differencing_trials"] == 60 and len(calls) == 60  # 2 checks, 58 runs

    def wrong(self, trial, row, keys=None):
        calls.append(trial)
        view = local_view(self, trial, row, keys)
        view["output"] = dict(view["output"], cmp_hat=[0.0] * len(view["output"]["cmp_hat"]))
        return view

    calls.clear()
    monkeypatch.setattr(harness.Trials, "local_view", wrong)
    fallback = harness.audit_setting(setting, 60, path="batch", differencing_trials=60)
    assert _differencing(fallback) == _differencing(full) and len(calls) == 1


def test_parallel_full_path_trials_give_the_same_record():
    one = harness.audit_setting(_rank_setting(), 60, path="full")
    two = harness.audit_setting(_rank_setting(), 60, path="full", jobs=2)
    assert all(one[k] == two[k] for k in SAME)
    assert one["trials_per_second"] > 0


def test_batch_blocks_in_parallel_processes_give_the_same_record():
    """The ε audit's blocks and the inference's ranges (65536 trials) over 2 processes."""
    one = harness.audit_setting(_rank_setting(), 2 * 65536 + 5)
    two = harness.audit_setting(_rank_setting(), 2 * 65536 + 5, jobs=2)
    assert one["path"] == two["path"] == "batch"
    assert all(one[k] == two[k] for k in SAME)


def test_until_lower_stops_early_and_spends_alpha_over_the_looks():
    rec = harness.audit_setting(_rank_setting(), 160000, until_lower=0.9)
    # RR at eps = 1 brings the bound to 0.9 with a few 10^4 trials (at alpha = 0.05, 20000
    # give about 0.90, 40000 about 0.97): it stops at the first or the second look, each of
    # which spends alpha / 8, long before the 160000 asked for
    assert rec["trials"] in (20000, 40000) and rec["trials_requested"] == 160000
    assert rec["epsilon_lower"] >= 0.9 and not rec["flagged"]
    assert rec["confidence"] == pytest.approx(1 - 0.05 / 8)
    never = harness.audit_setting(_rank_setting(), 400, until_lower=5.0)
    assert never["trials"] == 400 and never["confidence"] == pytest.approx(1 - 0.05 / 2)


def test_trials_needed_is_the_least_count_that_reaches_the_target():
    tpr, fpr = math.e / (1 + math.e), 1 / (1 + math.e)  # RR at eps = 1: the ideal region
    grid = [harness.expected_lower(tpr, fpr, n) for n in (10**3, 10**4, 10**5, 10**6)]
    assert grid == sorted(grid) and grid[-1] < 1.0
    for target in (0.8, 0.9, 0.95):
        n = harness.trials_needed(tpr, fpr, target)
        assert harness.expected_lower(tpr, fpr, n) >= target
        assert harness.expected_lower(tpr, fpr, int(n * 0.995)) < target
        # the bound with integer counts agrees with the smooth one to within its rounding
        h = n // 2
        assert abs(_eps_lower(round(tpr * h), round(fpr * h), h, 0.05) - target) < 0.02
    assert harness.trials_needed(tpr, fpr, 1.01) is None  # beyond the true epsilon
    assert harness.trials_needed(0.0, 0.0, 0.5) is None


def test_batch_audit_of_a_correct_claim_is_sound_and_tight():
    """10^5 trials on the batch path: the bound stays below the claim and comes within 5%."""
    rec = harness.audit_setting(_rank_setting(), 100000)
    assert rec["path"] == "batch" and not rec["flagged"]
    assert 0.95 <= rec["epsilon_lower"] <= 1.0
    assert rec["trials_needed"] is not None and rec["trials_needed"] < 100000


@pytest.mark.slow
@pytest.mark.parametrize("name", ["safari", "truth_mf"])
def test_a_million_trials_of_the_adaptive_settings(name):
    """SAFARI and MF at 10^6 trials on the batch path (SAFARI with fixed coalition coins, MF
    with fresh ones: ``BATCH``): SAFARI's claim holds and comes within 5%; MF's NULL <-> answer
    gap (Theorem 4) is refuted, with disjoint supports (ε̂ = ∞)."""
    scen = "audit_safari" if name == "safari" else "audit_truth"
    s = sc.load(ROOT / "scenarios" / f"{scen}.toml")
    spec = next(x for x in s.runs() if x.protocol == name)
    rec = harness.audit_setting(harness.make_setting(spec.config(), s.seed), 10**6)
    assert rec["path"] == "batch"
    assert rec["coalition_coins"] == ("fixed" if name == "safari" else "per-trial")
    if name == "safari":
        assert not rec["flagged"] and 0.95 <= rec["epsilon_lower"] <= 1.0
    else:
        assert rec["flagged"] and rec["epsilon_lower"] > 1.0
        assert rec["fpr"] == 0.0 and rec["tpr"] == 1.0  # every trial told apart


@pytest.mark.slow
def test_a_million_trials_of_ldp_kwiksort_rr():
    """The issue's target: 10^6 trials, epsilon_lower >= 0.95, no false flag."""
    rec = harness.audit_setting(_rank_setting(), 10**6)
    assert rec["path"] == "batch" and not rec["flagged"]
    assert rec["epsilon_lower"] >= 0.95
    assert np.isfinite(rec["trials_per_second"])


class _LeakyRoundTwoSafari(get_protocol("safari").__class__):
    """SAFARI whose second round sends the queried Rule II value unperturbed while claiming
    ε (a test double): the leak sits behind the broadcast the curator learns from round 0."""

    name = "leaky_safari"

    def respond(self, block):
        out = np.asarray(super().respond(block))
        if block.rnd != 1:
            return out
        rule = self._round_rule(1, block.broadcast, block.params, int(block.public["d"]))
        attrs = np.asarray(block.queries, dtype=np.int64).reshape(len(block.rows), -1)[:, 0]
        true = rule.values(perm.positions(block.rows), attrs)
        return np.asarray(true, dtype=out.dtype).reshape(out.shape)


def test_the_fixed_coins_batch_flags_a_leak_behind_a_learned_broadcast(monkeypatch):
    monkeypatch.setitem(PROTOCOLS, "leaky_safari", _LeakyRoundTwoSafari())
    s = sc.load(ROOT / "scenarios" / "audit_safari.toml")
    spec = next(x for x in s.runs() if x.protocol == "safari")
    cfg = dict(spec.config(), protocol="leaky_safari")
    rec = harness.audit_setting(harness.make_setting(cfg, s.seed), 400)
    assert rec["path"] == "batch" and rec["coalition_coins"] == "fixed"
    assert rec["flagged"] and rec["epsilon_lower"] > 2
    honest = harness.audit_setting(harness.make_setting(spec.config(), s.seed), 400)
    assert not honest["flagged"]


def test_the_command_takes_the_experiment_and_records_it(tmp_path, capsys):
    from ldpsim.simulator.cli import main

    scen = str(ROOT / "scenarios" / "audit_rank.toml")
    args = ["audit", scen, "--trials", "40", "--set", "protocols=['ldp_kwiksort_rr']",
            "--no-progress", "--out"]
    assert main(args + [str(tmp_path / "a"), "--coins", "fixed"]) == 0
    assert main(args + [str(tmp_path / "b")]) == 0
    fixed = json.loads((tmp_path / "a" / "audit.jsonl").read_text())
    auto = json.loads((tmp_path / "b" / "audit.jsonl").read_text())
    assert fixed["coalition_coins"] == "fixed" and fixed["path"] == "batch"
    assert auto["coalition_coins"] == "per-trial"
    with pytest.raises(SystemExit):
        main(args + [str(tmp_path / "c"), "--coins", "none"])
    assert "--coins" in capsys.readouterr().err
