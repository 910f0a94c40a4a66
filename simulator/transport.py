"""ZeroMQ drivers: the curator's ROUTER loop, the pools' DEALER loop, and process management.

One curator process binds a ROUTER socket; P pool processes each connect one DEALER (never one
socket per logical agent). The ROUTER is ``ROUTER_MANDATORY`` (a send to a vanished pool raises
instead of dropping silently), high-water marks are unlimited on both sides (a round's traffic is
bounded by the run, and bounded HWMs can deadlock a curator that sends queries while pools send
reports), ``LINGER`` is 0 so no process hangs at exit, and each process creates its own context
after ``fork``.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import secrets
import signal
import tempfile
import time
import traceback
import uuid
from typing import Any

import zmq

from simulator import wire
from simulator.alloc import keep_freed_memory
from simulator.curve import connect_curve, serve_curve
from simulator.session import CuratorSession, Limits, PoolSession, RunFailed


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so no child outlives the orchestrator.

    Also ignores SIGINT (Ctrl-C reaches the whole process group; the orchestrator alone
    handles it and stops the children), lifts the SIGINT block ``_start`` set around fork, and
    tunes the allocator (``simulator.alloc``).
    """
    keep_freed_memory()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start(proc) -> None:
    """Start a child with SIGINT blocked across fork.

    Without this, a Ctrl-C landing while the child is being forked can hit the child before it
    ignores SIGINT, or interrupt the parent half-way through ``Process.start``. With it, the
    child starts with SIGINT ignored, and a pending Ctrl-C reaches the parent right after the
    child is registered, where the caller's clean-up can stop it.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


#: A pool's DEALER: no high-water marks (a round's batches are all in flight at once), no linger,
#: and a 10 ms reconnect interval instead of ZeroMQ's 100 ms: a pool that starts before the
#: curator has bound its endpoint otherwise waits up to 100 ms (or 0.5 s, its next hello).
POOL_SOCKET_OPTIONS = ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0), (zmq.RECONNECT_IVL, 10))


class CuratorServer:
    """The curator's socket. Runs one session after another on the same bound endpoint."""

    def __init__(self, endpoint: str, limits: Limits, curve: str | None = None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.auth = serve_curve(self.ctx, self.sock, curve) if curve else None
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.LINGER, 0)
        # Last line of defence; frames above the application limit are rejected with a reason.
        self.sock.setsockopt(zmq.MAXMSGSIZE, 4 * limits.max_frame_bytes)
        self.sock.bind(endpoint)
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.limits = limits
        self.peers: set[bytes] = set()
        self.unreachable = 0

    def _send_all(self, outs) -> None:
        for peer, frame in outs:
            try:
                self.sock.send_multipart([peer, frame], copy=len(frame) < 65536)
            except zmq.ZMQError as e:  # EHOSTUNREACH: the pool is gone; its agents drop out
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self.unreachable += 1
                self.peers.discard(peer)

    def run(self, run_no: int, config: dict[str, Any], token: str,
            record_view: bool = False) -> dict[str, Any]:
        """Serve one run to completion and return the curator's result."""
        sess = CuratorSession(run_no, config, token, self.limits, record_view)
        for peer in sorted(self.peers):
            self._send_all(sess.on_ready(peer))
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not sess.finished:
            wait = max(0.0, sess.next_deadline() - time.monotonic())
            if poller.poll(int(wait * 1000) + 1):
                frames = self.sock.recv_multipart(copy=True)
                peer, body = frames[0], frames[1:]
                if len(body) != 1:
                    self._send_all(sess.reject(peer, f"expected one frame per message, got "
                                                     f"{len(body)}"))
                    continue
                self._send_all(sess.on_frame(peer, body[0]))
                self.peers |= sess.ready
            elif time.monotonic() >= sess.next_deadline():
                self._send_all(sess.on_timeout())
        return sess.result

    def close(self) -> None:
        """Tell every known pool there are no more runs, then close."""
        bye = wire.encode(wire.DONE, wire.ANY_RUN, wire.SETUP_ROUND, wire.NO_AGENT, None)
        for peer in self.peers:
            with contextlib.suppress(zmq.ZMQError):
                self.sock.send_multipart([peer, bye])
        time.sleep(0.05)
        self.sock.close(linger=0)
        if self.auth is not None:
            self.auth.stop()
        self.ctx.term()


def pool_loop(endpoint: str, index: int, n_pools: int, token: str, limits: Limits,
              idle_timeout_s: float | None = None,
              curve: tuple[str, str] | None = None) -> int:
    """Serve runs as pool ``index`` of ``n_pools`` until the curator says there are no more.

    Returns the exit code: 0 on a clean end, 1 after an unhandled exception (reported to the
    curator as an ERROR envelope first), 2 when the curator fell silent for ``idle_timeout_s``.
    ``curve`` is (this pool's secret key file, the curator's public key file).
    """
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    for opt, val in POOL_SOCKET_OPTIONS:
        sock.setsockopt(opt, val)
    if curve:
        connect_curve(sock, *curve)
    sock.connect(endpoint)
    sess = PoolSession(index, n_pools, token, limits)
    idle_timeout_s = idle_timeout_s or max(60.0, 4 * limits.timeout_s)
    code = 0
    try:
        sock.send(sess.hello())
        last_hello = last_msg = time.monotonic()
        while not sess.exit:
            if sock.poll(200):
                frame = sock.recv(copy=True)
                last_msg = time.monotonic()
                for out in sess.on_frame(frame):
                    sock.send(out, copy=len(out) < 65536)
                sess.prepare()  # the registration is out: generate while the curator plans
                if sess.idle and not sess.exit:
                    sock.send(sess.hello())
                    last_hello = time.monotonic()
            else:
                now = time.monotonic()
                if sess.idle and now - last_hello > 0.5:
                    sock.send(sess.hello())
                    last_hello = now
                if now - last_msg > idle_timeout_s:
                    code = 2
                    break
    except Exception as exc:  # report, then fail loudly
        code = 1
        with contextlib.suppress(Exception):
            sock.send(sess.error(exc))
            time.sleep(0.2)
        traceback.print_exc()
    finally:
        sock.close(linger=0)
        ctx.term()
    return code


# ------------------------------------------------------------------ the processes backend


def _curator_child(endpoint: str, config: dict, token: str, limits: Limits, record_view: bool,
                   conn) -> None:
    _die_with_parent()
    server = None
    try:
        server = CuratorServer(endpoint, limits)
        result = server.run(0, config, token, record_view)
        conn.send(("ok", result))
    except RunFailed as e:
        conn.send(("error", str(e)))
    except BaseException:
        conn.send(("error", "curator process failed:\n" + traceback.format_exc()))
    finally:
        if server is not None:
            server.close()
        conn.close()


def _pool_child(endpoint: str, index: int, n_pools: int, token: str, limits: Limits) -> None:
    _die_with_parent()
    os._exit(pool_loop(endpoint, index, n_pools, token, limits))


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


def run_processes(config: dict[str, Any], limits: Limits, record_view: bool = False,
                  endpoint: str | None = None, token: str | None = None,
                  spawn_pools: bool = True) -> dict:
    """Run one configured run as 1 curator + P pool processes talking over ZeroMQ.

    Raises RunFailed (with the failing process's traceback) when any process raises, and
    stops every child on the way out, including on KeyboardInterrupt.
    """
    ctx = mp.get_context("fork")
    token = token or secrets.token_hex(16)
    ipc_path = None
    if endpoint is None:
        ipc_path = os.path.join(tempfile.gettempdir(), f"ldpsim-{uuid.uuid4().hex[:12]}.ipc")
        endpoint = "ipc://" + ipc_path
    n_pools = int(config["pools"])
    rx, tx = ctx.Pipe(duplex=False)
    curator = ctx.Process(target=_curator_child, name="ldpsim-curator",
                          args=(endpoint, config, token, limits, record_view, tx))
    pools = [ctx.Process(target=_pool_child, name=f"ldpsim-pool-{i}",
                         args=(endpoint, i, n_pools, token, limits))
             for i in range(n_pools)] if spawn_pools else []
    procs = [curator, *pools]
    try:
        _start(curator)
        tx.close()
        for p in pools:
            _start(p)
        failed_at = None
        while True:
            if rx.poll(0.05):
                status, payload = rx.recv()
                if status != "ok":
                    raise RunFailed(payload)
                result = payload
                break
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
        curator.join(2.0)  # let it tell the pools there are no more runs, then exit
        for p in pools:
            p.join(2.0)
        return result
    finally:
        _stop(procs)
        rx.close()
        if ipc_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ipc_path)


# ---------------------------------------------------------------------- the hosts backend


def _server_child(endpoint: str, limits: Limits, rx, tx, curve: str | None = None) -> None:
    _die_with_parent()
    server = None
    try:
        server = CuratorServer(endpoint, limits, curve)
        tx.send(("bound", server.endpoint))
        while True:
            msg = rx.recv()
            if msg[0] == "stop":
                break
            _, run_no, config, token, record_view = msg
            try:
                tx.send(("ok", server.run(run_no, config, token, record_view)))
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
    ``ldpsim agents --connect ...`` take part in every run until ``close()``.
    """

    def __init__(self, endpoint: str, limits: Limits, curve: str | None = None) -> None:
        ctx = mp.get_context("fork")
        child_rx, self._to_child = ctx.Pipe(duplex=False)  # (reader, writer)
        self._from_child, child_tx = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_server_child, name="ldpsim-curator",
                                args=(endpoint, limits, child_rx, child_tx, curve))
        _start(self.proc)
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
        return self._from_child.recv()

    def run(self, config: dict[str, Any], token: str, record_view: bool = False) -> dict:
        self._to_child.send(("run", self.runs, config, token, record_view))
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
