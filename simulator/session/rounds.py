"""Rounds and the send window: one round's state, from its plan to the reports it absorbs.

A round asks the agents of the curator's ``RoundPlan``. Their queries go out in batches of
``RunConfig.batch`` agents (``batch_size``: "auto" sizes them per round and pool), each pool's
in its own queue (``outbox``); ``WINDOW`` batches per pool are in flight at once and a pool
gets its next batch when a frame from it arrives, so the curator checks reports while the pools
compute, every pool keeps a few batches queued, and a round's frames never pile up in memory.
A pool that falls silent stops only its own batches (its agents become dropouts). Reports are
stored by the row of the plan, so the round ends without a sort: its reports are in the plan's
(sorted) agent order whatever the arrival order. On the pool's side: the frames of its reports
(``report_frames``; which queued batches it answers in one call: ``querybatches``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np
from ldpsim.protocols.agentrange import AgentRange, whole
from ldpsim.protocols.queries import RowQueries
from ldpsim.simulator.codec import wire, wire_numpy
from ldpsim.simulator.session.common import RunFailed, span
from ldpsim.simulator.session.idsets import IdSet, PlanMembers
from ldpsim.simulator.session.inorder import InOrder
from ldpsim.simulator.session.network import RoundTraffic
from ldpsim.simulator.session.streamnet import StreamedTimes

#: Query batches in flight per pool (see the module docstring).
WINDOW = 8
#: ``batch = "auto"``: about this many batches per pool and round, each of ``AUTO_MIN`` to
#: ``AUTO_MAX`` agents, and no query or report frame above ``AUTO_FRAME_BYTES`` (nor half the
#: frame limit). Few large frames pay the per-frame costs (a socket call, a batch's parse,
#: check and randomizer call on each side) less often; enough of them keep every pool busy
#: while the curator checks the last ones (at 10^6 agents on two pools, 16,384 to 32,768
#: agents per batch beat 4096 by 15-25% per round; 65,536 is slower again).
AUTO_BATCHES = 16
AUTO_MIN = 4096
AUTO_MAX = 32768
AUTO_FRAME_BYTES = 4 << 20
#: an envelope's bytes besides its payload, at most (array header, kind, run, round, agent)
ENVELOPE_HEAD = 32
#: the most bytes one payload number takes in msgpack (a float64 or a 64-bit integer)
NUMBER_BYTES = 9
#: queries ``envelope_bound`` encodes when they are not a number array
QUERY_SAMPLE = 64


def most_waiting(hold: int, pools: int, batch: int | str) -> int:
    """The most reports a round absorbed in agent order keeps waiting (``inorder``): its
    ``hold``, and on top the batches each pool has in flight when the hold is reached
    (``WINDOW`` of at most ``batch`` agents; "auto": ``AUTO_MAX``)."""
    return hold + pools * WINDOW * (AUTO_MAX if batch == "auto" else int(batch))


def batch_size(setting: int | str, rows: int, envelope_bytes: int,
               max_frame_bytes: int = 64 << 20) -> int:
    """Agents per query batch for a pool asked ``rows`` agents in a round.

    Parameters
    ----------
    setting : int or "auto"
        ``[runtime] batch``: a number is used as it is.
    rows : int
        Agents of the round that the pool hosts.
    envelope_bytes : int
        An upper bound on one agent's query or report envelope (``envelope_bound``).
    max_frame_bytes : int
        The frame limit (``Limits.max_frame_bytes``).

    Returns
    -------
    int
        ``setting``, or for "auto": ``rows / AUTO_BATCHES`` rounded up, clamped to
        [``AUTO_MIN``, ``AUTO_MAX``], then lowered (to at least 1) until a frame of that many
        envelopes fits ``min(AUTO_FRAME_BYTES, max_frame_bytes / 2)``.
    """
    if setting != "auto":
        return int(setting)
    size = min(max(math.ceil(rows / AUTO_BATCHES), AUTO_MIN), AUTO_MAX)
    cap = min(AUTO_FRAME_BYTES, max_frame_bytes // 2) // max(1, envelope_bytes)
    return max(1, min(size, cap))


def envelope_bound(plan: Any) -> int:
    """An upper bound on the bytes of one agent's query or report envelope in ``plan``'s
    round: the head plus ``NUMBER_BYTES`` per number of the report schema or of the widest
    query (queries that are not a number array are measured by encoding up to
    ``QUERY_SAMPLE`` of them, spread over the round, and doubling the largest)."""
    report = plan.schema.length * NUMBER_BYTES
    queries = plan.queries
    if queries is None or not len(queries):
        query = 0
    elif isinstance(queries, np.ndarray | RowQueries) and queries.dtype.kind in "biuf":
        query = (queries.shape[1] if queries.ndim == 2 else 1) * NUMBER_BYTES
    else:
        step = max(1, len(queries) // QUERY_SAMPLE)
        query = 2 * max(len(wire.encode(wire.QUERY, 0, 0, wire.NO_AGENT, q))
                        for q in queries[::step][:QUERY_SAMPLE])
    return ENVELOPE_HEAD + max(report, query)


class Batches:
    """A pool's unsent query batches of a round, as (first row, end row) of the plan's
    agents, ``size`` rows each from ``lo`` to ``hi``: read like the deque of them (its first,
    ``popleft``, whether any is left), without holding one pair per batch."""

    __slots__ = ("hi", "lo", "size")

    def __init__(self, lo: int, hi: int, size: int) -> None:
        self.lo, self.hi, self.size = lo, hi, size

    def __bool__(self) -> bool:
        return self.lo < self.hi

    def __len__(self) -> int:
        return -(-(self.hi - self.lo) // self.size) if self.lo < self.hi else 0

    def __getitem__(self, i: int) -> tuple[int, int]:
        if i != 0 or not self:
            raise IndexError("only the first unsent batch is read")
        return self.lo, min(self.hi, self.lo + self.size)

    def popleft(self) -> tuple[int, int]:
        first = self[0]
        self.lo = first[1]
        return first


class Round:
    """The state of one round (see the module docstring).

    Parameters
    ----------
    run, number : int
        The run's number on this curator and the round's.
    plan : RoundPlan
        The curator's plan: sorted, distinct ``agents``, their ``queries``, a ``broadcast``.
    n : int
        Agents of the run (ids in [0, n)).
    protocol : str
        The protocol's name (for the error a bad plan raises).
    t_wall, t_cpu : float
        When the round began (before its plan was made): its clocks.
    online, sizes
        With a ``[deployment]``: who is online, and the per-row byte counters (``network``).
    absorb : callable, optional
        A streamed round's sink (a chunked run whose curator absorbs in parts, without a
        deployment or an adversary view): each batch of stored reports goes to
        ``absorb(agents, reports)`` (sorted agents) as it is stored, and the round keeps no
        reports and no flag per agent: who reported and whose report was invalid are
        ``idsets.IdSet``s, who was asked the plan's agents themselves (``PlanMembers``).
    timer : StreamedTimes, optional
        A streamed round's virtual time under a ``[deployment]`` (``streamnet``): who is
        online is drawn as each batch goes out, each report's arrival as it is stored.
    hold : int, optional
        A streamed round whose curator absorbs in agent order (``Curator.absorbs_in_order``):
        its reports go to ``absorb`` through an ``inorder.InOrder`` that lets about ``hold``
        of them wait; the batches ahead of the ``frontier`` are held back past it.
    """

    def __init__(self, run: int, number: int, plan: Any, n: int, protocol: str,
                 t_wall: float, t_cpu: float, online: np.ndarray | None = None,
                 sizes: tuple[np.ndarray, np.ndarray] | None = None,
                 absorb: Callable[[np.ndarray, np.ndarray], None] | None = None,
                 timer: StreamedTimes | None = None, hold: int | None = None) -> None:
        agents = plan.agents
        if not isinstance(agents, AgentRange):
            agents = np.asarray(agents, dtype=np.int64)
            if len(agents) > 1 and not (agents[1:] > agents[:-1]).all():
                raise RunFailed(f"{protocol}: round {number} must ask sorted, distinct agent "
                                "ids")
        if len(agents) and (agents[0] < 0 or agents[-1] >= n):
            raise RunFailed(f"{protocol}: round {number} asks agent ids outside [0, {n})")
        self.absorb = absorb
        #: whether a batch was absorbed already (a streamed round)
        self.absorbed = False
        #: a streamed round absorbed in agent order: its early reports (``inorder``)
        self.order = None if absorb is None or hold is None else InOrder(self._sink, hold)
        #: pools given up by an ordered round (``abandon``): no batch is sent to them, and the
        #: agents of theirs it waits for no longer hold the others back
        self.abandoned: set[bytes] = set()
        self.n = n
        if absorb is not None:
            self.asked: Any = PlanMembers(agents)
            self.reported: Any = IdSet(n)
            self.invalid_mask: Any = IdSet(n)
        else:
            agents = whole(agents)
            self.asked = np.zeros(n, dtype=bool)
            self.asked[span(agents)] = True  # one slice when the agents are a range
            self.reported = np.zeros(n, dtype=bool)
            #: asked agents whose only report so far was out of domain, or who refused
            self.invalid_mask = np.zeros(n, dtype=bool)
        self.run = run
        self.number = number
        self.plan = plan
        self.agents = agents
        self.expected = len(agents)
        self.got = 0
        self.invalid = 0
        self.refused = 0
        #: reports by row of ``agents`` (rows of reported agents)
        self.values: np.ndarray | None = None
        queries = plan.queries
        # whether encode_batch takes them (a RowQueries is drawn a batch at a time as it goes)
        self.vector = isinstance(queries, RowQueries) or wire_numpy.batchable(queries)
        self.queries = queries.tolist() if not self.vector and isinstance(queries, np.ndarray) \
            else queries
        #: sent batches not yet answered: (pool peer, first agent) -> agents
        self.pending: dict[tuple[bytes, int], np.ndarray] = {}
        #: per pool: unsent batches as (first row, end row) of ``agents``
        self.outbox: dict[bytes, Batches] = {}
        self.bytes_down = 0
        self.bytes_up = 0
        #: the largest query batch of the round (agents), once a pool's batches are queued
        self.batch = 0
        self.t_wall = t_wall
        self.t_cpu = t_cpu
        #: per row of ``agents``: online in this round (None: every one; ``network``); the
        #: curator sends nothing to an offline agent and does not wait for it
        self.online = online
        self._offline = 0 if online is None else int(len(agents) - online.sum())
        #: per row: a report that came after the round's virtual end (``network``)
        self.late: np.ndarray | None = None
        #: a streamed round's virtual time (``streamnet``), which counts its late reports
        self.timer = timer
        #: per row: the envelope bytes sent to and received from each agent (kept when a
        #: deployment times the round: ``sizes``, two zeroed arrays of one entry per row)
        self.sizes_down, self.sizes_up = (None, None) if sizes is None else sizes
        #: the round's broadcast envelope (0: none), sent to each online asked agent
        self.broadcast_bytes = 0

    # -- sending ---------------------------------------------------------------------------
    def open_pool(self, peer: bytes, start: int, stop: int, batch: int | str,
                  max_frame_bytes: int) -> tuple[int, int]:
        """Queue the batches of the pool hosting agents ``[start, stop)`` (``batch``: the
        run's setting, see ``batch_size``); returns its rows ``[lo, hi)`` of ``agents``
        (empty when the round asks none of its agents)."""
        lo, hi = (int(x) for x in np.searchsorted(self.agents, [start, stop]))
        if lo < hi:
            size = batch_size(batch, hi - lo, self.envelope_bytes, max_frame_bytes)
            self.batch = max(self.batch, size)
            self.outbox[peer] = Batches(lo, hi, size)
        return lo, hi

    @cached_property
    def envelope_bytes(self) -> int:
        """``envelope_bound`` of the round's plan (computed once)."""
        return envelope_bound(self.plan)

    def broadcast(self, lo: int, hi: int) -> tuple[Any, bytes] | None:
        """The round's broadcast to the pool asked the rows ``[lo, hi)`` of ``agents``: the
        agents that receive it (its online ones; a slice when they are a range; in a streamed
        round with a deployment, an iterator of id arrays) and the envelope, counted in the
        round's bytes; None: no broadcast, or none of them is online (an offline agent
        receives nothing)."""
        if lo == hi or self.plan.broadcast is None:
            return None
        bc = wire.encode(wire.BCAST, self.run, self.number, wire.NO_AGENT, self.plan.broadcast)
        if isinstance(self.agents, AgentRange):  # a streamed round
            first = self.agents.start
            at: Any = slice(first + lo, first + hi)
            count = hi - lo
            if self.timer is not None:  # its online agents, a pass at a time
                count, parts = self.timer.online_parts(first + lo, first + hi)
                if not count:
                    return None
                at = parts
        else:
            ids = self.agents[lo:hi]
            keep = self.online[lo:hi] if self.online is not None else \
                None if self.timer is None else self.timer.online(ids)  # (streamed: now)
            if keep is not None:
                ids = ids[keep]
                if not len(ids):
                    return None
            at, count = span(ids), len(ids)
        self.bytes_down += len(bc) * count
        self.broadcast_bytes = len(bc)  # the same for every pool
        return at, bc

    def next_batch(self, peer: bytes) -> tuple[np.ndarray, bytes, np.ndarray] | None:
        """``peer``'s next query batch, if any is left: its agents, the frame and each
        envelope's size; it is pending until answered. A round absorbed in agent order sends
        none to a pool it gave up, nor, while its early reports are ``InOrder.full``, one that
        lies ahead of its ``frontier`` (but the pool that holds it)."""
        box = self.outbox.get(peer)
        if self.order is not None and box and (
                peer in self.abandoned or (self.order.full and self.holder() != peer)):
            return None
        if self.online is not None:  # offline agents are not asked: skip batches of none
            while box and not self.online[slice(*box[0])].any():
                box.popleft()
        keep = None
        while box and self.timer is not None:  # drawn as it goes (offline ones counted)
            keep = self.timer.ask(self.agents[slice(*box[0])])
            if keep is None or keep.any():
                break
            box.popleft()
        if not box:
            return None
        s, e = box.popleft()
        ids = self.agents[s:e]
        queries = self.queries
        rows: slice | np.ndarray = slice(s, e)
        qs = None if queries is None else queries[s:e]
        if keep is None and self.online is not None:
            keep = self.online[s:e]
        if keep is not None:
            if not keep.all():
                rows = np.flatnonzero(keep) + s
                ids = ids[keep]
                qs = None if qs is None else (qs[keep] if isinstance(qs, np.ndarray) else
                                              [q for q, k in zip(qs, keep, strict=True) if k])
        if self.vector:
            frame, sz = wire_numpy.encode_batch(wire.QUERY, self.run, self.number, ids, qs)
        else:
            bufs, sizes = wire.encode_many(wire.QUERY, self.run, self.number, ids.tolist(), qs)
            frame, sz = b"".join(bufs), np.asarray(sizes, dtype=np.int64)
        self.pending[(peer, int(ids[0]))] = ids
        self.bytes_down += int(sz.sum())
        if self.sizes_down is not None:
            self.sizes_down[rows] += sz
        if self.timer is not None:
            self.timer.sent(ids, sz, int(self.agents[s]), int(self.agents[e - 1]) + 1)
        return ids, frame, sz

    def frontier(self) -> int:
        """A round absorbed in agent order: the first agent that may still report, and every
        one before it is settled (the first of a batch unanswered or unsent, a pool it gave up
        aside; ``n`` once there is none)."""
        return self._frontier()[0]

    def holder(self) -> bytes | None:
        """The pool whose batch is at the ``frontier`` (None: none is)."""
        return self._frontier()[1]

    def _frontier(self) -> tuple[int, bytes | None]:
        out, holder = self.n, None
        for peer, first in self.pending:
            if first < out and peer not in self.abandoned:
                out, holder = first, peer
        for peer, box in self.outbox.items():
            if box and peer not in self.abandoned and int(self.agents[box[0][0]]) < out:
                out, holder = int(self.agents[box[0][0]]), peer
        return out, holder

    def in_flight(self, peer: bytes) -> int:
        """``peer``'s batches sent and not answered."""
        return sum(1 for p, _ in self.pending if p == peer)

    def holds(self, peer: bytes) -> bool:
        """A round absorbed in agent order holds ``peer`` back: a pool it has not given up,
        with batches left to send and none in flight."""
        return (self.order is not None and bool(self.outbox.get(peer))
                and peer not in self.abandoned and not self.in_flight(peer))

    def held(self) -> bool:
        """The round holds a pool back (``holds``)."""
        return any(self.holds(peer) for peer in self.outbox)

    def abandon(self) -> None:
        """Nothing came for the run's timeout while pools are held back: give up every pool
        with a batch in flight (fallen silent or dead), as a whole round's end would, so that
        the reports after theirs are absorbed and the pools held back go on."""
        self.abandoned.update(p for p, _ in self.pending)
        self.order.release(self.frontier())

    def _sink(self, ids: np.ndarray, values: np.ndarray) -> None:
        self.absorbed = True
        self.absorb(ids, values)

    def settle_offline(self) -> None:
        """Count the offline agents of the batches never sent (a streamed round with a
        deployment draws who is online as each goes out; a round's close counts them all)."""
        if self.timer is None:
            return
        for box in self.outbox.values():
            while box:
                self.timer.ask(self.agents[slice(*box.popleft())])

    def answered(self, key: tuple[bytes, int], count: int) -> None:
        """The first ``count`` agents of the pending batch ``key`` answered in one frame."""
        sent = self.pending.pop(key)
        if count < len(sent):
            self.pending[(key[0], int(sent[count]))] = sent[count:]

    # -- receiving --------------------------------------------------------------------------
    def store(self, ids: np.ndarray, at: slice | np.ndarray, values: np.ndarray,
              sizes: np.ndarray) -> None:
        """Record fresh, valid reports of ``ids`` (sorted; ``at`` is ids or the same as a
        slice): they replace an earlier out-of-domain report and fill the plan's rows."""
        if self.invalid:  # the agents marked in invalid_mask (none: the mask is not read)
            was = ids[self.invalid_mask[at]]
            self.invalid_mask[was] = False
            self.invalid -= len(was)
        self.reported[at] = True
        self.got += len(ids)
        if self.absorb is not None:  # streamed: absorbed now, sorted, and not kept
            self.bytes_up += int(sizes.sum())
            if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
                order = np.argsort(ids, kind="stable")
                ids, values, sizes = ids[order], values[order], sizes[order]
            came = ids
            if self.timer is not None:  # a late report counts, but is not absorbed
                on_time = self.timer.arrived(ids, sizes, self.broadcast_bytes, self.reported)
                if on_time is not None:
                    ids, values = ids[on_time], values[on_time]
            if self.order is not None:  # in agent order: what every agent before has
                self.order.push(ids, values)
                self.settle(came)  # (the late too: they are settled)
                return
            if not len(ids):
                return
            self.absorbed = True
            self.absorb(ids, values)
            return
        if self.values is None:
            self.values = np.empty((self.expected, values.shape[1]), dtype=values.dtype)
        if isinstance(at, slice):
            r0 = int(np.searchsorted(self.agents, ids[0]))
            rows: slice | np.ndarray = slice(r0, r0 + len(ids))
        else:
            rows = np.searchsorted(self.agents, ids)
        self.values[rows] = values
        if self.sizes_up is not None:
            self.sizes_up[rows] = sizes
        self.bytes_up += int(sizes.sum())

    def mark_invalid(self, ids: np.ndarray) -> None:
        """Asked agents (sorted, distinct) whose report is out of domain. The round does not
        wait for them until the timeout (they count as answered), but a valid report that
        still comes before the round ends replaces it: a broken sender cannot erase an honest
        one."""
        bad = ids[~self.invalid_mask[ids]]
        self.invalid_mask[bad] = True
        self.invalid += len(bad)
        self.settle(bad)

    def refuse(self, agents: np.ndarray) -> int:
        """Agents (sorted, distinct) refused to answer (their privacy budget): the round
        stops waiting for those it still waits for; returns how many that were."""
        wait = agents[self.asked[agents] & ~self.reported[agents] & ~self.invalid_mask[agents]]
        self.invalid_mask[wait] = True
        self.invalid += len(wait)
        self.refused += len(wait)
        self.settle(wait)
        return len(wait)

    def settle(self, agents: np.ndarray) -> None:
        """A round in agent order: ``agents`` (sorted) just reported, sent an out-of-domain
        report or refused. A batch answered so, in frames that are no prefix of it (the
        refused left out of its reports; ``answered`` pops only those), would stay pending
        and stop the ``frontier``: the pending batches among them lose their first agents
        that are settled. Then what waits below the frontier is absorbed."""
        if self.order is None:
            return
        if len(agents):
            lo, hi = int(agents[0]), int(agents[-1])
            for key in [k for k, ids in self.pending.items()
                        if int(ids[0]) <= hi and int(ids[-1]) >= lo]:
                ids = self.pending.pop(key)
                left = np.flatnonzero(~(self.reported[ids] | self.invalid_mask[ids]))
                if len(left):
                    self.pending[(key[0], int(ids[left[0]]))] = ids[left[0]:]
        self.order.release(self.frontier())

    @property
    def offline(self) -> int:
        """Asked agents offline in this round (a streamed round's, as its batches are
        asked: ``StreamedTimes.ask``)."""
        return self._offline + (0 if self.timer is None else self.timer.offline)

    @property
    def complete(self) -> bool:
        """Every asked agent reported, sent an invalid report or refused."""
        return self.got + self.invalid + self.offline >= self.expected

    def collect(self, late: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The round's reports in canonical order (the plan's, arrival-independent): the
        agents that reported and their rows; those that came after the round's virtual end
        (``network``) only with ``late`` (every report the curator received)."""
        if self.values is None:  # no report came: none, of the schema's type
            schema = self.plan.schema
            dtype = np.int64 if schema.dtype == "int" else np.float64
            return np.zeros(0, dtype=np.int64), np.zeros((0, schema.length), dtype=dtype)
        if self.got == self.expected and (self.late is None or late):
            return self.agents, self.values
        have = self.reported[self.agents]
        if self.late is not None and not late:
            have &= ~self.late
        return self.agents[have], self.values[have]

    @property
    def missing(self) -> int:
        """Asked online agents that neither reported nor refused (dropouts of a silent pool;
        those of a deployment, offline or late, are counted apart)."""
        return self.expected - self.got - self.invalid - self.offline

    def traffic(self) -> RoundTraffic:
        """What the round sent and received, as its close in virtual time reads it
        (``network.Network.close_round``; with a deployment, which keeps ``sizes``)."""
        return RoundTraffic(
            number=self.number, agents=self.agents, answered=self.got + self.invalid,
            reported=self.reported[span(self.agents)], online=self.online,
            down=self.sizes_down, broadcast=self.broadcast_bytes, up=self.sizes_up,
            numbers=self.plan.schema.length)

    def record(self) -> dict[str, Any]:
        """The round's entry of the result's ``comm.per_round``."""
        late = int(self.late.sum()) if self.late is not None else \
            self.timer.late if self.timer is not None else 0
        return {
            "round": self.number, "asked": self.expected, "reported": self.got - late,
            "invalid": self.invalid - self.refused, "refused": self.refused,
            "dropouts": self.missing, "bytes_down": self.bytes_down, "bytes_up": self.bytes_up,
            "report_bits": self.plan.report_bits, "batch": self.batch,
            "wall_s": time.perf_counter() - self.t_wall,
            "curator_cpu_s": time.process_time() - self.t_cpu}


def report_frames(run: int, rnd: int, ids: np.ndarray, reports: np.ndarray, firsts: list[int],
                  refusals: dict[int, bytes], max_frame_bytes: int) -> list[bytes]:
    """A pool's frames answering round ``rnd`` for the agents ``ids`` with their
    ``reports``: one frame per query batch (``firsts``: the first agent of each batch after
    the first, when ``ids`` joins several), preceded by the batch's refusal if it has one
    (``refusals``, by batch), and split further when a frame would exceed half of
    ``max_frame_bytes`` (large reports, e.g. a whole answer vector per worker); the curator
    matches the pieces."""
    row_bytes = 16 + 9 * max(1, reports.shape[1] if reports.ndim == 2 else 1)
    per_frame = max(1, (max_frame_bytes // 2) // row_bytes)
    cuts = [0, *np.searchsorted(ids, firsts).tolist(), len(ids)]
    out = []
    for b, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        if b in refusals:
            out.append(refusals[b])
        for s in range(lo, hi, per_frame):
            e = min(s + per_frame, hi)
            out.append(wire_numpy.encode_batch(wire.REPORT, run, rnd, ids[s:e],
                                               reports[s:e])[0])
    return out
