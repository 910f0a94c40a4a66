"""DPWeVote and its Laplace baseline (Yan, Liu & Liu, 2018, ``protocols.vote.dpwevote``).

The helpers drive a protocol the way the runtime does, in one process: the curator plans each
round, the agents respond, the reports are validated and absorbed, the curator finishes.
Estimator statistics use many independent games at once: the same population replicated under
distinct agent ids (each id has its own coins), one vectorised ``respond`` per round.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS, ParamError, build_data
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.mechanisms import GRR
from ldpsim.protocols.vote.dpwevote import (
    G,
    budget,
    decide,
    estimate_opinions_faithful,
    estimate_opinions_joint,
    estimate_table_joint,
    estimate_weights,
    expected_sq_err_q,
    laplace_mechanisms,
    opinion_table,
    quota,
    quota_variance_per_partner,
    weighted_sum,
)
from scipy import stats

from tests import drivers
from tests.conftest import ROOT

Z = 5.0
VOTE, LAP = PROTOCOLS["dpwevote"], PROTOCOLS["dpwevote_laplace"]
KEY = rngm.stream_key(7, "agents")
W_BC = {"phase": "weights"}


def _op_bc(c: int = 0) -> dict:
    return {"phase": "opinions", "candidate": c, "released": []}


# --------------------------------------------------------------------------- helpers


def _data(n: int = 60, k: int = 1, seed: int = 1, **args):
    return DATA_KINDS["weighted_votes"].build({"n": n, "candidates": k, **args},
                                              keys=rngm.stream_key(seed, "data"))


def _population(table: np.ndarray) -> np.ndarray:
    """Rows [w, φ] with ``table[g-1, φ]`` partners of weight g and opinion φ."""
    return np.array([[g + 1, f] for g in range(3) for f in range(2)
                     for _ in range(int(table[g, f]))], dtype=np.int64)


def _games(proto, params: dict, rows: np.ndarray, reps: int):
    """Reports of ``reps`` independent games on the same population: (game, w~, φ~) arrays."""
    public = {"n": len(rows), "candidates": 1}
    resolved = proto.resolve(params, public)
    n = len(rows)
    agents = np.arange(reps * n)
    data = np.tile(rows, (reps, 1))
    w = proto.respond(Block(0, data, agents, KEY, proto.bind(resolved, public, resolved=True),
                            broadcast=W_BC))[:, 0]
    phi = proto.respond(Block(1, data, agents, KEY, proto.bind(resolved, public, resolved=True),
                              broadcast=_op_bc()))[:, 0]
    return resolved, agents // n, w, phi


def _tables(game: np.ndarray, w: np.ndarray, phi: np.ndarray, reps: int) -> np.ndarray:
    idx = game * 6 + (w - 1) * 2 + phi
    return np.bincount(idx, minlength=reps * 6).reshape(reps, 3, 2)


def _close_mean(samples: np.ndarray, target, z: float = Z) -> bool:
    se = samples.std(axis=0, ddof=1) / math.sqrt(len(samples))
    return bool(np.all(np.abs(samples.mean(axis=0) - np.asarray(target)) <= z * se + 1e-12))


def _close_var(samples: np.ndarray, target) -> bool:
    d = samples - samples.mean(axis=0)
    s2 = (d**2).sum(axis=0) / (len(samples) - 1)
    se = np.sqrt(((d**4).mean(axis=0) - s2**2) / len(samples))
    return bool(np.all(np.abs(s2 - np.asarray(target)) <= Z * se))


TABLE = np.array([[8, 5], [6, 10], [4, 15]])  # true (weight group, opinion) counts, n = 48


# --------------------------------------------------------------------------- budget and claims


def test_registry_and_kind():
    assert {"dpwevote", "dpwevote_laplace"} <= set(PROTOCOLS)
    assert VOTE.data_type == LAP.data_type == DATA_KINDS["weighted_votes"].data_type


def test_budget_scopes():
    b = budget(1.2, 0.5, 3, "game")
    assert (b.eps_w, b.eps_phi, b.total) == pytest.approx((0.6, 0.2, 1.2))
    b = budget(1.2, 0.5, 3, "candidate")
    assert (b.eps_w, b.eps_phi, b.total) == pytest.approx((0.6, 0.6, 2.4))
    b = budget(1.0, 0.25, 1, "game")  # k = 1: both scopes are the paper's eps = eps1 + eps2
    assert (b.eps_w, b.eps_phi) == pytest.approx((0.25, 0.75))
    assert budget(1.0, 0.25, 1, "candidate") == b


def test_claims():
    public = _data(k=3).public
    c = VOTE.claim(VOTE.resolve({"epsilon": 1.2}, public), public)
    assert c.model == "local" and not c.trusts_curator
    assert c.epsilon == pytest.approx(1.2) and c.per_report_epsilon == pytest.approx(0.6)
    assert c.mechanism == "randomized_response" and c.sensitivity is None
    c = VOTE.claim(VOTE.resolve({"epsilon": 1.2, "budget": "candidate"}, public), public)
    assert c.epsilon == pytest.approx(2.4)
    c = LAP.claim(LAP.resolve({"epsilon": 2.0, "split": 0.25}, public), public)
    assert c.model == "local" and c.mechanism == "laplace" and c.sensitivity == 2.0
    assert c.epsilon == pytest.approx(2.0) and c.per_report_epsilon == pytest.approx(0.5)
    assert "Lap(2/eps1)" in c.notes and "Lap(1/eps2)" in c.notes


def test_parameter_errors():
    public = _data().public
    assert VOTE.resolve({}, public) == {"epsilon": 1.0, "split": 0.5, "budget": "game",
                                        "estimator": "faithful"}
    with pytest.raises(ParamError, match=r"\[params\] split: got 1.0; allowed: .*< 1"):
        VOTE.resolve({"split": 1.0}, public)
    for key, bad in (("split", 0.0), ("epsilon", 0), ("epsilon", -1.0),
                     ("estimator", "bayes"), ("budget", "round")):
        with pytest.raises(ParamError, match=rf"\[params\] {key}"):
            VOTE.resolve({key: bad}, public)
    with pytest.raises(ParamError, match=r"\[params\] split"):
        LAP.resolve({"split": 2.0}, public)
    with pytest.raises(ParamError, match=r"\[data\] kind: .*weighted_votes"):
        VOTE.resolve({}, {"m": 5})


# --------------------------------------------------------------------------- exact worked examples


def _worked_curator(proto, estimator: str = "faithful"):
    """eps = 2 ln 2 split evenly: eps1 = eps2 = ln 2, so M_w^-1 = 4I - J and M_phi^-1 = 3I - J."""
    public = _data(n=15).public
    params = {"epsilon": 2 * math.log(2)}
    if proto is VOTE:
        params["estimator"] = estimator
    resolved = proto.resolve(params, public)
    return proto.make_curator(proto.bind(resolved, public, resolved=True), np.arange(15), 0)


def test_worked_example_faithful_and_joint():
    # Reported pairs: Y = [[4, 2], [3, 3], [1, 2]] (rows: reported weight 1..3, cols: opinion).
    w = np.array([1] * 6 + [2] * 6 + [3] * 3)
    phi = np.array([0, 0, 0, 0, 1, 1] + [0, 0, 0, 1, 1, 1] + [0, 1, 1])
    assert opinion_table(w, phi).tolist() == [[4, 2], [3, 3], [1, 2]]
    out = {}
    for est in ("faithful", "joint"):
        cur = _worked_curator(VOTE, est)
        cur.absorb(0, np.arange(15), w[:, None])
        assert cur.plan(1).broadcast == {"phase": "opinions", "candidate": 0, "released": []}
        cur.absorb(1, np.arange(15), phi[:, None])
        assert cur.plan(2) is None
        out[est] = cur.finish()
    f, j = out["faithful"], out["joint"]
    # Eq. (3): x_w = 4y - 15 = (9, 9, -3); Eq. (4b): q = (9 + 18 - 9) / 2 = 9.
    assert np.allclose(f["x_w_hat"], [9, 9, -3]) and f["q_hat"] == pytest.approx(9)
    # Eq. (5) per reported group: x_Y = 2 y_Y - y_N = (0, 3, 3); Eq. (8b): 0 + 6 + 9 = 15 >= 9.
    assert np.allclose(f["x_phi_hat"], [[0, 3, 3]]) and f["sum_hat"] == pytest.approx([15])
    assert f["released"] == ["PASS"] and f["winners"] == [0] and f["estimator"] == "faithful"
    # joint: M_w^-1 (0, 3, 3) = 4 (0, 3, 3) - 6 = (-6, 6, 6); sum -6 + 12 + 18 = 24.
    assert np.allclose(j["x_phi_hat"], [[-6, 6, 6]]) and j["sum_hat"] == pytest.approx([24])
    assert np.allclose(estimate_table_joint([[4, 2], [3, 3], [1, 2]], math.log(2), math.log(2)),
                       [[15, -6], [3, 6], [-9, 6]])
    assert f["tables"] == [[[4, 2], [3, 3], [1, 2]]] and f["reporters"] == [15, 15]


def test_worked_example_not_pass_and_laplace():
    cur = _worked_curator(VOTE)
    cur.absorb(0, np.arange(15), np.array([1] * 6 + [2] * 6 + [3] * 3)[:, None])
    # Y = [[6, 0], [6, 0], [1, 2]]: x_Y = (-6, -6, 3), sum = -6 - 12 + 9 = -9 < q = 9.
    cur.absorb(1, np.arange(15), np.array([0] * 12 + [0, 1, 1])[:, None])
    out = cur.finish()
    assert out["sum_hat"] == pytest.approx([-9]) and out["released"] == ["NOT PASS"]
    assert out["winners"] == []
    cur = _worked_curator(LAP)
    cur.absorb(0, np.array([0, 1, 2]), np.array([[1.5], [2.5], [-1.0]]))
    cur.absorb(1, np.array([0, 1, 2]), np.array([[1.0], [0.5], [2.0]]))
    out = cur.finish()
    # q = (1.5 + 2.5 - 1) / 2 = 1.5; sum = 1.5 + 1.25 - 2 = 0.75 < 1.5.
    assert out["q_hat"] == pytest.approx(1.5) and out["sum_hat"] == pytest.approx([0.75])
    assert out["released"] == ["NOT PASS"]


def test_opinions_pair_with_their_own_partners_weights():
    """Every weight reporter answered: the reports pair row by row; otherwise by agent id,
    and an opinion from an agent without a weight does not count."""
    for agents, phi, expect in (([0, 1, 2], [1.0, 0.5, 2.0], 1.5 + 1.25 - 2.0),
                                ([0, 2, 7], [1.0, 2.0, 5.0], 1.5 - 2.0),
                                ([], [], 0.0)):
        cur = _worked_curator(LAP)
        cur.absorb(0, np.array([0, 1, 2]), np.array([[1.5], [2.5], [-1.0]]))
        cur.absorb(1, np.array(agents, dtype=np.int64), np.array(phi).reshape(-1, 1))
        assert cur.finish()["sum_hat"] == [expect]


def test_decide_ties_and_vectorised():
    assert decide(9.0, 9.0) is True
    assert decide(9.0 - 1e-12, 9.0) is True  # rounding at an exact tie
    assert decide(8.99, 9.0) is False
    assert decide(np.array([1.0, 3.0]), np.array([2.0, 2.0])).tolist() == [False, True]


def test_joint_is_m_w_inverse_of_faithful_and_consistent_with_eq3():
    t = np.array([[7, 3], [2, 9], [5, 4]])
    for e1, e2 in ((0.3, 0.7), (2.0, 0.1)):
        f = estimate_opinions_faithful(t, e2)
        assert np.allclose(estimate_opinions_joint(t, e1, e2), GRR(e1, 3).inverse_matrix() @ f)
        assert np.allclose(estimate_table_joint(t, e1, e2).sum(axis=1),
                           estimate_weights(t.sum(axis=1), e1))
    # truthful limit: the estimates are the counts themselves
    assert np.allclose(estimate_opinions_joint(t, 800, 800), t[:, 1])
    assert weighted_sum(t[:, 1]) == 3 + 18 + 12 and quota(t.sum(axis=1)) == (10 + 22 + 27) / 2


# --------------------------------------------------------------------------- rounds, respond


def test_rounds_weights_then_one_per_candidate():
    ds = _data(n=90, k=3)
    game = drivers.drive(VOTE, {"epsilon": 3.0}, ds, seed=1)
    plans, out = game.plans, game.output
    assert len(plans) == 4
    p0 = plans[0]
    assert p0.broadcast == W_BC and p0.queries is None
    assert (p0.schema.dtype, p0.schema.length, p0.schema.low, p0.schema.high) == ("int", 1, 1, 3)
    assert p0.report_bits == pytest.approx(math.log2(3))
    for l in (1, 2, 3):
        bc = plans[l].broadcast
        assert bc["phase"] == "opinions" and bc["candidate"] == l - 1
        assert bc["released"] == out["released"][: l - 1]  # release of the previous candidates
        assert plans[l].schema.low == 0 and plans[l].schema.high == 1
        assert plans[l].report_bits == 1.0
    assert len(out["released"]) == 3 and len(out["x_phi_hat"]) == 3
    assert out["winners"] == [i for i, r in enumerate(out["released"]) if r == "PASS"]
    assert out["reporters"] == [90] * 4
    assert np.sum(out["tables"], axis=(1, 2)).tolist() == [90] * 3
    plans = drivers.drive(LAP, {"epsilon": 3.0}, ds, seed=1).plans
    assert len(plans) == 4 and plans[1].schema.dtype == "float" and plans[1].report_bits == 64


def test_dropouts_are_tolerated():
    ds = _data(n=40, k=2)
    resolved = VOTE.resolve({"epsilon": 2.0}, ds.public)
    cur = VOTE.make_curator(VOTE.bind(resolved, ds.public, resolved=True), np.arange(40), 0)
    rows = ds.rows(0, 40)
    joined = np.arange(0, 40, 2)  # half the partners never upload a weight
    p0 = cur.plan(0)
    bound = VOTE.bind(resolved, ds.public, resolved=True)
    rep = VOTE.respond(bound.block(0, rows[joined], joined, KEY, broadcast=p0.broadcast))
    cur.absorb(0, joined, rep)
    p1 = cur.plan(1)
    assert p1.agents.tolist() == joined.tolist()  # only partners that joined are asked
    some = joined[::3]
    rep = VOTE.respond(bound.block(1, rows[some], some, KEY, broadcast=p1.broadcast))
    cur.absorb(1, some, rep)
    cur.absorb(2, np.zeros(0, dtype=np.int64), np.zeros((0, 1)))  # everybody dropped
    out = cur.finish()
    assert out["reporters"] == [20, len(some), 0]
    assert np.sum(out["tables"][0]) == len(some) and np.sum(out["tables"][1]) == 0
    assert all(math.isfinite(s) for s in out["sum_hat"]) and len(out["released"]) == 2


@pytest.mark.parametrize("proto", [VOTE, LAP])
def test_per_agent_respond_equals_batched(proto):
    ds = _data(n=50, k=2)
    resolved = proto.resolve({"epsilon": 1.5}, ds.public)
    rows = ds.rows(0, 50)
    agents = np.arange(50)
    bound = proto.bind(resolved, ds.public, resolved=True)
    for rnd, bc in ((0, W_BC), (2, _op_bc(1))):
        batch = proto.respond(Block(rnd, rows, agents, KEY, bound, broadcast=bc))
        assert batch.shape == (50, 1)
        for i in range(50):
            one = proto.respond(Block(rnd, rows[i:i + 1], agents[i:i + 1], KEY, bound,
                                      broadcast=bc))
            assert one.dtype == batch.dtype and np.array_equal(one[0], batch[i])
        other = proto.respond(Block(rnd, rows, agents, KEY + 1, bound, broadcast=bc))
        assert not np.array_equal(other, batch)
    with pytest.raises(ValueError, match="broadcast"):
        proto.respond(Block(1, rows, agents, KEY, bound))


def test_rounds_use_independent_coins():
    # the opinion of candidate 1 and of candidate 2 are randomized with different draws
    rows = np.tile([[2, 1, 1]], (20000, 1))
    public = {"n": 20000, "candidates": 2}
    resolved = VOTE.resolve({"epsilon": 0.4}, public)
    a = np.arange(20000)
    r1 = VOTE.respond(Block(1, rows, a, KEY, VOTE.bind(resolved, public, resolved=True),
                            broadcast=_op_bc(0)))[:, 0]
    r2 = VOTE.respond(Block(2, rows, a, KEY, VOTE.bind(resolved, public, resolved=True),
                            broadcast=_op_bc(1)))[:, 0]
    corr = np.corrcoef(r1, r2)[0, 1]
    assert abs(corr) < Z / math.sqrt(20000)


# --------------------------------------------------------------------------- likelihoods, audit


def test_log_likelihood_rr_is_exact():
    ds = _data(n=30, k=2)
    resolved = VOTE.resolve({"epsilon": 1.0, "split": 0.3}, ds.public)
    b = VOTE.budget_of(VOTE.bind(resolved, ds.public, resolved=True))
    rows = ds.rows(0, 30)
    mw, mp = GRR(b.eps_w, 3).matrix(), GRR(b.eps_phi, 2).matrix()
    for rep in (1, 2, 3):
        ll = VOTE.log_likelihood(Block(0, rows, bound=VOTE.bind(resolved, ds.public, resolved=True),
                                       broadcast=W_BC),
                                 np.full((30, 1), rep))
        assert np.allclose(np.exp(ll), mw[rep - 1, rows[:, 0] - 1])
    for rep in (0, 1):
        ll = VOTE.log_likelihood(Block(2, rows, bound=VOTE.bind(resolved, ds.public, resolved=True),
                                       broadcast=_op_bc(1)), np.full((30, 1), rep))
        assert np.allclose(np.exp(ll), mp[rep, rows[:, 2]])
    bad = VOTE.log_likelihood(Block(0, rows, bound=VOTE.bind(resolved, ds.public, resolved=True),
                                    broadcast=W_BC),
                              np.full((30, 1), 4))
    assert np.all(bad == -np.inf)


def test_log_likelihood_laplace_is_exact():
    ds = _data(n=30, k=2)
    resolved = LAP.resolve({"epsilon": 1.0, "split": 0.3}, ds.public)
    rows = ds.rows(0, 30)
    t = 2**20
    # the exact discrete Laplace on the grid Δ / (floor(εt) - 3/4): its log-pmf at grid points,
    # about the Laplace log-density plus log Λ, and -inf off the grid
    # (budget "game" with k = 2: eps2 = 0.7 / 2)
    for rnd, bc, col, sens, eps in ((0, W_BC, 0, 2.0, 0.3), (1, _op_bc(1), 2, 1.0, 0.35)):
        lam = sens / (math.floor(eps * t) - 0.75)
        rep = (np.rint(np.linspace(-5, 7, 30) / lam) * lam)[:, None]
        block = Block(rnd, rows, bound=LAP.bind(resolved, ds.public, resolved=True), broadcast=bc)
        ll = LAP.log_likelihood(block, rep)
        z = np.rint(rep[:, 0] / lam) - np.rint(rows[:, col] / lam)
        np.testing.assert_allclose(ll, math.log(math.tanh(0.5 / t)) - np.abs(z) / t,
                                   rtol=1e-12)
        dens = stats.laplace.logpdf(rep[:, 0], loc=rows[:, col], scale=sens / eps)
        np.testing.assert_allclose(ll, dens + math.log(lam), atol=1e-4)
        off = rep + lam / 3
        assert (LAP.log_likelihood(block, off) == -np.inf).all()


@pytest.mark.parametrize("proto", [VOTE, LAP])
@pytest.mark.parametrize("k", [1, 3])
def test_audit_pair_attains_the_claimed_epsilon(proto, k):
    ds = _data(n=10, k=k, weight_probs="1,2,1", yes=0.3)
    resolved = proto.resolve({"epsilon": 1.3, "split": 0.4}, ds.public)
    spec = proto.audit_spec(proto.bind(resolved, ds.public, resolved=True))
    assert spec.values.shape == (3 * 2**k, 1 + k)
    assert len(np.unique(spec.values, axis=0)) == 3 * 2**k
    assert spec.prior.sum() == pytest.approx(1.0)
    row = np.array([3] + [1] + [0] * (k - 1))
    i = int(np.flatnonzero((spec.values == row).all(axis=1))[0])
    assert spec.prior[i] == pytest.approx(0.25 * 0.3 * 0.7 ** (k - 1))
    a, b = spec.values[list(spec.pair)]
    assert a.tolist() == [1] + [0] * k and b.tolist() == [3] + [1] * k
    # sup over reports of |log-likelihood ratio| summed over the k + 1 rounds = claimed eps
    # (Laplace: each round's exact grid release reaches its ε to within 2/t, never above it)
    grid = np.arange(1, 4) if proto is VOTE else np.linspace(-60, 60, 2401)
    lap_w, lap_phi = laplace_mechanisms(LAP.budget_of(LAP.bind(resolved, ds.public,
                                                                resolved=True)))
    pair = np.stack([a, b])
    total = 0.0
    for rnd in range(k + 1):
        bc = W_BC if rnd == 0 else _op_bc(rnd - 1)
        if proto is VOTE and rnd > 0:
            grid = np.arange(2)
        reports = grid
        if proto is LAP:
            lam = (lap_w if rnd == 0 else lap_phi).grid
            reports = np.rint(grid / lam) * lam
        block = Block(rnd, pair, bound=proto.bind(resolved, ds.public, resolved=True),
                      broadcast=bc)
        llr = [np.subtract(*proto.log_likelihood(block, np.full((2, 1), g))) for g in reports]
        total += np.max(np.abs(llr))
    claimed = proto.claim(resolved, ds.public).epsilon
    if proto is VOTE:
        assert total == pytest.approx(claimed, rel=1e-9)
    else:
        assert claimed - 2 * (k + 1) / lap_w.t <= total <= claimed * (1 + 1e-12)


def test_audit_spec_large_k_and_uniform_prior():
    ds = _data(n=10, k=11)
    spec = VOTE.audit_spec(VOTE.bind({}, ds.public))
    assert spec.values.shape == (6, 12) and spec.prior == pytest.approx(np.full(6, 1 / 6))
    spec = VOTE.audit_spec(VOTE.bind({}, _data(k=2).public))
    assert spec.prior == pytest.approx(np.full(12, 1 / 12))


# --------------------------------------------------------------------------- estimator statistics


def test_rr_reports_follow_eq_9():
    rows = _population(TABLE * 40)
    resolved, game, w, phi = _games(VOTE, {"epsilon": 1.0, "split": 0.3}, rows, 1)
    b = budget(1.0, 0.3, 1)
    for g in (1, 2, 3):
        sel = rows[:, 0] == g
        freq = np.bincount(w[sel], minlength=4)[1:] / sel.sum()
        m = GRR(b.eps_w, 3).matrix()[:, g - 1]
        assert np.all(np.abs(freq - m) < Z * np.sqrt(m * (1 - m) / sel.sum()))
    keep = np.mean(phi == rows[:, 1])
    p = GRR(b.eps_phi, 2).p
    assert abs(keep - p) < Z * math.sqrt(p * (1 - p) / len(rows))


def test_faithful_estimator_is_biased_as_the_module_says():
    """Eq. (5) within *reported* groups estimates M_w x_{.,Y}, not x_{.,Y} (DESIGN.md slip)."""
    reps = 3000
    eps = 2.0
    _, game, w, phi = _games(VOTE, {"epsilon": eps}, _population(TABLE), reps)
    tables = _tables(game, w, phi, reps)
    b = budget(eps, 0.5, 1)
    f = estimate_opinions_faithful(tables, b.eps_phi)
    expect = GRR(b.eps_w, 3).matrix() @ TABLE[:, 1]
    assert _close_mean(f, expect)
    se = f.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.max(np.abs(f.mean(axis=0) - TABLE[:, 1]) / se) > 20  # the bias is real


@pytest.mark.parametrize("eps,split", [(2.0, 0.5), (1.0, 0.3)])
def test_joint_estimator_is_unbiased(eps, split):
    reps = 3000
    _, game, w, phi = _games(VOTE, {"epsilon": eps, "split": split}, _population(TABLE), reps)
    tables = _tables(game, w, phi, reps)
    b = budget(eps, split, 1)
    x = estimate_table_joint(tables, b.eps_w, b.eps_phi)
    assert _close_mean(x.reshape(reps, 6), TABLE.ravel())
    s = weighted_sum(x[..., 1])
    assert _close_mean(s, TABLE[:, 1] @ G)


def test_quota_estimator_unbiased_with_theoretical_variance():
    reps = 4000
    eps = 0.8
    _, game, w, phi = _games(VOTE, {"epsilon": eps}, _population(TABLE), reps)
    y_w = _tables(game, w, phi, reps).sum(axis=2)
    b = budget(eps, 0.5, 1)
    q = quota(estimate_weights(y_w, b.eps_w))
    x_w = TABLE.sum(axis=1)
    assert _close_mean(q, quota(x_w))
    assert _close_var(q, x_w @ quota_variance_per_partner(b))
    # and x_w itself: Eq. (3) is unbiased with the multinomial variance
    xw = estimate_weights(y_w, b.eps_w)
    assert _close_mean(xw, x_w)
    assert _close_var(xw, GRR(b.eps_w, 3).count_variance(x_w))


def test_laplace_estimators_unbiased_with_theoretical_variance():
    reps = 4000
    eps, split = 1.5, 0.4
    rows = _population(TABLE)
    _, game, w, phi = _games(LAP, {"epsilon": eps, "split": split}, rows, reps)
    b = budget(eps, split, 1)
    q = 0.5 * np.bincount(game, weights=w, minlength=reps)
    s = np.bincount(game, weights=w * phi, minlength=reps)
    sw, sp = 2 / b.eps_w, 1 / b.eps_phi
    assert _close_mean(q, rows[:, 0].sum() / 2)
    assert _close_var(q, len(rows) * 2 * sw**2 / 4)
    assert _close_mean(s, (rows[:, 0] * rows[:, 1]).sum())
    va, vb = 2 * sw**2, 2 * sp**2
    assert _close_var(s, np.sum(rows[:, 0] ** 2 * vb + rows[:, 1] ** 2 * va + va * vb))


# --------------------------------------------------------------------------- metrics, Table 4


def test_metrics_by_hand():
    truth = {"n": 10, "x_w": [4, 3, 3], "x_wy": [[2, 1, 3], [4, 3, 0]], "sum_w": 19, "q": 9.5,
             "sum_wphi": [13, 10], "passed": [True, True]}
    out = {"released": ["PASS", "NOT PASS"], "q_hat": 10.5, "sum_hat": [15.0, 9.0],
           "x_w_hat": [5.0, 3.0, 2.0], "x_phi_hat": [[2.0, 2.0, 3.0], [4.0, 3.0, 1.0]]}
    m = VOTE.evaluate(out, truth)
    assert m["correct"] == 0.5 and m["tp"] == 0.5 and m["fn"] == 0.5
    assert m["fp"] == 0.0 and m["tn"] == 0.0
    assert m["sq_err_q"] == pytest.approx((1 / 19) ** 2)
    assert m["sq_err_sum"] == pytest.approx(((2 / 19) ** 2 + (1 / 19) ** 2) / 2)
    assert m["sq_err_w"] == pytest.approx((0.01 + 0 + 0.01) / 3)  # Eq. (11)
    assert m["sq_err_phi"] == pytest.approx((0.01 + 0.01) / 6)  # Eq. (13), mean over k
    lm = LAP.evaluate({k: out[k] for k in ("released", "q_hat", "sum_hat")}, truth)
    assert set(lm) == {"correct", "tp", "fp", "tn", "fn", "sq_err_q", "sq_err_sum"}


# Yan, Liu & Liu, 2018, Table 4, MSE_q, 2000 games per cell: rows n = 10, 50, 100; eps = 0.1 .. 1.0.
TABLE4 = {
    ("dpwevote", 10): [15.82780, 3.79594, 1.68442, 0.92401, 0.59020, 0.39621, 0.28239, 0.21623,
                       0.16892, 0.13490],
    ("dpwevote", 50): [3.01404, 0.74125, 0.31822, 0.17802, 0.11303, 0.07640, 0.05671, 0.04168,
                       0.03253, 0.02548],
    ("dpwevote", 100): [1.48116, 0.36118, 0.16328, 0.08678, 0.05549, 0.03759, 0.02717, 0.02070,
                        0.01608, 0.01292],
    ("laplace", 10): [20.80675, 5.18172, 2.34181, 1.31362, 0.82597, 0.59720, 0.42769, 0.33390,
                      0.26256, 0.20914],
    ("laplace", 50): [4.00614, 1.00797, 0.44805, 0.25437, 0.16142, 0.11203, 0.08213, 0.06390,
                      0.04941, 0.04070],
    ("laplace", 100): [1.97664, 0.50439, 0.22056, 0.12592, 0.08012, 0.05566, 0.04160, 0.03130,
                       0.02509, 0.01985],
}


def test_table4_agrees_with_the_exact_mse_q():
    """Every cell of Table 4 is within 6% of Eq. (12)'s exact expectation (the cells are means
    of 2000 games; the relative standard error of such a mean is about 3%)."""
    for (mech, n), cells in TABLE4.items():
        for i, paper in enumerate(cells):
            b = budget((i + 1) / 10, 0.5, 1)
            th = expected_sq_err_q(n, b, "rr" if mech == "dpwevote" else "laplace")
            assert abs(paper / th - 1) < 0.06, (mech, n, (i + 1) / 10, paper, th)


def test_mse_q_of_the_protocol_matches_theory():
    reps = 3000
    n, eps = 10, 0.5
    ds = _data(n=n * reps, seed=4)  # i.i.d. rows: consecutive blocks of n are independent games
    rows = ds.rows(0, ds.n)
    b = budget(eps, 0.5, 1)
    for proto, mech in ((VOTE, "rr"), (LAP, "laplace")):
        _, game, w, phi = _games(proto, {"epsilon": eps}, rows, 1)
        game = np.arange(len(rows)) // n
        total_w = np.bincount(game, weights=rows[:, 0])
        if proto is VOTE:
            y_w = np.bincount(game * 3 + w - 1, minlength=3 * reps).reshape(reps, 3)
            q = quota(estimate_weights(y_w, b.eps_w))
        else:
            q = 0.5 * np.bincount(game, weights=w)
        sq = ((q - total_w / 2) / total_w) ** 2
        assert _close_mean(sq, expected_sq_err_q(n, b, mech))


# --------------------------------------------------------------------------- end to end


def _config(protocol: str, n: int = 300, pools: int = 2, **extra) -> dict:
    cfg = {"protocol": protocol, "params": {"epsilon": 1.5},
           "data": {"kind": "weighted_votes", "n": n, "candidates": 2}, "seed": 9,
           "pools": pools, "agent_mode": "batched", "batch": 128,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize("protocol", ["dpwevote", "dpwevote_laplace"])
def test_inproc_equals_processes(protocol):
    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.backends.transport import run_processes
    from ldpsim.simulator.session import Limits
    from ldpsim.simulator.sweep.runner import TruthCache

    limits = Limits(timeout_s=10)
    ref = run_inproc(_config(protocol, pools=1), limits)
    res = run_processes(_config(protocol, pools=2), limits)
    assert res["output"] == ref["output"]
    assert res["rejected"] == 0 and res["dropouts"] == 0 and res["comm"]["rounds"] == 3
    truth = TruthCache().get(_config(protocol)["data"], 9)
    assert PROTOCOLS[protocol].evaluate(res["output"], truth) == \
        PROTOCOLS[protocol].evaluate(ref["output"], truth)
    if protocol == "dpwevote":
        joint = run_inproc(_config(protocol, params={"epsilon": 1.5, "estimator": "joint"}),
                           limits)
        # another parameter point is another run: the agents' coins are fresh (another run tag),
        # so its reports differ
        assert joint["output"]["tables"] != ref["output"]["tables"]
        # on the same reports, the same tables and quota, a different estimate of the opinions
        data = build_data(_config(protocol)["data"], 9)
        runs = [drivers.drive(PROTOCOLS[protocol], {"epsilon": 1.5, "estimator": est}, data,
                              9).output for est in ("faithful", "joint")]
        assert runs[0]["tables"] == runs[1]["tables"] and runs[0]["q_hat"] == runs[1]["q_hat"]
        assert runs[0]["x_phi_hat"] != runs[1]["x_phi_hat"]
        exact = run_processes(_config(protocol, n=60, agent_mode="exact"), limits)
        assert exact["output"] == run_inproc(_config(protocol, n=60), limits)["output"]


def test_scenarios_expand():
    from ldpsim.simulator.scenario.scenario import check_runs, load

    for name, points, repeats in (("paper002_fig4", 108, 2000),
                                  ("paper002_tables3_4", 60, 2000), ("bench_vote", 3, 1),
                                  ("paper002_estimators", 36, 200)):
        path = ROOT / "scenarios" / f"{name}.toml"
        assert load(path).repeats == repeats
        specs = load(path, ["repeats=1"]).runs()
        assert len(specs) == points
        check_runs(specs)


# --------------------------------------------------------------------------- Table 3 (slow)

# Yan, Liu & Liu, 2018, Table 3, Accuracy over 2000 games: (n, eps) -> (Baseline, DPWeVote).
TABLE3 = {(10, 0.5): (0.50140, 0.53345), (10, 1.0): (0.52695, 0.56840),
          (50, 0.5): (0.50500, 0.52550), (50, 1.0): (0.52135, 0.56265),
          (100, 0.5): (0.50450, 0.53110), (100, 1.0): (0.52010, 0.56310)}


def _many_games(n: int, eps: float, reps: int, seed: int) -> dict[str, np.ndarray]:
    """Per game: correct (0/1) of the faithful, joint and Laplace releases on the same data."""
    ds = _data(n=n * reps, seed=seed)
    rows = ds.rows(0, ds.n)
    game = np.arange(len(rows)) // n
    total_w = np.bincount(game, weights=rows[:, 0], minlength=reps)
    truth = np.bincount(game, weights=rows[:, 0] * rows[:, 1], minlength=reps) >= total_w / 2
    b = budget(eps, 0.5, 1)
    out = {}
    _, _, w, phi = _games(VOTE, {"epsilon": eps}, rows, 1)
    tables = _tables(game, w, phi, reps)
    q = quota(estimate_weights(tables.sum(axis=2), b.eps_w))
    for est, x in (("faithful", estimate_opinions_faithful(tables, b.eps_phi)),
                   ("joint", estimate_opinions_joint(tables, b.eps_w, b.eps_phi))):
        out[est] = (decide(weighted_sum(x), q) == truth).astype(float)
    _, _, w, phi = _games(LAP, {"epsilon": eps}, rows, 1)
    lq = 0.5 * np.bincount(game, weights=w, minlength=reps)
    ls = np.bincount(game, weights=w * phi, minlength=reps)
    out["laplace"] = (decide(ls, lq) == truth).astype(float)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("n,eps", sorted(TABLE3))
def test_table3_accuracy(n, eps):
    reps = 20000
    acc = _many_games(n, eps, reps, seed=100 + n)
    base, dp = TABLE3[(n, eps)]
    for ours, paper in ((acc["faithful"], dp), (acc["laplace"], base)):
        se = math.sqrt(paper * (1 - paper) / 2000 + ours.var() / reps)
        assert abs(ours.mean() - paper) < Z * se, (ours.mean(), paper)
    if eps < 1.0:
        return  # the paired differences below are ~0.02 at eps = 0.5: too small for 5 SE
    # the paper's claim: DPWeVote beats the baseline (paired over the same games)
    d = acc["faithful"] - acc["laplace"]
    assert d.mean() > Z * d.std() / math.sqrt(reps)
    # and a finding of ours: at these eps the unbiased joint estimator decides *worse*
    d = acc["faithful"] - acc["joint"]
    assert d.mean() > Z * d.std() / math.sqrt(reps)


@pytest.mark.parametrize("proto", [VOTE, LAP])
def test_log_likelihood_broadcasts_one_report_against_candidate_rows(proto):
    ds = _data(n=10, k=2)
    resolved = proto.resolve({"epsilon": 1.0}, ds.public)
    bound = proto.bind(resolved, ds.public, resolved=True)
    values = proto.audit_spec(bound).values
    for rnd, bc in ((0, W_BC), (2, _op_bc(1))):
        one = proto.log_likelihood(Block(rnd, values, bound=bound, broadcast=bc),
                                   np.array([[1]]))
        many = proto.log_likelihood(Block(rnd, values, bound=bound, broadcast=bc),
                                    np.ones((len(values), 1)))
        assert one.shape == (len(values),) and np.array_equal(one, many)
        row = proto.log_likelihood(Block(rnd, values[:1], bound=bound, broadcast=bc),
                                   np.array([[0], [1]]))
        assert row.shape == (2,)


def test_audit_prior_with_yes_by_weight():
    ds = _data(n=10, k=1, weight_probs="1,1,2", yes_by_weight="0.9,0.5,0.1")
    spec = VOTE.audit_spec(VOTE.bind({}, ds.public))
    prior = {tuple(v): p for v, p in zip(spec.values.tolist(), spec.prior, strict=True)}
    assert prior[(1, 1)] == pytest.approx(0.25 * 0.9) and prior[(3, 1)] == pytest.approx(0.05)
