"""Accounting: what a run costs in bytes, messages and time, as the curator measures it.

``CommStats`` counts every frame the curator sends or receives (physical bytes as ZMTP puts
them on the wire) and every envelope to or from a registered agent (logical bytes per agent);
``Timing`` holds the run's clocks; ``pool_stats`` makes a pool's DONE statistics and
``check_stats`` vets them, which the curator takes from the pools for their agents' CPU time
and memory. Each turns itself into its part of the result record (``record.curator_result``),
so the record's schema is written here and nowhere else.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.common import peak_rss_mb, written_zeros

#: a ZMTP 3 frame's header: flags and a 1-byte length for a body of up to ``ZMTP_SHORT_MAX``
#: bytes, else flags and an 8-byte length
ZMTP_SHORT, ZMTP_LONG, ZMTP_SHORT_MAX = 2, 9, 255


def zmtp_bytes(frame_len: int) -> int:
    """Bytes a frame occupies in a ZMTP 3 stream: flags + 1- or 8-byte length + body."""
    return frame_len + (ZMTP_SHORT if frame_len <= ZMTP_SHORT_MAX else ZMTP_LONG)


#: the per-agent byte counters' dtypes, narrowest first: a counter widens to the next one that
#: holds the most bytes any agent can have counted in its direction (``CommStats._count``)
COUNTERS = (np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64))
#: the largest count each counter type holds
_COUNTER_MAX = {d: int(np.iinfo(d).max) for d in COUNTERS}


@dataclass
class CommStats:
    """Communication of one run (the result's ``comm``).

    ``up``/``down`` are logical bytes per agent (the envelopes to and from each agent, a
    broadcast counted once per receiving agent); ``phys_*`` and ``frames_*`` what crossed the
    curator's socket, including rejected input.
    """

    up: np.ndarray | None = None  # bytes per agent, from the first round on
    down: np.ndarray | None = None
    msgs_up: int = 0  # envelopes (all to or from registered agents)
    msgs_down: int = 0
    phys_up: int = 0
    phys_down: int = 0
    frames_up: int = 0
    frames_down: int = 0
    disclose_bytes: int = 0
    #: the bytes each colluder disclosed (their sum is ``disclose_bytes``): a smaller coalition
    #: of the same execution discloses its members' part (``sweep.execute``)
    disclosed: dict[int, int] = field(default_factory=dict)
    #: one record per round (``rounds.Round.record``)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    #: per direction, the most bytes any one agent can have counted so far (``_count``)
    _most: dict[str, int] = field(default_factory=lambda: {"up": 0, "down": 0})
    #: without per-agent counters (``start``): per direction, the bytes counted in all, the
    #: largest count given to every agent of a call (a broadcast) and the largest envelope
    #: counted one agent at a time
    _totals: dict[str, list[int]] | None = None

    #: every key of the record's ``comm`` and what it means (docs/results.md)
    FIELDS: ClassVar[dict[str, str]] = {
        "bytes_up_per_agent_mean": "exact envelope bytes each agent sent, mean",
        "bytes_up_per_agent_max": "... and max",
        "bytes_down_per_agent_mean": "bytes each agent received (a broadcast counts once per "
                                     "receiving agent), mean",
        "bytes_down_per_agent_max": "... and max",
        "bytes_total": "all agents' envelope bytes, both ways",
        "messages_total": "logical agent envelopes, both ways",
        "messages_up_per_agent_mean": "envelopes each agent sent, mean",
        "messages_down_per_agent_mean": "envelopes each agent received, mean",
        "rounds": "rounds the curator ran",
        "report_bits_per_agent": "information-theoretic report size (e.g. K bits)",
        "physical_bytes_up": "bytes the curator's socket received, ZMTP framing included",
        "physical_bytes_down": "bytes it sent",
        "physical_frames": "ZeroMQ frames both ways (batching included)",
        "disclose_bytes_total": "bytes the colluders disclosed to the curator",
        "per_round": "per round: asked, reported, invalid, refused, dropouts, bytes, report "
                     "bits, the largest query batch (agents), wall and curator CPU",
    }

    def start(self, n: int, per_agent: bool = True) -> None:
        """The rounds start with ``n`` agents.

        The per-agent counters start in the narrowest dtype of ``COUNTERS`` (int16) and widen
        (``_count``) before any agent could pass its maximum in a direction: every page of them
        a round first touches costs a page fault, and at 10^6 agents int16 makes them 4 MB
        instead of 16 MB with int64 (docs/performance.md has the measurements).

        Without ``per_agent``, for a run of one round without a ``[deployment]`` only: each
        agent then receives at most the round's broadcast and one query, and sends at most one
        report, so the totals and the largest of each kind give the record's sums and
        per-agent largest exactly, with no counter per agent (``as_record``).
        """
        if not per_agent:
            self._totals = {"up": [0, 0, 0], "down": [0, 0, 0]}
            return
        self.up = written_zeros(n, COUNTERS[0])  # updated in place: see ``written_zeros``
        self.down = written_zeros(n, COUNTERS[0])

    def count_up(self, at: slice | np.ndarray, sizes: np.ndarray) -> None:
        """Agents ``at`` (a slice or distinct ids) sent envelopes of ``sizes`` bytes."""
        self._count("up", at, sizes)

    def count_down(self, at: slice | np.ndarray, sizes: np.ndarray | int) -> None:
        """Agents ``at`` (a slice or distinct ids) received envelopes of ``sizes`` bytes (one
        number: the same for each)."""
        self._count("down", at, sizes)

    def _count(self, way: str, at: slice | np.ndarray, sizes: np.ndarray | int) -> None:
        if self._totals is not None:
            self._add(self._totals[way], at, sizes)
            return
        counter = getattr(self, way)
        if type(sizes) is int:  # one number for every agent: its own largest
            most = sizes
        else:
            most = int(np.max(sizes)) if np.size(sizes) else 0
        self._most[way] += most  # no agent has more bytes counted this way than this
        top = _COUNTER_MAX.get(counter.dtype)
        if self._most[way] > (np.iinfo(counter.dtype).max if top is None else top):
            wide = next(d for d in COUNTERS if self._most[way] <= _COUNTER_MAX[d])
            counter = counter.astype(wide)
            setattr(self, way, counter)
        counter[at] += sizes

    @staticmethod
    def _add(totals: list[int], at: slice | np.ndarray, sizes: np.ndarray | int) -> None:
        """Count into ``totals`` (all bytes, the largest given to every agent of a call, the
        largest envelope of one agent): the agents ``at`` got ``sizes`` bytes."""
        if type(sizes) is int:
            count = at.stop - at.start if isinstance(at, slice) else len(at)
            totals[0] += sizes * count
            if count:
                totals[1] = max(totals[1], sizes)
        elif np.size(sizes):
            totals[0] += int(np.sum(sizes, dtype=np.int64))
            totals[2] = max(totals[2], int(np.max(sizes)))

    def sent_frame(self, frame: bytes) -> None:
        self.phys_down += zmtp_bytes(len(frame))
        self.frames_down += 1

    def received_frame(self, frame: bytes) -> None:
        self.phys_up += zmtp_bytes(len(frame))
        self.frames_up += 1

    def _way(self, way: str, registered: Any) -> tuple[int, int]:
        """The bytes the ``registered`` agents (ids, or an ``AgentRange``) were counted in
        direction ``way``: in all, and the most of one agent (0 without agents). Only a
        registered agent is ever counted, so the totals are theirs. One integer sum: the
        record's mean is it over the agents, exactly as ``mean()`` computes it (integer
        partial sums are exact in float64 below 2^53)."""
        if not len(registered):
            return 0, 0
        if self._totals is not None:
            total, flat, peak = self._totals[way]
            # every agent that got an envelope of its own got the call's broadcast too
            return total, flat + peak
        counter = getattr(self, way)
        if counter is None:
            return 0, 0
        if len(registered) != len(counter):
            counter = counter[registered.start:registered.stop] \
                if isinstance(registered, AgentRange) else counter[registered]
        return int(counter.sum(dtype=np.int64)), int(counter.max())

    def as_record(self, registered: np.ndarray) -> dict[str, Any]:
        """The ``comm`` part of the result record, over the ``registered`` agents' ids."""
        n_reg = len(registered)
        (total_up, most_up), (total_down, most_down) = (
            self._way("up", registered), self._way("down", registered))
        return {
            "bytes_up_per_agent_mean": total_up / n_reg if n_reg else 0.0,
            "bytes_up_per_agent_max": most_up,
            "bytes_down_per_agent_mean": total_down / n_reg if n_reg else 0.0,
            "bytes_down_per_agent_max": most_down,
            "bytes_total": total_up + total_down,
            "messages_total": self.msgs_up + self.msgs_down,
            "messages_up_per_agent_mean": self.msgs_up / n_reg if n_reg else 0,
            "messages_down_per_agent_mean": self.msgs_down / n_reg if n_reg else 0,
            "rounds": len(self.rounds),
            "report_bits_per_agent": sum(r["report_bits"] for r in self.rounds),
            "physical_bytes_up": self.phys_up,
            "physical_bytes_down": self.phys_down,
            "physical_frames": self.frames_up + self.frames_down,
            "disclose_bytes_total": self.disclose_bytes,
            "per_round": self.rounds,
        }


@dataclass
class Timing:
    """The run's clocks (the result's ``timing``), started when the curator session is."""

    t0_wall: float = field(default_factory=time.perf_counter)
    t0_cpu: float = field(default_factory=time.process_time)
    #: when every pool had said it is ready (process start-up, connecting)
    t_ready: float | None = None
    #: the seconds a ``[deployment]``'s model took (``network.Network.elapsed``; None: none)
    network_s: float | None = None

    #: every key of the record's ``timing`` and what it means (docs/results.md);
    #: ``run_wall_s`` is the orchestrator's (``record.run_record``)
    FIELDS: ClassVar[dict[str, str]] = {
        "wall_s": "curator, from set-up to release",
        "pools_ready_s": "of which: until every pool had connected and said it is ready",
        "curator_cpu_s": "the curator's CPU for the run",
        "pools_cpu_s": "all pools' CPU for the run: data generation, randomizers, codec",
        "agent_cpu_s_mean": "mean CPU per agent, batch: the randomizer's time over the "
                            "agents it answered (amortised: each batch's time shared by its "
                            "agents, the vectorised kernel's cost, not what one phone spends; "
                            "exact: each agent's call timed alone)",
        "agent_cpu_s_max": "amortised: the largest batch's mean per agent; exact: the most one "
                           "agent's call took",
        "agent_time_mode": "exact or amortised",
        "agent_alone_cpu_s_mean": "one agent's randomizer called alone, as a phone computes "
                                  "its own report: mean over the agents timed so (amortised: "
                                  "the first 2 of each round's first call in each pool; exact: "
                                  "every agent; 0: none)",
        "agent_alone_cpu_s_std": "... their standard deviation (the per-agent spread)",
        "agent_alone_cpu_s_max": "... and max",
        "agent_alone_samples": "how many agents were timed alone",
        "curator_peak_rss_mb": "the curator process's peak memory",
        "pool_peak_rss_mb": "the largest pool process's peak memory",
        "run_wall_s": "orchestrator, including process start",
        "network_s": "of the curator's: the [deployment] model (devices, who is online, "
                     "arrival times; only with one)",
    }
    #: the keys of ``FIELDS`` a record holds only in some runs (``network_s``: with a
    #: ``[deployment]``), so that records without one stay as they were
    OPTIONAL: ClassVar[tuple[str, ...]] = ("network_s",)

    def as_record(self, stats: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """The ``timing`` part of the result record, with the pools' DONE ``stats``."""
        stats = list(stats)
        calls = sum(s.get("agent_calls", 0) for s in stats)
        cpu = sum(s.get("agent_cpu_s", 0.0) for s in stats)
        modes = {s.get("agent_time_mode") for s in stats} or {"amortised"}
        return {
            "wall_s": time.perf_counter() - self.t0_wall,
            # until the last pool said it is ready (process start-up, connecting)
            "pools_ready_s": (self.t_ready or self.t0_wall) - self.t0_wall,
            "curator_cpu_s": time.process_time() - self.t0_cpu,
            # every pool's CPU for this run: data generation, randomizers, codec, sockets
            "pools_cpu_s": sum(s.get("pool_cpu_s", 0.0) for s in stats),
            "agent_cpu_s_mean": cpu / calls if calls else 0.0,
            "agent_cpu_s_max": max((s.get("agent_cpu_s_max", 0.0) for s in stats), default=0.0),
            "agent_time_mode": "exact" if modes == {"exact"} else "amortised",
            **alone_time(stats),
            "curator_peak_rss_mb": peak_rss_mb(),
            "pool_peak_rss_mb": max((s.get("peak_rss_mb", 0.0) for s in stats), default=0.0),
            **({} if self.network_s is None else {"network_s": self.network_s}),
        }


def alone_time(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``timing`` entries of the agents timed alone (``AgentClock``), from the pools'
    DONE ``stats``: their mean, standard deviation (of the sample) and largest seconds, and
    how many."""
    k = sum(s.get("agent_alone_calls", 0) for s in stats)
    total = math.fsum(s.get("agent_alone_cpu_s", 0.0) for s in stats)
    squares = math.fsum(s.get("agent_alone_cpu_s2", 0.0) for s in stats)
    mean = total / k if k else 0.0
    var = (squares - k * mean * mean) / (k - 1) if k > 1 else 0.0
    return {"agent_alone_cpu_s_mean": mean, "agent_alone_cpu_s_std": math.sqrt(max(var, 0.0)),
            "agent_alone_cpu_s_max": max((s.get("agent_alone_cpu_s_max", 0.0) for s in stats),
                                         default=0.0),
            "agent_alone_samples": k}


#: A pool's DONE statistics: name -> (allowed types, whether it must be >= 0). Checked like
#: reports; anything else rejects the whole DONE (the pool's agents still count).
STATS = {"pool": (int, True), "agent_cpu_s": ((int, float), True), "agent_calls": (int, True),
         "agent_cpu_s_max": ((int, float), True), "agent_alone_cpu_s": ((int, float), True),
         "agent_alone_cpu_s2": ((int, float), True), "agent_alone_cpu_s_max": ((int, float), True),
         "agent_alone_calls": (int, True), "pool_cpu_s": ((int, float), True),
         "peak_rss_mb": ((int, float), True), "refused": (int, True), "agents": (int, True),
         "epsilon_spent_max": ((int, float), True), "epsilon_spent_sum": ((int, float), True),
         "epsilon_lifetime_max": ((int, float), True)}


class AgentClock:
    """The time a pool's agents take in the protocol's randomizer in one run
    (``PoolSession``): each call over a batch, its time shared by the batch's agents
    (amortised: the mean CPU per agent of a batch, not what one phone spends), or each
    agent's call on its own (``exact``, ``agent_mode = "exact"``).

    Amortised, the first ``ALONE`` agents of each round's first call of at least
    ``alone_min`` agents are answered one at a time, each call timed (``alone``): what one
    agent's randomizer takes when it computes its own report alone, as a phone does, a sample
    of it per round and pool. A smaller call is not sampled: there the randomizer's fixed cost
    per call is most of the batch's, so two more calls would add a large share to the run
    (tiny runs: 2-3x the randomizer's time) for a figure that the batch mean already gives
    within that fixed cost. Each agent is still answered once, by the same randomizer (exact
    mode answers them all so): the reports are the same bits."""

    #: agents timed alone per round (amortised mode), from the round's first call
    ALONE = 2
    #: the fewest agents a call must answer to be sampled alone (amortised mode)
    ALONE_MIN = 1000

    def __init__(self, exact: bool = False, alone_min: int = ALONE_MIN) -> None:
        self.exact = exact
        self.alone_min = alone_min
        self.cpu = 0.0  # seconds, summed over the calls
        self.cpu_max = 0.0  # the most one agent took (amortised: its share of a call)
        self.calls = 0  # agents answered
        # the agents timed alone: their seconds, summed and squared, the most, how many
        self.alone = [0.0, 0.0, 0.0, 0]
        self._sampled: set[int] = set()  # the rounds whose sample is taken

    def respond(self, respond: Any, block: Any, n: int, rnd: int | None = None) -> np.ndarray:
        """The reports ``respond`` (the protocol's randomizer) makes for the ``n`` agents of
        ``block``, timed; in round ``rnd`` (None: no sample alone)."""
        k = 0
        if (not self.exact and rnd is not None and rnd not in self._sampled and n > 1
                and n >= self.alone_min):
            self._sampled.add(rnd)
            k = min(self.ALONE, n - 1)
        if self.exact:
            k = n
        parts = [self._alone(respond, block.take(slice(i, i + 1))) for i in range(k)]
        if k < n:
            rest = block if k == 0 else block.take(slice(k, n))
            t = time.perf_counter()
            reports = respond(rest)
            dt = time.perf_counter() - t
            self.cpu += dt
            self.cpu_max = max(self.cpu_max, dt / (n - k))
            self.calls += n - k
            parts.append(reports)
        return np.asarray(parts[0] if len(parts) == 1 else np.concatenate(parts))

    def _alone(self, respond: Any, one: Any) -> Any:
        """One agent's report, its call timed on its own."""
        t = time.perf_counter()
        r = respond(one)
        dt = time.perf_counter() - t
        a = self.alone
        a[0] += dt
        a[1] += dt * dt
        a[2] = max(a[2], dt)
        a[3] += 1
        if self.exact:
            self.cpu += dt
            self.cpu_max = max(self.cpu_max, dt)
            self.calls += 1
        return r

    def stats(self) -> dict[str, Any]:
        """The pool statistics' entries of the agents' time."""
        return {"agent_cpu_s": self.cpu, "agent_calls": self.calls,
                "agent_cpu_s_max": self.cpu_max,
                "agent_time_mode": "exact" if self.exact else "amortised",
                "agent_alone_cpu_s": self.alone[0], "agent_alone_cpu_s2": self.alone[1],
                "agent_alone_cpu_s_max": self.alone[2], "agent_alone_calls": self.alone[3]}


def pool_stats(index: int, clock: AgentClock, cpu0: float, refused: int, agents: int,
               odometer: Any) -> dict[str, Any]:
    """Pool ``index``'s DONE statistics: its agents' randomizer time (``clock``), the pool's
    CPU time since ``cpu0``, its peak memory, the queries refused, its agents and, under an
    odometer (``odometer.Odometer``; None: none), what they spent."""
    out = {"pool": index, **clock.stats(),
           "pool_cpu_s": time.process_time() - cpu0, "peak_rss_mb": peak_rss_mb(),
           "refused": refused, "agents": agents}
    if odometer is not None and len(odometer.spent):
        out["epsilon_spent_max"] = float(odometer.spent.max())
        out["epsilon_spent_sum"] = float(odometer.spent.sum())
        out["epsilon_lifetime_max"] = float(odometer.lifetime.max())
    return out


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
