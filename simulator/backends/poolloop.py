"""A pool's side of the wire: one DEALER socket serving runs until the curator says there are
no more (``pool_loop``), for the processes and hosts backends and ``ldpsim agents``.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any

import zmq
from ldpsim.simulator.backends.curve import connect_curve
from ldpsim.simulator.backends.door import needs_door, show
from ldpsim.simulator.backends.server import ZERO_COPY_BYTES
from ldpsim.simulator.session import Limits, PoolSession
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.poolstate import PoolState
from ldpsim.simulator.session.seeding import PoolKeys
from ldpsim.simulator.session.truthshare import TruthShare

#: A pool's DEALER: no high-water marks (a round's batches are all in flight at once), no linger,
#: and a 10 ms reconnect interval instead of ZeroMQ's 100 ms: a pool that starts before the
#: curator has bound its endpoint otherwise waits up to 100 ms (or 0.5 s, its next hello).
POOL_SOCKET_OPTIONS = ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0), (zmq.RECONNECT_IVL, 10))

#: query frames a pool takes from its socket at once when several are queued (its randomizer
#: answers consecutive batches of a round in one call: ``PoolSession.answer``)
COALESCE = 8


def pool_loop(endpoint: str, index: int, n_pools: int, auth: bytes, limits: Limits,
              idle_timeout_s: float | None = None,
              curve: tuple[str, str] | None = None, keys: PoolKeys | None = None,
              echo=None, prebuild: dict[str, Any] | None = None,
              policy: AgentPolicy | None = None, state: PoolState | None = None,
              exit_on_done: bool = True, truth_out: Any = None) -> int:
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
    ``truth_out``: the orchestrator's end of a pipe of this pool's own (processes backend): the
    pool sends it its share of each run's ground truth (``truthshare``), ``(run_id, part)``,
    once the run's reports are out; never through the curator.

    A set-up pool that hears nothing from the curator for ``limits.timeout_s`` says it is
    ready again (a live curator ignores that from a registered pool); a curator that crashed
    and was started again answers with a new run's set-up, which replaces the dead one.
    """
    ctx = zmq.Context()
    sock = _pool_socket(ctx, endpoint, auth, curve)
    sess = PoolSession(index, n_pools, auth, limits, keys, policy, state, exit_on_done)
    if truth_out is not None:
        sess.share = TruthShare()
    if prebuild is not None:
        # one that fails leaves nothing: the set-up builds the data and reports the error
        with contextlib.suppress(Exception):
            sess.prebuild(prebuild)
    idle_timeout_s = idle_timeout_s or max(60.0, 4 * limits.timeout_s)
    code = 0
    try:
        if not _serve(sock, sess, limits.timeout_s, idle_timeout_s, truth_out):
            code = 2
            if echo is not None:
                echo(f"pool {index}/{n_pools}: no word from the curator at {endpoint} "
                     f"for {idle_timeout_s:g} s (not running, unreachable, or the "
                     f"{'CURVE handshake' if curve else 'connection'} failed); exiting")
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
        if truth_out is not None:
            truth_out.close()
    return code


def _pool_socket(ctx: zmq.Context, endpoint: str, auth: bytes,
                 curve: tuple[str, str] | None) -> zmq.Socket:
    """The pool's DEALER (``POOL_SOCKET_OPTIONS``), connected to ``endpoint`` through its door:
    enrolled CURVE keys (``curve``), or on TCP the door's key pair of the registration key
    ``auth`` (``simulator.backends.door``)."""
    sock = ctx.socket(zmq.DEALER)
    for opt, val in POOL_SOCKET_OPTIONS:
        sock.setsockopt(opt, val)
    sock.setsockopt(zmq.SNDTIMEO, 1000)  # a send never blocks for good (no connection yet)
    if curve:
        connect_curve(sock, *curve)
    elif needs_door(endpoint):
        show(sock, auth)
    sock.connect(endpoint)
    return sock


def _send(sock: zmq.Socket, frame: bytes) -> None:
    """Send ``frame``; dropped when not connected (yet): the next hello retries."""
    with contextlib.suppress(zmq.Again):
        sock.send(frame, copy=len(frame) < ZERO_COPY_BYTES)


def _take(sock: zmq.Socket) -> list[bytes]:
    """The next frame and what else is queued behind it, up to ``COALESCE`` (answered in one
    go)."""
    frames = [sock.recv(copy=True)]
    while len(frames) < COALESCE:
        try:
            frames.append(sock.recv(flags=zmq.NOBLOCK, copy=True))
        except zmq.Again:
            break
    return frames


def _serve(sock: zmq.Socket, sess: PoolSession, timeout_s: float, idle_timeout_s: float,
           truth_out: Any = None) -> bool:
    """Answer the curator until the session exits (True), or until it has been silent for
    ``idle_timeout_s`` (False). An idle pool says hello every 0.5 s; a set-up one that hears
    nothing for ``timeout_s`` says it again (a live curator ignores that from a registered
    pool; a restarted one answers with a new run's set-up). The parts of the ground truth
    the session made go to ``truth_out`` (if any) once the frames answering are sent."""
    _send(sock, sess.hello())
    last_hello = last_msg = time.monotonic()
    while not sess.exit:
        if sock.poll(200):
            frames = _take(sock)
            last_msg = time.monotonic()
            for out in sess.answer(frames):  # each as soon as it is made
                _send(sock, out)
            for part in sess.take_truth():  # after the run's reports: to the orchestrator
                if truth_out is not None:
                    with contextlib.suppress(OSError):  # it stopped listening: it computes
                        truth_out.send(part)
            sess.prepare()  # the registration is out: generate while the curator plans
            if sess.idle:
                sess.settle()  # a run's end is out: the state file's exact ledger
            if sess.idle and not sess.exit:
                _send(sock, sess.hello())
                last_hello = time.monotonic()
            continue
        now = time.monotonic()
        if (sess.idle and now - last_hello > 0.5) or now - max(last_msg, last_hello) > timeout_s:
            _send(sock, sess.hello())
            last_hello = now
        if now - last_msg > idle_timeout_s:
            return False
    return True
