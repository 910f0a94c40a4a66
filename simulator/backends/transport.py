"""Process management of the ZeroMQ backends: the processes backend (one curator process and P
pool processes per run) and the hosts backend (a long-lived curator for pools started by hand).

One curator process binds a ROUTER socket (``server.CuratorServer``); P pool processes each
connect one DEALER (``poolloop.pool_loop``; never one socket per logical agent). The ROUTER is
``ROUTER_MANDATORY`` (a send to a vanished pool raises instead of dropping silently),
``LINGER`` is 0 so no process hangs at exit, and each process creates its own context after
``fork``. Every child dies with the orchestrator (``die_with_parent``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import shutil
import signal
import tempfile
import time
import traceback
from typing import Any

from ldpsim.protocols import get_protocol, registry
from ldpsim.simulator.backends.alloc import tune_if_requested
from ldpsim.simulator.backends.launch import CURATOR_CTX, start_child
from ldpsim.simulator.backends.poolloop import POOL_SOCKET_OPTIONS as POOL_SOCKET_OPTIONS
from ldpsim.simulator.backends.poolloop import pool_loop
from ldpsim.simulator.backends.server import CuratorServer
from ldpsim.simulator.session import Limits, RunFailed
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.seeding import (
    Parties,
    PoolKeys,
    agents_of,
    curator_config,
    local_parties,
    public_config,
)

#: the context curator processes start in, from a fork server (``simulator.backends.launch``)
_CURATOR_CTX = CURATOR_CTX


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so no child outlives the orchestrator.

    Also ignores SIGINT (Ctrl-C reaches the whole process group; the orchestrator alone
    handles it and stops the children), lifts the SIGINT block ``_start`` set around fork, and
    tunes the allocator if asked to (``simulator.backends.alloc.tune_if_requested``: the child
    inherits ``LDPSIM_TUNE_MALLOC`` from its parent).
    """
    tune_if_requested()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


# ------------------------------------------------------------------ the processes backend


def _use(protocol) -> None:
    """Register the orchestrator's protocol object in this fresh curator process (it may be
    one the orchestrator registered at run time: a plugin, or a test's toy protocol), without
    building the registry: no family but its own is imported."""
    registry.use(protocol)


def _curator_child(endpoint: str, config: dict, auth: bytes, limits: Limits, record_view: bool,
                   conn, protocol=None) -> None:
    die_with_parent()
    server = None
    if protocol is not None:
        _use(protocol)
    try:
        server = CuratorServer(endpoint, limits, auth=auth)
        result = server.run(0, config, auth, record_view)
        conn.send(("ok", result))
    except RunFailed as e:
        conn.send(("error", str(e)))
    except BaseException:
        conn.send(("error", "curator process failed:\n" + traceback.format_exc()))
    finally:
        if server is not None:
            server.close()
        conn.close()


def _pool_child(endpoint: str, index: int, n_pools: int, auth: bytes, limits: Limits,
                keys: PoolKeys, prebuild: dict[str, Any] | None = None,
                policy: AgentPolicy | None = None, truth_out: Any = None) -> None:
    die_with_parent()
    os._exit(pool_loop(endpoint, index, n_pools, auth, limits, keys=keys, prebuild=prebuild,
                       policy=policy, truth_out=truth_out))


def _stop(procs: list) -> None:
    procs = [p for p in procs if p.pid is not None]  # Ctrl-C may come before some start
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 2.0
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


def private_ipc() -> tuple[str, str]:
    """A fresh directory only this user may enter (mode 0700, whatever the umask) and an
    ``ipc://`` endpoint inside it: the file system's permissions are the door of the
    processes backend's socket (``simulator.backends.door``)."""
    directory = tempfile.mkdtemp(prefix="ldpsim-")
    return directory, "ipc://" + os.path.join(directory, "curator.ipc")


def run_processes(config: dict[str, Any], limits: Limits, record_view: bool = False,
                  endpoint: str | None = None, spawn_pools: bool = True,
                  secrets: Any = None, policy: AgentPolicy | None = None, n: int | None = None,
                  parties: Parties | None = None, truth_parts: list | None = None) -> dict:
    """Run one configured run as 1 curator + P pool processes talking over ZeroMQ.

    The curator process (started from a fork server, see ``_CURATOR_CTX``) is handed only
    ``curator_config`` and the run's registration key; each pool gets its own keys from here
    (``seeding.local_parties``: its block's agents only), never through the curator.
    ``secrets``: the experiment's (``protocols.keys.Secrets``; default the seed's alone);
    ``policy``: the agents' own limits; ``n``: the data set's size if known; ``parties``: the
    keys, when the caller made them (the dask backend's pools, started elsewhere, hold theirs).
    ``truth_parts``: a list to receive the pools' shares of the run's ground truth, one per
    pool in order (None where a pool sent none), each over a pipe of its own to this
    process (``_take_parts``), which the curator never sees.

    Raises RunFailed (with the failing process's traceback) when any process raises, and
    stops every child on the way out, including on KeyboardInterrupt.
    """
    ctx = mp.get_context("fork")
    if parties is None:
        parties = local_parties(config, agents_of(config) if n is None else n, secrets)
    ipc_dir = None
    if endpoint is None:
        ipc_dir, endpoint = private_ipc()
    n_pools = int(config["pools"]) if spawn_pools else 0
    rx, tx = _CURATOR_CTX.Pipe(duplex=False)
    curator = _CURATOR_CTX.Process(
        target=_curator_child, name="ldpsim-curator",
        args=(endpoint, parties.curator, parties.auth, limits, record_view, tx,
              get_protocol(config["protocol"])))
    # the pools build their rows as they start, before they say ready, while the curator
    # process starts: the run's data exist before the curator's first message, and the data
    # generation overlaps the curator's start-up instead of round 0 (whatever ``data_first``)
    prebuild = public_config(config)
    procs, conns = [curator], []
    try:
        start_child(curator)
        tx.close()
        for i in range(n_pools):
            # a pipe each, made just before its pool: no other pool holds its writing end
            part_rx, part_tx = ctx.Pipe(duplex=False) if truth_parts is not None else (None,
                                                                                       None)
            procs.append(ctx.Process(target=_pool_child, name=f"ldpsim-pool-{i}",
                                     args=(endpoint, i, n_pools, parties.auth, limits,
                                           parties.pools[i], prebuild, policy, part_tx)))
            start_child(procs[-1])
            if part_tx is not None:
                conns.append(part_rx)
                part_tx.close()
        result = _wait_result(curator, rx, procs[1:])
        if truth_parts is not None:
            truth_parts[:] = _take_parts(conns, prebuild["run_id"])
        curator.join(2.0)  # let it tell the pools there are no more runs, then exit
        for p in procs[1:]:
            p.join(2.0)
        return result
    finally:
        _stop(procs)
        rx.close()
        for c in conns:
            c.close()
        if ipc_dir:
            shutil.rmtree(ipc_dir, ignore_errors=True)


def _wait_result(curator: Any, rx: Any, pools: list) -> dict:
    """The curator's result of the run, or RunFailed when it or a pool fails."""
    failed_at = None
    while True:
        if rx.poll(0.05):
            try:
                status, payload = rx.recv()
            except EOFError:  # it died before it could say why
                curator.join(1.0)
                raise RunFailed(f"curator process died (exit code {curator.exitcode})"
                                ) from None
            if status != "ok":
                raise RunFailed(payload)
            return payload
        if not curator.is_alive():
            if rx.poll(0.5):
                continue
            raise RunFailed(f"curator process died (exit code {curator.exitcode})")
        for i, p in enumerate(pools):
            if p.exitcode is not None and p.exitcode > 0:
                failed_at = failed_at or time.monotonic()
                if time.monotonic() - failed_at > 2.0:  # the curator did not report it
                    raise RunFailed(f"pool {i} failed (exit code {p.exitcode}); "
                                    "see its traceback on stderr")


#: how long the orchestrator waits, after the curator's result, for the pools' parts of the
#: ground truth (each sends its part right after its last report, before that result exists)
PARTS_WAIT_S = 2.0


def _take_parts(conns: list, run_id: int, wait_s: float = PARTS_WAIT_S) -> list:
    """Each pool's share of the ground truth of the run ``run_id``, from the pipes ``conns``
    (one per pool, in order): None where a pool sent none for it (it made none, died, or
    said nothing within ``wait_s``: the orchestrator then computes the truth itself)."""
    got: list[Any] = [None] * len(conns)
    waiting = dict(enumerate(conns))
    deadline = time.monotonic() + wait_s
    while waiting and time.monotonic() < deadline:
        ready = mp_connection.wait(list(waiting.values()), deadline - time.monotonic())
        for i, conn in list(waiting.items()):
            if conn not in ready:
                continue
            try:
                rid, part = conn.recv()
            except Exception:  # closed (the pool exited) or not a part: none from it
                del waiting[i]
                continue
            if rid == run_id:
                got[i] = part
                del waiting[i]
    return got


# ---------------------------------------------------------------------- the hosts backend


def _server_child(endpoint: str, limits: Limits, rx, tx, curve: str | None = None,
                  auth: bytes | None = None) -> None:
    die_with_parent()
    server = None
    try:
        server = CuratorServer(endpoint, limits, curve, auth)
        tx.send(("bound", server.endpoint))
        while True:
            msg = rx.recv()
            if msg[0] == "stop":
                break
            _, run_no, config, auth, record_view, protocol = msg
            _use(protocol)
            try:
                tx.send(("ok", server.run(run_no, config, auth, record_view)))
            except RunFailed as e:
                tx.send(("error", str(e)))
    except BaseException:
        with contextlib.suppress(Exception):
            tx.send(("error", "curator process failed:\n" + traceback.format_exc()))
    finally:
        if server is not None:
            server.close()


class HostsCurator:
    """A long-lived curator process bound to a public endpoint, for pools started by hand.

    ``run()`` serves one run after another on the same socket; pools connected with
    ``ldpsim agents --connect ...`` take part in every run until ``close()``. ``auth``: the
    hosts' registration key (``keyfiles.hosts_auth``), from which a TCP endpoint without
    enrolled CURVE keys derives the door's key pairs (``simulator.backends.door``).
    """

    def __init__(self, endpoint: str, limits: Limits, curve: str | None = None,
                 auth: bytes | None = None) -> None:
        ctx = _CURATOR_CTX  # a fresh process: it never holds the seed or the pools' secret
        child_rx, self._to_child = ctx.Pipe(duplex=False)  # (reader, writer)
        self._from_child, child_tx = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_server_child, name="ldpsim-curator",
                                args=(endpoint, limits, child_rx, child_tx, curve, auth))
        start_child(self.proc)
        status, payload = self._recv(30.0)
        if status != "bound":
            self.close()
            raise RunFailed(payload)
        self.endpoint = payload
        self.runs = 0

    def _recv(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._from_child.poll(0.1):
            if not self.proc.is_alive() and not self._from_child.poll(0.2):
                raise RunFailed(f"curator process died (exit code {self.proc.exitcode})")
            if deadline and time.monotonic() > deadline:
                raise RunFailed("curator process did not answer")
        try:
            return self._from_child.recv()
        except EOFError:  # it died before it could say why
            self.proc.join(1.0)
            raise RunFailed(f"curator process died (exit code {self.proc.exitcode})") from None

    def run(self, config: dict[str, Any], auth: bytes, secrets: Any,
            record_view: bool = False) -> dict:
        """Serve one run. The curator process gets only ``curator_config(config, secrets)``
        (signed for the pools with their policy keys) and the registration key ``auth``
        (``keyfiles.registration_key`` of the token), so it can check the pools' registrations
        but derive neither the seed nor any agent's key; the pools hold their own keys (the
        key files of ``ldpsim keys``)."""
        self._to_child.send(("run", self.runs, curator_config(config, secrets), auth,
                             record_view, get_protocol(config["protocol"])))
        self.runs += 1
        status, payload = self._recv()
        if status != "ok":
            raise RunFailed(payload)
        return payload

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._to_child.send(("stop",))
        self.proc.join(3.0)
        _stop([self.proc])
