"""The curator's rounds, one after another: from the first plan to the protocol's output.

Each round is planned by the protocol's curator (``plan``), opened (``rounds.Round``: who is
asked, who is online in a ``[deployment]``, what its reports must be, ``ingest.Expected``), its
broadcast sent to each pool and its query batches through the send window (``WINDOW`` batches
per pool at once, one more each time a pool answers: ``send_batch``); its reports are screened
and stored as they come (``screen``, ``store``), and once it is complete or the curator's
patience runs out it is closed (``end``): its reports absorbed by the protocol's curator, its
record kept, and the next round begun. When the curator plans no more rounds the loop says so,
and ``finish`` gives the output. Everything sent is counted (``accounting.CommStats``); the
curator session (``curator.CuratorSession``) holds the run's states around it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np
from ldpsim.protocols.queries import RowQueries
from ldpsim.simulator.session import notices
from ldpsim.simulator.session.accounting import CommStats
from ldpsim.simulator.session.adversary import AdversaryView
from ldpsim.simulator.session.common import (
    MAX_REASON,
    Limits,
    RunFailed,
    protocol_code,
    span,
)
from ldpsim.simulator.session.ingest import Expected, Reports, Screened, screen
from ldpsim.simulator.session.network import DeploymentModel, Network
from ldpsim.simulator.session.registration import PoolSlot, Registration
from ldpsim.simulator.session.rounds import WINDOW, Round
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.streamnet import StreamedTimes

#: frames to send, as (peer identity, frame); a round's steps return whether the rounds are over
Steps = Generator[tuple[bytes, bytes], None, bool]


class RoundLoop:
    """The rounds of one run (see the module docstring).

    Parameters
    ----------
    run : int
        The run's number on this curator.
    config : RunConfig
    limits : Limits
    registration : Registration
        The run's pools (their slots and agents).
    comm : CommStats
        Counts everything the loop sends.
    view : AdversaryView
        Records each round.
    touch : callable
        Moves the session's inactivity deadline (a round opened is progress).
    deployment : DeploymentModel, optional
        The run's deployment model (``[deployment]``): the rounds then run on its simulated
        network, in virtual time.
    """

    def __init__(self, run: int, config: RunConfig, limits: Limits, registration: Registration,
                 comm: CommStats, view: AdversaryView, touch: Callable[[], None],
                 deployment: DeploymentModel | None = None) -> None:
        self.run = run
        self.config = config
        self.limits = limits
        self.registration = registration
        self.comm = comm
        self.view = view
        self.touch = touch
        self.curator: Any = None  # the protocol's curator, from the rounds on (``start``)
        self.deployment = deployment
        #: the simulated network of a ``[deployment]`` (virtual time)
        self.network: Network | None = None
        n = config.data.get("n")
        if deployment is not None and isinstance(n, int) and n > 0:
            # the devices are drawn now, while the pools start and build their data (but
            # never all of them in a run that may stream: ``streams``)
            self.network = deployment.network(n, not (config.chunked(n) and deployment.streams))
        self.round: Round | None = None
        self.expected: Expected | None = None  # what the current round's reports must be
        #: whether the rounds stream (``streams``): each stored batch absorbed as it comes
        self.streamed = False
        self.dropouts = 0  # asked agents whose reports never came, over the rounds
        self.refused = 0  # queries the agents refused (privacy odometer)
        self.refusal_reason: str | None = None  # the first refusal's

    def _send(self, peer: bytes, frame: bytes) -> tuple[bytes, bytes]:
        self.comm.sent_frame(frame)
        return peer, frame

    def start(self, curator: Any) -> Steps:
        """The rounds' steps with the protocol's ``curator``, from round 0 on (the devices are
        drawn again if the registered agents are not those the configuration said)."""
        n = self.registration.n
        self.curator = curator
        self.streamed = self.streams(n, curator)
        if self.deployment is not None and (self.network is None or self.network.n != n):
            self.network = self.deployment.network(n, not self.streamed)
        return self.begin(0)

    def streams(self, n: int, curator: Any) -> bool:
        """Whether a run of ``n`` agents with the protocol's ``curator`` streams its rounds:
        it has more agents than ``[runtime] chunk``, no ``[deployment]`` or one whose reports
        are late by their own arrival alone (``DeploymentModel.streams``: else its round's end
        reads every agent's arrival), keeps no adversary view (which keeps every report) and
        its curator absorbs in parts (``Curator.absorbs_in_parts``)."""
        return (self.config.chunked(n) and not self.view.record
                and (self.deployment is None or self.deployment.streams)
                and bool(getattr(curator, "absorbs_in_parts", False)))

    @property
    def per_agent_bytes(self) -> bool:
        """Whether the run needs a byte counter per agent (``CommStats.start``): all but a
        streamed run of a curator of one round (``Curator.single_round``)."""
        return not (self.streamed and getattr(self.curator, "single_round", False))

    def begin(self, number: int) -> Steps:
        """Plan and open round ``number`` and send its first frames; True once the protocol's
        curator plans no more rounds."""
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        with protocol_code(f"plan of round {number}"):
            plan = self.curator.plan(number)
        if plan is None:
            return True
        reg = self.registration
        net = self.network
        online = timer = None
        if net is not None and not self.streamed:
            online = net.online(np.asarray(plan.agents, np.int64), number)
        absorb = hold = None
        if self.streamed:
            if net is not None:
                timer = StreamedTimes(net, number, plan.agents, plan.schema.length)
            if number and not self.per_agent_bytes:
                raise RunFailed(f"{self.config.protocol}: its curator plans round {number}, "
                                "but says it plans one round (Curator.single_round)")
            absorb = functools.partial(self._absorb_part, number)
            if getattr(self.curator, "absorbs_in_order", False):
                hold = self.config.chunk_agents
            if isinstance(plan.queries, RowQueries):  # drawn as sent, kept till absorbed
                plan.queries.streaming(keep=self.config.chunk_agents)
        self.round = rnd = Round(self.run, number, plan, reg.n, self.config.protocol,
                                 t_wall, t_cpu, online=online,
                                 sizes=None if net is None or self.streamed
                                 else net.sizes(len(plan.agents)), absorb=absorb, timer=timer,
                                 hold=hold)
        self.expected = Expected(self.run, number, reg.n, plan.schema,
                                 self.limits.max_frame_bytes, self.limits.max_envelope_bytes)
        self.view.opened(number, rnd.agents, plan)
        for pool in sorted(reg.pools.values(), key=lambda q: q.index):
            lo, hi = rnd.open_pool(pool.peer, pool.start, pool.stop, self.config.batch,
                                   self.limits.max_frame_bytes)
            sent = rnd.broadcast(lo, hi)
            if sent is not None:
                at, bc = sent
                for part in at if not isinstance(at, (slice, np.ndarray)) else (at,):
                    self.comm.count_down(part, len(bc))  # once per receiving agent
                yield self._send(pool.peer, bc)
        for _ in range(WINDOW):  # one batch per pool in turn: every pool starts at once
            for peer in list(rnd.outbox):
                yield from self.send_batch(rnd, peer)
        self.touch()
        if rnd.complete:  # it asks nobody, or nobody online
            return (yield from self.end())
        return False

    def send_batch(self, rnd: Round, peer: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Send ``peer`` its next query batch of this round, if any is left (``WINDOW``)."""
        batch = rnd.next_batch(peer)
        if batch is None:
            return
        ids, frame, sizes = batch
        self.comm.count_down(span(ids), sizes)
        self.comm.msgs_down += len(ids)
        yield self._send(peer, frame)

    def refill(self, rnd: Round) -> Iterator[tuple[bytes, bytes]]:
        """A round absorbed in agent order: send every pool it holds back no longer its
        batches, up to ``WINDOW`` in flight (its frontier moved)."""
        if rnd.order is None:
            return
        for peer in list(rnd.outbox):
            while rnd.in_flight(peer) < WINDOW:
                sent = list(self.send_batch(rnd, peer))
                if not sent:
                    break
                yield from sent

    def unstick(self) -> bool:
        """The run's timeout passed with nothing received: a round absorbed in agent order
        that holds pools back gives up those it waits for (``Round.abandon``) and goes on
        (True; ``refill`` sends the others their batches); otherwise the round ends."""
        rnd = self.round
        if rnd is None or not rnd.held():
            return False
        rnd.abandon()
        return True

    def screen(self, reports: Reports, pool: PoolSlot) -> Screened:
        """Screen a batch of decoded reports from ``pool`` against the current round
        (``ingest.screen``); the invalid are marked at once."""
        rnd = self.round
        if reports.answers is not None:
            rnd.answered(*reports.answers)
        s = screen(reports, pool.start, pool.stop, pool.index, rnd.asked, rnd.reported,
                   rnd.plan, rnd.number)
        if len(s.invalid):
            rnd.mark_invalid(s.invalid)
        return s

    def store(self, s: Screened) -> bool:
        """Store the reports of ``s`` that count (each agent at most once); True if any."""
        if not len(s.store_ids):
            return False
        order = self.round.order
        if order is not None and s.store_ids.min() < order.cursor:
            # after the agents behind it were absorbed (a valid report after an invalid one,
            # or one for a pool given up): a sum in agent order cannot take it
            s = s.ahead_of(order.cursor)
            if not len(s.store_ids):
                return False
        self.round.store(s.store_ids, s.store_at, s.store_values, s.store_sizes)
        self.comm.count_up(s.store_at, s.store_sizes)  # each agent at most once
        self.comm.msgs_up += len(s.store_ids)
        return True

    def refuse(self, pool: PoolSlot, number: int, payload: dict[str, Any]) -> bool:
        """Agents of ``pool`` refused round ``number``'s queries (their privacy budget, or a
        round asked twice; its ERROR's ``payload``): recorded, and the round stops waiting for
        them. True if it is a refusal of the current round's."""
        agents = notices.refused_agents(payload, pool.start, pool.stop)
        rnd = self.round
        if agents is None or rnd is None or number != rnd.number or not len(agents):
            return False
        # only asked agents the round still waits for count (a refusal cannot undo a report)
        waited = rnd.refuse(np.unique(agents))
        self.refused += waited
        if waited and self.refusal_reason is None and isinstance(payload.get("error"), str):
            self.refusal_reason = payload["error"][:MAX_REASON]
        return True

    def _absorb_part(self, number: int, agents: np.ndarray, reports: np.ndarray) -> None:
        """A streamed round's stored batch, absorbed as it comes."""
        with protocol_code(f"absorb of round {number}"):
            self.curator.absorb(number, agents, reports)

    def end(self) -> Steps:
        """Close the current round (its reports absorbed, its record kept) and begin the
        next; True once the protocol's curator plans no more rounds."""
        rnd = self.round
        timed = None
        if rnd.timer is not None:  # streamed: the late were left out as they came
            rnd.settle_offline()
            timed = rnd.timer.close(rnd.reported, rnd.got, rnd.got + rnd.invalid,
                                    rnd.broadcast_bytes)
        elif self.network is not None:  # who came too late for the round's virtual end
            rnd.late, timed = self.network.close_round(rnd.traffic())
        self.dropouts += rnd.missing
        agents = reports = None
        if rnd.order is not None:  # what waits on agents that will not report
            rnd.order.flush()
        if rnd.absorb is None or not rnd.absorbed:  # (a streamed round without a report
            agents, reports = rnd.collect()  # is absorbed once, with none, as any other)
            with protocol_code(f"absorb of round {rnd.number}"):
                self.curator.absorb(rnd.number, agents, reports)
        self.view.closed(rnd, agents, reports)
        self.comm.rounds.append(rnd.record() if timed is None else {**rnd.record(), **timed})
        return (yield from self.begin(rnd.number + 1))

    def finish(self) -> Any:
        """The protocol's output, once the rounds are over."""
        with protocol_code("finish"):
            output = self.curator.finish()
        self.round = self.expected = None
        return output
