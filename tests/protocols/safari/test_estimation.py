"""Deterministic estimation steps of SAFARI: simplex projection, LARS-Lasso (against coordinate
descent and the KKT conditions), stepwise and ridge fits, LADE, NAIVE, CALM's consistency and
max-entropy steps, tripletwise mutual information and the Anchors method."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.safari import anchors, calm, lade, metrics, perm, rules
from ldpsim.protocols.safari.riffle import Chain, RIModel

GEN = rngm.party_generator(20240501)


def exact_distribution(model: RIModel) -> tuple[np.ndarray, np.ndarray]:
    """(all rankings' positions, their probabilities) of a small RI model."""
    allp = perm.all_permutations(model.chain.d).astype(np.int64)
    return perm.positions(allp), model.prob(allp)


def weighted_s3(pos: np.ndarray, w: np.ndarray) -> np.ndarray:
    d = pos.shape[1]
    tr = rules.triplets(d)
    vals = 2 * pos[:, tr[:, 0]] + (pos[:, tr[:, 1]] > pos[:, tr[:, 2]])
    return np.stack([np.bincount(vals[:, t], weights=w, minlength=2 * d)
                     for t in range(len(tr))])


def random_model(chain: Chain, gen: np.random.Generator) -> RIModel:
    leaf = [gen.dirichlet(np.ones(chain.leaf_domain(j))) for j in range(len(chain.leaves))]
    inter = [gen.dirichlet(np.ones(chain.internal_domain(t))) for t in range(chain.n_internal)]
    return RIModel(chain, leaf, inter)


# ---------------------------------------------------------------------- simplex projection


def test_projection_equals_norm_sub_and_satisfies_kkt():
    v = GEN.normal(0.1, 0.3, size=(200, 12))
    v += (1 - v.sum(axis=1, keepdims=True)) / 12  # unbiased estimates sum to 1
    p = lade.project_simplex(v)
    assert np.allclose(p.sum(axis=1), 1.0) and (p >= 0).all()
    for row, proj in zip(v, p, strict=True):
        assert np.allclose(proj, lade.norm_sub(row), atol=1e-10)
        theta = (row - proj)[proj > 0]
        assert np.allclose(theta, theta[0])  # p = max(v - θ, 0)
        assert ((row - theta[0])[proj == 0] <= 1e-12).all()
    x = GEN.dirichlet(np.ones(12), size=500)  # no simplex point is closer
    for row, proj in zip(v[:5], p[:5], strict=True):
        assert np.linalg.norm(row - proj) <= np.linalg.norm(row - x, axis=1).min() + 1e-12
    already = GEN.dirichlet(np.ones(7))
    assert np.allclose(lade.project_simplex(already), already)
    low = np.array([-0.5, 0.1, 0.2])  # sums below 1: the projection raises every cell
    assert np.allclose(lade.project_simplex(low), [0.0, 0.45, 0.55])


# ------------------------------------------------------------------------------ regressions


def coordinate_descent(X, y, alpha, positive, sweeps=20000):
    m, p = X.shape
    b = np.zeros(p)
    r = y.copy()
    nrm = (X ** 2).sum(axis=0) / m
    for _ in range(sweeps):
        biggest = 0.0
        for j in range(p):
            if nrm[j] == 0:
                continue
            rho = X[:, j] @ r / m + nrm[j] * b[j]
            new = (max(rho - alpha, 0.0) if positive else
                   np.sign(rho) * max(abs(rho) - alpha, 0.0)) / nrm[j]
            if new != b[j]:
                r -= X[:, j] * (new - b[j])
                biggest = max(biggest, abs(new - b[j]))
                b[j] = new
        if biggest < 1e-14:
            break
    return b


def check_lasso(X, y, alpha):
    b = lade.lasso_positive(X, y, alpha)
    ref = coordinate_descent(X, y, alpha, True)
    assert (b >= 0).all()
    assert lade.lasso_objective(X, y, b, alpha) <= lade.lasso_objective(X, y, ref, alpha) + 1e-12
    g = X.T @ (y - X @ b) / len(y)  # KKT: g_j = α where β_j > 0, g_j <= α where β_j = 0
    on = b > 1e-12
    assert np.allclose(g[on], alpha, atol=1e-9) and (g[~on] <= alpha + 1e-9).all()
    return b


def test_positive_lasso_matches_coordinate_descent_and_kkt():
    for _ in range(12):
        m, p = int(GEN.integers(4, 12)), int(GEN.integers(3, 25))
        X = np.vstack([GEN.normal(size=(m, p)), np.ones((1, p))])  # 1 in the row space
        y = GEN.normal(size=m + 1)
        alpha = max(float((X.T @ y).max()) / (m + 1), 0.05) * GEN.uniform(0.02, 0.9)
        check_lasso(X, y, alpha)
    with pytest.raises(ValueError):
        lade.lasso_positive(np.array([[1.0, 0.0]]), np.array([1.0]), 0.1)


def test_lasso_on_rank_deficient_lade_designs():
    d = 5
    for M in (lade.pair_design(d), lade.triplet_design(d)):
        for _ in range(20):
            s = M @ GEN.dirichlet(np.full(M.shape[1], 0.5))  # feasible marginals
            for alpha in (1e-2, 1e-3, 1e-4):
                check_lasso(M, s, alpha)
            b0 = lade.lasso_positive(M, s, 0.0)  # α → 0: an exact, sparse fit
            assert np.allclose(M @ b0, s, atol=1e-10)
            assert (b0 > 1e-12).sum() <= np.linalg.matrix_rank(M)


def test_stepwise_and_ridge_fit_the_marginals():
    d = 5
    M = lade.pair_design(d)
    s = GEN.dirichlet(np.ones(d), size=2)
    y = np.concatenate([s[0], s[1]])
    assert np.allclose(M @ lade.forward_stepwise(M, y), y, atol=1e-9)
    r = lade.ridge(M, y, 1e-8)
    assert np.allclose(M @ r, y, atol=1e-6)
    assert np.allclose(r, np.linalg.pinv(M) @ y, atol=1e-6)  # → the minimum-norm solution
    Y = np.stack([y, y[::-1]], axis=1)
    assert np.allclose(lade.regress(M, Y, "ridge", 1e-3)[1], lade.ridge(M, y[::-1], 1e-3))
    with pytest.raises(ValueError):
        lade.regress(M, Y, "elastic", 0.1)


# ---------------------------------------------------------------------- LADE, NAIVE, CALM


def sushi_like_distribution(d=5):
    chain = Chain.of([[0, 1], [2, 3], [4]])
    return exact_distribution(random_model(chain, GEN))


def test_lade_with_exact_s1_is_consistent_with_it():
    pos, w = sushi_like_distribution()
    d = pos.shape[1]
    s1 = np.stack([np.bincount(pos[:, i], weights=w, minlength=d) for i in range(d)])
    s2, s3, joints = lade.lade(s1, "lasso", alpha=0.0)
    assert np.allclose(joints.sum(axis=2), s1[rules.pairs(d)[:, 0]], atol=1e-9)
    assert np.allclose(joints.sum(axis=1), s1[rules.pairs(d)[:, 1]], atol=1e-9)
    assert ((s2 >= 0) & (s2 <= 1)).all()
    tr = rules.triplets(d)
    s3 = s3.reshape(-1, d, 2)
    assert np.allclose(s3.sum(axis=2), s1[tr[:, 0]], atol=1e-9)  # Eq. (1)
    assert np.allclose(s3[:, :, 0].sum(axis=1), s2[rules.pair_index(d)[tr[:, 1], tr[:, 2]]],
                       atol=1e-9)
    for method, alpha in (("stepwise", 0.0), ("ridge", 1e-3), ("lasso", 1e-4)):
        s2m, s3m, _ = lade.lade(s1, method, alpha)
        assert np.allclose(s3m.sum(axis=1), 1.0) and (s3m >= 0).all()


def test_naive_integrates_exact_s3_exactly():
    pos, w = sushi_like_distribution()
    d = pos.shape[1]
    s3 = weighted_s3(pos, w)
    s1, s2 = lade.naive(s3, d)
    assert np.allclose(s1, np.stack([np.bincount(pos[:, i], weights=w, minlength=d)
                                     for i in range(d)]))
    pr = rules.pairs(d)
    assert np.allclose(s2, [(w * (pos[:, a] < pos[:, b])).sum() for a, b in pr])


def test_calm_consistency_and_ipf():
    pos, w = sushi_like_distribution()
    d = pos.shape[1]
    _, q2 = metrics.distribution_marginals(w, pos.astype(np.int8))
    assert np.allclose(calm.make_consistent(q2), q2, atol=1e-12)  # already consistent
    noisy = q2 + GEN.normal(0, 0.02, q2.shape) * (1 - np.eye(d))
    fixed = calm.make_consistent(noisy, rounds=20)
    pr = rules.pairs(d)

    def spread(J):
        worst = 0.0
        for i in range(d):
            m = [J[k].sum(axis=1) if a == i else J[k].sum(axis=0)
                 for k, (a, b) in enumerate(pr) if i in (a, b)]
            worst = max(worst, float(np.ptp(np.stack(m), axis=0).max()))
        return worst

    assert spread(fixed) < 0.1 * spread(noisy)
    # IPF: the max-entropy 3-D table matches its three 2-D marginals
    T = calm.ipf_triple(q2[0], q2[1], q2[4])  # pairs (0,1), (0,2), (1,2)
    assert np.allclose(T.sum(axis=2), q2[0], atol=1e-8)
    assert np.allclose(T.sum(axis=1), q2[1], atol=1e-8)
    assert np.allclose(T.sum(axis=0), q2[4], atol=1e-8)
    s3 = calm.s3_from_joints(q2)  # Σ_λ Pr[φ_k1, λ] = Pr[φ_k1] (IPF: slow near a boundary)
    s1 = np.stack([np.bincount(pos[:, k], weights=w, minlength=d) for k in range(d)])
    assert np.allclose(s3.reshape(-1, d, 2).sum(axis=2), s1[rules.triplets(d)[:, 0]],
                       atol=2e-5)
    f, collapsed = calm.maxent_rankings(q2, pos.astype(np.int8), iters=200)
    assert not collapsed
    assert np.allclose(metrics.distribution_marginals(f, pos.astype(np.int8))[1], q2, atol=1e-6)


# ----------------------------------------------------------------- mutual information, Anchors


def test_tripletwise_mi_vanishes_across_a_riffle_independent_split():
    chain = Chain.of([[0, 1, 2], [3, 4, 5]])
    pos, w = exact_distribution(random_model(chain, GEN))
    mi = anchors.tripletwise_mi(weighted_s3(pos, w), 6)
    A, B = [0, 1, 2], [3, 4, 5]
    for i, j, k in rules.triplets(6):
        cross = (i in A and j in B and k in B) or (i in B and j in A and k in A)
        if cross:
            assert mi[i, j, k] < 1e-12
        assert mi[i, j, k] == mi[i, k, j] >= 0
    assert mi[A][:, A][:, :, A].max() > 1e-4  # within a leaf the MI is not zero
    assert anchors.split_cost(A, B, mi) < 1e-11
    assert anchors.learn_chain(mi, 3).leaves in (((0, 1, 2), (3, 4, 5)), ((3, 4, 5), (0, 1, 2)))


@pytest.mark.parametrize("leaves,K", [([[0, 3], [1, 4], [2, 5]], 2),
                                      ([[2], [0], [3], [1]], 1),
                                      ([[1, 4, 5], [0, 2, 3, 6]], 4)])
def test_anchors_recovers_the_chain_from_exact_mi(leaves, K):
    chain = Chain.of(leaves)
    pos, w = exact_distribution(random_model(chain, GEN))
    mi = anchors.tripletwise_mi(weighted_s3(pos, w), chain.d)
    learned = anchors.learn_chain(mi, K) if K < 4 else None
    if K == 4:  # d = 7, K = 4: a leaf of 4 and the rest of 3 — same partition
        A, f = anchors.anchors_split(list(range(7)), mi, 4)
        assert A == (0, 2, 3, 6) and f < 1e-11
        return
    if K == 1:  # the order is identifiable only up to the last two singletons
        assert learned.leaves[:-2] == chain.leaves[:-2]
    else:
        assert learned == chain


def test_upto_k_chains_and_errors():
    chain = Chain.of([[3], [0, 4], [1, 2]])  # Fig. 1(a)
    pos, w = exact_distribution(random_model(chain, GEN))
    mi = anchors.tripletwise_mi(weighted_s3(pos, w), 5)
    learned = anchors.learn_chain(mi, 2, "upto_K")
    assert learned.leaves[0] == (3,) and set(learned.leaves[1:]) == {(0, 4), (1, 2)}
    fixed = anchors.learn_chain(mi, 2, "K")
    assert [len(leaf) for leaf in fixed.leaves] == [2, 2, 1]
    with pytest.raises(ValueError):
        anchors.anchors_split([0, 1, 2], mi, 3)
    with pytest.raises(ValueError):
        anchors.learn_chain(mi, 2, "whatever")


def _kkt(X, y, b, alpha):
    g = X.T @ (y - X @ b) / len(y)  # KKT: g_j = α where β_j > 0, g_j <= α where β_j = 0
    on = b > 1e-12
    return np.allclose(g[on], alpha, atol=1e-8) and (g[~on] <= alpha + 1e-8).all()


def test_lasso_cd_is_coordinate_descent_and_reaches_the_nnls_optimum():
    """Both solvers reach the same optimal value (the problem is convex), with KKT."""
    for _ in range(10):
        m, p = int(GEN.integers(4, 12)), int(GEN.integers(3, 25))
        X = np.vstack([GEN.normal(size=(m, p)), np.ones((1, p))])
        Y = GEN.normal(size=(m + 1, 3))
        alpha = 0.05 * GEN.uniform(0.2, 1.0)
        cd = lade.lasso_cd(X, Y, alpha)
        for i in range(3):
            ref = coordinate_descent(X, Y[:, i], alpha, True)
            assert np.allclose(cd[i], ref, atol=1e-9)
            assert (cd[i] >= 0).all() and _kkt(X, Y[:, i], cd[i], alpha)
            nn = lade.lasso_positive(X, Y[:, i], alpha)
            assert lade.lasso_objective(X, Y[:, i], cd[i], alpha) == pytest.approx(
                lade.lasso_objective(X, Y[:, i], nn, alpha), abs=1e-10)


def test_lade_lasso_optimum_is_not_unique_and_the_solvers_pick_different_ones():
    """On LADE's pair design the two solvers reach the same objective and the same fitted
    marginals with different joints (hence different S2): docs/families/safari.md says which is
    which."""
    d, alpha = 5, 1e-4
    M = lade.pair_design(d)
    s = M @ GEN.dirichlet(np.full(M.shape[1], 0.5))
    nn = lade.regress(M, s[:, None], "lasso", alpha, "nnls")[0]
    cd = lade.regress(M, s[:, None], "lasso", alpha, "cd")[0]
    assert lade.lasso_objective(M, s, cd, alpha) == pytest.approx(
        lade.lasso_objective(M, s, nn, alpha), abs=1e-12)
    assert np.allclose(M @ cd, M @ nn, atol=1e-8)
    assert np.abs(cd - nn).max() > 1e-3
    assert (cd > 1e-9).sum() > (nn > 1e-9).sum()  # CD spreads mass, NNLS is a sparse vertex
    with pytest.raises(ValueError, match="allowed: nnls, cd"):
        lade.regress(M, s[:, None], "lasso", alpha, "lars")


def test_lasso_solver_is_a_validated_safari_parameter():
    from ldpsim.protocols import ParamError, get_protocol

    public = {"d": 4, "n": 10}
    for name in ("safari", "safari_nopriv"):
        p = get_protocol(name)
        assert p.resolve({}, public)["lasso_solver"] == "nnls"
        assert p.resolve({"lasso_solver": "cd"}, public)["lasso_solver"] == "cd"
        with pytest.raises(ParamError, match=r"\[params\] lasso_solver: got 'lars'; allowed: "
                                             "one of 'nnls', 'cd'"):
            p.resolve({"lasso_solver": "lars"}, public)
