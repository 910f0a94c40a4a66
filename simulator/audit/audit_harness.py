"""The privacy audit's harness: settings, trials on the full and the batch path, records.

``audit_setting`` audits one (protocol, parameter point): the ε audit on a pair of neighbouring
rows, the floating-point attack in the same trials, the single-report inference and the
differencing attack (``simulator.audit.audit``), each trial either a full inproc run of the
protocol (the full path) or one row of a block of the target's copies (the batch path,
``simulator.audit.audit_batch``), whichever ``path`` asks for, spread over ``jobs`` processes or a
``mapper`` (a Dask cluster's tasks) in ranges of trials; ``audit_scenario``
audits every setting of a scenario into ``audit.jsonl`` and resumes an interrupted audit.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.protocols import build_data, get_protocol, ordered
from ldpsim.protocols.base import AuditSpec
from ldpsim.protocols.keys import DataKeys, run_seed, run_seeds, run_tags, seed_run_keys
from ldpsim.protocols.local import local_rounds
from ldpsim.protocols.rng import party_generator, stream_key
from ldpsim.simulator.audit.audit import (
    ALPHA,
    bayes_guess,
    beta_ppf,
    coalition_view,
    contributions,
    differencing_guess,
    epsilon_audit,
    features,
    float_audit,
    float_check,
    linear_direction,
    llr_statistic,
)
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.results.store import jsonable
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.collusion import colluder_mask
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.seeding import run_keys


@dataclass
class AuditSetting:
    """One audited configuration: a run config (one repetition), the coalition and target."""

    config: dict[str, Any]
    scenario_seed: int
    target: int
    curator_colludes: bool
    colluders: np.ndarray  # ids of the colluding agents (never the target)
    public: dict[str, Any]  # the data set's public facts (the same in every trial)
    n: int = 0  # the data set's agents


def target_coins(setting: AuditSetting, trial: int) -> int:
    """The target's coin key in run ``trial`` of the setting (its seed's secrets, its run
    tag): what it draws in that run (the fixed-coins experiment gives it to run 0)."""
    keys = run_keys(run_seed(setting.scenario_seed, trial))
    return int(keys.coins(setting.config, [setting.target])[0])


def make_setting(config: dict[str, Any], scenario_seed: int,
                 target: int | None = None) -> AuditSetting:
    """Fix the coalition once (so the target stays honest in every trial) and pick the target.

    The target is ``target`` or the lowest-numbered honest agent; if the coalition would
    include it (e.g. n - 1 colluders), the target is swapped out of it for another agent.
    """
    data = config["data"]
    seed0 = run_seed(scenario_seed, 0)
    ds = build_data(data, DataKeys.of_seed(seed0))
    n = ds.n
    run_cfg = RunConfig.of(config)
    curator = run_cfg.curator_colludes
    mask = colluder_mask(n, dict(run_cfg.collusion), stream_key(seed0, "collusion"))
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
    return AuditSetting(cfg, scenario_seed, int(target), curator, colluders, ds.public, n)


#: full-path trials per task when a mapper spreads them (a trial is two protocol runs)
FULL_TASK_TRIALS = 250
#: the audit's two experiments: fresh coins for every party in every trial (trial t is run t),
#: or the coalition's coins fixed at trial 0's and only the target's fresh (trial t is run 0
#: with the target drawing its coins as in run t)
COINS = ("per-trial", "fixed")


def _check_coins(coins: str, auto: bool) -> None:
    """ValueError naming ``--coins`` unless ``coins`` is one of ``COINS`` (or "auto" where
    ``auto``: the choice is still to be made)."""
    allowed = ("auto", *COINS) if auto else COINS
    if coins not in allowed:
        raise ValueError(f"--coins: got {coins!r}; allowed: " + ", ".join(map(repr, allowed)))


class _Trials:
    """Runs one setting repeatedly on the inproc backend with the target's row overridden.

    ``coins`` = "per-trial": trial t is run t of the scenario (every party's coins fresh).
    "fixed": trial t is run 0 with the target's coins of run t; the curator and the colluders
    act as in run 0 in every trial, except where the target's reports change what they see.
    Both are sound experiments for a local claim: ε-LDP holds for any fixed coins of the
    others, adaptively chosen queries and broadcasts included (sequential composition).
    """

    def __init__(self, setting: AuditSetting, limits: Limits, coins: str = "per-trial") -> None:
        _check_coins(coins, auto=False)
        self.s = setting
        self.limits = limits
        self.coins = coins
        self.protocol = get_protocol(setting.config["protocol"])

    def view(self, trial: int, row: np.ndarray) -> dict[str, Any]:
        override = {"agent": self.s.target, "row": row}
        if self.coins == "fixed":
            override["key"] = target_coins(self.s, trial)
            trial = 0
        seed = run_seed(self.s.scenario_seed, trial)
        cfg = dict(self.s.config, seed=seed)
        res = run_inproc(cfg, self.limits, record_view=True, override=override,
                         n=self.s.n)
        rows = {}
        if not self.s.curator_colludes and len(self.s.colluders):
            ds = build_data(cfg["data"], DataKeys.of_seed(seed))
            for a in self.s.colluders.tolist():
                rows[a] = ds.rows(a, a + 1)[0]
        return coalition_view(res["view"], self.s.curator_colludes, rows)

    def local_keys(self, first: int, count: int) -> LocalKeys:
        """The keys of the runs of trials ``first .. first + count - 1``, computed together."""
        cfg = self.s.config
        seeds = run_seeds(self.s.scenario_seed, first, count)
        tags = run_tags(seeds, cfg["protocol"], cfg["params"], cfg["data"], cfg.get("collusion"))
        coins, data = seed_run_keys(seeds, self.s.n, tags)
        if self.coins == "fixed":  # run 0's keys but the target's coins, run t's
            seed0 = seeds[:1] if first == 0 else run_seeds(self.s.scenario_seed, 0, 1)
            tag0 = run_tags(seed0, cfg["protocol"], cfg["params"], cfg["data"],
                            cfg.get("collusion"))
            c0, d0 = seed_run_keys(seed0, self.s.n, tag0)
            own = coins[:, self.s.target]
            coins, data = np.repeat(c0, count, axis=0), np.repeat(d0, count, axis=0)
            coins[:, self.s.target] = own
            seeds, tags = np.repeat(seed0, count), np.repeat(tag0, count)
        return LocalKeys(first, seeds, tags, coins, data)

    def local_view(self, trial: int, row: np.ndarray,
                   keys: LocalKeys | None = None) -> dict[str, Any]:
        """What the differencing attack reads of ``view(trial, row)`` (the output, the
        parameters, the public facts and the colluders' disclosed rows), from the round loop
        in this process (``protocols.local.local_rounds``) instead of a run of the runtime:
        the same parties keyed the same way, without the sessions, the wire and the accounts.
        Only for a coalition with the curator (``audit_setting`` checks it against ``view``).
        ``keys``: ``local_keys`` of trials that include this one, if already computed."""
        if keys is None or not keys.first <= trial < keys.first + len(keys.seeds):
            keys = self.local_keys(trial, 1)
        i = trial - keys.first
        seed, tag = int(keys.seeds[i]), int(keys.tags[i])
        coins, data_keys = keys.coins[i], keys.data[i]
        cfg = dict(self.s.config, seed=seed)
        run = run_keys(seed)
        ds = build_data(cfg["data"], run.data.with_cache(0, data_keys))
        n, target = ds.n, self.s.target
        rows = np.array(ds.rows(0, n), copy=True)
        rows[target] = np.asarray(row).astype(rows.dtype)
        rows.setflags(write=False)
        bound = self.protocol.bind(dict(cfg["params"]), ds.public)
        _, output = local_rounds(bound, ds, seed, coins=coins,
                                 curator_coins=run.secrets.curator_coins(tag), rows=rows)
        return {"output": output, "params": bound.params, "public": ds.public,
                "disclosures": {int(a): {"data": rows[a]} for a in self.s.colluders.tolist()}}


@dataclass
class LocalKeys:
    """The keys of the runs of trials ``first ..`` (``_Trials.local_keys``): per trial, its
    run's seed and tag (run 0's in the fixed-coins experiment), and every agent's coin keys
    (the target's as the experiment gives it) and data keys, one row per trial."""

    first: int
    seeds: np.ndarray
    tags: np.ndarray
    coins: np.ndarray
    data: np.ndarray


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
                     progress: Any = None, coins: str = "per-trial",
                     reports: bool = False) -> PairStats:
    """The full path: one inproc run per trial and row (``reports``: keep the target's
    reports too, as features, beside the likelihood ratio)."""
    runner = _Trials(setting, limits, coins)
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
    return _full_pair_stats(*args)


def _batch_pair_stats_job(args: tuple) -> PairStats:
    return _batch_pair_stats(*args)


#: ``mapper(fn, args)``: ``fn`` over every element of ``args``, the results in order (a
#: process pool's ``imap``, or the tasks of a Dask cluster: ``audit_dask``)
Mapper = Callable[[Callable[[tuple], PairStats], list[tuple]], Iterable[PairStats]]


def _batch_pair_stats(batch: Any, first: int, count: int, spec: AuditSpec, use_llr: bool,
                      use_float: bool, progress: Any = None, reports: bool = False
                      ) -> PairStats:
    """The batch path: every trial of the range as one block per round (``audit_batch``;
    ``reports``: keep the target's reports too, as features)."""
    from ldpsim.simulator.audit.audit_batch import block_size, llr

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


def _choose_path(setting: AuditSetting, limits: Limits, spec: AuditSpec, path: str,
                 coins: str = "auto") -> tuple[Any, str, bool, bool, str]:
    """(batch trials or None, why the full path is used or how the batch differs, use_llr,
    use_float, the coalition's coins), deciding from trial 0 and, for the batch path,
    checking it against full runs of the same experiment (``audit_batch``).

    ``coins`` "auto" tries the batch with fresh coalition coins per trial first, then with
    the coalition's coins fixed (where later rounds read broadcasts that change from run to
    run), and else keeps the full path with fresh coins.
    """
    from ldpsim.simulator.audit.audit_batch import CHECK_TRIALS, BatchTrials

    _check_coins(coins, auto=True)
    runner = _Trials(setting, limits)
    protocol, target = runner.protocol, setting.target
    pair = spec.values[list(spec.pair)]
    view = runner.view(0, pair[0])  # trial 0 is the same run in both experiments
    use_llr = llr_statistic(view, target, protocol, spec) is not None
    use_float = float_check(view, target, protocol, pair) is not None
    tried = list(COINS) if coins == "auto" else [coins]
    fallback = "per-trial" if coins == "auto" else coins
    if path == "full":
        return None, "asked for (--path full)", use_llr, use_float, fallback
    if setting.config.get("deployment"):
        why = ("a [deployment]: whether the target is online, and in time, is the network's, "
               "which only full runs simulate")
        if path == "batch":
            raise ValueError(f"--path batch: {protocol.name} cannot run as a batch: {why}")
        return None, why, use_llr, use_float, fallback
    if not setting.curator_colludes:
        why = "the curator is not in the coalition (the view is the released aggregate)"
        if path == "batch":
            raise ValueError(f"--path batch: {protocol.name} cannot run as a batch: {why}")
        return None, why, use_llr, use_float, fallback
    whys = []
    for mode in tried:
        try:
            bound = protocol.bind(view["params"], view["public"], resolved=True)
            batch = BatchTrials.build(protocol, bound, target, setting.scenario_seed, view,
                                      fixed=mode == "fixed", config=setting.config)
            # the target's reports too: a statistic can agree where the reports do not (one
            # that is +-inf whatever the broadcast, while the inference reads the broadcast)
            full = _full_pair_stats(setting, limits, 0, CHECK_TRIALS, spec, use_llr,
                                    use_float, coins=mode, reports=True)
            fast = _batch_pair_stats(batch, 0, CHECK_TRIALS, spec, use_llr, use_float,
                                     reports=True)
            same = all(_equal(getattr(full, k), getattr(fast, k))
                       for k in ("s", "feats", "floats"))
            why = "" if same else (f"its first {CHECK_TRIALS} trials differ from full runs "
                                   "(the target's rounds read what changes from run to run)")
        except Exception as e:  # a curator or randomizer that cannot run as a batch
            why = f"{type(e).__name__}: {e}"[:200]
        if not why:
            note = "" if not whys else (
                "the coalition's coins are fixed at trial 0's (with fresh coins in every "
                f"trial: {whys[0]})")
            return batch, note, use_llr, use_float, mode
        whys.append(why)
    why = whys[0]
    if path == "batch":
        raise ValueError(f"--path batch: {protocol.name} cannot run as a batch with "
                         f"{' or '.join(tried)} coalition coins: {why}")
    return None, why, use_llr, use_float, fallback


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


def _pair_stats(setting: AuditSetting, limits: Limits, batch: Any, spec: AuditSpec,
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
        The experiment (``_Trials``).
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
            return _batch_pair_stats(batch, first, count, spec, use_llr, use_float,
                                     progress)
        return _full_pair_stats(setting, limits, first, count, spec, use_llr, use_float,
                                progress, coins)
    # the trials in ranges, each a task of the process pool or the mapper, joined in order
    if batch is not None:
        from ldpsim.simulator.audit.audit_batch import block_size

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
    return _gather(_spread(fn, args, jobs, mapper), progress)


def _epsilon_looks(pair_stats: Callable[[int, int], PairStats], trials: int,
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


def _contrib_cache(protocol: Any, spec: AuditSpec
                   ) -> Callable[[dict[str, Any]], np.ndarray | None]:
    """The candidates' contributions of a view, cached by its parameters and public facts.

    Parameters
    ----------
    protocol : Any
        The audited protocol.
    spec : AuditSpec
        The protocol's audit spec.

    Returns
    -------
    Callable[[dict[str, Any]], np.ndarray | None]
        The contributions of a view's candidates.
    """
    contrib_of: dict[str, np.ndarray | None] = {}

    def contrib(view: dict[str, Any]) -> np.ndarray | None:
        """The candidates' contributions under the view's parameters and public facts (the
        same in every trial: computed once)."""
        k = json.dumps(jsonable([view["params"], view["public"]]), sort_keys=True)
        if k not in contrib_of:
            contrib_of[k] = contributions(protocol, view, spec.values)
        return contrib_of[k]

    return contrib


def _differencing_runs(runner: _Trials, protocol: Any, spec: AuditSpec, target: int,
                       batch: Any, truth: np.ndarray, used: int, full_views: int,
                       progress: Any) -> tuple[int, int, int, int]:
    """The differencing attack (and on the full path the single-report inference) in the
    whole runs after the ε audit's ``used`` trials.

    Parameters
    ----------
    runner : _Trials
        The trials of the setting.
    protocol : Any
        The audited protocol.
    spec : AuditSpec
        The protocol's audit spec.
    target : int
        The target party.
    batch : Any
        The batch path's block, or None for the full path.
    truth : np.ndarray
        The target's rows, indices into ``spec.values``.
    used : int
        The ε audit's trials.
    full_views : int
        The whole runs to make.
    progress : Any
        Called with the number of trials done, or None.

    Returns
    -------
    tuple[int, int, int, int]
        The inference's hits and guesses, then the differencing attack's.
    """
    bayes_hits = diff_hits = bayes_n = diff_n = 0
    contrib = _contrib_cache(protocol, spec)
    # on the batch path the differencing runs need only the output: the round loop in this
    # process gives it, once its first DIFF_CHECK runs agree exactly with the runtime's
    local = batch is not None
    keys = None
    for t in range(full_views):
        row = spec.values[truth[t]]
        if local and t >= DIFF_CHECK:
            if keys is None or t + used >= keys.first + len(keys.seeds):  # the next ones'
                keys = runner.local_keys(used + t, min(LOCAL_KEYS, full_views - t))
            view = runner.local_view(used + t, row, keys)
        else:
            view = runner.view(used + t, row)
            local = local and _same_differencing(runner, view, used + t, row)
        if batch is None:
            bg = bayes_guess(view, target, protocol, spec)
            if bg is not None:
                bayes_n += 1
                bayes_hits += int(_same(spec, bg, truth[t]))
        dg = differencing_guess(view, target, protocol, spec, contrib)
        if dg is not None:
            diff_n += 1
            diff_hits += int(_same(spec, dg, truth[t]))
        if progress is not None:
            progress(1)
    return bayes_hits, bayes_n, diff_hits, diff_n


def _attacks(setting: AuditSetting, runner: _Trials, protocol: Any, spec: AuditSpec,
             batch: Any, use_llr: bool, used: int, differencing_trials: int, jobs: int,
             mapper: Mapper | None, progress: Any) -> tuple[int, int, int, int]:
    """The single-report inference and the differencing attack, the target's row drawn from
    the prior, in the trials after the ε audit's ``used`` ones.

    Parameters
    ----------
    setting : AuditSetting
        The audited setting.
    runner : _Trials
        The trials of the setting.
    protocol : Any
        The audited protocol.
    spec : AuditSpec
        The protocol's audit spec.
    batch : Any
        The batch path's block, or None for the full path.
    use_llr : bool
        Whether the statistic is the log-likelihood ratio.
    used : int
        The ε audit's trials.
    differencing_trials : int
        The most whole runs for the differencing attack on the batch path.
    jobs : int
        Processes for the batch path's inference.
    mapper : Mapper | None
        Spread the batch path's inference over it instead.
    progress : Any
        Called with the number of trials done, or None.

    Returns
    -------
    tuple[int, int, int, int]
        The inference's hits and guesses, then the differencing attack's.
    """
    target = setting.target
    g = party_generator(stream_key(setting.scenario_seed, "audit-prior", target))
    truth = g.choice(len(spec.values), size=used, p=spec.prior)
    bayes_hits = bayes_n = 0
    full_views = used
    if batch is not None:
        if use_llr:
            bayes_hits, bayes_n = _spread_bayes(batch, spec, used, truth, jobs, mapper)
        full_views = min(used, differencing_trials)
        if progress is not None:
            progress(used - full_views)
    run_hits = _differencing_runs(runner, protocol, spec, target, batch, truth, used,
                                  full_views, progress)
    return (bayes_hits + run_hits[0], bayes_n + run_hits[1], run_hits[2], run_hits[3])


def _trials_target(claimed: float | None, eps: dict[str, Any], until_lower: float | None,
                   alpha: float) -> tuple[float | None, int | None]:
    """The lower bound the audit aims for and the trials it would need to reach it.

    Parameters
    ----------
    claimed : float | None
        The claimed ε.
    eps : dict[str, Any]
        The ε audit (``epsilon_audit``).
    until_lower : float | None
        The lower bound asked for, if any.
    alpha : float
        The last look's α.

    Returns
    -------
    tuple[float | None, int | None]
        The target (``until_lower``, else 95% of the smaller of the claim and the estimate;
        None without a claim) and ``trials_needed`` for it (None without a finite target).
    """
    target_tight = until_lower if until_lower is not None else (
        0.95 * min(claimed, eps["epsilon_estimate"]) if claimed else None)
    needed = None if target_tight is None or not math.isfinite(target_tight) \
        else trials_needed(eps["tpr"], eps["fpr"], target_tight, alpha)
    return target_tight, needed


def audit_setting(setting: AuditSetting, trials: int, limits: Limits | None = None,
                  progress: Any = None, path: str = "auto", jobs: int = 1,
                  until_lower: float | None = None,
                  differencing_trials: int = 2000, coins: str = "auto",
                  mapper: Mapper | None = None) -> dict[str, Any]:
    """Run every attack and the ε audit on one setting; return one audit record.

    ``path``: "batch" (the target's copies as one block: ``audit_batch``), "full" (one
    protocol run per trial), or "auto" (the batch path where it reproduces the full runs
    exactly). ``coins``: the experiment (``_Trials``): "per-trial", "fixed", or "auto" (fresh
    coins where the batch path allows, else fixed if the batch path allows that, else the full
    path with fresh coins). ``jobs``: processes for the ε audit's trials (full-path runs, or
    the batch path's blocks). ``mapper``: spread them over it instead (``Mapper``; e.g. a Dask
    cluster's tasks); either way the record is the one a single process gives.
    ``until_lower``: stop as soon as the held-out lower bound reaches it, looking at 1/8, 1/4,
    1/2 and all of ``trials``; each look spends its own share of α (α/8, α/8, α/4, α/2), so
    the bound that stops holds at 1 - α overall. The single-report inference runs as many
    trials as the ε audit took; the differencing attack, which needs the released aggregate
    of whole runs, at most ``differencing_trials`` of them on the batch path (the runtime's
    first ``DIFF_CHECK``, then the round loop's, ``_Trials.local_view``, where those agree).
    """
    if path not in ("auto", "batch", "full"):
        raise ValueError(f"--path: got {path!r}; allowed: 'auto', 'batch', 'full'")
    t0 = time.perf_counter()
    limits = limits or Limits(timeout_s=10)
    protocol = get_protocol(setting.config["protocol"])
    data = setting.config["data"]
    public = setting.public
    params = protocol.resolve(setting.config["params"], public)
    bound = protocol.bind(params, public, resolved=True)
    claim = bound.claim()
    spec = bound.audit_spec()
    if spec is None:
        raise ValueError(f"protocol {protocol.name!r} does not support the audit")
    target = setting.target
    batch, why_full, use_llr, use_float, coins = _choose_path(setting, limits, spec, path,
                                                              coins)
    runner = _Trials(setting, limits, coins)

    def pair_stats(first: int, count: int) -> PairStats:
        return _pair_stats(setting, limits, batch, spec, use_llr, use_float, progress, coins,
                           jobs, mapper, first, count)

    # 1. the ε audit on the neighbouring pair, common seeds for both rows
    t_eps = time.perf_counter()
    stats, used, eps, test, alpha = _epsilon_looks(pair_stats, trials, until_lower)
    eps_seconds = time.perf_counter() - t_eps
    flt = float_audit(stats.floats[0], stats.floats[1], alpha) if stats.floats is not None \
        else {"float_epsilon_lower": None, "float_ruled_out": None, "float_own_failures": None}

    # 2. single-report inference and differencing: target's row drawn from the prior
    bayes_hits, bayes_n, diff_hits, diff_n = _attacks(
        setting, runner, protocol, spec, batch, use_llr, used, differencing_trials, jobs,
        mapper, progress)
    claimed = claim.epsilon
    target_tight, needed = _trials_target(claimed, eps, until_lower, alpha)
    seconds = time.perf_counter() - t0
    return {
        "protocol": protocol.name, "params": params, "data": dict(data), "target": target,
        "claim_model": claim.model, "epsilon_claimed": claimed,
        "per_report_epsilon": claim.per_report_epsilon,
        "epsilon_estimate": eps["epsilon_estimate"], "epsilon_lower": eps["epsilon_lower"],
        "confidence": 1 - alpha, "tpr": eps["tpr"], "fpr": eps["fpr"], "test": test,
        "trials": used, "trials_requested": trials,
        "trials_target": target_tight, "trials_needed": needed,
        "path": "batch" if batch is not None else "full", "path_note": why_full,
        "coalition_coins": coins,
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


#: differencing runs of the batch path made by the runtime and checked against the round loop
#: in this process (``_Trials.local_view``) before it makes the others
DIFF_CHECK = 16
#: differencing runs whose keys are derived together
LOCAL_KEYS = 256


def _same_differencing(runner: _Trials, view: dict[str, Any], trial: int,
                       row: np.ndarray) -> bool:
    """Whether ``runner.local_view`` gives the differencing attack exactly what ``view``, the
    runtime's run of the same trial, gives it: the released aggregate, the parameters and
    public facts it is read with, and the colluders' rows."""
    try:
        mine = runner.local_view(trial, row)
    except Exception:  # a protocol whose loop cannot run here: the runtime makes every run
        return False
    protocol = runner.protocol
    got = []
    for v in (view, mine):
        bound = protocol.bind(v["params"], v["public"], resolved=True)
        rel = bound.released_aggregate(v["output"])
        known = {int(a): np.asarray(d["data"]) for a, d in v.get("disclosures", {}).items()}
        got.append((None if rel is None else np.asarray(rel, dtype=float), known,
                    jsonable(v["params"]), jsonable(v["public"])))
    (r0, k0, p0, u0), (r1, k1, p1, u1) = got
    return (_same_bits(r0, r1) and k0.keys() == k1.keys()
            and all(_same_bits(k0[a], k1[a]) for a in k0)
            and json.dumps([p0, u0], sort_keys=True) == json.dumps([p1, u1], sort_keys=True))


def _same_bits(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both None, or arrays of one dtype and shape with the same bytes (NaNs and signed
    zeros included)."""
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _bayes_job(args: tuple) -> tuple[int, int]:
    from ldpsim.simulator.audit.audit_batch import bayes_hits

    return bayes_hits(*args)


def _spread_bayes(batch: Any, spec: AuditSpec, first: int, truth: np.ndarray, jobs: int,
                  mapper: Mapper | None) -> tuple[int, int]:
    """The batch path's single-report inference (``audit_batch.bayes_hits``) over trials
    ``first ..``, in ranges over ``jobs`` processes or the ``mapper`` when there is one."""
    step = 1 << 16
    args = [(batch, spec, first + s, truth[s:s + step]) for s in range(0, len(truth), step)]
    if mapper is None and (jobs <= 1 or len(args) < 2):
        return _bayes_job((batch, spec, first, truth))
    parts = list(_spread(_bayes_job, args, jobs, mapper))
    return sum(h for h, _ in parts), sum(n for _, n in parts)


def _spread(fn: Callable[[tuple], Any], args: list[tuple], jobs: int,
            mapper: Mapper | None) -> Iterator[Any]:
    """``fn`` over every element of ``args``, the results in order: on the ``mapper`` if there
    is one, else in a pool of ``jobs`` forked processes."""
    if mapper is not None:
        yield from mapper(fn, args)
        return
    import multiprocessing as mp

    with mp.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(fn, args)


def _same(spec: AuditSpec, guess: int, truth: int) -> bool:
    """A guess is right when it names the true row (candidate rows may repeat)."""
    return bool(np.array_equal(spec.values[guess], spec.values[truth], equal_nan=True))


def audit_scenario(scenario: Any, out: str | Path, trials: int, target: int | None = None,
                   show_progress: bool = True, echo: Any = print, path: str = "auto",
                   jobs: int = 1, until_lower: float | None = None,
                   coins: str = "auto", mapper: Mapper | None = None
                   ) -> list[dict[str, Any]]:
    """Audit every (protocol, parameter point) of a scenario (its first repetition's config).

    Appends one JSON line per audited setting to ``OUT/audit.jsonl`` and skips settings
    already there (an interrupted audit resumes).
    """
    from ldpsim.simulator.results.progress import progress as bar

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done = stored_audits(out)
    specs = [s for s in scenario.runs() if s.repeat == 0]
    records = []
    with bar(total=len(specs) * 2 * trials, desc="audit", enabled=show_progress) as pb:
        for spec in specs:
            key = json.dumps([spec.protocol, spec.params, spec.data, spec.collusion, trials,
                              target, scenario.seed]
                             + ([until_lower] if until_lower is not None else [])
                             + ([coins] if coins != "auto" else []),
                             sort_keys=True, default=str)
            if key in done:
                records.append(done[key])
                pb.update(2 * trials)
                continue
            setting = make_setting(spec.config(), scenario.seed, target)
            rec = audit_setting(setting, trials, progress=pb.update, path=path, jobs=jobs,
                                until_lower=until_lower, coins=coins, mapper=mapper)
            rec["key"] = key
            rec["scenario"] = scenario.name
            rec["point"] = {k: v for k, v in spec.point.items() if k != "protocol"}
            append_audit(out, rec)
            records.append(rec)
    return records


#: the audit's results file in its output directory, one JSON line per audited setting
AUDIT_FILE = "audit.jsonl"


def stored_audits(out: Path) -> dict[str, dict[str, Any]]:
    """The records already in ``OUT/audit.jsonl`` by key (a torn last line from an
    interrupted audit is skipped: its setting is audited again)."""
    done: dict[str, dict[str, Any]] = {}
    jsonl = out / AUDIT_FILE
    if jsonl.exists():
        for line in jsonl.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[rec.get("key", "")] = rec
    return done


def append_audit(out: Path, rec: dict[str, Any]) -> None:
    """Append one audited setting's record to ``OUT/audit.jsonl``."""
    with (out / AUDIT_FILE).open("a") as f:
        f.write(json.dumps(jsonable(rec)) + "\n")
        f.flush()


AUDIT_COLUMNS = ["protocol", "claim_model", "curator_colludes", "colluders", "epsilon_claimed",
                 "epsilon_estimate", "epsilon_lower", "confidence", "float_epsilon_lower",
                 "flagged", "bayes_accuracy", "differencing_accuracy", "prior_baseline", "test",
                 "trials", "path", "coalition_coins", "seconds"]
