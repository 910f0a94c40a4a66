"""Truth-inference protocols of Sun, Dong, Wang, Yu & Qin, 2018 ("Truth Inference on Sparse
Crowdsourcing Data with Local Differential Privacy"): ``truth_plain`` (no privacy), ``truth_lp``
(§IV-A), ``truth_rr`` (§IV-B), ``truth_mf`` (§V) and ``truth_two_layer`` (the 2-Layer baseline of
Li et al., KDD 2018, with NULL as an extra answer, §VI-A).

Every protocol runs one round: the curator asks every worker (MF also broadcasts the task-profile
matrix V), each worker perturbs its whole answer vector, NULL cells included, and the curator
runs Algorithm 1 on what it received (NULL reports count as "not answered"). The headline metric
is the MAE change MAE_P - MAE_O (§VI-A), where MAE_O is Algorithm 1 on the original answers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols import rng as rngm
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
from ldpsim.protocols.metrics import Metric
from ldpsim.protocols.truth import mechanisms as tm
from ldpsim.protocols.truth import mf
from ldpsim.protocols.truth.data import DATA_TYPE
from ldpsim.protocols.truth.inference import MAX_ITER, TOL, infer_truth, mae
from ldpsim.protocols.truth.sparse import SparseAnswers, answers_of_codes

EPSILON = ParamSpec("epsilon", "float", default=1.0, low=0, low_open=True, high=1000,
                    help="privacy budget ε per cell (ε-cell LDP, Definition II.1)")
#: Cells per internal chunk of ``respond`` (bounds temporaries; does not change any report).
CELLS = 1 << 18
INFERENCE = {
    "tol": ParamSpec("tol", "float", default=TOL, low=0, low_open=True,
                     help="Algorithm 1 stops when no truth moves by tol or more"),
    "max_iter": ParamSpec("max_iter", "int", default=MAX_ITER, low=1, high=100000,
                          help="Algorithm 1 iteration cap"),
}


def _resolve_fill_value(out: dict, public: dict) -> None:
    """The constant NULL replacement: (L-1)/2 by default, else it must lie inside Γ (Eq. 6)."""
    top = int(public["levels"]) - 1
    if out["fill_value"] is None:
        out["fill_value"] = top / 2.0
    elif not 0 <= out["fill_value"] <= top:
        raise ParamError(f"[params] fill_value: got {out['fill_value']}; allowed: a number "
                         f"in [0, {top}] (inside Γ = 0..{top})")


class TruthCurator(Curator):
    """One round: ask every worker, collect the reports, run Algorithm 1 in ``finish``."""

    def __init__(self, protocol: _TruthProtocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.tasks = int(self.public["tasks"])
        self.levels = int(self.public["levels"])
        self.answers: np.ndarray | SparseAnswers | None = None
        self.broadcast: Any = None

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 0:
            return None
        self.broadcast = self.protocol.broadcast(self.params, self.public, self.key)
        schema, bits = self.protocol.schema(self.params, self.public)
        return RoundPlan(rnd, self.agents, None, self.broadcast, schema, report_bits=bits)

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        self.answers = self.protocol.answers(reports, self.broadcast, self.params, self.public)

    def finish(self) -> dict[str, Any]:
        x = self.answers if self.answers is not None else np.full((0, self.tasks), np.nan)
        res = infer_truth(x, self.params["tol"], self.params["max_iter"])
        if isinstance(x, SparseAnswers):
            workers, null = x.shape[0], x.null_fraction
        else:
            workers, null = len(x), float(np.isnan(x).mean()) if x.size else 1.0
        return {"mu_hat": res.mu.tolist(), "iterations": int(res.iterations),
                "converged": bool(res.converged), "workers": int(workers),
                "null_fraction": null}


class _TruthProtocol(Protocol):
    family = "truth inference (Sun et al., 2018)"
    data_type = DATA_TYPE
    metrics = (
        Metric("mae", "MAE of the inferred truths", low=0.0, better="lower",
               about="Eq. 3: the mean absolute error of the inferred task values, over the "
                     "tasks with ground truth, on the answers' scale"),
        Metric("mae_change", "MAE change (private − original)", better="lower",
               about="§VI-A: MAE_P − MAE_O, the error the privacy adds to the same inference "
                     "on the original answers (0: none; below 0: the noise helped)"),
        Metric("mae_original", "MAE on the original answers", low=0.0, better="lower",
               about="MAE_O: the same inference on the unperturbed answers (the non-private "
                     "reference, one value per data set)"),
        Metric("mae_vs_original", "mean |private − original| estimate", low=0.0,
               better="lower", about="the mean absolute difference of μ̂_P and μ̂_O over all "
                                     "tasks"),
        Metric("corr", "correlation with the truth", low=-1.0, high=1.0, better="higher",
               about="Pearson correlation of μ̂_P with the ground truth over tasks that have "
                     "it: whether the estimate carries task-specific signal"))
    #: Figs. 2-5 show the MAE change MAE_P - MAE_O (§VI-A)
    figure_metrics = ("mae_change",)
    params: dict[str, ParamSpec] = dict(INFERENCE)

    # -- curator side ------------------------------------------------------------------------
    curator_cls = TruthCurator

    def broadcast(self, params: dict[str, Any], public: dict[str, Any], key: int) -> Any:
        """The round's broadcast (None; MF sends V)."""
        return None

    def report_numbers(self, bound: Bound) -> int | None:
        """Numbers of one worker's report (its schema's length: a cell per task, or MF's d)."""
        return self.schema(bound.params, bound.public)[0].length

    def curator_agent_bytes(self, bound: Bound) -> int:
        """A worker's row of the answer matrix Algorithm 1 iterates over (``TruthCurator.
        answers``): one float64 a task (MF's curator rebuilds it from the d factors)."""
        return 8 * int(bound.public["tasks"])

    def schema(self, params: dict[str, Any], public: dict[str, Any]) -> tuple[ReportSchema,
                                                                            float]:
        """Report schema and information-theoretic bits per report: integer codes 0..L."""
        n, levels = int(public["tasks"]), int(public["levels"])
        return ReportSchema("int", n, 0, levels), n * math.log2(levels + 1)

    def decode(self, reports: np.ndarray, broadcast: Any, params: dict[str, Any],
               public: dict[str, Any]) -> np.ndarray:
        """Reports to the answer matrix Algorithm 1 runs on (float, NaN = NULL)."""
        return tm.from_codes(reports, int(public["levels"]))

    def answers(self, reports: np.ndarray, broadcast: Any, params: dict[str, Any],
                public: dict[str, Any]) -> np.ndarray | SparseAnswers:
        """``decode``'s matrix as Algorithm 1 reads it: integer reports with few answers as
        their answered cells only (``sparse.answers_of_codes``; the same result)."""
        return answers_of_codes(reports, int(public["levels"]))

    # -- agent side ------------------------------------------------------------------------
    def respond(self, block: Block) -> np.ndarray:
        """Perturb each worker's whole answer vector (NULL cells included), in row chunks of
        about ``CELLS`` cells so the temporaries stay in cache; each row depends only on its
        own data and its agent's coins, so chunking (and batching) does not change any row."""
        block = replace(block, rows=np.asarray(block.rows, dtype=np.float64),
                        agents=np.asarray(block.agents, dtype=np.int64))
        step = max(1, CELLS // max(1, block.rows.shape[1]))
        parts = [self._respond_block(block.take(slice(s, s + step)))
                 for s in range(0, len(block), step)]
        return np.concatenate(parts) if parts else self._respond_block(block)

    def _respond_block(self, block: Block) -> np.ndarray:
        """The randomizer on one chunk of rows."""
        raise NotImplementedError

    # -- orchestrator side -------------------------------------------------------------------
    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        """``mae`` (Eq. 3, over tasks with ground truth), ``mae_change`` = MAE_P - MAE_O (§VI-A).

        Also ``mae_original`` (MAE_O), ``mae_vs_original`` (mean |μ̂_P - μ̂_O| over all tasks)
        and ``corr`` (Pearson correlation of μ̂_P with the truth over tasks with ground truth:
        whether the estimate carries task-specific signal, not only a level).
        """
        est = np.asarray(output["mu_hat"], dtype=np.float64)
        mu = np.asarray(truth["mu"], dtype=np.float64)
        value = mae(est, mu)
        sel = np.isfinite(mu)
        if sel.sum() > 1 and np.std(est[sel]) > 0 and np.std(mu[sel]) > 0:
            corr = ordered.pearson(est[sel], mu[sel])
        else:
            corr = float("nan")
        orig = np.asarray(truth["mu_hat_original"], dtype=np.float64)
        return {"mae": value, "mae_change": value - float(truth["mae_original"]),
                "mae_original": float(truth["mae_original"]),
                "mae_vs_original": float(np.mean(np.abs(est - orig))), "corr": corr}

    # -- audit ---------------------------------------------------------------------------------
    def audit_pair(self, params: dict[str, Any]) -> tuple[Any, Any]:
        """The two values of task 0 the audit tries to tell apart ("null", an answer x, or
        "top" = L-1). For randomized response every pair is equally hard; NULL vs an answer
        is the participation secret the paper sets out to protect."""
        return ("null", 0)

    def audit_spec(self, bound: Bound) -> AuditSpec:
        """Candidate rows: task 0 is NULL (row 0) or answer x (row 1 + x); tasks 1..5 are
        answered with L // 2 in every candidate. Neighbouring rows differ in task 0 only
        (Definition II.1); ``audit_pair`` picks the pair hardest to hide."""
        n, levels = int(bound.public["tasks"]), int(bound.public["levels"])
        base = np.full(n, np.nan)
        base[1:min(n, 6)] = levels // 2
        values = np.tile(base, (levels + 1, 1))
        values[1:, 0] = np.arange(levels)

        def row(v: Any) -> int:
            return 0 if v == "null" else levels if v == "top" else 1 + int(v)

        a, b = self.audit_pair(bound.params)
        return AuditSpec(values, np.full(levels + 1, 1.0 / (levels + 1)), (row(a), row(b)),
                         notes=f"task 0 NULL or 0..{levels - 1}; pair ({a}, {b})")


class TruthPlain(_TruthProtocol):
    """No privacy: workers send their answer vectors as they are (codes, L = NULL).

    Its ``mae_change`` is exactly 0: the curator runs the same Algorithm 1 on the same answers.
    """

    name = "truth_plain"
    summary = "no privacy: Algorithm 1 on the original answers (MAE_O reference)"

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        return Rounds.none()

    def _respond_block(self, block: Block) -> np.ndarray:
        return tm.to_codes(block.rows, int(block.public["levels"]))

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        codes = tm.to_codes(block.rows, int(block.public["levels"]))
        same = (np.asarray(reports) == codes).all(axis=1)
        return np.where(same, 0.0, -np.inf)


class TruthLP(_TruthProtocol):
    """LP (§IV-A): NULL replaced by v ∈ Γ (Eq. 6), then Lap(|Γ|/ε) on every cell (Eq. 7).

    ε-cell LDP by Theorem 1 for both a constant and a random v. ``null_fill`` "uniform" draws v
    uniformly from Γ (the paper's experiments, E[v] = (L-1)/2); "constant" uses ``fill_value``
    (default (L-1)/2).
    """

    name = "truth_lp"
    summary = "Laplace perturbation of every cell, NULL replaced by a value of Γ (Eq. 6-7)"
    params = {"epsilon": EPSILON,
              "null_fill": ParamSpec("null_fill", "str", default="uniform",
                                     choices=("uniform", "constant"),
                                     help="NULL replacement g of Eq. (6)"),
              "fill_value": ParamSpec("fill_value", "float",
                                      help="constant NULL replacement (default (L-1)/2)"),
              **INFERENCE}

    def audit_pair(self, params):
        """The extreme answers 0 and L-1: NULL becomes a value inside Γ, so it is no harder."""
        return (0, "top")

    def resolve(self, params, public):
        out = super().resolve(params, public)
        _resolve_fill_value(out, public)
        return out

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: every cell through Eq. (7)'s ``Laplace(ε, |Γ|)`` (ε-cell LDP)."""
        return Rounds("local", (Round(tm.lp_mechanism(int(public["levels"]),
                                                      params["epsilon"])),),
                      notes="ε-cell LDP per cell (Theorem 1); the n cells of one worker "
                            "compose to nε", unit="cell")

    def schema(self, params, public):
        n = int(public["tasks"])
        return ReportSchema("float", n), 64.0 * n

    def decode(self, reports, broadcast, params, public):
        return np.asarray(reports, dtype=np.float64)

    def answers(self, reports, broadcast, params, public):
        """Every cell is reported (Eq. 7): the dense matrix."""
        return self.decode(reports, broadcast, params, public)

    def _respond_block(self, block: Block) -> np.ndarray:
        n, levels = int(block.public["tasks"]), int(block.public["levels"])
        u_fill = block.uniforms(n, 0)
        # Eq. (6)-(7): the NULL fill, then the bound exact discrete mechanism (``lp_perturb``)
        filled = tm.null_fill(block.rows, u_fill, levels, block.params["null_fill"],
                              block.params["fill_value"])
        return block.mechanism.perturb(filled, block.words())

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        p = block.params
        return tm.lp_log_likelihood_of(block.mechanism, reports, block.rows,
                                       int(block.public["levels"]), p["null_fill"],
                                       p["fill_value"])

    def laplace_release(self, block: Block):
        """Each answered cell plus Lap(Δ/ε) on the exact mechanism's grid (NULL cells: a random
        fill, left out as NaN)."""
        values = np.asarray(block.rows, dtype=np.float64)
        return block.mechanism.release_spec(values)


class TruthRR(_TruthProtocol):
    """RR with NULL as an extra answer (§IV-B, Eq. 8): generalised randomized response over the
    |Γ| + 1 symbols Γ ∪ {NULL}; a NULL may come out as an answer and an answer as NULL."""

    name = "truth_rr"
    summary = "randomized response over Γ ∪ {NULL} on every cell (Eq. 8)"
    params = {"epsilon": EPSILON, **INFERENCE}

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: every cell through Eq. (8)'s GRR over Γ ∪ {NULL} (ε-cell LDP)."""
        return Rounds("local", (Round(tm.rr(int(public["levels"]), params["epsilon"])),),
                      notes="ε-cell LDP per cell over Γ ∪ {NULL}; the n cells of one "
                            "worker compose to nε", unit="cell")

    def _respond_block(self, block: Block) -> np.ndarray:
        n, levels = int(block.public["tasks"]), int(block.public["levels"])
        u = block.uniforms(n)
        # Eq. (8) on every cell (``rr_perturb``)
        return block.mechanism.perturb(tm.to_codes(block.rows, levels), u, others="cyclic")

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        levels = int(block.public["levels"])
        codes = tm.to_codes(block.rows, levels)
        return block.mechanism.log_likelihood(np.asarray(reports, dtype=np.int64),
                                              codes).sum(axis=-1)


class TruthTwoLayer(_TruthProtocol):
    """2-Layer baseline (Li et al., KDD 2018) with NULL as a unique answer, as Sun et al. (2018,
    §VI) run it: each worker draws its own budget ε_i ~ Uniform[ε(1-spread), ε(1+spread)] (mean ε)
    and applies Eq. (8) with ε_i to every cell. The curator never learns ε_i; Algorithm 1's
    qualities down-weight the workers who drew small budgets.

    The guarantee claimed is the worst case ε(1 + spread) (see ``two_layer_max_epsilon``);
    the paper's nominal ε is the mean.
    """

    name = "truth_two_layer"
    summary = "2-Layer: per-worker ε_i ~ U[ε(1-s), ε(1+s)], then RR over Γ ∪ {NULL}"
    params = {"epsilon": EPSILON,
              "spread": ParamSpec("spread", "float", default=1.0, low=0, high=1,
                                  help="ε_i ~ Uniform[ε(1-spread), ε(1+spread)]"),
              **INFERENCE}

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: every cell through the 2-Layer mechanism (worst case ε(1 + spread))."""
        return Rounds("local", (Round(tm.TwoLayer(int(public["levels"]), params["epsilon"],
                                                  params["spread"])),),
                      notes=f"worst-case ε-cell LDP; nominal (mean) ε = "
                            f"{params['epsilon']:g}", unit="cell")

    def _respond_block(self, block: Block) -> np.ndarray:
        n, levels = int(block.public["tasks"]), int(block.public["levels"])
        u = block.uniforms(n, 1)
        return block.mechanism.perturb(tm.to_codes(block.rows, levels),
                                       block.uniforms(1, 0)[:, 0], u)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        levels = int(block.public["levels"])
        return block.mechanism.log_likelihood(reports, tm.to_codes(block.rows, levels))


class TruthMF(_TruthProtocol):
    """MF perturbation (§V, Algorithm 2): the curator broadcasts V (d × n, column 1-norms <= 1);
    each worker solves Eq. (9)-(10) in closed form, its noisy right-hand side V_T a_T - η
    released first by the exact discrete Laplace (``mf.release_profiles``), and sends u_i V
    (``send`` = "uv", as the paper) or only u_i (``send`` = "u": d numbers instead of n; the
    curator computes u_i V itself, which is post-processing, so the privacy is the same).

    See ``protocols.truth.mf`` for the ridge term λ, the solver, the noise and the NULL modes.
    """

    name = "truth_mf"
    summary = "objective-perturbed matrix factorisation with a curator-drawn V (Eq. 9-10)"
    params = {"epsilon": EPSILON,
              "d": ParamSpec("d", "int", default=10, low=1, high=1000,
                             help="factorisation parameter (rows of V)"),
              "ridge": ParamSpec("ridge", "float", default=1.0, low=0, low_open=True,
                                 help="λ of the added λ||u||² (keeps the minimiser unique)"),
              "profiles": ParamSpec("profiles", "str", default="uniform",
                                    choices=("uniform", "gaussian"),
                                    help="distribution of V's entries before normalisation"),
              "null_mode": ParamSpec("null_mode", "str", default="skip",
                                     choices=("skip", "uniform", "constant"),
                                     help="skip NULL cells (Eq. 9) or fill them as LP does"),
              "fill_value": ParamSpec("fill_value", "float",
                                      help='NULL value for null_mode = "constant" '
                                           "(default (L-1)/2)"),
              "send": ParamSpec("send", "str", default="uv", choices=("uv", "u"),
                                help="report u_i V (n numbers, the paper) or u_i (d numbers)"),
              **INFERENCE}

    def resolve(self, params, public):
        out = super().resolve(params, public)
        n = int(public["tasks"])
        if out["d"] > n:
            raise ParamError(f"[params] d: got {out['d']}; allowed: an integer in [1, {n}] "
                             f"(at most the number of tasks)")
        _resolve_fill_value(out, public)
        return out

    def audit_pair(self, params):
        """NULL vs L-1 when NULL cells are skipped (the case Theorem 4 does not cover), else
        the extreme answers 0 vs L-1."""
        return ("null", "top") if params["null_mode"] == "skip" else (0, "top")

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: the objective's noise by ``Laplace(ε, |Γ|)`` over the d components of
        V_T a_T (``mf.mf_mechanism``; ε-cell LDP, Theorem 4)."""
        notes = "ε-cell LDP (Theorem 4) for a change of an answered value"
        if params["null_mode"] == "skip":
            notes += ("; a NULL <-> answer change is not covered (Theorem 4's proof assumes the "
                      'same answered set); null_mode = "uniform"/"constant" covers it')
        else:
            notes += " or of a NULL cell (NULLs are filled before the solve)"
        lap = mf.mf_mechanism(int(public["levels"]), params["epsilon"], params["d"])
        return Rounds("local", (Round(lap),), mechanism="objective_perturbation_laplace",
                      notes=notes, proven=params["null_mode"] != "skip", unit="cell")

    def broadcast(self, params, public, key):
        gen = rngm.party_generator(rngm.stream_key(key, "task-profiles"))
        return mf.task_profiles(gen, params["d"], int(public["tasks"]), params["profiles"])

    def schema(self, params, public):
        k = int(public["tasks"]) if params["send"] == "uv" else params["d"]
        return ReportSchema("float", k), 64.0 * k

    def decode(self, reports, broadcast, params, public):
        r = np.asarray(reports, dtype=np.float64)
        return r if params["send"] == "uv" else mf.reconstruct(r, broadcast)

    def answers(self, reports, broadcast, params, public):
        """Every cell of u_i V is a number: the dense matrix."""
        return self.decode(reports, broadcast, params, public)

    def _profiles(self, broadcast, params, public) -> np.ndarray:
        v = np.asarray(broadcast, dtype=np.float64)
        if v.shape != (params["d"], int(public["tasks"])):
            raise ValueError(f"task profiles must be a {params['d']} x {public['tasks']} "
                             f"matrix, got shape {v.shape}")
        return mf.clip_profiles(v)

    def _filled(self, block: Block) -> np.ndarray:
        params = block.params
        if params["null_mode"] == "skip":
            return np.asarray(block.rows, dtype=np.float64)
        n, levels = int(block.public["tasks"]), int(block.public["levels"])
        u = block.uniforms(n, params["d"])
        return tm.null_fill(block.rows, u, levels, params["null_mode"], params["fill_value"])

    def _respond_block(self, block: Block) -> np.ndarray:
        v = self._profiles(block.broadcast, block.params, block.public)
        lap = block.mechanism
        words = block.words()
        a = self._filled(block)
        u = mf.release_profiles(a, v, lambda r, c: lap.perturb(c, words.take(r)),
                                block.params["ridge"])
        return mf.reconstruct(u, v) if block.params["send"] == "uv" else u

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Exact for null_mode "skip" and "constant"; None for "uniform" (a mixture over the
        L^(#NULL) possible fills, no closed form)."""
        rows = block.rows
        if block.params["null_mode"] == "uniform":
            return None
        v = self._profiles(block.broadcast, block.params, block.public)
        r = np.asarray(reports, dtype=np.float64)
        if block.params["send"] == "uv":
            u, ok = mf.profiles_from_reports(r, v)
        else:
            u, ok = r, np.ones(len(r), dtype=bool)
        rows = np.asarray(rows, dtype=np.float64)
        if block.params["null_mode"] == "constant":
            rows = np.where(np.isnan(rows), block.params["fill_value"], rows)
        ll = mf.log_likelihood_of(block.mechanism, u, rows, v, block.params["ridge"],
                                  r if block.params["send"] == "uv" else None)
        return np.where(ok, ll, -np.inf)
