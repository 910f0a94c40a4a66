"""The attack on the support of the Laplace mechanism: an output that one input can produce and
its neighbour never can.

Such an output makes the neighbour impossible: the privacy loss on that event is infinite,
whatever ε the mechanism claims. The test enumerates, exhaustively, every output the mechanism
can give for each of two neighbouring inputs (0 and 1, sensitivity 1, ε = 1) in a window of
outputs around -21.25 b, i.e. with |noise| of about 21-22 b, where the old snapped form (inverse-cdf
noise from a uniform on a 2^-53 grid, rounded to a grid of b 2^-20) leaves cells of its grid
empty at some noise levels and not at others.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols import mechanisms as mech

EPS, SENS = 1.0, 1.0
WINDOW = (-21.30, -21.20)  # outputs, in units of b = Δ/ε = 1


def outputs(value: float, lo: float, hi: float) -> set[float]:
    """Every output in [lo, hi] that ``value`` can produce: exhaustively over the mechanism's
    randomness, the uniforms u = (k + 1/2) 2^-53 of ``protocols.rng.uniform`` whose noise lands
    within 0.01 b of the window (negative noise: u < 1/2, where the grid is exact)."""
    lap = mech.Laplace(EPS, SENS)
    # noise b ln(2u) for u < 1/2
    k_lo = math.floor(math.exp(lo - value - 0.01) / 2 * 2.0**53) - 2
    k_hi = math.ceil(math.exp(hi - value + 0.01) / 2 * 2.0**53) + 2
    u = (np.arange(k_lo, k_hi, dtype=np.float64) + 0.5) * 2.0**-53
    y = lap.perturb(np.full(len(u), value), u)
    return set(y[(y >= lo) & (y <= hi)].tolist())


def test_no_output_of_one_input_is_impossible_for_its_neighbour():
    y0, y1 = outputs(0.0, *WINDOW), outputs(1.0, *WINDOW)
    assert len(y0) > 10_000 and len(y1) > 10_000  # the window is not empty for either input
    only0, only1 = sorted(y0 - y1), sorted(y1 - y0)
    assert not only0 and not only1, (
        f"{len(only0)} outputs only input 0 can produce (e.g. {only0[:3]}), {len(only1)} only "
        f"input 1 can (e.g. {only1[:3]})")
