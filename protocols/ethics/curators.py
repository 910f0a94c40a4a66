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

    single_round = True

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        params, public = bound.params, bound.public
        self.d = int(public["d"])
        self.length = protocol.report_length(params, public)
        self.low, self.high = -math.inf, math.inf
        self.weighted = params.get("aggregate") == "weighted"
        self.total = np.zeros(self.d)
        #: the reports' sum so far, in their order (a curator that absorbs in agent order)
        self.running: np.ndarray | None = None
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
            self.add(beta * w[:, None])
            self.weight += float(w.sum())
            self.count += int(ok.sum())
        else:
            self.add(beta)
            self.weight += float(len(beta))
            self.count += len(beta)

    def add(self, rows: np.ndarray) -> None:
        """Add the reports' (weighted) betas to ``total``, as the one ``sum(axis=0)`` of a
        round's rows would. Absorbed in agent order (``absorbs_in_order``), the sum is carried
        on from part to part: numpy adds the rows of an (n, d ≥ 2) array one after another,
        so the running sum followed by the next part's rows has the round's bits."""
        if not self.absorbs_in_order:
            self.total += rows.sum(axis=0)
            return
        if len(rows):
            self.running = rows.sum(axis=0) if self.running is None else \
                np.concatenate([self.running[None, :], rows]).sum(axis=0)
            self.total = np.zeros(self.d) + self.running

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
        self.add(beta * w[:, None])
        self.weight += float(w.sum())
        self.count += len(rep)


class _InOrder:
    """A curator of the mean aggregate over d ≥ 2 that absorbs in agent order (``in_order``)."""

    absorbs_in_parts = True
    absorbs_in_order = True


class AverageInOrder(_InOrder, AverageCurator):
    """``AverageCurator``, its reports in parts in agent order."""


class TrustedInOrder(_InOrder, TrustedCurator):
    """``TrustedCurator``, its reports in parts in agent order."""


class FMCoefficientInOrder(_InOrder, FMCoefficientCurator):
    """``FMCoefficientCurator``, its reports in parts in agent order."""


_IN_ORDER = {AverageCurator: AverageInOrder, TrustedCurator: TrustedInOrder,
             FMCoefficientCurator: FMCoefficientInOrder}


def in_order(cls: type[AverageCurator], params: dict[str, Any], public: dict[str, Any]
             ) -> type[AverageCurator]:
    """``cls``, or the same curator absorbing its reports in parts in agent order where its
    sums allow it: d ≥ 2 (numpy adds an (n, d) array's rows one after another, but an (n, 1)
    array's pairwise, a tree that depends on n, known only at the round's end) and the mean
    aggregate (the weighted one also sums its weights pairwise, ``w.sum()``)."""
    if int(public["d"]) < 2 or params.get("aggregate") == "weighted":
        return cls
    return _IN_ORDER.get(cls, cls)
