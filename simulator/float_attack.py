"""An attack on the floating-point structure of Laplace reports (Mironov, CCS 2012).

A textbook implementation releases ``y = v + L(u)`` in float64, with ``L`` the inverse-cdf
Laplace of a uniform ``u`` on ldpsim's 53-bit grid (``u = (k + 1/2) 2^-53``, see
``protocols.rng.uniform``). Which floats ``y`` can come out depends on ``v``: for a candidate
input ``v'`` the attacker inverts the cdf at ``y - v'``, tries the few grid uniforms around it and
asks whether one of them gives back ``y`` *exactly*. The true input always passes; a wrong one
often fails, and then the report rules it out -- an event that is impossible under one input
and likely under the other, ε = ∞ on that event, whatever the claimed ε.

Snapping the release to a grid of about scale / 2^20 (``protocols.mechanisms.snap_to_grid``)
makes every candidate pass: the cell around a snapped report holds about 2^30 grid uniforms'
worth of noise values for any candidate. ``ldpsim``'s tests run this attack against the old
unsnapped form (kept as a test double) and against every shipped Laplace release.
"""

from __future__ import annotations

import numpy as np
from ldpsim.protocols.mechanisms import snapped_laplace
from ldpsim.protocols.rng import laplace_from_uniform

#: Grid uniforms tried on each side of the inverted cdf (the inversion is exact to a few ulps).
WINDOW = 64
_TWO_M53 = 2.0**-53


def reproducible(reports: np.ndarray, values: np.ndarray, scale: float | np.ndarray,
                 snapped: bool) -> np.ndarray:
    """For each report ``y`` (any shape; ``values`` and ``scale`` broadcast to it): is there a
    grid uniform ``u`` with ``v + L(u) == y`` exactly (``snap_to_grid(v + L(u), scale) == y``
    when ``snapped``)?

    Returns a boolean array of the reports' shape.
    """
    y = np.asarray(reports, dtype=np.float64)
    v = np.broadcast_to(np.asarray(values, dtype=np.float64), y.shape)
    b = np.broadcast_to(np.asarray(scale, dtype=np.float64), y.shape)
    noise = y - v
    # inverse of L: u = 1/2 + sign(n) (1 - e^{-|n|/b}) / 2, then its grid index k
    u = 0.5 + np.sign(noise) * (-np.expm1(-np.abs(noise) / b)) / 2.0
    k0 = np.floor(u / _TWO_M53 - 0.5)
    hit = np.isnan(v)  # a column that is not ``value + noise`` rules nothing out
    for d in (0, *(s * i for i in range(1, WINDOW + 1) for s in (-1, 1))):  # nearest first
        k = np.clip(k0 + d, 0, 2.0**53 - 1)
        uk = np.minimum((k + 0.5) * _TWO_M53, 1.0 - _TWO_M53)
        out = snapped_laplace(v, uk, b) if snapped else v + laplace_from_uniform(uk, b)
        hit |= out == y
        if hit.all():
            break
    return hit


def float_leak(reports: np.ndarray, true_values: np.ndarray, other_values: np.ndarray,
               scale: float | np.ndarray, snapped: bool) -> dict[str, float]:
    """The attack on reports made from ``true_values``: how often the true input reproduces a
    report (1.0 when the attack models the generator right) and how often the neighbouring
    input ``other_values`` fails to (> 0 means a report rules it out: ε = ∞ on that event).
    """
    true_ok = reproducible(reports, true_values, scale, snapped)
    other_ok = reproducible(reports, other_values, scale, snapped)
    return {"true_reproduced": float(true_ok.mean()),
            "other_ruled_out": float((true_ok & ~other_ok).mean())}
