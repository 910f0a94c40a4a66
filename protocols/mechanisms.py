"""Local randomizers and their privacy parameters, in one place.

Each function states the ε it satisfies and the sensitivity it assumes; protocols build their
``PrivacyClaim`` from these, and the audit checks the claims empirically.
"""

from __future__ import annotations

import math

import numpy as np

from protocols.rng import laplace_from_uniform


def rr_keep_probability(epsilon: float) -> float:
    """Binary randomized response keeps the true bit with p = e^ε / (1 + e^ε).

    The likelihood ratio of any output under the two inputs is p / (1 - p) = e^ε, so one report
    is ε-LDP. (Seed 000's proof of Theorem 1 writes 2p/(1-p); the binary ratio is p/(1-p).)
    """
    return math.exp(epsilon) / (1.0 + math.exp(epsilon)) if epsilon < 700 else 1.0


def randomized_response(bits: np.ndarray, u: np.ndarray, epsilon: float) -> np.ndarray:
    """Report each bit truthfully when ``u < p`` (p = rr_keep_probability(ε)), flipped otherwise.

    This is the mechanism seed 000's Algorithm 1 means: as printed, lines 4-7 output 1 with
    probability p whatever the true answer o_ik, which carries no information; randomized
    response applies the coin to the true answer.
    """
    keep = u < rr_keep_probability(epsilon)
    return np.where(keep, bits, 1 - bits)


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale b = Δ/ε of the Laplace mechanism, which is ε-DP for a query of sensitivity Δ."""
    return sensitivity / epsilon


GRID_BITS = 20  # released Laplace values are multiples of 2^(ceil(log2 b) - GRID_BITS)


def snap_to_grid(x: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """Round Laplace-noised values to a power-of-two grid of about scale / 2^20.

    Textbook floating-point Laplace is not ε-DP (Mironov, CCS 2012): the low-order bits of
    ``value + noise`` depend on ``value`` (1 + noise and 0 + noise land on different float
    grids), so a test on those bits tells neighbouring inputs apart; our own ε audit found
    exactly that (ε_lower 1.45 at a claimed ε = 1 for LDP-KwikSort:Lap). Rounding to a grid
    Λ = 2^(ceil(log2 b) - 20) erases the low bits: the result differs from the ideal rounded
    real-valued mechanism (which is ε-DP, being post-processing) only when ``value + noise``
    falls within one float ulp of a cell boundary, about 2^-32 of the time, and it moves a
    value by at most Λ/2 <= b * 2^-20.

    Where the guarantee stops: in the far tails, once ``|value + noise|`` exceeds about
    2^52 Λ (about b 2^32), the float spacing exceeds Λ, cells can be empty and the output is
    the float mechanism's again; noise that large has probability about e^(-2^32). Every
    released Laplace value in ldpsim, local and central, goes through this function (the audit's
    floating-point attack, ``simulator.float_attack``, checks the releases).
    """
    grid = np.exp2(np.ceil(np.log2(np.asarray(scale, dtype=np.float64))) - GRID_BITS)
    return np.round(np.asarray(x, dtype=np.float64) / grid) * grid


def laplace_mechanism(values: np.ndarray, u: np.ndarray, sensitivity: float | np.ndarray,
                      epsilon: float | np.ndarray) -> np.ndarray:
    """values + Lap(Δ/ε), the noise drawn by inverse CDF from the uniforms ``u``.

    ε-DP for a query of sensitivity Δ; the output is snapped to a fine grid (``snap_to_grid``)
    so that the floating-point implementation keeps the guarantee.
    """
    return snapped_laplace(values, u, laplace_scale(sensitivity, epsilon))


def snapped_laplace(values: np.ndarray, u: np.ndarray, scale: float | np.ndarray
                    ) -> np.ndarray:
    """values + Lap(scale) from the uniforms ``u``, snapped to the grid of ``scale``: every
    released Laplace value goes through here (``laplace_mechanism`` when Δ and ε are at hand).
    """
    noisy = np.asarray(values, dtype=np.float64) + laplace_from_uniform(u, scale)
    return snap_to_grid(noisy, scale)


def laplace_threshold_keep_probability(epsilon: float) -> float:
    """P(o + Lap(1/ε) thresholded at 0.5 equals o) = 1 - e^{-ε/2} / 2 (seed 000 §5.2.2, M_lap)."""
    return 1.0 - 0.5 * math.exp(-epsilon / 2.0)
