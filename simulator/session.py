"""Curator and pool sessions: the message logic of one run, independent of the transport.

Both sessions consume frames (bytes) and produce frames; a *driver* moves the frames, either over
ZeroMQ sockets between processes (``simulator.transport``) or by direct calls in one process
(``simulator.inproc``). Because the logic is the same object in both cases, the backends differ
only in how bytes travel, and must agree bit for bit.

Message flow of one run (``run`` is the run's number on this curator)::

    pool    HELLO(run=-1, round=-1)            "ready" (repeated until set up)
    curator BCAST(run, round=-1, {config})     the run's public configuration
    pool    HELLO(run, round=-1, {agents...})  registers its block of logical agents
    pool    DISCLOSE(run, -1, agent, {...})    colluders only, when the curator colludes
    per round r = 0, 1, ...:
      curator BCAST(run, r, broadcast)         once per pool, if the round has one
      curator QUERY(run, r, agent, query)      one envelope per asked agent, batched
      pool    REPORT(run, r, agent, report)    one envelope per agent, batched
    curator DONE(run, -1, {output})            public release; pool answers DONE with its stats
    curator DONE(run=-1)                       no more runs: the pool exits

Every inbound envelope is validated; anything wrong is dropped with a reason, counted, answered
with an ERROR envelope (up to a cap per peer) and never reaches the estimator.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import os
import resource
import secrets
import time
import traceback
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ldpsim.protocols import get_data_kind, get_protocol
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import MAX_AGENTS
from ldpsim.simulator import wire
from ldpsim.simulator.collusion import colluder_mask
from ldpsim.simulator.seeding import PoolKeys, auth_key, pool_keys_from_secret, registration_mac

Out = Iterable[tuple[bytes, bytes]]  # (peer identity, frame)

log = logging.getLogger("ldpsim.curator")

#: Invalid envelopes in one frame after which the rest of the frame is dropped unread (one
#: more rejection): a frame of a million garbage objects costs what 64 do.
MAX_REJECTS_PER_FRAME = 64
#: Reports decoded before they are checked and stored, on the careful path (bounds the
#: memory one large frame can take as Python objects).
REPORT_CHUNK = 4096
#: Frames up to this size may be decoded whole by the one-call fast path.
FAST_DECODE_BYTES = 4 << 20
#: Peers the curator remembers (said "ready", got ERROR replies, failed authentication):
#: the oldest are forgotten first, so a flood of new identities cannot grow memory or push an
#: honest pool out for good (an idle pool repeats its "ready" every 0.5 s).
MAX_PEERS = 4096
#: Failed registrations after which a peer identity is ignored for the rest of the run.
MAX_AUTH_FAILURES = 3
#: Characters of a rejection reason that are kept (reasons quote peers' input).
MAX_REASON = 300
#: Rounds a pool keeps an agent's answers for (a curator asking more is refused).
MAX_ROUNDS = 10**4


class RunFailed(RuntimeError):
    """A run cannot complete (a process raised, nobody registered, ...)."""


@dataclass
class Limits:
    """Validation limits and timeouts of a session."""

    max_frame_bytes: int = 64 << 20
    max_envelope_bytes: int = 1 << 20
    timeout_s: float = 30.0  # inactivity timeout while waiting for registrations or reports
    done_timeout_s: float = 2.0  # how long to wait for pools' DONE stats
    max_error_replies: int = 100  # ERROR envelopes sent back per peer per run
    max_rejections: int = 200  # rejection records kept per run (all are counted)


def block_of(index: int, n_pools: int, n: int) -> tuple[int, int]:
    """Agents ``[start, stop)`` hosted by pool ``index`` of ``n_pools``."""
    return index * n // n_pools, (index + 1) * n // n_pools


def zmtp_bytes(frame_len: int) -> int:
    """Bytes a frame occupies in a ZMTP 3 stream: flags + 1- or 8-byte length + body."""
    return frame_len + (2 if frame_len <= 255 else 9)


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ----------------------------------------------------------------------------------- curator

#: Query batches in flight per pool. A pool gets its next batch when a frame from it arrives, so
#: the curator validates reports while the pools compute instead of encoding a whole round
#: first, every pool keeps a few batches queued, and a round's frames never pile up in memory.
#: A pool that falls silent stops only its own batches (its agents become dropouts).
WINDOW = 8


def _span(ids: np.ndarray) -> slice | np.ndarray:
    """Strictly increasing ids as a slice when they form one range (in-place slice updates
    are much faster than fancy indexing), else the ids themselves."""
    if len(ids) and int(ids[-1]) - int(ids[0]) + 1 == len(ids):
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids


def _is_report(obj: Any, run: int, rno: int | None, n: int) -> bool:
    """A well-formed REPORT envelope for this run and round from an agent id in [0, n)
    (fields checked, payload not). Types are checked before values: a peer's ndarray compared
    with ``==`` is an array, not a bool."""
    if type(obj) is not list or len(obj) != 6:
        return False
    v, k, r, rr, a = obj[0], obj[1], obj[2], obj[3], obj[4]
    return (type(v) is int and v == wire.VERSION and type(k) is int and k == wire.REPORT
            and type(r) is int and r == run and type(rr) is int and rr == rno
            and type(a) is int and 0 <= a < n)


@contextlib.contextmanager
def _protocol_code(what: str):
    """The protocol's own curator code failed: that ends the run (``RunFailed`` with the
    traceback), unlike a peer's bad input, which is only ever a rejection."""
    try:
        yield
    except RunFailed:
        raise
    except Exception:
        raise RunFailed(f"the protocol's curator code failed in {what}:\n"
                        + traceback.format_exc()) from None


class Bounded(OrderedDict):
    """A dict that forgets its least recently set keys beyond ``limit`` entries."""

    def __init__(self, limit: int = MAX_PEERS) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value) -> None:
        if key in self:
            self.move_to_end(key)
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)


#: A pool's DONE statistics: name -> (allowed types, whether it must be >= 0). Checked like
#: reports; anything else rejects the whole DONE (the pool's agents still count).
STATS = {"pool": (int, True), "agent_cpu_s": ((int, float), True), "agent_calls": (int, True),
         "agent_cpu_s_max": ((int, float), True), "pool_cpu_s": ((int, float), True),
         "peak_rss_mb": ((int, float), True), "refused": (int, True)}


def check_stats(payload: Any) -> str | None:
    """Why a pool's DONE statistics are unacceptable, or None if they are fine."""
    if not isinstance(payload, dict):
        return f"DONE statistics must be a map, got {type(payload).__name__}"
    for name, value in payload.items():
        if name == "agent_time_mode":
            if value not in ("exact", "amortised"):
                return f"DONE statistic agent_time_mode: got {wire.quote(value)}"
            continue
        spec = STATS.get(name)
        if spec is None:
            return f"unknown DONE statistic {wire.quote(name)}"
        types, nonneg = spec
        if type(value) is bool or not isinstance(value, types) or (
                isinstance(value, float) and not math.isfinite(value)) or (
                nonneg and value < 0) or abs(value) > 1e15:
            return f"DONE statistic {name}: got {wire.quote(value)}"
    return None


@dataclass
class _Pool:
    peer: bytes
    index: int
    start: int
    stop: int
    stats: dict[str, Any] | None = None


@dataclass
class _Round:
    number: int
    plan: Any
    asked: np.ndarray  # bool per agent
    reported: np.ndarray  # bool per agent
    expected: int
    got: int = 0
    values: np.ndarray | None = None  # reports by row of plan.agents (rows of reported agents)
    pending: dict[tuple[bytes, int], np.ndarray] = field(default_factory=dict)  # sent batches
    agents: np.ndarray | None = None  # plan.agents as int64
    queries: Any = None  # plan.queries as encode_batch or encode_many takes them
    vector: bool = False  # whether encode_batch takes them
    outbox: dict[bytes, deque] = field(default_factory=dict)  # per pool: unsent (row, end row)
    t_wall: float = 0.0
    t_cpu: float = 0.0
    bytes_down: int = 0
    bytes_up: int = 0
    invalid: int = 0  # asked agents whose only report so far was out of domain (or refused)
    refused: int = 0  # asked agents who refused (privacy budget)
    invalid_mask: np.ndarray | None = None


class CuratorSession:
    """The curator's side of one run. Never sees raw data or ground truth.

    Parameters
    ----------
    run : int
        The run's number on this curator (the ``run`` field of every envelope).
    config : dict
        The curator's configuration (``seeding.curator_config``): the public part sent to the
        pools (protocol, params, data, pools, agent_mode, batch, collusion, faults, run_id)
        and ``keys``, the curator's own and the collusion stream keys. Never the run seed:
        a config holding one is refused.
    auth : bytes
        ``seeding.auth_key(secret)``: checks the pools' answers to this run's challenge (a
        fresh nonce in the set-up). The secret itself never reaches the curator.
    limits : Limits
    record_view : bool
        Keep the adversary view (everything the curator received, the disclosures, the output).
    """

    def __init__(self, run: int, config: dict[str, Any], auth: bytes, limits: Limits,
                 record_view: bool = False) -> None:
        if "seed" in config or "keys" not in config:
            raise ValueError("a curator gets seeding.curator_config(config), never the run seed")
        self.run = run
        self.config = config
        self.auth = auth
        self.limits = limits
        self.protocol = get_protocol(config["protocol"])
        self.curator_key = int(config["keys"]["curator"])
        self.collusion_key = int(config["keys"]["collusion"])
        self.n_pools = int(config["pools"])
        self.pools: dict[bytes, _Pool] = {}
        self.ready: Bounded = Bounded()  # peers that said they are ready (most recent last)
        self.setup_sent: Bounded = Bounded()
        self.replies: Bounded = Bounded()  # ERROR envelopes sent per peer
        self.auth_failures: Bounded = Bounded()  # failed registrations per peer
        self.auth_failed = 0
        self.nonce = secrets.token_bytes(16)  # this run's registration challenge
        self.state = "registering"
        self.n: int | None = None
        self.public: dict[str, Any] | None = None
        self.params: dict[str, Any] | None = None
        self.owner: np.ndarray | None = None  # pool slot per agent, -1 = unregistered
        self.curator = None
        self.round: _Round | None = None
        self.rounds: list[dict[str, Any]] = []
        self.rejected = 0
        self.rejections: list[dict[str, Any]] = []
        self.refused = 0  # queries the agents refused (privacy odometer)
        self.refusal_reason: str | None = None
        self.failure: str | None = None
        self.result: dict[str, Any] | None = None
        self.finished = False
        self.deadline = time.monotonic() + limits.timeout_s
        self.record_view = record_view
        self.view: dict[str, Any] = {"rounds": [], "disclosures": {}, "broadcasts": []}
        self.coalition_curator = bool(config.get("collusion", {}).get("curator", True))
        self.colluders: np.ndarray | None = None
        # accounting
        self.up = self.down = None  # bytes per agent
        self.msgs_up = self.msgs_down = 0  # envelopes (all to or from registered agents)
        self.phys_up = self.phys_down = 0
        self.frames_up = self.frames_down = 0
        self.disclose_bytes = 0
        self.dropouts_reports = 0
        self.t0_wall = time.perf_counter()
        self.t0_cpu = time.process_time()
        self.t_ready: float | None = None  # when every pool had said it is ready
        self.output: dict[str, Any] | None = None
        public = {k: v for k, v in config.items() if k != "keys"}
        self._setup_frame = wire.encode(wire.BCAST, run, wire.SETUP_ROUND, wire.NO_AGENT,
                                        {"config": public, "nonce": self.nonce})

    # -- helpers --------------------------------------------------------------------------
    def _send(self, peer: bytes, frame: bytes) -> tuple[bytes, bytes]:
        self.phys_down += zmtp_bytes(len(frame))
        self.frames_down += 1
        return peer, frame

    def reject(self, peer: bytes, reason: str, env: wire.Envelope | None = None,
               code: str | None = None) -> Out:
        """Count and record a rejected message; answer the peer with an ERROR (capped).

        O(1) whatever the history: a per-peer reply counter (bounded, see ``MAX_PEERS``), a
        bounded list of records, and reasons cut to ``MAX_REASON`` characters.
        """
        self.rejected += 1
        if len(reason) > MAX_REASON:
            reason = reason[:MAX_REASON] + "..."
        if len(self.rejections) < self.limits.max_rejections:
            rec = {"peer": peer[:16].hex(), "reason": reason}
            if env is not None:
                rec.update(type=wire.TYPE_NAMES.get(env.kind, env.kind), run=env.run,
                           round=env.round, agent=env.agent)
            self.rejections.append(rec)
        count = self.replies.get(peer, 0)
        if count < self.limits.max_error_replies:
            self.replies[peer] = count + 1
            agent = env.agent if env is not None else wire.NO_AGENT
            rnd = env.round if env is not None else wire.SETUP_ROUND
            payload = {"error": reason} if code is None else {"error": reason, "code": code}
            yield self._send(peer, wire.encode(wire.ERROR, self.run, rnd, agent, payload))

    def next_deadline(self) -> float:
        return self.deadline

    def _touch(self) -> None:
        timeout = self.limits.done_timeout_s if self.state == "done" else self.limits.timeout_s
        self.deadline = time.monotonic() + timeout

    # -- inbound ----------------------------------------------------------------------------
    def on_ready(self, peer: bytes) -> Out:
        """A pool said it is ready: send it this run's set-up (once)."""
        if peer in self.pools:  # a registered pool's keep-alive while it waits
            return
        self.ready[peer] = True
        if self.t_ready is None and len(self.ready) >= self.n_pools:
            self.t_ready = time.perf_counter()
        if self.state == "registering" and peer not in self.setup_sent:
            self.setup_sent[peer] = True
            yield self._send(peer, self._setup_frame)

    def on_frame(self, peer: bytes, frame: bytes) -> Out:
        """Handle one inbound frame (a batch of envelopes) from ``peer``.

        Never raises on a peer's input: an exception while handling it becomes one counted
        rejection of the frame. Only ``RunFailed`` (the protocol's own code failed, or a pool
        reported a crash) ends the run.
        """
        try:
            yield from self._on_frame(peer, frame)
        except RunFailed:
            raise
        except Exception as e:  # a peer's input reached a path we did not foresee
            log.warning("frame from %s: %s: %s", peer[:16].hex(), type(e).__name__, e)
            yield from self.reject(peer, f"frame rejected: {type(e).__name__}: "
                                         f"{wire.quote(str(e))}")

    def _on_frame(self, peer: bytes, frame: bytes) -> Out:
        self.phys_up += zmtp_bytes(len(frame))
        self.frames_up += 1
        if self.finished or self.auth_failures.get(peer, 0) >= MAX_AUTH_FAILURES:
            return
        # The inactivity deadline moves only on progress (registrations, accepted reports,
        # DONE stats): heartbeats or garbage from a hostile peer cannot stall the curator.
        if len(frame) > self.limits.max_frame_bytes:
            yield from self.reject(peer, f"oversized frame: {len(frame)} bytes > limit "
                                         f"{self.limits.max_frame_bytes}")
            return
        registered = peer in self.pools
        if not registered and len(frame) > self.limits.max_envelope_bytes:
            # an unregistered peer can only say it is ready or register: one envelope
            yield from self.reject(peer, f"oversized frame from an unregistered peer: "
                                         f"{len(frame)} bytes > {self.limits.max_envelope_bytes}")
            return
        rnd = self.round
        rno = rnd.number if rnd is not None else None
        if rnd is not None and registered and (
                (yield from self._batch_reports(peer, frame, rnd))
                or (len(frame) <= FAST_DECODE_BYTES
                    and (yield from self._fast_reports(peer, frame, rnd)))):
            yield from self._send_batch(rnd, peer)  # it answered: one more batch in flight
            yield from self._maybe_advance()
            return
        fast_agents: list[int] = []
        fast_payloads: list[Any] = []
        fast_sizes: list[int] = []
        run, n, max_env = self.run, self.n or 0, self.limits.max_envelope_bytes
        rejected0 = self.rejected
        try:
            for obj, size in wire.iter_frame(frame, self.limits.max_frame_bytes):
                if registered and _is_report(obj, run, rno, n) and size <= max_env:
                    fast_agents.append(obj[4])
                    fast_payloads.append(obj[5])
                    fast_sizes.append(size)
                    if len(fast_agents) >= REPORT_CHUNK:
                        yield from self._on_reports(peer, fast_agents, fast_payloads,
                                                    fast_sizes)
                        fast_agents, fast_payloads, fast_sizes = [], [], []
                else:
                    yield from self._on_envelope(peer, obj, size)
                    if self.finished or self.round is not rnd:
                        break  # the run moved on (e.g. the registrations completed)
                    if self.rejected - rejected0 >= MAX_REJECTS_PER_FRAME:
                        yield from self.reject(peer, f"rest of the frame dropped after "
                                                     f"{MAX_REJECTS_PER_FRAME} invalid envelopes")
                        break
        except wire.WireError as e:
            yield from self.reject(peer, str(e))
        if fast_agents and self.round is rnd:
            yield from self._on_reports(peer, fast_agents, fast_payloads, fast_sizes)
        if rnd is not None and rnd is self.round and peer in self.pools:
            yield from self._send_batch(rnd, peer)
        yield from self._maybe_advance()

    def _batch_reports(self, peer: bytes, frame: bytes, rnd: _Round):
        """Fastest path: the frame answers a query batch this peer was sent, canonically.

        The pool answers each query batch with one frame of reports for the same agents in the
        same order; if the frame is byte for byte the canonical encoding of those envelopes
        (``wire.match_batch``), its payloads are read as one array without decoding envelope
        by envelope. Every check of the general path still applies (owner, asked, duplicates,
        domain, size). Returns False, having done nothing, otherwise.
        """
        first = wire.first_agent(frame, wire.REPORT)
        if first is None or first[0] != self.run or first[1] != rnd.number:
            return False
        sent = rnd.pending.get((peer, first[2]))
        if sent is None:
            return False
        schema = rnd.plan.schema
        all_sizes = wire.batch_sizes(self.run, rnd.number, sent, schema.length, schema.dtype)
        if len(frame) == int(all_sizes.sum()):  # the whole batch, the common case
            j = len(sent)
        else:  # the frame may answer a prefix of the batch (a pool splits large replies)
            ends = np.cumsum(all_sizes)
            j = int(np.searchsorted(ends, len(frame))) + 1
            if j > len(sent) or ends[j - 1] != len(frame):
                return False
        ids = sent[:j]
        values = wire.match_batch(frame, wire.REPORT, self.run, rnd.number, ids, schema.length,
                                  schema.dtype)
        if values is None:
            return False
        sizes = all_sizes[:j]
        if not schema.all_inside(values) or sizes.max() > self.limits.max_envelope_bytes:
            return False
        del rnd.pending[(peer, first[2])]
        if j < len(sent):
            rnd.pending[(peer, int(sent[j]))] = sent[j:]
        yield from self._on_reports(peer, ids, None, sizes,
                                    (np.ones(len(ids), dtype=bool), values), sent_batch=True)
        return True

    def _fast_reports(self, peer: bytes, frame: bytes, rnd: _Round):
        """Fast path for a frame made only of well-formed reports for this round.

        Decodes the frame in one C call and recovers each envelope's exact size as its
        shortest encoding (valid because the sizes must add up to the frame length). Returns
        False, having done nothing, when the frame needs the careful per-envelope path.
        """
        try:
            objs = wire.unpack_all(frame, self.limits.max_frame_bytes)
        except wire.WireError:
            return False
        run, rno, n = self.run, rnd.number, self.n
        if not objs or not all(_is_report(o, run, rno, n) for o in objs):
            return False
        agents = np.fromiter((o[4] for o in objs), dtype=np.int64, count=len(objs))
        payloads = [o[5] for o in objs]
        schema = rnd.plan.schema
        ok, values = schema.validate(payloads)
        if not ok.all():
            return False
        sizes = wire.minimal_report_sizes(run, rno, agents, values, schema.dtype)
        if int(sizes.sum()) != len(frame) or sizes.max() > self.limits.max_envelope_bytes:
            return False
        yield from self._on_reports(peer, agents, payloads, sizes, (ok, values))
        return True

    def _on_envelope(self, peer: bytes, obj: Any, size: int) -> Out:
        try:
            env = wire.check_envelope(obj, size)
        except wire.WireError as e:
            yield from self.reject(peer, str(e))
            return
        if size > self.limits.max_envelope_bytes:
            yield from self.reject(peer, f"envelope of {size} bytes > limit "
                                         f"{self.limits.max_envelope_bytes}", env)
            return
        if env.kind == wire.HELLO and env.run == wire.ANY_RUN:
            yield from self.on_ready(peer)
            return
        if env.run != self.run:
            yield from self.reject(peer, f"wrong run {env.run} (this is run {self.run})", env)
            return
        if env.kind == wire.HELLO:
            yield from self._on_register(peer, env)
        elif env.kind == wire.REPORT:
            if self.round is None or env.round != self.round.number:
                cur = "none" if self.round is None else self.round.number
                yield from self.reject(peer, f"out-of-round report: round {env.round}, "
                                             f"current round {cur}", env)
            else:
                yield from self._on_reports(peer, [env.agent], [env.payload], [size])
        elif env.kind == wire.DISCLOSE:
            yield from self._on_disclose(peer, env)
        elif env.kind == wire.ERROR:
            p = env.payload if isinstance(env.payload, dict) else {}
            if peer in self.pools and p.get("code") == "budget":
                self._on_refusal(self.pools[peer], env, p)
            elif peer in self.pools:
                error = p.get("error", "?")
                trace = p.get("traceback", "")
                error = error[:2000] if isinstance(error, str) else wire.quote(error)
                trace = trace[-20000:] if isinstance(trace, str) else ""
                self.failure = f"pool {self.pools[peer].index} failed: {error}\n{trace}"
                raise RunFailed(self.failure)
            else:
                yield from self.reject(peer, "ERROR from an unregistered peer", env)
        elif env.kind == wire.DONE:
            pool = self.pools.get(peer)
            why = None if pool is None or self.state != "done" else check_stats(env.payload)
            if pool is None or self.state != "done":
                yield from self.reject(peer, "unexpected DONE", env)
            elif why is not None:
                pool.stats = {}  # answered, but its statistics are not used
                yield from self.reject(peer, why, env)
            else:
                pool.stats = env.payload
                self._touch()
        else:
            yield from self.reject(peer, f"a curator does not accept "
                                         f"{wire.TYPE_NAMES[env.kind]} messages", env)

    def _refuse(self, peer: bytes, reason: str, env: wire.Envelope) -> Out:
        """Refuse a registration; the pool goes back to waiting for the next run's set-up."""
        yield from self.reject(peer, f"registration refused: {reason}", env, code="refused")

    def _on_register(self, peer: bytes, env: wire.Envelope) -> Out:
        p = env.payload
        if peer in self.pools:  # never a refusal (the pool would leave), never a ban
            yield from self.reject(peer, "this peer is already registered", env)
            return
        try:
            if not isinstance(p, dict):
                raise TypeError
            index, pools = p["pool"], p["pools"]
            if type(index) is not int or type(pools) is not int:
                raise TypeError
            mac = p["mac"]
            good = (type(mac) is bytes and pools == self.n_pools and 0 <= index < pools
                    and hmac.compare_digest(mac, registration_mac(
                        self.auth, self.nonce, self.run, index, pools)))
        except (KeyError, TypeError, ValueError, IndexError):
            good = False
        if not good:  # never a slot for a peer that fails authentication
            fails = self.auth_failures.get(peer, 0) + 1
            self.auth_failures[peer] = fails
            self.auth_failed += 1
            if self.auth_failed <= 10 or fails == MAX_AUTH_FAILURES:
                log.warning("run %d: registration from %s failed authentication (%d from this "
                            "peer%s)", self.run, peer[:16].hex(), fails,
                            "; ignoring it for the rest of the run"
                            if fails >= MAX_AUTH_FAILURES else "")
            yield from self._refuse(peer, "authentication failed (wrong or missing token, or "
                                          "an answer to another run's challenge)", env)
            return
        if self.state != "registering":
            yield from self._refuse(peer, "the rounds have started", env)
            return
        try:
            n, agents, public = p["n"], p["agents"], p["public"]
            start, stop = agents
            if not all(type(x) is int for x in (n, start, stop)) or not isinstance(public, dict):
                raise TypeError
        except (KeyError, TypeError, ValueError):
            yield from self._refuse(peer, "the payload must hold pool, pools, n, agents = "
                                          "[start, stop], public and mac", env)
            return
        # a loader keeps *at most* data.n agents; a generator exactly data.n
        most = self.config.get("data", {}).get("n")
        most = most if type(most) is int and 1 <= most <= MAX_AGENTS else MAX_AGENTS
        if not 1 <= n <= most:
            yield from self._refuse(peer, f"n = {wire.quote(n)} agents is outside the "
                                          f"scenario's [1, {most}]", env)
            return
        if any(q.index == index for q in self.pools.values()):
            yield from self._refuse(peer, f"pool index {index} is taken", env)
            return
        if self.n is None:
            self.n, self.public = n, public
            self.owner = np.full(n, -1, dtype=np.int32)
            self.colluders = colluder_mask(n, self.config.get("collusion", {}),
                                           self.collusion_key)
        elif n != self.n or wire.packer().pack(public) != wire.packer().pack(self.public):
            yield from self._refuse(peer, f"pool {index} disagrees on the data (n={n})", env)
            return
        if (start, stop) != block_of(index, self.n_pools, self.n):
            yield from self._refuse(peer, f"unknown agents: pool {index} must host "
                                          f"{block_of(index, self.n_pools, self.n)}", env)
            return
        self.pools[peer] = _Pool(peer, index, start, stop)
        self.owner[start:stop] = index
        self._touch()
        if len(self.pools) == self.n_pools:
            yield from self._start()

    def _on_refusal(self, pool: _Pool, env: wire.Envelope, p: dict[str, Any]) -> None:
        """A pool's agents refused a query (their privacy budget, or a round asked twice):
        recorded, and the round stops waiting for them."""
        agents = p.get("agents")
        rnd = self.round
        if not isinstance(agents, np.ndarray) or agents.ndim != 1 or agents.dtype.kind not in "iu":
            return
        agents = agents[(agents >= pool.start) & (agents < pool.stop)].astype(np.int64)
        if rnd is None or env.round != rnd.number or not len(agents):
            return
        agents = np.unique(agents)
        # only asked agents the round still waits for count (a refusal cannot undo a report)
        wait = agents[rnd.asked[agents] & ~rnd.reported[agents] & ~rnd.invalid_mask[agents]]
        self.refused += len(wait)
        if len(wait) and self.refusal_reason is None and isinstance(p.get("error"), str):
            self.refusal_reason = p["error"][:MAX_REASON]
        rnd.invalid_mask[wait] = True
        rnd.invalid += len(wait)
        rnd.refused += len(wait)
        self._touch()

    def _on_disclose(self, peer: bytes, env: wire.Envelope) -> Out:
        pool = self.pools.get(peer)
        if pool is None or not pool.start <= env.agent < pool.stop:
            yield from self.reject(peer, f"unknown agent {env.agent} for this peer", env)
        elif not self.coalition_curator or self.colluders is None \
                or not self.colluders[env.agent]:
            yield from self.reject(peer, f"agent {env.agent} is not in the coalition", env)
        elif not isinstance(env.payload, dict) or "data" not in env.payload:
            yield from self.reject(peer, "DISCLOSE payload must hold data and coins", env)
        else:
            self.disclose_bytes += env.size
            self.view["disclosures"][int(env.agent)] = env.payload

    def _on_reports(self, peer: bytes, agents, payloads: list[Any], sizes,
                    validated: tuple[np.ndarray, np.ndarray] | None = None,
                    sent_batch: bool = False) -> Out:
        rnd = self.round
        pool = self.pools.get(peer)
        if pool is None:
            for a in agents[:1]:
                yield from self.reject(peer, f"unknown peer: not a registered pool "
                                             f"(agent {a}, {len(agents)} reports)")
            self.rejected += len(agents) - 1
            return
        ids = np.asarray(agents, dtype=np.int64)
        sz = np.asarray(sizes, dtype=np.int64)
        if sent_batch and rnd.plan.report_high is None and self._store_range(rnd, ids, sz,
                                                                              validated[1]):
            return
        if sent_batch:  # a prefix of a batch sent to this pool: hosted, asked, sorted, unique
            span = _span(ids)
            inside = asked = np.ones(len(ids), dtype=bool)
            fresh = ~rnd.reported[span]
        else:
            span = None
            inside = (ids >= pool.start) & (ids < pool.stop)
            safe = np.where(inside, ids, 0)
            asked = inside & rnd.asked[safe]
            fresh = asked & ~rnd.reported[safe]
            # duplicates inside this batch: keep the first occurrence only
            _, first = np.unique(ids, return_index=True)
            first_mask = np.zeros(len(ids), dtype=bool)
            first_mask[first] = True
            fresh &= first_mask
        ok, values = validated or rnd.plan.schema.validate(payloads)
        high = rnd.plan.report_high
        above = np.zeros(len(ids), dtype=bool)
        if high is not None and len(ids):
            rows = np.minimum(np.searchsorted(rnd.plan.agents, ids), len(rnd.plan.agents) - 1)
            bound = np.asarray(high)[rows]
            bound = bound[:, None] if bound.ndim == 1 else bound
            above = ok & (values > bound).any(axis=1)
            ok = ok & ~above
        good = fresh & ok
        # An asked agent's own pool sent an out-of-domain report. The round does not wait for
        # that agent until the timeout (it counts as answered), but a valid report that still
        # comes before the round ends replaces it: a broken sender cannot erase an honest one.
        invalid = fresh & ~ok
        if invalid.any():
            bad = np.unique(ids[invalid])
            bad = bad[~rnd.invalid_mask[bad]]
            rnd.invalid_mask[bad] = True
            rnd.invalid += len(bad)
        for i in np.flatnonzero(~good):
            a = int(ids[i])
            if not inside[i]:
                why = f"unknown agent {a}: not hosted by pool {pool.index}"
            elif not asked[i]:
                why = f"agent {a} was not asked in round {rnd.number}"
            elif not fresh[i]:
                why = f"duplicate report from agent {a} in round {rnd.number}"
            elif above[i]:
                why = (f"out-of-domain report from agent {a}: {values[i].tolist()[:8]} above "
                       f"this agent's bound {np.ravel(bound[i]).tolist()[:8]}")
            else:
                why = f"out-of-domain report from agent {a}: {rnd.plan.schema.reason(payloads[i])}"
            env = wire.Envelope(wire.REPORT, self.run, rnd.number, a, None, int(sz[i]))
            yield from self.reject(peer, why, env)
        if good.any():
            if span is not None and good.all():  # the common case: in-place slice updates
                self._store(rnd, ids, span, values, sz)
            else:
                gi = ids[good]
                self._store(rnd, gi, gi, values[good], sz[good])

    def _store(self, rnd: _Round, ids: np.ndarray, at: slice | np.ndarray, values: np.ndarray,
               sz: np.ndarray) -> None:
        """Record fresh, valid reports of ``ids`` (sorted; ``at`` is ids or the same as a slice):
        they replace an earlier out-of-domain report, fill the plan rows, count the bytes."""
        was = ids[rnd.invalid_mask[at]]
        if len(was):
            rnd.invalid_mask[was] = False
            rnd.invalid -= len(was)
        rnd.reported[at] = True
        rnd.got += len(ids)
        if rnd.values is None:
            rnd.values = np.empty((rnd.expected, values.shape[1]), dtype=values.dtype)
        plan_agents = rnd.plan.agents
        if isinstance(at, slice):
            r0 = int(np.searchsorted(plan_agents, ids[0]))
            rnd.values[r0:r0 + len(ids)] = values
        else:
            rnd.values[np.searchsorted(plan_agents, ids)] = values
        self.up[at] += sz  # each agent at most once
        self.msgs_up += len(ids)
        rnd.bytes_up += int(sz.sum())
        self._touch()

    def _store_range(self, rnd: _Round, ids: np.ndarray, sz: np.ndarray,
                     values: np.ndarray) -> bool:
        """The common case of ``_on_reports`` without its per-row masks: valid reports for a
        range of consecutive agents of a batch this pool was sent, none reported before.
        Returns False, having done nothing, for anything else (the general path decides)."""
        span = _span(ids)
        if not isinstance(span, slice) or rnd.reported[span].any() \
                or rnd.invalid_mask[span].any():
            return False
        self._store(rnd, ids, span, values, sz)
        return True

    # -- rounds -----------------------------------------------------------------------------
    def _start(self) -> Out:
        """All pools registered (or the registration timed out): create the curator."""
        self.state = "rounds"
        agents = np.flatnonzero(self.owner >= 0).astype(np.int64)
        with _protocol_code("set-up"):
            bound = self.protocol.bind(self.config["params"], self.public)
            self.params = bound.params
            self.curator = bound.curator(agents, self.curator_key)
        n = self.n
        self.up = np.zeros(n, dtype=np.int64)
        self.down = np.zeros(n, dtype=np.int64)
        yield from self._begin_round(0)

    def _begin_round(self, number: int) -> Out:
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        with _protocol_code(f"plan of round {number}"):
            plan = self.curator.plan(number)
        if plan is None:
            yield from self._finish()
            return
        n = self.n
        asked = np.zeros(n, dtype=bool)
        agents = np.asarray(plan.agents, dtype=np.int64)
        if len(agents) > 1 and not (agents[1:] > agents[:-1]).all():
            raise RunFailed(f"{self.config['protocol']}: round {number} must ask sorted, "
                            "distinct agent ids")
        asked[agents] = True
        self.round = rnd = _Round(number, plan, asked, np.zeros(n, dtype=bool), len(agents))
        rnd.invalid_mask = np.zeros(n, dtype=bool)
        rnd.t_wall, rnd.t_cpu = t_wall, t_cpu
        if self.record_view:
            self.view["rounds"].append({"round": number, "agents": agents,
                                        "queries": plan.queries, "broadcast": plan.broadcast,
                                        "report_agents": None, "reports": None})
        queries = plan.queries
        rnd.agents, rnd.vector = agents, wire.batchable(queries)
        rnd.queries = queries.tolist() if not rnd.vector and isinstance(queries, np.ndarray) \
            else queries
        batch = max(1, int(self.config.get("batch", 4096)))
        for pool in sorted(self.pools.values(), key=lambda q: q.index):
            lo, hi = (int(x) for x in np.searchsorted(agents, [pool.start, pool.stop]))
            if lo == hi:
                continue
            if plan.broadcast is not None:
                bc = wire.encode(wire.BCAST, self.run, number, wire.NO_AGENT, plan.broadcast)
                self.down[agents[lo:hi]] += len(bc)  # logical: once per receiving agent
                rnd.bytes_down += len(bc) * (hi - lo)
                yield self._send(pool.peer, bc)
            rnd.outbox[pool.peer] = deque((s, min(hi, s + batch)) for s in range(lo, hi, batch))
        for _ in range(WINDOW):  # one batch per pool in turn: every pool starts at once
            for peer in list(rnd.outbox):
                yield from self._send_batch(rnd, peer)
        self._touch()
        if rnd.expected == 0:
            yield from self._end_round()

    def _send_batch(self, rnd: _Round, peer: bytes) -> Out:
        """Send ``peer`` its next query batch of this round, if any is left (see ``WINDOW``)."""
        box = rnd.outbox.get(peer)
        if not box:
            return
        s, e = box.popleft()
        ids = rnd.agents[s:e]
        queries = rnd.queries
        if rnd.vector:
            frame, sz = wire.encode_batch(wire.QUERY, self.run, rnd.number, ids,
                                          None if queries is None else queries[s:e])
        else:
            bufs, sizes = wire.encode_many(wire.QUERY, self.run, rnd.number, ids.tolist(),
                                           queries[s:e])
            frame, sz = b"".join(bufs), np.asarray(sizes, dtype=np.int64)
        rnd.pending[(peer, int(ids[0]))] = ids
        self.down[_span(ids)] += sz
        self.msgs_down += len(ids)
        rnd.bytes_down += int(sz.sum())
        yield self._send(peer, frame)

    def _maybe_advance(self) -> Out:
        if self.state == "rounds" and self.round is not None and \
                self.round.got + self.round.invalid >= \
                self.round.expected:
            yield from self._end_round()
        elif self.state == "done" and all(p.stats is not None for p in self.pools.values()):
            self._complete()

    def _end_round(self) -> Out:
        rnd = self.round
        # canonical order (arrival-independent): the plan's order of agents, sorted by id
        plan_agents = np.asarray(rnd.plan.agents, dtype=np.int64)
        if rnd.values is None:
            agents = np.zeros(0, dtype=np.int64)
            reports = np.zeros((0, rnd.plan.schema.length))
        elif rnd.got == rnd.expected:
            agents, reports = plan_agents, rnd.values
        else:
            have = rnd.reported[plan_agents]
            agents, reports = plan_agents[have], rnd.values[have]
        missing = rnd.expected - rnd.got - rnd.invalid
        self.dropouts_reports += missing
        with _protocol_code(f"absorb of round {rnd.number}"):
            self.curator.absorb(rnd.number, agents, reports)
        if self.record_view:
            self.view["rounds"][-1].update(report_agents=agents, reports=reports)
        self.rounds.append({
            "round": rnd.number, "asked": rnd.expected, "reported": rnd.got,
            "invalid": rnd.invalid - rnd.refused, "refused": rnd.refused, "dropouts": missing,
            "bytes_down": rnd.bytes_down, "bytes_up": rnd.bytes_up,
            "report_bits": rnd.plan.report_bits,
            "wall_s": time.perf_counter() - rnd.t_wall,
            "curator_cpu_s": time.process_time() - rnd.t_cpu})
        yield from self._begin_round(rnd.number + 1)

    def _finish(self) -> Out:
        with _protocol_code("finish"):
            self.output = self.curator.finish()
        self.round = None
        self.state = "done"
        done = wire.encode(wire.DONE, self.run, wire.SETUP_ROUND, wire.NO_AGENT,
                           {"output": self.output})
        for pool in sorted(self.pools.values(), key=lambda q: q.index):
            yield self._send(pool.peer, done)
        self._touch()
        if not self.pools:
            self._complete()

    def on_timeout(self) -> Out:
        """Called by the driver when ``next_deadline`` passes with nothing received."""
        if self.finished:
            return
        if self.state == "registering":
            if not self.pools:
                self.failure = (f"no pool registered within {self.limits.timeout_s:g} s "
                                f"(expected {self.n_pools})")
                raise RunFailed(self.failure)
            yield from self._start()
        elif self.state == "rounds":
            yield from self._end_round()
        elif self.state == "done":
            self._complete()

    def _complete(self) -> None:
        n = self.n or 0
        registered = self.owner >= 0 if self.owner is not None else np.zeros(0, dtype=bool)
        reg = np.flatnonzero(registered)
        if self.up is None:
            up = down = np.zeros(0, dtype=np.int64)
        elif len(reg) == n:
            up, down = self.up, self.down
        else:
            up, down = self.up[reg], self.down[reg]
        n_rounds = len(self.rounds)
        stats = [p.stats for p in self.pools.values() if p.stats]
        calls = sum(s.get("agent_calls", 0) for s in stats)
        cpu = sum(s.get("agent_cpu_s", 0.0) for s in stats)
        modes = {s.get("agent_time_mode") for s in stats} or {"amortised"}
        report_bits = sum(r["report_bits"] for r in self.rounds)
        self.result = {
            "output": self.output,
            "params": self.params,
            "public": self.public,
            "n_agents": n,
            "comm": {
                "bytes_up_per_agent_mean": float(up.mean()) if len(up) else 0.0,
                "bytes_up_per_agent_max": int(up.max()) if len(up) else 0,
                "bytes_down_per_agent_mean": float(down.mean()) if len(down) else 0.0,
                "bytes_down_per_agent_max": int(down.max()) if len(down) else 0,
                "bytes_total": int(up.sum() + down.sum()),
                "messages_total": self.msgs_up + self.msgs_down,
                "messages_up_per_agent_mean": self.msgs_up / len(reg) if len(reg) else 0,
                "messages_down_per_agent_mean": self.msgs_down / len(reg)
                if len(reg) else 0,
                "rounds": n_rounds,
                "report_bits_per_agent": report_bits,
                "physical_bytes_up": self.phys_up,
                "physical_bytes_down": self.phys_down,
                "physical_frames": self.frames_up + self.frames_down,
                "disclose_bytes_total": self.disclose_bytes,
                "per_round": self.rounds,
            },
            "timing": {
                "wall_s": time.perf_counter() - self.t0_wall,
                # until the last pool said it is ready (process start-up, connecting)
                "pools_ready_s": (self.t_ready or self.t0_wall) - self.t0_wall,
                "curator_cpu_s": time.process_time() - self.t0_cpu,
                # every pool's CPU for this run: data generation, randomizers, codec, sockets
                "pools_cpu_s": sum(s.get("pool_cpu_s", 0.0) for s in stats),
                "agent_cpu_s_mean": cpu / calls if calls else 0.0,
                "agent_cpu_s_max": max((s.get("agent_cpu_s_max", 0.0) for s in stats),
                                       default=0.0),
                "agent_time_mode": "exact" if modes == {"exact"} else "amortised",
                "curator_peak_rss_mb": peak_rss_mb(),
                "pool_peak_rss_mb": max((s.get("peak_rss_mb", 0.0) for s in stats),
                                        default=0.0),
            },
            "rejected": self.rejected,
            "rejections": self.rejections[:50],
            "refused": self.refused,
            "refusal": self.refusal_reason,
            "dropouts": int(self.dropouts_reports + (n - len(reg))),
            "dropouts_registration": int(n - len(reg)),
            "pools_registered": len(self.pools),
            "pools_reported_done": len(stats),
            "colluders": int(self.colluders.sum()) if self.colluders is not None else 0,
            "curator_colludes": self.coalition_curator,
        }
        if self.record_view:
            self.view["output"] = self.output
            self.view["public"] = self.public
            self.view["params"] = self.params
            self.result["view"] = self.view
        self.finished = True


# -------------------------------------------------------------------------------------- pool


class PoolSession:
    """One agent pool: hosts a block of logical agents, their private data and randomizers.

    Parameters
    ----------
    index, n_pools : int
        This is pool ``index`` of ``n_pools``.
    secret : str
        The out-of-band secret (the token): answers the curator's registration challenge and,
        without ``keys``, derives each run's data and coin keys from the run's public id
        (``seeding.pool_keys_from_secret``; the hosts backend).
    limits : Limits
    keys : PoolKeys, optional
        The run's keys, handed over by the orchestrator (processes and inproc backends: never
        through the curator).
    """

    def __init__(self, index: int, n_pools: int, secret: str, limits: Limits | None = None,
                 keys: PoolKeys | None = None):
        self.index = index
        self.n_pools = n_pools
        self.secret = secret
        self.auth = auth_key(secret)
        self.fixed_keys = keys
        self.limits = limits or Limits()
        self.nonce: bytes | None = None
        self.exit = False
        self.silent = False
        self.refused_reason: str | None = None  # why the last registration was refused
        self.can_die = True
        self.override: dict[str, Any] | None = None  # set by the audit harness, never by peers
        self._reset()

    def _reset(self) -> None:
        """Leave the current run (if any): back to waiting for a set-up."""
        self.run: int | None = None
        self.config: dict[str, Any] | None = None
        self.protocol = None
        self.bound = None
        self.data = None
        self.dataset = None
        self.start = self.stop = 0
        self.broadcasts: dict[int, Any] = {}
        self.agent_cpu = 0.0
        self.agent_cpu_max = 0.0
        self.agent_calls = 0
        self.refusals = 0
        self.silent = False
        self.cpu0 = time.process_time()

    def hello(self) -> bytes:
        """The "ready" message, sent (and repeated) while the pool waits for a set-up."""
        return wire.encode(wire.HELLO, wire.ANY_RUN, wire.SETUP_ROUND, wire.NO_AGENT,
                           {"pool": self.index, "pools": self.n_pools})

    @property
    def idle(self) -> bool:
        return self.config is None

    def on_frame(self, frame: bytes) -> list[bytes]:
        """Handle one frame from the curator; return the frames to send back."""
        out: list[bytes] = []
        fast = wire.parse_consecutive(frame, wire.QUERY)
        if fast is not None:
            run, rnd, ids, queries = fast
            if self.silent or run != self.run or self.config is None:
                return out
            return self._respond(rnd, ids, queries)
        query_agents: list[int] = []
        query_payloads: list[Any] = []
        qround = None
        for obj in wire.unpack_all(frame, self.limits.max_frame_bytes):
            if (type(obj) is list and len(obj) == 6 and obj[1] == wire.QUERY
                    and obj[0] == wire.VERSION and type(obj[4]) is int):
                if self.silent or obj[2] != self.run:
                    continue
                query_agents.append(obj[4])
                query_payloads.append(obj[5])
                qround = obj[3]
                continue
            env = wire.check_envelope(obj, 0)
            if env.kind == wire.BCAST and env.round == wire.SETUP_ROUND:
                nonce = env.payload.get("nonce")
                if self.config is not None and nonce != self.nonce:
                    self._reset()  # a new curator (the old one died) or a new run
                if self.config is None:
                    out.extend(self._setup(env.run, env.payload["config"], nonce))
            elif env.kind == wire.ERROR:
                # refused (slot taken, too late, ...): wait for the next run's set-up
                p = env.payload
                if (isinstance(p, dict) and p.get("code") == "refused" and env.run == self.run
                        and self.config is not None):
                    self.refused_reason = str(p.get("error", ""))[:MAX_REASON]
                    self._reset()
            elif env.kind == wire.BCAST:
                self.broadcasts[env.round] = env.payload
            elif env.kind == wire.DONE:
                if env.run == wire.ANY_RUN:
                    self.exit = True
                elif env.run == self.run and self.config is not None:
                    if not self.silent:
                        out.append(wire.encode(wire.DONE, self.run, wire.SETUP_ROUND,
                                               wire.NO_AGENT, self._stats()))
                    self._reset()
        if query_agents:
            queries = None if query_payloads[0] is None else np.asarray(query_payloads)
            out.extend(self._respond(qround, np.asarray(query_agents, dtype=np.int64), queries))
        return out

    def _setup(self, run: int, cfg: dict[str, Any], nonce: bytes) -> list[bytes]:
        if self.fixed_keys is not None:
            keys = self.fixed_keys
        elif self.secret:
            keys = pool_keys_from_secret(self.secret, int(cfg["run_id"]))
        else:
            raise RunFailed(f"pool {self.index} has neither keys nor a secret to derive them")
        self.run = run
        self.config = cfg
        self.nonce = nonce
        self.keys = keys
        dataset = get_data_kind(cfg["data"]["kind"]).build(
            {k: v for k, v in cfg["data"].items() if k != "kind"}, keys.data)
        self.protocol = get_protocol(cfg["protocol"])
        self.public = dataset.public
        self.bound = self.protocol.bind(cfg["params"], self.public)
        self.params = self.bound.params
        self.n = dataset.n
        self.start, self.stop = block_of(self.index, self.n_pools, self.n)
        self.dataset = dataset  # rows are generated on first use (``private_rows``)
        # the privacy odometer: what each agent has spent, and the rounds it has answered
        self.budget = self.protocol.agent_budget(self.params, self.public)
        self.spent = np.zeros(self.stop - self.start) if self.budget is not None else None
        self.answered: dict[int, np.ndarray] = {}
        self.round_eps: dict[int, float] = {}
        self.exact = cfg.get("agent_mode", "batched") == "exact"
        self.faults = [f for f in cfg.get("faults", []) if int(f.get("pool", -1)) == self.index]
        out = [wire.encode(wire.HELLO, run, wire.SETUP_ROUND, wire.NO_AGENT, {
            "pool": self.index, "pools": self.n_pools, "n": self.n,
            "agents": [self.start, self.stop], "public": self.public,
            "mac": registration_mac(self.auth, nonce, run, self.index, self.n_pools)})]
        coll = cfg.get("collusion", {})
        if coll.get("curator", True):
            mask = colluder_mask(self.n, coll, keys.collusion)[self.start:self.stop]
            ids = np.flatnonzero(mask) + self.start
            if len(ids):
                coins = rngm.agent_keys(keys.agents, ids)
                bufs, _ = wire.encode_many(
                    wire.DISCLOSE, run, wire.SETUP_ROUND, ids.tolist(),
                    [{"data": self.private_rows()[a - self.start], "coins": int(c)}
                     for a, c in zip(ids.tolist(), coins.tolist(), strict=True)])
                out.append(b"".join(bufs))
        return out

    def private_rows(self) -> np.ndarray:
        """This pool's agents' private rows, generated (or read) on first use.

        The registration goes out before they exist, so the curator plans and sends the
        first queries while the pool generates its data: on few cores the two overlap instead
        of queueing. A data set is the same whenever it is generated (keyed by agent).
        """
        if self.data is None:
            data = self.dataset.rows(self.start, self.stop)  # only this pool's agents
            over = self.override  # the privacy audit sets one agent's row (neighbouring sets)
            if over is not None and self.start <= int(over["agent"]) < self.stop:
                data = np.array(data, copy=True)
                data[int(over["agent"]) - self.start] = np.asarray(over["row"]).astype(
                    data.dtype)
            data = np.asarray(data)
            if data.flags.writeable:  # randomizers get views of it: none may write into it
                data.setflags(write=False)
            self.data = data
        return self.data

    def prepare(self) -> None:
        """Generate this pool's data now if a run is set up (the drivers call it after
        sending the registration, so the data are ready by the time the queries arrive)."""
        if self.config is not None and not self.silent:
            self.private_rows()

    def _fault(self, rnd: int) -> None:
        for f in self.faults:
            if int(f.get("round", 0)) == rnd:
                action = f.get("action")
                if action == "kill" and self.can_die:
                    os.kill(os.getpid(), 9)
                elif action == "kill":  # in-process backend: a dead pool is a silent one
                    self.silent = True
                elif action == "silent":
                    self.silent = True
                elif action == "raise":
                    raise RuntimeError(f"injected fault in pool {self.index}, round {rnd}")

    def _odometer(self, rnd: int, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` may answer round ``rnd``: not answered in this round yet (nor
        earlier in this batch), and within the agent's budget after this round's spend. Spends
        it for them; returns None when all may (the protocol declares the spend:
        ``Protocol.round_epsilon``)."""
        eps = self.round_eps.get(rnd)
        if eps is None:
            eps = float(self.protocol.round_epsilon(rnd, self.params, self.public))
            if len(self.round_eps) < MAX_ROUNDS:
                self.round_eps[rnd] = eps
        seen = self.answered.get(rnd)
        if not 0 <= eps < math.inf or (seen is None and len(self.answered) >= MAX_ROUNDS):
            return np.zeros(len(ids), dtype=bool)
        limit = self.budget * (1 + 1e-9) + 1e-12
        local = ids - self.start
        span = _span(local)
        if isinstance(span, slice) and (seen is None or not seen[span].any()) \
                and self.spent[span].max() + eps <= limit:
            ok, at = None, span  # the common case: a range of agents, all may answer
        else:
            ok = np.zeros(len(ids), dtype=bool)
            ok[np.unique(local, return_index=True)[1]] = True  # first occurrence in the batch
            if seen is not None:
                ok &= ~seen[local]
            ok &= self.spent[local] + eps <= limit
            if not ok.any():
                return ok
            at = local[ok]
        if seen is None:
            seen = self.answered[rnd] = np.zeros(self.stop - self.start, dtype=bool)
        seen[at] = True
        self.spent[at] += eps
        return ok

    def _respond(self, rnd: int, ids: np.ndarray, queries: np.ndarray | None) -> list[bytes]:
        self._fault(rnd)
        if self.silent:
            return []
        if ((ids < self.start) | (ids >= self.stop)).any():
            raise RunFailed(f"pool {self.index} was queried for agents it does not host")
        refusal: list[bytes] = []
        if self.budget is not None:
            ok = self._odometer(rnd, ids)
            if ok is not None and not ok.all():
                bad = ids[~ok]
                self.refusals += len(bad)
                refusal = [wire.encode(wire.ERROR, self.run, rnd, wire.NO_AGENT, {
                    "error": f"privacy budget: {len(bad)} agents refuse round {rnd} (answered "
                             f"it already, or it would take them past epsilon = "
                             f"{self.budget:g})", "code": "budget", "agents": bad})]
                ids = ids[ok]
                if queries is not None:
                    queries = queries[ok]
                if not len(ids):
                    return refusal
        rows = self.private_rows()[_span(ids - self.start)]  # a view for consecutive ids
        bcast = self.broadcasts.get(rnd)
        p = self.protocol
        block = self.bound.block(rnd, rows, ids, self.keys.agents, queries, bcast)
        if self.exact:
            parts = []
            for i in range(len(ids)):
                t = time.perf_counter()
                r = p.respond(block.take(slice(i, i + 1)))
                dt = time.perf_counter() - t
                self.agent_cpu += dt
                self.agent_cpu_max = max(self.agent_cpu_max, dt)
                parts.append(r)
            reports = np.concatenate(parts)
        else:
            t = time.perf_counter()
            reports = p.respond(block)
            dt = time.perf_counter() - t
            self.agent_cpu += dt
            self.agent_cpu_max = max(self.agent_cpu_max, dt / len(ids))
        self.agent_calls += len(ids)
        reports = np.asarray(reports)
        # one frame per query batch, split when it would exceed half the frame limit (large
        # reports, e.g. a whole answer vector per worker); the curator matches the pieces
        row_bytes = 16 + 9 * max(1, reports.shape[1] if reports.ndim == 2 else 1)
        per_frame = max(1, (self.limits.max_frame_bytes // 2) // row_bytes)
        return refusal + [wire.encode_batch(wire.REPORT, self.run, rnd, ids[s:s + per_frame],
                                            reports[s:s + per_frame])[0]
                          for s in range(0, len(ids), per_frame)]

    def _stats(self) -> dict[str, Any]:
        return {"pool": self.index, "agent_cpu_s": self.agent_cpu, "agent_calls":
                self.agent_calls, "agent_cpu_s_max": self.agent_cpu_max,
                "agent_time_mode": "exact" if self.exact else "amortised",
                "pool_cpu_s": time.process_time() - self.cpu0, "peak_rss_mb": peak_rss_mb(),
                "refused": self.refusals}

    def error(self, exc: BaseException) -> bytes:
        """An ERROR envelope describing an unhandled exception in this pool."""
        return wire.encode(wire.ERROR, self.run if self.run is not None else wire.ANY_RUN,
                           wire.SETUP_ROUND, wire.NO_AGENT,
                           {"error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()})

