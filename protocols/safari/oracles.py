"""Frequency oracles for one categorical value: GRR, OLH and Harmony (Hadamard), vectorised.

Each oracle has one function stating its privacy (the ε it satisfies; "sensitivity" does not
apply to these mechanisms: their guarantee is the worst-case likelihood ratio of one report
under two inputs, which is e^ε), a perturbation function that takes the agent's uniforms (so
the same agent gives the same report batched or alone), an exact log-likelihood and an
unbiased estimator with its variance.

References: GRR and OLH follow Wang, Blocki, Li & Jha (USENIX Security 2017), which seed 003
cites as [10] (its §4.1 and §4.3 baselines); Harmony's categorical oracle follows Nguyên et al.
(arXiv 1606.05053, [6]) in its Hadamard form: the user reports one ±1 coefficient of its one-hot
vector in a Sylvester–Hadamard basis, randomised by binary RR.
"""

from __future__ import annotations

import math

import numpy as np

from protocols import rng as rngm

# ---------------------------------------------------------------------------------- GRR


def grr_probabilities(epsilon: float, k: int) -> tuple[float, float]:
    """(p, q) of generalized randomized response over k values; the report is ε-LDP.

    p = e^ε / (e^ε + k - 1) keeps the true value, q = 1 / (e^ε + k - 1) is each other value's
    probability (seed 003 Algorithm 2); p / q = e^ε is the worst-case likelihood ratio, so one
    report is ε-LDP (Theorem 2). Computed as 1 / (1 + (k-1) e^{-ε}) to stay finite for large ε.
    """
    if k <= 1:
        return 1.0, 0.0
    t = math.exp(-epsilon)
    p = 1.0 / (1.0 + (k - 1) * t)
    return p, t * p


def grr_perturb(values: np.ndarray, k: np.ndarray | int, epsilon: float, u_keep: np.ndarray,
                u_other: np.ndarray) -> np.ndarray:
    """GRR reports of ``values`` (0-based, < k; k may differ per value) from two uniforms each."""
    v = np.asarray(values, dtype=np.int64)
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), v.shape)
    p = np.array([grr_probabilities(epsilon, int(x))[0] for x in np.unique(k)])
    keep_p = p[np.searchsorted(np.unique(k), k)]
    other = np.minimum(np.floor(u_other * (k - 1)).astype(np.int64), np.maximum(k - 2, 0))
    other = other + (other >= v)
    return np.where((u_keep < keep_p) | (k <= 1), v, other)


def grr_log_likelihood(reports: np.ndarray, values: np.ndarray, k: np.ndarray | int,
                       epsilon: float) -> np.ndarray:
    """log P(report | value) of GRR over k values; -inf outside [0, k)."""
    r = np.asarray(reports, dtype=np.int64)
    v = np.asarray(values, dtype=np.int64)
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), r.shape)
    out = np.full(r.shape, -np.inf)
    for kk in np.unique(k):
        p, q = grr_probabilities(epsilon, int(kk))
        sel = (k == kk) & (r >= 0) & (r < kk)
        with np.errstate(divide="ignore"):
            out[sel] = np.where(r[sel] == v[sel], math.log(p), math.log(q) if q > 0 else -np.inf)
    return out


def grr_estimate(counts: np.ndarray, n: float, epsilon: float) -> np.ndarray:
    """Unbiased frequencies (c/n - q) / (p - q) from report counts over k = len(counts) values."""
    k = len(counts)
    p, q = grr_probabilities(epsilon, k)
    if n <= 0:
        return np.full(k, 1.0 / k)
    return (np.asarray(counts, dtype=float) / n - q) / (p - q)


def grr_variance(f: np.ndarray | float, n: float, epsilon: float, k: int) -> np.ndarray:
    """Exact variance of :func:`grr_estimate` for true frequency f among n reports."""
    p, q = grr_probabilities(epsilon, k)
    f = np.asarray(f, dtype=float)
    return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


# ---------------------------------------------------------------------------------- OLH

SEED_BITS = 32
_S32 = np.uint64(32)
_HA = np.uint64(0x2545F4914F6CDD1D)
_HB = np.uint64(0x9E3779B97F4A7C15)


def olh_g(epsilon: float) -> int:
    """Hash range g = round(e^ε) + 1 (the integer nearest the optimum e^ε + 1; seed 003 §4.3
    writes ⌈e^ε + 1⌉, which is the same number when e^ε is an integer, as for ε = ln 3)."""
    return int(min(2**31, max(2, round(math.exp(min(epsilon, 40.0))) + 1)))


def olh_probabilities(epsilon: float, g: int) -> tuple[float, float]:
    """(p, q*): P[report = H(v)] and P[report = H(v')] for another value v' (q* = 1/g).

    The report is GRR over the g hash values, so it is ε-LDP whatever the hash (the hash seed
    is drawn independently of the data).
    """
    return grr_probabilities(epsilon, g)[0], 1.0 / g


def olh_hash(seeds: np.ndarray, values: np.ndarray, g: int) -> np.ndarray:
    """H_seed(v) in [0, g): multiply-add-shift (Dietzfelbinger) on 32-bit keys, then the top
    32 bits scaled to [0, g) (Lemire's multiply-high). ``seeds`` and ``values`` broadcast."""
    s = np.asarray(seeds, dtype=np.uint64)
    a = rngm.mix(s ^ _HA) | np.uint64(1)
    b = rngm.mix(s ^ _HB)
    x = (a * np.asarray(values, dtype=np.uint64) + b) >> _S32
    return ((x * np.uint64(g)) >> _S32).astype(np.int64)


def olh_perturb(values: np.ndarray, seeds: np.ndarray, epsilon: float, u_keep: np.ndarray,
                u_other: np.ndarray) -> np.ndarray:
    """The perturbed hash value (GRR over [g]) of each value under its seed."""
    g = olh_g(epsilon)
    return grr_perturb(olh_hash(seeds, values, g), g, epsilon, u_keep, u_other)


def olh_log_likelihood(seeds: np.ndarray, ys: np.ndarray, values: np.ndarray,
                       epsilon: float) -> np.ndarray:
    """log P(seed, y | value): the seed is uniform on 2^32 values, y is GRR of H_seed(value)."""
    g = olh_g(epsilon)
    ok = (np.asarray(ys) >= 0) & (np.asarray(ys) < g)
    h = olh_hash(seeds, values, g)
    ll = grr_log_likelihood(np.where(ok, ys, 0), h, g, epsilon) - SEED_BITS * math.log(2)
    return np.where(ok, ll, -np.inf)


def olh_support_counts(seeds: np.ndarray, ys: np.ndarray, domain: int, g: int,
                       chunk: int = 1 << 22) -> np.ndarray:
    """C(v) = #{reports with H_seed(v) = y} for every v in [0, domain): O(n · domain) work."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    ys = np.asarray(ys, dtype=np.int64)
    counts = np.zeros(domain, dtype=np.int64)
    if len(seeds) == 0:
        return counts
    per = max(1, chunk // max(1, domain))
    v = np.arange(domain, dtype=np.uint64)
    if per >= 2:
        for s in range(0, len(seeds), per):
            h = olh_hash(seeds[s:s + per, None], v[None, :], g)
            counts += (h == ys[s:s + per, None]).sum(axis=0)
    else:
        for i in range(len(seeds)):
            counts += olh_hash(seeds[i:i + 1], v, g) == ys[i]  # arrays: wrapping multiply
    return counts


def olh_estimate(support: np.ndarray, n: float, epsilon: float) -> np.ndarray:
    """Unbiased frequencies (C(v)/n - 1/g) / (p - 1/g)."""
    g = olh_g(epsilon)
    p, q = olh_probabilities(epsilon, g)
    if n <= 0:
        return np.full(len(support), 1.0 / len(support))
    return (np.asarray(support, dtype=float) / n - q) / (p - q)


def olh_variance(f: np.ndarray | float, n: float, epsilon: float) -> np.ndarray:
    """Variance of :func:`olh_estimate` (hash collisions modelled as independent, rate 1/g)."""
    g = olh_g(epsilon)
    p, q = olh_probabilities(epsilon, g)
    f = np.asarray(f, dtype=float)
    return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


# ------------------------------------------------------------------------------ Harmony


def hadamard_order(k: int) -> int:
    """k' = the smallest power of two >= k (rows of the Sylvester–Hadamard matrix)."""
    return 1 << max(0, int(k - 1).bit_length())


def _orders(k: np.ndarray | int, shape: tuple[int, ...]) -> np.ndarray:
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), shape)
    uk = np.unique(k)
    return np.array([hadamard_order(int(x)) for x in uk], dtype=np.int64)[
        np.searchsorted(uk, k)]


def harmony_keep_probability(epsilon: float) -> float:
    """Binary RR on the ±1 coefficient keeps it with e^ε / (e^ε + 1): one report is ε-LDP
    (the row index is drawn independently of the data)."""
    return 1.0 / (1.0 + math.exp(-epsilon))


def harmony_scale(epsilon: float) -> float:
    """c_ε = (e^ε + 1) / (e^ε - 1), which makes c_ε · (reported ±1) unbiased for Ψ[s, v]."""
    return 1.0 / (2.0 * harmony_keep_probability(epsilon) - 1.0)


def hadamard_entry(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Ψ[s, v] = (-1)^{popcount(s & v)} of the Sylvester–Hadamard matrix."""
    s = np.asarray(rows, dtype=np.uint64) & np.asarray(values, dtype=np.uint64)
    return 1 - 2 * (np.bitwise_count(s) & 1).astype(np.int64)


def harmony_perturb(values: np.ndarray, k: np.ndarray | int, epsilon: float, u_row: np.ndarray,
                    u_flip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row s, bit) per value: s uniform in [k'], bit = 1 iff the RR'd Ψ[s, v] is +1."""
    v = np.asarray(values, dtype=np.int64)
    kp = _orders(k, v.shape)
    s = np.minimum(np.floor(u_row * kp).astype(np.int64), kp - 1)
    b = hadamard_entry(s, v)
    b = np.where(u_flip < harmony_keep_probability(epsilon), b, -b)
    return s, (b > 0).astype(np.int64)


def harmony_log_likelihood(rows: np.ndarray, bits: np.ndarray, values: np.ndarray,
                           k: np.ndarray | int, epsilon: float) -> np.ndarray:
    """log P(s, bit | value) = log(1/k') + log(keep or flip probability); -inf if invalid."""
    s = np.asarray(rows, dtype=np.int64)
    bit = np.asarray(bits, dtype=np.int64)
    kp = _orders(k, s.shape)
    ok = (s >= 0) & (s < kp) & ((bit == 0) | (bit == 1))
    p = harmony_keep_probability(epsilon)
    match = (2 * bit - 1) == hadamard_entry(np.where(ok, s, 0), values)
    with np.errstate(divide="ignore"):
        ll = np.where(match, math.log(p), math.log1p(-p) if p < 1 else -np.inf) - np.log(kp)
    return np.where(ok, ll, -np.inf)


def fwht(a: np.ndarray) -> np.ndarray:
    """Unnormalised fast Walsh–Hadamard transform (Sylvester order) of a power-of-two vector."""
    x = np.array(a, dtype=float)
    n = len(x)
    h = 1
    while h < n:
        y = x.reshape(-1, 2, h)
        x = np.concatenate([y[:, 0] + y[:, 1], y[:, 0] - y[:, 1]], axis=1).reshape(n)
        h *= 2
    return x


def harmony_estimate(rows: np.ndarray, bits: np.ndarray, k: int, n: float,
                     epsilon: float) -> np.ndarray:
    """Unbiased frequencies f(v) = (1/n) Σ c_ε (2 bit - 1) Ψ[s, v] for v in [0, k)."""
    kp = hadamard_order(k)
    if n <= 0:
        return np.full(k, 1.0 / k)
    z = harmony_scale(epsilon) * (2.0 * np.asarray(bits, dtype=float) - 1.0)
    acc = np.bincount(np.asarray(rows, dtype=np.int64), weights=z, minlength=kp)
    if k <= 64:
        v = np.arange(k)
        return (hadamard_entry(np.arange(kp)[:, None], v[None, :]) * acc[:, None]).sum(0) / n
    return fwht(acc)[:k] / n


def harmony_variance(f: np.ndarray | float, n: float, epsilon: float) -> np.ndarray:
    """Variance (c_ε² - f) / n of :func:`harmony_estimate` (each term has square c_ε² and mean
    1[v_u = v])."""
    return (harmony_scale(epsilon) ** 2 - np.asarray(f, dtype=float)) / n
