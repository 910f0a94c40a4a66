"""DPWeVote (Yan, Liu & Liu, 2018, "DPWeVote: differentially private weighted voting protocol
for cloud-based decision-making", Enterprise Information Systems) and its Laplace baseline.

The budget split and the mechanisms it defines are in ``budget``, the paper's estimators and
exact error formulas (Eq. 3-13) in ``estimators``; this module holds the game's curator, its
metrics and the two protocols, and the paper's text as it is read here (below).

A game has n partners with a private weight group ``w`` in {1, 2, 3} and, for each of k proposal
candidates, a private opinion ``φ_l`` in {0, 1}. The semi-honest cloud server (the curator)
decides every candidate by the weighted majority rule of Definition 2.2 with the quota
``q = ½ Σ w`` (PASS iff ``Σ w·φ >= q``). The protocol runs as real rounds:

* round 0, *Randomized Weights Collection* (§4.2): every partner reports its weight group by
  3-ary randomized response (matrix M_w, Eq. 9a, budget ε1); the server estimates the group
  sizes ``x̂_w = M_w^{-1} y_w`` (Eq. 3) and the quota ``q̂ = ½ Σ_g g·x̂_g`` (Eq. 4b);
* round l = 1..k, *Randomized Opinions Collection* (§4.3) for candidate l: every partner that
  joined in round 0 reports its opinion by binary randomized response (M_φ, Eq. 9b, budget ε2);
  the server tabulates the reports by weight group and estimates ``x̂_{g,φY}`` (Eq. 5) and
  ``Σ ŵφ = Σ_g g·x̂_{g,φY}`` (Eq. 8b);
* *Voting Results Release* (§4.4): PASS iff ``Σ ŵφ >= q̂``. Candidate l's result is decided
  when its reports are absorbed, released to every partner in the broadcast of round l + 1
  (``"released"``), and the full list (with the winners) is the public output, which the
  runtime sends to every pool when the game ends. Releasing needs no report round.

Two estimators for round l (same reports, same privacy):

* ``estimator = "faithful"`` (the paper): the server can only group partners by their
  *reported* weight group, and applies M_φ^{-1} within each reported group (Eq. 5). Eq. (8b)
  then treats these as counts of the *true* groups, which they are not: in expectation
  ``x̂^faith_{g̃,φY} = Σ_g M_w[g̃, g] x_{g,φY}``, so ``Σ ŵφ`` estimates ``Σ E[w̃]·φ`` with
  ``E[w̃ | w] = (p_w - r_w) w + 6 r_w`` -- shrunk towards an unweighted count of 'Yes'.
  This is the slip noted in DESIGN.md; it is reproduced as printed.
* ``estimator = "joint"``: the pair (w̃, φ̃) is randomized response of the pair (w, φ) with
  transformation ``M_w ⊗ M_φ``, so ``X̂ = M_w^{-1} Y M_φ^{-T}`` (Y: 3x2 table of reported pairs)
  is unbiased for the true table. Equivalently ``x̂^joint_{·,φY} = M_w^{-1} x̂^faith_{·,φY}``.
  Its row sums equal Eq. (3)'s ``x̂_w``. It removes the bias, not the noise: its decision
  statistic ``Σ ŵφ - q̂ = Σ_i ŵ_i (φ̂_i - ½)`` multiplies the amplified weight noise
  (``ŵ_i = (w̃_i - 6 r_w)/(p_w - r_w)``) by the amplified opinion noise, where the faithful one
  only adds them. On the paper's data (opinions independent of weights, groups equal in
  expectation, so ``M_w x ≈ x`` and the faithful bias nearly vanishes) ``joint`` has *lower*
  accuracy and *higher* MSE_φ for ε <= 5; when opinions depend on the weight, the faithful
  bias dominates for large n·ε and ``joint`` wins (scenario ``paper002_estimators``).

Privacy (Theorem 4.3 and its extension to k candidates). One weight report is ε1-LDP and one
opinion report is ε2-LDP; by sequential composition (Theorem 2.6) a partner's whole game is
``(ε1 + k·ε2)``-LDP, and this holds against the server colluding with all other partners (their
reports are independent of the target's coins). ``budget = "game"`` (default) makes the
configured ``epsilon`` the budget of the whole game: ``ε1 = split·ε``, ``ε2 = (1 - split)·ε / k``.
``budget = "candidate"`` makes it the paper's per-candidate ε = ε1 + ε2 (``ε1 = split·ε``,
``ε2 = (1 - split)·ε``) and the game then costs ``ε1 + k·ε2``. With k = 1 (all the paper's
experiments) both are the paper's setting; the default split 0.5 is its ε1 = ε2 = ε/2 (§5.1.1).

Other readings of the text: §4.1 says each candidate runs "the above phases" (weights
included); weights are collected once here, as the weight group does not change between
candidates. §4.1 says "larger than", Definition 2.2 says ">=": ties PASS. Eq. (5)'s text calls
the observed counts ``x_{wI,φY}``; they are the ``y`` of Fig. 3.

Baseline (§5.1.3, ``dpwevote_laplace``): each partner uploads ``w + Lap(2/ε1)`` (sensitivity 2:
w moves from 1 to 3) and ``φ_l + Lap(1/ε2)`` (sensitivity 1); the server releases PASS iff
``Σ w̃·φ̃ >= ½ Σ w̃``. The product of independent zero-mean noises keeps ``Σ w̃·φ̃`` unbiased for
``Σ w·φ``; this estimator reproduces the paper's Table 3/4 baseline numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.base import (
    AuditSpec,
    Block,
    Bound,
    Curator,
    ParamError,
    ParamSpec,
    Protocol,
    ReportSchema,
    Round,
    RoundPlan,
    Rounds,
)
from ldpsim.protocols.metrics import Metric, fraction
from ldpsim.protocols.vote.budget import (
    Budget,
    budget,
    laplace_mechanisms,
    laplace_scales,
    rr_mechanisms,
    rr_probabilities,
)
from ldpsim.protocols.vote.data import DATA_TYPE, WEIGHTS
from ldpsim.protocols.vote.estimators import (
    G,
    decide,
    estimate_opinions_faithful,
    estimate_opinions_joint,
    estimate_table_joint,
    estimate_weights,
    expected_sq_err_q,
    opinion_table,
    quota,
    quota_variance_per_partner,
    weighted_sum,
)

#: the protocols, with the budget's and the estimators' names they build on (importable from here)
__all__ = ["DPWeVote", "DPWeVoteLaplace", "Budget", "G", "budget", "decide",
           "estimate_opinions_faithful", "estimate_opinions_joint", "estimate_table_joint",
           "estimate_weights", "expected_sq_err_q", "laplace_mechanisms", "laplace_scales",
           "opinion_table", "quota", "quota_variance_per_partner", "rr_mechanisms",
           "rr_probabilities", "weighted_sum"]

#: what ``evaluate`` returns: per game; their means over games are Eqs. (10)-(13)
CORRECT = fraction("correct", "accuracy (decisions right)", "higher",
                   "Eq. 10: the share of the k candidates whose released PASS/FAIL equals the "
                   "non-private weighted vote's")
TP = fraction("tp", "true passes", "higher", "Table 2: released PASS, truly PASS (share of k)")
FP = fraction("fp", "false passes", "lower", "Table 2: released PASS, truly FAIL (share of k)")
TN = fraction("tn", "true fails", "higher", "Table 2: released FAIL, truly FAIL (share of k)")
FN = fraction("fn", "false fails", "lower", "Table 2: released FAIL, truly PASS (share of k)")
SQ_ERR_W = Metric("sq_err_w", "squared error of x̂_w / n", low=0.0, better="lower",
                  about="Eq. 11's bracket: the squared error of the estimated weight "
                        "histogram over n (its mean over games is MSE_w)")
SQ_ERR_Q = Metric("sq_err_q", "squared error of q̂ / Σw", low=0.0, better="lower",
                  about="Eq. 12's bracket: ((q̂ − q) / Σw)², the error of the pass threshold "
                        "(its mean over games is MSE_q)")
SQ_ERR_PHI = Metric("sq_err_phi", "squared error of x̂_φY / n", low=0.0, better="lower",
                    about="Eq. 13's bracket, averaged over the candidates (its mean over games "
                          "is MSE_φ)")
SQ_ERR_SUM = Metric("sq_err_sum", "squared error of Σŵφ / Σw", low=0.0, better="lower",
                    about="the squared error of the weighted vote sum over Σw, averaged over "
                          "the candidates")

PASS, NOT_PASS = "PASS", "NOT PASS"

EPSILON = ParamSpec("epsilon", "float", default=1.0, low=0, low_open=True, high=1000,
                    help="privacy budget per partner (of the game, or per candidate: see budget)")
SPLIT = ParamSpec("split", "float", default=0.5, low=0, low_open=True, high=1,
                  help="share of epsilon for the weight report: eps1 = split*eps (paper: 0.5)")
BUDGET = ParamSpec("budget", "str", default="game", choices=("game", "candidate"),
                   help='"game": epsilon covers all k candidates; "candidate": eps = eps1 + eps2')
ESTIMATOR = ParamSpec("estimator", "str", default="faithful", choices=("faithful", "joint"),
                      help='"faithful": Eq. 5 per reported weight group (paper); "joint": '
                           "invert M_w (x) M_phi")


# --------------------------------------------------------------------------- shared plumbing


def _phase(broadcast: Any) -> tuple[str, int]:
    """(phase, candidate) from a round's broadcast ``{"phase": ..., "candidate": ...}``."""
    if not isinstance(broadcast, dict) or broadcast.get("phase") not in ("weights", "opinions"):
        raise ValueError(f"DPWeVote: unexpected broadcast {broadcast!r}")
    return broadcast["phase"], int(broadcast.get("candidate", -1))


def _report_column(reports: Any, rows: Any) -> tuple[np.ndarray, np.ndarray]:
    """Reports as a 1-D float column and rows as int64, broadcast against each other (one
    report against many candidate rows, or one row per report)."""
    rep = np.asarray(reports, dtype=np.float64)
    rep = rep.reshape(-1) if rep.ndim < 2 else rep[:, 0]
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    if len(rep) == 1 and len(rows) > 1:
        rep = np.repeat(rep, len(rows))
    elif len(rows) == 1 and len(rep) > 1:
        rows = np.repeat(rows, len(rep), axis=0)
    return rep, rows


def _metrics(output: dict[str, Any], truth: dict[str, Any], intermediate: bool) -> dict:
    """Per-run metrics; their means over repeated games are Eq. (10)-(13).

    ``correct`` (mean over the k candidates of released == true, so its mean over games is the
    Accuracy of Eq. 10), ``tp``/``fp``/``tn``/``fn`` (Table 2, as fractions of the k
    candidates), ``sq_err_q`` (Eq. 12's ``((q̂ - q)/Σw)²``), ``sq_err_sum`` (the same for
    ``Σ ŵφ``), and for DPWeVote ``sq_err_w`` (Eq. 11's bracket) and ``sq_err_phi`` (Eq. 13's
    bracket, averaged over the candidates). An estimate over a round's respondents (the
    ``reporters`` of the output) is scaled to all n partners before it is compared with the
    truth: the factor is exactly 1 where everyone answered (the paper's setting).
    """
    n = float(truth["n"])
    sum_w = float(truth["sum_w"])
    # estimates over a round's respondents, scaled to all n partners (like with like; each
    # factor is exactly 1 where everyone answered)
    answered = np.asarray(output.get("reporters") or [n] * (1 + len(output["sum_hat"])),
                          dtype=float)
    joined, each = answered[0], answered[1:]
    true_pass = np.asarray(truth["passed"], dtype=bool)
    released = np.asarray([r == PASS for r in output["released"]], dtype=bool)
    m: dict[str, float] = {
        "correct": float(np.mean(released == true_pass)),
        "tp": float(np.mean(released & true_pass)),
        "fp": float(np.mean(released & ~true_pass)),
        "tn": float(np.mean(~released & ~true_pass)),
        "fn": float(np.mean(~released & true_pass)),
        "sq_err_q": ((float(output["q_hat"]) * (n / joined) - sum_w / 2) / sum_w) ** 2,
        "sq_err_sum": float(np.mean(((np.asarray(output["sum_hat"], dtype=float) * (n / each)
                                      - np.asarray(truth["sum_wphi"], dtype=float)) / sum_w)
                                    ** 2)),
    }
    if intermediate:
        xw = np.asarray(output["x_w_hat"], dtype=float)
        m["sq_err_w"] = float(np.mean((xw / joined - np.asarray(truth["x_w"]) / n) ** 2))
        xy = np.asarray(output["x_phi_hat"], dtype=float)
        m["sq_err_phi"] = float(np.mean((xy / each[:, None] - np.asarray(truth["x_wy"]) / n)
                                        ** 2))
    return m


class _GameCurator(Curator):
    """Rounds of one game: 0 = weights, l = 1..k = opinions on candidate l - 1; then finish.

    Round l's estimates all come from the partners who answered it (its respondents R_l, who
    joined in round 0): the weighted sum Σŵφ (Eq. 5/8b) from their opinions and their round-0
    weight reports, and the quota it is compared with from the same weight reports (Eq. 3-4b
    over R_l, ``quota_of``). Where everyone answers, R_l is everyone who joined and this is
    the paper's q̂ (``q_hat``); where some did not, comparing the respondents' sum with every
    partner's quota would release NOT PASS for every candidate.
    """

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.k = int(self.public["candidates"])
        self.b = protocol.budget_of(bound)
        self.w_agents = np.zeros(0, dtype=np.int64)  # partners who joined (reported a weight)
        self.w_reports = np.zeros(0)
        self.q_hat = math.nan
        self.sum_hat: list[float] = []
        self.released: list[str] = []
        self.reporters: list[int] = []
        self.q_used: list[float] = []  # the quota each round's decision compared with

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd == 0:
            return RoundPlan(0, self.agents, None, {"phase": "weights"}, self.weight_schema(),
                             report_bits=self.weight_bits())
        if rnd <= self.k:
            bc = {"phase": "opinions", "candidate": rnd - 1, "released": list(self.released)}
            return RoundPlan(rnd, self.w_agents, None, bc, self.opinion_schema(),
                             report_bits=self.opinion_bits())
        return None

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        reports = np.asarray(reports)[:, 0] if len(agents) else np.zeros(0)
        self.reporters.append(int(len(agents)))
        if rnd == 0:
            self.w_agents = np.asarray(agents, dtype=np.int64)
            self.w_reports = reports
            self.absorb_weights(reports)
            return
        if np.array_equal(agents, self.w_agents):  # every partner with a weight answered
            s, q = self.absorb_opinions(self.w_reports, reports), self.q_hat
        else:
            # partners who reported an opinion but no weight cannot be used (never asked)
            pos = np.searchsorted(self.w_agents, agents)
            pos = np.minimum(pos, max(len(self.w_agents) - 1, 0))
            known = (self.w_agents[pos] == agents) if len(self.w_agents) else \
                np.zeros(0, bool)
            w = self.w_reports[pos[known]]
            s, q = self.absorb_opinions(w, reports[known]), self.quota_of(w)
        self.sum_hat.append(s)
        self.q_used.append(q)
        self.released.append(PASS if decide(s, q) else NOT_PASS)

    def output(self) -> dict[str, Any]:
        return {"released": list(self.released),
                "winners": [i for i, r in enumerate(self.released) if r == PASS],
                "q_hat": float(self.q_hat), "sum_hat": [float(s) for s in self.sum_hat],
                "q_hat_used": [float(q) for q in self.q_used],
                "reporters": list(self.reporters)}

    def finish(self) -> dict[str, Any]:
        return self.output()

    # subclasses
    def weight_schema(self) -> ReportSchema:
        raise NotImplementedError

    def opinion_schema(self) -> ReportSchema:
        raise NotImplementedError

    def weight_bits(self) -> float:
        raise NotImplementedError

    def opinion_bits(self) -> float:
        raise NotImplementedError

    def absorb_weights(self, w: np.ndarray) -> None:
        raise NotImplementedError

    def quota_of(self, w: np.ndarray) -> float:
        """The quota estimated from the weight reports ``w`` alone (a round's respondents')."""
        raise NotImplementedError

    def absorb_opinions(self, w: np.ndarray, phi: np.ndarray) -> float:
        raise NotImplementedError


class _RRCurator(_GameCurator):
    """DPWeVote's server: Eq. (3)-(4b) in round 0, Eq. (5)/(8b) (or the joint inverse) later."""

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.x_w_hat = np.full(3, math.nan)
        self.x_phi_hat: list[list[float]] = []
        self.tables: list[list[list[int]]] = []

    def weight_schema(self):
        return ReportSchema("int", 1, 1, 3)

    def opinion_schema(self):
        return ReportSchema("int", 1, 0, 1)

    def weight_bits(self):
        return math.log2(3)

    def opinion_bits(self):
        return 1.0

    def absorb_weights(self, w):
        self.x_w_hat = self._group_sizes(w)
        self.q_hat = float(quota(self.x_w_hat))

    def _group_sizes(self, w: np.ndarray) -> np.ndarray:
        """Eq. (3) from the weight reports ``w``."""
        y_w = self.bound.rounds[0].mechanism.counts(w.astype(np.int64) - 1)
        return estimate_weights(y_w, self.b.eps_w)

    def quota_of(self, w):
        """Eq. (3)-(4b) over the partners whose weight reports are ``w``."""
        return float(quota(self._group_sizes(w)))

    def absorb_opinions(self, w, phi):
        table = opinion_table(w, phi)
        self.tables.append(table.tolist())
        if self.params["estimator"] == "joint":
            x_yes = estimate_opinions_joint(table, self.b.eps_w, self.b.eps_phi)
        else:
            x_yes = estimate_opinions_faithful(table, self.b.eps_phi)
        self.x_phi_hat.append([float(v) for v in x_yes])
        return float(weighted_sum(x_yes))

    def output(self):
        out = super().output()
        out.update(estimator=self.params["estimator"],
                   x_w_hat=[float(v) for v in self.x_w_hat], x_phi_hat=self.x_phi_hat,
                   tables=self.tables)
        return out


class _LaplaceCurator(_GameCurator):
    """§5.1.3 baseline server: ``q̂ = ½ Σ w̃`` and ``Σ ŵφ = Σ w̃·φ̃``."""

    def weight_schema(self):
        return ReportSchema("float", 1)

    def opinion_schema(self):
        return ReportSchema("float", 1)

    def weight_bits(self):
        return 64.0

    def opinion_bits(self):
        return 64.0

    def absorb_weights(self, w):
        self.q_hat = self.quota_of(w)

    def quota_of(self, w):
        """``q̂ = ½ Σ w̃`` over the partners whose noisy weights are ``w``."""
        return 0.5 * float(np.sum(w))

    def absorb_opinions(self, w, phi):
        return float(ordered.dot(w, phi))


class _VoteProtocol(Protocol):
    family = "weighted voting (Yan, Liu & Liu, 2018)"
    data_type = DATA_TYPE
    curator_cls: type = _RRCurator
    metrics = (CORRECT, TP, FP, TN, FN, SQ_ERR_W, SQ_ERR_Q, SQ_ERR_PHI, SQ_ERR_SUM)
    #: Fig. 4: the accuracy (Eq. 10) and the MSE of x̂_w/n, q̂ and x̂_φY/n (Eqs. 11-13)
    figure_metrics = ("correct", "sq_err_w", "sq_err_q", "sq_err_phi")

    def resolve(self, params: dict[str, Any], public: dict[str, Any]) -> dict[str, Any]:
        out = super().resolve(params, public)
        if "candidates" not in public:
            raise ParamError(f"[data] kind: protocol {self.name!r} needs weighted_votes data "
                             "(public fact 'candidates' missing)")
        if out["split"] >= 1.0:
            raise ParamError(f"[params] split: got {out['split']!r}; allowed: a number > 0 and "
                             "< 1 (eps1 = split*eps, eps2 = (1 - split)*eps must both be > 0)")
        return out

    def query_refusal(self, bound: Bound, rnd: int, queries: np.ndarray | None,
                      broadcast: Any) -> str | None:
        """Round 0 asks the weight and round l = 1..k the opinion on candidate l - 1 (§4.2-4.3;
        ``_GameCurator.plan``): the round's broadcast must say so. Another phase or candidate
        would release a column through another round's mechanism (the weight again at ε1 in
        an opinion round the odometer charges ε2). A round past the last is the odometer's to
        refuse (its ε is ∞)."""
        k = int(bound.public["candidates"])
        if not 0 <= rnd <= k:
            return None
        want = "the weights" if rnd == 0 else f"the opinion on candidate {rnd - 1}"
        try:
            phase, c = _phase(broadcast)
        except (ValueError, TypeError):
            return f"round {rnd} asks {want}; its broadcast does not say so"
        if phase == "weights":
            if rnd == 0:
                return None
            return f"round {rnd} asks {want}, not the weights (round 0's question)"
        if rnd == 0 or c != rnd - 1 or "candidate" not in broadcast:
            return (f"round {rnd} asks {want}, not the opinion on candidate "
                    f"{broadcast.get('candidate')!r}")
        return None

    def report_numbers(self, bound: Bound) -> int | None:
        """One number per report: the weight (round 0) or one opinion (round l)."""
        return 1

    def curator_agent_bytes(self, bound: Bound) -> int:
        """The partners' round-0 weights, kept for rounds 1..k (``w_agents``, int64, and
        ``w_reports``, float64)."""
        return 16

    #: the weight's and each opinion's mechanism for a budget (``rr_mechanisms`` or
    #: ``laplace_mechanisms``): the RR and Laplace protocols differ by this attribute
    mechanisms = staticmethod(rr_mechanisms)

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """Round 0 spends ε1 (the weight), rounds 1..k spend ε2 each (one opinion per
        candidate): sequentially composed to ε1 + k·ε2 (Theorem 4.3 over the game)."""
        b = budget(params["epsilon"], params["split"], int(public["candidates"]),
                   params["budget"])
        weight, opinion = self.mechanisms(b)
        return Rounds("local", (Round(weight), Round(opinion, repeat=b.candidates)),
                      notes=self.notes(b))

    def notes(self, b: Budget) -> str:
        """The claim's notes on the split."""
        raise NotImplementedError

    def budget_of(self, bound: Bound) -> Budget:
        """ε1, ε2 and k of a run, read from its bound mechanisms."""
        return Budget(bound.rounds[0].privacy.epsilon, bound.rounds[1].privacy.epsilon,
                      bound.rounds[1].repeat)

    def mechanism_of(self, block: Block) -> tuple[Any, int]:
        """The bound mechanism of the block's phase and the row column it releases (0 = the
        weight, 1 + l = the opinion on candidate l)."""
        phase, c = _phase(block.broadcast)
        col = 0 if phase == "weights" else 1 + c
        return block.bound.rounds[col].mechanism, col

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> np.ndarray:
        """The released estimates: q̂ (Eq. 4b) and Σ w·φ_l per candidate (Eq. 8b)."""
        return np.array([output["q_hat"], *output["sum_hat"]], dtype=np.float64)

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray:
        """What they estimate, from raw rows ``[w, φ_1..φ_k]``: ½ Σ w and Σ w·φ_l."""
        rows = np.asarray(rows, dtype=np.int64)
        w = G[rows[:, 0] - 1]
        return np.array([0.5 * w.sum(), *(w[:, None] * rows[:, 1:]).sum(axis=0)])

    def audit_spec(self, bound: Bound) -> AuditSpec:
        """All rows ``[w, φ_1..φ_k]`` (k <= 10) with the data's prior; the hardest pair.

        The prior is the generating distribution the data kind makes public (weights i.i.d.,
        opinions i.i.d. given the weight); a uniform one when it is absent.

        The pair is ``[1, 0, .., 0]`` vs ``[3, 1, .., 1]``: every report's likelihood ratio is
        then at its bound (RR: any two different values; Laplace: |Δw| = 2, |Δφ| = 1), so the
        pair attains the full ε1 + k·ε2. For k > 10 only the 6 rows with all opinions equal are
        listed (prior renormalised over them).
        """
        public = bound.public
        k = int(public["candidates"])
        pw = np.asarray(public.get("prior_weights", [1 / 3] * 3), dtype=np.float64)
        py_w = np.asarray(public.get("prior_yes_by_weight",
                                     [public.get("prior_yes", 0.5)] * 3), dtype=np.float64)
        if k <= 10:
            ops = ((np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1).astype(np.int64)
            notes = "all 3*2^k rows"
        else:
            ops = np.array([[0] * k, [1] * k], dtype=np.int64)
            notes = "k > 10: only rows whose k opinions are all equal"
        values = np.array([[w, *o] for w in WEIGHTS for o in ops.tolist()], dtype=np.int64)
        yes = values[:, 1:].sum(axis=1)
        py = py_w[values[:, 0] - 1]
        prior = pw[values[:, 0] - 1] * py**yes * (1 - py) ** (k - yes)
        prior = prior / prior.sum() if prior.sum() > 0 else np.full(len(values), 1 / len(values))
        lo = int(np.flatnonzero((values[:, 0] == 1) & (yes == 0))[0])
        hi = int(np.flatnonzero((values[:, 0] == 3) & (yes == k))[0])
        return AuditSpec(values, prior, (lo, hi),
                         notes=f"{notes}; pair attains eps1 + k*eps2 = "
                               f"{bound.rounds.total_epsilon:g}")


class DPWeVote(_VoteProtocol):
    """DPWeVote (Yan, Liu & Liu, 2018, §4): 3-ary RR weights, binary RR opinions per candidate,
    release.

    Parameters: ``epsilon``, ``split`` (ε1 = split·ε; paper 0.5), ``budget`` ("game": ε for all
    k candidates; "candidate": the paper's ε = ε1 + ε2 per candidate) and ``estimator``
    ("faithful" Eq. 5 per reported group, or "joint"). See the module docstring.
    """

    name = "dpwevote"
    summary = "LDP weighted voting: 3-ary RR weights, binary RR opinions, estimated quota"
    params = {"epsilon": EPSILON, "split": SPLIT, "budget": BUDGET, "estimator": ESTIMATOR}
    curator_cls = _RRCurator
    mechanisms = staticmethod(rr_mechanisms)

    def notes(self, b: Budget) -> str:
        pr = rr_probabilities(b)
        return (f"weight: 3-ary RR, eps1={b.eps_w:g} (p_w={pr['p_w']:.6g}); each of k="
                f"{b.candidates} opinions: binary RR, eps2={b.eps_phi:g} "
                f"(p_phi={pr['p_phi']:.6g}); game: eps1 + k*eps2")

    def respond(self, block: Block) -> np.ndarray:
        """Round 0: ``w̃ = RR_3(w)`` with ε1; round l: ``φ̃_l = RR_2(φ_l)`` with ε2 (§4.2-4.3)."""
        rr, col = self.mechanism_of(block)
        u = block.uniforms(1)[:, 0]
        data = np.asarray(block.rows, dtype=np.int64)
        shift = 1 if col == 0 else 0  # weights 1..3 as codes 0..2
        rep = rr.perturb(data[:, col] - shift, u) + shift
        return rep.astype(np.int64)[:, None]

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Exact ``log M_w[w̃, w]`` (round 0) or ``log M_φ[φ̃, φ_l]`` (round l)."""
        rr, col = self.mechanism_of(block)
        rep, rows = _report_column(reports, block.rows)
        shift = 1 if col == 0 else 0
        return rr.log_likelihood(rep - shift, rows[:, col] - shift)

    def evaluate(self, output, truth):
        return _metrics(output, truth, intermediate=True)


class DPWeVoteLaplace(_VoteProtocol):
    """§5.1.3 baseline: ``w + Lap(2/ε1)`` and ``φ_l + Lap(1/ε2)``; PASS iff Σw̃φ̃ >= ½Σw̃.

    The paper reports only its MSE_q (it has no x̂_w or x̂_φ); ``sq_err_sum`` is given too.
    """

    name = "dpwevote_laplace"
    metrics = (CORRECT, TP, FP, TN, FN, SQ_ERR_Q, SQ_ERR_SUM)
    figure_metrics = ("correct", "sq_err_q")
    summary = "LDP weighted voting baseline: Laplace noise on weight (D=2) and opinions (D=1)"
    params = {"epsilon": EPSILON, "split": SPLIT, "budget": BUDGET}
    curator_cls = _LaplaceCurator
    mechanisms = staticmethod(laplace_mechanisms)

    def notes(self, b: Budget) -> str:
        sw, sp = laplace_scales(b)
        return (f"weight: Lap(2/eps1) with eps1={b.eps_w:g} (scale {sw:.6g}, sensitivity 2); "
                f"each of k={b.candidates} opinions: Lap(1/eps2) with eps2={b.eps_phi:g} "
                f"(scale {sp:.6g}, sensitivity 1); game: eps1 + k*eps2; each release is "
                "the exact discrete Laplace on a grid (pure DP)")

    def respond(self, block: Block) -> np.ndarray:
        # the exact discrete mechanism: textbook float Laplace let the curator read a weight
        # outright from the low-order bits (``simulator.audit.float_attack``)
        lap, col = self.mechanism_of(block)
        data = np.asarray(block.rows, dtype=np.int64)
        rep = lap.perturb(data[:, col], block.words())
        return rep.astype(np.float64)[:, None]

    def laplace_release(self, block: Block):
        """The weight (round 0) or one opinion plus Lap(2/ε1) or Lap(1/ε2), on the exact
        mechanism's grid."""
        lap, col = self.mechanism_of(block)
        rows = np.asarray(block.rows, dtype=np.float64)
        return lap.release_spec(rows[:, col:col + 1])

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """The exact log-pmf of the report (``mechanisms.Laplace.log_likelihood``)."""
        lap, col = self.mechanism_of(block)
        rep, rows = _report_column(reports, block.rows)
        return lap.log_likelihood(rep, rows[:, col])

    def evaluate(self, output, truth):
        return _metrics(output, truth, intermediate=False)
