"""The ``dask`` backend: one run's pools as long-running tasks on the workers of a Dask cluster.

``backends.DaskBackend`` calls ``connect`` and ``run`` here; this module imports no backend, so
a worker that unpickles ``pool_task`` imports nothing circular.

The curator stays here (a process of the orchestrator's, as on the processes backend), bound to
a TCP port of this machine; each of the run's P pools is one task placed on its own worker
(``workers=`` restriction), running the entry point of ``ldpsim agents`` (``poolloop.pool_loop``):
it generates or loads only its block of agents and registers with the hosts backend's
authentication (an HMAC answer to the curator's fresh challenge under the run's registration
key, which is never sent). Each pool's task carries that pool's keys only (its agents' device
keys, ``seeding.PoolKeys``), as a forked pool gets them on the processes backend, and a
registration key fresh per run. The same seed and secrets give the output of every other
backend, bit for bit. The cluster sees what its tasks carry: the pools' keys and the results.

A worker that dies takes its pool with it: its agents become dropouts after ``timeout_s`` and
the run is recorded ``degraded``, as on the other backends. The pool task exits when the
curator closes; one the scheduler moved elsewhere after its worker died is cancelled.

``[dask] address`` names the cluster (``simulator.backends.dask_client``); it needs at least P
workers, and the workers must reach this machine's TCP ports (the curator's address is the one this
machine uses towards the scheduler; ``LDPSIM_DASK_ADVERTISE=HOST`` overrides it).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from ldpsim.simulator.backends.dask_client import DaskConnection, tune_worker_malloc
from ldpsim.simulator.backends.poolloop import pool_loop
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.session.seeding import agents_of, local_parties

from ldpsim import environment

#: seconds a finished run waits for its pool tasks to return (they exit on the curator's
#: goodbye) before cancelling them
POOL_EXIT_S = 10.0


def pool_task(endpoint: str, index: int, n_pools: int, auth: bytes, limits: Any,
              keys: Any = None, policy: Any = None) -> int:
    """On a worker: serve as pool ``index`` of ``n_pools`` until the curator closes; the exit
    code of ``poolloop.pool_loop`` (0: clean)."""
    tune_worker_malloc()
    return pool_loop(endpoint, index, n_pools, auth, limits, keys=keys, policy=policy,
                     echo=lambda *a, **k: print(*a, file=sys.stderr))


def free_port() -> int:
    """A TCP port free on this machine now (the curator binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def advertised_host(scheduler_address: str) -> str:
    """The address of this machine the workers can reach: ``LDPSIM_DASK_ADVERTISE`` if set,
    else the one this machine uses towards the scheduler (the loopback for a local one)."""
    override = os.environ.get(environment.DASK_ADVERTISE)
    if override:
        return override
    host = urlparse(scheduler_address).hostname or "127.0.0.1"
    if host in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))  # no packet is sent: this only picks the route
        return str(s.getsockname()[0])


def connect(runtime: dict[str, Any], echo: Callable[..., Any] = print) -> tuple[Any, str]:
    """The cluster connection of ``runtime["dask_address"]`` and the address of this machine
    the workers reach the curator at; RunFailed if it has fewer workers than pools."""
    conn = DaskConnection(runtime["dask_address"])
    try:
        workers = sorted(conn.workers())
        pools = int(runtime["pools"])
        if len(workers) < pools:
            raise RunFailed(f"[runtime] pools: got {pools}; allowed: at most the Dask "
                            f"cluster's {counted(len(workers), 'worker')} with the dask "
                            "backend (one "
                            "pool per worker)")
        host = advertised_host(conn.client.scheduler.address)
    except BaseException:
        conn.close()
        raise
    echo(f"dask backend: {counted(pools, 'pool')} on {counted(len(workers), 'worker')} at "
         f"{conn.client.scheduler.address}; curator reachable at {host}", file=sys.stderr)
    return conn, host


def _workers(conn: Any, pools: int) -> list[str]:
    """The workers a run's pools go to, one each: those alive now (a worker that died in an
    earlier run was restarted, if at all, under a new address)."""
    workers = sorted(conn.workers())
    if len(workers) < pools:
        try:  # a nanny may be restarting one
            conn.client.wait_for_workers(pools, timeout=30)
        except TimeoutError:
            raise RunFailed(f"the Dask cluster has {counted(len(conn.workers()), 'worker')}; "
                            f"the run's {counted(pools, 'pool')} need one each") from None
        workers = sorted(conn.workers())
    return workers


def run(conn: Any, host: str, config: dict[str, Any], limits: Any, record_view: bool,
        secrets: Any = None, policy: Any = None, n: int | None = None) -> dict[str, Any]:
    """One run: the curator here (``transport.run_processes`` without pools of its own),
    pool i a task on worker i carrying its own keys only; the curator's result record."""
    client = conn.client
    n_pools = int(config["pools"])
    workers = _workers(conn, n_pools)
    port = free_port()
    parties = local_parties(config, agents_of(config) if n is None else n, secrets)
    tag = uuid.uuid4().hex[:12]
    futures = [client.submit(
        pool_task, f"tcp://{host}:{port}", i, n_pools, parties.auth, limits, parties.pools[i],
        policy, key=f"ldpsim-pool-{tag}-{i}", workers=[workers[i]], allow_other_workers=False,
        pure=False) for i in range(n_pools)]
    try:
        return run_processes(config, limits, record_view, endpoint=f"tcp://*:{port}",
                             spawn_pools=False, parties=parties)
    finally:
        # the pools exit on the curator's goodbye; one whose worker died (its task waits for
        # a worker that is gone) is cancelled at once, a live one after POOL_EXIT_S
        deadline = time.monotonic() + POOL_EXIT_S
        alive = set(conn.workers())
        while time.monotonic() < deadline and not all(
                f.done() or w not in alive for f, w in zip(futures, workers, strict=False)):
            time.sleep(0.005)
        client.cancel([f for f in futures if not f.done()])
        for f in futures:
            f.release()
