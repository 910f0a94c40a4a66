"""The orchestrator: runs a scenario's runs on a backend, scores them, records the results.

The orchestrator is the only party that sees ground truth: it builds the data set itself (from
the same seed the pools use), computes the truth summary, and evaluates the curator's public
output. Curator code never receives truth. For a large data set the truth is computed in a
process of its own while the run runs (``TruthCache.start``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import get_backend
from ldpsim.simulator.backends.machine import cores as _cores
from ldpsim.simulator.results.metrics import legend
from ldpsim.simulator.results.progress import ProgressBar, progress
from ldpsim.simulator.results.store import RESULTS_FILE, ResultStore, usable
from ldpsim.simulator.results.summary import (
    metric_names,
    privacy_spent,
    summarize,
    write_tables,
)
from ldpsim.simulator.results.table import format_table, table_columns, terminal_width
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario.scenario import RunSpec, Scenario, check_runs
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.session.keyfiles import keep_secret
from ldpsim.simulator.sweep import interrupt
from ldpsim.simulator.sweep.execute import (
    Executions,
    TruthCache,
    execute,
    execute_record,
)
from ldpsim.simulator.sweep.spending import (
    note_spending,
    recomputed_spending,
    spent_before,
    stored_runs,
)
from ldpsim.simulator.sweep.workers import ByData, Workers

#: the sweep's ``--jobs`` workers, and the order they are handed runs in (``workers``)
_Workers, _ByData = Workers, ByData


def _open_sweep(scenario: Scenario, out_dir: str | Path, echo: Any
                ) -> tuple[Scenario, list[RunSpec], ResultStore,
                           list[tuple[int, dict[str, Any]]], list[RunSpec]]:
    """Check a sweep's runs and its directory before any run, and find the runs to do.

    Parameters
    ----------
    scenario : Scenario
        The sweep's scenario.
    out_dir : str | Path
        The sweep's directory.
    echo : Any
        Told that the sweep resumes, if it does.

    Returns
    -------
    tuple
        The scenario with its secret, its runs, the directory's store, its numbered records and
        the runs not done yet.
    """
    scenario = identity.with_secret(scenario, out_dir)
    specs = scenario.runs()
    check_runs(specs)  # every error before any process starts
    get_backend(scenario.runtime["backend"]).check(scenario.runtime)
    store = ResultStore(out_dir)
    done = store.done_keys()
    numbered = store.numbered()
    # the fresh secret of the directory: read, or drawn and written before any run
    keep_secret(scenario.runtime, out_dir, has_records=bool(numbered))
    identity.check(out_dir, scenario, has_records=bool(numbered),
                   order=[s.key for s in specs])
    # every stored record one of the directory's runs, or the sweep stops here (none is
    # averaged in, none counts as done)
    identity.check_records(out_dir, numbered)
    todo = [s for s in specs if s.key not in done]
    if done:
        echo(f"resuming: {len(specs) - len(todo)} of {counted(len(specs), 'run')} already in "
             f"{store.path}", file=sys.stderr)
    return scenario, specs, store, numbered, todo


def _start_workers(scenario: Scenario, todo: list[RunSpec], jobs: int, view_dir: Path,
                   per_round: Any, out_dir: str | Path, echo: Any) -> tuple[Any, Any]:
    """The sweep's workers (Dask, or ``jobs`` forked processes), or else the backend that runs
    the runs in this process (none when no run is left).

    Parameters
    ----------
    scenario : Scenario
        The sweep's scenario.
    todo : list[RunSpec]
        The runs not done yet.
    jobs : int
        The worker processes of a local sweep.
    view_dir : Path
        Where the runs' views go.
    per_round : Any
        The scenario's ``[output] per_round``.
    out_dir : str | Path
        The sweep's directory.
    echo : Any
        Where the workers and the backend write their notes.

    Returns
    -------
    tuple[Any, Any]
        The workers (``_Workers`` or ``engine_dask.DaskSweep``) and the backend, either None.
    """
    if scenario.runtime["executor"] != "local" and todo:  # the one other executor: Dask
        from ldpsim.simulator.sweep.engine_dask import DaskSweep  # its client: for Dask only

        return DaskSweep(scenario.runtime, view_dir, per_round, Path(out_dir), echo), None
    if jobs > 1:  # forked before the progress bar exists (it may run a thread)
        return _Workers(jobs, scenario.runtime, view_dir, per_round, Path(out_dir),
                        full=False), None
    if todo:  # e.g. the hosts backend binds its endpoint: not to resume a finished sweep
        return None, get_backend(scenario.runtime["backend"]).build(scenario.runtime, echo)
    return None, None


def _run_todo(scenario: Scenario, specs: list[RunSpec], todo: list[RunSpec],
              store: ResultStore, workers: Any, backend: Any, truth: TruthCache,
              view_dir: Path, per_round: Any, spending: dict[Any, dict[str, float]],
              lifetime: bool, show_progress: bool, bar: ProgressBar | None = None) -> None:
    """Run the runs ``todo`` (on the workers, else here on the backend), storing each record
    as it comes, behind a progress bar.

    Parameters
    ----------
    scenario : Scenario
        The sweep's scenario.
    specs : list[RunSpec]
        All the sweep's runs.
    todo : list[RunSpec]
        The runs not done yet.
    store : ResultStore
        The directory's store.
    workers : Any
        The workers (``_Workers`` or ``engine_dask.DaskSweep``), or None.
    backend : Any
        The backend that runs the runs in this process, or None.
    truth : TruthCache
        The data sets' ground truths.
    view_dir : Path
        Where the runs' views go.
    per_round : Any
        The scenario's ``[output] per_round``.
    spending : dict[Any, dict[str, float]]
        What the agents spent per data set, kept up to date when ``lifetime``.
    lifetime : bool
        Whether the agents have a lifetime budget.
    show_progress : bool
        Whether to show the progress bar (with ``[runtime] progress``).
    bar : ProgressBar | None
        A bar of the caller's to advance instead (left open): told first, in one ``update``,
        the runs already done, then each run as it finishes.
    """
    executions = Executions()  # a sweep point's coalitions analyse one execution
    with (contextlib.nullcontext(bar) if bar is not None else
          progress(len(specs), scenario.name, enabled=show_progress and
                   scenario.runtime["progress"])) as bar:
        bar.update(len(specs) - len(todo))
        finished = (workers.results(todo) if workers is not None else
                    ((spec, execute_record(spec, truth, backend, view_dir, per_round,
                                           spent_before(spending, spec), executions))
                     for spec in todo))
        for spec, rec in finished:
            store.append(rec, workers.lines.pop(spec.key, None)
                         if isinstance(workers, _Workers) else None)
            if lifetime:
                note_spending(spending, rec, spec)
            interrupt.check()  # a Ctrl-C a finaliser swallowed during the run
            if bar.shows:
                m = rec["metrics"]
                bar.set_postfix_str(f"{spec.protocol} " + " ".join(
                    f"{k}={v:.3g}" for k, v in list(m.items())[:2]))
            bar.update(1)


def _close_sweep(truth: TruthCache, store: ResultStore, workers: Any, backend: Any) -> None:
    """Close the truth cache, sync the store, close the workers and the backend: each step
    taken even when one before it fails.

    Parameters
    ----------
    truth : TruthCache
        The data sets' ground truths.
    store : ResultStore
        The directory's store.
    workers : Any
        The workers, or None.
    backend : Any
        The backend, or None.
    """
    truth.close()
    try:  # the records not yet fsync'ed: at the end, on Ctrl-C, on a failed run
        store.sync()
    finally:
        try:
            if workers is not None:
                workers.close()
        finally:
            if backend is not None:
                backend.close()


def run_scenario(scenario: Scenario, out_dir: str | Path, show_progress: bool = True,
                 echo=print, include_degraded: bool = False, bar: ProgressBar | None = None
                 ) -> tuple[list[dict[str, Any]], Path]:
    """Run (or resume) every run of a scenario; write results.jsonl, summary.csv,
    per_round.csv and plots (without matplotlib, ``echo`` is told so in one line).

    Degraded runs (that lost agents) stored earlier are redone. The summary and plots leave
    degraded runs out unless ``include_degraded``; the returned records are all the stored ones
    (the latest of each key), degraded included.

    With no secret given (``[runtime] secret``), the sweep's runs share a fresh master secret
    kept in ``out_dir`` as ``secret.key`` (``identity.with_secret``), drawn by the first sweep
    into it and read by those that resume it; ``scenario`` itself is left as it is.

    ``bar``, a progress bar of the caller's spanning more than this sweep (``ldpsim
    reproduce``), is advanced in place of the sweep's own: first by the runs already done, in
    one ``update``, then by each run as it finishes.
    """
    scenario, specs, store, numbered, todo = _open_sweep(scenario, out_dir, echo)
    jobs = resolve_jobs(scenario.runtime, len(todo))
    lifetime = scenario.agents.get("lifetime_epsilon") is not None
    if lifetime:
        jobs = 1  # the agents' lifetime budget spans the sweep: its runs go in order
    # what the agents spent per data set in the stored runs (recomputed, never read from the
    # records), kept up to date as runs finish
    spending = (_stored_spending(out_dir, numbered, todo, echo) if lifetime and todo
                and get_backend(scenario.runtime["backend"]).one_run_pools else {})
    truth = TruthCache()
    backend = None
    workers: Any = None  # _Workers, or engine_dask.DaskSweep
    view_dir = Path(out_dir) / "views"
    per_round = scenario.output["per_round"]
    try:
        workers, backend = _start_workers(scenario, todo, jobs, view_dir, per_round, out_dir,
                                          echo)
        _run_todo(scenario, specs, todo, store, workers, backend, truth, view_dir, per_round,
                  spending, lifetime, show_progress, bar)
    finally:
        _close_sweep(truth, store, workers, backend)
        # in the sweep's run order, however the runs finished (--jobs): the summary's rows
        # and its means do not depend on which worker was first
        records = in_run_order(store.records(), specs)
        if records:
            write_tables(out_dir, usable(records, include_degraded))
    summary = Path(out_dir) / "summary.csv"
    if scenario.output["plots"]:
        # once, after the last run (never between runs), here: a sweep's figures are what its
        # author runs it for; a one-point sweep has none and imports no matplotlib
        from ldpsim.simulator.results.plots import plot  # the figures' modules: to draw only

        plot(out_dir, usable(records, include_degraded), scenario.plot,
             note=lambda line: echo(line, file=sys.stderr))
    return records, summary


def _stored_spending(out_dir: str | Path, numbered: list[tuple[int, dict[str, Any]]],
                     todo: list[RunSpec], echo=print) -> dict[Any, dict[str, float]]:
    """What the agents spent in the stored runs the runs ``todo`` meet, recomputed by
    executing them again in order (``spending.stored_runs``, ``spending.recomputed_spending``),
    never read from their records."""
    runs = stored_runs(out_dir, numbered, todo)
    if not runs:
        return {}
    echo(f"lifetime budget: recomputing what the agents spent in "
         f"{counted(len(runs), 'stored run')}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ldpsim-spend-") as scratch:
        fresh = rerun([spec for _, _, spec in runs], Path(scratch), spending=True)
        return recomputed_spending(runs, fresh, Path(out_dir) / RESULTS_FILE)


def in_run_order(records: list[dict[str, Any]], specs: list[RunSpec] | list[str]
                 ) -> list[dict[str, Any]]:
    """``records`` in the order of ``specs`` (or of their keys: the order a serial run writes
    them); records of other runs (an earlier, wider sweep in the same directory) first, in
    their stored order."""
    index = {(s if isinstance(s, str) else s.key): i for i, s in enumerate(specs)}
    return sorted(records, key=lambda r: index.get(r.get("key"), -1))


def auto_jobs(runtime: dict[str, Any], runs: int) -> int:
    """``jobs = "auto"``: as many runs at once as this machine's cores hold, each run taking
    the cores its backend keeps busy (1 inproc, P + 1 on the processes backend), at most
    ``runs`` and at least 1 (so 1 on a 1-core machine, and always 1 with the hosts backend)."""
    backend = get_backend(runtime["backend"])
    if not backend.parallel_runs:
        return 1
    busy = max(1, backend.busy_cores(runtime))
    return max(1, min(_cores() // busy, runs))


def resolve_jobs(runtime: dict[str, Any], runs: int) -> int:
    """The worker processes a local sweep of ``runs`` runs uses (``[runtime] jobs``)."""
    jobs = runtime["jobs"]
    return auto_jobs(runtime, runs) if jobs == "auto" else min(int(jobs), max(runs, 1))


def rerun(specs: list[RunSpec], scratch: Path, jobs: int = 1, spending: bool = False):
    """Yield ``(spec, record)`` for each of ``specs`` executed again (``ldpsim verify``), on
    ``jobs`` worker processes (each spec's own backend, which must be a local one; at most one
    kind per call), records as ``run_scenario`` stores them. A failed run yields ``(spec,
    RunFailed)``. ``scratch``: where the workers put views and note failures (never a
    results directory).

    ``spending``: replay the agents' lifetime odometer: the specs run one after the other, in
    their given order (the order they were first executed), each with what the runs before it
    spent on its data set as this re-execution measures it (``spending.spent_before``), never as a
    stored record says."""
    if not specs:
        return
    runtime = specs[0].runtime
    if jobs > 1 and len(specs) > 1 and get_backend(runtime["backend"]).parallel_runs \
            and not spending:
        workers = _Workers(min(jobs, len(specs)), runtime, scratch, True, scratch)
        try:
            done: set[str] = set()
            try:
                for spec, rec in workers.results(specs):
                    done.add(spec.key)
                    workers.lines.pop(spec.key, None)  # verify compares records, not lines
                    yield spec, rec
            except RunFailed as e:
                for spec in specs:
                    if spec.key not in done:
                        yield spec, RunFailed(str(e).splitlines()[0])
        finally:
            workers.close()
        return
    truth = TruthCache()
    backend = get_backend(runtime["backend"]).build(runtime, print)
    book: dict[Any, dict[str, float]] = {}
    executions = Executions()
    try:
        for spec in specs:
            try:
                rec = execute(spec, truth, backend,
                              spent_before=spent_before(book, spec) if spending else 0.0,
                              executions=executions)
            except RunFailed as e:
                yield spec, e
                continue
            if spending:
                note_spending(book, rec, spec)
            yield spec, rec
    finally:
        truth.close()
        backend.close()


def print_summary(records: list[dict[str, Any]], echo=print,
                  include_degraded: bool = False, max_rows: int | None = None,
                  width: int | None | str = "auto") -> None:
    """Print the sweep's summary table, every row (or ``max_rows``), each metric as mean ± std
    over the repeats (degraded runs left out unless ``include_degraded``), grouped into tables
    and its legend wrapped to ``width`` characters (None: one table; "auto": the terminal's
    width when ``echo`` is ``print`` to a terminal, ``table.terminal_width``)."""
    if width == "auto":
        width = terminal_width() if echo is print else None
    shown = usable(records, include_degraded)
    cols, rows = summarize(shown)
    echo(format_table(cols, rows, max_rows=max_rows, std=True, width=width))
    protocols = list(dict.fromkeys(str(r.get("protocol")) for r in shown))
    described = metric_names(cols) + [c for c in table_columns(cols) if c.startswith("virtual.")]
    for line in legend(described, protocols):  # what each column means; which way
        for part in _wrapped(line, width - 2 if width else None):
            echo(f"  {part}")
    spent = privacy_spent(shown)
    if spent is not None:
        raw = spent["runs_without_local_max"]
        text = (f"privacy: each repetition's data set served up to "
                f"{counted(spent['runs_per_data_set_max'], 'run')} of this sweep with a local "
                f"claim, each with coins of its own; over them an agent spent at most epsilon = "
                f"{spent['epsilon_per_agent_max']:.4g} on its data "
                f"({counted(spent['data_sets'], 'data set')})"
                + (f"; and up to {counted(raw, 'run')} without one sent its "
                   "answers to the curator unnoised" if raw else ""))
        echo("\n".join(_wrapped(text, width)))


def _wrapped(text: str, width: int | None) -> list[str]:
    """``text`` over lines of at most ``width`` characters, the later ones indented by two
    (None: one line)."""
    return (textwrap.wrap(text, width, subsequent_indent="  ") or [text]) if width else [text]
