"""Backends: where a run's curator and agent pools execute.

A backend is built once per sweep (``Backend.build``), serves one run after another
(``Backend.run``: a configured run in, the curator's result record out) and is closed at the
end (``Backend.close``). The orchestrator (``simulator.sweep.runner``) only ever talks to this
interface; the backends register by name in ``BACKENDS``, which is also what a scenario's
``[runtime] backend`` accepts. Every backend gives the same output for the same seed and secrets
(``protocols.keys.Secrets``): the inproc backend is the fast path, the others the real processes
and sockets.

* ``inproc``: curator and pools in this process, messages through the same codec.
* ``processes``: one curator process and P pool processes on this machine, over ZeroMQ.
* ``hosts``: a long-lived curator bound to a public endpoint; pools started by hand with
  ``ldpsim agents --connect ...`` on any machine take part in every run until it closes.
* ``dask``: a curator process here, each pool a long-running task on its own worker of a Dask
  cluster, connecting back over TCP (``simulator.backends.on_dask``; the ``dask`` extra).

This package's own module imports the standard library only (each backend imports its modules
when used): ``ldpsim run`` imports ``backends.launch`` before numpy, to begin the curator's fork
server early (``simulator.start``).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Backend(ABC):
    """One way of executing runs (see the module docstring)."""

    #: the name ``[runtime] backend`` gives
    name: str = ""
    #: whether runs of a sweep may execute at once, each on a backend of its own (``jobs``;
    #: not the hosts backend, whose hand-started pools serve one curator)
    parallel_runs: bool = True
    #: whether its pools live for one run, so that the orchestrator keeps their lifetime
    #: odometer across a sweep (``AgentPolicy.spent``); not the hosts backend's long-lived
    #: pools, whose own ledger spans their whole life
    one_run_pools: bool = True
    #: whether a run's agents compute in this process (what they keep stays here: the
    #: orchestrator computes a ground truth the run leaves here after it, not beside it)
    agents_here: bool = False
    #: whether a run's pools hand this process their shares of the ground truth they compute
    #: anyway (``Dataset.truth_tap``; ``take_truth_parts`` after ``run``), never through the
    #: curator
    pools_share_truth: bool = False

    @classmethod
    def build(cls, runtime: dict[str, Any], echo: Callable[..., Any] = print) -> Backend:
        """Set up for a sweep whose ``[runtime]`` table is ``runtime`` (``echo`` tells the
        user anything they must do, e.g. start pools)."""
        return cls()

    @classmethod
    def standalone(cls) -> Backend:
        """A backend for a single run with no sweep around it (``runner.execute(spec)``)."""
        return cls()

    @classmethod
    def check(cls, runtime: dict[str, Any]) -> None:
        """Refuse (ValueError naming the key) a ``[runtime]`` table this backend cannot run,
        before a sweep writes or starts anything."""
        return None

    @abstractmethod
    def run(self, config: dict[str, Any], limits: Any, record_view: bool, secrets: Any = None,
            policy: Any = None, n: int | None = None) -> dict[str, Any]:
        """Execute one configured run (``RunSpec.config()``) and return the curator's result
        record. ``secrets``: the experiment's master secret (``protocols.keys.Secrets``; None:
        the run's seed alone), the same on every backend for the same output; ``policy``: the
        agents' own limits (``session.policy.AgentPolicy``; the hosts backend's pools hold
        theirs); ``n``: the data set's size, when the caller knows it."""

    @classmethod
    def busy_cores(cls, runtime: dict[str, Any]) -> int:
        """How many of this machine's cores a run keeps busy (the orchestrator computes a large
        data set's ground truth beside a run only where a core is left for it)."""
        return 1

    def take_truth_parts(self) -> list | None:
        """The shares of the ground truth the last run's pools sent (``pools_share_truth``),
        one per pool, None where a pool sent none; None: none were asked for."""
        return None

    def close(self) -> None:
        """Release what ``build`` acquired (nothing, unless a backend says otherwise)."""
        return None

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InprocBackend(Backend):
    """Curator and pools in this process (``simulator.backends.inproc``)."""

    name = "inproc"
    agents_here = True

    def run(self, config, limits, record_view, secrets=None, policy=None, n=None):
        from ldpsim.simulator.backends.inproc import run_inproc

        return run_inproc(config, limits, record_view, secrets=secrets, policy=policy, n=n)


class ProcessesBackend(Backend):
    """A curator process and P pool processes over ZeroMQ (``transport.run_processes``)."""

    name = "processes"
    pools_share_truth = True
    _truth_parts: list | None = None
    #: whether the next run's pools hear and send their shares of the truth: the orchestrator
    #: sets it off when it knows the truth already (``TruthCache.wants_parts``), so that no
    #: pool repeats a truth's work in the runs of a sweep on the same data set
    share_truth: bool = True

    def run(self, config, limits, record_view, secrets=None, policy=None, n=None):
        from ldpsim.simulator.backends.transport import run_processes

        self._truth_parts = parts = [] if self.share_truth else None
        return run_processes(config, limits, record_view, secrets=secrets, policy=policy, n=n,
                             truth_parts=parts)

    def take_truth_parts(self):
        parts, self._truth_parts = self._truth_parts, None
        return parts

    @classmethod
    def busy_cores(cls, runtime):
        return int(runtime["pools"]) + 1  # the pools and the curator


class HostsBackend(Backend):
    """A curator bound to ``[runtime] endpoint`` serving runs to pools started by hand."""

    name = "hosts"
    parallel_runs = False
    one_run_pools = False

    def __init__(self, curator: Any, auth: bytes, secrets: Any) -> None:
        self.curator = curator
        self.auth = auth
        self.secrets = secrets

    @classmethod
    def build(cls, runtime, echo=print):
        from ldpsim.simulator.backends.curve import check_dir
        from ldpsim.simulator.backends.transport import HostsCurator
        from ldpsim.simulator.session import Limits
        from ldpsim.simulator.session.common import counted
        from ldpsim.simulator.session.keyfiles import hosts_auth

        if runtime.get("curve"):
            check_dir(runtime["curve"])  # a clear error before any process starts
        # the hosts' keys: the master secret (the pools hold their share of it) and the
        # registration key from the token (scrypt, once), before any process starts
        host, auth = hosts_auth(runtime)
        curator = HostsCurator(runtime["endpoint"], Limits.of_runtime(runtime),
                               runtime.get("curve") or None, auth)
        keys = str(Path(runtime["secret"]).parent)
        echo(f"curator bound at {curator.endpoint}; start "
             f"{counted(int(runtime['pools']), 'pool')} with:\n  "
             f"ldpsim agents --connect tcp://HOST:PORT --keys {keys}/pool-I.keys"
             + (" --curve-key pool-I.key_secret --curve-server server.key"
                if runtime.get("curve") else ""), file=sys.stderr)
        return cls(curator, auth, host.secrets)

    @classmethod
    def standalone(cls):
        raise ValueError("the hosts backend needs a running HostsCurator: run the scenario "
                         "(ldpsim run / runner.run_scenario), which binds one")

    @classmethod
    def check(cls, runtime):
        from ldpsim.simulator.session.keyfiles import hosts_auth

        hosts_auth(runtime)  # the hosts' key file and token, or KeyFileError

    def run(self, config, limits, record_view, secrets=None, policy=None, n=None):
        return self.curator.run(config, self.auth, self.secrets, record_view)

    @classmethod
    def busy_cores(cls, runtime):
        return int(runtime["pools"]) + 1  # the curator, and the pools may run here too

    def close(self) -> None:
        self.curator.close()


class DaskBackend(Backend):
    """The curator here, each pool a task on its own Dask worker
    (``simulator.backends.on_dask``)."""

    name = "dask"

    def __init__(self, conn: Any, host: str) -> None:
        self.conn = conn
        self.host = host

    @classmethod
    def build(cls, runtime, echo=print):
        from ldpsim.simulator.backends import on_dask as backend_dask

        return cls(*backend_dask.connect(runtime, echo))

    @classmethod
    def standalone(cls):
        raise ValueError("the dask backend needs a cluster: run the scenario (ldpsim run / "
                         "runner.run_scenario), which connects to [dask] address")

    def run(self, config, limits, record_view, secrets=None, policy=None, n=None):
        from ldpsim.simulator.backends import on_dask as backend_dask

        return backend_dask.run(self.conn, self.host, config, limits, record_view, secrets,
                                policy, n)

    @classmethod
    def busy_cores(cls, runtime):
        return 1  # the curator; the pools run on the workers

    def close(self) -> None:
        self.conn.close()


#: every backend by name (``[runtime] backend``)
BACKENDS: dict[str, type[Backend]] = {b.name: b for b in
                                      (InprocBackend, ProcessesBackend, HostsBackend,
                                       DaskBackend)}


def get_backend(name: str) -> type[Backend]:
    """The backend registered under ``name``; ValueError naming the allowed ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"[runtime] backend: got {name!r}; allowed: one of "
                         f"{', '.join(repr(b) for b in BACKENDS)}") from None
