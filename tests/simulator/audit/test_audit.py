"""The privacy audit: sound (never refutes a correct claim), powerful (refutes a leaky one),
and its attacks use the adversary view only."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols.rank.protocols import LDPKwikSortRR
from ldpsim.simulator.audit import audit
from ldpsim.simulator.audit import audit_harness as harness
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.collusion import load_view, save_view
from scipy.stats import beta

from ldpsim import protocols


def cfg(protocol, eps=1.0, colluders=9, curator=True, n=10, m=4, **params):
    p = {} if protocol == "kwiksort" else {"epsilon": eps}
    if protocol.startswith("ldp"):
        p["queries"] = 1
    p.update(params)
    return {"protocol": protocol, "params": p,
            "data": {"kind": "mallows", "n": n, "m": m, "theta": 0.5}, "seed": 0, "pools": 1,
            "collusion": {"colluders": colluders, "curator": curator}}


# ----------------------------------------------------------------------------- statistics


def test_clopper_pearson_closed_forms():
    n, a = 50, 0.025
    assert audit.cp_lower(n, n, a) == pytest.approx(a ** (1 / n))
    assert audit.cp_upper(0, n, a) == pytest.approx(1 - a ** (1 / n))
    assert audit.cp_lower(0, n, a) == 0 and audit.cp_upper(n, n, a) == 1
    assert audit.cp_lower(20, n, a) < 20 / n < audit.cp_upper(20, n, a)


def rr_stats(eps, trials, seed):
    """LLR of one binary RR report under the two inputs: ±eps."""
    g = np.random.default_rng(seed)
    p = mech.GRR(eps).p
    s1 = np.where(g.random(trials) < p, eps, -eps)
    s0 = np.where(g.random(trials) < p, -eps, eps)
    return s0, s1


@pytest.mark.parametrize("eps", [0.25, 1.0, 3.0])
def test_epsilon_audit_is_sound_on_exact_rr(eps):
    """Over many independent audits the lower bound exceeds the true ε in at most ~α of them."""
    over = sum(audit.epsilon_audit(*rr_stats(eps, 2000, s))["epsilon_lower"] > eps
               for s in range(40))
    # P(>= 6 of 40 | rate <= 0.05) < 0.05: a sound 95% bound passes this test
    assert over <= 5


def test_epsilon_audit_approaches_eps_with_enough_trials():
    r = audit.epsilon_audit(*rr_stats(1.0, 40000, 1))
    assert 0.8 <= r["epsilon_lower"] <= 1.0
    assert r["epsilon_estimate"] == pytest.approx(1.0, abs=0.1)


def test_epsilon_audit_sees_a_perfect_separator():
    s0, s1 = np.zeros(1000), np.ones(1000)
    r = audit.epsilon_audit(s0, s1)
    assert math.isinf(r["epsilon_estimate"])
    # no false positive in 500 held-out trials: ln(0.025^(1/500) / (1 - 0.025^(1/500)))
    b = 0.025 ** (1 / 500)
    assert r["epsilon_lower"] == pytest.approx(math.log(b / (1 - b)))


# ----------------------------------------------------------------------- end to end (inproc)


def test_ldp_kwiksort_rr_claim_holds_and_attacks_stay_near_the_prior():
    rec = harness.audit_setting(harness.make_setting(cfg("ldp_kwiksort_rr"), 1), 600)
    assert rec["test"] == "likelihood ratio" and not rec["flagged"]
    assert 0 < rec["epsilon_lower"] <= 1.0 and rec["colluders"] == 9
    # one RR bit at eps = 1 about one of 6 pairs: the MAP guess among 24 rankings stays poor
    se = math.sqrt(0.25 / 600)
    assert rec["bayes_accuracy"] < rec["prior_baseline"] + 0.1 + 5 * se


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["ldp_kwiksort_rr", "ldp_kwiksort_lap"])
def test_ldp_kwiksort_lower_bound_within_20_percent(protocol):
    rec = harness.audit_setting(harness.make_setting(cfg(protocol), 1), 6000)
    assert 0.8 <= rec["epsilon_lower"] <= 1.0


def test_central_dp_kwiksort_gives_no_protection_against_a_colluding_curator():
    rec = harness.audit_setting(harness.make_setting(cfg("dp_kwiksort"), 1), 200)
    assert rec["claim_model"] == "central" and rec["flagged"]
    assert rec["bayes_accuracy"] == 1.0  # the curator reads the target's true answers


def test_differencing_recovers_the_target_from_a_non_private_aggregate():
    # curator trusted (not in the coalition), n - 1 agents collude: output minus their rows
    rec = harness.audit_setting(harness.make_setting(cfg("kwiksort", curator=False), 1), 100)
    assert rec["bayes_accuracy"] is None  # reports are not in this coalition's view
    assert rec["differencing_accuracy"] == 1.0


def test_trusted_curator_dp_kwiksort_claim_is_not_refuted():
    rec = harness.audit_setting(harness.make_setting(cfg("dp_kwiksort", curator=False), 1), 300)
    assert rec["test"] == "linear discriminant" and not rec["flagged"]


class LeakyRR(LDPKwikSortRR):
    """A broken randomizer: claims ε-LDP randomized response but sends the true answers."""

    name = "leaky_rr"

    def respond(self, block):
        return self._queried_answers(block.rows, block.queries)


def test_audit_flags_a_leaky_mechanism(monkeypatch):
    monkeypatch.setitem(protocols.PROTOCOLS, "leaky_rr", LeakyRR())
    rec = harness.audit_setting(harness.make_setting(cfg("leaky_rr"), 1), 200)
    assert rec["flagged"] and rec["epsilon_lower"] > 3


def test_attacks_use_only_the_adversary_view(tmp_path):
    """The same view, saved to disk and reloaded, gives the same guesses and statistics."""
    setting = harness.make_setting(cfg("ldp_kwiksort_rr", colluders=5), 3)
    p = protocols.get_protocol("ldp_kwiksort_rr")
    trials = harness.Trials(setting, Limits(timeout_s=5))
    params = p.resolve(setting.config["params"], {"m": 4})
    spec = p.audit_spec(p.bind(params, {"m": 4}, resolved=True))
    view = trials.view(0, spec.values[7])
    again = load_view(save_view(tmp_path / "v.msgpack", view))
    t = setting.target
    assert t not in setting.colluders.tolist()
    for f in (audit.bayes_guess, audit.differencing_guess, audit.llr_statistic):
        assert f(view, t, p, spec) == f(again, t, p, spec)
    # the curator never holds the target's row: the override reaches its pool only
    assert all(int(a) != t for a in view["disclosures"])


def test_target_stays_honest_under_maximal_collusion():
    s = harness.make_setting(cfg("ldp_kwiksort_rr", colluders=50), 1, target=0)
    assert s.target == 0 and 0 not in s.colluders.tolist() and len(s.colluders) == 9


@pytest.mark.parametrize("protocol", ["dpwevote", "dpwevote_laplace"])
def test_dpwevote_claims_hold_under_maximal_collusion(protocol):
    c = {"protocol": protocol, "params": {"epsilon": 1.0},
         "data": {"kind": "weighted_votes", "n": 10, "candidates": 2}, "seed": 0, "pools": 1,
         "collusion": {"colluders": 9, "curator": True}}
    rec = harness.audit_setting(harness.make_setting(c, 1), 400)
    assert rec["test"] == "likelihood ratio" and rec["colluders"] == 9
    assert not rec["flagged"] and rec["epsilon_lower"] <= 1.0


@pytest.mark.slow
def test_dpwevote_lower_bound_within_20_percent():
    c = {"protocol": "dpwevote", "params": {"epsilon": 1.0},
         "data": {"kind": "weighted_votes", "n": 10, "candidates": 1}, "seed": 0, "pools": 1,
         "collusion": {"colluders": 9, "curator": True}}
    rec = harness.audit_setting(harness.make_setting(c, 1), 12000)
    assert 0.8 <= rec["epsilon_lower"] <= 1.0


def test_ethics_central_aggregator_learns_everything_when_it_colludes():
    """Wang et al., 2019, Algorithm 1 trusts the aggregator: colluding, it reads every voter's
    β_i."""
    c = {"protocol": "ethics_vlcp", "params": {"epsilon": 1.0},
         "data": {"kind": "ethics_synthetic", "n": 10, "d": 2, "records": 13,
                  "test_instances": 200}, "seed": 0, "pools": 1,
         "collusion": {"colluders": 9, "curator": True}}
    rec = harness.audit_setting(harness.make_setting(c, 1), 150)
    assert rec["claim_model"] == "central" and rec["flagged"]
    assert rec["bayes_accuracy"] == 1.0


def test_dpwevote_differencing_uses_the_released_estimates():
    """n - 1 colluders know their rows: the released q̂ and Σŵφ minus theirs point at the
    target. Under LDP it stays far from certain; without privacy it would be exact."""
    p = protocols.get_protocol("dpwevote")
    public = {"candidates": 1}
    rows = np.array([[1, 0], [3, 1], [2, 1]])
    params = p.resolve({"epsilon": 1.0}, public)
    assert p.true_aggregate(p.bind(params, public, resolved=True), rows).tolist() == [3.0, 5.0]
    out = {"q_hat": 4.0, "sum_hat": [8.0]}
    spec = p.audit_spec(p.bind(params, public, resolved=True))
    view = {"output": out, "params": params, "public": public,
            "disclosures": {1: {"data": rows[1]}, 2: {"data": rows[2]}}}
    # residual (4 - 2.5, 8 - 5) = (1.5, 3): exactly the contribution (w/2, w·φ) of [3, Yes]
    guess = audit.differencing_guess(view, 0, p, spec)
    assert spec.values[guess].tolist() == [3, 1]


# ------------------------------------------------------------- the floating-point attack

class _TextbookLaplaceVote(protocols.get_protocol("dpwevote_laplace").__class__):
    """DPWeVote-Laplace as it once was: textbook float Laplace ``v + L(u)`` (a test double)."""

    name = "dpwevote_laplace_textbook"

    def respond(self, block):
        from ldpsim.protocols import rng as rngm

        values, scales, _ = self.laplace_release(block)
        return values + rngm.laplace_from_uniform(block.uniforms(1), scales)

    def laplace_release(self, block):
        values, scales, _ = super().laplace_release(block)
        return values, scales, None  # no grid: the float release


def _vote(protocol: str) -> dict:
    return {"protocol": protocol, "params": {"epsilon": 1.0},
            "data": {"kind": "weighted_votes", "n": 10, "candidates": 1}, "seed": 0,
            "pools": 1, "collusion": {"colluders": 9, "curator": True}}


def test_float_attack_refutes_textbook_laplace_at_any_claimed_epsilon(monkeypatch):
    monkeypatch.setitem(protocols.PROTOCOLS, "dpwevote_laplace_textbook",
                        _TextbookLaplaceVote())
    rec = harness.audit_setting(harness.make_setting(_vote("dpwevote_laplace_textbook"), 1), 200)
    assert rec["flagged"] and rec["epsilon_lower"] <= 1.0  # the likelihood test saw nothing
    assert rec["float_own_failures"] == 0.0  # the attack models the generator exactly
    assert rec["float_ruled_out"] > 0.3 and rec["float_epsilon_lower"] > 3.0


@pytest.mark.parametrize("config", [
    _vote("dpwevote_laplace"),
    cfg("ldp_kwiksort_lap"),
    {"protocol": "ethics_vldp", "params": {"epsilon": 1.0},
     "data": {"kind": "ethics_synthetic", "n": 10, "d": 2, "records": 13,
              "test_instances": 50}, "seed": 0, "pools": 1,
     "collusion": {"colluders": 9, "curator": True}},
    {"protocol": "ethics_rldp_fm", "params": {"epsilon": 1.0, "report": "coefficients"},
     "data": {"kind": "ethics_synthetic", "n": 10, "d": 2, "records": 13,
              "test_instances": 50}, "seed": 0, "pools": 1,
     "collusion": {"colluders": 9, "curator": True}},
], ids=["dpwevote_laplace", "ldp_kwiksort_lap", "ethics_vldp", "ethics_rldp_fm_coefficients"])
def test_float_attack_passes_every_shipped_laplace_release(config):
    rec = harness.audit_setting(harness.make_setting(config, 1), 150)
    assert rec["float_own_failures"] == 0.0 and rec["float_ruled_out"] == 0.0
    assert rec["float_epsilon_lower"] == 0.0 and not rec["flagged"]


def test_the_beta_quantile_is_scipy_stats_bit_for_bit():
    """``audit.beta_ppf`` (scipy.special, light to import) gives exactly what
    ``scipy.stats.beta.ppf`` gives at the tails the audit's bounds use (α/2 and 1 - α/2 of
    every look's α), on integer and fractional shapes."""
    g = np.random.default_rng(5)
    a = np.concatenate([g.integers(1, 10**7, 300), g.uniform(0.01, 1e6, 300), [1.0, 2.0]])
    b = np.concatenate([g.integers(1, 10**7, 300), g.uniform(0.01, 1e6, 300), [1.0, 1e9]])
    for alpha in (audit.ALPHA, audit.ALPHA / 2, audit.ALPHA / 4, audit.ALPHA / 8):
        for q in (alpha / 2, 1 - alpha / 2):
            want = beta.ppf(q, a, b)
            got = np.array([audit.beta_ppf(q, x, y) for x, y in zip(a, b, strict=True)])
            assert got.tobytes() == want.tobytes()
