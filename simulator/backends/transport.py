"""ZeroMQ drivers: the curator's ROUTER loop, the pools' DEALER loop, and process management.

One curator process binds a ROUTER socket; P pool processes each connect one DEALER (never one
socket per logical agent). The ROUTER is ``ROUTER_MANDATORY`` (a send to a vanished pool raises
instead of dropping silently), ``LINGER`` is 0 so no process hangs at exit, and each process
creates its own context after ``fork``.

Everything a peer sends is hostile until validated (see ``simulator.session``); the curator's
socket bounds what a peer can make it hold: high-water marks on both directions (the curator's
sends never block: a peer that stops reading loses its own messages), frames above the size limit
dropped by libzmq, at most one body part per message read (the rest discarded unread), a 5 s
ZMTP handshake limit and a raised file-descriptor limit against idle connections.

About 520 lines, over the house's ~500: the curator's ROUTER loop, the pools' DEALER loop and
the process management of the processes and hosts backends share their socket options, their
signal handling and the child-process helpers, which a split would have to import back and forth.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import resource
import shutil
import signal
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from ldpsim.protocols import get_protocol
from ldpsim.simulator.backends.alloc import tune_if_requested
from ldpsim.simulator.backends.curve import connect_curve, serve_curve
from ldpsim.simulator.backends.door import Door, needs_door, show
from ldpsim.simulator.backends.launch import CURATOR_CTX, start_child
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import Bounded, CuratorSession, Limits, PoolSession, RunFailed
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.poolstate import PoolState
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


#: A pool's DEALER: no high-water marks (a round's batches are all in flight at once), no linger,
#: and a 10 ms reconnect interval instead of ZeroMQ's 100 ms: a pool that starts before the
#: curator has bound its endpoint otherwise waits up to 100 ms (or 0.5 s, its next hello).
POOL_SOCKET_OPTIONS = ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0), (zmq.RECONNECT_IVL, 10))


#: Messages queued per peer and direction. A pool has at most ``session.WINDOW`` query batches
#: in flight and answers each with a frame or a few, so honest traffic stays far below it.
CURATOR_HWM = 1000
#: query frames a pool takes from its socket at once when several are queued (its randomizer
#: answers consecutive batches of a round in one call: ``PoolSession.answer``)
COALESCE = 8
#: Frames from this size on are sent without a copy. pyzmq's zero-copy send hands each frame
#: to a garbage-collector thread of its own (started at the first such send, about 1.5 ms) to
#: release it once libzmq is done: for the frames of batches sized to the round (at most 4 MiB)
#: that costs more than the copy it saves. Measured at 10^6 agents, 2 pools, 2 cores, the best
#: of seven runs' rounds, alternating with a 64 KiB threshold (pyzmq's ``zmq.COPY_THRESHOLD``):
#: LDP-KwikSort 5-16% faster, rank_grr 2-14%, DPWeVote 1-9%, DPWeVote Laplace 5-11%, truth_rr
#: 4-5%, SAFARI 2-5%.
ZERO_COPY_BYTES = 8 << 20
#: Messages the curator reads in one go once its socket says one is queued (``_drain``).
DRAIN = 256
#: Bytes a peer that is not a registered pool may send in one run (a pool's hellos and its
#: registration take a few hundred); beyond them its messages are dropped unread and
#: unanswered. Behind the door (``simulator.backends.door``) such a peer holds the registration
#: key.
STRANGER_BYTES = 1 << 20
#: How often the curator looks whether the CURVE enrolment list changed (``_enrol``).
ENROL_CHECK_S = 0.1
#: A connection that has not finished the ZMTP handshake after this long is closed (idle TCP
#: connections would otherwise hold file descriptors for ever: slowloris).
HANDSHAKE_MS = 5000


def _raise_fd_limit() -> None:
    """Lift this process's soft file-descriptor limit to the hard one (a curator holds one
    descriptor per connected peer; the usual soft limit is 1024)."""
    with contextlib.suppress(Exception):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
        if want > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class CuratorServer:
    """The curator's socket. Runs one session after another on the same bound endpoint.

    A TCP endpoint has a door (``simulator.backends.door``): CURVE's enrolled keys when ``curve``
    names a key directory, else CurveZMQ keys derived from the registration key ``auth``; a
    peer without them never completes the handshake, so nothing it sends is queued.
    """

    def __init__(self, endpoint: str, limits: Limits, curve: str | None = None,
                 auth: bytes | None = None) -> None:
        _raise_fd_limit()
        self.ctx = zmq.Context()
        self.ctx.setsockopt(zmq.LINGER, 0)
        with contextlib.suppress(zmq.ZMQError):  # the context's own cap on sockets
            self.ctx.set(zmq.MAX_SOCKETS, 1 << 16)
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.curve = curve
        self.enrolled: set[str] = set()
        self._enrol_checked, self._enrol_stamp = -1.0, -2
        self.auth = serve_curve(self.ctx, self.sock, curve) if curve else None
        self.door = None
        if needs_door(endpoint, curve):
            if auth is None:
                raise ValueError("a curator on a TCP endpoint needs the registration key for "
                                 "its door (or CURVE)")
            self.door = Door(self.ctx, self.sock, auth)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.sock.setsockopt(zmq.SNDHWM, CURATOR_HWM)
        self.sock.setsockopt(zmq.RCVHWM, CURATOR_HWM)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
        # Last line of defence; frames above the application limit are rejected with a reason.
        self.sock.setsockopt(zmq.MAXMSGSIZE, 2 * limits.max_frame_bytes)
        self.sock.bind(endpoint)
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.limits = limits
        self.peers = Bounded()  # pools that said they are ready, for the next runs' set-up
        self.unreachable = 0
        self.dropped = 0  # messages to peers that did not read theirs (high-water mark)
        self.strangers: Bounded = Bounded()
        self.unread = 0  # messages of strangers over their budget, dropped unread

    def _send_all(self, outs) -> None:
        for peer, frame in outs:
            try:
                self.sock.send_multipart([peer, frame], flags=zmq.NOBLOCK,
                                         copy=len(frame) < ZERO_COPY_BYTES)
            except zmq.Again:  # the peer does not read: it loses its own messages
                self.dropped += 1
            except zmq.ZMQError as e:  # EHOSTUNREACH: the pool is gone; its agents drop out
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self.unreachable += 1
                self.peers.pop(peer, None)

    def _recv(self) -> tuple[bytes, list[bytes], bool, int]:
        """One queued message: the peer, at most two body parts (more are read and dropped),
        whether its sender's CURVE key is enrolled now (always True without CURVE), and the
        bytes of all its parts. Raises ``zmq.Again`` when none is queued."""
        peer = self.sock.recv(flags=zmq.NOBLOCK, copy=True)
        body: list[bytes] = []
        extra = size = 0
        enrolled = True
        while self.sock.getsockopt(zmq.RCVMORE):
            if self.curve and not body:  # the key the connection authenticated with
                frame = self.sock.recv(copy=False)
                enrolled = frame.get("User-Id") in self.enrolled
                body.append(frame.bytes)
                size += len(frame)
                continue
            part = self.sock.recv(copy=len(body) < 2)
            size += len(part)
            if len(body) < 2:
                body.append(part)
            else:
                extra += 1
        if extra:
            body.append(b"")  # only the count matters from here on
        return peer, body, enrolled, size

    def run(self, run_no: int, config: dict[str, Any], auth: bytes,
            record_view: bool = False) -> dict[str, Any]:
        """Serve one run to completion and return the curator's result.

        ``config`` is ``seeding.curator_config(...)`` and ``auth`` the run's registration key:
        never the seed, the master secret or an agent's key.
        """
        if self.curve:
            self._enrol(force=True)
        sess = CuratorSession(run_no, config, auth, self.limits, record_view)
        self.strangers = Bounded()  # bytes each peer that is not a pool sent this run
        for peer in list(self.peers):
            self._send_all(sess.on_ready(peer))
        try:
            return self._serve(sess)
        finally:  # whoever said it is ready hears of the next run (oldest forgotten first)
            for p in sess.ready:
                self.peers[p] = True

    def _enrol(self, force: bool = False) -> None:
        """Read the CURVE enrolment list again when it changed (its directory's modification
        time; at most every ``ENROL_CHECK_S``, and at every run): a removed key is revoked at
        once, for new connections (the authenticator) and open ones (their messages'
        User-Id), before run 0 as at any other time."""
        now = time.monotonic()
        if not force and now - self._enrol_checked < ENROL_CHECK_S:
            return
        self._enrol_checked = now
        clients = Path(self.curve) / "clients"
        try:
            stamp = clients.stat().st_mtime_ns
        except OSError:  # the directory is gone: nobody is enrolled
            stamp = -1
        if not force and stamp == self._enrol_stamp:
            return
        self._enrol_stamp = stamp
        self.auth.configure_curve(domain="*", location=str(clients))
        try:
            self.enrolled = {k.decode("ascii") for k in zmq.auth.load_certificates(clients)}
        except OSError:
            self.enrolled = set()

    def _serve(self, sess: CuratorSession) -> dict[str, Any]:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not sess.finished:
            # the deadline is checked on every pass, so a stream of garbage cannot extend it
            if time.monotonic() >= sess.next_deadline():
                self._send_all(sess.on_timeout())
                continue
            wait = max(0.0, sess.next_deadline() - time.monotonic())
            if poller.poll(int(wait * 1000) + 1):
                self._drain(sess)
        return sess.result

    def _drain(self, sess: CuratorSession) -> None:
        """Handle the queued messages, up to ``DRAIN``, without a poll between two of them
        (under a flood of hostile messages a poll per message cost 22-31% of the curator's CPU
        per message: docs/threat-model.md); stops at the session's deadline, so that the
        caller times it out."""
        if self.curve:
            self._enrol()
        for _ in range(DRAIN):
            try:
                peer, body, enrolled, size = self._recv()
            except zmq.Again:
                return
            if peer not in sess.pools:  # a stranger's bytes this run, within its budget
                spent = self.strangers.get(peer, 0) + size
                self.strangers[peer] = spent
                if spent > STRANGER_BYTES:
                    self.unread += 1  # dropped unread, unanswered
                    continue
            if not enrolled:
                self.peers.pop(peer, None)
                self._send_all(sess.reject(peer, "CURVE key revoked: no longer in the "
                                                 "enrolment list"))
            elif len(body) != 1:
                self._send_all(sess.reject(peer, f"expected one frame per message, got "
                                                 f"{len(body) if len(body) < 3 else 'more'}"))
            else:
                self._send_all(sess.on_frame(peer, body[0]))
            if sess.finished or time.monotonic() >= sess.next_deadline():
                return

    def close(self) -> None:
        """Tell every known pool there are no more runs, then close."""
        bye = wire.encode(wire.DONE, wire.ANY_RUN, wire.SETUP_ROUND, wire.NO_AGENT, None)
        for peer in self.peers:
            with contextlib.suppress(zmq.ZMQError):
                self.sock.send_multipart([peer, bye])
        # up to 50 ms to deliver the goodbyes (``ctx.term`` waits for them): as long as it
        # takes, not a fixed 50 ms at the end of every run
        self.sock.close(linger=50)
        if self.auth is not None:
            self.auth.stop()
        if self.door is not None:
            self.door.stop()
        self.ctx.term()


def pool_loop(endpoint: str, index: int, n_pools: int, auth: bytes, limits: Limits,
              idle_timeout_s: float | None = None,
              curve: tuple[str, str] | None = None, keys: PoolKeys | None = None,
              echo=None, prebuild: dict[str, Any] | None = None,
              policy: AgentPolicy | None = None, state: PoolState | None = None,
              exit_on_done: bool = True) -> int:
    """Serve runs as pool ``index`` of ``n_pools`` until the curator says there are no more.

    Returns the exit code: 0 on a clean end, 1 after an unhandled exception (reported to the
    curator as an ERROR envelope first), 2 when the curator fell silent for ``idle_timeout_s``
    (or never completed the connection, e.g. a failed CURVE handshake). ``auth`` is the
    registration key, ``keys`` this pool's keys (``seeding.PoolKeys``: from the orchestrator,
    or a key file of ``ldpsim keys``), ``policy`` its agents' own limits, ``curve`` (this
    pool's secret key file, the curator's public key file). ``prebuild``: the run's public
    configuration, when the orchestrator knows it as it starts the pool (processes backend);
    the pool builds its rows and coin keys before it says ready (``PoolSession.prebuild``).
    ``state``: the pool's state file (``poolstate.PoolState``: what its agents answered and
    spent, kept across restarts); ``exit_on_done``: whether the curator's end-of-sweep DONE
    ends the loop (otherwise it waits for the next curator, up to ``idle_timeout_s``).

    A set-up pool that hears nothing from the curator for ``limits.timeout_s`` says it is
    ready again (a live curator ignores that from a registered pool); a curator that crashed
    and was started again answers with a new run's set-up, which replaces the dead one.
    """
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    for opt, val in POOL_SOCKET_OPTIONS:
        sock.setsockopt(opt, val)
    sock.setsockopt(zmq.SNDTIMEO, 1000)  # a send never blocks for good (no connection yet)
    if curve:
        connect_curve(sock, *curve)
    elif needs_door(endpoint):
        # the door's key pair of the registration key (``simulator.backends.door``)
        show(sock, auth)
    sock.connect(endpoint)
    sess = PoolSession(index, n_pools, auth, limits, keys, policy, state, exit_on_done)
    if prebuild is not None:
        # one that fails leaves nothing: the set-up builds the data and reports the error
        with contextlib.suppress(Exception):
            sess.prebuild(prebuild)
    idle_timeout_s = idle_timeout_s or max(60.0, 4 * limits.timeout_s)
    code = 0

    def send(frame: bytes) -> None:
        with contextlib.suppress(zmq.Again):  # not connected (yet): the next hello retries
            sock.send(frame, copy=len(frame) < ZERO_COPY_BYTES)

    try:
        send(sess.hello())
        last_hello = last_msg = time.monotonic()
        while not sess.exit:
            if sock.poll(200):
                frames = [sock.recv(copy=True)]
                while len(frames) < COALESCE:  # what else is queued: answered in one go
                    try:
                        frames.append(sock.recv(flags=zmq.NOBLOCK, copy=True))
                    except zmq.Again:
                        break
                last_msg = time.monotonic()
                for out in sess.answer(frames):  # each as soon as it is made
                    send(out)
                sess.prepare()  # the registration is out: generate while the curator plans
                if sess.idle:
                    sess.settle()  # a run's end is out: the state file's exact ledger
                if sess.idle and not sess.exit:
                    send(sess.hello())
                    last_hello = time.monotonic()
            else:
                now = time.monotonic()
                quiet = now - max(last_msg, last_hello)
                if (sess.idle and now - last_hello > 0.5) or quiet > limits.timeout_s:
                    send(sess.hello())
                    last_hello = now
                if now - last_msg > idle_timeout_s:
                    code = 2
                    if echo is not None:
                        echo(f"pool {index}/{n_pools}: no word from the curator at {endpoint} "
                             f"for {idle_timeout_s:g} s (not running, unreachable, or the "
                             f"{'CURVE handshake' if curve else 'connection'} failed); exiting")
                    break
        sess.settle()
    except Exception as exc:  # report, then fail loudly
        code = 1
        with contextlib.suppress(Exception):
            sock.send(sess.error(exc))
            time.sleep(0.2)
        if echo is not None:  # ``ldpsim agents``: one line (the curator has the traceback)
            echo(f"pool {index}/{n_pools} failed: {type(exc).__name__}: {exc}")
        else:
            traceback.print_exc()
    finally:
        sock.close(linger=0)
        ctx.term()
    return code


# ------------------------------------------------------------------ the processes backend


def _use(protocol) -> None:
    """Register the orchestrator's protocol object in this fresh curator process (it may be
    one the orchestrator registered at run time: a plugin, or a test's toy protocol)."""
    from ldpsim import protocols
    protocols.PROTOCOLS[protocol.name] = protocol


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
                policy: AgentPolicy | None = None) -> None:
    die_with_parent()
    os._exit(pool_loop(endpoint, index, n_pools, auth, limits, keys=keys, prebuild=prebuild,
                       policy=policy))


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
                  parties: Parties | None = None) -> dict:
    """Run one configured run as 1 curator + P pool processes talking over ZeroMQ.

    The curator process (started from a fork server, see ``_CURATOR_CTX``) is handed only
    ``curator_config`` and the run's registration key; each pool gets its own keys from here
    (``seeding.local_parties``: its block's agents only), never through the curator.
    ``secrets``: the experiment's (``protocols.keys.Secrets``; default the seed's alone);
    ``policy``: the agents' own limits; ``n``: the data set's size if known; ``parties``: the
    keys, when the caller made them (the dask backend's pools, started elsewhere, hold theirs).

    Raises RunFailed (with the failing process's traceback) when any process raises, and
    stops every child on the way out, including on KeyboardInterrupt.
    """
    ctx = mp.get_context("fork")
    if parties is None:
        parties = local_parties(config, agents_of(config) if n is None else n, secrets)
    ipc_dir = None
    if endpoint is None:
        ipc_dir, endpoint = private_ipc()
    n_pools = int(config["pools"])
    rx, tx = _CURATOR_CTX.Pipe(duplex=False)
    curator = _CURATOR_CTX.Process(
        target=_curator_child, name="ldpsim-curator",
        args=(endpoint, parties.curator, parties.auth, limits, record_view, tx,
              get_protocol(config["protocol"])))
    # the pools build their rows as they start, before they say ready, while the curator
    # process starts: the run's data exist before the curator's first message, and the data
    # generation overlaps the curator's start-up instead of round 0 (whatever ``data_first``)
    prebuild = public_config(config)
    pools = [ctx.Process(target=_pool_child, name=f"ldpsim-pool-{i}",
                         args=(endpoint, i, n_pools, parties.auth, limits, parties.pools[i],
                               prebuild, policy))
             for i in range(n_pools)] if spawn_pools else []
    procs = [curator, *pools]
    try:
        start_child(curator)
        tx.close()
        for p in pools:
            start_child(p)
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
        if ipc_dir:
            shutil.rmtree(ipc_dir, ignore_errors=True)


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
