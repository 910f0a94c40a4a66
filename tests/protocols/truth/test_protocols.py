"""The five truth-inference protocols of Sun et al., 2018 as the runtime drives them: registry,
claims, parameter errors, batched = per-agent reports, inproc = processes outputs, audit specs, and
the paper's qualitative findings on small data."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS, ParamError
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.truth import mechanisms as tm
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits
from ldpsim.simulator.sweep.runner import TruthCache

NAMES = ["truth_plain", "truth_lp", "truth_rr", "truth_mf", "truth_two_layer"]
LIMITS = Limits(timeout_s=20)
KEY = rngm.stream_key(31, "agents")


def config(protocol: str, n: int = 120, tasks: int = 24, sparsity: float = 0.8,
           pools: int = 2, seed: int = 3, **params) -> dict:
    if protocol != "truth_plain":
        params.setdefault("epsilon", 1.0)
    if protocol == "truth_mf":
        params.setdefault("d", 4)
    return {"protocol": protocol, "params": params,
            "data": {"kind": "crowd_synthetic", "n": n, "tasks": tasks, "sparsity": sparsity},
            "seed": seed, "pools": pools, "agent_mode": "batched", "batch": 50,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def score(cfg: dict, res: dict) -> dict:
    return PROTOCOLS[cfg["protocol"]].evaluate(res["output"], TruthCache().get(cfg["data"],
                                                                               cfg["seed"]))


def _data(n=60, tasks=20, sparsity=0.7, seed=2):
    return DATA_KINDS["crowd_synthetic"].build({"n": n, "tasks": tasks, "sparsity": sparsity},
                                               keys=rngm.stream_key(seed, "data"))


# --------------------------------------------------------------------------- registry, claims


def test_registry_and_data_kinds():
    for name in NAMES:
        assert PROTOCOLS[name].name == name and PROTOCOLS[name].data_type == "answers"
    for kind in ("crowd_synthetic", "crowd_web", "crowd_adultcontent"):
        assert DATA_KINDS[kind].data_type == "answers"


def test_claims():
    public = {"tasks": 20, "levels": 10}

    def claim(name, **p):
        proto = PROTOCOLS[name]
        return proto.claim(proto.resolve(p, public), public)

    assert claim("truth_plain").model == "none"
    lp = claim("truth_lp", epsilon=2.0)
    assert (lp.model, lp.epsilon, lp.sensitivity, lp.mechanism) == ("local", 2.0, 10.0,
                                                                     "laplace")
    rr = claim("truth_rr", epsilon=0.5)
    assert (rr.model, rr.epsilon, rr.per_report_epsilon) == ("local", 0.5, 0.5)
    tl = claim("truth_two_layer", epsilon=1.0, spread=0.5)
    assert tl.epsilon == pytest.approx(1.5) and "nominal" in tl.notes
    m = claim("truth_mf", epsilon=1.0)
    assert (m.model, m.epsilon, m.sensitivity) == ("local", 1.0, 10.0)
    assert "not covered" in m.notes
    assert "not covered" not in claim("truth_mf", null_mode="uniform").notes


@pytest.mark.parametrize("name,params,match", [
    ("truth_lp", {"fill_value": 12.0}, r"\[params\] fill_value: got 12.0; allowed: .*\[0, 9\]"),
    ("truth_mf", {"d": 21}, r"\[params\] d: got 21; allowed: an integer in \[1, 20\]"),
    ("truth_mf", {"ridge": 0.0}, r"\[params\] ridge"),
    ("truth_mf", {"null_mode": "zero"}, r"\[params\] null_mode"),
    ("truth_two_layer", {"spread": 1.5}, r"\[params\] spread"),
    ("truth_rr", {"epsilon": 0.0}, r"\[params\] epsilon"),
])
def test_parameter_errors_name_the_key(name, params, match):
    with pytest.raises(ParamError, match=match):
        PROTOCOLS[name].resolve(params, {"tasks": 20, "levels": 10})


# --------------------------------------------------------------------------- agents


VARIANTS = [("truth_plain", {}), ("truth_lp", {}), ("truth_lp", {"null_fill": "constant"}),
            ("truth_rr", {}), ("truth_two_layer", {}), ("truth_mf", {"d": 5}),
            ("truth_mf", {"d": 5, "null_mode": "uniform", "send": "u"}),
            ("truth_mf", {"d": 5, "profiles": "gaussian", "null_mode": "constant"})]


@pytest.mark.parametrize("name,params", VARIANTS)
def test_batched_reports_equal_per_agent_reports(name, params):
    ds = _data()
    rows = ds.rows(0, ds.n)
    rows[::4, :3] = np.nan  # workers with different numbers of answers
    proto = PROTOCOLS[name]
    if name != "truth_plain":
        params = {"epsilon": 0.7, **params}
    resolved = proto.resolve(params, ds.public)
    bound = proto.bind(resolved, ds.public, resolved=True)
    plan = proto.make_curator(bound, np.arange(ds.n), 5).plan(0)
    agents = np.arange(ds.n, dtype=np.int64)
    batched = proto.respond(Block(0, rows, agents, KEY, bound, broadcast=plan.broadcast))
    single = np.concatenate([proto.respond(Block(0, rows[i:i + 1], agents[i:i + 1], KEY, bound,
                                                 broadcast=plan.broadcast))
                             for i in range(ds.n)])
    assert np.array_equal(batched, single)
    ok, _ = plan.schema.validate(batched.tolist())
    assert ok.all()


def test_every_cell_is_reported_so_null_positions_are_not_revealed():
    ds = _data(sparsity=0.9)
    rows = ds.rows(0, ds.n)
    for name in NAMES[1:]:
        proto = PROTOCOLS[name]
        resolved = proto.resolve({"epsilon": 1.0} | ({"d": 5} if name == "truth_mf" else {}),
                                 ds.public)
        bound = proto.bind(resolved, ds.public, resolved=True)
        plan = proto.make_curator(bound, np.arange(ds.n), 5).plan(0)
        rep = proto.respond(Block(0, rows, np.arange(ds.n), KEY, bound, broadcast=plan.broadcast))
        assert rep.shape == (ds.n, plan.schema.length)
        if plan.schema.dtype == "float":
            assert np.isfinite(rep).all()
        else:  # RR-type reports: NULL cells become answers and answers become NULL
            null = np.isnan(rows)
            assert (rep[null] != ds.levels).any() and (rep[~null] == ds.levels).any()


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("protocol", NAMES)
def test_inproc_equals_processes(protocol):
    ref = run_inproc(config(protocol, pools=1), LIMITS)
    res = run_processes(config(protocol, pools=2), LIMITS)
    assert res["output"] == ref["output"]
    assert res["rejected"] == 0 and res["dropouts"] == 0
    msgpack.packb(res["output"])  # plain msgpack types only
    metrics = score(config(protocol), res)
    assert set(metrics) == {"mae", "mae_change", "mae_original", "mae_vs_original", "corr"}
    if protocol == "truth_plain":
        assert metrics["mae_change"] == 0.0 and metrics["mae_vs_original"] == 0.0


def test_mf_exact_agent_mode_equals_batched_and_counts_the_broadcast_per_worker():
    cfg = config("truth_mf", n=80, tasks=30, d=6)
    batched = run_inproc(cfg, LIMITS)
    exact = run_processes({**cfg, "agent_mode": "exact"}, LIMITS)
    assert exact["output"] == batched["output"]
    assert exact["timing"]["agent_time_mode"] == "exact"
    # the 6 x 30 float64 V broadcast (1440 bytes of data) counts once per receiving worker
    assert batched["comm"]["bytes_down_per_agent_mean"] > 6 * 30 * 8
    assert batched["comm"]["report_bits_per_agent"] == 64 * 30
    small = run_inproc(config("truth_mf", n=80, tasks=30, d=6, send="u"), LIMITS)
    assert small["comm"]["bytes_up_per_agent_mean"] < batched["comm"]["bytes_up_per_agent_mean"]


def test_curator_tolerates_missing_workers():
    proto = PROTOCOLS["truth_rr"]
    ds = _data()
    params = proto.resolve({"epsilon": 2.0}, ds.public)
    bound = proto.bind(params, ds.public, resolved=True)
    cur = proto.make_curator(bound, np.arange(ds.n), 1)
    plan = cur.plan(0)
    keep = np.arange(0, ds.n, 3)
    rep = proto.respond(Block(0, ds.rows(0, ds.n)[keep], keep, KEY, bound))
    cur.absorb(0, keep, rep)
    assert cur.plan(1) is None
    out = cur.finish()
    assert out["workers"] == len(keep) and len(out["mu_hat"]) == ds.tasks
    assert all(math.isfinite(x) for x in out["mu_hat"])
    assert plan.report_bits == pytest.approx(ds.tasks * math.log2(ds.levels + 1))


def test_lp_and_rr_get_worse_with_sparsity_mf_stays_small():
    """The paper's qualitative finding (Fig. 3), on small data with fixed seeds (ε = 3)."""
    change = {}
    for sp in (0.5, 0.9):
        for name in ("truth_lp", "truth_rr", "truth_mf"):
            cfg = config(name, n=600, tasks=40, sparsity=sp, pools=1, epsilon=3.0)
            change[name, sp] = score(cfg, run_inproc(cfg, LIMITS))["mae_change"]
    assert change["truth_lp", 0.9] > change["truth_lp", 0.5] + 0.5
    assert change["truth_rr", 0.9] > change["truth_rr", 0.5] + 0.5
    assert max(change["truth_mf", 0.5], change["truth_mf", 0.9]) < 0.6
    assert change["truth_mf", 0.9] < min(change["truth_lp", 0.9], change["truth_rr", 0.9])


# --------------------------------------------------------------------------- audit


@pytest.mark.parametrize("name", NAMES[1:])
def test_audit_spec_pairs_are_neighbours_and_within_the_claim(name):
    public = {"tasks": 12, "levels": 4, "data_type": "answers"}
    proto = PROTOCOLS[name]
    params = proto.resolve({"epsilon": 1.0} | ({"d": 3} if name == "truth_mf" else {}), public)
    bound = proto.bind(params, public, resolved=True)
    spec = proto.audit_spec(bound)
    assert spec.values.shape == (5, 12) and spec.prior.sum() == pytest.approx(1.0)
    a, b = (spec.values[i] for i in spec.pair)
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    assert differ.sum() == 1 and differ[0]
    plan = proto.make_curator(bound, np.arange(1), 2).plan(0)
    rows = np.repeat(spec.values[list(spec.pair)], 300, axis=0)
    agents = np.arange(len(rows))
    rep = proto.respond(Block(0, rows, agents, KEY, bound, broadcast=plan.broadcast))
    la = proto.log_likelihood(Block(0, np.repeat(a[None], len(rep), 0), bound=bound,
                                    broadcast=plan.broadcast), rep)
    lb = proto.log_likelihood(Block(0, np.repeat(b[None], len(rep), 0), bound=bound,
                                    broadcast=plan.broadcast), rep)
    if name == "truth_mf":
        # MF's audit pair (NULL vs answer) is the unproven case: the answered set, and G with
        # it, differ, so each row's exact grid releases are impossible under the other row
        assert np.isfinite(la[:300]).all() and np.isfinite(lb[300:]).all()
        assert (la[300:] == -np.inf).all() and (lb[:300] == -np.inf).all()
        assert not proto.claim(params, public).proven
        return
    assert np.isfinite(la).all() and np.isfinite(lb).all()
    assert np.abs(la - lb).max() <= proto.claim(params, public).epsilon + 1e-9


def test_plain_log_likelihood():
    proto = PROTOCOLS["truth_plain"]
    public = {"tasks": 3, "levels": 4}
    rows = np.array([[1.0, np.nan, 0.0]])
    ok = proto.log_likelihood(Block(0, np.repeat(rows, 2, 0), bound=proto.bind({}, public)),
                              np.array([[1, 4, 0], [1, 4, 1]]))
    assert ok.tolist() == [0.0, -np.inf]
    assert tm.to_codes(rows, 4).tolist() == [[1, 4, 0]]
