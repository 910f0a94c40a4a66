"""The privacy audit's harness: which path the trials take, the attacks, the records.

``audit_setting`` audits one (protocol, parameter point): the ε audit on a pair of neighbouring
rows, the floating-point attack in the same trials, the single-report inference and the
differencing attack (``simulator.audit.audit``), each trial either a full inproc run of the
protocol (the full path) or one row of a block of the target's copies (the batch path,
``simulator.audit.audit_batch``), whichever ``path`` asks for, spread over ``jobs`` processes or a
``mapper`` (a Dask cluster's tasks) in ranges of trials; ``audit_scenario``
audits every setting of a scenario into ``audit.jsonl`` and resumes an interrupted audit.
The setting and its trials are ``audit_trials``' (``make_setting``, ``Trials``), the ε audit's
statistics over ranges of trials ``audit_epsilon``'s (``pair_stats``, ``trials_needed``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.protocols import get_protocol
from ldpsim.protocols.base import AuditSpec
from ldpsim.protocols.rng import party_generator, stream_key
from ldpsim.simulator.audit.audit import (
    bayes_guess,
    contributions,
    differencing_guess,
    float_audit,
    float_check,
    llr_statistic,
)
from ldpsim.simulator.audit.audit_batch import CHECK_TRIALS, BatchTrials, bayes_hits
from ldpsim.simulator.audit.audit_epsilon import (  # noqa: F401 - re-exported: expected_lower
    Mapper,
    PairStats,
    batch_pair_stats,
    epsilon_looks,
    expected_lower,
    full_pair_stats,
    pair_stats,
    spread,
    trials_needed,
)
from ldpsim.simulator.audit.audit_trials import (  # noqa: F401 - re-exported: target_coins
    COINS,
    AuditSetting,
    Trials,
    check_coins,
    make_setting,
    target_coins,
)
from ldpsim.simulator.results.progress import progress as bar
from ldpsim.simulator.results.store import jsonable
from ldpsim.simulator.session import Limits


def _choose_path(setting: AuditSetting, limits: Limits, spec: AuditSpec, path: str,
                 coins: str = "auto") -> tuple[Any, str, bool, bool, str]:
    """(batch trials or None, why the full path is used or how the batch differs, use_llr,
    use_float, the coalition's coins), deciding from trial 0 and, for the batch path,
    checking it against full runs of the same experiment (``audit_batch``).

    ``coins`` "auto" tries the batch with fresh coalition coins per trial first, then with
    the coalition's coins fixed (where later rounds read broadcasts that change from run to
    run), and else keeps the full path with fresh coins.
    """
    check_coins(coins, auto=True)
    runner = Trials(setting, limits)
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
            full = full_pair_stats(setting, limits, 0, CHECK_TRIALS, spec, use_llr,
                                    use_float, coins=mode, reports=True)
            fast = batch_pair_stats(batch, 0, CHECK_TRIALS, spec, use_llr, use_float,
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


def _differencing_runs(runner: Trials, protocol: Any, spec: AuditSpec, target: int,
                       batch: Any, truth: np.ndarray, used: int, full_views: int,
                       progress: Any) -> tuple[int, int, int, int]:
    """The differencing attack (and on the full path the single-report inference) in the
    whole runs after the ε audit's ``used`` trials.

    Parameters
    ----------
    runner : Trials
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


def _attacks(setting: AuditSetting, runner: Trials, protocol: Any, spec: AuditSpec,
             batch: Any, use_llr: bool, used: int, differencing_trials: int, jobs: int,
             mapper: Mapper | None, progress: Any) -> tuple[int, int, int, int]:
    """The single-report inference and the differencing attack, the target's row drawn from
    the prior, in the trials after the ε audit's ``used`` ones.

    Parameters
    ----------
    setting : AuditSetting
        The audited setting.
    runner : Trials
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
    exactly). ``coins``: the experiment (``Trials``): "per-trial", "fixed", or "auto" (fresh
    coins where the batch path allows, else fixed if the batch path allows that, else the full
    path with fresh coins). ``jobs``: processes for the ε audit's trials (full-path runs, or
    the batch path's blocks). ``mapper``: spread them over it instead (``Mapper``; e.g. a Dask
    cluster's tasks); either way the record is the one a single process gives.
    ``until_lower``: stop as soon as the held-out lower bound reaches it, looking at 1/8, 1/4,
    1/2 and all of ``trials``; each look spends its own share of α (α/8, α/8, α/4, α/2), so
    the bound that stops holds at 1 - α overall. The single-report inference runs as many
    trials as the ε audit took; the differencing attack, which needs the released aggregate
    of whole runs, at most ``differencing_trials`` of them on the batch path (the runtime's
    first ``DIFF_CHECK``, then the round loop's, ``Trials.local_view``, where those agree).
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
    runner = Trials(setting, limits, coins)

    def stats_of(first: int, count: int) -> PairStats:
        return pair_stats(setting, limits, batch, spec, use_llr, use_float, progress, coins,
                           jobs, mapper, first, count)

    # 1. the ε audit on the neighbouring pair, common seeds for both rows
    t_eps = time.perf_counter()
    stats, used, eps, test, alpha = epsilon_looks(stats_of, trials, until_lower)
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
#: in this process (``Trials.local_view``) before it makes the others
DIFF_CHECK = 16
#: differencing runs whose keys are derived together
LOCAL_KEYS = 256


def _same_differencing(runner: Trials, view: dict[str, Any], trial: int,
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
    return bayes_hits(*args)


def _spread_bayes(batch: Any, spec: AuditSpec, first: int, truth: np.ndarray, jobs: int,
                  mapper: Mapper | None) -> tuple[int, int]:
    """The batch path's single-report inference (``audit_batch.bayes_hits``) over trials
    ``first ..``, in ranges over ``jobs`` processes or the ``mapper`` when there is one."""
    step = 1 << 16
    args = [(batch, spec, first + s, truth[s:s + step]) for s in range(0, len(truth), step)]
    if mapper is None and (jobs <= 1 or len(args) < 2):
        return _bayes_job((batch, spec, first, truth))
    parts = list(spread(_bayes_job, args, jobs, mapper))
    return sum(h for h, _ in parts), sum(n for _, n in parts)


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
