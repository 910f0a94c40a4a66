"""The Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006), exactly, on a grid.

Every Laplace value ldpsim releases is the discrete Laplace mechanism on a grid of spacing Λ::

    y = Λ (k + Z),   k = rint(v / Λ),   P(Z = z) = (1 - α)/(1 + α) α^|z|,   α = e^(-1/t)

with the integer scale t = ``T`` = 2^20 in grid units, Z drawn exactly with integer arithmetic
(Canonne, Kamath & Steinke, 2020, Algorithms 1-2; ``protocols.mechanisms.dlap``) and

    Λ = Δ / (⌊εt⌋ + 1/2 - 5c/4)

for a query of L1 sensitivity Δ over c components (``components``: how many values of one
release share Δ, e.g. a vector β_i with ||β - β'||_1 <= Δ; c = 1 for a scalar).

**Why it is exactly ε-DP.** Let v, v' be neighbouring inputs, Σ_j |v_j - v'_j| <= Δ.

1. The float quotient q_j = fl(v_j / Λ) is within 2^-53 |v_j / Λ| < 1/8 of v_j / Λ, because
   ``lattice`` refuses |q_j| >= 2^50; so |k_j - v_j / Λ| <= 1/2 + 1/8 and
   Σ_j |k_j - k'_j| <= Δ/Λ + 5c/4.
2. The denominator D = ⌊εt⌋ + 1/2 - 5c/4 is a multiple of 1/4 below 2^50 (εt < 2^50 is
   required), so it is exact in float64, and Λ = fl(Δ/D) gives Δ/Λ <= D (1 + 2^-52) < D + 1/8.
3. Hence Σ_j |k_j - k'_j| < ⌊εt⌋ + 1/2 + 1/8, and being an integer it is <= ⌊εt⌋.
4. For every output lattice vector n: P(n | v) / P(n | v') = α^(Σ|n_j - k_j| - Σ|n_j - k'_j|)
   <= e^(Σ|k_j - k'_j| / t) <= e^(⌊εt⌋/t) <= e^ε.
5. The float release y_j = fl(Λ n_j) is a function of n_j and the public Λ (post-processing),
   and an injective one: for |n| < 2^51, rint(fl(Λ n) / Λ) = n, so ``log_likelihood`` maps a
   report back to its integer exactly. No floating-point artefact can tell inputs apart: every
   lattice point is an output of every input (Z has full support), nothing else is an output of
   any.

So the release is pure ε-DP with δ = 0 for the ε it claims; the loss it actually reaches is
⌊εt⌋/t (``privacy``), in (ε - 1/t, ε], attained by a one-component release (neighbours at
distance Δ with v/Λ just below a half-integer). One caveat, stated for exactness: a value whose
sampler would need more than 2^16 random words raises instead of releasing (probability below
10^-6000, decided by the words alone, not by the input), which formally makes the code
(ε, e^ε 10^-6000)-DP.

**What exactness costs.** The rounding of each component takes up to 5/4 of the ⌊εt⌋ grid
steps the budget allows, so the noise's scale is tΛ = Δt / (⌊εt⌋ + 1/2 - 5c/4), about
b (1 + 5c / (4εt)) for b = Δ/ε: less than 10^-6 more for a scalar at ε = 1, 0.8% for the 65 FM
coefficients of d = 10 at ε_i = 0.01; ``laplace_grid`` refuses an ε too small for any grid. A
release's mean is Λ rint(v/Λ), within Λ/2 of v (``bias``).

The families use it for Algorithm 3 (LDP-KwikSort:Lap) and DP-KwikSort of Yan, Li & Liu, 2020,
LP (Eq. 7) and the MF objective noise of Sun et al., 2018, DPWeVote-Laplace of Yan, Liu & Liu,
2018, and the VLCP/VLDP/RLDP releases and FM coefficients of Wang et al., 2019.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ldpsim.protocols.mechanisms import dlap
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy, largest
from ldpsim.protocols.words import GeneratorWords, WordSource

#: The discrete Laplace's scale in grid units (a power of two: U is a bit-slice of a word)
T = 1 << 20
#: Largest |v / Λ| (and εt) the exactness argument covers: float64 rounding stays below 1/8
LATTICE_LIMIT = 2.0**50


def laplace_scale(sensitivity: Any, epsilon: Any) -> Any:
    """The nominal scale b = Δ/ε of the continuous Laplace mechanism (the papers' Lap(Δ/ε));
    the released noise's scale is ``Laplace.scale`` = tΛ, about b (1 + 5c / (4εt))."""
    return sensitivity / epsilon


def laplace_grid(sensitivity: Any, epsilon: Any, components: int = 1, t: int = T) -> Any:
    """The grid Λ = Δ / (⌊εt⌋ + 1/2 - 5c/4) on which the release is exactly ε-DP (module
    docstring). Raises ValueError where the argument does not hold: εt >= 2^50, or
    ⌊εt⌋ <= 5c/4 - 1/2 (ε too small for the grid's rounding of c components), or Λ not a normal
    positive float."""
    t = dlap.check_scale(t)
    if int(components) < 1:
        raise ValueError(f"Laplace: components must be >= 1, got {components}")
    eps = np.asarray(epsilon, dtype=np.float64)
    sens = np.asarray(sensitivity, dtype=np.float64)
    et = eps * t
    if not np.all(np.isfinite(et)) or np.any(et >= LATTICE_LIMIT):
        raise ValueError(f"Laplace: epsilon * t must be finite and below 2^50 for the exact "
                         f"grid, got epsilon up to {np.max(eps):g} (t = {t})")
    den = np.floor(et) + 0.5 - 1.25 * int(components)
    if np.any(den <= 0):
        raise ValueError(f"Laplace: epsilon = {np.min(eps):g} is too small for an exact grid of "
                         f"{components} component(s) at t = {t}: floor(epsilon t) must exceed "
                         f"5c/4 - 1/2 = {1.25 * int(components) - 0.5:g}")
    lam = sens / den
    if not np.all(np.isfinite(lam) & (lam >= np.finfo(np.float64).tiny)):
        raise ValueError(f"Laplace: the grid Δ / (⌊εt⌋ + 1/2 - 5c/4) is not a normal positive "
                         f"float for sensitivity {sensitivity} and epsilon {epsilon}")
    return float(lam) if lam.ndim == 0 else lam


def on_grid(reports: np.ndarray, grid: Any) -> np.ndarray:
    """For each report ``y``: is it a release of the discrete mechanism on ``grid`` Λ, i.e.
    ``y == fl(Λ n)`` for the integer n = rint(y/Λ) (|n| < 2^51)? Every input reproduces such a
    report (Z has full support) and none reproduces any other (false for NaN and inf)."""
    y, lam = np.broadcast_arrays(np.asarray(reports, dtype=np.float64),
                                 np.asarray(grid, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        n = np.rint(y / lam)
        return (np.abs(n) < 2.0**51) & (n * lam == y)


def laplace_threshold_keep_probabilities(epsilon: float, threshold: float = 0.5
                                         ) -> tuple[float, float]:
    """For an answer o ∈ {0, 1} released by ``Laplace(epsilon, 1)`` and decided by
    ``report >= threshold`` (Yan, Li & Liu, 2020, Algorithm 4, M_lap): the exact probabilities
    (P(decided 0 | o = 0), P(decided 1 | o = 1)).

    About 1 - e^(-ε/2)/2 each (the continuous mechanism's, §5.2.2); they differ from it and from
    each other by O(1/t), because 0.5 falls where it falls on the grid.
    """
    return Laplace(epsilon, 1.0).threshold_keep_probabilities(threshold)


@dataclass(frozen=True, eq=False)
class Laplace:
    """The exact discrete Laplace mechanism: ``Λ (rint(v/Λ) + Z)``, exactly ε-DP for a query of
    L1 sensitivity Δ (module docstring for the argument).

    Parameters
    ----------
    epsilon : float or ndarray
        Budget (> 0); an array broadcasts against the values (e.g. one ε per voter, shape
        (n, 1)).
    sensitivity : float or ndarray
        L1 sensitivity Δ of one release (> 0).
    components : int
        How many values of one release share the sensitivity Δ (the length of a vector query;
        1 for a scalar, or for columns that each have their own budget).
    _t : int
        The discrete Laplace's scale in grid units (``T``; smaller in tests only).
    """

    epsilon: Any
    sensitivity: Any = 1.0
    components: int = 1
    _t: int = field(default=T, repr=False)

    def __post_init__(self) -> None:
        if np.any(np.asarray(self.epsilon) <= 0) or np.any(np.asarray(self.sensitivity) <= 0):
            raise ValueError(f"Laplace needs epsilon > 0 and sensitivity > 0, got "
                             f"{self.epsilon}, {self.sensitivity}")
        object.__setattr__(self, "_grid", laplace_grid(self.sensitivity, self.epsilon,
                                                       self.components, self._t))

    # --- the mechanism's law -------------------------------------------------------------

    @property
    def t(self) -> int:
        """The scale of Z in grid units."""
        return self._t

    @property
    def grid(self) -> Any:
        """Λ, the spacing of the released values (one per ε/Δ when those are arrays)."""
        return self._grid

    @property
    def scale(self) -> Any:
        """tΛ: the released noise is Laplace-shaped with this scale in value units,
        P(y) ∝ e^(-|y - Λk| / (tΛ)) on the grid."""
        return self._t * self._grid

    @property
    def privacy(self) -> MechanismPrivacy:
        """One release is ε-DP for a query of L1 sensitivity Δ (the largest ε and Δ of the
        block); it delivers ⌊εt⌋/t <= ε (``delivered``, attained by a one-component release;
        pure DP, δ = 0)."""
        delivered = float(np.max(np.floor(np.asarray(self.epsilon, dtype=np.float64) * self._t))
                          / self._t)
        return MechanismPrivacy(largest(self.epsilon), largest(self.sensitivity), "laplace",
                                delivered)

    def threshold_keep_probabilities(self, threshold: float = 0.5) -> tuple[float, float]:
        """(P(decided 0 | o = 0), P(decided 1 | o = 1)) of a bit o released by this mechanism
        and thresholded at ``threshold`` (``laplace_threshold_keep_probabilities``)."""
        return (1.0 - float(self.prob_at_least(0.0, threshold)),
                float(self.prob_at_least(1.0, threshold)))

    def with_sensitivity(self, sensitivity: Any) -> Laplace:
        """The same ε and components for a query of another sensitivity (e.g. a central
        average's Δ once the number of reports is known)."""
        return Laplace(self.epsilon, sensitivity, self.components, self._t)

    def with_epsilon(self, epsilon: Any) -> Laplace:
        """The same sensitivity and components at another ε (e.g. one per row, for personal
        budgets at most this mechanism's)."""
        return Laplace(epsilon, self.sensitivity, self.components, self._t)

    def lattice(self, values: np.ndarray) -> np.ndarray:
        """k = rint(v / Λ), the input's grid point (float64, integral). Raises ValueError for
        a non-finite value or |v / Λ| >= 2^50 (where the exactness argument stops)."""
        q = np.asarray(values, dtype=np.float64) / self._grid
        if not np.all(np.abs(q) < LATTICE_LIMIT):  # also false for NaN and inf
            raise ValueError(f"Laplace: values must be finite with |value / grid| < 2^50 "
                             f"(grid {np.min(self._grid):.6g}); got |value / grid| up to "
                             f"{np.max(np.abs(q)):.6g}")
        return np.rint(q)

    def from_noise(self, values: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The release for integer noise ``z``: Λ (rint(v/Λ) + z), computed as the float
        product fl((k + z) Λ) (k + z is an exact float64 integer, |k + z| < 2^51)."""
        return self._release(self.lattice(values), z)

    def _release(self, k: np.ndarray, z: np.ndarray) -> np.ndarray:
        """fl((k + z) Λ) for grid points k and integer noise z."""
        return (k + np.asarray(z, dtype=np.float64)) * self._grid

    def perturb(self, values: np.ndarray, words: WordSource) -> np.ndarray:
        """The release of ``values`` with the noise drawn from ``words`` (``protocols.words``:
        the agents' ``block.words()`` for local noise). Row i of the values is stream row i of
        the source; the columns (all trailing axes, flattened) are its columns."""
        v = np.asarray(values, dtype=np.float64)
        rows = v.shape[0] if v.ndim else 1
        cols = int(np.prod(v.shape[1:])) if v.ndim > 1 else 1
        k = self.lattice(v)  # refused before drawing
        z = dlap.sample(words, rows, cols, self._t)
        return self._release(k, z.reshape(v.shape))

    def release_spec(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, noise scale tΛ, grid Λ), each of the values' shape: what a protocol's
        ``laplace_release`` states for the floating-point attack."""
        v = np.asarray(values, dtype=np.float64)
        shape = np.broadcast_shapes(v.shape, np.shape(self._grid))
        return (np.broadcast_to(v, shape), np.broadcast_to(self.scale, shape).copy(),
                np.broadcast_to(self._grid, shape).copy())

    def perturb_from(self, generator: np.random.Generator, values: np.ndarray) -> np.ndarray:
        """The same release with the words drawn from a party's generator (central noise):
        deterministic given the generator's state."""
        return self.perturb(values, GeneratorWords(generator))

    def log_likelihood(self, reports: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The exact log-pmf of each report given its value:
        log((1 - α)/(1 + α)) - |n - k| / t with n = rint(y/Λ), k = rint(v/Λ), and -inf for a
        report that is not a grid point fl(Λ n) (impossible under every input)."""
        lam = self._grid
        y = np.asarray(reports, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            n = np.rint(y / lam)
            k = np.rint(np.asarray(values, dtype=np.float64) / lam)
            ll = math.log(math.tanh(0.5 / self._t)) - np.abs(n - k) / self._t
        return np.where(on_grid(y, lam), ll, -np.inf)

    def prob_at_least(self, values: np.ndarray, threshold: float) -> np.ndarray:
        """P(release >= threshold) for each value, exactly: the smallest grid integer n with
        fl(Λ n) >= threshold, then P(Z >= n - k) = α^m / (1 + α) for m = n - k >= 1 and
        1 - α^(1-m) / (1 + α) for m <= 0."""
        lam = np.asarray(self._grid, dtype=np.float64)
        k = self.lattice(values)
        lam, k = np.broadcast_arrays(lam, k)
        n = np.ceil(threshold / lam)
        for _ in range(4):  # fl(Λ n) is non-decreasing in n: step to the first n at or above
            n = np.where((n - 1) * lam >= threshold, n - 1, n)
            n = np.where(n * lam < threshold, n + 1, n)
        if not np.all((n * lam >= threshold) & ((n - 1) * lam < threshold)):
            raise AssertionError("prob_at_least: the first grid point at the threshold")
        m = n - k
        t = self._t
        one_plus = 1.0 + math.exp(-1.0 / t)
        p = np.where(m >= 1, np.exp(-np.maximum(m, 1) / t) / one_plus,
                     1.0 - np.exp(-(1 - np.minimum(m, 0)) / t) / one_plus)
        return float(p) if p.ndim == 0 else p

    # --- estimation ----------------------------------------------------------------------

    def mean(self, values: np.ndarray) -> np.ndarray:
        """E[release] = Λ rint(v/Λ) (Z is symmetric)."""
        return self.lattice(values) * self._grid

    def estimate(self, reports: np.ndarray) -> np.ndarray:
        """A report is its own estimate of the value (bias ``bias``, at most Λ/2)."""
        return np.asarray(reports, dtype=np.float64)

    def bias(self, values: np.ndarray) -> np.ndarray:
        """E[release] - v = Λ rint(v/Λ) - v, the grid's rounding: |bias| <= Λ/2."""
        return self.mean(values) - np.asarray(values, dtype=np.float64)

    def variance(self) -> Any:
        """Var(release) = Λ² 2α / (1 - α)² per value (the discrete Laplace's, α = e^(-1/t);
        about 2 (tΛ)²)."""
        a = math.exp(-1.0 / self._t)
        return self._grid**2 * (2 * a / math.expm1(-1.0 / self._t) ** 2)
