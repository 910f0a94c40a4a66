"""Benchmarks of the privacy audit (``ldpsim bench --audit-trials N``).

Two tables:

* **Throughput**: one setting per protocol of the audit scenarios (curator + 9 colluders
  against one honest agent, ε = 1), audited with N trials: path, wall time, trials per second
  (both neighbouring rows count), ε_lower and peak memory. Settings on the full path (one
  protocol run per trial) run ``full_trials`` trials on ``jobs`` processes instead, and their
  time for N trials is extrapolated from their rate.
* **Side by side with ldp-audit** (Arcolezi & Gambs, PETS 2024): GRR with k = 2 and k = 10 at
  ε = 1. ldp-audit is not installable from a package registry, so its estimator is restated
  here from its source (``ldp_audit/base_auditor.py``): N trials with input v1 = 0 and N with
  v2 = k - 1, the event "report = v1", and ε_lower = ln(CP_lower(TP) / CP_upper(FP)) from
  statsmodels' two-sided Clopper-Pearson interval at level α/2 with α = 0.01 (each bound at
  the α/4 tail). Next to it, ldpsim's own test on the same reports: the likelihood-ratio
  statistic, the region chosen on one half and the bound on the other, at ldpsim's α = 0.05
  and at ldp-audit's 99.5% overall confidence.
"""

from __future__ import annotations

import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.simulator.audit.audit import epsilon_audit
from ldpsim.simulator.audit.audit_harness import audit_setting, make_setting
from ldpsim.simulator.scenario import scenario as sc
from scipy.stats import beta

AUDIT_SCENARIOS = ("audit_rank", "audit_vote", "audit_truth", "audit_safari", "audit_ethics")
#: settings without a local claim (central or none): their audit is a formality, not a benchmark
SKIP = {"dp_kwiksort", "kwiksort", "truth_plain", "safari_nopriv", "ethics_vlcp",
        "ethics_nonprivate"}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def throughput_rows(trials: int, full_trials: int = 2000, jobs: int = 2,
                    scenarios_dir: Any = None) -> list[list[str]]:
    """One row per audited protocol (see the module docstring)."""
    here = Path(scenarios_dir) if scenarios_dir else Path(__file__).resolve().parents[2] / \
        "scenarios"
    rows = []
    for name in AUDIT_SCENARIOS:
        s = sc.load(here / f"{name}.toml")
        seen = set()
        for spec in s.runs():
            if spec.repeat or spec.protocol in seen or spec.protocol in SKIP:
                continue
            seen.add(spec.protocol)
            setting = make_setting(spec.config(), s.seed)
            t0 = time.perf_counter()
            try:
                rec = audit_setting(setting, trials, path="batch")
            except ValueError:  # the full path: measure its rate on fewer trials
                t0 = time.perf_counter()
                rec = audit_setting(setting, min(trials, full_trials), jobs=jobs)
            wall = time.perf_counter() - t0
            rate = rec["trials_per_second"]
            note = (f"{rec['trials']} trials on {jobs} processes; {trials} would take about "
                    f"{2 * trials / rate:.0f} s" if rec["trials"] < trials else "")
            rows.append([spec.protocol, rec["path"], f"{rec['trials']:,}", f"{wall:.1f}",
                         f"{rate:,.0f}", f"{rec['epsilon_lower']:.3f}",
                         f"{100 * rec['confidence']:g}%", f"{_peak_mb():.0f}",
                         note or ("coalition coins fixed" if rec.get("coalition_coins") ==
                                  "fixed" else (rec["path_note"] or "")[:60])])
            print("  " + "  ".join(rows[-1][:6]), file=sys.stderr, flush=True)  # progress
    return rows


def ldp_audit_estimator(tp: int, fp: int, n: int, alpha: float = 0.01) -> float:
    """ldp-audit's ε lower bound: ln(CP_lower(tp/n) / CP_upper(fp/n)), each from statsmodels'
    ``proportion_confint(..., alpha / 2, method="beta")`` (tails of α/4)."""
    a = alpha / 2
    lo = 0.0 if tp == 0 else float(beta.ppf(a / 2, tp, n - tp + 1))
    hi = 1.0 if fp == n else float(beta.ppf(1 - a / 2, fp + 1, n - fp))
    return math.log(lo / hi) if lo > 0 else 0.0


def grr_rows(trials: int, seed: int = 42) -> list[list[str]]:
    """GRR at ε = 1, k = 2 and 10: ldp-audit's estimator and ldpsim's test on the same
    reports (see the module docstring)."""
    rows = []
    for k in (2, 10):
        g = mech.GRR(1.0, k)
        t0 = time.perf_counter()
        key = rngm.stream_key(seed, "grr-audit", k)
        agents = np.arange(trials, dtype=np.int64)
        reports = [g.perturb(np.full(trials, v), rngm.uniform(key, agents, b, 1)[:, 0])
                   for b, v in enumerate((0, k - 1))]
        t_draw = time.perf_counter() - t0
        t1 = time.perf_counter()
        tp, fp = int((reports[0] == 0).sum()), int((reports[1] == 0).sum())
        anchor = ldp_audit_estimator(tp, fp, trials)
        t_anchor = time.perf_counter() - t1 + t_draw
        t2 = time.perf_counter()
        stats = [g.log_likelihood(r, k - 1) - g.log_likelihood(r, 0) for r in reports]
        ours = epsilon_audit(stats[0], stats[1])
        ours_99 = epsilon_audit(stats[0], stats[1], alpha=0.005)
        t_ours = time.perf_counter() - t2 + t_draw
        exact = math.log(float(g.p) / float(g.q))
        rows.append([f"GRR k={k}, eps=1", f"{trials:,} per input", f"{exact:.3f}",
                     f"{anchor:.3f} (99.5%)", f"{t_anchor:.2f}",
                     f"{ours['epsilon_lower']:.3f} (95%) / {ours_99['epsilon_lower']:.3f} "
                     "(99.5%)", f"{t_ours:.2f}"])
    return rows


def print_table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def main(trials: int, jobs: int = 2, full_trials: int = 2000) -> None:
    """Print both tables."""
    print(f"\nprivacy audit: {trials:,} trials per setting (full-path settings: their rate)")
    print_table(["protocol", "path", "trials", "wall s", "trials/s", "eps_lower", "conf.",
                 "peak MB", "notes"], throughput_rows(trials, full_trials, jobs))
    print("\nside by side with ldp-audit's GRR audit (its estimator restated; same reports)")
    print_table(["mechanism", "trials", "true eps", "ldp-audit eps_lower", "s",
                 "ldpsim eps_lower", "s"], grr_rows(trials))
