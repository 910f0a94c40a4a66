"""The Thurstone–Mosteller preference model of Wang et al., 2019 (§3).

Voter i holds n_i pairwise records; record j says the voter chose alternative x_ij over y_ij, and
only the difference ``z_ij = x_ij - y_ij`` (winner minus loser, a vector of d features) matters.
Utilities are ``beta_i^T x + N(0, 1/2)``, so ``P(x ≻ y) = Phi(beta_i^T z)`` and the per-voter
log-likelihood is Eq. (2)::

    L_i(beta) = sum_j log Phi(beta^T z_ij)

The voter's preference beta_i is the maximiser of Eq. (2) over a norm ball ``||beta|| <= C``
(Eq. 3, see ``protocols.ethics.mle``); society's preference is the average beta_bar, and a decision
between alternatives picks the one with the larger ``beta_bar^T x`` (Noothigattu et al. 2018).

Everything here is vectorised over a block of voters: records come as an array ``z`` of shape
``(B, n, d)``, parameters as ``(B, d)``. Reductions run over fixed axes so that a voter's numbers
do not depend on which other voters share the block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import ordered
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
NORMS = ("l1", "l2", "linf")


# ----------------------------------------------------------------------------- norm balls


def ball_diameter_l1(norm: str, bound: float, d: int) -> float:
    """D_1(C) = sup ||beta - beta'||_1 over two points of the C-ball (Theorems 1 and 3).

    ``2C`` for the L1 ball, ``2 sqrt(d) C`` for the L2 ball, ``2 d C`` for the L-inf box. This is
    the L1 sensitivity of one voter's constrained MLE: a voter's data (or, in the worst case of
    Theorem 1's proof, a single record) can move beta_i anywhere in the ball.
    """
    if norm == "l1":
        return 2.0 * bound
    if norm == "l2":
        return 2.0 * math.sqrt(d) * bound
    if norm == "linf":
        return 2.0 * d * bound
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def norm_of(beta: np.ndarray, norm: str) -> np.ndarray:
    """The ball's norm of each row of ``beta`` (shape (B, d) -> (B,))."""
    if norm == "l1":
        return np.abs(beta).sum(axis=-1)
    if norm == "l2":
        return np.sqrt((beta * beta).sum(axis=-1))
    if norm == "linf":
        return np.abs(beta).max(axis=-1)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def project_l1(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of each row onto the L1 ball (Duchi et al., ICML 2008, Fig. 1)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    inside = a.sum(axis=-1) <= radius
    if inside.all():
        return v.copy()
    mu = -np.sort(-a, axis=-1)
    cs = np.cumsum(mu, axis=-1) - radius
    j = np.arange(1, v.shape[-1] + 1)
    cond = mu - cs / j > 0
    rho = v.shape[-1] - 1 - np.argmax(cond[..., ::-1], axis=-1)  # last index where cond holds
    theta = np.take_along_axis(cs, rho[..., None], axis=-1)[..., 0] / (rho + 1)
    out = np.sign(v) * np.maximum(a - theta[..., None], 0.0)
    return np.where(inside[..., None], v, out)


def project(v: np.ndarray, norm: str, radius: float) -> np.ndarray:
    """Euclidean projection of each row of ``v`` onto the ``norm`` ball of the given radius."""
    v = np.asarray(v, dtype=np.float64)
    if norm == "l2":
        nv = np.sqrt((v * v).sum(axis=-1))
        scale = np.where(nv > radius, radius / np.where(nv > 0, nv, 1.0), 1.0)
        return v * scale[..., None]
    if norm == "linf":
        return np.clip(v, -radius, radius)
    if norm == "l1":
        return project_l1(v, radius)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


# ------------------------------------------------------------------ Eq. (2) and derivatives


def utilities(z: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """u_ij = beta_i^T z_ij, shape (B, n) (one small matrix-vector product per voter)."""
    return ordered.matmul(z, beta[:, :, None])[:, :, 0]


def mills(u: np.ndarray) -> np.ndarray:
    """r(u) = phi(u) / Phi(u) = (log Phi)'(u), computed stably as sqrt(2/pi) / erfcx(-u/sqrt 2)."""
    from scipy import special  # on first use: the registry imports every family

    return SQRT_2_OVER_PI / special.erfcx(-u / math.sqrt(2.0))


def curvature(u: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """w(u) = -(log Phi)''(u) = r(u) (u + r(u)), in (0, 1) (log-concavity of Phi)."""
    if r is None:
        r = mills(u)
    return np.clip(r * (u + r), 0.0, 1.0)


def log_likelihood(z: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Eq. (2): L_i(beta_i) = sum_j log Phi(beta_i^T z_ij), one value per voter."""
    from scipy import special

    return special.log_ndtr(utilities(z, beta)).sum(axis=1)


def neg_log_likelihood_parts(z: np.ndarray, beta: np.ndarray, f: np.ndarray | None = None
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f, grad, hess) of f = -L_i at beta, shapes (B,), (B, d), (B, d, d).

    ``f`` may be passed in when already known (it is then returned unchanged).
    """
    u = utilities(z, beta)
    r = mills(u)
    w = curvature(u, r)
    if f is None:
        from scipy import special

        f = -special.log_ndtr(u).sum(axis=1)
    g = -ordered.matmul(r[:, None, :], z)[:, 0, :]
    h = ordered.matmul(np.swapaxes(z * w[:, :, None], 1, 2), z)
    return f, g, h


# ------------------------------------------------------------------------------ decisions


def decide(beta: np.ndarray, alternatives: np.ndarray) -> np.ndarray:
    """Index of the chosen alternative in each test instance: argmax_x beta^T x.

    ``alternatives`` has shape (T, k, d); ``beta`` shape (d,). Ties (only possible for beta = 0)
    go to the first alternative.
    """
    scores = (alternatives * np.asarray(beta, dtype=np.float64)[None, None, :]).sum(axis=2)
    return np.argmax(scores, axis=1)


def agreement(beta_a: np.ndarray, beta_b: np.ndarray, alternatives: np.ndarray) -> float:
    """Fraction of test instances on which two summary parameters make the same decision.

    This is the accuracy of Wang et al., 2019 (§5.1): "the fraction of test instances on which the
    true and noisy parameters give the same exact outcome".
    """
    return float(np.mean(decide(beta_a, alternatives) == decide(beta_b, alternatives)))


@dataclass(frozen=True)
class PersonalLaplace:
    """Each voter's release by the exact discrete Laplace at her own eps_i (Algorithms 2-3 of
    Wang et al., 2019): her personal value when the data set gives one, else ``epsilon``.

    Parameters
    ----------
    epsilon : float
        The budget of a voter without a personal eps_i (the protocol's ``epsilon``).
    worst : float
        The largest eps_i a voter may hold: the guarantee claimed for every voter.
    sensitivity : float
        The L1 sensitivity Δ shared by the components of one voter's vector (Theorem 3, or
        the functional mechanism's).
    components : int
        The length of that vector.
    """

    epsilon: float
    worst: float
    sensitivity: float
    components: int

    @property
    def privacy(self) -> MechanismPrivacy:
        """eps_i-LDP for every voter, at worst ``worst``, for a query of sensitivity Δ."""
        return MechanismPrivacy(self.worst, self.sensitivity, "laplace")

    def voter_epsilon(self, eps_col: np.ndarray) -> np.ndarray:
        """Each voter's eps_i: her personal value (finite and > 0), else ``epsilon``."""
        return np.where(np.isfinite(eps_col) & (eps_col > 0), eps_col, self.epsilon)

    def at(self, eps: np.ndarray, components: int | None = None) -> mech.Laplace:
        """The voters' releases: ``Laplace(eps_i, Δ)`` per row (eps of shape (B,))."""
        return mech.Laplace(np.asarray(eps)[:, None], self.sensitivity,
                            components=self.components if components is None else components)
