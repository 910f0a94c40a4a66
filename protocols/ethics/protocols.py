"""Crowd-guided ethical decisions under DP (Wang et al., 2019): Algorithms 1-3 and a baseline.

From Wang, Zhao, Yu, Liu, Yang, Ren & Shi, 2019, "Privacy-preserving Crowd-guided AI
Decision-making in Ethical Dilemmas" (CIKM).

The curators are in ``curators``, one voter's estimate and its sensitivities (Theorems 1 and 3)
in ``estimates``; the MLE and the functional mechanism's arithmetic in ``mle`` and ``fm``.

Protocols (one round each; every voter holds ``[eps_i, z_1, ..., z_n]``, see ``data``):

* ``ethics_nonprivate``: voters send their Eq. (3) estimate beta_i, the curator averages
  (Noothigattu et al. 2018; the accuracy ceiling).
* ``ethics_vlcp`` / ``ethics_rlcp`` (Algorithm 1, centralised perturbation): voters send beta_i
  (or, with ``upload = "records"``, their records) to a **trusted** aggregator, which releases
  the average plus Laplace noise of scale D_1(C) / (N eps). Theorem 1: the sensitivity is the
  same for voter- and record-level neighbours, so the two are one mechanism with two claims.
  Central DP: a colluding curator sees every voter's beta_i (or records).
* ``ethics_vldp`` / ``ethics_rldp_laplace`` (Algorithm 2, distributed perturbation): each voter
  releases beta_i + Lap(D_1(C) / eps_i)^d with her own eps_i; the curator averages. Theorem 3:
  again the same sensitivity at voter and record level, so one mechanism with two claims.
* ``ethics_rldp_fm`` (Algorithm 3): each voter perturbs the coefficients of the second-order
  Taylor expansion of her own objective (the functional mechanism, ``fm``) with eps_i, solves the
  noisy problem and releases the result; the curator averages. Record-level eps_i-LDP.

A voter's eps_i is the first column of her row when the data set draws personal eps_i
(``[data] eps_mode``), otherwise ``[params] epsilon`` for everyone. The curator averages plainly
(the paper) or, with ``aggregate = "weighted"``, with inverse-variance weights eps_i^2 (voters
then append eps_i to their report, disclosing it; the reference note's suggestion, not the
paper's).

Metrics (``evaluate``): ``accuracy`` is the fraction of held-out test instances on which the
released beta_tilde and the non-private society preference beta_bar (average Eq. 3 estimate)
choose the same alternative (§5.1); ``accuracy_generating`` compares with the mean of the
voters' generating parameters instead; ``accuracy_reference`` is beta_bar against that mean (the
same for every protocol); ``err_l1``/``err_l2``/``err_linf`` are the norms of beta_tilde -
beta_bar (Theorem 2's quantity; meaningful for Algorithms 1-2, whose estimates share beta_bar's
scale), ``cosine`` their cosine similarity.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import ordered
from ldpsim.protocols.base import (
    AuditSpec,
    Block,
    Bound,
    Curator,
    ParamError,
    ParamSpec,
    Protocol,
    Round,
    Rounds,
)
from ldpsim.protocols.ethics import fm
from ldpsim.protocols.ethics.curators import (
    AverageCurator,
    FMCoefficientCurator,
    TrustedCurator,
    in_order,
    kept_bytes,
)
from ldpsim.protocols.ethics.estimates import (
    central_sensitivity,
    local_sensitivity,
    split_rows,
    voter_mle,
)
from ldpsim.protocols.ethics.model import PersonalLaplace, decide
from ldpsim.protocols.metrics import Metric, fraction

EPSILON = ParamSpec("epsilon", "float", default=1.0, low=0, low_open=True, high=1e6,
                    help="eps of the release (central) or of every voter without a personal "
                         "eps_i (local)")
AGGREGATE = ParamSpec("aggregate", "str", "mean", choices=("mean", "weighted"),
                      help='"mean" (paper) or "weighted" by eps_i^2 (voters disclose eps_i)')
UPLOAD = ParamSpec("upload", "str", "beta", choices=("beta", "records"),
                   help="what voters send the trusted aggregator: beta_i or their records")


# --------------------------------------------------------------------------- helpers


def _audit_eps(bound: Bound) -> float:
    """The eps column of audit candidate rows: the weakest eps a voter may hold (the claim's;
    1 without privacy)."""
    if bound.public.get("personal_epsilon"):
        return float(bound.public["eps_max"])
    return bound.rounds[0].privacy.epsilon if bound.rounds.model != "none" else 1.0


def _with_eps_column(values: np.ndarray, scales: np.ndarray, grids: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``laplace_release`` with the report's last column, eps_i, which is not noised (NaN)."""
    pad = np.full((len(values), 1), np.nan)
    one = np.ones((len(values), 1))
    return (np.concatenate([values, pad], axis=1), np.concatenate([scales, one], axis=1),
            np.concatenate([grids, one], axis=1))


# --------------------------------------------------------------------------- protocols


class _EthicsProtocol(Protocol):
    family = "ethical decisions (Wang et al., 2019)"
    data_type = "pairwise"
    metrics = (
        fraction("accuracy", "decisions agreeing with β̄", "higher",
                 "§5.1: the share of held-out instances on which the released β̃ and the "
                 "non-private society preference β̄ choose the same alternative"),
        fraction("accuracy_generating", "decisions agreeing with the generating mean",
                 "higher", "the same against the mean of the voters' generating parameters"),
        fraction("accuracy_reference", "β̄'s agreement with the generating mean", "higher",
                 "β̄ against the generating mean: the ceiling, the same for every protocol"),
        Metric("cosine", "cosine similarity of β̃ and β̄", low=-1.0, high=1.0,
               better="higher", about="the cosine of the angle between β̃ and β̄"),
        Metric("err_l1", "‖β̃ − β̄‖₁", low=0.0, better="lower",
               about="Theorem 2's quantity in the L1 norm (Algorithms 1-2)"),
        Metric("err_l2", "‖β̃ − β̄‖₂", low=0.0, better="lower",
               about="Theorem 2's quantity in the L2 norm"),
        Metric("err_linf", "‖β̃ − β̄‖∞", low=0.0, better="lower",
               about="Theorem 2's quantity in the max norm"))
    #: Figs. 4-5 show the accuracy of the learned model on held-out decisions
    figure_metrics = ("accuracy",)
    #: whether a run solves every voter's Eq. (3) estimate (``voter_mle``), as the ground
    #: truth does (``PairwiseChoices.truth_from_run``)
    solves_eq3 = True

    @property
    def unit(self) -> str:
        """What a claim's ε protects: a voter's whole row, or one of its records."""
        return "row" if self.level == "voter" else "record"

    def curator_class(self, bound: Bound) -> type[Curator]:
        """The curator of ``whole_curator_class``, absorbing in parts in agent order
        (``curators.in_order``)."""
        return in_order(self.whole_curator_class(bound))

    def curator_agent_bytes(self, bound: Bound) -> int:
        """What a curator in agent order keeps a report to sum pairwise at the end: a weight
        with the weighted aggregate, the beta with d = 1 (``curators.kept_bytes``)."""
        return kept_bytes(bound.params, bound.public)

    def whole_curator_class(self, bound: Bound) -> type[Curator]:
        """The protocol's curator over whole rounds (default ``curator_cls``)."""
        return super().curator_class(bound)

    def report_length(self, params: dict[str, Any], public: dict[str, Any]) -> int:
        """Numbers per report: beta_i, and eps_i with the weighted aggregate."""
        return int(public["d"]) + (params.get("aggregate") == "weighted")

    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        """Decision agreement with beta_bar and with the generating mean; Theorem-2 error norms.

        See the module docstring for the definitions.
        """
        est = np.asarray(output["beta"], dtype=np.float64)
        ref = np.asarray(truth["beta_bar"], dtype=np.float64)
        gen = np.asarray(truth["beta_generating"], dtype=np.float64)
        test = truth["test"]
        diff = est - ref
        den = float(ordered.norm(est) * ordered.norm(ref))
        c_est, c_ref, c_gen = (decide(b, test) for b in (est, ref, gen))
        return {"accuracy": float(np.mean(c_est == c_ref)),
                "accuracy_generating": float(np.mean(c_est == c_gen)),
                "accuracy_reference": float(np.mean(c_ref == c_gen)),
                "err_l1": float(np.abs(diff).sum()),
                "err_l2": float(np.sqrt((diff * diff).sum())),
                "err_linf": float(np.abs(diff).max()),
                "cosine": float(ordered.dot(est, ref) / den) if den > 0 else 0.0}

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> np.ndarray | None:
        """N times the released average (the sum of the voters' contributions); None for the
        eps_i^2-weighted average, which is not a plain sum."""
        if bound.params.get("aggregate") == "weighted":
            return None
        return np.asarray(output["beta"], dtype=np.float64) * float(output["n_reports"])

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray | None:
        """Sum of the voters' Eq. (3) estimates (what Algorithms 1-2 release with noise)."""
        _, z = split_rows(rows, bound.public)
        return voter_mle(z, bound.public).sum(axis=0)

    def _voter_audit_rows(self, bound: Bound) -> np.ndarray:
        """Two voters: all records favour (1, ..., 1) vs all favour (-1, ..., -1).

        Their Eq. (3) estimates are opposite points of the C-ball's L1 diameter direction for
        the L2 and L-inf balls (+-C/sqrt(d) and +-C per coordinate), the pair Theorem 1's
        proof uses.
        """
        d, n = int(bound.public["d"]), int(bound.public["records"])
        rows = np.zeros((2, 1 + n * d))
        rows[:, 0] = _audit_eps(bound)
        rows[0, 1:] = 1.0
        rows[1, 1:] = -1.0
        return rows


class NonPrivate(_EthicsProtocol):
    """Noothigattu et al.'s aggregation without privacy: the average of the Eq. (3) estimates.

    Trusts the curator completely (it sees every beta_i); the accuracy ceiling of Algorithms 1-3.
    """

    name = "ethics_nonprivate"
    summary = "non-private: voters send their Eq. (3) MLE, the curator averages (ceiling)"
    params = {"upload": UPLOAD}

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        return Rounds.none(notes="the curator sees every voter's beta_i")

    curator_cls = TrustedCurator
    #: whether the trusted curator adds Laplace noise to the average (Algorithm 1)
    central_noise = False

    def respond(self, block: Block) -> np.ndarray:
        """The voter's Eq. (3) estimate (or, with upload = "records", her records)."""
        _, z = split_rows(block.rows, block.public)
        if block.params.get("upload") == "records":
            return z.reshape(len(z), -1).copy()
        return voter_mle(z, block.public)

    def audit_spec(self, bound: Bound) -> AuditSpec:
        return AuditSpec(self._voter_audit_rows(bound), np.array([0.5, 0.5]), (0, 1),
                         notes="no privacy: the report is a deterministic function of the row")

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """0 where the report is exactly what the row produces, -inf elsewhere."""
        expect = self.respond(replace(block, agents=np.arange(len(block.rows)), key=0))
        same = np.isclose(reports, expect, rtol=1e-12, atol=1e-12).all(axis=1)
        return np.where(same, 0.0, -np.inf)


class VLCP(NonPrivate):
    """Algorithm 1 for VLCP: Laplace noise on the average by a trusted aggregator.

    beta_tilde = (1/N) sum_i beta_i + Lap(D_1(C) / (N eps))^d (Theorem 1, ``central_sensitivity``;
    N = the number of valid reports). eps-DP for the released beta_tilde against voter-level
    neighbours. **Central model**: the curator is trusted with every beta_i (or the records), so
    a colluding curator learns them exactly; the audit (``log_likelihood`` is 0 or -inf) shows it.
    """

    name = "ethics_vlcp"
    summary = "Alg. 1 (VLCP): trusted aggregator adds Laplace(D1(C)/(N eps)) to the average"
    params = {"epsilon": EPSILON, "upload": UPLOAD}
    level = "voter"

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One central release: the average plus ``Laplace(ε, D_1(C)/N)`` over its d
        coordinates (Theorem 1; N = all voters here, the valid reports at release)."""
        d = int(public["d"])
        delta = central_sensitivity(public["norm"], float(public["bound"]), d, int(public["n"]))
        release = mech.Laplace(float(params["epsilon"]), delta, components=d)
        return Rounds("central", (Round(release),), per_report=False,
                      notes=f"{self.level}-level neighbours; trusts the curator with every "
                            "beta_i; sensitivity D_1(C)/N for N = all voters",
                      unit=self.unit)

    central_noise = True


class RLCP(VLCP):
    """Algorithm 1 for RLCP: the same mechanism as VLCP (Theorem 1: the record-level
    sensitivity equals the voter-level one), claimed against record-level neighbours."""

    name = "ethics_rlcp"
    summary = "Alg. 1 (RLCP): as ethics_vlcp, record-level neighbours (same sensitivity, Thm 1)"
    level = "record"


class VLDP(_EthicsProtocol):
    """Algorithm 2 for VLDP: each voter releases beta_i + Lap(D_1(C) / eps_i)^d.

    Theorem 3 (``local_sensitivity``): any two data sets of one voter give estimates at most
    D_1(C) apart in L1, so the release is eps_i-LDP at voter level (VLDP is LDP, §4.1).
    """

    name = "ethics_vldp"
    summary = "Alg. 2 (VLDP): each voter adds Laplace(D1(C)/eps_i) to her MLE; personal eps_i"
    params = {"epsilon": EPSILON, "aggregate": AGGREGATE}
    level = "voter"
    mechanism = "laplace"

    def resolve(self, params, public):
        out = super().resolve(params, public)
        if public.get("personal_epsilon") and "epsilon" in params:
            raise ParamError(f"[params] epsilon: got {params['epsilon']!r}, but the data set "
                             f"gives every voter a personal eps_i ({public['eps_spec']}); "
                             "allowed: leave epsilon unset, or set [data] eps_mode = \"none\"")
        return out

    def sensitivity(self, public: dict[str, Any], params: dict[str, Any]) -> float:
        return local_sensitivity(public["norm"], float(public["bound"]), int(public["d"]))

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: each voter's vector through the exact discrete Laplace at her eps_i
        (``PersonalLaplace``), claimed at the largest eps_i a voter may hold."""
        if public.get("personal_epsilon"):
            worst, note = float(public["eps_max"]), f"personalised eps_i: {public['eps_spec']}"
        else:
            worst, note = float(params["epsilon"]), ""
        level = (f"{self.level}-level eps_i-LDP (Theorem 3: same sensitivity at voter and "
                 "record level)")
        release = PersonalLaplace(params["epsilon"], worst, self.sensitivity(public, params),
                                  self.components(params, public))
        return Rounds("local", (Round(release),), mechanism=self.mechanism,
                      notes="; ".join(x for x in (level, note) if x), unit=self.unit)

    def components(self, params: dict[str, Any], public: dict[str, Any]) -> int:
        """The length of the vector a voter releases (its components share Δ)."""
        return int(public["d"])

    curator_cls = AverageCurator

    def release(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """(noisy beta_i, eps_i) for each voter."""
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        beta = voter_mle(z, block.public)
        return self.mechanism_for(eps, beta, block).perturb(beta, block.words()), eps

    def mechanism_for(self, eps: np.ndarray, vec: np.ndarray, block: Block) -> mech.Laplace:
        """Each voter's release of her vector ``vec``: the exact discrete Laplace with her eps_i
        and the sensitivity D (an L1 bound shared by the vector's components), from the bound
        ``PersonalLaplace``."""
        return block.mechanism.at(eps, vec.shape[1])

    def respond(self, block: Block) -> np.ndarray:
        noisy, eps = self.release(block)
        if block.params["aggregate"] == "weighted":
            return np.concatenate([noisy, eps[:, None]], axis=1)
        return noisy

    def audit_spec(self, bound: Bound) -> AuditSpec:
        return AuditSpec(self._voter_audit_rows(bound), np.array([0.5, 0.5]), (0, 1),
                         notes="opposite ends of the C-ball: the pair Theorem 3's proof uses")

    def laplace_release(self, block: Block):
        """beta_i + Lap(D_1(C)/eps_i) per coordinate on the exact mechanism's grid (eps_i
        itself, sent with the weighted aggregate, is not noised: NaN)."""
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        beta = voter_mle(z, block.public)
        rel = self.mechanism_for(eps, beta, block).release_spec(beta)
        if block.params["aggregate"] == "weighted":
            return _with_eps_column(*rel)
        return rel

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Sum over coordinates of the exact log-pmf of each report given beta(row)."""
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        beta = voter_mle(z, block.public)
        noise = self.mechanism_for(eps, beta, block)
        d = beta.shape[1]
        ll = noise.log_likelihood(np.asarray(reports)[:, :d], beta).sum(axis=1)
        if block.params["aggregate"] == "weighted":
            ll = np.where(np.isclose(np.asarray(reports)[:, d], eps), ll, -np.inf)
        return ll


class RLDPLaplace(VLDP):
    """Algorithm 2 for RLDP: the same mechanism as VLDP (Theorem 3), record-level claim."""

    name = "ethics_rldp_laplace"
    summary = "Alg. 2 (RLDP): as ethics_vldp, record-level neighbours (same sensitivity, Thm 3)"
    level = "record"

    def audit_spec(self, bound: Bound) -> AuditSpec:
        """Neighbours differing in one record: the others are 0 (no information), record 0 is
        (1, ..., 1) vs (-1, ..., -1), so beta_i jumps across the ball (Theorem 3's proof)."""
        d, n = int(bound.public["d"]), int(bound.public["records"])
        rows = np.zeros((2, 1 + n * d))
        rows[:, 0] = _audit_eps(bound)
        rows[0, 1:1 + d] = 1.0
        rows[1, 1:1 + d] = -1.0
        return AuditSpec(rows, np.array([0.5, 0.5]), (0, 1),
                         notes="one record differs; the rest carry no information")


class RLDPFunctional(VLDP):
    """Algorithm 3: record-level eps_i-LDP by the functional mechanism (``fm``).

    The voter scales her records by the public radius ``clip`` (default: the data set's
    suggestion) into the unit L2 ball (``domain = "l2"``, the paper's preprocessing) or box,
    computes the coefficients of the second-order Taylor expansion of her objective (Eq. 14),
    adds Lap(Delta / eps_i) to each with Delta = ``fm.fm_sensitivity`` (Zhang et al. Lemma 1),
    minimises the noisy objective with ``solver`` and releases the minimiser in raw feature units.
    With ``report = "coefficients"`` she releases the noisy coefficients and her eps_i instead,
    and the curator solves (same privacy; exact likelihood for the audit).
    """

    name = "ethics_rldp_fm"
    summary = "Alg. 3 (RLDP): functional mechanism, Laplace on the Taylor coefficients; eps_i"
    params = {"epsilon": EPSILON, "aggregate": AGGREGATE,
              "solver": ParamSpec("solver", "str", "ridge", choices=fm.SOLVERS,
                                  help="noisy-objective solver (see protocols.ethics.fm)"),
              "ridge": ParamSpec("ridge", "float", None, low=0,
                                 help="ridge of solver 'ridge' in noise standard deviations "
                                      "(default 3 sqrt(d); Zhang et al.'s code uses 5)"),
              "domain": ParamSpec("domain", "str", "l2", choices=fm.DOMAINS,
                                  help="record preprocessing: unit L2 ball or unit box"),
              "clip": ParamSpec("clip", "float", None, low=0, low_open=True,
                                help="public scale R of the records (default: data's suggestion)"),
              "noise": ParamSpec("noise", "str", "monomials", choices=fm.NOISE_FORMS,
                                 help="perturb the monomial coefficients or the full matrix"),
              "report": ParamSpec("report", "str", "beta", choices=("beta", "coefficients"),
                                  help="voters release the solution or the noisy coefficients")}
    level = "record"
    mechanism = "functional_mechanism"
    solves_eq3 = False  # the voters solve their noisy objectives, never Eq. (3)

    def resolve(self, params, public):
        out = super().resolve(params, public)
        if out["clip"] is None:
            out["clip"] = float(public["clip"])
        if out["ridge"] is None:
            out["ridge"] = fm.default_ridge(int(public["d"]))
        if out["solver"] == "ball" and public["norm"] != "l2":
            raise ParamError(f"[params] solver: got 'ball' with [data] norm = "
                             f"{public['norm']!r}; allowed: 'ridge' or 'trim', or norm = 'l2'")
        return out

    def sensitivity(self, public, params):
        return fm.fm_sensitivity(int(public["d"]), params["domain"])

    def components(self, params, public) -> int:
        """The noisy coefficients of one voter (``fm.n_coefficients``)."""
        return fm.n_coefficients(int(public["d"]), params["noise"])

    def report_length(self, params, public) -> int:
        d = int(public["d"])
        if params["report"] == "coefficients":
            return fm.n_coefficients(d, params["noise"]) + 1
        return d + (params["aggregate"] == "weighted")

    def whole_curator_class(self, bound: Bound) -> type[Curator]:
        if bound.params["report"] == "coefficients":
            return FMCoefficientCurator
        return AverageCurator

    def noisy_coefficients(self, block: Block):
        """(noisy coefficient vector, eps_i) of each voter (Algorithm 3, lines 1-3)."""
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        vec = fm.voter_coefficients(z, block.params["clip"], block.params["domain"],
                                    block.params["noise"])
        return self.mechanism_for(eps, vec, block).perturb(vec, block.words()), eps

    def laplace_release(self, block: Block):
        """With ``report = "coefficients"`` the report is the noisy coefficient vector on the
        exact mechanism's grid (and eps_i, not noised); with ``report = "beta"`` it is the
        minimiser of the noisy objective, not a Laplace release (None)."""
        if block.params["report"] != "coefficients":
            return None
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        vec = fm.voter_coefficients(z, block.params["clip"], block.params["domain"],
                                    block.params["noise"])
        return _with_eps_column(*self.mechanism_for(eps, vec, block).release_spec(vec))

    def solve(self, a_t, m_t, eps, params, public) -> np.ndarray:
        """Minimiser of the noisy objective, in raw feature units (Algorithm 3, line 4)."""
        sd = math.sqrt(2.0) * self.sensitivity(public, params) / eps
        radius = float(public["bound"]) * params["clip"]
        beta = fm.solve(a_t, m_t, params["solver"], sd, params["ridge"], radius)
        return beta / params["clip"]

    def respond(self, block: Block) -> np.ndarray:
        vec, eps = self.noisy_coefficients(block)
        if block.params["report"] == "coefficients":
            return np.concatenate([vec, eps[:, None]], axis=1)
        a_t, m_t = fm.from_vector(vec, int(block.public["d"]), block.params["noise"])
        beta = self.solve(a_t, m_t, eps, block.params, block.public)
        if block.params["aggregate"] == "weighted":
            return np.concatenate([beta, eps[:, None]], axis=1)
        return beta

    def audit_spec(self, bound: Bound) -> AuditSpec:
        """Neighbours differing in one record, chosen to maximise the coefficient change.

        Other records are 0. Record 0 is a unit-L2 (after preprocessing) vector with equal
        magnitudes and sign pattern (+...+) in one row and with k signs flipped in the other,
        k maximising sqrt(2/pi) 2k/sqrt(d) + 4k(d-k)/(pi d) (the coefficient L1 change; flipping
        all signs changes only the linear part).
        """
        params, public = bound.params, bound.public
        d, n = int(public["d"]), int(public["records"])
        r = params["clip"]
        if params["domain"] == "l2":
            mag = r / math.sqrt(d)
        else:
            mag = r

        def change(k: int) -> float:
            lin = fm.SQRT_2_OVER_PI * 2 * k * mag / r
            quad = 4 * k * (d - k) * (mag / r) ** 2 / math.pi
            return lin + quad

        k = max(range(1, d + 1), key=change)
        limit = self.sensitivity(public, params)
        rows = np.zeros((2, 1 + n * d))
        rows[:, 0] = _audit_eps(bound)
        rows[0, 1:1 + d] = mag
        rows[1, 1:1 + d] = mag
        rows[1, 1:1 + k] = -mag
        return AuditSpec(rows, np.array([0.5, 0.5]), (0, 1),
                         notes=f"one record differs in {k} signs; coefficient L1 change "
                               f"{change(k):.3g} of the bound {limit:.3g}")

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> None:
        """None: a voter's contribution is the minimiser of a *noisy* objective, a non-linear
        function of the noise, so the output estimates no noise-free sum (no differencing)."""
        return None

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> None:
        """None (see ``released_aggregate``)."""
        return None

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Exact for ``report = "coefficients"`` (the discrete Laplace log-pmf of each
        coefficient, ``mechanisms.Laplace.log_likelihood``); None
        for ``report = "beta"``: the released minimiser is a non-linear, many-to-one function of
        d + d(d+1)/2 Laplace variables (eigen-decomposition, trimming), with no closed-form
        density."""
        if block.params["report"] != "coefficients":
            return None
        eps_col, z = split_rows(block.rows, block.public)
        eps = block.mechanism.voter_epsilon(eps_col)
        exact = fm.voter_coefficients(z, block.params["clip"], block.params["domain"],
                                      block.params["noise"])
        reports = np.asarray(reports)
        lap = self.mechanism_for(eps, exact, block)
        ll = lap.log_likelihood(reports[:, :-1], exact).sum(axis=1)
        return np.where(np.isclose(reports[:, -1], eps), ll, -np.inf)
