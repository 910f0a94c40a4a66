"""The ε audit's statistics: a range of trials on the full or the batch path, spread over
processes or a mapper, its looks at the lower bound, and the trials a bound needs.

``pair_stats`` gathers, for the neighbouring pair of rows, the test statistic (likelihood ratio)
or the learned test's features and the floating-point checks of a range of trials: one inproc
run per trial and row (``full_pair_stats``, the full path) or one block of the target's copies
(``batch_pair_stats``, ``simulator.audit.audit_batch``), in ranges over ``jobs`` processes or a
``Mapper`` (``spread``). ``epsilon_looks`` runs the ε audit at each look until the lower bound
is reached; ``expected_lower`` and ``trials_needed`` say how many trials a bound would take.
"""

from __future__ import annotations

import math
import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import ordered
from ldpsim.protocols.base import AuditSpec
from ldpsim.simulator.audit.audit import (
    ALPHA,
    beta_ppf,
    epsilon_audit,
    features,
    float_check,
    linear_direction,
    llr_statistic,
)
from ldpsim.simulator.audit.audit_batch import block_size, llr
from ldpsim.simulator.audit.audit_trials import AuditSetting, Trials
from ldpsim.simulator.session import Limits

#: full-path trials per task when a mapper spreads them (a trial is two protocol runs)
FULL_TASK_TRIALS = 250
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


def full_pair_stats(setting: AuditSetting, limits: Limits, first: int, count: int,
                     spec: AuditSpec, use_llr: bool, use_float: bool,
                     progress: Any = None, coins: str = "per-trial",
                     reports: bool = False) -> PairStats:
    """The full path: one inproc run per trial and row (``reports``: keep the target's
    reports too, as features, beside the likelihood ratio)."""
    runner = Trials(setting, limits, coins)
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
            if reports or not use_llr:
                feats[b].append(features(view, target, protocol))
        if progress is not None:
            progress(1)
    return PairStats([np.array(x, dtype=float) for x in stats] if use_llr else None,
                     [np.stack(x) for x in feats] if feats[0] else None,
                     [np.stack(x) for x in floats] if use_float and floats[0] else None)


def _full_pair_stats_job(args: tuple) -> PairStats:
    return full_pair_stats(*args)


def _batch_pair_stats_job(args: tuple) -> PairStats:
    return batch_pair_stats(*args)


#: ``mapper(fn, args)``: ``fn`` over every element of ``args``, the results in order (a
#: process pool's ``imap``, or the tasks of a Dask cluster: ``audit_dask``)
Mapper = Callable[[Callable[[tuple], PairStats], list[tuple]], Iterable[PairStats]]


def batch_pair_stats(batch: Any, first: int, count: int, spec: AuditSpec, use_llr: bool,
                      use_float: bool, progress: Any = None, reports: bool = False
                      ) -> PairStats:
    """The batch path: every trial of the range as one block per round (``audit_batch``;
    ``reports``: keep the target's reports too, as features)."""
    pair = spec.values[list(spec.pair)]
    step = block_size(pair[0])
    parts = []
    for s in range(first, first + count, step):
        m = min(step, first + count - s)
        stats, feats, floats = [], [], []
        for b in (0, 1):
            view = batch.view(s, np.repeat(pair[b:b + 1], m, axis=0))
            if use_llr:
                stats.append(llr(batch.log_likelihoods(view, pair)))
            if reports or not use_llr:
                feats.append(view.features())
            if use_float:
                floats.append(batch.float_checks(view, pair))
        parts.append(PairStats(stats or None, feats or None, floats if use_float else None))
        if progress is not None:
            progress(m)
    return PairStats.join(parts)


def _scores(stats: PairStats, trials: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The test statistic under each row, and the test's name."""
    if stats.s is not None:
        return stats.s[0], stats.s[1], "likelihood ratio"
    f0, f1 = stats.feats
    h = trials // 2
    w = linear_direction(f0[:h], f1[:h])
    return ordered.matmul(f0, w), ordered.matmul(f1, w), "linear discriminant"


def expected_lower(tpr: float, fpr: float, trials: int, alpha: float = ALPHA) -> float:
    """The held-out lower bound ``trials`` trials (both halves) would give if the region's
    rates were exactly ``tpr`` and ``fpr`` (Clopper-Pearson with the expected counts, which
    makes it smooth and increasing in ``trials``)."""
    h = trials // 2
    if h < 1 or tpr <= 0:
        return 0.0
    lo = beta_ppf(alpha / 2, tpr * h, (1 - tpr) * h + 1)
    hi = 1.0 if fpr >= 1 else beta_ppf(1 - alpha / 2, fpr * h + 1, (1 - fpr) * h)
    return max(0.0, math.log(lo / hi)) if lo > 0 else 0.0


def trials_needed(tpr: float, fpr: float, target: float, alpha: float = ALPHA,
                  most: int = 10**10) -> int | None:
    """The least trial count whose expected lower bound (``expected_lower``) reaches
    ``target``, within 0.1%; None if no count up to ``most`` does (e.g. a target above the
    rates' own ln(tpr / fpr))."""
    if tpr <= 0 or not target > 0:
        return None
    hi = 64
    while expected_lower(tpr, fpr, hi, alpha) < target:
        hi *= 2
        if hi > most:
            return None
    lo = hi // 2
    while hi - lo > max(2, hi // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if expected_lower(tpr, fpr, mid, alpha) >= target else (mid, hi)
    return hi


def _gather(results: Iterable[PairStats], progress: Any) -> PairStats:
    """Join the ranges' statistics in order, reporting each range's trials to ``progress``.

    Parameters
    ----------
    results : Iterable[PairStats]
        The ranges' statistics, in the order of their trials.
    progress : Any
        Called with each range's number of trials, or None.

    Returns
    -------
    PairStats
        The ranges' statistics joined.
    """
    got = []
    for part in results:
        got.append(part)
        if progress is not None:
            progress(len(part.s[0]) if part.s is not None else len(part.feats[0]))
    return PairStats.join(got)


def pair_stats(setting: AuditSetting, limits: Limits, batch: Any, spec: AuditSpec,
                use_llr: bool, use_float: bool, progress: Any, coins: str, jobs: int,
                mapper: Mapper | None, first: int, count: int) -> PairStats:
    """The ε audit's statistics of trials ``first .. first + count`` on the chosen path.

    Parameters
    ----------
    setting : AuditSetting
        The audited setting.
    limits : Limits
        The runs' limits.
    batch : Any
        The batch path's block of the target's copies, or None for the full path.
    spec : AuditSpec
        The protocol's audit spec.
    use_llr : bool
        Whether the statistic is the log-likelihood ratio.
    use_float : bool
        Whether the floating-point attack runs in the same trials.
    progress : Any
        Called with the number of trials done, or None.
    coins : str
        The experiment (``Trials``).
    jobs : int
        Processes for the trials.
    mapper : Mapper | None
        Spread the trials over it instead.
    first : int
        The first trial.
    count : int
        The number of trials.

    Returns
    -------
    PairStats
        The trials' statistics, in order.
    """
    if mapper is None and (jobs <= 1 or count < 2 * jobs):
        if batch is not None:
            return batch_pair_stats(batch, first, count, spec, use_llr, use_float,
                                     progress)
        return full_pair_stats(setting, limits, first, count, spec, use_llr, use_float,
                                progress, coins)
    # the trials in ranges, each a task of the process pool or the mapper, joined in order
    if batch is not None:
        fn = _batch_pair_stats_job
        cuts = [*range(first, first + count, block_size(spec.values[spec.pair[0]])),
                first + count]
        args = [(batch, a, b - a, spec, use_llr, use_float)
                for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    else:
        fn = _full_pair_stats_job
        parts = jobs if mapper is None else max(1, min(count // FULL_TASK_TRIALS, 256))
        cut = np.linspace(first, first + count, parts + 1).astype(int)
        args = [(setting, limits, int(a), int(b - a), spec, use_llr, use_float, None, coins)
                for a, b in zip(cut[:-1], cut[1:], strict=True) if b > a]
    return _gather(spread(fn, args, jobs, mapper), progress)


def epsilon_looks(pair_stats: Callable[[int, int], PairStats], trials: int,
                   until_lower: float | None
                   ) -> tuple[Any, int, Any, Any, float]:
    """The ε audit on the neighbouring pair, at each look until the lower bound is reached.

    Parameters
    ----------
    pair_stats : Callable[[int, int], PairStats]
        The statistics of ``count`` trials from ``first``.
    trials : int
        The trials asked for.
    until_lower : float | None
        Stop as soon as the held-out lower bound reaches it.

    Returns
    -------
    tuple[Any, int, Any, Any, float]
        The statistics, the trials used, the ε audit, its test and the last look's α (the
        statistics, the ε audit and its test are None when no look ran: no trials).
    """
    looks = [(trials, ALPHA)]
    if until_lower is not None:
        looks = [(max(20, trials // 8), ALPHA / 8), (max(20, trials // 4), ALPHA / 8),
                 (max(20, trials // 2), ALPHA / 4), (trials, ALPHA / 2)]
    stats, done = None, 0
    eps = test = None
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
    return stats, done, eps, test, alpha


def spread(fn: Callable[[tuple], Any], args: list[tuple], jobs: int,
            mapper: Mapper | None) -> Iterator[Any]:
    """``fn`` over every element of ``args``, the results in order: on the ``mapper`` if there
    is one, else in a pool of ``jobs`` forked processes."""
    if mapper is not None:
        yield from mapper(fn, args)
        return

    with mp.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(fn, args)
