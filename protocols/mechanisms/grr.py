"""Generalised randomized response (Warner 1965; Wang, Blocki, Li & Jha 2017), binary included.

One report of a value ``v`` in ``{0, .., k-1}`` is ``v`` with probability ``p`` and each of the
other ``k - 1`` values with probability ``q``::

    p = e^ε / (k - 1 + e^ε),     q = 1 / (k - 1 + e^ε),     p / q = e^ε,

so the worst-case likelihood ratio of one report under two inputs is e^ε: one report is ε-LDP
(sensitivity does not apply). The families use it as the binary randomized response of Yan, Li &
Liu, 2020 (Algorithm 1, k = 2), the t-ary RR of Yan, Liu & Liu, 2018 (Theorem 4.2, matrices M_w
and M_φ of Eq. 9), the RR over Γ ∪ {NULL} of Sun et al., 2018 (Eq. 8, k = |Γ| + 1), and the GRR
of Cheng et al., 2021 (Algorithm 2), inside OLH (``protocols.mechanisms.olh``) and for
Hadamard's sign flip (``protocols.mechanisms.hadamard``).

``ε`` and ``k`` may be arrays that broadcast against the values (the 2-Layer baseline of Sun et al.,
2018, draws one ε per worker; SAFARI's attributes have different domains), so one object perturbs a
whole block.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy, largest

#: How a report that is not kept picks the other value from the rest of its uniform
#: (``perturb(..., others=...)``). Both give each other value probability q; each family keeps
#: the layout its published numbers were drawn with.
OTHERS = ("ascending", "cyclic")


@dataclass(frozen=True, eq=False)
class GRR:
    """Generalised randomized response over ``k`` values with budget ``epsilon`` per report.

    Parameters
    ----------
    epsilon : float or ndarray
        Budget of one report (>= 0); an array broadcasts against the values.
    k : int or ndarray
        Number of values (>= 1; k = 1 is always truthful and reveals nothing).
    """

    epsilon: Any
    k: Any = 2

    def __post_init__(self) -> None:
        if isinstance(self.k, int | float) and isinstance(self.epsilon, int | float) and not (
                self.k < 1 or self.epsilon < 0):
            return  # scalars that pass (a run's bound mechanism): no numpy on this path
        if np.any(np.asarray(self.k) < 1):
            raise ValueError(f"randomized response needs k >= 1 values, got {self.k}")
        if np.any(np.asarray(self.epsilon) < 0):
            raise ValueError(f"randomized response needs epsilon >= 0, got {self.epsilon}")

    # --- the mechanism's law -------------------------------------------------------------

    @property
    def p(self) -> Any:
        """P(report = true value) = 1 / (1 + (k - 1) e^{-ε}) (no overflow at large ε)."""
        if type(self.epsilon) in _SCALARS and type(self.k) in _SCALARS:
            return _scalar_law(self.epsilon, self.k)[0]
        return _p(self.epsilon, self.k)

    @property
    def q(self) -> Any:
        """P(report = one particular other value) = e^{-ε} / (1 + (k - 1) e^{-ε}); 0 if k = 1."""
        if type(self.epsilon) in _SCALARS and type(self.k) in _SCALARS:
            return _scalar_law(self.epsilon, self.k)[1]
        return _q(self.epsilon, self.k)

    @property
    def privacy(self) -> MechanismPrivacy:
        """One report is ε-LDP with ε = ln(p / q), the largest ε of the block (sensitivity
        does not apply)."""
        if type(self.epsilon) in _SCALARS:
            return _scalar_privacy(self.epsilon)
        return MechanismPrivacy(largest(self.epsilon), None, "randomized_response")

    def matrix(self) -> np.ndarray:
        """``M[i, j] = P(report i | true j)`` = (p - q) I + q J (scalar ε and k)."""
        k = int(self.k)
        return (self.p - self.q) * np.eye(k) + self.q

    def inverse_matrix(self) -> np.ndarray:
        """Closed form ``M^{-1} = (I - q J) / (p - q)`` (p + (k - 1) q = 1)."""
        return (np.eye(int(self.k)) - self.q) / (self.p - self.q)

    # --- randomizer ------------------------------------------------------------------------

    def perturb(self, values: np.ndarray, u: np.ndarray, u_other: np.ndarray | None = None,
                others: str = "ascending") -> np.ndarray:
        """Reports of ``values`` (ints in [0, k)) from one uniform in (0, 1) each.

        ``u < p`` keeps the value. Otherwise the residual ``j = ⌊(u - p) / q⌋`` (clipped to
        k - 2) picks the j-th other value: in increasing order (``others="ascending"``:
        ``j + (j >= v)``) or counting on from v (``"cyclic"``: ``(v + 1 + j) mod k``). With
        ``u_other`` the other value is drawn from its own uniform instead
        (``j = ⌊u_other (k - 1)⌋``, ascending). All three layouts give the law of ``matrix``.
        """
        if others not in OTHERS:
            raise ValueError(f"others: got {others!r}; allowed: {', '.join(OTHERS)}")
        v = np.asarray(values, dtype=np.int64)
        if np.ndim(self.k) == 0 and np.ndim(self.epsilon) == 0:
            fast = self._perturb_one_law(v, np.asarray(u), u_other, others)
            if fast is not None:
                return fast
        k = np.broadcast_to(np.asarray(self.k, dtype=np.int64), v.shape)
        p, q = np.asarray(self.p), np.asarray(self.q)
        if u_other is not None:
            j = np.minimum(np.floor(np.asarray(u_other) * (k - 1)).astype(np.int64),
                           np.maximum(k - 2, 0))
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                j = np.floor((np.asarray(u) - p) / q)
            j = np.clip(np.nan_to_num(j, nan=0.0, posinf=0.0, neginf=0.0), 0,
                        np.maximum(k - 2, 0)).astype(np.int64)
        other = (v + 1 + j) % np.maximum(k, 1) if others == "cyclic" else j + (j >= v)
        return np.where((np.asarray(u) < p) | (k <= 1), v, other)

    def _perturb_one_law(self, v: np.ndarray, u: np.ndarray, u_other: np.ndarray | None,
                         others: str) -> np.ndarray | None:
        """``perturb`` for one ε and one k >= 2 with p < 1 (every residual finite): the same
        reports in fewer whole-array steps (no broadcast k, no NaN clean-up; for k = 2 the
        other value of v is 1 - v, written as ``perturb`` computes it). None otherwise."""
        k, p, q = int(self.k), float(self.p), float(self.q)
        if k < 2 or not (0.0 < q and p < 1.0):
            return None
        if u_other is not None:
            j = np.minimum(np.floor(np.asarray(u_other) * (k - 1)).astype(np.int64), k - 2)
        elif k == 2:  # the residual is clipped to [0, k - 2] = {0}
            j = np.zeros(u.shape, dtype=np.int64)
        else:
            j = np.floor((u - p) / q)
            np.clip(j, 0, k - 2, out=j)
            j = j.astype(np.int64)
        other = (v + 1 + j) % k if others == "cyclic" else j + (j >= v)
        return np.where(u < p, v, other)

    def log_likelihood(self, reports: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Exact ``log P(report | value)``: log p if equal, log q otherwise; -inf for a report
        outside [0, k) or not a whole number, and where q underflows to 0 (huge ε: the
        floating-point mechanism is then truthful)."""
        rep = np.asarray(reports)
        val = np.asarray(values)
        with np.errstate(divide="ignore"):
            lp, lq = np.log(np.asarray(self.p)), np.log(np.asarray(self.q))
        out = np.where(rep == val, lp, lq).astype(np.float64)
        inside = (rep >= 0) & (rep <= np.asarray(self.k) - 1) & (rep == np.round(rep))
        return np.where(inside, out, -np.inf)

    # --- estimation ------------------------------------------------------------------------

    def counts(self, reports: np.ndarray) -> np.ndarray:
        """Observed numbers of each reported value (int64, length k)."""
        k = int(self.k)
        return np.bincount(np.asarray(reports, dtype=np.int64).ravel(), minlength=k)[:k]

    def estimate(self, counts: np.ndarray, n: float) -> np.ndarray:
        """Unbiased frequencies ``(c/n - q) / (p - q)`` from the report counts of n reports
        (uniform 1/k when there are none)."""
        k = len(counts)
        if n <= 0:
            return np.full(k, 1.0 / k)
        return (np.asarray(counts, dtype=float) / n - self.q) / (self.p - self.q)

    def estimate_counts(self, y: np.ndarray) -> np.ndarray:
        """Unbiased true counts ``x̂ = M^{-1} y`` along the last axis of the observed counts
        (leading axes are independent count vectors; Yan, Liu & Liu, 2018, Eq. 2)."""
        return ordered.matmul(y, self.inverse_matrix().T)

    def bias(self) -> float:
        """Both estimators are unbiased."""
        return 0.0

    def variance(self, f: np.ndarray | float, n: float) -> np.ndarray:
        """Exact variance of ``estimate`` at true frequency f among n reports:
        ``[f p(1 - p) + (1 - f) q(1 - q)] / (n (p - q)²)``."""
        p, q = self.p, self.q
        f = np.asarray(f, dtype=float)
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)

    def count_variance(self, x: np.ndarray) -> np.ndarray:
        """Exact ``Var(x̂_v)`` of ``estimate_counts`` when the true counts are x (sum N):
        ``[x_v p(1 - p) + (N - x_v) q(1 - q)] / (p - q)²``."""
        x = np.asarray(x, dtype=np.float64)
        p, q = self.p, self.q
        return (x * p * (1 - p) + (x.sum() - x) * q * (1 - q)) / (p - q) ** 2


def epsilon_of(p: float, k: int) -> float:
    """The ε a keep probability p gives over k values: ``ln((k - 1) p / (1 - p))`` (§4.5 of
    Yan, Liu & Liu, 2018, computes this ratio, 2 p_w / (1 - p_w) = e^{ε1} for k = 3)."""
    return math.log((k - 1) * p / (1.0 - p)) if p < 1.0 else math.inf


def _scalar(x: np.ndarray) -> Any:
    return float(x) if np.ndim(x) == 0 else x


def _p(epsilon: Any, k: Any) -> Any:
    """``GRR.p`` of ``epsilon`` and ``k`` (scalars or arrays)."""
    return _scalar(1.0 / (1.0 + (np.asarray(k, dtype=np.float64) - 1)
                          * np.exp(-np.asarray(epsilon, dtype=np.float64))))


def _q(epsilon: Any, k: Any) -> Any:
    """``GRR.q`` of ``epsilon`` and ``k`` (scalars or arrays)."""
    t = np.exp(-np.asarray(epsilon, dtype=np.float64))
    k = np.asarray(k, dtype=np.float64)
    return _scalar(np.where(k > 1, t / (1.0 + (k - 1) * t), 0.0))


#: the Python number types whose (ε, k) ``_scalar_law`` keeps (bool is not one of them)
_SCALARS = (int, float)


@functools.lru_cache(maxsize=4096, typed=True)
def _scalar_privacy(epsilon: float) -> MechanismPrivacy:
    """``GRR.privacy`` of a scalar ε, made once (it is immutable)."""
    return MechanismPrivacy(largest(epsilon), None, "randomized_response")


@functools.lru_cache(maxsize=4096, typed=True)
def _scalar_law(epsilon: float, k: float) -> tuple[float, float]:
    """``(p, q)`` of a scalar ε and k, computed once (``_p``, ``_q``: the same floats): the
    mechanisms of a sweep point's runs, and each run's many uses of them, share them."""
    return _p(epsilon, k), _q(epsilon, k)
