"""The curators of the ethics protocols (Wang et al., 2019): one round, every voter asked once,
the reports averaged (``AverageCurator``); the trusted aggregator of the baseline and of
Algorithm 1, which adds the central Laplace noise (``TrustedCurator``); and Algorithm 3's, which
solves each voter's noisy objective before averaging (``FMCoefficientCurator``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Curator, ReportSchema, RoundPlan
from ldpsim.protocols.ethics import fm
from ldpsim.protocols.ethics.estimates import central_sensitivity, voter_mle
from ldpsim.protocols.ethics.model import project


class AverageCurator(Curator):
    """Asks every voter once, averages the reports (``finish`` of subclasses adds noise)."""

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        params, public = bound.params, bound.public
        self.d = int(public["d"])
        self.length = protocol.report_length(params, public)
        self.low, self.high = -math.inf, math.inf
        self.weighted = params.get("aggregate") == "weighted"
        self.total = np.zeros(self.d)
        self.weight = 0.0
        self.count = 0
        self.ignored = 0

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 0:
            return None
        return RoundPlan(rnd, self.agents, None, None,
                         ReportSchema("float", self.length, self.low, self.high),
                         report_bits=64.0 * self.length)

    def betas(self, reports: np.ndarray) -> np.ndarray:
        return reports[:, :self.d]

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        if len(reports) == 0:
            return
        beta = self.betas(reports)
        if self.weighted:
            eps = reports[:, -1]
            ok = np.isfinite(eps) & (eps > 0)
            self.ignored += int((~ok).sum())
            w = np.where(ok, eps, 0.0) ** 2
            self.total += (beta * w[:, None]).sum(axis=0)
            self.weight += float(w.sum())
            self.count += int(ok.sum())
        else:
            self.total += beta.sum(axis=0)
            self.weight += float(len(beta))
            self.count += len(beta)

    def average(self) -> np.ndarray:
        return self.total / self.weight if self.weight > 0 else np.zeros(self.d)

    def finish(self) -> dict[str, Any]:
        out = {"beta": self.average().tolist(), "n_reports": self.count}
        if self.ignored:
            out["ignored"] = self.ignored
        return out


class TrustedCurator(AverageCurator):
    """The trusted aggregator of the baseline and of Algorithm 1.

    Reports are projected onto the C-ball before averaging (a no-op for honest voters): the
    sensitivity D_1(C)/N then holds whatever a broken or hostile voter sends.
    """

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.upload = self.params.get("upload", "beta")
        if self.upload == "records":
            self.length = int(self.public["records"]) * self.d
        else:
            c = float(self.public["bound"])
            self.length, self.low, self.high = self.d, -c, c
        self.noisy = protocol.central_noise

    def betas(self, reports: np.ndarray) -> np.ndarray:
        if self.upload == "records":
            z = reports.reshape(len(reports), int(self.public["records"]), self.d)
            return voter_mle(z, self.public)
        return project(reports, self.public["norm"], float(self.public["bound"]))

    def finish(self) -> dict[str, Any]:
        out = super().finish()
        if not self.noisy:
            return out
        delta = central_sensitivity(self.public["norm"], float(self.public["bound"]), self.d,
                                    self.count)
        # the bound release (``VLCP.rounds``, Δ for N = all voters) at the sensitivity for the
        # N valid reports; the d coordinates share it (an L1 bound)
        lap = self.bound.rounds[0].mechanism.with_sensitivity(delta)
        scale = delta / lap.epsilon
        g = rngm.party_generator(rngm.stream_key(self.coins, "ethics-central-laplace"))
        out["beta"] = lap.perturb_from(g, self.average()).tolist()
        out["noise_scale"] = scale
        out["sensitivity"] = delta
        return out


class FMCoefficientCurator(AverageCurator):
    """Receives noisy coefficients and eps_i, solves each voter's noisy objective, averages."""

    def absorb(self, rnd, agents, reports):
        if len(reports) == 0:
            return
        d = self.d
        eps = reports[:, -1]
        ok = np.isfinite(eps) & (eps > 0)
        self.ignored += int((~ok).sum())
        rep = reports[ok]
        a_t, m_t = fm.from_vector(rep[:, :-1], d, self.params["noise"])
        beta = self.protocol.solve(a_t, m_t, rep[:, -1], self.params, self.public)
        w = rep[:, -1] ** 2 if self.weighted else np.ones(len(rep))
        self.total += (beta * w[:, None]).sum(axis=0)
        self.weight += float(w.sum())
        self.count += len(rep)
