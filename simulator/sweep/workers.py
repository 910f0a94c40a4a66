"""The ``--jobs`` workers of a local sweep: forked processes, each with its own backend and
truth cache, running the runs the orchestrator hands them in small batches.

A batch is a few runs of the sweep a worker executes one after the other, exactly as the serial
loop does (``execute.execute_record``), answering with each run's outcome: its record and the
line ``results.jsonl`` holds for it, computed in the worker, or why it failed. Batches are sized
so that one takes about ``BATCH_S`` seconds (tiny runs: many to a batch, so the orchestrator
handles a message per batch, not per run; long runs: one), and never so large that the last
runs of a sweep wait on one worker while another idles. A run that fails fails alone: the
other runs of its batch are recorded.
"""

from __future__ import annotations

import collections
import contextlib
import math
import multiprocessing as mp
import os
import time
import traceback
from multiprocessing import forkserver
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import get_backend
from ldpsim.simulator.backends.transport import die_with_parent, start_child
from ldpsim.simulator.results.store import record_line
from ldpsim.simulator.scenario.scenario import RunSpec
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.sweep.execute import (
    Executions,
    TruthCache,
    data_signature,
    execute_record,
    failed_runs,
    record_failure,
)

#: batches a ``--jobs`` worker holds at once: one running, the next waiting in its pipe
AHEAD = 2
#: the seconds of work a batch is sized for (from the runs' times so far)
BATCH_S = 0.05
#: the most runs in one batch
MAX_BATCH = 64


def job_worker(conn, runtime: dict[str, Any], view_dir: Path, per_round: bool,
               full: bool = True) -> None:
    """A ``--jobs`` worker: its own backend and truth cache; runs the batches of specs ``conn``
    sends (None: stop), answering each with its seconds and, per spec, ("ok", (record, line)),
    ("failed", message) or ("error", traceback). ``full``: whole records, else only the
    fields the orchestrator reads (``stub``) beside each line.

    Parameters
    ----------
    conn : Connection
        The worker's end of its pipe to the orchestrator.
    runtime : dict
        The sweep's ``[runtime]`` (its backend).
    view_dir : Path
        Where the runs' views go.
    per_round : bool
        The scenario's ``[output] per_round``.
    full : bool
        Whether to send whole records.
    """
    die_with_parent()  # no Ctrl-C traceback: the orchestrator stops the workers
    _forget_forkserver()
    truth = TruthCache(beside=False)
    executions = Executions()
    backend = None
    try:
        backend = get_backend(runtime["backend"]).build(runtime, print)
        while True:
            batch = conn.recv()
            if batch is None:
                break
            t0 = time.perf_counter()
            out = [_outcome(spec, truth, backend, view_dir, per_round, executions, full)
                   for spec in batch]
            conn.send((time.perf_counter() - t0, out))
    except (EOFError, OSError):  # the orchestrator is gone
        pass
    finally:
        truth.close()
        if backend is not None:
            backend.close()
        conn.close()


def stub(record: dict[str, Any]) -> dict[str, Any]:
    """What the orchestrator of a sweep reads of a record a worker made, beside its line: its
    key, status and metrics."""
    return {k: record[k] for k in ("key", "status", "metrics") if k in record}


def _outcome(spec: RunSpec, truth: TruthCache, backend: Any, view_dir: Path, per_round: bool,
             executions: Executions, full: bool) -> tuple[str, Any]:
    """One run of a batch: ("ok", (record or its ``stub``, line)), or why it failed."""
    try:
        rec = execute_record(spec, truth, backend, view_dir, per_round, executions=executions)
        return "ok", (rec if full else stub(rec), record_line(rec))
    except RunFailed as e:
        return "failed", str(e)
    except BaseException:
        return "error", traceback.format_exc()


def _forget_forkserver() -> None:
    """In a forked worker: drop the parent's fork server (not this process's child, so
    unusable here); the worker's own starts at its first ``processes`` run."""
    fs = forkserver._forkserver
    if fs._forkserver_alive_fd is not None:
        with contextlib.suppress(OSError):
            os.close(fs._forkserver_alive_fd)
    fs._forkserver_address = fs._forkserver_alive_fd = fs._forkserver_pid = None


class ByData:
    """The runs still to hand out, each worker given runs of the data sets it has built.

    Runs that share a data set (the protocols and parameter points of one repetition) share
    its ground truth, which a worker's ``TruthCache`` computes once; handed out in run order,
    two workers would each compute most truths (at n = 10^5 a truth costs about as much as an
    inproc run). ``take`` prefers, among the next ``LOOKAHEAD`` runs, one whose data set the
    worker has built, then one no other worker has, then the next in order. Only the order
    in which runs start changes: records, and the summary (in run order), do not.
    """

    LOOKAHEAD = 64

    def __init__(self, specs: list[RunSpec]) -> None:
        self.specs = specs
        self.sigs = [data_signature(s.data, s.seed) for s in specs]
        self.taken = [False] * len(specs)
        self.head = 0  # every run before it is taken
        self.left = len(specs)
        self.owner: dict[str, Any] = {}  # data set -> the worker that built it first

    def take(self, worker: Any) -> RunSpec | None:
        """The next run for ``worker`` (None: all taken)."""
        while self.head < len(self.specs) and self.taken[self.head]:
            self.head += 1
        if self.head == len(self.specs):
            return None
        window = [i for i in range(self.head, min(len(self.specs), self.head + self.LOOKAHEAD))
                  if not self.taken[i]]
        owner = self.owner
        pick = next((i for i in window if owner.get(self.sigs[i]) is worker),
                    next((i for i in window if self.sigs[i] not in owner), self.head))
        self.taken[pick] = True
        self.left -= 1
        owner.setdefault(self.sigs[pick], worker)
        return self.specs[pick]

    def batch(self, worker: Any, size: int) -> list[RunSpec]:
        """Up to ``size`` runs for ``worker`` (``take``; empty: all taken)."""
        out = []
        while len(out) < size:
            spec = self.take(worker)
            if spec is None:
                break
            out.append(spec)
        return out


class Workers:
    """``jobs`` forked worker processes, each running batches of specs (``job_worker``).

    ``full``: the records they send are whole (``ldpsim verify`` compares them), else stubs
    (a sweep stores each record's line, computed in the worker)."""

    def __init__(self, jobs: int, runtime: dict[str, Any], view_dir: Path,
                 per_round: bool, out_dir: Path, full: bool = True) -> None:
        ctx = mp.get_context("fork")
        self.out_dir = out_dir  # where failed runs are recorded (``failed.jsonl``)
        self._ok = False  # whether every spec finished (then ``close`` lets them exit)
        self.lines: dict[str, str] = {}  # each record's results.jsonl line, by run key
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.per_run = 0.0  # seconds per run so far (0: none finished): sizes the batches
        try:
            for _ in range(jobs):
                here, there = ctx.Pipe()
                proc = ctx.Process(target=job_worker, name="ldpsim-job",
                                   args=(there, runtime, view_dir, per_round, full))
                try:
                    start_child(proc)  # SIGINT blocked across the fork
                finally:
                    there.close()
                self.procs.append(proc)
                self.conns.append(here)
        except BaseException:
            self.close(kill=True)
            raise

    def _size(self, pending: ByData) -> int:
        """The runs of the next batch: about ``BATCH_S`` seconds of them, at most an eighth of
        each worker's share of the runs left (the last runs spread over every worker)."""
        if self.per_run <= 0:
            return 1
        fair = pending.left // (8 * len(self.conns))
        return max(1, min(MAX_BATCH, fair, math.floor(BATCH_S / self.per_run)))

    def _send(self, conn: Any, pending: ByData, busy: dict[Any, Any]) -> None:
        """Hand ``conn``'s worker its next batch, if runs are left."""
        batch = pending.batch(conn, self._size(pending))
        if batch:
            conn.send(batch)
            busy.setdefault(conn, collections.deque()).append(batch)

    def results(self, specs: list[RunSpec]):
        """Yield (spec, record) as the workers finish them. A run that fails is recorded in
        ``failed.jsonl`` and the others go on (those of its batch too); at the end
        ``RunFailed`` names every failed run. A worker process that dies raises ``RunFailed``
        at once (the caller's ``close`` then stops the others; finished runs are stored, the
        same command resumes)."""
        pending = ByData(specs)
        failed: list[tuple[RunSpec, str]] = []
        # each worker holds up to AHEAD batches: the next waits in its pipe while it runs one,
        # so it never idles while this process (sharing the cores) stores records
        busy: dict[Any, collections.deque[list[RunSpec]]] = {}
        for _ in range(AHEAD):
            for conn in self.conns:
                self._send(conn, pending, busy)
        while busy:
            for conn in wait(list(busy)):
                batch = busy[conn].popleft()
                try:
                    took, outcomes = conn.recv()
                except (EOFError, OSError):
                    proc = self.procs[self.conns.index(conn)]
                    proc.join(1)
                    raise RunFailed(f"run {batch[0].key}: worker process died (exit code "
                                    f"{proc.exitcode})") from None
                self.per_run = took / len(batch)
                self._send(conn, pending, busy)
                if not busy[conn]:
                    del busy[conn]
                for spec, (status, payload) in zip(batch, outcomes, strict=True):
                    if status == "ok":
                        rec, self.lines[spec.key] = payload
                        yield spec, rec
                        continue
                    why = payload if status == "failed" else (
                        f"run {spec.key} failed in a worker process:\n{payload}")
                    failed.append((spec, why))
                    record_failure(self.out_dir, spec, why)
        self._ok = True  # every worker is alive and idle: ``close`` lets them exit
        if failed:
            where = counted(len(self.conns), "worker process", "worker processes")
            raise failed_runs(failed, len(specs), self.out_dir, f"in {where}")

    def close(self, kill: bool | None = None) -> None:
        """Stop the workers: ask them to exit after a complete sweep, else kill them (Ctrl-C, a
        failed run: runs under way are abandoned, finished ones are stored)."""
        kill = not self._ok if kill is None else kill
        for conn in self.conns:
            if not kill:
                try:
                    conn.send(None)
                except OSError:
                    pass
        for proc, conn in zip(self.procs, self.conns, strict=True):
            if kill:
                proc.kill()
            proc.join(None if kill else 10)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
