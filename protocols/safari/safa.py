"""SAFA: the sampling randomizer for multiple attributes (Cheng et al., 2021, §5.4, Algorithms 1-2).

The curator draws one attribute index j per user (uniformly, independent of the data) and
sends it; the user answers with a local randomizer over dom(A_j) alone; the curator turns the
per-attribute counts into frequency estimates. SAFA's randomizer is GRR (Algorithm 2); the same
sampling with Harmony's Hadamard oracle is the Fig. 5 comparison, and with OLH it is CALM's
collection (§5.2.2). Because the index is data-independent, the report is ε'-LDP (Theorem 2).

Estimators (``estimator``):

* ``"paper"``: Algorithm 1 line 11, z_j[k] = (|𝒜|·count_j[k] - n·q_j) / (n·(p_j - q_j)), which
  is unbiased over the random sampling (Theorem 3) with the variance of Eq. (7) / Theorem 4;
* ``"group"``: the same with the number n_j of users actually asked about A_j in place of
  n/|𝒜| (the usual SMP estimator): conditionally unbiased, slightly smaller variance, and each
  z_j sums to exactly 1.

``n`` is the number of reports received in the round (dropped-out users are not counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols.mechanisms import hadamard, olh
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy

ORACLES = ("safa", "harmony", "olh")
ESTIMATORS = ("paper", "group")


def sample_attributes(u: np.ndarray, n_attrs: int) -> np.ndarray:
    """Algorithm 1 line 3: j uniform in [0, |𝒜|) from one uniform per user."""
    return np.minimum(np.floor(np.asarray(u) * n_attrs).astype(np.int64), n_attrs - 1)


def report_length(oracle: str) -> int:
    """Numbers per report: GRR sends the value; Harmony (row, bit); OLH (seed, hashed value)."""
    return 1 if oracle == "safa" else 2


def perturb(oracle: str, values: np.ndarray, k: np.ndarray | int, epsilon: float,
            u: np.ndarray, seed_bits: np.ndarray | None = None) -> np.ndarray:
    """Reports (n, report_length) of ``values`` (over domains ``k``: one per user, or one for
    all) with ε per report.

    ``u`` holds two uniforms per user (n, 2); OLH also takes 64 random bits per user for the
    hash seed (its top 32 bits).
    """
    if oracle == "safa":
        return mech.GRR(epsilon, k).perturb(values, u[:, 0], u[:, 1])[:, None]
    if oracle == "harmony":
        s, bit = mech.Hadamard(epsilon).perturb(values, k, u[:, 0], u[:, 1])
        return np.stack([s, bit], axis=1)
    seeds = (np.asarray(seed_bits, dtype=np.uint64) >> np.uint64(32)).astype(np.int64)
    y = mech.OLH(epsilon).perturb(values, seeds, u[:, 0], u[:, 1])
    return np.stack([seeds, y], axis=1)


def valid_reports(oracle: str, reports: np.ndarray, k: np.ndarray | int,
                  epsilon: float) -> np.ndarray:
    """Which reports lie in the domain of their user's attribute (the schema's single
    [low, high] cannot say this when attributes' domains differ)."""
    r = np.asarray(reports, dtype=np.int64)
    if oracle == "safa":
        return (r[:, 0] >= 0) & (r[:, 0] < k)
    if oracle == "harmony":
        kp = hadamard.orders_of(k, r[:, 0].shape)
        return (r[:, 0] >= 0) & (r[:, 0] < kp) & ((r[:, 1] == 0) | (r[:, 1] == 1))
    return (r[:, 0] >= 0) & (r[:, 0] < 2**olh.SEED_BITS) & (r[:, 1] >= 0) & (
        r[:, 1] < olh.hash_range(epsilon))


def log_likelihood(oracle: str, reports: np.ndarray, values: np.ndarray, k: np.ndarray,
                   epsilon: float) -> np.ndarray:
    """log P(report | value) of one user's randomizer given its (data-independent) attribute."""
    r = np.asarray(reports, dtype=np.int64)
    if oracle == "safa":
        return mech.GRR(epsilon, k).log_likelihood(r[:, 0], values)
    if oracle == "harmony":
        return mech.Hadamard(epsilon).log_likelihood(r[:, 0], r[:, 1], values, k)
    return mech.OLH(epsilon).log_likelihood(r[:, 0], r[:, 1], values)


#: the name a privacy claim shows for each oracle
ORACLE_NAMES = {"safa": "grr", "harmony": "harmony_hadamard_rr", "olh": "olh"}


@dataclass(frozen=True)
class Oracle:
    """One of SAFA's frequency oracles bound at ε per report: ``"safa"`` (GRR, Algorithm 2),
    ``"harmony"`` (Hadamard) or ``"olh"``, over the domain of whichever attribute a user is
    asked (the functions of this module, with the ε stated once).

    One report is ε-LDP whatever the domain (Theorem 2: the attribute index is sampled
    independently of the data).
    """

    kind: str
    epsilon: float

    @property
    def privacy(self) -> MechanismPrivacy:
        """ε-LDP per report; no sensitivity (randomized response, hashing, sampling)."""
        return MechanismPrivacy(float(self.epsilon), None, ORACLE_NAMES[self.kind])

    def perturb(self, values: np.ndarray, k: np.ndarray | int, u: np.ndarray,
                seed_bits: np.ndarray | None = None) -> np.ndarray:
        """``perturb`` at this oracle's ε."""
        return perturb(self.kind, values, k, self.epsilon, u, seed_bits)

    def log_likelihood(self, reports: np.ndarray, values: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
        """``log_likelihood`` at this oracle's ε."""
        return log_likelihood(self.kind, reports, values, k, self.epsilon)

    def valid_reports(self, reports: np.ndarray, k: np.ndarray | int) -> np.ndarray:
        """``valid_reports`` at this oracle's ε."""
        return valid_reports(self.kind, reports, k, self.epsilon)

    def estimate(self, attrs: np.ndarray, reports: np.ndarray, domains: np.ndarray,
                 estimator: str = "paper", n: int | None = None) -> list[np.ndarray]:
        """``estimate`` at this oracle's ε."""
        return estimate(self.kind, attrs, reports, domains, self.epsilon, estimator, n)

    def mechanism(self, k: int) -> Any:
        """The underlying mechanism over one domain of ``k`` values at this oracle's ε
        (``GRR``, ``Hadamard`` or ``OLH``)."""
        if self.kind == "safa":
            return mech.GRR(self.epsilon, k)
        return mech.Hadamard(self.epsilon) if self.kind == "harmony" else mech.OLH(self.epsilon)


def estimate(oracle: str, attrs: np.ndarray, reports: np.ndarray, domains: np.ndarray,
             epsilon: float, estimator: str = "paper", n: int | None = None) -> list[np.ndarray]:
    """Algorithm 1 lines 7-11: the frequency vector z_j of every attribute.

    Parameters
    ----------
    oracle : "safa" (GRR), "harmony" or "olh".
    attrs : (n,) sampled attribute index of each report.
    reports : (n, report_length) valid reports.
    domains : |dom(A_j)| per attribute.
    estimator : "paper" (normalise by n/|𝒜|) or "group" (by n_j); see the module docstring.
    n : number of users (default: the number of reports).
    """
    attrs = np.asarray(attrs, dtype=np.int64)
    n = len(attrs) if n is None else n
    if oracle != "harmony":  # from the reports' counts (``tally``)
        group, counts = tally(oracle, attrs, reports, domains, epsilon)
        return estimate_from(oracle, group, counts, domains, epsilon, estimator, n)
    reports = _rows(attrs, reports)
    domains = np.asarray(domains, dtype=np.int64)
    n_attrs = len(domains)
    group = np.bincount(attrs, minlength=n_attrs)
    by_attr, starts = _by_attribute(attrs, reports, group)
    out = []
    for j in range(n_attrs):
        n_eff = n / n_attrs if estimator == "paper" else int(group[j])
        r = by_attr[starts[j]:starts[j + 1]]
        out.append(mech.Hadamard(epsilon).estimate(r[:, 0], r[:, 1], int(domains[j]), n_eff))
    return out


def _rows(attrs: np.ndarray, reports: np.ndarray) -> np.ndarray:
    """The reports as int64 rows, one per attribute index (none: of the width they have)."""
    reports = np.asarray(reports, dtype=np.int64)
    return reports.reshape(len(attrs), -1) if len(attrs) else \
        reports.reshape(0, reports.shape[-1] if reports.ndim == 2 else 0)


def _by_attribute(attrs: np.ndarray, reports: np.ndarray, group: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Each attribute's reports in their order of arrival, from one stable sort (a radix sort
    on 16-bit keys), and where each attribute's start."""
    keys = attrs.astype(np.int16) if len(group) <= np.iinfo(np.int16).max else attrs
    return reports[np.argsort(keys, kind="stable")], np.concatenate([[0], np.cumsum(group)])


def tally(oracle: str, attrs: np.ndarray, reports: np.ndarray, domains: np.ndarray,
          epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The integer counts ``estimate`` reads for GRR ("safa") and OLH (Algorithm 1 lines
    7-10): the reports per attribute, and per value of every attribute (the attributes'
    domains one after another) GRR's count of reports of it or OLH's support (``OLH.
    support_counts``). Counts of disjoint sets of reports add up to those of their union."""
    attrs = np.asarray(attrs, dtype=np.int64)
    reports = _rows(attrs, reports)
    domains = np.asarray(domains, dtype=np.int64)
    group = np.bincount(attrs, minlength=len(domains))
    offsets = np.concatenate([[0], np.cumsum(domains)])
    if oracle == "safa":
        return group, np.bincount(offsets[attrs] + reports[:, 0], minlength=int(offsets[-1]))
    counts = np.zeros(int(offsets[-1]), dtype=np.int64)
    by_attr, starts = _by_attribute(attrs, reports, group)
    for j in np.flatnonzero(group).tolist():
        r = by_attr[starts[j]:starts[j + 1]]
        counts[offsets[j]:offsets[j + 1]] = mech.OLH(epsilon).support_counts(
            r[:, 0], r[:, 1], int(domains[j]))
    return group, counts


def harmony_offsets(domains: np.ndarray) -> np.ndarray:
    """Where each attribute's Hadamard rows start in ``harmony_sums``'s array: the orders k' of
    the domains one after another (and their total last)."""
    kp = [hadamard.order(int(k)) for k in np.asarray(domains)]
    return np.concatenate([[0], np.cumsum(kp, dtype=np.int64)]).astype(np.int64)


def harmony_sums(attrs: np.ndarray, reports: np.ndarray, domains: np.ndarray, epsilon: float,
                 sums: np.ndarray) -> np.ndarray:
    """What ``estimate`` sums for Harmony, added on to ``sums`` in place: each valid report's
    c_ε (2 bit - 1) on its attribute's row s (``harmony_offsets``), in the reports' order, as
    ``estimate``'s per-attribute ``bincount`` adds them. Float sums: reports given in parts in
    their order have the bits of one call with them all, in any other order they need not.
    Returns the reports per attribute."""
    attrs = np.asarray(attrs, dtype=np.int64)
    reports = _rows(attrs, reports)
    off = harmony_offsets(domains)
    mech.Hadamard(epsilon).accumulate(off[attrs] + reports[:, 0], reports[:, 1], int(off[-1]),
                                      sums)
    return np.bincount(attrs, minlength=len(domains))


def estimate_from(oracle: str, group: np.ndarray, counts: np.ndarray, domains: np.ndarray,
                  epsilon: float, estimator: str = "paper", n: int | None = None
                  ) -> list[np.ndarray]:
    """``estimate`` from the counts ``tally`` gives (GRR or OLH), or Harmony's sums
    (``harmony_sums``); ``n``: the number of users, default the number of reports."""
    domains = np.asarray(domains, dtype=np.int64)
    n_attrs = len(domains)
    n = int(group.sum()) if n is None else n
    offsets = harmony_offsets(domains) if oracle == "harmony" else \
        np.concatenate([[0], np.cumsum(domains)])
    out = []
    for j in range(n_attrs):
        k = int(domains[j])
        n_eff = n / n_attrs if estimator == "paper" else int(group[j])
        c = counts[offsets[j]:offsets[j + 1]]
        if oracle == "harmony":
            out.append(mech.Hadamard(epsilon).estimate_from(c, k, n_eff))
            continue
        m = mech.GRR(epsilon, k) if oracle == "safa" else mech.OLH(epsilon)
        out.append(m.estimate(c, n_eff))
    return out


def variance_theorem4(epsilon: float, k: int, n_attrs: int, n: int) -> float:
    """Theorem 4: Var[z_j[k]] ≈ ((e^ε' + |dom(A_j)| - 1)·|𝒜| - 1) / (n (e^ε' - 1)²).

    This is Eq. (7) without its term f·(p - q)(|𝒜| - p - q) / (n (p - q)²) >= 0: exact for a
    value nobody holds, a lower bound otherwise (half the variance of a cell with f = 0.5 at
    ε' = ln 3, |𝒜| = 4).
    """
    e = math.exp(epsilon)
    return ((e + k - 1) * n_attrs - 1) / (n * (e - 1) ** 2)


def variance_eq7(f: np.ndarray | float, epsilon: float, k: int, n_attrs: int,
                 n: int) -> np.ndarray:
    """Eq. (7), first line (exact for the "paper" estimator, before Theorem 4's approximation):
    [f p (|𝒜| - p) + (1 - f) q (|𝒜| - q)] / (n (p - q)²)."""
    p, q = mech.GRR(epsilon, k).p, mech.GRR(epsilon, k).q
    f = np.asarray(f, dtype=float)
    return (f * p * (n_attrs - p) + (1 - f) * q * (n_attrs - q)) / (n * (p - q) ** 2)


def harmony_variance_eq8(epsilon: float, n_attrs: int, n: int) -> float:
    """Eq. (8): the paper's variance of Harmony's estimate, (2|𝒜| - 1)(e^ε'+1)² / (n (e^ε'-1)²).

    (It is the paper's figure, derived from binary local hashing; our Hadamard oracle's own
    variance is |𝒜| c_ε² / n to first order, see :meth:`protocols.mechanisms.Hadamard.variance`.)
    """
    e = math.exp(epsilon)
    return (2 * n_attrs - 1) * (e + 1) ** 2 / (n * (e - 1) ** 2)


def safa_beats_harmony_bound(epsilon: float, n_attrs: int) -> float:
    """Theorem 5 / Eq. (9): SAFA has the smaller variance iff |dom(A_j)| is below this."""
    e = math.exp(epsilon)
    return ((2 * n_attrs - 1) * (e + 1) ** 2 + 1) / n_attrs - e + 1


def safa_beats_hadamard_bound(epsilon: float, n_attrs: int) -> float:
    """The same crossover against the Hadamard oracle we run as Harmony, whose variance with
    attribute sampling is about |𝒜| c_ε² / n (not Eq. (8)'s (2|𝒜| - 1) c_ε² / n): SAFA is
    better iff |dom(A_j)| < (e^ε + 1)² - e^ε + 1 + 1/|𝒜| ≈ e^{2ε} + e^ε + 2 (about 14 at
    ε' = ln 3, but only 6.7 at ε' = ln(3)/2, SAFARI's per-round budget at ε = ln 3)."""
    e = math.exp(epsilon)
    return (e + 1) ** 2 - e + 1 + 1 / n_attrs
