"""Wang et al., 2019, Algorithm 3 (functional mechanism): Taylor coefficients, the coefficient
sensitivity by brute force, the noise, and the noisy-objective solvers against closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.ethics import fm
from ldpsim.protocols.ethics.mle import constrained_mle
from scipy import special


def test_taylor_coefficients_are_those_of_log_phi_at_zero():
    h0, h1, h2 = fm.taylor_coefficients()
    assert h0 == -math.log(2.0)
    assert h1 == math.sqrt(2.0 / math.pi)
    assert h2 == -1.0 / math.pi
    e = 1e-4
    f = special.log_ndtr
    assert (f(e) - f(-e)) / (2 * e) == pytest.approx(h1, rel=1e-7)
    assert (f(e) - 2 * f(0.0) + f(-e)) / e**2 / 2 == pytest.approx(h2, rel=1e-6)


@pytest.mark.parametrize("u, err", [(0.5, -0.0048), (1.0, -0.0408), (-1.0, 0.0317),
                                    (2.0, -0.348), (-2.0, 0.221)])
def test_truncation_error_of_the_quadratic(u, err):
    """Reference note §8: (quadratic - log Phi) at a few points."""
    h0, h1, h2 = fm.taylor_coefficients()
    approx = h0 + h1 * u + h2 * u * u
    assert approx - special.log_ndtr(u) == pytest.approx(err, abs=6e-4)


def test_sensitivity_values():
    # reference note §4: about 11.4 for d = 10 in the unit L2 ball, 79.6 for d = 10 in the box
    assert fm.fm_sensitivity(10, "l2") == pytest.approx(2 * (math.sqrt(20 / math.pi)
                                                             + 10 / math.pi))
    assert fm.fm_sensitivity(10, "l2") == pytest.approx(11.41, abs=0.01)
    assert fm.fm_sensitivity(10, "linf") == pytest.approx(79.6, abs=0.05)
    assert fm.fm_sensitivity(22, "linf") == pytest.approx(343, abs=0.5)


def _record_vectors(z: np.ndarray, noise: str) -> np.ndarray:
    """Coefficient vector of each single record (B, d) -> (B, n_coefficients)."""
    alpha, m = fm.coefficients(z[:, None, :])
    return fm.coefficient_vector(alpha, m, noise)


@pytest.mark.parametrize("noise", fm.NOISE_FORMS)
def test_one_record_coefficient_l1_is_the_lemma_bound(noise):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(100, 5))
    v = _record_vectors(z, noise)
    l1 = np.abs(z).sum(axis=1)
    np.testing.assert_allclose(np.abs(v).sum(axis=1),
                               fm.SQRT_2_OVER_PI * l1 + l1**2 / math.pi, rtol=1e-12)


@pytest.mark.parametrize("domain", fm.DOMAINS)
@pytest.mark.parametrize("noise", fm.NOISE_FORMS)
@pytest.mark.parametrize("d", [2, 3])
def test_sensitivity_brute_force_on_neighbouring_data_sets(domain, noise, d):
    """Every pair of record-level neighbouring data sets (records on a grid of the preprocessed
    domain, including its corners): the coefficient vectors differ by at most Delta in L1, and
    the worst pair reaches at least half of it (Lemma 1's factor 2 is the triangle inequality)."""
    axis = np.linspace(-1, 1, 5)
    grid = np.array(list(itertools.product(axis, repeat=d)))
    if domain == "l2":
        grid = grid[np.sqrt((grid**2).sum(axis=1)) <= 1 + 1e-12]
        diag = np.ones(d) / math.sqrt(d)
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=d)))
        grid = np.concatenate([grid, signs * diag])
    rng = np.random.default_rng(1)
    others = grid[rng.choice(len(grid), size=(4, 2))]  # four data sets' other two records
    delta = fm.fm_sensitivity(d, domain)
    worst = 0.0
    for rest in others:
        base = _record_vectors(rest, noise).sum(axis=0)
        vec = base + _record_vectors(grid, noise)   # the data set with record z at position 0
        diff = np.abs(vec[:, None, :] - vec[None, :, :]).sum(axis=2)
        worst = max(worst, diff.max())
    assert worst <= delta * (1 + 1e-12)
    assert worst >= 0.5 * delta


@pytest.mark.parametrize("domain", fm.DOMAINS)
def test_preprocess_maps_into_the_domain_and_scales_unclipped_records_exactly(domain):
    rng = np.random.default_rng(2)
    z = 3 * rng.normal(size=(50, 7, 4))
    zp = fm.preprocess(z, 5.0, domain)
    if domain == "l2":
        assert (np.sqrt((zp**2).sum(axis=-1)) <= 1 + 1e-12).all()
        keep = np.sqrt((z**2).sum(axis=-1)) <= 5.0
    else:
        assert (np.abs(zp) <= 1).all()
        keep = (np.abs(z) <= 5.0).all(axis=-1)
    np.testing.assert_allclose(zp[keep], z[keep] / 5.0, rtol=1e-15)


def test_monomial_vector_roundtrip_and_objective_value():
    rng = np.random.default_rng(3)
    zp = fm.preprocess(rng.normal(size=(4, 9, 3)), 3.0)
    alpha, m = fm.coefficients(zp)
    for noise in fm.NOISE_FORMS:
        a2, m2 = fm.from_vector(fm.coefficient_vector(alpha, m, noise), 3, noise)
        np.testing.assert_allclose(a2, alpha, rtol=1e-14)
        np.testing.assert_allclose(m2, m, rtol=1e-14, atol=1e-16)
    # the polynomial sum_phi lambda_phi phi(beta) equals -alpha^T beta + beta^T M beta
    beta = rng.normal(size=(4, 3))
    vec = fm.monomial_vector(alpha, m)
    iu, ju = np.triu_indices(3)
    poly = (vec[:, :3] * beta).sum(axis=1) + (vec[:, 3:] * beta[:, iu] * beta[:, ju]).sum(axis=1)
    direct = -(alpha * beta).sum(axis=1) + np.einsum("bk,bkl,bl->b", beta, m, beta)
    np.testing.assert_allclose(poly, direct, rtol=1e-12)
    # and it is the second-order Taylor expansion of -sum_j log Phi(beta^T z_j) up to n log 2
    u = np.einsum("bnk,bk->bn", zp, beta)
    taylor = (math.log(2.0) - fm.SQRT_2_OVER_PI * u + u**2 / math.pi).sum(axis=1)
    np.testing.assert_allclose(poly + 9 * math.log(2.0), taylor, rtol=1e-12)


@pytest.mark.parametrize("noise", fm.NOISE_FORMS)
def test_noise_is_laplace_with_the_stated_scale(noise):
    """Each coefficient's noise is Lap(b): mean 0, E|X| = b, Var = 2 b^2 (5-SE tolerances)."""
    d, b = 3, 0.7
    k = fm.n_coefficients(d, noise)
    n = 40000
    u = rngm.uniform(11, np.arange(n), 0, k)
    lap = rngm.laplace_from_uniform(u, b)
    alpha = np.zeros((n, d))
    m = np.zeros((n, d, d))
    a_t, m_t = fm.perturb(alpha, m, lap, noise)
    vec = fm.coefficient_vector(a_t, m_t, "matrix" if noise == "matrix" else "monomials")
    if noise == "matrix":  # symmetrised: off-diagonal entries average two draws
        np.testing.assert_allclose(m_t, np.swapaxes(m_t, 1, 2))
        x = lap
    else:
        x = vec
    se_abs = b / math.sqrt(n)          # sd of |Lap(b)| is b
    se_var = math.sqrt(20 * b**4 / n)  # Var of X^2 for Laplace: E X^4 - (E X^2)^2 = 24b^4 - 4b^4
    assert np.abs(x.mean(axis=0)).max() < 5 * math.sqrt(2) * b / math.sqrt(n)
    assert np.abs(np.abs(x).mean(axis=0) - b).max() < 5 * se_abs
    assert np.abs((x**2).mean(axis=0) - 2 * b**2).max() < 5 * se_var


def test_noise_free_solutions_have_closed_forms():
    rng = np.random.default_rng(4)
    zp = fm.preprocess(rng.normal(size=(6, 40, 3)), 4.0)
    alpha, m = fm.coefficients(zp)
    s = zp.sum(axis=1)
    big_s = np.einsum("bnk,bnl->bkl", zp, zp)
    expect = math.sqrt(math.pi / 2) * np.linalg.solve(big_s, s[:, :, None])[:, :, 0]
    np.testing.assert_allclose(fm.solve(alpha, m, "trim"), expect, rtol=1e-10)
    lam = 0.3
    ridge = 0.5 * np.linalg.solve(m + lam * np.eye(3), alpha[:, :, None])[:, :, 0]
    np.testing.assert_allclose(fm.solve(alpha, m, "ridge", noise_sd=lam, ridge=1.0), ridge,
                               rtol=1e-10)
    big = 10 * np.linalg.norm(expect, axis=1).max()
    np.testing.assert_allclose(fm.solve(alpha, m, "ball", radius=big), expect, rtol=1e-9)


def test_trimming_drops_non_positive_directions():
    alpha = np.array([[1.0, 2.0, 3.0]])
    m = np.diag([2.0, -1.0, 0.0])[None]
    np.testing.assert_allclose(fm.solve_trimmed(alpha, m), [[0.25, 0.0, 0.0]], atol=1e-15)


def test_trust_region_against_dense_search_and_the_hard_case():
    rng = np.random.default_rng(5)
    q = rng.normal(size=(30, 2, 2))
    q = q + np.swapaxes(q, 1, 2)
    a = rng.normal(size=(30, 2))
    x = fm.trust_region(q, a, 1.2)
    ang = np.linspace(0, 2 * np.pi, 2001)
    rad = np.linspace(0, 1.2, 61)
    pts = (rad[:, None, None] * np.stack([np.cos(ang), np.sin(ang)], axis=1)[None]).reshape(-1, 2)
    for i in range(30):
        vals = 0.5 * np.einsum("pk,kl,pl->p", pts, q[i], pts) - pts @ a[i]
        ours = 0.5 * x[i] @ q[i] @ x[i] - a[i] @ x[i]
        assert np.linalg.norm(x[i]) <= 1.2 * (1 + 1e-12)
        assert ours <= vals.min() + 1e-9
    # hard case: a orthogonal to the bottom eigenvector of an indefinite Q
    x = fm.trust_region(np.diag([-1.0, 2.0, 3.0])[None], np.array([[0.0, 1.0, 1.0]]), 2.0)[0]
    assert np.linalg.norm(x) == pytest.approx(2.0)
    np.testing.assert_allclose(x[1:], [1 / 3, 1 / 4], rtol=1e-9)


def test_noise_free_fm_direction_agrees_with_the_mle():
    """Reference note §8: sqrt(pi/2) S^{-1} s points where the TM MLE points (cosine ~ 0.999
    with many records)."""
    rng = np.random.default_rng(6)
    d, n = 5, 2000
    beta = rng.uniform(0, 1, d) + rng.normal(size=(20, d))
    z = math.sqrt(2) * rng.normal(size=(20, n, d))
    win = np.einsum("bnk,bk->bn", z, beta) + rng.normal(size=(20, n)) > 0
    z = np.where(win[:, :, None], z, -z)
    mle = constrained_mle(z, 50.0)
    alpha, m = fm.coefficients(fm.preprocess(z, 8.0))
    est = fm.solve(alpha, m, "trim")
    cos = (mle * est).sum(axis=1) / np.linalg.norm(mle, axis=1) / np.linalg.norm(est, axis=1)
    assert cos.min() > 0.98
    assert np.median(cos) > 0.995
