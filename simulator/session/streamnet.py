"""A ``[deployment]``'s virtual time in a streamed round: the network model of
``session.network`` over a chunked run, with no array over the round's agents.

A streamed round (``rounds.Round`` with a sink: a run with more agents than ``[runtime]
chunk`` whose curator absorbs its reports in parts) holds no report and no flag per agent. With
a deployment it can still stream when each report's lateness follows from its own arrival alone
(``network.DeploymentModel.streams``: the whole round answering, the curator's own link
unlimited): the round then ends at the earliest of its deadline and its last answer, so a
report is late exactly when it lands after the deadline. ``StreamedTimes`` times the round
batch by batch, with the same numbers as a whole round's close (``Network.close_round``):

* **who is online** is drawn for each query batch as it goes out (the same keyed draws,
  ``Network.online_of``); an offline agent is sent nothing and counted;
* **each report's arrival** is computed when it is stored, from the devices of its agents
  (``network.draw_devices``, keyed by agent id: the same as drawn for all of them) and the
  envelope bytes each way (``network.completion_times``); a late one is counted and left out
  of the aggregate before the curator absorbs the rest;
* **the bytes each way** of every agent are kept as runs of equal values (``piecewise``): a
  round's envelopes take a few sizes, so 10^9 agents keep a handful of runs (an agent sent
  nothing, or that sent nothing, takes its neighbour's value, never read);
* **the close** (``close``) computes the completion percentiles on a second pass over the
  reporters, from the same evenly spaced sample (``roundend.sample_stride``: every k-th
  reporter in agent order, whose times are computed again) as a whole round's.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from ldpsim.simulator.session.idsets import IdSet
from ldpsim.simulator.session.network import (
    Network,
    class_columns,
    completion_times,
    compute_seconds,
    draw_classes,
    draw_devices,
    wire_bytes,
)
from ldpsim.simulator.session.piecewise import Piecewise
from ldpsim.simulator.session.roundend import percentiles, round_end, sample_stride

#: agents per pass of a round's close over its reporters
PASS = 1 << 20


#: agents before a frame's first, none of whom reported yet, whose bytes it fills at most
#: (``StreamedTimes.arrived``: the offline agents between two frames join their runs)
REACH = 64


def _filled(ids: np.ndarray, values: np.ndarray, keep: np.ndarray | None = None,
            a: int | None = None, b: int | None = None) -> np.ndarray:
    """The values of agents ``[a, b)`` (default ``[ids[0], ids[-1] + 1)``, which it holds):
    each of ``ids`` (sorted, distinct) its own, each other agent the value of the last of
    ``ids`` before it (a run goes on over it; the first's before it), or, where ``keep`` (their
    values as they are, NaN: none) has one, that one."""
    a = int(ids[0]) if a is None else a
    b = int(ids[-1]) + 1 if b is None else b
    rows = ids - a
    at = np.zeros(b - a, dtype=np.int64)
    at[rows] = np.arange(len(ids))
    np.maximum.accumulate(at, out=at)
    out = values.astype(np.float64)[at]
    if keep is not None:
        have = ~np.isnan(keep)
        out[have] = keep[have]
    return out


class StreamedTimes:
    """The virtual time of one streamed round (see the module docstring).

    Parameters
    ----------
    net : Network
        The run's network (its devices are never drawn whole).
    number : int
        The round's.
    agents : array-like
        The round's asked agents (sorted; an ``AgentRange`` or an array).
    numbers : int
        The numbers of one report (the schema's length: the calibrated compute cost).
    """

    def __init__(self, net: Network, number: int, agents: Any, numbers: int) -> None:
        self.net = net
        self.number = number
        self.agents = agents
        spec = net.model.spec
        self.cols = class_columns(spec)
        self.compute_s = compute_seconds(spec, number, numbers)
        #: the round's agents' ids span [lo, hi)
        self.lo, self.hi = (int(agents[0]), int(agents[-1]) + 1) if len(agents) else (0, 0)
        #: the envelope bytes sent to and received from each agent, as runs (made with the
        #: first size, which every agent without an envelope keeps: no run of zeros between
        #: two batches' agents)
        self.down: Piecewise | None = None
        self.up: Piecewise | None = None
        self.wire_down = 0  # the queries' bytes on the wire (the broadcast's apart)
        self.wire_up = 0
        self.late = 0
        self.offline = 0  # asked agents found offline (``ask``)
        self.last = -math.inf  # the latest arrival of a stored report

    def online(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` are online (None: every one)."""
        up = self._draw_online(ids)
        return None if up is None or up.all() else up

    def ask(self, ids: np.ndarray) -> np.ndarray | None:
        """``online`` of a query batch about to go out (or never to: the round's close),
        its offline agents counted (``offline``)."""
        up = self.online(ids)
        if up is not None:
            self.offline += int(len(up) - up.sum())
        return up

    def _draw_online(self, ids: np.ndarray) -> np.ndarray | None:
        net = self.net
        if net.availability is None or not len(ids):
            return None
        t0 = time.perf_counter()
        up = net.online_of(ids, self.number, draw_classes(net.model.spec, net.model.keys[0],
                                                          ids, self.cols))
        net.elapsed += time.perf_counter() - t0
        return up

    def sent(self, ids: np.ndarray, sizes: np.ndarray, a: int, b: int) -> None:
        """Query envelopes of ``sizes`` bytes went to the (online) agents ``ids`` of a batch
        of agents ``[a, b)`` (its offline ones take their neighbours' sizes)."""
        if not len(ids):
            return
        self.wire_down += int(np.sum(wire_bytes(sizes)))
        if self.down is None:
            self.down = Piecewise(self.lo, self.hi, float(sizes[0]))
        self.down.assign(a, b, _filled(ids, sizes, a=a, b=b))

    def times(self, ids: np.ndarray, up: np.ndarray, broadcast: int) -> np.ndarray:
        """The arrival times of agents ``ids`` (sorted) whose reports took ``up`` bytes."""
        net = self.net
        dev = draw_devices(net.model.spec, net.model.keys[0], ids, self.cols)
        down = self.down.take(ids).astype(np.int32)
        return completion_times(dev, slice(0, len(ids)), down, broadcast,
                                np.asarray(up, dtype=np.int32), self.compute_s)

    def arrived(self, ids: np.ndarray, sizes: np.ndarray, broadcast: int,
                reported: IdSet) -> np.ndarray | None:
        """Valid reports of ``sizes`` bytes came from agents ``ids`` (sorted; already in
        ``reported``): the mask of those on time (None: every one), the late ones counted."""
        if not len(ids):
            return None
        t0 = time.perf_counter()
        b = int(ids[-1]) + 1
        if self.up is None:
            self.up = Piecewise(self.lo, self.hi, float(sizes[0]))
        # from after the last agent before them that reported (at most ``REACH`` back)
        a = max(self.lo, int(ids[0]) - REACH)
        before = reported.members(a, int(ids[0]))
        a = int(before[-1]) + 1 if len(before) else a
        keep = None
        if b - a > len(ids):  # agents between them that reported before keep their sizes
            others = reported.members(a, b)
            if len(others) > len(ids):
                keep = np.full(b - a, np.nan)
                earlier = np.setdiff1d(others, ids, assume_unique=True)
                keep[earlier - a] = self.up.take(earlier)
        self.up.assign(a, b, _filled(ids, sizes, keep, a, b))
        self.wire_up += int(np.sum(wire_bytes(sizes)))
        t = self.times(ids, sizes, broadcast)
        self.last = max(self.last, float(t.max()))
        deadline = self.net.model.deadline
        on_time = None
        if deadline is not None:
            late = t > deadline
            if late.any():
                self.late += int(late.sum())
                on_time = ~late
        self.net.elapsed += time.perf_counter() - t0
        return on_time

    def close(self, reported: IdSet, got: int, answered: int, broadcast: int
              ) -> dict[str, Any]:
        """The round's close in virtual time (``Network.close_round``'s numbers): ``got``
        valid reports stored (``reported``; the late among them), ``answered`` asked agents
        that reported, sent an invalid report or refused, the broadcast's envelope
        ``broadcast`` bytes (0: none); every batch asked (``ask``). Returns the round's
        virtual entries of ``comm.per_round``."""
        t0 = time.perf_counter()
        net, model, asked = self.net, self.net.model, len(self.agents)
        n_online = asked - self.offline
        everyone = got == asked or answered >= n_online
        pct = percentiles(self._sample(reported, got, broadcast))
        last = None if got == 0 or math.isinf(self.last) else self.last
        quota_rank = math.ceil(model.quota * asked - 1e-9)
        quota_time = last if 0 < quota_rank <= got else None  # quota 1: rank = asked >= got
        end = round_end(last, quota_time, everyone, model.deadline)
        record = net.closed(asked, n_online, self.late, end, pct,
                            self.wire_down + n_online * wire_bytes(broadcast), self.wire_up)
        net.elapsed += time.perf_counter() - t0
        return record

    def _sample(self, reported: IdSet, got: int, broadcast: int) -> np.ndarray:
        """The arrival times of every ``sample_stride``-th reporter in agent order (of
        ``got``), computed again: the sample a whole round's percentiles read."""
        if not got:
            return np.zeros(0)
        step = sample_stride(got)
        lo, hi = self.lo, self.hi
        picked, rank = [], 0
        for a in range(lo, hi, PASS):
            ids = reported.members(a, min(hi, a + PASS))
            first = (-rank) % step  # the first of these whose rank is a multiple of step
            picked.append(ids[first::step].copy())  # (not a view: the chunk goes)
            rank += len(ids)
        ids = np.concatenate(picked)
        return self.times(ids, self.up.take(ids), broadcast)

    def online_parts(self, a: int, b: int) -> tuple[int, Any]:
        """The online agents of ``[a, b)`` (a pool's share of the round, which a broadcast
        reaches): how many, and their ids a pass at a time (drawn again)."""
        count = 0
        for s in range(a, b, PASS):
            ids = np.arange(s, min(b, s + PASS), dtype=np.int64)
            up = self._draw_online(ids)
            count += len(ids) if up is None else int(up.sum())

        def parts() -> Any:
            for s in range(a, b, PASS):
                ids = np.arange(s, min(b, s + PASS), dtype=np.int64)
                up = self._draw_online(ids)
                yield ids if up is None else ids[up]
        return count, parts()
