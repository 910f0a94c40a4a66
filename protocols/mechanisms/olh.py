"""Optimised local hashing (Wang, Blocki, Li & Jha, USENIX Security 2017, §4.4).

Each user draws a hash seed independently of its data, hashes its value into g buckets and reports
the seed with the bucket randomised by GRR over [g] (``protocols.mechanisms.grr``): one report is
ε-LDP whatever the hash. Cheng et al. (2021) use it as the OLH baseline (§4.3) and inside CALM's
collection (§5.2.2); they write g = ⌈e^ε + 1⌉, we take the integer nearest the optimum e^ε + 1 (the
same number when e^ε is an integer, as at ε = ln 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.accel import Accelerator
from ldpsim.protocols.mechanisms.grr import GRR
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy, largest

from ldpsim import environment

#: the support counts in use: compiled (``protocols/_prfc.c``, ``olh_support``: one pass over
#: the reports for a few values at a time) or numpy, the same counts; ``LDPSIM_RNG=numpy``
#: chooses numpy
SUPPORT = Accelerator.load("OLH support counts", "ldpsim.protocols._prfc", environment.RNG,
                           "protocols/_prfc.c", needs=("olh_support",))

SEED_BITS = 32
_S32 = np.uint64(32)
_HA = np.uint64(0x2545F4914F6CDD1D)
_HB = np.uint64(0x9E3779B97F4A7C15)


def hash_range(epsilon: float) -> int:
    """g = round(e^ε) + 1, in [2, 2^31]."""
    return int(min(2**31, max(2, round(math.exp(min(epsilon, 40.0))) + 1)))


def hash_values(seeds: np.ndarray, values: np.ndarray, g: int) -> np.ndarray:
    """H_seed(v) in [0, g): multiply-add-shift (Dietzfelbinger) on 32-bit keys, then the top
    32 bits scaled to [0, g) (Lemire's multiply-high). ``seeds`` and ``values`` broadcast."""
    s = np.asarray(seeds, dtype=np.uint64)
    a = rngm.mix(s ^ _HA) | np.uint64(1)
    b = rngm.mix(s ^ _HB)
    x = (a * np.asarray(values, dtype=np.uint64) + b) >> _S32
    return ((x * np.uint64(g)) >> _S32).astype(np.int64)


@dataclass(frozen=True)
class OLH:
    """OLH with budget ``epsilon`` per report; a report is a (seed, bucket) pair."""

    epsilon: float

    @property
    def privacy(self) -> MechanismPrivacy:
        """One report is ε-LDP: the seed is drawn independently of the value and the bucket
        goes through GRR at ε over [g] (Wang et al., 2017, §4.4)."""
        return MechanismPrivacy(largest(self.epsilon), None, "olh")

    @property
    def g(self) -> int:
        """Number of hash buckets."""
        return hash_range(self.epsilon)

    @property
    def grr(self) -> GRR:
        """The bucket's randomizer: GRR over g values."""
        return GRR(self.epsilon, self.g)

    @property
    def p(self) -> float:
        """P[report = H(v)]."""
        return self.grr.p

    @property
    def q(self) -> float:
        """P[report = H(v')] for another value v': 1/g over the random seed."""
        return 1.0 / self.g

    def perturb(self, values: np.ndarray, seeds: np.ndarray, u_keep: np.ndarray,
                u_other: np.ndarray) -> np.ndarray:
        """The randomised bucket of each value under its seed (the seed is sent as is)."""
        g = self.g
        return self.grr.perturb(hash_values(seeds, values, g), u_keep, u_other)

    def log_likelihood(self, seeds: np.ndarray, buckets: np.ndarray,
                       values: np.ndarray) -> np.ndarray:
        """log P(seed, bucket | value): the seed is uniform on 2^32 values, the bucket is GRR
        of H_seed(value); -inf outside [0, g)."""
        g = self.g
        ys = np.asarray(buckets)
        ok = (ys >= 0) & (ys < g)
        h = hash_values(seeds, values, g)
        ll = self.grr.log_likelihood(np.where(ok, ys, 0), h) - SEED_BITS * math.log(2)
        return np.where(ok, ll, -np.inf)

    def support_counts(self, seeds: np.ndarray, buckets: np.ndarray, domain: int,
                       chunk: int = 1 << 16) -> np.ndarray:
        """C(v) = #{reports with H_seed(v) = bucket} for every v in [0, domain) (the support
        of Wang et al., 2017, §4.4): O(n · domain) work. Compiled where it was built (the
        same counts); else in cache-sized blocks of about ``chunk`` hashes (rows of reports
        times values), each hashed in place (``hash_values``' arithmetic, its multipliers
        computed once per report)."""
        if SUPPORT.module is not None:
            return _support_compiled(seeds, buckets, domain, self.g)
        g = np.uint64(self.g)
        s = np.asarray(seeds, dtype=np.uint64)
        # a bucket outside [0, g) matches nothing (a negative one wraps above g)
        ys = np.asarray(buckets, dtype=np.int64).astype(np.uint64)
        counts = np.zeros(domain, dtype=np.int64)
        if len(s) == 0 or domain == 0:
            return counts
        mul = rngm.mix(s ^ _HA) | np.uint64(1)
        add = rngm.mix(s ^ _HB)
        v = np.arange(domain, dtype=np.uint64)
        rows = max(1, chunk // domain)
        cols = min(domain, max(1, chunk))  # all values at once unless one row exceeds chunk
        buf = np.empty((min(rows, len(s)), cols), dtype=np.uint64)
        hit = np.empty(buf.shape, dtype=bool)
        for lo in range(0, domain, cols):
            vals = v[lo:lo + cols]
            for st in range(0, len(s), rows):
                x = buf[: min(rows, len(s) - st), : len(vals)]
                np.multiply(mul[st:st + rows, None], vals[None, :], out=x)
                x += add[st:st + rows, None]
                x >>= _S32
                x *= g
                x >>= _S32
                h = hit[: x.shape[0], : x.shape[1]]
                np.equal(x, ys[st:st + rows, None], out=h)
                counts[lo:lo + len(vals)] += np.count_nonzero(h, axis=0)
        return counts

    def estimate(self, support: np.ndarray, n: float) -> np.ndarray:
        """Unbiased frequencies (C(v)/n - 1/g) / (p - 1/g) (uniform when n = 0)."""
        if n <= 0:
            return np.full(len(support), 1.0 / len(support))
        return (np.asarray(support, dtype=float) / n - self.q) / (self.p - self.q)

    def bias(self) -> float:
        """``estimate`` is unbiased."""
        return 0.0

    def variance(self, f: np.ndarray | float, n: float) -> np.ndarray:
        """Variance of ``estimate`` (hash collisions modelled as independent, rate 1/g)."""
        p, q = self.p, self.q
        f = np.asarray(f, dtype=float)
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


def _support_compiled(seeds: np.ndarray, buckets: np.ndarray, domain: int, g: int
                      ) -> np.ndarray:
    """``OLH.support_counts`` by the compiled kernel (``_prfc.olh_support``): the same counts."""
    s = np.asarray(seeds, dtype=np.uint64)
    ys = np.ascontiguousarray(buckets, dtype=np.int64)
    if ys.shape != s.shape or s.ndim != 1:
        raise ValueError(f"OLH support: seeds and buckets must be two vectors of one length, "
                         f"got {s.shape} and {ys.shape}")
    counts = np.zeros(domain, dtype=np.int64)
    if len(s) == 0 or domain == 0:
        return counts
    mul = np.ascontiguousarray(rngm.mix(s ^ _HA) | np.uint64(1))
    add = np.ascontiguousarray(rngm.mix(s ^ _HB))
    SUPPORT.module.olh_support(mul, add, ys, g, counts)
    return counts
