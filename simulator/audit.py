"""What a semi-honest coalition learns: attacks on the adversary view and an empirical ε audit.

The coalition is the curator (optionally) plus colluding agents, up to n - 1 of them. Its view
(``simulator.collusion``) is exactly: what the curator received (the queries it sent, every
report, the broadcasts), the colluders' disclosed data and coins, and the public output. When the
curator is *not* in the coalition (a trusted curator, the central-DP model) the view shrinks to
the broadcasts, the colluders' own data and the public output. Every attack below is a function of
that view and of public protocol facts only; the harness, which knows the truth, scores them.

Attacks
-------
* **single-report inference** (``bayes_guess``): the Bayes-optimal (maximum a posteriori) guess
  of an honest target's private row among the protocol's candidate rows (``AuditSpec``), from
  the target's own reports: argmax_v log prior(v) + Σ_rounds log P(report | v). Needs the
  curator in the coalition and a closed-form ``log_likelihood``.
* **differencing** (``differencing_guess``): subtract the known agents' contribution from the
  released aggregate and match the residual to a candidate's contribution. Exact recovery on a
  non-private aggregate with n - 1 colluders; bounded under LDP or central DP.
* **empirical ε audit** (``epsilon_audit``): the target holds one of two neighbouring rows; the
  protocol is run ``trials`` times with each (inproc, same seeds for both rows); a
  distinguishing statistic is computed from each view: the log-likelihood ratio of the target's
  reports (Neyman-Pearson optimal) when the curator colludes and the likelihood is known, else a
  linear discriminant learned on the training half over the target's reports or the
  differencing residual. The rejection region is chosen on the training half; on the held-out
  half, ε̂ = ln(TPR / FPR) and its lower confidence bound
  ε_lower = ln(CP_lower(TPR) / CP_upper(FPR)) with Clopper-Pearson bounds at level α/2 each
  (overall 1 - α). A correct mechanism gives ε_lower <= ε with probability >= 1 - α; the claim
  is *flagged* (refuted) when ε_lower > ε_claimed.
* **floating-point attack** (``float_check``, ``simulator.float_attack``): for protocols whose
  reports are Laplace releases (``Protocol.laplace_release``), does each neighbouring row
  reproduce the target's reports *exactly* from some uniform on the generator's grid? A report
  the true row reproduces and the other cannot rules the other out -- impossible under the other
  row, so the event's TPR over FPR (Clopper-Pearson, as above) bounds ε from below with no
  statistic to learn. Textbook float Laplace fails it at any claimed ε; snapped releases pass.

About 550 lines, over the house's ~500: the attacks and the ε audit share the view, the
candidate rows and one likelihood path (``log_likelihoods``, also what ``simulator.leakage``
calls), which keeps an attack and its audit from ever scoring the same view differently.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.protocols import get_data_kind, get_protocol
from ldpsim.protocols.base import AuditSpec, Protocol
from ldpsim.protocols.rng import party_generator, stream_key
from ldpsim.simulator.collusion import colluder_mask
from ldpsim.simulator.float_attack import reproducible
from ldpsim.simulator.inproc import run_inproc
from ldpsim.simulator.runconfig import RunConfig
from ldpsim.simulator.seeding import run_keys, run_seed
from ldpsim.simulator.session import Limits
from scipy.stats import beta

ALPHA = 0.05  # 95% confidence for epsilon_lower


# ------------------------------------------------------------------------------- the view


def coalition_view(view: dict[str, Any], curator_colludes: bool,
                   colluder_rows: dict[int, np.ndarray]) -> dict[str, Any]:
    """Restrict a recorded curator view to what the coalition sees.

    With the curator in the coalition, that is the whole recorded view (its disclosures come
    over the wire). Without it, the colluding agents see only the broadcasts, their own data
    and the public output.
    """
    if curator_colludes:
        return view
    return {"rounds": [{"round": r["round"], "broadcast": r["broadcast"]}
                       for r in view["rounds"]],
            "disclosures": {a: {"data": row} for a, row in colluder_rows.items()},
            "output": view["output"], "public": view["public"], "params": view["params"]}


def target_reports(view: dict[str, Any], target: int) -> list[tuple[int, Any, Any, np.ndarray]]:
    """(round, query row or None, broadcast, report row) of each round the target reported in."""
    out = []
    for r in view.get("rounds", []):
        ra = r.get("report_agents")
        if ra is None or len(ra) == 0:
            continue
        ra = np.asarray(ra)
        i = int(np.searchsorted(ra, target))
        if i >= len(ra) or ra[i] != target:
            continue
        report = np.asarray(r["reports"])[i:i + 1]
        q = r.get("queries")
        if q is not None:
            asked = np.asarray(r["agents"])
            j = int(np.searchsorted(asked, target))
            q = np.asarray(q)[j:j + 1]
        out.append((int(r["round"]), q, r.get("broadcast"), report))
    return out


def log_likelihoods(protocol: Protocol, view: dict[str, Any], targets: np.ndarray,
                    rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Σ over the rounds of log P(target's report | row) for each target (sorted agent ids)
    and each of its candidate rows, ``rows[t, c]``: ``(ll, seen)`` with ``ll`` of shape
    ``(targets, candidates)`` and ``seen`` whether the target reported at all; None when the
    protocol has no closed-form likelihood. One likelihood call per round for all targets."""
    bound = protocol.bind(view["params"], view["public"], resolved=True)
    t, c = rows.shape[:2]
    total, seen = np.zeros((t, c)), np.zeros(t, dtype=bool)
    for r in view.get("rounds", []):
        ra = r.get("report_agents")
        if ra is None or len(ra) == 0 or r.get("reports") is None:
            continue
        ra = np.asarray(ra)
        i = np.minimum(np.searchsorted(ra, targets), len(ra) - 1)
        hit = ra[i] == targets
        if not hit.any():
            continue
        idx = np.flatnonzero(hit)
        q = r.get("queries")
        if q is not None:
            asked = np.asarray(r["agents"])
            q = np.repeat(np.asarray(q)[np.searchsorted(asked, targets[hit])], c, axis=0)
        block = bound.block(int(r["round"]), rows[idx].reshape(len(idx) * c, *rows.shape[2:]),
                            queries=q, broadcast=r.get("broadcast"))
        reps = np.repeat(np.asarray(r["reports"])[i[hit]], c, axis=0)
        ll = protocol.log_likelihood(block, reps)
        if ll is None:
            return None
        total[idx] += np.asarray(ll, dtype=float).reshape(len(idx), c)
        seen[idx] = True
    return total, seen


def _log_likelihoods(protocol: Protocol, view: dict[str, Any], target: int,
                     values: np.ndarray) -> np.ndarray | None:
    """Σ over the target's reports of log P(report | row) for each candidate row."""
    got = log_likelihoods(protocol, view, np.array([target]), values[None])
    return got[0][0] if got is not None and got[1][0] else None


# ----------------------------------------------------------------------------- the attacks


def bayes_guess(view: dict[str, Any], target: int, protocol: Protocol,
                spec: AuditSpec) -> int | None:
    """MAP guess (index into ``spec.values``) of the target's row from its reports, or None."""
    ll = _log_likelihoods(protocol, view, target, spec.values)
    if ll is None:
        return None
    with np.errstate(divide="ignore"):
        post = np.log(spec.prior) + ll
    return int(np.argmax(post))


def residual(protocol: Protocol, view: dict[str, Any], known: np.ndarray) -> np.ndarray | None:
    """The released aggregate minus the contribution of the ``known`` rows (the differencing
    residual), or None when the protocol releases no additive aggregate."""
    params, public = view["params"], view["public"]
    rel = protocol.released_aggregate(view["output"], params, public)
    if rel is None:
        return None
    if len(known):
        base = protocol.true_aggregate(known, params, public)
        if base is None:
            return None
        return np.asarray(rel, dtype=float) - base
    return np.asarray(rel, dtype=float)


def contributions(protocol: Protocol, view: dict[str, Any],
                  rows: np.ndarray) -> np.ndarray | None:
    """Each row's own contribution to the aggregate (one per row), or None."""
    parts = [protocol.true_aggregate(rows[v:v + 1], view["params"], view["public"])
             for v in range(len(rows))]
    if any(p is None for p in parts):
        return None
    return np.stack(parts)


def _residual(view: dict[str, Any], target: int, protocol: Protocol) -> np.ndarray | None:
    """Released aggregate minus the known agents' contribution (the differencing residual)."""
    known = [np.asarray(d["data"]) for a, d in sorted(view.get("disclosures", {}).items())
             if int(a) != target]
    return residual(protocol, view, np.stack(known) if known else np.empty(0))


def differencing_guess(view: dict[str, Any], target: int, protocol: Protocol,
                       spec: AuditSpec) -> int | None:
    """Candidate whose contribution is closest to the differencing residual, or None."""
    resid = _residual(view, target, protocol)
    if resid is None:
        return None
    contrib = contributions(protocol, view, spec.values)
    if contrib is None:
        return None
    ok = np.isfinite(resid)
    if not ok.any():
        return None
    d = ((resid[ok] - contrib[:, ok]) ** 2).sum(axis=1)
    return int(np.argmin(d))


def llr_statistic(view: dict[str, Any], target: int, protocol: Protocol,
                  spec: AuditSpec) -> float | None:
    """log P(view | row = pair[1]) - log P(view | row = pair[0]) from the target's reports."""
    ll = _log_likelihoods(protocol, view, target, spec.values[list(spec.pair)])
    if ll is None:
        return None
    with np.errstate(invalid="ignore"):
        s = ll[1] - ll[0]
    return 0.0 if math.isnan(s) else float(s)


def features(view: dict[str, Any], target: int, protocol: Protocol) -> np.ndarray:
    """Numeric features for the learned test: the target's reports, else the residual."""
    reps = target_reports(view, target)
    if reps:
        return np.concatenate([np.asarray(r[3], dtype=float).ravel() for r in reps])
    resid = _residual(view, target, protocol)
    if resid is not None:
        return np.nan_to_num(resid, nan=0.0)
    return np.array([0.0])


# ------------------------------------------------------------------------ the statistics


def float_check(view: dict[str, Any], target: int, protocol: Protocol,
                rows: np.ndarray) -> np.ndarray | None:
    """Per candidate row: do all the target's reports reproduce exactly from it (the
    floating-point attack)? None when the protocol's reports are not Laplace releases."""
    reps = target_reports(view, target)
    if not reps:
        return None
    n = len(rows)
    ok = np.ones(n, dtype=bool)
    bound = protocol.bind(view["params"], view["public"], resolved=True)
    for rnd, q, bcast, rep in reps:  # every candidate row at once, as in _log_likelihoods
        rel = protocol.laplace_release(bound.block(
            rnd, rows, queries=None if q is None else np.repeat(q, n, axis=0), broadcast=bcast))
        if rel is None:
            return None
        values, scales, snapped = rel
        same = reproducible(np.repeat(rep, n, axis=0), values, scales, snapped)
        ok &= same.reshape(n, -1).all(axis=1)
    return ok


def float_audit(f0: np.ndarray, f1: np.ndarray, alpha: float = ALPHA) -> dict[str, float]:
    """ε lower bound of the floating-point attack from its checks under each true row
    (``f0``: trials with row 0, ``f1``: with row 1; columns: reproduces row 0, row 1)."""
    n = len(f0)
    out = {"float_epsilon_lower": 0.0, "float_ruled_out": 0.0,
           "float_own_failures": float((~f0[:, 0]).sum() + (~f1[:, 1]).sum()) / (2 * n)}
    for tp, fp in ((int((~f0[:, 1]).sum()), int((~f1[:, 1]).sum())),   # "row 1 ruled out"
                   (int((~f1[:, 0]).sum()), int((~f0[:, 0]).sum()))):  # "row 0 ruled out"
        out["float_epsilon_lower"] = max(out["float_epsilon_lower"],
                                         _eps_lower(tp, fp, n, alpha))
        out["float_ruled_out"] = max(out["float_ruled_out"], tp / n)
    return out


def cp_lower(k: int, n: int, a: float) -> float:
    """Clopper-Pearson lower bound (one-sided level a) on a binomial proportion k / n."""
    return 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))


def cp_upper(k: int, n: int, a: float) -> float:
    """Clopper-Pearson upper bound (one-sided level a) on a binomial proportion k / n."""
    return 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))


def _eps_lower(tp: int, fp: int, n: int, alpha: float) -> float:
    lo, hi = cp_lower(tp, n, alpha / 2), cp_upper(fp, n, alpha / 2)
    return max(0.0, math.log(lo / hi)) if lo > 0 else 0.0


def _counts(s: np.ndarray, tau: np.ndarray, direction: int) -> np.ndarray:
    """How many of ``s`` fall in the region {direction * s >= direction * tau}, per tau."""
    srt = np.sort(direction * s)
    return len(s) - np.searchsorted(srt, direction * tau, side="left")


def choose_region(s0: np.ndarray, s1: np.ndarray,
                  alpha: float = ALPHA) -> tuple[int, float, bool]:
    """The rejection region (direction, threshold, swapped) maximising the ε lower bound.

    Regions are {d * s >= d * tau}; "swapped" tests the ratio P0(E) / P1(E) instead of
    P1(E) / P0(E) (ε bounds both). Chosen on training data only.
    """
    both = np.concatenate([s0, s1])
    cands = np.unique(both)
    if len(cands) > 400:
        cands = np.unique(np.quantile(both, np.linspace(0, 1, 401)))
    n0, n1 = len(s0), len(s1)
    best = (-1.0, 1, float(cands[0]), False)
    for d in (1, -1):
        c0, c1 = _counts(s0, cands, d), _counts(s1, cands, d)
        for i, tau in enumerate(cands):
            for swap, (tp, n_tp, fp, n_fp) in ((False, (c1[i], n1, c0[i], n0)),
                                               (True, (c0[i], n0, c1[i], n1))):
                lo, hi = cp_lower(int(tp), n_tp, alpha / 2), cp_upper(int(fp), n_fp, alpha / 2)
                score = math.log(lo / hi) if lo > 0 else -math.inf
                if score > best[0]:
                    best = (score, d, float(tau), swap)
    return best[1], best[2], best[3]


def epsilon_audit(s0: np.ndarray, s1: np.ndarray,
                  alpha: float = ALPHA) -> dict[str, float]:
    """ε̂ and its lower confidence bound from statistics under the two neighbouring rows.

    The first half of each sample chooses the region, the second half estimates it; both
    halves must have the same length. Returns epsilon_estimate, epsilon_lower, tpr, fpr.
    """
    s0, s1 = np.asarray(s0, dtype=float), np.asarray(s1, dtype=float)
    h = min(len(s0), len(s1)) // 2
    d, tau, swap = choose_region(s0[:h], s1[:h], alpha)
    test0, test1 = s0[h:2 * h], s1[h:2 * h]
    in0 = int(_counts(test0, np.array([tau]), d)[0])
    in1 = int(_counts(test1, np.array([tau]), d)[0])
    tp, fp = (in0, in1) if swap else (in1, in0)
    tpr, fpr = tp / h, fp / h
    if tpr == 0:
        est = 0.0
    elif fpr == 0:
        est = math.inf
    else:
        est = max(0.0, math.log(tpr / fpr))
    return {"epsilon_estimate": est, "epsilon_lower": _eps_lower(tp, fp, h, alpha),
            "tpr": tpr, "fpr": fpr}


def _linear(train0: np.ndarray, train1: np.ndarray) -> np.ndarray:
    """Weights of a diagonal linear discriminant (difference of means over pooled variance)."""
    mu0, mu1 = train0.mean(axis=0), train1.mean(axis=0)
    var = np.concatenate([train0 - mu0, train1 - mu1]).var(axis=0) + 1e-12
    return (mu1 - mu0) / var


# ------------------------------------------------------------------------------ the harness


@dataclass
class AuditSetting:
    """One audited configuration: a run config (one repetition), the coalition and target."""

    config: dict[str, Any]
    scenario_seed: int
    target: int
    curator_colludes: bool
    colluders: np.ndarray  # ids of the colluding agents (never the target)
    public: dict[str, Any]  # the data set's public facts (the same in every trial)


def make_setting(config: dict[str, Any], scenario_seed: int,
                 target: int | None = None) -> AuditSetting:
    """Fix the coalition once (so the target stays honest in every trial) and pick the target.

    The target is ``target`` or the lowest-numbered honest agent; if the coalition would
    include it (e.g. n - 1 colluders), the target is swapped out of it for another agent.
    """
    data = config["data"]
    kind = get_data_kind(data["kind"])
    keys = run_keys(run_seed(scenario_seed, 0))
    ds = kind.build({k: v for k, v in data.items() if k != "kind"}, keys.data)
    n = ds.n
    run_cfg = RunConfig.of(config)
    curator = run_cfg.curator_colludes
    mask = colluder_mask(n, dict(run_cfg.collusion), keys.collusion)
    if target is None:
        honest = np.flatnonzero(~mask)
        target = int(honest[0]) if len(honest) else 0
    if not 0 <= target < n:
        raise ValueError(f"--target: agent {target} does not exist (n = {n})")
    if mask[target]:
        mask[target] = False
        spare = np.flatnonzero(~mask & (np.arange(n) != target))
        if len(spare) and int(mask.sum()) < n - 1:
            mask[spare[0]] = True
    colluders = np.flatnonzero(mask)
    cfg = dict(config, pools=1, agent_mode="batched",
               collusion={"colluders": colluders.tolist(), "curator": curator}, faults=[])
    return AuditSetting(cfg, scenario_seed, int(target), curator, colluders, ds.public)


class _Trials:
    """Runs one setting repeatedly on the inproc backend with the target's row overridden."""

    def __init__(self, setting: AuditSetting, limits: Limits) -> None:
        self.s = setting
        self.limits = limits
        self.protocol = get_protocol(setting.config["protocol"])
        self.kind = get_data_kind(setting.config["data"]["kind"])

    def view(self, trial: int, row: np.ndarray) -> dict[str, Any]:
        seed = run_seed(self.s.scenario_seed, trial)
        cfg = dict(self.s.config, seed=seed)
        res = run_inproc(cfg, self.limits, record_view=True,
                         override={"agent": self.s.target, "row": row})
        rows = {}
        if not self.s.curator_colludes and len(self.s.colluders):
            data = {k: v for k, v in cfg["data"].items() if k != "kind"}
            ds = self.kind.build(data, run_keys(seed).data)
            for a in self.s.colluders.tolist():
                rows[a] = ds.rows(a, a + 1)[0]
        return coalition_view(res["view"], self.s.curator_colludes, rows)


@dataclass
class PairStats:
    """What the ε audit gathers from a range of trials, both neighbouring rows: the test
    statistic (likelihood ratio) or the learned test's features, and the float checks."""

    s: list[np.ndarray] | None  # [s0, s1]: the likelihood-ratio statistic per trial
    feats: list[np.ndarray] | None  # [f0, f1]: features per trial (no closed-form likelihood)
    floats: list[np.ndarray] | None  # [c0, c1]: (trials, 2) reproduces row 0 / row 1

    @staticmethod
    def join(parts: list[PairStats]) -> PairStats:
        def cat(name):
            got = [getattr(p, name) for p in parts]
            if any(g is None for g in got):
                return None
            return [np.concatenate([g[b] for g in got]) for b in (0, 1)]
        return PairStats(cat("s"), cat("feats"), cat("floats"))


def _full_pair_stats(setting: AuditSetting, limits: Limits, first: int, count: int,
                     spec: AuditSpec, use_llr: bool, use_float: bool,
                     progress: Any = None) -> PairStats:
    """The full path: one inproc run per trial and row."""
    runner = _Trials(setting, limits)
    protocol, target = runner.protocol, setting.target
    pair = spec.values[list(spec.pair)]
    stats: list[list[Any]] = [[], []]
    feats: list[list[np.ndarray]] = [[], []]
    floats: list[list[np.ndarray]] = [[], []]
    for t in range(first, first + count):
        for b in (0, 1):
            view = runner.view(t, pair[b])
            if use_float:
                fc = float_check(view, target, protocol, pair)
                use_float = fc is not None
                if use_float:
                    floats[b].append(fc)
            if use_llr:
                stats[b].append(llr_statistic(view, target, protocol, spec))
            else:
                feats[b].append(features(view, target, protocol))
        if progress is not None:
            progress(1)
    return PairStats([np.array(x, dtype=float) for x in stats] if use_llr else None,
                     None if use_llr else [np.stack(x) for x in feats],
                     [np.stack(x) for x in floats] if use_float and floats[0] else None)


def _full_pair_stats_job(args: tuple) -> PairStats:
    return _full_pair_stats(*args)


def _batch_pair_stats(batch: Any, first: int, count: int, spec: AuditSpec, use_llr: bool,
                      use_float: bool, progress: Any = None) -> PairStats:
    """The batch path: every trial of the range as one block per round (``audit_batch``)."""
    from ldpsim.simulator.audit_batch import BLOCK, llr

    pair = spec.values[list(spec.pair)]
    parts = []
    for s in range(first, first + count, BLOCK):
        m = min(BLOCK, first + count - s)
        stats, feats, floats = [], [], []
        for b in (0, 1):
            view = batch.view(s, np.repeat(pair[b:b + 1], m, axis=0))
            if use_llr:
                stats.append(llr(batch.log_likelihoods(view, pair)))
            else:
                feats.append(view.features())
            if use_float:
                floats.append(batch.float_checks(view, pair))
        parts.append(PairStats(stats or None, feats or None, floats if use_float else None))
        if progress is not None:
            progress(m)
    return PairStats.join(parts)


def _choose_path(setting: AuditSetting, limits: Limits, spec: AuditSpec, path: str
                 ) -> tuple[Any, str, bool, bool]:
    """(batch trials or None, why the full path is used, use_llr, use_float), deciding from
    trial 0 and, for the batch path, checking it against full runs (``audit_batch``)."""
    from ldpsim.simulator.audit_batch import CHECK_TRIALS, BatchTrials

    runner = _Trials(setting, limits)
    protocol, target = runner.protocol, setting.target
    pair = spec.values[list(spec.pair)]
    view = runner.view(0, pair[0])
    use_llr = llr_statistic(view, target, protocol, spec) is not None
    use_float = float_check(view, target, protocol, pair) is not None
    if path == "full":
        return None, "asked for (--path full)", use_llr, use_float
    if not setting.curator_colludes:
        why = "the curator is not in the coalition (the view is the released aggregate)"
    else:
        try:
            bound = protocol.bind(view["params"], view["public"], resolved=True)
            batch = BatchTrials.build(protocol, bound, target, setting.scenario_seed, view)
            full = _full_pair_stats(setting, limits, 0, CHECK_TRIALS, spec, use_llr, use_float)
            fast = _batch_pair_stats(batch, 0, CHECK_TRIALS, spec, use_llr, use_float)
            same = all(_equal(getattr(full, k), getattr(fast, k))
                       for k in ("s", "feats", "floats"))
            why = "" if same else (f"its first {CHECK_TRIALS} trials differ from full runs "
                                   "(the target's rounds depend on the data)")
        except Exception as e:  # a curator or randomizer that cannot run as a batch
            why = f"{type(e).__name__}: {e}"[:200]
        if not why:
            return batch, "", use_llr, use_float
    if path == "batch":
        raise ValueError(f"--path batch: {protocol.name} cannot run as a batch: {why}")
    return None, why, use_llr, use_float


def _equal(a: list[np.ndarray] | None, b: list[np.ndarray] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def _scores(stats: PairStats, trials: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The test statistic under each row, and the test's name."""
    if stats.s is not None:
        return stats.s[0], stats.s[1], "likelihood ratio"
    f0, f1 = stats.feats
    h = trials // 2
    w = _linear(f0[:h], f1[:h])
    return f0 @ w, f1 @ w, "linear discriminant"


def trials_needed(tpr: float, fpr: float, target: float, alpha: float = ALPHA,
                  most: int = 10**9) -> int | None:
    """Trials (both halves) after which the held-out bound would reach ``target`` if the
    region kept the rates ``tpr`` and ``fpr``; None if no count up to ``most`` does."""
    if tpr <= 0 or not target > 0:
        return None

    def reaches(n: int) -> bool:
        h = n // 2
        return _eps_lower(round(tpr * h), round(fpr * h), h, alpha) >= target

    hi = 64
    while not reaches(hi):
        hi *= 2
        if hi > most:
            return None
    lo = hi // 2
    while hi - lo > max(2, hi // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def audit_setting(setting: AuditSetting, trials: int, limits: Limits | None = None,
                  progress: Any = None, path: str = "auto", jobs: int = 1,
                  until_lower: float | None = None,
                  differencing_trials: int = 2000) -> dict[str, Any]:
    """Run every attack and the ε audit on one setting; return one audit record.

    ``path``: "batch" (the target's copies as one block: ``audit_batch``), "full" (one
    protocol run per trial), or "auto" (the batch path where it reproduces the full runs
    exactly). ``jobs``: processes for the full path. ``until_lower``: stop as soon as the
    held-out lower bound reaches it, looking at 1/8, 1/4, 1/2 and all of ``trials``; each look
    spends its own share of α (α/8, α/8, α/4, α/2), so the bound that stops holds at 1 - α
    overall. The single-report inference runs as many trials as the ε audit took; the
    differencing attack, which needs the released aggregate of full runs, at most
    ``differencing_trials`` of them on the batch path.
    """
    if path not in ("auto", "batch", "full"):
        raise ValueError(f"--path: got {path!r}; allowed: 'auto', 'batch', 'full'")
    t0 = time.perf_counter()
    limits = limits or Limits(timeout_s=10)
    runner = _Trials(setting, limits)
    protocol = runner.protocol
    data = setting.config["data"]
    public = setting.public
    params = protocol.resolve(setting.config["params"], public)
    claim = protocol.claim(params, public)
    spec = protocol.audit_spec(params, public)
    if spec is None:
        raise ValueError(f"protocol {protocol.name!r} does not support the audit")
    target = setting.target
    batch, why_full, use_llr, use_float = _choose_path(setting, limits, spec, path)

    def pair_stats(first: int, count: int) -> PairStats:
        if batch is not None:
            return _batch_pair_stats(batch, first, count, spec, use_llr, use_float, progress)
        if jobs <= 1 or count < 2 * jobs:
            return _full_pair_stats(setting, limits, first, count, spec, use_llr, use_float,
                                    progress)
        import multiprocessing as mp

        cuts = np.linspace(first, first + count, jobs + 1).astype(int)
        args = [(setting, limits, int(a), int(b - a), spec, use_llr, use_float)
                for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        with mp.get_context("fork").Pool(jobs) as pool:
            parts = []
            for part in pool.imap(_full_pair_stats_job, args):
                parts.append(part)
                if progress is not None:
                    progress(len(part.s[0]) if part.s is not None else len(part.feats[0]))
        return PairStats.join(parts)

    # 1. the ε audit on the neighbouring pair, common seeds for both rows
    t_eps = time.perf_counter()
    looks = [(trials, ALPHA)]
    if until_lower is not None:
        looks = [(max(20, trials // 8), ALPHA / 8), (max(20, trials // 4), ALPHA / 8),
                 (max(20, trials // 2), ALPHA / 4), (trials, ALPHA / 2)]
    stats, done = None, 0
    for n_look, alpha in looks:
        if n_look <= done:
            continue
        more = pair_stats(done, n_look - done)
        stats = more if stats is None else PairStats.join([stats, more])
        done = n_look
        s0, s1, test = _scores(stats, done)
        eps = epsilon_audit(s0, s1, alpha)
        if until_lower is not None and eps["epsilon_lower"] >= until_lower:
            break
    eps_seconds = time.perf_counter() - t_eps
    used = done
    flt = float_audit(stats.floats[0], stats.floats[1], alpha) if stats.floats is not None \
        else {"float_epsilon_lower": None, "float_ruled_out": None, "float_own_failures": None}

    # 2. single-report inference and differencing: target's row drawn from the prior
    g = party_generator(stream_key(setting.scenario_seed, "audit-prior", target))
    truth = g.choice(len(spec.values), size=used, p=spec.prior)
    bayes_hits = diff_hits = bayes_n = diff_n = 0
    full_views = used
    if batch is not None:
        if use_llr:
            from ldpsim.simulator.audit_batch import bayes_hits as batch_bayes

            bayes_hits, bayes_n = batch_bayes(batch, spec, used, truth)
        full_views = min(used, differencing_trials)
        if progress is not None:
            progress(used - full_views)
    for t in range(full_views):
        view = runner.view(used + t, spec.values[truth[t]])
        if batch is None:
            bg = bayes_guess(view, target, protocol, spec)
            if bg is not None:
                bayes_n += 1
                bayes_hits += int(_same(spec, bg, truth[t]))
        dg = differencing_guess(view, target, protocol, spec)
        if dg is not None:
            diff_n += 1
            diff_hits += int(_same(spec, dg, truth[t]))
        if progress is not None:
            progress(1)
    claimed = claim.epsilon
    target_tight = until_lower if until_lower is not None else (
        0.95 * min(claimed, eps["epsilon_estimate"]) if claimed else None)
    seconds = time.perf_counter() - t0
    return {
        "protocol": protocol.name, "params": params, "data": dict(data), "target": target,
        "claim_model": claim.model, "epsilon_claimed": claimed,
        "per_report_epsilon": claim.per_report_epsilon,
        "epsilon_estimate": eps["epsilon_estimate"], "epsilon_lower": eps["epsilon_lower"],
        "confidence": 1 - alpha, "tpr": eps["tpr"], "fpr": eps["fpr"], "test": test,
        "trials": used, "trials_requested": trials,
        "trials_target": target_tight,
        "trials_needed": None if target_tight is None or not math.isfinite(target_tight)
        else trials_needed(eps["tpr"], eps["fpr"], target_tight, alpha),
        "path": "batch" if batch is not None else "full", "path_note": why_full,
        "trials_per_second": 2 * used / eps_seconds if eps_seconds > 0 else None,
        "colluders": int(len(setting.colluders)), "curator_colludes": setting.curator_colludes,
        "flagged": bool(eps["epsilon_lower"] > claimed
                        or (flt["float_epsilon_lower"] or 0.0) > claimed),
        **flt,
        "bayes_accuracy": bayes_hits / bayes_n if bayes_n else None,
        "differencing_accuracy": diff_hits / diff_n if diff_n else None,
        "differencing_trials": diff_n,
        "prior_baseline": float(spec.prior.max()),
        "candidates": int(len(spec.values)), "audit_notes": spec.notes,
        "seconds": seconds,
    }


def _same(spec: AuditSpec, guess: int, truth: int) -> bool:
    """A guess is right when it names the true row (candidate rows may repeat)."""
    return bool(np.array_equal(spec.values[guess], spec.values[truth], equal_nan=True))


def audit_scenario(scenario: Any, out: str | Path, trials: int, target: int | None = None,
                   show_progress: bool = True, echo: Any = print) -> list[dict[str, Any]]:
    """Audit every (protocol, parameter point) of a scenario (its first repetition's config).

    Appends one JSON line per audited setting to ``OUT/audit.jsonl`` and skips settings
    already there (an interrupted audit resumes).
    """
    import json

    from ldpsim.simulator.progress import progress as bar
    from ldpsim.simulator.results import jsonable

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "audit.jsonl"
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from an interrupted audit is redone
            done[rec.get("key", "")] = rec
    specs = [s for s in scenario.runs() if s.repeat == 0]
    records = []
    with bar(total=len(specs) * 2 * trials, desc="audit", enabled=show_progress) as pb:
        for spec in specs:
            key = json.dumps([spec.protocol, spec.params, spec.data, spec.collusion, trials,
                              target, scenario.seed], sort_keys=True, default=str)
            if key in done:
                records.append(done[key])
                pb.update(2 * trials)
                continue
            setting = make_setting(spec.config(), scenario.seed, target)
            rec = audit_setting(setting, trials, progress=pb.update)
            rec["key"] = key
            rec["scenario"] = scenario.name
            rec["point"] = {k: v for k, v in spec.point.items() if k != "protocol"}
            with path.open("a") as f:
                f.write(json.dumps(jsonable(rec)) + "\n")
                f.flush()
            records.append(rec)
    return records


AUDIT_COLUMNS = ["protocol", "claim_model", "curator_colludes", "colluders", "epsilon_claimed",
                 "epsilon_estimate", "epsilon_lower", "float_epsilon_lower", "flagged",
                 "bayes_accuracy",
                 "differencing_accuracy", "prior_baseline", "test"]
