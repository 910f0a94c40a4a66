"""An attack on the floating-point structure of Laplace reports (Mironov, CCS 2012).

A textbook implementation releases ``y = v + L(u)`` in float64, with ``L`` the inverse-cdf
Laplace of a uniform ``u`` on ldpsim's 53-bit grid (``u = (k + 1/2) 2^-53``, see
``protocols.rng.uniform``). Which floats ``y`` can come out depends on ``v``: for a candidate
input ``v'`` the attacker inverts the cdf at ``y - v'``, tries the few grid uniforms around it and
asks whether one of them gives back ``y`` *exactly*. The true input always passes; a wrong one
often fails, and then the report rules it out -- an event that is impossible under one input
and likely under the other, ε = ∞ on that event, whatever the claimed ε.

ldpsim releases every Laplace value as the exact discrete mechanism on a grid Λ
(``protocols.mechanisms.Laplace``): ``y = fl(Λ n)`` for an integer n = rint(v/Λ) + Z with Z of
full support on ℤ. A report is reproducible from a candidate exactly when it is such a grid
point, whatever the candidate: the attack rules nothing out, and a report off the grid is
impossible under every input. ``ldpsim``'s tests run this attack against textbook float Laplace
(kept as a test double) and against every shipped Laplace release.
"""

from __future__ import annotations

import numpy as np
from ldpsim.protocols.mechanisms.laplace import on_grid
from ldpsim.protocols.rng import laplace_from_uniform

#: Grid uniforms tried on each side of the inverted cdf (the inversion is exact to a few ulps).
WINDOW = 64
_TWO_M53 = 2.0**-53


def reproducible(reports: np.ndarray, values: np.ndarray, scale: float | np.ndarray,
                 grid: float | np.ndarray | None) -> np.ndarray:
    """For each report ``y`` (any shape; ``values``, ``scale`` and ``grid`` broadcast to it): is
    there randomness with which the input ``v`` gives ``y`` exactly?

    With ``grid`` None, the textbook float release ``v + L(u)`` for a grid uniform ``u``; else the
    discrete mechanism on ``grid`` (``mechanisms.laplace.on_grid``: the same answer for every
    input). A NaN value
    (a column that is not a Laplace release) rules nothing out. Returns a boolean array of the
    reports' shape.
    """
    y = np.asarray(reports, dtype=np.float64)
    v = np.broadcast_to(np.asarray(values, dtype=np.float64), y.shape)
    if grid is not None:
        return np.isnan(v) | on_grid(y, grid)
    b = np.broadcast_to(np.asarray(scale, dtype=np.float64), y.shape)
    noise = y - v
    # inverse of L: u = 1/2 + sign(n) (1 - e^{-|n|/b}) / 2, then its grid index k
    u = 0.5 + np.sign(noise) * (-np.expm1(-np.abs(noise) / b)) / 2.0
    k0 = np.floor(u / _TWO_M53 - 0.5)
    hit = np.isnan(v)  # a column that is not ``value + noise`` rules nothing out
    for d in (0, *(s * i for i in range(1, WINDOW + 1) for s in (-1, 1))):  # nearest first
        k = np.clip(k0 + d, 0, 2.0**53 - 1)
        uk = np.minimum((k + 0.5) * _TWO_M53, 1.0 - _TWO_M53)
        hit |= v + laplace_from_uniform(uk, b) == y
        if hit.all():
            break
    return hit


def float_leak(reports: np.ndarray, true_values: np.ndarray, other_values: np.ndarray,
               scale: float | np.ndarray, grid: float | np.ndarray | None) -> dict[str, float]:
    """The attack on reports made from ``true_values``: how often the true input reproduces a
    report (1.0 when the attack models the generator right) and how often the neighbouring
    input ``other_values`` fails to (> 0 means a report rules it out: ε = ∞ on that event).
    """
    true_ok = reproducible(reports, true_values, scale, grid)
    other_ok = reproducible(reports, other_values, scale, grid)
    return {"true_reproduced": float(true_ok.mean()),
            "other_ruled_out": float((true_ok & ~other_ok).mean())}
