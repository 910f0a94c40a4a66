"""Weighted-voting data (Yan, Liu & Liu, 2018, §5.1.1): each partner's weight and k opinions.

A partner's private row is ``[w, φ_1, .., φ_k]`` (int64): the weight ``w`` in ``{1, 2, 3}``
(groups wI, wII, wIII of Table 1) and one opinion ``φ_l`` in ``{0 ('No'), 1 ('Yes')}`` per
proposal candidate ``l``. The paper draws weights and opinions i.i.d. uniformly; its remark that
"the size of each weight group or opinion group are same" is read as equal *expected* sizes
(``design = "iid"``, the default); ``design = "balanced"`` makes the sizes exactly equal (up to
rounding) instead. Other weight distributions and 'Yes' rates are arguments, including a 'Yes'
rate per weight group (``yes_by_weight``): opinions that depend on the weight are where the
weighted and the unweighted majority disagree, and where DPWeVote's estimators differ most.

Ground truth for the orchestrator: the group counts ``x_w`` (Eq. 4a), the 'Yes' counts per
true weight group ``x_{w,φY}`` (Eq. 8a), the total weight ``Σw``, the weighted sums ``Σ w·φ`` and
the true results (PASS iff ``Σ w·φ >= q = Σw / 2``, Definition 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset
from ldpsim.protocols.keys import DataKeys

WEIGHTS = (1, 2, 3)
DATA_TYPE = "weighted_votes"


def parse_weight_probs(text: str) -> tuple[float, float, float]:
    """``"uniform"`` or three non-negative relative frequencies ``"a,b,c"`` of weights 1, 2, 3."""
    allowed = '"uniform" or three non-negative numbers "a,b,c" (weights 1,2,3) with a+b+c > 0'
    if text.strip().lower() == "uniform":
        return (1 / 3, 1 / 3, 1 / 3)
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        raise ParamError(f"[data] weight_probs: got {text!r}; allowed: {allowed}") from None
    if len(vals) != 3 or not all(np.isfinite(vals)) or min(vals) < 0 or sum(vals) <= 0:
        raise ParamError(f"[data] weight_probs: got {text!r}; allowed: {allowed}")
    s = sum(vals)
    return (vals[0] / s, vals[1] / s, vals[2] / s)


def parse_yes_by_weight(text: str) -> tuple[float, float, float]:
    """Three probabilities ``"a,b,c"`` of a 'Yes' for partners of weight 1, 2, 3."""
    allowed = 'three probabilities "a,b,c" in [0, 1] (weights 1,2,3)'
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        raise ParamError(f"[data] yes_by_weight: got {text!r}; allowed: {allowed}") from None
    if len(vals) != 3 or not all(0.0 <= v <= 1.0 for v in vals):
        raise ParamError(f"[data] yes_by_weight: got {text!r}; allowed: {allowed}")
    return (vals[0], vals[1], vals[2])


def _balanced_counts(n: int, probs: np.ndarray) -> np.ndarray:
    """Group sizes closest to ``n·probs`` that sum to n (largest remainders)."""
    exact = n * np.asarray(probs, dtype=np.float64)
    c = np.floor(exact).astype(np.int64)
    rest = n - int(c.sum())
    order = np.argsort(-(exact - c), kind="stable")
    c[order[:rest]] += 1
    return c


@dataclass
class WeightedVotes(Dataset):
    """n partners with a weight group and ``candidates`` opinions each, generated per partner."""

    candidates: int = 1
    weight_probs: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    yes: float = 0.5
    yes_by_weight: tuple[float, float, float] | None = None
    design: str = "iid"
    keys: DataKeys | None = None
    _table: np.ndarray | None = field(default=None, repr=False)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[w, φ_1..φ_k]`` of partners ``start..stop-1``, shape ``(stop-start, 1+k)``.

        ``iid``: partner a's row uses only its own data key (split-independent).
        ``balanced``: one permutation of the exact group sizes, drawn from the population's
        key, then sliced (the same for every pool; O(n) per pool). Every pool that generates
        rows then knows every partner's weight group and opinions: the design is a
        population-level draw, not an agent's own.
        """
        if self.design == "balanced":
            return self._balanced()[start:stop]
        agents = np.arange(start, stop, dtype=np.int64)
        u = rngm.uniform(self.keys.range(start, stop), agents, 0, 1 + self.candidates)
        cdf = np.cumsum(self.weight_probs)
        cdf[-1] = 1.0
        w = 1 + np.minimum(np.searchsorted(cdf, u[:, 0], side="right"), 2)
        phi = (u[:, 1:] < self._yes_rate(w)[:, None]).astype(np.int64)
        return np.column_stack([w, phi]).astype(np.int64)

    def _yes_rate(self, w: np.ndarray) -> np.ndarray:
        if self.yes_by_weight is None:
            return np.full(len(w), self.yes)
        return np.asarray(self.yes_by_weight)[w - 1]

    def _balanced(self) -> np.ndarray:
        if self._table is None:
            g = rngm.party_generator(rngm.stream_key(self.keys.population,
                                                     "weighted-votes-balanced"))
            sizes = _balanced_counts(self.n, np.asarray(self.weight_probs))
            table = np.empty((self.n, 1 + self.candidates), dtype=np.int64)
            table[:, 0] = g.permutation(np.repeat(np.asarray(WEIGHTS), sizes))
            # exactly round(yes * n) 'Yes' among all partners (the outcome stays random: a
            # balance inside every weight group would make every game an exact tie), or
            # round(yes_g * n_g) inside weight group g when yes_by_weight is given
            groups = ([np.arange(self.n)] if self.yes_by_weight is None else
                      [np.flatnonzero(table[:, 0] == grp) for grp in WEIGHTS])
            rates = [self.yes] if self.yes_by_weight is None else list(self.yes_by_weight)
            for c in range(self.candidates):
                for idx, rate in zip(groups, rates, strict=True):
                    base = np.zeros(len(idx), dtype=np.int64)
                    base[:int(round(rate * len(idx)))] = 1
                    table[idx, 1 + c] = g.permutation(base)
            self._table = table
        return self._table

    def truth(self) -> dict[str, Any]:
        """Counts and results of Eq. (4a) and (8a), and Definition 2.2 with q = Σw/2."""
        k = self.candidates
        x_w = np.zeros(3, dtype=np.int64)
        x_wy = np.zeros((k, 3), dtype=np.int64)
        step = 1 << 16
        for s in range(0, self.n, step):
            r = self.rows(s, min(self.n, s + step))
            x_w += np.bincount(r[:, 0] - 1, minlength=3)
            for c in range(k):
                x_wy[c] += np.bincount(r[:, 0] - 1, weights=r[:, 1 + c], minlength=3).astype(
                    np.int64)
        w = np.asarray(WEIGHTS)
        sum_w = int(x_w @ w)
        sum_wphi = (x_wy @ w).astype(np.int64)
        return {"n": self.n, "x_w": x_w.tolist(), "x_wy": x_wy.tolist(), "sum_w": sum_w,
                "q": sum_w / 2, "sum_wphi": sum_wphi.tolist(),
                "passed": [bool(2 * s >= sum_w) for s in sum_wphi.tolist()]}


def _weighted_votes(keys: DataKeys, n: int, candidates: int = 1, weight_probs: str = "uniform",
                    yes: float = 0.5, yes_by_weight: str | None = None,
                    design: str = "iid") -> WeightedVotes:
    probs = parse_weight_probs(weight_probs)
    ybw = None if yes_by_weight is None else parse_yes_by_weight(yes_by_weight)
    # the generating distribution (not the data): the prior a Bayes attacker may use
    public = {"n": n, "candidates": candidates, "data_type": DATA_TYPE, "weights": list(WEIGHTS),
              "prior_weights": list(probs), "prior_yes": yes}
    if ybw is not None:
        public["prior_yes"] = float(ordered.dot(probs, ybw))
        public["prior_yes_by_weight"] = list(ybw)
    return WeightedVotes(kind="weighted_votes", n=n, public=public, candidates=candidates,
                         weight_probs=probs, yes=yes, yes_by_weight=ybw, design=design, keys=keys)


KINDS = {
    "weighted_votes": DataKind(
        "weighted_votes", _weighted_votes,
        {"n": ParamSpec("n", "int", required=True, low=1, high=MAX_AGENTS,
                        help="number of partners"),
         "candidates": ParamSpec("candidates", "int", default=1, low=1, high=64,
                                 help="k proposal candidates voted on in one game"),
         "weight_probs": ParamSpec("weight_probs", "str", default="uniform",
                                   help='"uniform" or relative frequencies "a,b,c" of weights '
                                        "1,2,3"),
         "yes": ParamSpec("yes", "float", default=0.5, low=0, high=1,
                          help="probability of a 'Yes' opinion (each candidate, independently)"),
         "yes_by_weight": ParamSpec("yes_by_weight", "str",
                                    help='"a,b,c": P(Yes) for weights 1,2,3 (replaces yes)'),
         "design": ParamSpec("design", "str", default="iid", choices=("iid", "balanced"),
                             help="i.i.d. draws (paper) or exactly equal group sizes")},
        DATA_TYPE,
        "weights in {1,2,3} and k Yes/No opinions per partner (Yan, Liu & Liu, 2018, §5.1.1)",
        examples=({"n": 300, "candidates": 2}, {"n": 300, "candidates": 2, "design": "balanced"})),
}
