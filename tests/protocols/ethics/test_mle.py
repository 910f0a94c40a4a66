"""Wang et al., 2019, Eq. (2)-(3): the norm-constrained Thurstone–Mosteller MLE, against closed
forms, KKT conditions and scipy; separable sessions of 13 records; batch invariance; Theorems 1/3's
sensitivity by brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols.ethics.mle import MLEStats, constrained_mle
from ldpsim.protocols.ethics.model import (
    ball_diameter_l1,
    curvature,
    log_likelihood,
    mills,
    neg_log_likelihood_parts,
    norm_of,
    project,
    project_l1,
)
from scipy import optimize, special, stats

NORMS = ("l2", "l1", "linf")


def tm_records(rng, voters, n, d, beta_sd=1.0):
    """Voters' records drawn from the Thurstone–Mosteller model (winner minus loser)."""
    beta = rng.uniform(0, 1, d) + beta_sd * rng.normal(size=(voters, d))
    z = math.sqrt(2.0) * rng.normal(size=(voters, n, d))
    win = (z @ beta[:, :, None])[:, :, 0] + rng.normal(size=(voters, n)) > 0
    return np.where(win[:, :, None], z, -z)


# ------------------------------------------------------------------------- model pieces


def test_mills_and_curvature_match_scipy_and_finite_differences():
    u = np.array([-40.0, -8.0, -1.0, 0.0, 0.5, 3.0, 10.0, 40.0])
    r = mills(u)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = stats.norm.pdf(u) / stats.norm.cdf(u)
    ok = np.isfinite(direct) & (direct > 1e-300)
    np.testing.assert_allclose(r[ok], direct[ok], rtol=1e-12)
    assert r[0] == pytest.approx(40.0249, rel=1e-4)  # ~ -u - 1/u far in the left tail
    h = 1e-5
    fd = (special.log_ndtr(u + h) - special.log_ndtr(u - h)) / (2 * h)
    np.testing.assert_allclose(r, fd, rtol=1e-6, atol=1e-12)
    fd2 = -(special.log_ndtr(u + h) - 2 * special.log_ndtr(u) + special.log_ndtr(u - h)) / h**2
    w = curvature(u)
    np.testing.assert_allclose(w[2:7], fd2[2:7], rtol=1e-4, atol=1e-6)
    assert ((w >= 0) & (w <= 1)).all()


def test_gradient_and_hessian_by_finite_differences():
    rng = np.random.default_rng(0)
    z = tm_records(rng, 3, 7, 4)
    beta = rng.normal(size=(3, 4))
    f, g, h = neg_log_likelihood_parts(z, beta)
    np.testing.assert_allclose(f, -log_likelihood(z, beta), rtol=1e-14)
    eps = 1e-6
    for k in range(4):
        e = np.zeros(4)
        e[k] = eps
        fp = -log_likelihood(z, beta + e)
        fm_ = -log_likelihood(z, beta - e)
        np.testing.assert_allclose(g[:, k], (fp - fm_) / (2 * eps), rtol=1e-6, atol=1e-8)
        gp = neg_log_likelihood_parts(z, beta + e)[1]
        gm = neg_log_likelihood_parts(z, beta - e)[1]
        np.testing.assert_allclose(h[:, :, k], (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("norm", NORMS)
def test_ball_diameter_and_projection(norm):
    d, c = 5, 2.0
    expect = {"l1": 2 * c, "l2": 2 * math.sqrt(d) * c, "linf": 2 * d * c}[norm]
    assert ball_diameter_l1(norm, c, d) == pytest.approx(expect)
    # the diameter is attained by two points of the ball
    if norm == "l1":
        a = np.eye(d)[0] * c
    elif norm == "l2":
        a = np.ones(d) * c / math.sqrt(d)
    else:
        a = np.ones(d) * c
    assert np.abs(2 * a).sum() == pytest.approx(expect)
    assert norm_of(a[None], norm)[0] == pytest.approx(c)
    rng = np.random.default_rng(1)
    v = 3 * rng.normal(size=(200, d))
    p = project(v, norm, c)
    assert (norm_of(p, norm) <= c * (1 + 1e-12)).all()
    inside = norm_of(v, norm) <= c
    np.testing.assert_array_equal(p[inside], v[inside])
    # Euclidean projection: p is the closest point among many random points of the ball
    cand = project(3 * rng.normal(size=(5000, d)), norm, c)
    for i in range(5):
        best = np.sqrt(((cand - v[i]) ** 2).sum(axis=1)).min()
        assert np.sqrt(((p[i] - v[i]) ** 2).sum()) <= best + 1e-12


def _l1_projection_by_scipy(v: np.ndarray, radius: float) -> np.ndarray:
    """min ||x - v||^2 s.t. ||x||_1 <= radius, as a QP in (p, q) >= 0 with x = p - q."""
    k = len(v)

    def fun(pq):
        return (((pq[:k] - pq[k:]) - v) ** 2).sum()

    def jac(pq):
        r = 2 * ((pq[:k] - pq[k:]) - v)
        return np.concatenate([r, -r])

    res = optimize.minimize(fun, np.full(2 * k, 0.01), jac=jac, method="SLSQP",
                            bounds=[(0, None)] * (2 * k),
                            constraints={"type": "ineq", "fun": lambda pq: radius - pq.sum()},
                            options={"ftol": 1e-14, "maxiter": 500})
    return res.x[:k] - res.x[k:]


def test_project_l1_matches_a_scipy_qp():
    rng = np.random.default_rng(2)
    for _ in range(20):
        v = rng.normal(size=6) * 2
        p = project_l1(v[None], 1.5)[0]
        np.testing.assert_allclose(p, _l1_projection_by_scipy(v, 1.5), atol=1e-6)


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("norm", NORMS)
def test_one_record_maximiser_is_the_ball_point_furthest_along_it(norm):
    """Wang et al., 2019, §3's example: one record z -> L(beta) increases along z without bound, so
    the constrained MLE maximises beta^T z over the ball: C z/||z|| (L2), C sign(z) (L-inf),
    C sign(z_k) e_k at the largest |z_k| (L1)."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(50, 1, 5))
    z = np.repeat(z, 4, axis=1)  # several copies of one record: the same
    c = 2.5
    beta = constrained_mle(z, c, norm)
    zz = z[:, 0, :]
    if norm == "l2":
        expect = c * zz / np.linalg.norm(zz, axis=1, keepdims=True)
        np.testing.assert_allclose(beta, expect, atol=1e-6)
    elif norm == "linf":
        np.testing.assert_allclose(beta, c * np.sign(zz), atol=1e-6)
    else:
        k = np.abs(zz).argmax(axis=1)
        expect = np.zeros_like(zz)
        expect[np.arange(50), k] = c * np.sign(zz[np.arange(50), k])
        np.testing.assert_allclose(beta, expect, atol=1e-6)


@pytest.mark.parametrize("norm", NORMS)
def test_orthogonal_balanced_records_have_a_closed_form(norm):
    """Records +-e_k with a_k wins and b_k losses: L separates by coordinate and
    beta_k = Phi^{-1}(a_k / (a_k + b_k)), interior for a large enough ball."""
    d = 3
    counts = [(5, 3), (2, 7), (4, 4)]
    recs = []
    for k, (a, b) in enumerate(counts):
        e = np.eye(d)[k]
        recs += [e] * a + [-e] * b
    z = np.asarray(recs)[None]
    expect = np.array([stats.norm.ppf(a / (a + b)) for a, b in counts])
    beta = constrained_mle(z, 10.0, norm)
    np.testing.assert_allclose(beta[0], expect, atol=1e-9)


def test_collinear_records_give_the_minimum_norm_maximiser():
    """All records are +-v: only beta^T v is identified; Eq. (2) is maximised by
    beta^T v = Phi^{-1}(a/(a+b)), and from beta = 0 the solver stays in span{v}."""
    v = np.array([1.0, -2.0, 0.5, 3.0])
    z = np.asarray([v] * 7 + [-v] * 2)[None]
    beta = constrained_mle(z, 50.0, "l2")[0]
    t = stats.norm.ppf(7 / 9)
    assert beta @ v == pytest.approx(t, rel=1e-12)  # the identified part: exact
    # the unidentified directions: the minimum-norm maximiser up to the solver's damping floor
    np.testing.assert_allclose(beta, t * v / (v @ v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm", NORMS)
def test_zero_records_give_zero(norm):
    z = np.zeros((3, 13, 4))
    np.testing.assert_array_equal(constrained_mle(z, 2.0, norm), np.zeros((3, 4)))


# ------------------------------------------------------------------ optimality, precision


def test_l2_kkt_conditions_hold_to_high_precision():
    """Interior: gradient 0; on the sphere: g + mu beta = 0 with mu >= 0 (convex problem, so
    KKT is optimality)."""
    rng = np.random.default_rng(4)
    for n, d, c in ((13, 10, 5.0), (200, 10, 5.0), (40, 3, 1.0), (1000, 4, 5.0), (13, 22, 5.0)):
        z = tm_records(rng, 300, n, d)
        st = MLEStats()
        beta = constrained_mle(z, c, "l2", stats=st)
        assert st.unconverged == 0
        _, g, _ = neg_log_likelihood_parts(z, beta)
        nb = np.linalg.norm(beta, axis=1)
        on = nb >= c * (1 - 1e-9)
        assert (nb <= c * (1 + 1e-12)).all()
        mu = np.where(on, -(g * beta).sum(axis=1) / c**2, 0.0)
        assert (mu >= -1e-9).all()
        res = np.linalg.norm(g + mu[:, None] * beta, axis=1)
        assert (res <= 1e-6 * (1 + np.linalg.norm(g, axis=1)) + 1e-9).all(), (n, d, res.max())


def _scipy_constrained_mle(zi: np.ndarray, c: float, norm: str, x0: np.ndarray) -> np.ndarray:
    """A high-precision scipy reference for one voter (result projected onto the ball, since
    SLSQP may overshoot the constraint by ~1e-8)."""
    d = zi.shape[1]

    def fun(x):
        return -special.log_ndtr(zi @ x).sum()

    def jac(x):
        return -(zi * mills(zi @ x)[:, None]).sum(axis=0)

    if norm == "linf":
        r = optimize.minimize(fun, x0, jac=jac, method="L-BFGS-B", bounds=[(-c, c)] * d,
                              options={"ftol": 1e-16, "gtol": 1e-14})
        return r.x
    if norm == "l2":
        r = optimize.minimize(fun, x0, jac=jac, method="SLSQP",
                              constraints={"type": "ineq", "fun": lambda x: c * c - x @ x},
                              options={"ftol": 1e-16, "maxiter": 1000})
        return project(r.x[None], "l2", c)[0]

    def fun2(pq):
        return fun(pq[:d] - pq[d:])

    def jac2(pq):
        g = jac(pq[:d] - pq[d:])
        return np.concatenate([g, -g])

    pq0 = np.concatenate([np.maximum(x0, 0), np.maximum(-x0, 0)])
    r = optimize.minimize(fun2, pq0, jac=jac2, method="SLSQP", bounds=[(0, None)] * (2 * d),
                          constraints={"type": "ineq", "fun": lambda pq: c - pq.sum()},
                          options={"ftol": 1e-16, "maxiter": 1000})
    return project(r.x[None, :d] - r.x[None, d:], "l1", c)[0]


@pytest.mark.parametrize("norm", NORMS)
def test_no_better_point_than_scipy_finds(norm):
    """A high-precision scipy reference (SLSQP / L-BFGS-B, started at our answer and at 0)
    never finds a feasible point with a smaller -L than ours (up to 1e-10 relative)."""
    rng = np.random.default_rng(5)
    d, c = 4, 2.0
    for n in (13, 60):
        z = tm_records(rng, 5, n, d)
        beta = constrained_mle(z, c, norm)
        f_ours = -log_likelihood(z, beta)
        for i in range(len(z)):
            refs = [_scipy_constrained_mle(z[i], c, norm, x0) for x0 in (beta[i], np.zeros(d))]
            f_ref = [-log_likelihood(z[i:i + 1], r[None])[0] for r in refs]
            best = min(f_ref)
            assert f_ours[i] <= best + 1e-10 * (1 + abs(best)), (n, i, f_ours[i], best)


@pytest.mark.parametrize("norm", NORMS)
def test_separable_13_record_sessions_stay_bounded(norm):
    """Moral-Machine sessions have 13 choices: with d = 10 nearly all are separable and the
    unconstrained MLE diverges. The constrained one is finite, on the boundary, and found
    within the iteration cap."""
    rng = np.random.default_rng(6)
    z = tm_records(rng, 500 if norm == "l2" else 40, 13, 10)
    st = MLEStats()
    beta = constrained_mle(z, 5.0, norm, stats=st)
    assert np.isfinite(beta).all()
    assert st.unconverged == 0
    assert (norm_of(beta, norm) <= 5.0 * (1 + 1e-12)).all()
    assert st.on_boundary >= 0.9 * len(z)
    # every voter's choices are explained better than by beta = 0 (L = 13 log 1/2)
    assert (log_likelihood(z, beta) > 13 * math.log(0.5)).all()


def test_fewer_records_than_features_returns_a_point_in_their_span():
    rng = np.random.default_rng(7)
    z = tm_records(rng, 50, 8, 22)
    beta = constrained_mle(z, 5.0, "l2")
    for i in range(len(z)):
        q, _ = np.linalg.qr(z[i].T)  # orthonormal basis of span{z_ij}
        resid = beta[i] - q @ (q.T @ beta[i])
        assert np.linalg.norm(resid) <= 1e-8 * 5.0


@pytest.mark.parametrize("norm", NORMS)
def test_batched_equals_one_voter_at_a_time(norm):
    """A voter's estimate is bit-identical alone and inside any block."""
    rng = np.random.default_rng(8)
    k = 20 if norm == "l2" else 6
    z = np.concatenate([tm_records(rng, k, 13, 6), tm_records(rng, k, 13, 6, beta_sd=0.1),
                        np.zeros((2, 13, 6))])
    z[5, 3:] = 0.0
    batch = constrained_mle(z, 3.0, norm)
    single = np.concatenate([constrained_mle(z[i:i + 1], 3.0, norm) for i in range(len(z))])
    np.testing.assert_array_equal(batch, single)
    perm = rng.permutation(len(z))
    np.testing.assert_array_equal(constrained_mle(z[perm], 3.0, norm), batch[perm])


# ----------------------------------------------------------- Theorems 1/3 by brute force


@pytest.mark.parametrize("norm", NORMS)
def test_sensitivity_brute_force_never_exceeds_the_ball_diameter(norm):
    """All data sets of n = 3 records from a small grid in d = 2 and all record-level
    neighbours: max ||beta(D) - beta(D')||_1 <= D_1(C), and Theorem 1's construction (the other
    records nearly 0, one record flipped) comes close to it.

    Not exercised: whether a record-level change alone reaches D_1 with *typical* other records
    (it does not: the bound is a worst case).
    """
    c, d = 1.5, 2
    grid = [np.array(v, dtype=float) for v in itertools.product((-2, -0.5, 0.0, 1, 2),
                                                                 repeat=d)]
    rng = np.random.default_rng(9)
    sets = [np.stack([grid[i] for i in rng.choice(len(grid), 3)]) for _ in range(60)]
    data, neigh = [], []
    for s in sets:
        for pos in range(3):
            for g in grid:
                t = s.copy()
                t[pos] = g
                data.append(s)
                neigh.append(t)
    beta = constrained_mle(np.asarray(data), c, norm)
    beta2 = constrained_mle(np.asarray(neigh), c, norm)
    worst = np.abs(beta - beta2).sum(axis=1).max()
    bound = ball_diameter_l1(norm, c, d)
    assert worst <= bound * (1 + 1e-9)
    # Theorem 1's worst case: tiny other records, one record along (1, 1) flipped
    tiny = 1e-3
    v = np.array([1.0, 1.0]) if norm != "l1" else np.array([1.0, 0.0])
    a = np.array([[v, tiny * np.array([0.3, -0.1]), tiny * np.array([-0.2, 0.4])]])
    b = a.copy()
    b[0, 0] = -v
    gap = np.abs(constrained_mle(a, c, norm) - constrained_mle(b, c, norm)).sum()
    assert gap >= 0.99 * bound
