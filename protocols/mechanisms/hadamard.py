"""The Hadamard frequency oracle (Nguyên et al., arXiv 1606.05053, "Harmony";
reference [6] of Cheng et al., 2021).

A user with value v over k values draws a row s of the k' × k' Sylvester–Hadamard matrix Ψ
(k' the smallest power of two >= k) uniformly, independently of its data, and reports s with
the coefficient Ψ[s, v] = ±1 randomised by binary randomized response
(``protocols.mechanisms.grr``, k = 2): one report is ε-LDP. c_ε · (reported ±1) · Ψ[s, ·] is
unbiased for the one-hot vector of v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ldpsim.protocols.accel import Accelerator
from ldpsim.protocols.mechanisms.grr import GRR
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy, largest

from ldpsim import environment

#: the transform in use: compiled (``protocols/_safaric.c``) or numpy, the same bits;
#: ``LDPSIM_ORDERED=numpy`` chooses numpy
FWHT = Accelerator.load("Walsh-Hadamard transform", "ldpsim.protocols._safaric",
                        environment.ORDERED, "protocols/_safaric.c", needs=("fwht",))


def order(k: int) -> int:
    """k' = the smallest power of two >= k (rows of the Sylvester–Hadamard matrix)."""
    return 1 << max(0, int(k - 1).bit_length())


def orders(k: np.ndarray | int, shape: tuple[int, ...]) -> np.ndarray:
    """``order`` of every entry of ``k`` broadcast to ``shape``, vectorised: the bit length of
    |k - 1| is the number of ones once every bit below its top bit is set."""
    x = np.abs(np.broadcast_to(np.asarray(k, dtype=np.int64), shape) - 1).astype(np.uint64)
    for s in _SMEAR:
        x |= x >> s
    return np.left_shift(np.int64(1), np.bitwise_count(x).astype(np.int64))


def orders_of(k: np.ndarray | int, shape: tuple[int, ...]) -> np.ndarray | int:
    """``order(k)`` for one k (an int, no array), else ``orders(k, shape)``: what the
    randomizer and the checks compare against, for one domain or one per value."""
    return order(int(k)) if np.ndim(k) == 0 else orders(k, shape)


_SMEAR = tuple(np.uint64(s) for s in (1, 2, 4, 8, 16, 32))


def entry(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Ψ[s, v] = (-1)^{popcount(s & v)} of the Sylvester–Hadamard matrix."""
    s = np.asarray(rows, dtype=np.uint64) & np.asarray(values, dtype=np.uint64)
    return 1 - 2 * (np.bitwise_count(s) & 1).astype(np.int64)


def fwht(a: np.ndarray) -> np.ndarray:
    """Unnormalised fast Walsh–Hadamard transform (Sylvester order) of a power-of-two vector
    (Harmony's decoding, Nguyen et al., 2016): compiled where it was built (``FWHT``, in place,
    the same sums and differences), else level by level in numpy."""
    x = np.array(a, dtype=float)
    n = len(x)
    if FWHT.module is not None and x.ndim == 1 and n and not n & (n - 1):
        FWHT.module.fwht(x)
        return x
    h = 1
    while h < n:
        y = x.reshape(-1, 2, h)
        x = np.concatenate([y[:, 0] + y[:, 1], y[:, 0] - y[:, 1]], axis=1).reshape(n)
        h *= 2
    return x


@dataclass(frozen=True)
class Hadamard:
    """The Hadamard oracle with budget ``epsilon`` per report; a report is (row s, bit)."""

    epsilon: float

    @property
    def privacy(self) -> MechanismPrivacy:
        """One report is ε-LDP: the row s is drawn independently of the value and the
        coefficient Ψ[s, v] goes through binary randomized response at ε."""
        return MechanismPrivacy(largest(self.epsilon), None, "hadamard")

    @property
    def flip(self) -> GRR:
        """The coefficient's randomizer: binary RR keeping it with e^ε / (e^ε + 1)."""
        return GRR(self.epsilon, 2)

    @property
    def p(self) -> float:
        """P(the coefficient is kept)."""
        return self.flip.p

    @property
    def scale(self) -> float:
        """c_ε = (e^ε + 1) / (e^ε - 1) = 1 / (2p - 1), which makes c_ε · (reported ±1)
        unbiased for Ψ[s, v]."""
        return 1.0 / (2.0 * self.p - 1.0)

    def perturb(self, values: np.ndarray, k: np.ndarray | int, u_row: np.ndarray,
                u_flip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row s, bit) per value over k values: s uniform in [k'], bit = 1 iff the
        randomised Ψ[s, v] is +1."""
        v = np.asarray(values, dtype=np.int64)
        kp = orders_of(k, v.shape)
        s = np.minimum(np.floor(u_row * kp).astype(np.int64), kp - 1)
        bit = (entry(s, v) > 0).astype(np.int64)
        return s, self.flip.perturb(bit, u_flip)

    def log_likelihood(self, rows: np.ndarray, bits: np.ndarray, values: np.ndarray,
                       k: np.ndarray | int) -> np.ndarray:
        """log P(s, bit | value) = log(1/k') + log P(bit | Ψ[s, v]); -inf if invalid."""
        s = np.asarray(rows, dtype=np.int64)
        bit = np.asarray(bits, dtype=np.int64)
        kp = orders(k, s.shape)
        ok = (s >= 0) & (s < kp) & ((bit == 0) | (bit == 1))
        true_bit = (entry(np.where(ok, s, 0), values) > 0).astype(np.int64)
        ll = self.flip.log_likelihood(np.where(ok, bit, 0), true_bit) - np.log(kp)
        return np.where(ok, ll, -np.inf)

    def estimate(self, rows: np.ndarray, bits: np.ndarray, k: int, n: float) -> np.ndarray:
        """Unbiased frequencies f(v) = (1/n) Σ c_ε (2 bit - 1) Ψ[s, v] for v in [0, k)."""
        if n <= 0:
            return np.full(k, 1.0 / k)
        return self.estimate_from(self.accumulate(rows, bits, order(k)), k, n)

    def accumulate(self, rows: np.ndarray, bits: np.ndarray, size: int,
                   acc: np.ndarray | None = None) -> np.ndarray:
        """Σ c_ε (2 bit - 1) over the reports of each row s in [0, ``size``), added in the
        reports' order (``numpy.bincount``'s); with ``acc``, added on to it in place (one
        element at a time: parts given in order have the bits of one call with them all)."""
        z = self.scale * (2.0 * np.asarray(bits, dtype=float) - 1.0)
        rows = np.asarray(rows, dtype=np.int64)
        if acc is None:
            return np.bincount(rows, weights=z, minlength=size)
        np.add.at(acc, rows, z)
        return acc

    def estimate_from(self, acc: np.ndarray, k: int, n: float) -> np.ndarray:
        """``estimate`` from the rows' sums ``accumulate`` gives (k' = order(k) of them)."""
        if n <= 0:
            return np.full(k, 1.0 / k)
        if k <= 64:
            v = np.arange(k)
            return (entry(np.arange(order(k))[:, None], v[None, :]) * acc[:, None]).sum(0) / n
        return fwht(acc)[:k] / n

    def bias(self) -> float:
        """``estimate`` is unbiased."""
        return 0.0

    def variance(self, f: np.ndarray | float, n: float) -> np.ndarray:
        """(c_ε² - f) / n: each term has square c_ε² and mean 1[v_u = v]."""
        return (self.scale ** 2 - np.asarray(f, dtype=float)) / n


__all__ = ["Hadamard", "order", "orders", "entry", "fwht"]
