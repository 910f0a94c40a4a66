"""Voters' pairwise moral choices: the generator of Wang et al., 2019, §5.1, and the ground truth.

Generator (§5.1, following Noothigattu et al. 2018; the numbers the extraction lost are
configurable, defaults marked UNKNOWN are the reference note's proposals):

* a population mean m with m_k ~ U[mean_low, mean_high] (UNKNOWN: [0, 1]), drawn once;
* voter i's true parameter beta_i ~ N(m, beta_sd^2 I_d) (d UNKNOWN: 10);
* each of the voter's ``records`` comparisons: two alternatives x, y ~ N(0, alt_sd^2 I_d) and
  utilities U_x ~ N(beta_i^T x, 1/2), U_y ~ N(beta_i^T y, 1/2); the voter picks the larger
  utility, so P(x chosen) = Phi(beta_i^T (x - y)). Only the difference winner minus loser
  enters the model, so it is drawn directly: z ~ N(0, 2 alt_sd^2 I_d) and the voter keeps z
  with probability Phi(beta_i^T z) (the same distribution, half the random draws).

Each voter's row is ``[eps_i, z_1 (d numbers), ..., z_n (d numbers)]``: the records and the
voter's *personal* privacy parameter, which is part of what the voter holds (VLDP/RLDP voters
choose eps_i; §4.3 and the personalised experiment of §5.1). ``eps_mode`` says how eps_i is drawn:

* ``"none"`` (default): eps_i is NaN and the protocol's ``[params] epsilon`` applies to everyone;
* ``"constant"``: eps_i = ``eps_value``;
* ``"uniform"``: eps_i ~ U[eps_low, eps_high];
* ``"list"``: eps_i uniform over the comma-separated ``eps_list`` (a string, because a TOML list
  would be a sweep axis);
* ``"groups"``: Jorgensen, Yu & Cormode (ICDE 2015), as §5.1 describes: voters are conservative,
  moderate or liberal with probabilities f_conservative, f_moderate, 1 - both (INFERRED defaults
  0.54, 0.37, 0.09); conservative eps_i ~ U[eps_conservative, eps_moderate], moderate
  eps_i ~ U[eps_moderate, eps_liberal], rounded to the nearest hundredth (at least 0.01);
  liberal eps_i = eps_liberal (INFERRED defaults 0.01, 0.2, 1.0, recalled from Jorgensen et al.,
  not verified).

Every draw of voter a is ``rng.uniform(keys.of([a]), a, 0, k)`` (voter a's own data key), so
any block of voters is the same whichever pool generates it; the generating mean and the test
set are the population's draws (``keys.population``).

The Eq. (3) model (``norm``, ``bound`` C) is part of the data kind because Wang et al. (2019)
*define* each voter's preference by Eq. (3) (§3, before any privacy mechanism): the ground truth
society preference beta_bar is the average of the Eq. (3) estimates, and every protocol of a
scenario protects and estimates the same quantity. C and the norm are public.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset
from ldpsim.protocols.ethics import memo, truthtap
from ldpsim.protocols.ethics.estimates import memo_mle
from ldpsim.protocols.ethics.model import NORMS
from ldpsim.protocols.keys import DataKeys

EPS_MODES = ("none", "constant", "uniform", "list", "groups")
BLOCK = 16384  # voters generated (and solved, for the truth) at a time


@functools.lru_cache(maxsize=64)
def suggested_clip(d: int, alt_sd: float, coverage: float = 0.99) -> float:
    """A public radius R with P(||z||_2 <= R) = coverage for z ~ N(0, 2 alt_sd^2 I_d).

    Used as the default preprocessing scale of the functional mechanism (records are divided by
    R and clipped into the unit ball). It depends on public generator parameters only. The
    chi-square quantile is ``2 gammaincinv(d / 2, coverage)``, what ``scipy.stats.chi2.ppf``
    computes, without importing ``scipy.stats`` (seconds on a busy machine).
    """
    from scipy import special  # on first use: the registry imports every family

    return float(alt_sd * math.sqrt(2.0 * (2 * special.gammaincinv(d / 2, coverage))))


def parse_eps_list(text: str) -> list[float]:
    """``"0.1, 0.5, 1"`` -> [0.1, 0.5, 1.0]; ParamError unless all are finite and > 0."""
    try:
        vals = [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or not all(math.isfinite(v) and v > 0 for v in vals):
        raise ParamError(f"[data] eps_list: got {text!r}; allowed: comma-separated numbers > 0, "
                         "e.g. \"0.1,0.5,1\"")
    return vals


@dataclass
class EpsSpec:
    """How voters draw their personal eps_i (see the module docstring)."""

    mode: str = "none"
    value: float = 1.0
    low: float = 0.1
    high: float = 1.0
    values: tuple[float, ...] = ()
    f_conservative: float = 0.54
    f_moderate: float = 0.37
    eps_conservative: float = 0.01
    eps_moderate: float = 0.2
    eps_liberal: float = 1.0

    def draw(self, u: np.ndarray) -> np.ndarray:
        """eps_i from two uniforms per voter (shape (B, 2)); NaN for mode "none"."""
        if self.mode == "none":
            return np.full(len(u), np.nan)
        if self.mode == "constant":
            return np.full(len(u), self.value)
        if self.mode == "uniform":
            return self.low + (self.high - self.low) * u[:, 0]
        if self.mode == "list":
            vals = np.asarray(self.values)
            return vals[np.minimum((u[:, 0] * len(vals)).astype(np.int64), len(vals) - 1)]
        cons = u[:, 0] < self.f_conservative
        mod = ~cons & (u[:, 0] < self.f_conservative + self.f_moderate)
        eps = np.full(len(u), self.eps_liberal)
        lo = np.where(cons, self.eps_conservative, self.eps_moderate)
        hi = np.where(cons, self.eps_moderate, self.eps_liberal)
        drawn = np.maximum(np.round(lo + (hi - lo) * u[:, 1], 2), 0.01)
        return np.where(cons | mod, drawn, eps)

    def bounds(self) -> tuple[float, float] | None:
        """(smallest, largest) eps_i a voter can hold; None for mode "none"."""
        if self.mode == "none":
            return None
        if self.mode == "constant":
            return self.value, self.value
        if self.mode == "uniform":
            return self.low, self.high
        if self.mode == "list":
            return min(self.values), max(self.values)
        lo = max(0.01, round(self.eps_conservative, 2)) if self.f_conservative > 0 else (
            max(0.01, round(self.eps_moderate, 2)) if self.f_moderate > 0 else self.eps_liberal)
        return lo, self.eps_liberal

    def describe(self) -> str:
        if self.mode == "none":
            return "none ([params] epsilon for every voter)"
        if self.mode == "constant":
            return f"constant {self.value:g}"
        if self.mode == "uniform":
            return f"uniform [{self.low:g}, {self.high:g}]"
        if self.mode == "list":
            return "uniform over {" + ", ".join(f"{v:g}" for v in self.values) + "}"
        return (f"groups: conservative {self.f_conservative:g} U[{self.eps_conservative:g}, "
                f"{self.eps_moderate:g}], moderate {self.f_moderate:g} U[{self.eps_moderate:g}, "
                f"{self.eps_liberal:g}], liberal "
                f"{1 - self.f_conservative - self.f_moderate:g} {self.eps_liberal:g}")


@dataclass
class PairwiseChoices(Dataset):
    """Synthetic voters (Wang et al., 2019, §5.1); rows ``[eps_i, z_1, ..., z_n]``, see the module
    doc."""

    keys: DataKeys | None = None
    d: int = 10
    records: int = 50
    mean: np.ndarray | None = None
    beta_sd: float = 1.0
    alt_sd: float = 1.0
    norm: str = "l2"
    bound: float = 5.0
    eps: EpsSpec | None = None
    test_instances: int = 10000
    test_alternatives: int = 2

    @property
    def draws(self) -> int:
        return self.d + 2 + self.records * (self.d + 1)

    def _generate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, n = self.d, self.records
        from scipy import special  # on first use: the registry imports every family

        u = rngm.uniform(self.keys.of(ids), ids, 0, self.draws)
        beta = self.mean[None, :] + self.beta_sd * special.ndtri(u[:, :d])
        eps = self.eps.draw(u[:, d:d + 2])
        rec = u[:, d + 2:].reshape(len(ids), n, d + 1)
        z = (math.sqrt(2.0) * self.alt_sd) * special.ndtri(rec[:, :, :d])
        p = special.ndtr(ordered.matmul(z, beta[:, :, None])[:, :, 0])
        z = np.where((rec[:, :, d] < p)[:, :, None], z, -z)  # winner minus loser
        row = np.empty((len(ids), 1 + n * d))
        row[:, 0] = eps
        row[:, 1:] = z.reshape(len(ids), n * d)
        return row, beta

    def rows(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((max(stop - start, 0), 1 + self.records * self.d))
        for s in range(start, stop, BLOCK):
            e = min(stop, s + BLOCK)
            out[s - start:e - start], beta = self._block(np.arange(s, e))
            truthtap.generated(self, s, beta)  # a pool's share of the truth (``truth_tap``)
        return out

    def _block(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_generate(ids)`` for consecutive agents ``ids``, read-only, from ``memo.ROWS``
        when a block generated before holds them (the same keys and settings)."""
        keys = np.ascontiguousarray(self.keys.of(ids), dtype=np.uint64)
        return memo.ROWS.block(self._settings(), int(ids[0]), keys, lambda: self._generate(ids))

    def _settings(self) -> bytes:
        """The generator's public settings: what a voter's row depends on besides her key."""
        return repr((self.d, self.records, self.beta_sd, self.alt_sd, self.eps,
                     self.mean.tobytes(), self.draws)).encode()

    def test_set(self) -> np.ndarray:
        """Held-out test instances (T, k, d): k alternatives ~ N(0, alt_sd^2 I) each."""
        g = rngm.party_generator(rngm.stream_key(self.keys.population, "ethics-test"))
        return self.alt_sd * g.standard_normal((self.test_instances, self.test_alternatives,
                                                self.d))

    def truth_from_run(self, protocol: Any) -> bool:
        """A run that solves every voter's Eq. (3) (``solves_eq3``) keeps the estimates in
        ``memo.MLE`` beside the voters' records, all of them when they fit its budget: then
        ``truth`` reads them there instead of solving again."""
        kept = 8 * (1 + self.records * self.d + self.d)  # a voter's fingerprint, records, result
        return bool(getattr(protocol, "solves_eq3", False)) and self.n * kept <= memo.VOTER_BYTES

    def truth(self) -> dict[str, Any]:
        """beta_bar (average Eq. 3 estimate), the generating mean, the test set, diagnostics."""
        sums = []
        for s in range(0, self.n, BLOCK):
            e = min(self.n, s + BLOCK)
            row, beta = self._block(np.arange(s, e))
            z = row[:, 1:].reshape(e - s, self.records, self.d)
            est = memo_mle(z, self.bound, self.norm)
            sums.append((*truthtap.block_sums(est, self.bound, self.norm),
                         truthtap.generated_sum(beta)))
        return self._truth_of(sums)

    def _truth_of(self, sums: list[tuple[np.ndarray, int, np.ndarray]]) -> dict[str, Any]:
        """The truth from every block's (sum of Eq. (3) estimates, voters on the boundary, sum
        of generating parameters), added in block order."""
        tot_mle = np.zeros(self.d)
        tot_gen = np.zeros(self.d)
        on = 0
        for m, c, g in sums:
            tot_mle += m
            tot_gen += g
            on += c
        n = max(self.n, 1)
        return {"beta_bar": tot_mle / n, "beta_generating": tot_gen / n,
                "population_mean": self.mean.copy(), "test": self.test_set(), "n": self.n,
                "d": self.d, "mle_on_boundary": on / n}

    def truth_fingerprint(self) -> bytes:
        """What the truth depends on: the generator's settings, its population key and tag,
        the ball, the number of voters and the block size (a digest: a pool's part carries it)."""
        text = repr((self._settings(), self.keys.population, self.keys.tag, float(self.bound),
                     self.norm, self.n, BLOCK)).encode()
        return hashlib.blake2b(text, digest_size=16, person=b"ethics-truth").digest()

    def truth_from_pools(self, protocol: Any) -> bool:
        """Whether the pools of a run of ``protocol`` can hand the truth's parts over
        (``truth_tap``): they solve every voter's Eq. (3) (``solves_eq3``, Algorithms 1-2)."""
        return bool(getattr(protocol, "solves_eq3", False))

    def truth_tap(self, start: int, stop: int, protocol: Any) -> truthtap.TruthTap | None:
        """A pool's tap of voters ``start .. stop - 1``'s share of the truth, open until it is
        closed (``truthtap``), for a run of ``protocol``; None if it solves no Eq. (3)."""
        if not self.truth_from_pools(protocol) or not 0 <= start < stop <= self.n:
            return None
        return truthtap.open_tap(self, self.truth_fingerprint(), start, stop, self.n, BLOCK,
                                 self.d, self.bound, self.norm)

    def truth_join(self, parts: list[Any]) -> dict[str, Any] | None:
        """``truth()`` from the pools' parts (``truthtap.TruthPart``, one per pool), the same
        bits; None unless they are this data set's and cover every voter once."""
        sums = truthtap.join(parts, self.truth_fingerprint(), self.n, BLOCK, self.bound,
                             self.norm)
        return None if sums is None else self._truth_of(sums)


def _synthetic(keys: DataKeys, n: int, d: int = 10, records: int = 50, mean_low: float = 0.0,
               mean_high: float = 1.0, beta_sd: float = 1.0, alt_sd: float = 1.0,
               norm: str = "l2", bound: float = 5.0, eps_mode: str = "none",
               eps_value: float = 1.0, eps_low: float = 0.1, eps_high: float = 1.0,
               eps_list: str = "", f_conservative: float = 0.54, f_moderate: float = 0.37,
               eps_conservative: float = 0.01, eps_moderate: float = 0.2,
               eps_liberal: float = 1.0, test_instances: int = 10000,
               test_alternatives: int = 2) -> PairwiseChoices:
    if mean_high < mean_low:
        raise ParamError(f"[data] mean_high: got {mean_high:g}; allowed: >= mean_low "
                         f"({mean_low:g})")
    eps = EpsSpec(mode=eps_mode, value=eps_value, low=eps_low, high=eps_high,
                  f_conservative=f_conservative, f_moderate=f_moderate,
                  eps_conservative=eps_conservative, eps_moderate=eps_moderate,
                  eps_liberal=eps_liberal)
    if eps_mode == "uniform" and not eps_low < eps_high:
        raise ParamError(f"[data] eps_high: got {eps_high:g}; allowed: > eps_low ({eps_low:g})")
    if eps_mode == "list":
        eps.values = tuple(parse_eps_list(eps_list))
    if eps_mode == "groups":
        if f_conservative + f_moderate > 1 + 1e-12:
            raise ParamError(f"[data] f_moderate: got {f_moderate:g}; allowed: at most "
                             f"1 - f_conservative = {1 - f_conservative:g}")
        if not eps_conservative <= eps_moderate <= eps_liberal:
            raise ParamError("[data] eps_moderate: got eps_conservative, eps_moderate, "
                             f"eps_liberal = {eps_conservative:g}, {eps_moderate:g}, "
                             f"{eps_liberal:g}; allowed: eps_conservative <= eps_moderate <= "
                             "eps_liberal")
    g = rngm.party_generator(rngm.stream_key(keys.population, "ethics-mean"))
    mean = g.uniform(mean_low, mean_high, d) if mean_high > mean_low else np.full(d, mean_low)
    bounds = eps.bounds()
    public = {"data_type": "pairwise", "n": n, "d": d, "records": records, "norm": norm,
              "bound": bound, "clip": suggested_clip(d, alt_sd),
              "personal_epsilon": eps_mode != "none", "eps_spec": eps.describe(),
              "eps_min": None if bounds is None else bounds[0],
              "eps_max": None if bounds is None else bounds[1]}
    return PairwiseChoices(kind="ethics_synthetic", n=n, public=public, keys=keys, d=d,
                           records=records, mean=mean, beta_sd=beta_sd, alt_sd=alt_sd,
                           norm=norm, bound=bound, eps=eps, test_instances=test_instances,
                           test_alternatives=test_alternatives)


POS = {"low": 0, "low_open": True}
KINDS = {
    "ethics_synthetic": DataKind(
        "ethics_synthetic", _synthetic,
        {"n": ParamSpec("n", "int", required=True, low=1, high=MAX_AGENTS,
                        help="number of voters N"),
         "d": ParamSpec("d", "int", 10, low=1, high=200, help="features per alternative"),
         "records": ParamSpec("records", "int", 50, low=1, high=100000,
                              help="pairwise records per voter n_i (UNKNOWN default)"),
         "mean_low": ParamSpec("mean_low", "float", 0.0, help="m_k ~ U[mean_low, mean_high]"),
         "mean_high": ParamSpec("mean_high", "float", 1.0, help="m_k ~ U[mean_low, mean_high]"),
         "beta_sd": ParamSpec("beta_sd", "float", 1.0, low=0, help="beta_i ~ N(m, sd^2 I)"),
         "alt_sd": ParamSpec("alt_sd", "float", 1.0, **POS, help="x, y ~ N(0, sd^2 I)"),
         "norm": ParamSpec("norm", "str", "l2", choices=NORMS, help="norm bounded in Eq. (3)"),
         "bound": ParamSpec("bound", "float", 5.0, **POS, help="C of Eq. (3) (UNKNOWN default)"),
         "eps_mode": ParamSpec("eps_mode", "str", "none", choices=EPS_MODES,
                               help="how voters draw a personal eps_i"),
         "eps_value": ParamSpec("eps_value", "float", 1.0, **POS, help='eps_i for "constant"'),
         "eps_low": ParamSpec("eps_low", "float", 0.1, **POS, help='"uniform" lower end'),
         "eps_high": ParamSpec("eps_high", "float", 1.0, **POS, help='"uniform" upper end'),
         "eps_list": ParamSpec("eps_list", "str", "", help='"list": e.g. "0.1,0.5,1"'),
         "f_conservative": ParamSpec("f_conservative", "float", 0.54, low=0, high=1),
         "f_moderate": ParamSpec("f_moderate", "float", 0.37, low=0, high=1),
         "eps_conservative": ParamSpec("eps_conservative", "float", 0.01, **POS),
         "eps_moderate": ParamSpec("eps_moderate", "float", 0.2, **POS),
         "eps_liberal": ParamSpec("eps_liberal", "float", 1.0, **POS),
         "test_instances": ParamSpec("test_instances", "int", 10000, low=1,
                                     help="held-out test instances for the accuracy"),
         "test_alternatives": ParamSpec("test_alternatives", "int", 2, low=2, high=100,
                                        help="alternatives per test instance")},
        "pairwise", "synthetic voters' pairwise moral choices, Thurstone-Mosteller (Wang et al., "
                    "2019, §5.1)",
        examples=({"n": 120, "d": 3, "records": 4, "eps_mode": "uniform",
                   "test_instances": 200},)),
}
