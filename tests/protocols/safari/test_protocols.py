"""End-to-end tests of the SAFARI family: backends agree, outputs are valid rankings, parameter
errors are clear, data kinds load as documented, scenario files expand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, ParamError, get_data_kind
from ldpsim.protocols.base import Block
from ldpsim.protocols.mechanisms import GRR
from ldpsim.protocols.safari import perm
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.seeding import run_keys
from ldpsim.simulator.sweep.runner import TruthCache

from tests.conftest import ROOT

LIMITS = Limits(timeout_s=20)
DATA = ROOT.parent / "shared" / "data"
SUSHI = DATA / "sushi" / "kamishima" / "sushi3a.5000.10.order"
JESTER = DATA / "jester" / "jester_ratings.csv"
FAMILY = ["safari", "safari_nopriv", "rank_grr", "rank_olh", "rank_harmony", "rank_calm"]


def config(protocol: str, n: int = 300, d: int = 5, seed: int = 4, pools: int = 2,
           params: dict | None = None, **extra) -> dict:
    cfg = {"protocol": protocol, "params": params or {},
           "data": {"kind": "safari_mallows", "n": n, "d": d, "theta": 0.3}, "seed": seed,
           "pools": pools, "agent_mode": "batched", "batch": 128,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    cfg.update(extra)
    return cfg


def score(cfg: dict, res: dict) -> dict:
    return PROTOCOLS[cfg["protocol"]].evaluate(res["output"],
                                               TruthCache().get(cfg["data"], cfg["seed"]))


@pytest.mark.parametrize("protocol", FAMILY)
def test_inproc_equals_processes(protocol):
    params = {"output_rankings": True}
    ref_cfg = config(protocol, pools=1, params=params)
    ref = run_inproc(ref_cfg, LIMITS)
    res = run_processes(config(protocol, pools=2, params=params), LIMITS)
    assert res["output"] == ref["output"]
    assert res["rejected"] == 0 and res["dropouts"] == 0
    m = score(ref_cfg, ref)
    assert m["valid_fraction"] == 1.0
    syn = np.asarray(ref["output"]["rankings"])
    assert syn.shape == (300, 5) and perm.is_permutation(syn).all()
    for k in ("avd_q1", "avd_q2", "sse_q1", "sse_q2"):
        assert 0 <= m[k] < 1
    rounds = 2 if protocol == "safari" else 1
    assert res["comm"]["rounds"] == rounds


def test_exact_agent_mode_equals_batched_and_rounds_are_accounted():
    cfg = config("safari", n=200)
    batched = run_inproc(cfg, LIMITS)
    exact = run_processes(config("safari", n=200, agent_mode="exact"), LIMITS)
    assert exact["output"] == batched["output"]
    assert exact["timing"]["agent_time_mode"] == "exact"
    r0, r1 = batched["comm"]["per_round"]
    assert r0["asked"] == r1["asked"] == 200
    assert r1["bytes_down"] > r0["bytes_down"]  # round 1 also carries the chain broadcast
    assert r0["report_bits"] == pytest.approx(math.log2(5))


def test_split_users_and_other_phase1_methods_run():
    for params in ({"split": "users", "phase1_fraction": 0.3},
                   {"rule1": "naive", "diagnostics": True},
                   {"rule1": "calm", "oracle": "harmony", "K": 2, "diagnostics": True},
                   {"regression": "ridge", "estimator": "group", "leaf_size": "upto_K",
                    "K": 2},
                   {"K": 5}):  # one leaf: GRR over the 5! rankings in round 1
        cfg = config("safari", n=400, params=params)
        res = run_inproc(cfg, LIMITS)
        m = score(cfg, res)
        assert m["valid_fraction"] == 1.0
        if params.get("diagnostics"):
            assert {"avd_s1", "avd_s2", "avd_s3"} <= set(m)
        per_round = res["comm"]["per_round"]
        if params.get("split") == "users":
            assert per_round[0]["asked"] + per_round[1]["asked"] == 400
            assert 60 < per_round[0]["asked"] < 180


def test_dropouts_in_the_second_round_are_tolerated():
    cfg = config("safari", n=400, pools=2,
                 faults=[{"pool": 1, "round": 1, "action": "silent"}])
    res = run_inproc(cfg, Limits(timeout_s=1))
    r0, r1 = res["comm"]["per_round"]
    assert r0["reported"] == 400 and r1["reported"] == 200 and res["dropouts"] == 200
    assert res["output"]["stats"]["reports"] == [400, 200]
    assert score(cfg, res)["valid_fraction"] == 1.0


def test_nopriv_exact_diagnostics_are_the_truth():
    cfg = config("safari_nopriv", n=500, params={"diagnostics": True})
    m = score(cfg, run_inproc(cfg, LIMITS))
    assert m["avd_s1"] < 1e-6 and m["avd_s2"] < 1e-6 and m["avd_s3"] < 1e-6


def test_privacy_claims():
    pub = {"d": 6, "m": 6, "n": 10}
    safari = PROTOCOLS["safari"]
    c = safari.claim(safari.resolve({"epsilon": 2.0}, pub), pub)
    assert c.model == "local" and c.epsilon == 2.0 and c.per_report_epsilon == 1.0
    c = safari.claim(safari.resolve({"epsilon": 2.0, "split": "users"}, pub), pub)
    assert c.per_report_epsilon == 2.0
    assert PROTOCOLS["safari_nopriv"].claim({}, pub).model == "none"
    for name in FAMILY[2:]:
        p = PROTOCOLS[name]
        assert p.claim(p.resolve({"epsilon": 0.5}, pub), pub).per_report_epsilon == 0.5
    for name in FAMILY:
        spec = PROTOCOLS[name].audit_spec(PROTOCOLS[name].bind({}, pub, resolved=True))
        assert spec.values.shape == (720, 6) and np.isclose(spec.prior.sum(), 1.0)
        a, b = spec.pair
        assert (spec.values[a] == spec.values[b][::-1]).all()


def test_estimate_release_is_the_raw_unbiased_marginal():
    """GRR over d! rankings: the Q1 cell (item i at rank r) of the raw estimate is
    (share of reports with i at r - q (d-1)!) / (p - q), negative cells included."""
    d, n, eps = 4, 2000, 0.7
    cfg = config("rank_grr", n=n, d=d, pools=1, params={"release": "estimate", "epsilon": eps})
    cfg["data"]["theta"] = 0.9
    res = run_inproc(cfg, LIMITS)
    proto = PROTOCOLS["rank_grr"]
    pub = {"d": d, "m": d, "n": n}
    params = proto.resolve({"epsilon": eps}, pub)
    keys = run_keys(cfg["seed"])
    data = get_data_kind("safari_mallows").build(
        {k: v for k, v in cfg["data"].items() if k != "kind"}, keys.data)
    rep = proto.respond(Block(0, data.rows(0, n), np.arange(n), keys.coins(cfg, np.arange(n)),
                              proto.bind(params, pub, resolved=True)))
    pos = perm.positions(perm.lex_unrank(rep[:, 0], d))
    p, q = GRR(eps, math.factorial(d)).p, GRR(eps, math.factorial(d)).q
    share = np.stack([np.bincount(pos[:, i], minlength=d) for i in range(d)]) / n
    expect = (share - q * math.factorial(d - 1)) / (p - q)
    got = np.asarray(res["output"]["marginals"]["q1"])
    assert np.allclose(got, expect, rtol=1e-6, atol=1e-6)
    assert res["output"]["marginals"]["source"] == "estimate" and got.min() < 0
    assert "n_synthetic" not in res["output"]
    assert score(cfg, res)["avd_q2"] > 0


def test_parameter_errors_are_clear():
    safari = PROTOCOLS["safari"]
    assert safari.resolve({"K": 5}, {"d": 5, "n": 10})["K"] == 5  # one leaf: 5! values
    with pytest.raises(ParamError, match=r"\[params\] K: Rule II domains reach 39916800"):
        safari.resolve({"K": 11}, {"d": 11, "n": 10})
    with pytest.raises(ParamError, match=r"\[params\] K: .* 125970 .*max_domain = 1000"):
        safari.resolve({"K": 8, "max_domain": 1000}, {"d": 20, "n": 10})
    with pytest.raises(ParamError, match="phase1_fraction"):
        safari.resolve({"split": "users", "phase1_fraction": 1.0}, {"d": 5, "n": 10})
    with pytest.raises(ParamError, match=r"\[data\] kind"):
        safari.resolve({}, {"m": 5})  # the rank family's kinds have no marginal truth
    for name in ("rank_grr", "rank_harmony", "rank_calm", "rank_olh"):
        with pytest.raises(ParamError, match=r"max_domain.*39916800"):
            PROTOCOLS[name].resolve({}, {"d": 11, "n": 10})
    with pytest.raises(ParamError, match="max_work"):
        PROTOCOLS["rank_olh"].resolve({}, {"d": 10, "n": 5000})
    assert PROTOCOLS["rank_olh"].resolve({"max_work": 2e10}, {"d": 10, "n": 5000})


def test_mallows_kind_is_split_independent_and_truth_is_consistent():
    kind = get_data_kind("safari_mallows")
    ds = kind.build({"n": 300, "d": 6, "phi": 0.6}, keys=11)
    assert (ds.rows(0, 300) == np.vstack([ds.rows(0, 120), ds.rows(120, 300)])).all()
    t = ds.truth()
    assert np.allclose(t["q1"].sum(axis=1), 1) and np.allclose(t["q1"].sum(axis=0), 1)
    assert np.allclose(t["q2"].sum(axis=(1, 2)), 1)
    assert np.allclose(t["q2"].sum(axis=2), t["q1"][[0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3,
                                                     4]])
    assert np.allclose(t["s3"].sum(axis=1), 1)
    assert (t["counts"] + t["counts"].T == 300 * (1 - np.eye(6))).all()
    assert ds.public == {"d": 6, "m": 6, "n": 300, "data_type": "ranking"}


@pytest.mark.skipif(not SUSHI.is_file(), reason="SUSHI data not available")
def test_sushi_subset_matches_source_counts():
    kind = get_data_kind("sushi_subset")
    full = kind.build({"path": str(SUSHI), "d": 10}, keys=0)
    assert full.n == 5000
    top = np.bincount(full.rows(0, 5000)[:, 0], minlength=10)
    assert top.tolist() == [458, 550, 404, 228, 747, 545, 206, 1713, 113, 36]  # SOURCE.md
    small = kind.build({"path": str(SUSHI), "d": 3, "n": 1000}, keys=0)
    rows = small.rows(0, 1000)
    assert rows.shape == (1000, 3) and perm.is_permutation(rows).all()
    first = full.rows(0, 1)[0]
    assert rows[0].tolist() == [i for i in first if i < 3]  # the relative order is kept


@pytest.mark.skipif(not JESTER.is_file(), reason="Jester data not available")
def test_jester_subsets():
    kind = get_data_kind("jester")
    for d, n in ((3, 862), (8, 787), (10, 557)):
        ds = kind.build({"path": str(JESTER), "d": d}, keys=0)
        assert ds.n == n and perm.is_permutation(ds.rows(0, n)).all()
    assert ds.public["items"] == [7, 8, 13, 15, 16, 17, 18, 19, 5, 20]


def scenario_files() -> list[Path]:
    return sorted((ROOT / "scenarios").glob("paper003_*.toml")) + \
        [ROOT / "scenarios" / "bench_safari.toml"]


def test_scenario_files_expand():
    from ldpsim.simulator.scenario.scenario import check_runs, load

    files = scenario_files()
    assert len(files) >= 7
    for path in files:
        sc = load(path)
        runs = sc.runs()
        assert runs, path.name
        uses_files = any("path" in r.data for r in runs)
        if not uses_files or (SUSHI.is_file() and JESTER.is_file()):
            check_runs(runs)  # every point resolves (e.g. the baselines' domain caps)


def test_safari_beats_full_domain_grr_as_d_grows():
    """Fig. 3's trend on generated data: at d = 8, ε = ln 3, n = 5000, SAFARI's first- and
    second-order marginals are closer to the truth than GRR's over the 8! rankings."""
    out = {}
    for name in ("safari", "rank_grr"):
        ms = []
        for seed in range(3):
            cfg = config(name, n=5000, d=8, seed=seed, pools=1)
            cfg["data"]["theta"] = 0.6
            ms.append(score(cfg, run_inproc(cfg, Limits(timeout_s=120))))
        out[name] = {k: np.mean([m[k] for m in ms]) for k in ("avd_q1", "avd_q2")}
    assert out["safari"]["avd_q1"] < out["rank_grr"]["avd_q1"]
    assert out["safari"]["avd_q2"] < out["rank_grr"]["avd_q2"]


def test_safari_approaches_nopriv_as_epsilon_grows():
    errs = []
    for eps in (0.5, 2.0, 8.0):
        cfg = config("safari", n=5000, d=6, pools=1, params={"epsilon": eps})
        errs.append(np.mean([score(c, run_inproc(c, Limits(timeout_s=120)))["avd_q1"]
                             for c in (cfg, {**cfg, "seed": 9})]))
    nop = config("safari_nopriv", n=5000, d=6, pools=1)
    base = score(nop, run_inproc(nop, Limits(timeout_s=120)))["avd_q1"]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < base + 0.05


@pytest.mark.slow
@pytest.mark.skipif(not SUSHI.is_file(), reason="SUSHI data not available")
def test_fig3_trend_on_sushi():
    """Fig. 3 on SUSHI (ε = ln 3, 3 runs each): SAFARI's avd_q2 beats every baseline's raw
    estimate (release = "estimate", the paper's scoring) for d >= 5, and GRR's synthetic data
    for d >= 6 — the paper's claim. (Against the simplex-projected synthetic releases of
    Harmony/OLH/CALM it does not always win: see docs/families/safari.md.)"""
    def run(name, d, **params):
        vals = []
        for seed in range(3):
            cfg = {**config(name, seed=seed, pools=1, params=params),
                   "data": {"kind": "sushi_subset", "path": str(SUSHI), "d": d}}
            vals.append(score(cfg, run_inproc(cfg, Limits(timeout_s=300)))["avd_q2"])
        return float(np.mean(vals))

    for d in (5, 6, 7, 8):
        ours = run("safari", d)
        for base in ("rank_grr", "rank_olh", "rank_harmony", "rank_calm"):
            assert ours < run(base, d, release="estimate"), (d, base)
        if d >= 6:
            assert ours < run("rank_grr", d), d


def test_reports_outside_the_asked_attributes_domain_are_rejected_by_the_runtime():
    """SAFA reports are checked against the sampled attribute's own domain (report_high)."""
    p = PROTOCOLS["safari"]
    public = {"d": 5}
    params = p.resolve({}, public)
    cur = p.make_curator(p.bind(params, public, resolved=True), np.arange(200), 7)
    first = cur.plan(0)  # Rule I: every attribute is a rank, domain d
    assert (np.asarray(first.report_high) == 4).all()
    cur.absorb(0, first.agents, np.arange(200)[:, None] % 5)
    plan = cur.plan(1)  # Rule II: the chain's attributes have different domains
    high = np.asarray(plan.report_high)
    assert high.shape == (200,) and high.max() == plan.schema.high
    assert (high < plan.schema.high).any()  # some attributes have smaller domains
    agents = plan.agents
    # a report of schema.high is inside the schema but outside some agents' domains
    reports = np.full((len(agents), 1), int(plan.schema.high))
    inside = reports[:, 0] <= high
    assert inside.any() and (~inside).any()


@pytest.mark.parametrize("epsilon", [4.0, 6.0])
def test_calm_round_reports_are_bounded_at_the_rounds_epsilon(epsilon):
    """SAFARI with rule1 = "calm" checked its OLH round's reports against the bound of ε = 1:
    at ε = 4 about half the valid reports were rejected as out of domain, at ε = 6 about 81%."""
    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.session import Limits

    cfg = {"protocol": "safari", "params": {"epsilon": epsilon, "rule1": "calm"},
           "data": {"kind": "safari_mallows", "n": 5000, "d": 4, "theta": 0.3}, "seed": 2,
           "pools": 2, "agent_mode": "batched", "batch": 4096,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    res = run_inproc(cfg, Limits(timeout_s=10))
    assert res["rejected"] == 0
    assert [r["invalid"] for r in res["comm"]["per_round"]] == [0, 0]
    assert res["comm"]["per_round"][0]["reported"] == res["comm"]["per_round"][0]["asked"]
