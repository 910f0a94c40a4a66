"""MF perturbation (Sun et al., 2018, §V): the task profiles, the closed-form solve of Eq. (10),
the noise η actually inside the reports, the agent-side check of V, the exact likelihood, Theorem
4's privacy argument, and the NULL <-> answer gap in it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.truth import mf
from ldpsim.protocols.words import AgentWords
from scipy import optimize, stats

Z = 5.0
KEY = rngm.stream_key(21, "agents")
MF = PROTOCOLS["truth_mf"]


def _public(tasks: int, levels: int = 10) -> dict:
    return {"tasks": tasks, "levels": levels, "data_type": "answers"}


def _v(d: int, n: int, kind: str = "uniform", seed: int = 3) -> np.ndarray:
    return mf.task_profiles(rngm.party_generator(seed), d, n, kind)


def _sparse_rows(m: int, n: int, answered: int, seed: int = 4) -> np.ndarray:
    g = rngm.party_generator(seed)
    rows = np.full((m, n), np.nan)
    for i in range(m):
        idx = g.choice(n, size=answered, replace=False)
        rows[i, idx] = g.integers(0, 10, size=answered)
    return rows


@pytest.mark.parametrize("kind", ["uniform", "gaussian"])
def test_task_profiles_have_unit_column_norms(kind):
    v = _v(7, 300, kind)
    assert v.shape == (7, 300)
    assert np.abs(v).sum(axis=0) == pytest.approx(np.ones(300), abs=1e-12)
    assert (v >= 0).all() if kind == "uniform" else (v < 0).any()


def test_agent_side_clip_of_an_untrusted_broadcast():
    v = _v(4, 10)
    bad = v.copy()
    bad[:, 3] *= 50.0
    bad[0, 5] = np.nan
    clipped = mf.clip_profiles(bad)
    assert np.abs(clipped).sum(axis=0).max() <= 1.0 + 1e-12
    assert clipped[:, 3] == pytest.approx(v[:, 3])
    assert clipped[:, 0] == pytest.approx(v[:, 0])
    assert np.isfinite(clipped).all()
    # the protocol applies it: a curator inflating V gets the same reports as with V clipped
    public = _public(10)
    params = MF.resolve({"d": 4}, public)
    bound = MF.bind(params, public, resolved=True)
    rows = _sparse_rows(5, 10, 6)
    big = v.copy()
    big[:, 3] *= 50.0
    r1 = MF.respond(Block(0, rows, np.arange(5), KEY, bound, broadcast=big))
    r2 = MF.respond(Block(0, rows, np.arange(5), KEY, bound,
                          broadcast=mf.clip_profiles(big)))
    assert np.array_equal(r1, r2)
    with pytest.raises(ValueError, match="task profiles"):
        MF.respond(Block(0, rows, np.arange(5), KEY, bound, broadcast=v[:3]))


@pytest.mark.parametrize("ridge", [1e-6, 1.0])
def test_closed_form_is_the_minimiser_of_eq9(ridge):
    d, n = 6, 40
    v = _v(d, n)
    rows = _sparse_rows(30, n, 12)
    rows[3] = np.nan
    rows[3, 5] = 2.0  # fewer answers than d: only the ridge keeps the minimiser unique
    eta = mf.mf_mechanism(10, 1.0, d).perturb(np.zeros((30, d)), AgentWords(KEY, np.arange(30),
                                                                             0))
    u = mf.solve_profiles(rows, v, eta, ridge)
    g = mf.gradient(rows, u, v, eta, ridge)
    assert np.abs(g).max() < 1e-7 * max(1.0, np.abs(eta).max())
    # compare with a general-purpose optimiser on one worker (BFGS on the same objective)
    i = 7

    def f(x):
        return mf.objective(rows[i:i + 1], x[None, :], v, eta[i:i + 1], ridge)[0]

    ref = optimize.minimize(f, np.zeros(d), method="BFGS", options={"gtol": 1e-10})
    assert f(u[i]) <= ref.fun + 1e-7 * abs(ref.fun)


def test_small_ridge_reproduces_the_unregularised_normal_equations():
    d, n = 5, 50
    v = _v(d, n)
    rows = _sparse_rows(4, n, 20)
    eta = np.ones((4, d))
    u = mf.solve_profiles(rows, v, eta, 1e-12)
    for i in range(4):
        m = ~np.isnan(rows[i])
        vt = v[:, m]
        want = np.linalg.solve(vt @ vt.T, vt @ rows[i, m] - eta[i])
        assert u[i] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_noise_inside_reports_is_laplace_at_the_budget(eps):
    """Recover η_i = V_T a_T - (G + λI) u_i from the sent u_i: i.i.d. Lap(|Γ|/ε) (5 SE), the
    exact release's scale tΛ (within 2 10^-5 of |Γ|/ε for d = 8) plus the grid's rounding."""
    d, n, m, levels, ridge = 8, 60, 1500, 10, 0.7
    public = _public(n, levels)
    params = MF.resolve({"epsilon": eps, "d": d, "ridge": ridge, "send": "u"}, public)
    bound = MF.bind(params, public, resolved=True)
    v = MF.broadcast(params, public, 5)
    rows = _sparse_rows(m, n, 15)
    u = MF.respond(Block(0, rows, np.arange(m), KEY, bound, broadcast=v))
    eta = np.empty((m, d))
    for i in range(m):
        mask = ~np.isnan(rows[i])
        vt = v[:, mask]
        eta[i] = vt @ rows[i, mask] - (vt @ vt.T + ridge * np.eye(d)) @ u[i]
    b = mf.mf_mechanism(levels, eps, d).scale
    assert b == pytest.approx(levels / eps, rel=2e-5)
    x = eta.ravel()
    assert abs(np.abs(x).mean() - b) < Z * b / math.sqrt(x.size)
    assert stats.kstest(x / b, "laplace").pvalue > 1e-4


def test_send_u_and_send_uv_give_the_curator_the_same_answers():
    n, d = 30, 4
    public = _public(n)
    rows = _sparse_rows(20, n, 9)
    out = {}
    for send in ("uv", "u"):
        params = MF.resolve({"d": d, "send": send}, public)
        bound = MF.bind(params, public, resolved=True)
        v = MF.broadcast(params, public, 9)
        rep = MF.respond(Block(0, rows, np.arange(20), KEY, bound, broadcast=v))
        out[send] = MF.decode(rep, v, params, public)
        assert rep.shape == (20, n if send == "uv" else d)
    assert out["u"] == pytest.approx(out["uv"], rel=1e-12, abs=1e-12)


def test_log_likelihood_is_the_pmf_of_u():
    """d = 1: (G + λ) u of each report is a grid point n of the exact release of c = V_T a_T,
    its log-likelihood is the discrete Laplace log-pmf of n - rint(c/Λ), and the recovered
    n - rint(c/Λ) has the stated law's mean and variance (5 SE); a u off the grid is
    impossible."""
    n, m, ridge = 8, 20000, 0.5
    public = _public(n)
    params = MF.resolve({"d": 1, "epsilon": 1.0, "ridge": ridge, "send": "u"}, public)
    bound = MF.bind(params, public, resolved=True)
    v = MF.broadcast(params, public, 2)
    row = np.full((1, n), np.nan)
    row[0, :4] = [1.0, 3.0, 0.0, 7.0]
    rows = np.repeat(row, m, axis=0)
    u = MF.respond(Block(0, rows, np.arange(m), KEY, bound, broadcast=v))[:, 0]
    lap = mf.mf_mechanism(10, 1.0, 1)
    g = (v[0, :4] ** 2).sum() + ridge
    c = (v[0, :4] * row[0, :4]).sum()
    q = g * u / lap.grid
    assert np.abs(q - np.rint(q)).max() < 1e-6
    z = np.rint(q) - np.rint(c / lap.grid)
    ll = MF.log_likelihood(Block(0, rows, bound=bound, broadcast=v), u[:, None])
    np.testing.assert_allclose(ll, math.log(math.tanh(0.5 / lap.t)) - np.abs(z) / lap.t,
                               rtol=1e-12)
    a = math.exp(-1.0 / lap.t)
    var = 2 * a / (1 - a) ** 2
    assert abs(z.mean()) < Z * math.sqrt(var / m)
    assert abs(z.var() - var) < Z * var * math.sqrt(5.0 / m)
    off = u[:1, None] + 0.5 * lap.grid / g
    assert MF.log_likelihood(Block(0, row, bound=bound, broadcast=v),
                             off)[0] == -np.inf


def test_theorem4_ratio_within_epsilon_for_a_changed_answer():
    """Rows with the same answered set, one answer changed 0 -> 9: for every report the
    log-likelihood ratio is at most ε (||η - η'||_1 <= ||v_k||_1 · 9 <= |Γ|)."""
    n, d, eps = 20, 5, 1.0
    public = _public(n)
    params = MF.resolve({"d": d, "epsilon": eps, "send": "uv"}, public)
    bound = MF.bind(params, public, resolved=True)
    v = MF.broadcast(params, public, 4)
    a = _sparse_rows(1, n, 10)
    a[0, 0] = 0.0
    b = a.copy()
    b[0, 0] = 9.0
    reps = np.concatenate([MF.respond(Block(0, np.repeat(r, 400, 0), np.arange(400), KEY, bound,
                                            broadcast=v)) for r in (a, b)])
    la = MF.log_likelihood(Block(0, np.repeat(a, len(reps), 0), bound=bound,
                                 broadcast=v), reps)
    lb = MF.log_likelihood(Block(0, np.repeat(b, len(reps), 0), bound=bound,
                                 broadcast=v), reps)
    assert np.isfinite(la).all() and np.isfinite(lb).all()
    assert np.abs(la - lb).max() <= eps * 9 / 10 + 1e-9
    off = reps[:1] + 1e-3 * np.arange(n)  # not in V's row space: impossible
    assert MF.log_likelihood(Block(0, a, bound=bound, broadcast=v),
                             off)[0] == -np.inf


def test_theorem4_does_not_cover_null_versus_answer_unless_nulls_are_filled():
    """The slip: answering one more task changes G. With the exact grid release, (G' + λI) u
    of a report of the other row is then off the grid: each row's reports are impossible under
    the other, an infinite ratio, for null_mode "skip"; filling NULLs restores the bound."""
    n, d, eps = 12, 3, 1.0
    public = _public(n)
    a = np.full((1, n), np.nan)
    a[0, 1:7] = [2.0, 5.0, 1.0, 8.0, 3.0, 4.0]
    b = a.copy()
    b[0, 0] = 9.0
    m = 500
    for mode in ("skip", "constant"):
        params = MF.resolve({"d": d, "epsilon": eps, "send": "u", "null_mode": mode}, public)
        bound = MF.bind(params, public, resolved=True)
        v = MF.broadcast(params, public, 8)
        rep = MF.respond(Block(0, np.repeat(a, m, 0), np.arange(m), KEY, bound,
                               broadcast=v))
        la = MF.log_likelihood(Block(0, np.repeat(a, m, 0), bound=bound,
                                     broadcast=v), rep)
        lb = MF.log_likelihood(Block(0, np.repeat(b, m, 0), bound=bound,
                                     broadcast=v), rep)
        assert np.isfinite(la).all()
        if mode == "skip":
            assert (lb == -np.inf).all()
        else:
            assert np.isfinite(lb).all() and np.abs(la - lb).max() <= eps + 1e-9
    claim = MF.claim(MF.resolve({"d": d}, public), public)
    assert "not covered" in claim.notes
