"""Algorithm 3 of Wang et al., 2019: record-level LDP, functional mechanism (Zhang et al. 2012).

Each voter perturbs the *objective* of her own MLE instead of its result (§4.4). Per record the
objective to minimise is ``f(z, beta) = -log Phi(beta^T z)`` (Eq. 9); writing it as
``f_1(g_1(z, beta))`` with ``g_1 = beta^T z`` (Eq. 12) and expanding ``f_1`` at 0 to second
order (Eqs. 13-14; the paper keeps the derivatives of order 0, 1 and 2)::

    log Phi(u) = -log 2 + sqrt(2/pi) u - u^2 / pi + O(u^3)
    f(z, beta) ~ log 2 - sqrt(2/pi) beta^T z + (1/pi) (beta^T z)^2

Summed over the voter's n records, with s = sum_j z_j and S = sum_j z_j z_j^T, the approximate
objective is ``n log 2 - sqrt(2/pi) s^T beta + (1/pi) beta^T S beta``: a polynomial in beta whose
coefficients (Eq. 11's lambda_phi for the monomials beta_k and beta_k beta_l, k <= l) are
``-sqrt(2/pi) s_k``, ``S_kk / pi`` and ``2 S_kl / pi``. The constant is the same for every record
and is not perturbed. The voter adds Laplace noise of scale Delta / eps_i to every coefficient
(Zhang et al. Algorithm 1) and minimises the noisy polynomial.

Preprocessing (§4.4). The sensitivity needs bounded records: the paper scales the alternatives so
that ``||z||_2 <= 1`` and then uses ``||z||_1 <= sqrt(d)`` (Cauchy-Schwarz). Here each record is
scaled by a public radius R and clipped to the unit L2 ball (``domain="l2"``; the paper scales x
and y to norm 1/2 and applies the triangle inequality, which gives the same bound), or clipped
coordinate-wise to [-1, 1] (``domain="linf"``, Zhang et al.'s convention, ``||z||_1 <= d``).
The estimate is mapped back to raw feature units by dividing by R.

Sensitivity (Zhang et al. Lemma 1 with Eq. 14): changing one record changes the coefficient
vector by at most ``2 max_z [sqrt(2/pi) ||z||_1 + ||z||_1^2 / pi]`` in L1 — see
``fm_sensitivity``. Adding noise to the d(d+1)/2 unordered monomials (``noise="monomials"``,
Eq. 11's representation, the default) or to all d^2 entries of the matrix and symmetrising
(``noise="matrix"``, Zhang et al.'s code) has the same sensitivity; the monomial form puts half
the variance on the off-diagonal entries.

The noisy quadratic need not be convex. Solvers (the paper does not say which it uses; Zhang et
al. 2012 §5 proposes the first two):

* ``"ridge"``: add ``ridge`` standard deviations of the coefficient noise to the diagonal, then
  spectral trimming of whatever is still not positive. Zhang et al.'s code uses 5; the default
  here is ``default_ridge(d) = 3 sqrt(d)``: the noise matrix (diagonal sd sigma, off-diagonal
  sigma/2 with monomial noise) has spectral norm about sigma sqrt(d), so the regularised matrix
  is positive definite with high probability for every d, and a voter's estimate is not
  dominated by the inverse of a near-singular noise matrix (with 5 sigma and d = 10, accuracy
  on the synthetic data drops by 0.1-0.2 at eps = 1; see the tests);
* ``"trim"``: spectral trimming only: minimise in the eigenspace of the positive eigenvalues;
* ``"ball"``: minimise the noisy quadratic over the Eq. (3) L2 ball (a trust-region subproblem;
  always bounded; not in the sources).

All are post-processing of the noisy coefficients, so the privacy is unchanged. Rerunning the
mechanism until the quadratic is convex would double eps (Zhang et al.); it is not offered.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.ethics import memo

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
DOMAINS = ("l2", "linf")
SOLVERS = ("ridge", "trim", "ball")
NOISE_FORMS = ("monomials", "matrix")
TRIM_TOL = 1e-8


def taylor_coefficients() -> tuple[float, float, float]:
    """(h(0), h'(0), h''(0)/2) of h(u) = log Phi(u): (-log 2, sqrt(2/pi), -1/pi) (Eqs. 13-14)."""
    return -math.log(2.0), SQRT_2_OVER_PI, -1.0 / math.pi


def record_l1_bound(d: int, domain: str) -> float:
    """max ||z||_1 over the preprocessed record domain: sqrt(d) for the unit L2 ball, d for
    the unit box (§4.4 of Wang et al., 2019, uses the L2 ball and
    Cauchy-Schwarz)."""
    if domain == "l2":
        return math.sqrt(d)
    if domain == "linf":
        return float(d)
    raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")


def fm_sensitivity(d: int, domain: str = "l2") -> float:
    """L1 sensitivity of the coefficient vector under record-level neighbours (Algorithm 3).

    Zhang et al. Lemma 1: Delta = 2 max_z sum_phi |lambda_phi(z)| with, from Eq. (14),
    sum_phi |lambda_phi(z)| = sqrt(2/pi) ||z||_1 + ||z||_1^2 / pi. Hence
    ``2 (sqrt(2/pi) sqrt(d) + d / pi)`` for ||z||_2 <= 1 (≈ 11.4 for d = 10) and
    ``2 (sqrt(2/pi) d + d^2 / pi)`` for |z_k| <= 1.
    """
    l1 = record_l1_bound(d, domain)
    return 2.0 * (SQRT_2_OVER_PI * l1 + l1 * l1 / math.pi)


def preprocess(z: np.ndarray, radius: float, domain: str = "l2") -> np.ndarray:
    """Scale records by 1/radius and clip them into the unit L2 ball or the unit box."""
    zs = np.asarray(z, dtype=np.float64) / radius
    if domain == "l2":
        nz = np.sqrt((zs * zs).sum(axis=-1, keepdims=True))
        return zs / np.maximum(nz, 1.0)
    if domain == "linf":
        return np.clip(zs, -1.0, 1.0)
    raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")


def n_coefficients(d: int, noise: str = "monomials") -> int:
    """How many noisy numbers one voter draws: d linear plus d(d+1)/2 or d^2 quadratic."""
    return d + (d * (d + 1) // 2 if noise == "monomials" else d * d)


def coefficients(zp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact coefficients of the voter's approximate objective to *maximise*, alpha^T beta -
    beta^T M beta: alpha = sqrt(2/pi) s (B, d) and M = S / pi (B, d, d)."""
    s = zp.sum(axis=1)
    m = ordered.matmul(np.swapaxes(zp, 1, 2), zp) / math.pi
    return SQRT_2_OVER_PI * s, m


def monomial_vector(alpha: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Eq. (11) coefficient vector of the objective to minimise: the d linear coefficients
    -alpha, then beta_k beta_l for k <= l (row-major upper triangle): M_kk and 2 M_kl."""
    d = alpha.shape[1]
    iu, ju = np.triu_indices(d)
    quad = m[:, iu, ju] * np.where(iu == ju, 1.0, 2.0)
    return np.concatenate([-alpha, quad], axis=1)


def voter_coefficients(z: np.ndarray, radius: float, domain: str = "l2",
                       noise: str = "monomials") -> np.ndarray:
    """Each voter's exact coefficient vector (Algorithm 3, lines 1-2): her records ``z``
    (B, n, d) preprocessed (``preprocess``), the coefficients of Eq. (14) (``coefficients``)
    in the form the noise is added to (``coefficient_vector``).

    A voter's vector depends on her records alone, bit for bit, so it is computed once per
    process and kept (``memo.FM``) for every run on the same data set.
    """
    z = np.asarray(z, dtype=np.float64)
    tag = f"fm:{float(radius)!r}:{domain}:{noise}"

    def exact(block: np.ndarray) -> np.ndarray:
        alpha, m = coefficients(preprocess(block, radius, domain))
        return coefficient_vector(alpha, m, noise)

    return memo.FM.results(tag, z, n_coefficients(z.shape[-1], noise), exact)


def from_monomials(vec: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``monomial_vector``: (alpha, symmetric M)."""
    alpha = -vec[:, :d]
    iu, ju = np.triu_indices(d)
    m = np.zeros((len(vec), d, d))
    half = vec[:, d:] * np.where(iu == ju, 1.0, 0.5)
    m[:, iu, ju] = half
    m[:, ju, iu] = half
    return alpha, m


def coefficient_vector(alpha: np.ndarray, m: np.ndarray, noise: str = "monomials"
                       ) -> np.ndarray:
    """The numbers a voter perturbs: the Eq. (11) monomial coefficients (``"monomials"``), or
    -alpha followed by all d^2 entries of M (``"matrix"``, Zhang et al.'s code)."""
    if noise == "monomials":
        return monomial_vector(alpha, m)
    if noise == "matrix":
        return np.concatenate([-alpha, m.reshape(len(alpha), -1)], axis=1)
    raise ValueError(f"noise must be one of {NOISE_FORMS}, got {noise!r}")


def from_vector(vec: np.ndarray, d: int, noise: str = "monomials"
                ) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, symmetric M) from a (noisy) coefficient vector; a noisy matrix is symmetrised."""
    if noise == "monomials":
        return from_monomials(vec, d)
    if noise == "matrix":
        mm = vec[:, d:].reshape(len(vec), d, d)
        return -vec[:, :d], 0.5 * (mm + np.swapaxes(mm, 1, 2))
    raise ValueError(f"noise must be one of {NOISE_FORMS}, got {noise!r}")


def perturb(alpha: np.ndarray, m: np.ndarray, laplace: np.ndarray,
            noise: str = "monomials") -> tuple[np.ndarray, np.ndarray]:
    """Add pre-drawn Laplace noise (already scaled by Delta/eps_i) to the coefficient vector
    (``n_coefficients(d, noise)`` columns) and return the noisy (alpha, symmetric M)."""
    d = alpha.shape[1]
    return from_vector(coefficient_vector(alpha, m, noise) + laplace, d, noise)


def default_ridge(d: int) -> float:
    """Default ridge of solver "ridge", in standard deviations of one coefficient's noise."""
    return 3.0 * math.sqrt(d)


def solve_trimmed(alpha: np.ndarray, m: np.ndarray, shift: np.ndarray | float = 0.0,
                  tol: float = TRIM_TOL) -> np.ndarray:
    """argmax alpha^T beta - beta^T (M + shift I) beta in the span of the eigenvectors of
    M + shift I with eigenvalue > tol (Zhang et al. §5 spectral trimming): beta =
    V_+ (V_+^T alpha) / (2 Lambda_+). With shift = 0 and M positive definite this is
    (1/2) M^{-1} alpha."""
    d = alpha.shape[1]
    shift = np.broadcast_to(np.asarray(shift, dtype=np.float64), (len(alpha),))
    lam, vec = ordered.eigh(m + shift[:, None, None] * np.eye(d))
    a = ordered.matmul(alpha[:, None, :], vec)[:, 0, :]
    keep = lam > tol
    x = np.where(keep, a / (2.0 * np.where(keep, lam, 1.0)), 0.0)
    return ordered.matmul(vec, x[:, :, None])[:, :, 0]


def trust_region(q: np.ndarray, a: np.ndarray, radius: float, iters: int = 200) -> np.ndarray:
    """argmin 1/2 x^T Q x - a^T x over ||x||_2 <= radius, Q symmetric (possibly indefinite).

    The exact trust-region subproblem (Moré & Sorensen 1983): in Q's eigenbasis
    x(lam) = a_hat / (Lambda + lam) with the smallest lam >= max(0, -Lambda_min) such that
    ||x(lam)|| <= radius, found by bisection; the "hard case" (a_hat orthogonal to the bottom
    eigenvector) is completed along that eigenvector.
    """
    lam, vec = ordered.eigh(q)
    ah = ordered.matmul(a[:, None, :], vec)[:, 0, :]
    lmin = lam[:, 0]
    lo = np.maximum(0.0, -lmin)
    na = np.sqrt((ah * ah).sum(axis=1))
    hi = lo + na / radius + 1e-300

    def norm_at(mu: np.ndarray) -> np.ndarray:
        den = lam + mu[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(np.abs(ah) > 0, ah / den, 0.0)
        return np.sqrt((x * x).sum(axis=1))

    interior = (lmin > 0) & (norm_at(np.zeros(len(a))) <= radius)
    a_lo, a_hi = lo.copy(), hi.copy()
    for _ in range(iters):
        mid = 0.5 * (a_lo + a_hi)
        big = norm_at(mid) > radius
        a_lo = np.where(big, mid, a_lo)
        a_hi = np.where(big, a_hi, mid)
    mu = np.where(interior, 0.0, a_hi)
    den = lam + mu[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where((np.abs(ah) > 0) & (den > 0), ah / den, 0.0)
    nx = np.sqrt((x * x).sum(axis=1))
    hard = ~interior & (nx < radius * (1 - 1e-9))
    if hard.any():
        x[hard, 0] += np.sqrt(np.maximum(radius**2 - nx[hard] ** 2, 0.0))
    return ordered.matmul(vec, x[:, :, None])[:, :, 0]


def solve(alpha: np.ndarray, m: np.ndarray, solver: str = "ridge", noise_sd: np.ndarray |
          float = 0.0, ridge: float = 5.0, radius: float | None = None) -> np.ndarray:
    """Maximise the (noisy) quadratic alpha^T beta - beta^T M beta with one of ``SOLVERS``.

    ``noise_sd`` is the standard deviation sqrt(2) Delta / eps_i of one coefficient's noise (the
    ridge is ``ridge * noise_sd``); ``radius`` is the ball of ``"ball"`` (in the preprocessed
    units).
    """
    if solver == "trim":
        return solve_trimmed(alpha, m)
    if solver == "ridge":
        return solve_trimmed(alpha, m, ridge * np.asarray(noise_sd, dtype=np.float64))
    if solver == "ball":
        if radius is None:
            raise ValueError("solver 'ball' needs a radius")
        return trust_region(2.0 * m, alpha, radius)
    raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
