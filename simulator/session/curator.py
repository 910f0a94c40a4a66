"""The curator's session: the state machine of one run, in terms of frames in and frames out.

States (``State``): REGISTERING (pools register, ``registration``) -> ROUNDS (one
``rounds.Round`` after another, ``roundloop``; reports decoded and screened by ``ingest``) ->
DONE (the output is released; the pools answer with their statistics) -> FINISHED (``result``
holds the record, ``record.curator_result``). The session never sees raw data or ground
truth, and never raises on a peer's input: anything wrong is one counted rejection, answered
with an ERROR envelope (up to a cap per peer). Only ``RunFailed`` ends a run early: the
protocol's own curator code failed, or a pool reported a crash.

``CuratorSession`` is about 400 lines, over the house's ~250: it holds every transition of the
run (one handler per message type and per state change) so the whole state machine reads in
one place; the work each transition does lives in the modules it calls (registration, ingest,
roundloop and rounds, notices (a pool's ERROR, DONE and DISCLOSE), adversary (the adversary
view), accounting, rejections, record).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from ldpsim.protocols import get_protocol
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import notices
from ldpsim.simulator.session.accounting import CommStats, Timing
from ldpsim.simulator.session.adversary import AdversaryView
from ldpsim.simulator.session.common import (
    MAX_REJECTS_PER_FRAME,
    Bounded,
    Limits,
    RunFailed,
    out_of_memory,
    protocol_code,
)
from ldpsim.simulator.session.ingest import (
    EnvelopeReader,
    Reports,
    checked_envelope,
    decode_reports,
    frame_refusal,
    validated,
)
from ldpsim.simulator.session.network import deployment_model
from ldpsim.simulator.session.record import curator_result
from ldpsim.simulator.session.registration import PoolSlot, Registration
from ldpsim.simulator.session.rejections import Rejections
from ldpsim.simulator.session.roundloop import RoundLoop, Steps
from ldpsim.simulator.session.rounds import Round
from ldpsim.simulator.session.runconfig import RunConfig

Out = Iterable[tuple[bytes, bytes]]  # (peer identity, frame)

log = logging.getLogger("ldpsim.curator")


class State(enum.StrEnum):
    """Where a curator session is in its run."""

    REGISTERING = "registering"
    ROUNDS = "rounds"
    DONE = "done"  # output released, waiting for the pools' statistics
    FINISHED = "finished"  # ``result`` is set


def _nothing() -> None:
    """What a finished run's loop calls to move its deadline: nothing is left to wait for."""


class CuratorSession:
    """The curator's side of one run (see the module docstring).

    Parameters
    ----------
    run : int
        The run's number on this curator (the ``run`` field of every envelope).
    config : dict
        The curator's configuration (``seeding.curator_config``): the public configuration
        (protocol, params, data, pools, agent_mode, batch, collusion, faults, run_id,
        data_id, collusion_key), ``keys``, the curator's own and the collusion stream keys, and
        ``signed`` and ``sigs``, the configuration as the orchestrator signed it for the pools
        (relayed in the set-up, unaltered or refused). Never the run seed: a config holding one
        is refused.
    auth : bytes
        The run's registration key: checks the pools' answers to this run's challenge (a fresh
        nonce in the set-up).
    limits : Limits
    record_view : bool
        Keep the adversary view (everything the curator received, the disclosures, the output).
    """

    def __init__(self, run: int, config: dict[str, Any], auth: bytes, limits: Limits,
                 record_view: bool = False) -> None:
        if "seed" in config or "keys" not in config or "signed" not in config:
            raise ValueError("a curator gets seeding.curator_config(config), never the run seed")
        self.run = run
        self.config = RunConfig.of(config)
        self.limits = limits
        self.protocol = get_protocol(self.config.protocol)
        self.curator_key = int(config["keys"]["curator"])
        self.curator_coins = int(config["keys"]["coins"])
        self.state = State.REGISTERING
        self.registration = Registration(run, self.config, config["signed"], config["sigs"],
                                         auth, int(config["keys"]["collusion"]))
        self.params: dict[str, Any] | None = None  # resolved when the rounds start
        self.registered: np.ndarray | None = None  # the registered agents' ids, from then on
        self.output: Any = None  # the released output, from DONE on
        self.rejects = Rejections(run, limits)
        self.failure: str | None = None
        self.result: dict[str, Any] | None = None
        self.comm = CommStats()
        self.timing = Timing()
        self.deadline = time.monotonic() + limits.timeout_s
        self.record_view = record_view
        self.view = AdversaryView(record_view)
        #: the rounds, one after another (the protocol's curator, the current round), on the
        #: run's deployment model (``[deployment]``; None: none), built once here
        self.loop = RoundLoop(run, self.config, limits, self.registration, self.comm, self.view,
                              self._touch, deployment_model(self.config.deployment,
                                                            config["keys"].get("network")))

    # -- what the drivers read --------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.state is State.FINISHED

    @property
    def ready(self) -> Bounded:
        """Peers that said they are ready (most recent last): the next run's set-up goes to
        them."""
        return self.registration.ready

    @property
    def pools(self) -> dict[bytes, PoolSlot]:
        return self.registration.pools

    @property
    def curator(self) -> Any:
        """The protocol's curator, from the rounds on (None before)."""
        return self.loop.curator

    @property
    def round(self) -> Round | None:
        """The current round (None outside the rounds)."""
        return self.loop.round

    def next_deadline(self) -> float:
        return self.deadline

    def _touch(self) -> None:
        timeout = self.limits.timeout_s
        if self.state is State.DONE:
            most = max((p.stop - p.start for p in self.pools.values()), default=0)
            timeout = self.limits.done_timeout_s + self.limits.done_s_per_agent * most
        self.deadline = time.monotonic() + timeout

    def _send(self, peer: bytes, frame: bytes) -> tuple[bytes, bytes]:
        self.comm.sent_frame(frame)
        return peer, frame

    def reject(self, peer: bytes, reason: str, env: wire.Envelope | None = None,
               code: str | None = None) -> Out:
        """Count and record a rejected message; answer the peer with an ERROR (capped:
        ``rejections.Rejections``)."""
        frame = self.rejects.reject(peer, reason, env, code)
        if frame is not None:
            yield self._send(peer, frame)

    @property
    def rejected(self) -> int:
        """Messages rejected so far in this run."""
        return self.rejects.count

    @property
    def rejections(self) -> list[dict[str, Any]]:
        """The first rejections' records (peer, reason, envelope fields)."""
        return self.rejects.records

    # -- inbound ----------------------------------------------------------------------------
    def on_ready(self, peer: bytes) -> Out:
        """A pool said it is ready: send it this run's set-up (once)."""
        reg = self.registration
        if reg.on_ready(peer, self.state is State.REGISTERING):
            yield self._send(peer, reg.setup_frame)
            if len(reg.setup_sent) == reg.n_pools:  # the last set-up is out: while the pools
                self.protocol.import_curator_modules()  # build their data and register
        elif self.round is not None and peer in self.pools and self.round.holds(peer):
            # held back by a round in agent order, it hears nothing and says hello: its
            # set-up again, which it ignores, tells it the curator lives (else it leaves)
            yield self._send(peer, reg.setup_frame)
        if reg.t_ready is not None and self.timing.t_ready is None:
            self.timing.t_ready = reg.t_ready

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
        except MemoryError as e:  # the curator's own allocation: its failure, not the peer's
            raise RunFailed(out_of_memory(e)) from None
        except Exception as e:  # a peer's input reached a path we did not foresee
            log.warning("frame from %s: %s: %s", peer[:16].hex(), type(e).__name__, e)
            yield from self.reject(peer, f"frame rejected: {type(e).__name__}: "
                                         f"{wire.quote(str(e))}")

    def _on_frame(self, peer: bytes, frame: bytes) -> Out:
        self.comm.received_frame(frame)
        if self.finished or self.registration.ignored(peer):
            return
        # The inactivity deadline moves only on progress (registrations, accepted reports,
        # DONE stats): heartbeats or garbage from a hostile peer cannot stall the curator.
        registered = peer in self.pools
        why = frame_refusal(len(frame), registered, self.limits.max_frame_bytes,
                            self.limits.max_envelope_bytes)
        if why is not None:
            yield from self.reject(peer, why)
            return
        rnd = self.round
        if rnd is not None and registered:
            reports = decode_reports(frame, rnd.pending, self.loop.expected, peer)
            if reports is not None:
                yield from self._on_reports(peer, reports)
                yield from self.loop.send_batch(rnd, peer)  # it answered: one more in flight
                yield from self.loop.refill(rnd)  # (a round in agent order: pools held back)
                yield from self._maybe_advance()
                return
        reader = EnvelopeReader(frame, self.loop.expected if rnd is not None else None, registered,
                                self.limits.max_frame_bytes, self.limits.max_envelope_bytes)
        rejected0 = self.rejected
        try:
            for i, item in enumerate(reader):
                if not registered and i:
                    # an unregistered peer can only say it is ready or register: one envelope
                    # per message, so the rest of a longer frame is not worth decoding
                    yield from self.reject(peer, "rest of the frame dropped: a peer that is "
                                                 "not a registered pool sends one envelope "
                                                 "per message")
                    break
                if isinstance(item, Reports):
                    yield from self._on_reports(peer, item)
                    continue
                yield from self._on_envelope(peer, *item)
                if self.finished or self.round is not rnd:
                    break  # the run moved on (e.g. the registrations completed)
                if self.rejected - rejected0 >= MAX_REJECTS_PER_FRAME:
                    yield from self.reject(peer, f"rest of the frame dropped after "
                                                 f"{MAX_REJECTS_PER_FRAME} invalid envelopes")
                    break
        except wire.WireError as e:
            yield from self.reject(peer, str(e))
        rest = reader.rest()
        if rest is not None and self.round is rnd:
            yield from self._on_reports(peer, rest)
        if rnd is not None and rnd is self.round and peer in self.pools:
            yield from self.loop.send_batch(rnd, peer)
            yield from self.loop.refill(rnd)
        yield from self._maybe_advance()

    def _on_envelope(self, peer: bytes, obj: Any, size: int) -> Out:
        env, why = checked_envelope(obj, size, self.limits.max_envelope_bytes)
        if why is not None:
            yield from self.reject(peer, why, env)
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
            elif peer not in self.pools:  # rejected before its payload is checked
                yield from self._unknown_peer(peer, [env.agent], env)
            else:
                yield from self._on_reports(peer, validated(
                    [env.agent], [env.payload], [size], self.round.plan.schema))
        elif env.kind == wire.DISCLOSE:
            yield from self._act(peer, env, notices.take_disclosure(
                self.pools.get(peer), env, self.registration.colluders,
                self.config.curator_colludes, self.comm, self.view))
        elif env.kind == wire.ERROR:
            yield from self._act(peer, env, notices.take_error(
                self.pools.get(peer), env, self.state is State.REGISTERING, self.registration,
                self.loop.refuse))
        elif env.kind == wire.DONE:
            yield from self._act(peer, env, notices.take_done(
                self.pools.get(peer), env, self.state is State.DONE))
        else:
            yield from self.reject(peer, f"a curator does not accept "
                                         f"{wire.TYPE_NAMES[env.kind]} messages", env)

    def _on_register(self, peer: bytes, env: wire.Envelope) -> Out:
        if peer in self.pools:  # never a refusal (the pool would leave), never a ban
            yield from self.reject(peer, "this peer is already registered", env)
            return
        why = self.registration.register(peer, env.payload, self.state is State.REGISTERING)
        if why is not None:  # the pool goes back to waiting for the next run's set-up
            yield from self.reject(peer, f"registration refused: {why}", env, code="refused")
            return
        self._touch()
        if self.registration.complete:
            yield from self._start()

    def _act(self, peer: bytes, env: wire.Envelope, verdict: notices.Verdict) -> Out:
        """Do what taking a pool's ERROR, DONE or DISCLOSE says (``notices``)."""
        act, why = verdict
        if act is notices.Act.FAIL:
            self.failure = why
            raise RunFailed(why)
        if act is notices.Act.REJECT:
            yield from self.reject(peer, why, env)
        elif act is notices.Act.PROGRESS:
            self._touch()

    def _unknown_peer(self, peer: bytes, agents: Any, env: wire.Envelope | None = None) -> Out:
        """Reject the reports of ``agents`` from a peer that is not a registered pool: all
        counted, the first recorded and answered."""
        for a in agents[:1]:
            yield from self.reject(peer, f"unknown peer: not a registered pool "
                                         f"(agent {a}, {len(agents)} reports)", env)
        self.rejects.count += len(agents) - 1

    def _on_reports(self, peer: bytes, reports: Reports) -> Out:
        """Screen a batch of decoded reports against the round and store those that count
        (``RoundLoop.screen``, ``RoundLoop.store``)."""
        pool = self.pools.get(peer)
        if pool is None:
            yield from self._unknown_peer(peer, reports.agents)
            return
        s = self.loop.screen(reports, pool)
        for agent, why, size in s.rejects:
            env = wire.Envelope(wire.REPORT, self.run, self.round.number, agent, None, size)
            yield from self.reject(peer, why, env)
        if self.loop.store(s):
            self._touch()

    # -- rounds -----------------------------------------------------------------------------
    def _start(self) -> Out:
        """All pools registered (or the registration timed out): create the curator."""
        self.state = State.ROUNDS
        reg = self.registration
        self.registered = agents = reg.registered_agents()  # closed from here on
        agents.setflags(write=False)  # shared by the protocol's curator and the result
        with protocol_code("set-up"):
            bound = self.protocol.bind(dict(self.config.params), reg.public)
            self.params = bound.params
            curator = bound.curator(agents, self.curator_key, self.curator_coins)
        self.view.built(agents)  # the agents the curator was built over (the audit replays it)
        steps = self.loop.start(curator)
        self.comm.start(reg.n, per_agent=self.loop.per_agent_bytes)
        yield from self._rounds(steps)

    def _rounds(self, steps: Steps) -> Out:
        """The loop's ``steps`` (a round begun or ended, and the rounds after it that end at
        once); once the protocol's curator plans no more rounds, the output is released."""
        over = yield from steps
        if over:
            yield from self._finish()

    def _maybe_advance(self) -> Out:
        if self.state is State.ROUNDS and self.round is not None and self.round.complete:
            yield from self._rounds(self.loop.end())
        elif self.state is State.DONE and all(p.stats is not None for p in self.pools.values()):
            self._complete()

    def _finish(self) -> Out:
        self.output = self.loop.finish()
        self.state = State.DONE
        done = wire.encode(wire.DONE, self.run, wire.SETUP_ROUND, wire.NO_AGENT,
                           {"output": self.output})
        for pool in sorted(self.pools.values(), key=lambda q: q.index):
            yield self._send(pool.peer, done)
        self._touch()
        if not self.pools:
            self._complete()

    def on_timeout(self) -> Out:
        """Called by the driver when ``next_deadline`` passes with nothing received."""
        if self.state is State.REGISTERING:
            if not self.pools:
                self.failure = (f"no pool registered within {self.limits.timeout_s:g} s "
                                f"(expected {self.config.pools})")
                raise RunFailed(self.failure)
            yield from self._start()
        elif self.state is State.ROUNDS and self.loop.unstick():  # pools held back go on
            yield from self.loop.refill(self.round)
            self._touch()
            yield from self._maybe_advance()
        elif self.state is State.ROUNDS:
            yield from self._rounds(self.loop.end())
        elif self.state is State.DONE:
            self._complete()

    def _complete(self) -> None:
        reg = self.registration
        registered = self.registered if self.registered is not None else \
            reg.registered_agents()
        net = self.loop.network
        if net is not None:
            self.timing.network_s = net.elapsed
        self.result = curator_result(
            output=self.output, params=self.params, public=reg.public, n=reg.n or 0,
            registered=registered, comm=self.comm, timing=self.timing,
            pool_stats=[p.stats for p in self.pools.values()],
            pools_registered=len(self.pools), rejected=self.rejects.count,
            rejections=self.rejects.records, refused=self.loop.refused,
            refusal=self.loop.refusal_reason, round_dropouts=self.loop.dropouts,
            colluders=reg.colluders, curator_colludes=self.config.curator_colludes,
            virtual=None if net is None else net.summary(),
            view=self.view.released(self.output, reg.public, self.params))
        self.state = State.FINISHED
        # the rounds are over: the loop lets go of this session (its one way back here), so
        # the run's objects are freed as soon as the driver drops the session
        self.loop.touch = _nothing
