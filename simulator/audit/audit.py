"""What a semi-honest coalition learns: attacks on the adversary view and an empirical ε audit.

The coalition is the curator (optionally) plus colluding agents, up to n - 1 of them. Its view
(``simulator.session.collusion``) is exactly: what the curator received (the queries it sent, every
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
* **floating-point attack** (``float_check``, ``simulator.audit.float_attack``): for protocols
  whose reports are Laplace releases (``Protocol.laplace_release``), does each neighbouring row
  reproduce the target's reports *exactly* from some randomness of the generator? A report
  the true row reproduces and the other cannot rules the other out -- impossible under the other
  row, so the event's TPR over FPR (Clopper-Pearson, as above) bounds ε from below with no
  statistic to learn. Textbook float Laplace fails it at any claimed ε; the exact discrete
  Laplace that ldpsim releases passes (its reports are grid points every row can produce).

The harness that runs the trials (the full path and the batch path) is
``simulator.audit.audit_harness``; ``simulator.audit.audit_batch`` runs the target's copies as
one block.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from ldpsim.protocols.base import AuditSpec, Protocol
from ldpsim.simulator.audit.float_attack import reproducible
from scipy.special import betaincinv

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
    bound = protocol.bind(view["params"], view["public"], resolved=True)
    rel = bound.released_aggregate(view["output"])
    if rel is None:
        return None
    if len(known):
        base = bound.true_aggregate(known)
        if base is None:
            return None
        return np.asarray(rel, dtype=float) - base
    return np.asarray(rel, dtype=float)


def contributions(protocol: Protocol, view: dict[str, Any],
                  rows: np.ndarray) -> np.ndarray | None:
    """Each row's own contribution to the aggregate (one per row), or None."""
    bound = protocol.bind(view["params"], view["public"], resolved=True)
    parts = [bound.true_aggregate(rows[v:v + 1]) for v in range(len(rows))]
    if any(p is None for p in parts):
        return None
    return np.stack(parts)


def _residual(view: dict[str, Any], target: int, protocol: Protocol) -> np.ndarray | None:
    """Released aggregate minus the known agents' contribution (the differencing residual)."""
    known = [np.asarray(d["data"]) for a, d in sorted(view.get("disclosures", {}).items())
             if int(a) != target]
    return residual(protocol, view, np.stack(known) if known else np.empty(0))


def differencing_guess(view: dict[str, Any], target: int, protocol: Protocol,
                       spec: AuditSpec,
                       contrib_of: Callable[[dict[str, Any]], np.ndarray | None] | None = None
                       ) -> int | None:
    """Candidate whose contribution is closest to the differencing residual, or None.
    ``contrib_of(view)``: ``contributions(protocol, view, spec.values)`` where the caller
    keeps them (they depend on the view's parameters and public facts only)."""
    resid = _residual(view, target, protocol)
    if resid is None:
        return None
    contrib = contributions(protocol, view, spec.values) if contrib_of is None \
        else contrib_of(view)
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
        values, scales, grids = rel
        same = reproducible(np.repeat(rep, n, axis=0), values, scales, grids)
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


def beta_ppf(q: float, a: float, b: float) -> float:
    """The ``q`` quantile of the Beta(a, b) distribution (a, b > 0), as
    ``scipy.stats.beta.ppf`` computes it -- both are Boost's ``ibeta_inv``, the same bits --
    without importing ``scipy.stats`` (about 0.5 s, a sixth of a 10^6-trial audit)."""
    return float(betaincinv(a, b, q))


def cp_lower(k: int, n: int, a: float) -> float:
    """Clopper-Pearson lower bound (one-sided level a) on a binomial proportion k / n."""
    return 0.0 if k == 0 else beta_ppf(a, k, n - k + 1)


def cp_upper(k: int, n: int, a: float) -> float:
    """Clopper-Pearson upper bound (one-sided level a) on a binomial proportion k / n."""
    return 1.0 if k == n else beta_ppf(1 - a, k + 1, n - k)


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


def linear_direction(train0: np.ndarray, train1: np.ndarray) -> np.ndarray:
    """Weights of a diagonal linear discriminant (difference of means over pooled variance)."""
    mu0, mu1 = train0.mean(axis=0), train1.mean(axis=0)
    var = np.concatenate([train0 - mu0, train1 - mu1]).var(axis=0) + 1e-12
    return (mu1 - mu0) / var
