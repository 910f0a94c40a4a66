"""A Dask client for the ``dask`` engine and backend: to a running scheduler, or a LocalCluster.

``[dask] address`` (``--dask ADDRESS``) names the scheduler: ``tcp://HOST:PORT`` (any
Dask cluster: ``dask scheduler`` + ``dask worker``, an SSHCluster, dask-jobqueue), or ``local``
/ ``local:N`` (``""`` alike): a LocalCluster of N single-threaded worker processes on this
machine (default: one per core), started here and stopped with the client.

Dask is an optional dependency (``pip install 'ldpsim[dask]'``); it is imported here, when a
client is made, never when ``ldpsim`` starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

from ldpsim.simulator.backends.alloc import keep_freed_memory, tune_if_requested
from ldpsim.simulator.backends.machine import cores

from ldpsim import environment

#: a worker death the scheduler forgives once per task: the task runs again elsewhere, and a
#: second death fails it (``KilledWorker``). Only a LocalCluster started here is configured so;
#: a running scheduler keeps its own ``distributed.scheduler.allowed-failures`` (default 3).
ALLOWED_FAILURES = 1
#: the loggers ``quiet_logs`` silences: Dask's, and those of the event loops it runs on
DASK_LOGGERS = ("distributed", "tornado", "asyncio")


def _worker_environ() -> dict[str, Any]:
    """What a LocalCluster's nanny sets before it starts a worker: Dask's defaults but
    ``MALLOC_TRIM_THRESHOLD_`` (65536 there), with which glibc hands freed memory back at once
    and a run pays its page faults again on every allocation (a run on a worker took about
    1.7 times the CPU of the same run in a ``--jobs`` worker)."""
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ") or {})
    env.pop(environment.MALLOC_TRIM_THRESHOLD, None)
    return env


def tune_worker_malloc() -> bool:
    """On a worker, before its first run: undo what ``MALLOC_TRIM_THRESHOLD_`` (set by a Dask
    nanny started with its defaults, e.g. ``dask worker``) does to every run, by the opt-in
    tuning of ``simulator.backends.alloc`` (keep freed memory for reuse; up to 1 GB held);
    without that variable, the tuning only if ``LDPSIM_TUNE_MALLOC=1``. True if it took
    effect."""
    if os.environ.get(environment.MALLOC_TRIM_THRESHOLD):
        return keep_freed_memory()
    return tune_if_requested()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook (``LocalCluster(preload=[this module])``), run in each worker
    process of a LocalCluster started here as it starts: the worker ignores SIGINT, and does
    not log the tasks the orchestrator cancels.

    A Ctrl-C in the terminal reaches every process of its foreground group, the workers
    included, each of which would print a traceback; the orchestrator stops them itself
    (``DaskConnection.close``), cancelling the tasks under way, of each of which the worker
    would log a warning (``distributed.worker.state_machine``: its one warning)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)


@contextlib.contextmanager
def quiet_logs(quiet: bool = True) -> Iterator[None]:
    """Within (if ``quiet``): Dask's loggers in this process say nothing below CRITICAL (the
    scheduler and nannies of a LocalCluster being stopped mid-sweep, the client's lost
    connections)."""
    if not quiet:
        yield
        return
    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def require_distributed() -> Any:
    """The ``distributed`` module, or ImportError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ImportError("the dask engine and backend need Dask distributed: pip install "
                          "'ldpsim[dask]' (here and on every worker)") from None
    return distributed


def local_workers(address: str) -> int | None:
    """The worker count of a ``local`` / ``local:N`` address (None: not a local address)."""
    if address in ("", "local"):
        return max(1, cores())
    if address.startswith("local:"):
        return int(address.split(":", 1)[1])
    return None


class DaskConnection:
    """A client to ``address``'s scheduler, and the LocalCluster it started if any.

    Parameters
    ----------
    address : str
        ``tcp://HOST:PORT``, ``local``, ``local:N`` or ``""`` (see the module docstring).
    timeout_s : float, optional
        How long to wait for the scheduler before giving up with a clear error (default:
        Dask's ``distributed.comm.timeouts.connect``, 30 s unless configured).
    """

    def __init__(self, address: str, timeout_s: float | None = None) -> None:
        distributed = require_distributed()
        import dask
        from dask.utils import parse_timedelta

        if timeout_s is None:  # Dask's own connect timeout (DASK_DISTRIBUTED__COMM__...)
            timeout_s = float(parse_timedelta(
                dask.config.get("distributed.comm.timeouts.connect"), "s"))

        self.address = address
        self.cluster = None
        n = local_workers(address)
        if n is not None:
            # workers may start processes of their own (the processes backend's curator and
            # pools); a lost worker's task is run once more, then fails
            # (at most one queued task per worker thread: fewer tasks share a dying worker)
            dask.config.set({"distributed.worker.daemon": False,
                             "distributed.scheduler.worker-saturation": 1.0,
                             "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                             "distributed.nanny.pre-spawn-environ": _worker_environ()})
            # the scheduler, the workers and the dashboard on loopback: a local cluster is
            # this machine's (its workers run pools with their keys, and the dashboard shows
            # every task), never reachable from another
            self.cluster = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address="127.0.0.1:0", preload=[__name__])
            target: Any = self.cluster
        else:
            target = address
        try:
            self.client = distributed.Client(target, timeout=f"{timeout_s}s",
                                             set_as_default=False)
        except (OSError, TimeoutError) as e:
            self.close()
            raise ConnectionError(f"[dask] address: no Dask scheduler answered at "
                                  f"{address!r} within {timeout_s:g} s ({e})") from None

    def workers(self) -> dict[str, dict[str, Any]]:
        """The scheduler's workers by address (each with ``nthreads``, ``host``, ...)."""
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def threads(self) -> int:
        """Tasks the cluster runs at once (its workers' threads)."""
        return sum(int(w.get("nthreads", 1)) for w in self.workers().values()) or 1

    def close(self, quiet: bool = False) -> None:
        """Close the client, and the LocalCluster if this connection started one; ``quiet``:
        without a word from Dask's loggers (a sweep abandoned: Ctrl-C, a failed run)."""
        client = getattr(self, "client", None)
        with quiet_logs(quiet):
            try:
                if client is not None:
                    client.close()
            finally:
                if self.cluster is not None:
                    self.cluster.close()
                    self.cluster = None

    def __enter__(self) -> DaskConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
