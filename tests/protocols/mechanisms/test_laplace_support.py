"""The attack on the support of the Laplace mechanism: an output that one input can produce and
its neighbour never can.

Such an output makes the neighbour impossible: the privacy loss on that event is infinite,
whatever ε the mechanism claims. The test enumerates, exhaustively, every output the mechanism
can give for each of two neighbouring inputs (0 and 1, sensitivity 1, ε = 1) in a window of
outputs around -21.25 b, i.e. with |noise| of about 21-22 b. The old snapped form (inverse-cdf
noise from a uniform on a 2^-53 grid, rounded to a grid of b 2^-20) left cells of its grid empty
at some noise levels and not at others: 6979 outputs of input 0 in this window were impossible
for input 1, and the test failed. The exact discrete mechanism's randomness is its integer noise
Z, of full support on ℤ: both inputs' outputs are the same grid points.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols import mechanisms as mech

EPS, SENS = 1.0, 1.0
WINDOW = (-21.30, -21.20)  # outputs, in units of b = Δ/ε = 1


def outputs(value: float, lo: float, hi: float) -> set[float]:
    """Every output in [lo, hi] that ``value`` can produce: exhaustively over the mechanism's
    randomness, the integer noise z (each of positive probability: checked), whose outputs
    ``from_noise(value, z)`` land in the window."""
    lap = mech.Laplace(EPS, SENS)
    k = float(lap.lattice(value))
    z = np.arange(math.floor(lo / lap.grid) - k - 2, math.ceil(hi / lap.grid) - k + 3)
    y = lap.from_noise(np.full(len(z), value), z)
    y = y[(y >= lo) & (y <= hi)]
    assert np.isfinite(lap.log_likelihood(y, value)).all()
    return set(y.tolist())


def test_no_output_of_one_input_is_impossible_for_its_neighbour():
    y0, y1 = outputs(0.0, *WINDOW), outputs(1.0, *WINDOW)
    assert len(y0) > 10_000 and len(y1) > 10_000  # the window is not empty for either input
    only0, only1 = sorted(y0 - y1), sorted(y1 - y0)
    assert not only0 and not only1, (
        f"{len(only0)} outputs only input 0 can produce (e.g. {only0[:3]}), {len(only1)} only "
        f"input 1 can (e.g. {only1[:3]})")
