"""A sweep on a Dask cluster (``[runtime] executor = "dask"``, ``ldpsim run --executor dask``).

Each task runs a few runs of the sweep (``run_task``; each run is ``run_one``: a ``RunSpec`` in,
its record out), executed by the function a ``--jobs`` worker runs (``execute.execute_record``) on a
backend each worker process builds once; the records are therefore those of a serial sweep, bit
for bit. Runs that share a data set go to one task, whose worker then builds it and computes its
ground truth once; small runs go several to a task, as a task costs the scheduler a few ms
(``batches``). The orchestrator
keeps a window of tasks in flight and writes each record as it arrives (``DaskSweep.results``),
so an interrupted sweep resumes like a local one.

Failures: a run that fails returns why (a run failure is not retried: it would fail again; the
other runs of its task go on). A worker lost mid-task makes the scheduler run the task once more
on another worker; a
second loss fails it (``KilledWorker``; a LocalCluster started here allows one loss, a running
scheduler its own ``distributed.scheduler.allowed-failures``). As with ``--jobs``, a failed
run does not stop the others: the sweep runs to its end, every failed run is appended to
``OUT/failed.jsonl`` (key and reason) and not to the results, and ``results`` then raises
``RunFailed`` naming them; the same command redoes them. No run is written twice: each task's
result is read once.

The data file of a scenario (``data.path``) must be readable at the same path on every worker
(a shared file system, or a copy at the same place); ``check_data`` asks every worker before
the first task and names the workers that cannot read it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ldpsim.protocols.datasets import data_dir, named
from ldpsim.simulator.backends import get_backend
from ldpsim.simulator.backends.dask_client import DaskConnection, quiet_logs, tune_worker_malloc
from ldpsim.simulator.scenario.scenario import RunSpec
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.sweep.execute import (
    TruthCache,
    data_signature,
    execute_record,
    failed_runs,
    record_failure,
)

from ldpsim import environment

#: tasks in flight per worker thread (the rest are submitted as results come back)
WINDOW_PER_THREAD = 2
#: tasks per worker thread a sweep is cut into (``batches``)
TASKS_PER_THREAD = 8

#: per worker process: the backend and truth cache of each runtime it served
_WORKER_STATE: dict[str, tuple[Any, Any]] = {}


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):  # not in a worker (a direct call)
        return f"pid {os.getpid()}"


def _state(runtime: dict[str, Any]) -> tuple[Any, Any]:
    """This worker process's backend and truth cache for ``runtime`` (built at its first run)."""
    sig = json.dumps(runtime, sort_keys=True, default=str)
    if not _WORKER_STATE:  # this worker's first run
        tune_worker_malloc()
    if sig not in _WORKER_STATE:
        # no truth beside the run: the worker's other threads (or workers) hold the cores
        _WORKER_STATE[sig] = (get_backend(runtime["backend"]).build(runtime, lambda *a, **k: None),
                              TruthCache(beside=False))
    return _WORKER_STATE[sig]


def run_one(spec: RunSpec, runtime: dict[str, Any], view_dir: Path,
            per_round: bool) -> tuple[str, Any]:
    """One run on a worker: ("ok", record), ("failed", message) or ("error", traceback), the
    answers of a ``--jobs`` worker, each failure naming the worker."""
    try:
        backend, truth = _state(runtime)
        return "ok", execute_record(spec, truth, backend, view_dir, per_round)
    except RunFailed as e:
        return "failed", f"run {spec.key} on worker {_worker_address()}: {e}"
    except Exception:
        return "error", (f"run {spec.key} failed on worker {_worker_address()}:\n"
                         f"{traceback.format_exc()}")


def run_task(specs: list[RunSpec], runtime: dict[str, Any], view_dir: Path,
             per_round: bool) -> list[tuple[str, Any]]:
    """A task: its runs one after another on this worker (``run_one`` each, in order)."""
    return [run_one(spec, runtime, view_dir, per_round) for spec in specs]


def batches(specs: list[RunSpec], threads: int) -> list[list[RunSpec]]:
    """The runs as tasks: runs that share a data set together (the worker builds it, and
    computes its ground truth, once), about ``TASKS_PER_THREAD`` tasks per worker thread (a
    task costs the scheduler a few ms: tiny runs go several to a task), no task larger than
    that share, so the cluster stays busy to the end."""
    size = max(1, math.ceil(len(specs) / (max(1, threads) * TASKS_PER_THREAD)))
    groups: dict[str, list[RunSpec]] = {}
    for s in specs:
        groups.setdefault(data_signature(s.data, s.seed), []).append(s)
    out: list[list[RunSpec]] = []
    batch: list[RunSpec] = []
    for group in groups.values():
        for i in range(0, len(group), size):
            chunk = group[i:i + size]
            if batch and len(batch) + len(chunk) > size:  # a data set is not split needlessly
                out.append(batch)
                batch = []
            batch.extend(chunk)
    if batch:
        out.append(batch)
    return out


def _readable(path: str) -> str:
    """On a worker: "" if ``path`` is a readable file there, else why not (a named data set,
    ``data:NAME/...``, in the worker's own data folder: its ``LDPSIM_DATA``)."""
    rel = named(path)
    p = data_dir() / rel if rel is not None else Path(path)
    if not p.exists():
        return "no such file" if rel is None else f"no {p} (set {environment.DATA} on it)"
    if not p.is_file() and rel is None:
        return "not a file"
    if not os.access(p, os.R_OK):
        return "not readable (permissions)"
    return ""


def data_paths(specs: list[RunSpec]) -> list[str]:
    """The data files the runs read (``data.path``), each once, in run order."""
    seen: dict[str, None] = {}
    for s in specs:
        path = s.data.get("path")
        if isinstance(path, str) and path:
            seen.setdefault(path, None)
    return list(seen)


class DaskSweep:
    """The runs of a sweep as tasks on a Dask cluster; ``results`` yields their records.

    Parameters
    ----------
    runtime : dict
        The scenario's validated ``[runtime]`` table (its ``dask_address``, from ``[dask]
        address``, names the cluster).
    view_dir : Path
        Where runs save their adversary view (on the worker's file system).
    per_round : bool
        Whether records keep ``comm.per_round``.
    out_dir : Path
        The results directory (``failed.jsonl`` goes there).
    echo : callable
        Progress lines for the user.
    """

    def __init__(self, runtime: dict[str, Any], view_dir: Path, per_round: bool,
                 out_dir: Path, echo: Callable[..., Any] = print) -> None:
        self.runtime = runtime
        self.view_dir = view_dir
        self.per_round = per_round
        self.out_dir = Path(out_dir)
        t0 = time.perf_counter()
        self.conn = DaskConnection(runtime["dask_address"])
        self.client = self.conn.client
        self._futures: list[Any] = []
        workers = self.conn.workers()
        #: how long connecting (and, for local / local:N, starting the cluster) took: apart
        #: from the sweep's own time (``--dask tcp://HOST:PORT`` reuses a running cluster)
        self.startup_s = time.perf_counter() - t0
        started = runtime["dask_address"] in ("", "local") or \
            str(runtime["dask_address"]).startswith("local:")
        echo(f"dask: {counted(len(workers), 'worker')}, "
             f"{counted(self.conn.threads(), 'thread')} at "
             f"{self.client.scheduler.address} ({'started' if started else 'connected'} in "
             f"{self.startup_s:.1f} s, before the first run)")
        # the task key names the run and what makes its record (runtime, output choices), so
        # two sweeps sharing a cluster never share a task unless they would share its record
        self._tag = hashlib.sha256(json.dumps(
            [runtime, str(view_dir), per_round], sort_keys=True, default=str).encode()
        ).hexdigest()[:10]

    def check_data(self, specs: list[RunSpec]) -> None:
        """RunFailed naming every worker that cannot read a data file the runs need."""
        for path in data_paths(specs):
            answers = self.client.run(_readable, path)
            bad = {w: why for w, why in answers.items() if why}
            if bad:
                raise RunFailed(
                    f"data.path {path!r} cannot be read on {len(bad)} of {len(answers)} Dask "
                    "workers: " + "; ".join(f"worker {w}: {why}" for w, why in sorted(
                        bad.items())) + ". Every worker reads the file itself: put it on a "
                    "file system they share, or at the same path on every machine")

    def results(self, specs: list[RunSpec]) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
        """Yield (spec, record) as the tasks finish; at the end, RunFailed naming the runs
        that failed (recorded in ``failed.jsonl``, not in the results)."""
        from distributed import as_completed

        self.check_data(specs)
        threads = self.conn.threads()
        pending = iter(batches(specs, threads))
        by_key: dict[str, list[RunSpec]] = {}

        def submit(batch: list[RunSpec]) -> Any:
            fut = self.client.submit(
                run_task, batch, self.runtime, self.view_dir, self.per_round,
                key=f"ldpsim-runs-{batch[0].key}-{len(batch)}-{self._tag}", pure=False,
                retries=1)
            by_key[fut.key] = batch
            self._futures.append(fut)
            return fut

        first = [submit(b) for _, b in zip(range(WINDOW_PER_THREAD * threads), pending,
                                           strict=False)]
        failed: list[tuple[RunSpec, str]] = []
        done = as_completed(first, loop=self.client.loop)
        for fut in done:
            batch = by_key.pop(fut.key)
            try:
                answers = fut.result()
            except Exception as e:  # KilledWorker (lost twice), a cancelled task, ...
                answers = [("failed", f"run {s.key}: {type(e).__name__}: {e}") for s in batch]
            fut.release()
            self._futures.remove(fut)
            nxt = next(pending, None)
            if nxt is not None:
                done.add(submit(nxt))
            for spec, (status, payload) in zip(batch, answers, strict=True):
                if status == "ok":
                    yield spec, payload
                else:
                    failed.append((spec, payload))
                    record_failure(self.out_dir, spec, payload)
        if failed:
            raise failed_runs(failed, len(specs), self.out_dir, "on the Dask cluster")

    def close(self) -> None:
        """Cancel the tasks still under way (Ctrl-C, a failure) and close the client; a sweep
        so abandoned is closed without a word from Dask's loggers (a LocalCluster's scheduler
        and nannies would log every task and worker they stop)."""
        abandoned = bool(self._futures)
        with quiet_logs(abandoned):
            try:
                if self._futures:
                    self.client.cancel(self._futures)
                    self._futures.clear()
            finally:
                self.conn.close(quiet=abandoned)
