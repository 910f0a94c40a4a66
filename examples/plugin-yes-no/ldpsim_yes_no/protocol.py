"""``yes_no_rr``: Warner's randomized response on one sensitive question.

Round 0 asks every respondent. A respondent reports its bit with probability
p = e^ε / (1 + e^ε) and the other bit otherwise (``protocols.mechanisms.GRR`` with k = 2): the
likelihood ratio of a report under the two answers is p / (1 - p) = e^ε, so the report is
ε-LDP. The curator's estimate of the "yes" fraction, (c/n - (1 - p)) / (2p - 1), is unbiased
with variance [f p(1-p) + (1-f) p(1-p)] / (n (2p - 1)²) (``GRR.estimate``/``GRR.variance``).

ε is stated once, in ``rounds`` (the binding hook): the run's mechanism is built there, every
other hook reads it (``block.mechanism``, ``self.bound.rounds[0].mechanism``), and the privacy
claim, the respondents' budget and the ε their odometers charge are derived from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols.base import (
    AuditSpec,
    Block,
    Bound,
    Curator,
    ParamSpec,
    Protocol,
    ReportSchema,
    Round,
    RoundPlan,
    Rounds,
)
from ldpsim.protocols.metrics import Metric

from ldpsim_yes_no.survey import DATA_TYPE


class _Curator(Curator):
    """Asks everyone once, counts the reported yeses, estimates the fraction."""

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 0:
            return None
        return RoundPlan(rnd, self.agents, None, None, ReportSchema("int", 1, 0, 1),
                         report_bits=1.0)

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        self.n = len(reports)
        self.counts = np.bincount(reports[:, 0], minlength=2)

    def finish(self) -> dict[str, Any]:
        rr = self.bound.rounds[0].mechanism
        return {"yes_fraction": float(rr.estimate(self.counts, self.n)[1]), "n_reports": self.n}


class YesNoRR(Protocol):
    name = "yes_no_rr"
    family = "yes/no survey (example plugin)"
    data_type = DATA_TYPE
    summary = "LDP: each respondent answers one yes/no question by randomized response"
    params = {"epsilon": ParamSpec("epsilon", "float", 1.0, low=0, low_open=True, high=50,
                                   help="budget of the one report")}
    curator_cls = _Curator
    #: what ``evaluate`` returns, with what it means (labels, tables and plots read it)
    metrics = (Metric("abs_error", "absolute error of the yes fraction", low=0.0, high=1.0,
                      better="lower", about="|estimated − true| share of yes answers"),)

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round, one report through binary randomized response at ε."""
        return Rounds("local", (Round(mech.GRR(params["epsilon"], 2)),))

    def respond(self, block: Block) -> np.ndarray:
        return block.mechanism.perturb(block.rows, block.uniforms(1))

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray:
        return block.mechanism.log_likelihood(np.asarray(reports), block.rows).sum(axis=1)

    def audit_spec(self, bound: Bound) -> AuditSpec:
        return AuditSpec(np.array([[0], [1]]), np.array([0.5, 0.5]), (0, 1),
                         notes="the two answers")

    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        return {"abs_error": abs(output["yes_fraction"] - truth["yes_fraction"])}

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> np.ndarray:
        """The released count of yeses (the fraction times the reports): the differencing
        attack subtracts the coalition's own yeses from it."""
        return np.array([output["yes_fraction"] * output["n_reports"]])

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray:
        """The yeses among ``rows``: what ``released_aggregate`` estimates."""
        return np.asarray(rows, dtype=float).sum(axis=0)
