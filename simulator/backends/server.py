"""The curator's socket: one ROUTER, bound once, serving one run after another.

Everything a peer sends is hostile until validated (see ``simulator.session``); the socket
bounds what a peer can make the curator hold: high-water marks on both directions (the
curator's sends never block: a peer that stops reading loses its own messages), frames above
the size limit dropped by libzmq, at most one body part per message read (the rest discarded
unread), a byte budget per run for a peer that is not a registered pool, a 5 s ZMTP handshake
limit and a raised file-descriptor limit against idle connections. A TCP endpoint has a door
(``simulator.backends.door``) in front of all of it.
"""

from __future__ import annotations

import contextlib
import resource
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from ldpsim.simulator.backends.curve import serve_curve
from ldpsim.simulator.backends.door import Door, needs_door
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import Bounded, CuratorSession, Limits

#: Messages queued per peer and direction. A pool has at most ``session.WINDOW`` query batches
#: in flight and answers each with a frame or a few, so honest traffic stays far below it.
CURATOR_HWM = 1000
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
