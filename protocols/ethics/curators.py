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


class Kept:
    """Float64 values, one a report, kept in agent order to be summed when the round is over
    (numpy's pairwise ``sum``, whose tree depends on how many there are). Room for ``most``
    is reserved at once; the memory is taken as they come."""

    def __init__(self, most: int) -> None:
        self.values = np.empty(most)
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        self.values[self.n:self.n + len(values)] = values
        self.n += len(values)

    def sum(self) -> float:
        """Their sum, as ``numpy.sum`` of an array of them (the same tree, to the bit)."""
        return float(self.values[:self.n].sum())


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
        #: values summed pairwise at the end, one a report (a curator that absorbs in agent
        #: order): "weight" (the weighted aggregate's), "column" (d = 1: the betas)
        self.kept: dict[str, Kept] = {}
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
            self.add(beta * w[:, None], w)
            self.count += int(ok.sum())
        else:
            self.add(beta)
            self.count += len(beta)

    def add(self, rows: np.ndarray, w: np.ndarray | None = None) -> None:
        """Add the reports' (weighted) betas to ``total`` and their weights ``w`` (None: one
        each) to ``weight``, as one ``sum(axis=0)`` and one ``w.sum()`` over a round's reports
        would.

        Absorbed in agent order (``absorbs_in_order``): numpy adds the rows of an (n, d ≥ 2)
        array one after another, so the running sum followed by the next part's rows has the
        round's bits; it sums one column (d = 1, and the weights) pairwise, a tree that
        depends on how many reports the round has, known at its end: those values are kept,
        8 bytes a report (``Kept``), and summed then (``settle``)."""
        if not self.absorbs_in_order:
            self.total += rows.sum(axis=0)
            self.weight += float(len(rows)) if w is None else float(w.sum())
            return
        if w is None:
            self.weight += float(len(rows))
        else:
            self._keep("weight", w)
        if self.d == 1:
            self._keep("column", rows[:, 0])
        elif len(rows):
            self.running = rows.sum(axis=0) if self.running is None else \
                np.concatenate([self.running[None, :], rows]).sum(axis=0)

    def _keep(self, name: str, values: np.ndarray) -> None:
        if name not in self.kept:
            self.kept[name] = Kept(len(self.agents))
        self.kept[name].extend(values)

    def settle(self) -> None:
        """``total`` and ``weight`` from what a curator in agent order carried and kept (the
        whole round's bits: ``add``); nothing to do for one that read the round whole."""
        if not self.absorbs_in_order:
            return
        self.total = np.zeros(self.d)
        if "column" in self.kept:
            self.total += self.kept["column"].sum()
        elif self.running is not None:
            self.total += self.running
        if "weight" in self.kept:
            self.weight = 0.0 + self.kept["weight"].sum()

    def average(self) -> np.ndarray:
        self.settle()
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
        self.add(beta * w[:, None], w if self.weighted else None)  # (ones sum to their count)
        self.count += len(rep)


class _InOrder:
    """An ethics curator that absorbs in agent order (``in_order``)."""

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


def in_order(cls: type[AverageCurator]) -> type[AverageCurator]:
    """The same curator absorbing its reports in parts in agent order (``add``)."""
    return _IN_ORDER.get(cls, cls)


def kept_bytes(params: dict[str, Any], public: dict[str, Any]) -> int:
    """Bytes a curator in agent order keeps a report (``Kept``): a weight with the weighted
    aggregate, a beta with d = 1 (numpy sums one column pairwise: ``AverageCurator.add``)."""
    return 8 * ((params.get("aggregate") == "weighted") + (int(public["d"]) == 1))
