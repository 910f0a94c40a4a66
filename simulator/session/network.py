"""The deployment model: the network and devices between the curator and its agents, in
virtual time.

A scenario's ``[deployment]`` table (``simulator.scenario.deployment``) gives every agent a
*device class* (drawn by share, or replayed from a per-agent trace): a one-way link latency,
down- and upload bandwidths (each spread log-normally around the class's median), a device
speed and an availability. A run's ``DeploymentModel`` (built once from its configuration,
``deployment_model``) holds it, and its ``Network`` turns it into virtual time, computed and
never slept:

* **who is online.** In each round (or once per run, ``availability_per = "run"``) an agent
  is online with its class's availability. The curator sends no query to an offline agent: it
  is a dropout of the round (cause ``offline``) and spends nothing.
* **when an answer lands.** An online agent's answer arrives, after the round starts, at
  ``2 latency + 8 wire(down) / down_bps + compute / speed + 8 wire(up) / up_bps``: ``down`` the
  exact envelope bytes of its query (and the round's broadcast), ``up`` those of its report,
  ``wire`` adds the transport's headers (``wire_bytes``: a ZMTP frame header and a TCP/IPv4
  header per 1460-byte segment, as if each agent had a connection of its own), ``compute`` the
  protocol's calibrated cost of the round (``ldpsim bench --calibrate``, scaled by the report's
  numbers) -- never a live timing, so who is late is the same on every backend and machine.
* **through the curator's own link** (``curator_down_mbps``, ``curator_up_mbps``; unlimited
  by default, and then nothing changes): the curator sends the queries one after the other in
  agent order and receives the reports one at a time, and an answer lands no earlier than the
  curator's link lets it (``links``).
* **when the round ends.** At the earliest of: the deadline (``round_deadline_s``); the
  arrival that completes the quota (``quota`` of the asked agents); the last online agent's
  arrival (the curator knows who is connected). Answers after the end are dropouts (cause
  ``late``): they were computed and sent, and count in the bytes, but not in the aggregate.
  The next round starts when this one ends; the run's virtual wall time is their sum. The
  curator's own computing is not modelled (its wall and CPU time are measured, ``wall_s``).

Every draw comes from the network's own streams (``stream_key(seed, "network", ...)``),
keyed by agent id, so it is the same whatever the pool split and leaves every party's coins
untouched: with every agent online and nobody late, a run's output is bit for bit the one
without a ``[deployment]`` table.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from ldpsim.protocols.accel import Accelerator
from ldpsim.protocols.rng import bits, uniform, uniform_of
from ldpsim.simulator.session.accounting import ZMTP_LONG, ZMTP_SHORT, ZMTP_SHORT_MAX
from ldpsim.simulator.session.common import span
from ldpsim.simulator.session.links import (  # noqa: F401 (normal_quantile: as before)
    link_factors,
    normal_quantile,
    query_departures,
    report_landings,
)
from ldpsim.simulator.session.roundend import order_stats, round_end

from ldpsim import environment

#: the compiled arrival times (``_netc.c``: one pass, the same bits), or numpy's chunks
ARRIVALS = Accelerator.load("arrivals", "ldpsim.simulator.session._netc", environment.NETWORK,
                            "simulator/session/_netc.c", needs=("arrival_times",))

#: the transport's headers besides the ZMTP frame's (``accounting.zmtp_bytes``): TCP/IPv4
#: headers (20 + 20 bytes) per segment of at most ``MSS`` payload bytes (``wire_bytes``)
TCPIP_HEADERS, MSS = 40, 1460
#: the class columns of a deployment (``simulator.scenario.deployment`` checks them)
COLUMNS = ("latency_ms", "down_mbps", "up_mbps", "spread", "speed", "availability")
#: every default of a deployment, the one place one is spelled (``scenario.deployment``'s table
#: reads them): no latency, no bandwidth limit (None), no spread, speed 1, always online, no
#: deadline, the whole round answering, availability drawn each round, and no limit on the
#: curator's own link either way
DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "latency_ms": 0.0, "down_mbps": None, "up_mbps": None, "spread": 0.0, "speed": 1.0,
    "availability": 1.0, "round_deadline_s": None, "quota": 1.0, "availability_per": "round",
    "curator_down_mbps": None, "curator_up_mbps": None})
#: the stream round of the device draws (fixed for a run; availability uses the round's)
DEVICE_ROUND = 0


def wire_bytes(envelope: np.ndarray | int) -> np.ndarray | int:
    """The bytes an envelope of ``envelope`` bytes takes on the wire: with its ZMTP frame
    header and one TCP/IPv4 header per ``MSS`` bytes (0 stays 0: nothing is sent)."""
    e = np.asarray(envelope, dtype=np.int64)
    framed = e + np.where(e > ZMTP_SHORT_MAX, ZMTP_LONG, ZMTP_SHORT)  # as zmtp_bytes
    out = np.where(e > 0, framed + TCPIP_HEADERS * -(-framed // MSS), 0)
    return int(out) if out.ndim == 0 else out


#: elements per pass of the arrival times' numpy path (its scratch arrays stay in cache)
CHUNK = 1 << 15


@dataclass(frozen=True)
class Devices:
    """Every agent's device (agent ids 0 .. n - 1), held compactly: its class (``cls``) and
    its link's factor (``factors``, exp(spread z) of its class's spread and its link quality
    z; None: every link at its class's median), and per class the one-way latency, the
    seconds each byte takes down and up (0: no limit), the compute time per second of the
    calibrated cost (1 / speed) and the availability (None: every agent always online). An
    agent's latency and seconds per byte are its class's times its factor."""

    cls: np.ndarray
    factors: np.ndarray | None  # float64, one per agent
    latency: np.ndarray
    down_per_byte: np.ndarray
    up_per_byte: np.ndarray
    slowness: np.ndarray
    availability: np.ndarray | None

    def factor(self, at: slice | np.ndarray) -> np.ndarray | None:
        """The link factors of the agents ``at`` selects (None: every one 1)."""
        return None if self.factors is None else self.factors[at]

    @property
    def latency_s(self) -> np.ndarray:
        """Every agent's one-way latency in seconds: its class's times its factor."""
        out = np.take(self.latency, self.cls)
        f = self.factor(slice(None))
        if f is not None:
            out *= f
        return out


def class_columns(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The device classes of a deployment ``spec`` (``RunSpec.deployment``): the trace's
    columns (``classes``), or one class; a number the scenario sets for a column
    (``latency_ms``, ...) replaces it in every class. None (a bandwidth) means no limit."""
    classes = spec.get("classes") or {"share": [1.0]}
    rows = len(classes["share"])
    out = {"share": np.asarray(classes["share"], dtype=np.float64)}
    for col in COLUMNS:
        given = spec.get(col, classes.get(col))
        if given is None or not isinstance(given, list):
            given = [given] * rows
        none = math.inf if DEFAULTS[col] is None else DEFAULTS[col]  # None: no limit
        out[col] = np.array([none if v is None else v for v in given], dtype=np.float64)
    return out


def run_devices(spec: Mapping[str, Any], key: int, n: int) -> Devices:
    """The devices of agents 0 .. n - 1 (``draw_devices``), kept for the next runs in this
    process: the runs of a sweep that share a seed (one repetition's points: every deadline)
    share their devices, drawn once (read-only)."""
    fields = json.dumps([spec.get(k) for k in ("classes", "replay", *COLUMNS)], default=str)
    return _devices(fields, int(key), int(n))


@functools.lru_cache(maxsize=4)
def _devices(fields: str, key: int, n: int) -> Devices:
    classes, replay, *columns = json.loads(fields)
    spec = {"classes": classes, "replay": replay, **dict(zip(COLUMNS, columns, strict=True))}
    dev = draw_devices({k: v for k, v in spec.items() if v is not None}, key,
                       np.arange(n, dtype=np.int64))
    for a in (dev.cls, dev.factors):
        if a is not None:
            a.setflags(write=False)
    return dev


def availability_of(cols: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Each device class's availability, of a deployment's ``class_columns`` (None: every
    agent always online)."""
    avail = cols["availability"]
    return None if (avail >= 1.0).all() else avail


def draw_devices(spec: Mapping[str, Any], key: int, agents: np.ndarray,
                 cols: Mapping[str, np.ndarray] | None = None) -> Devices:
    """The devices of ``agents`` (ids) under ``spec``, from the first two 64-bit draws of
    each on the network's device stream ``key``: a class by share from the first's uniform
    (or agent id modulo the rows of a per-agent trace, ``replay``), and from the second a
    link quality z ~ N(0, 1) drawn from the distribution itself (``links.link_z``). The
    agent's latency is its class's median times exp(spread z), its bandwidths the medians
    divided by it (a poor link is poor every way). ``cols``: the deployment's
    ``class_columns``, when the caller has them."""
    cols = class_columns(spec) if cols is None else cols
    agents = np.asarray(agents, dtype=np.int64)
    spread = cols["spread"]
    cls = draw_classes(spec, key, agents, cols)
    factors = _link_factors(key, agents, spread, cls) if spread.any() else None
    return Devices(cls, factors, cols["latency_ms"] / 1e3,
                   8e-6 / cols["down_mbps"], 8e-6 / cols["up_mbps"],  # inf Mbit/s: 0 s/byte
                   1.0 / cols["speed"], availability_of(cols))


def draw_classes(spec: Mapping[str, Any], key: int, agents: np.ndarray,
                 cols: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The device class of each of ``agents`` (ids) under ``spec`` (``draw_devices``'s, from
    the first draw of each on the device stream ``key``): uint8, or uint16 past 255 classes.
    ``cols``: the deployment's ``class_columns``, when the caller has them."""
    cols = class_columns(spec) if cols is None else cols
    agents = np.asarray(agents, dtype=np.int64)
    k = len(cols["share"])
    small = np.uint8 if k < 256 else np.uint16  # a trace has at most 10,000 rows
    if spec.get("replay"):
        return (agents % k).astype(small)
    # the class whose share interval holds the draw's uniform (``rng.uniform_of``), compared
    # on the draw itself: u >= e exactly when b >= the threshold (a few comparisons beat a
    # search)
    b = bits(key, agents, DEVICE_ROUND, 1)
    edges = np.cumsum(cols["share"])
    edges /= edges[-1]
    cls = np.zeros(len(agents), dtype=small)
    for e in edges[:-1]:
        cls += b[:, 0] >= np.uint64(_draw_threshold(float(e)))
    return cls


def _link_factors(key: int, agents: np.ndarray, spread: np.ndarray, cls: np.ndarray
                  ) -> np.ndarray:
    """exp(spread z) of each agent: its class's ``spread`` and its link quality z
    (``links.link_factors`` of its second draw on the device stream ``key``)."""
    return link_factors(bits(key, agents, DEVICE_ROUND, 1, offset=1).reshape(-1), cls, spread)


def _draw_threshold(e: float) -> int:
    """The least 64-bit draw b whose uniform (``rng.uniform_of``: ``((b >> 11) + 0.5)
    2^-53``, rounded as floating point rounds it) is at least ``e`` in (0, 1): from the exact
    ``ceil(e 2^53 - 0.5) 2^11``, moved by whole steps of 2^11 until ``uniform_of`` agrees (it
    rounds the half away above 2^52, and is monotone)."""
    top = (1 << 64) - (1 << 11)
    t = min(max(math.ceil(e * 2.0 ** 53 - 0.5) << 11, 0), top)

    def at_least(b: int) -> bool:
        return bool(uniform_of(np.array([b], dtype=np.uint64))[0] >= e)

    while t > 0 and at_least(t - (1 << 11)):
        t -= 1 << 11
    while t < top and not at_least(t):
        t += 1 << 11
    return t


def compute_seconds(spec: Mapping[str, Any], rnd: int, numbers: int) -> float:
    """The calibrated compute cost of round ``rnd`` for one agent on a speed-1 device
    (``spec["compute"]``: seconds per agent of each calibrated round, and its report's
    numbers; later rounds take the last), scaled by the numbers of this round's report."""
    comp = spec.get("compute") or {}
    per_round = comp.get("round_s") or []
    if not per_round:
        return 0.0
    i = min(rnd, len(per_round) - 1)
    cal = (comp.get("numbers") or [0] * len(per_round))[i]
    return float(per_round[i]) * (numbers / cal if cal else 1.0)


def completion_times(dev: Devices, at: slice | np.ndarray, down: np.ndarray, broadcast: int,
                     up: np.ndarray, compute_s: float, out: np.ndarray | None = None,
                     totals: list[float] | None = None) -> np.ndarray:
    """Each answering agent's arrival time after the round starts (see the module docstring):
    ``at`` selects them in ``dev`` (a slice of agent ids or the ids), ``down``/``up`` their
    query and report envelopes' bytes (``wire_bytes`` adds the transport's headers),
    ``broadcast`` the round's broadcast envelope's (0: none), a message of its own. Written
    into ``out`` (at least as long), a cache-sized chunk at a time; ``totals`` (three numbers)
    gains the queries' and the reports' wire bytes, and its last holds the largest time."""
    n = len(down)
    out = np.empty(n) if out is None else out[:n]
    if ARRIVALS.module is not None and isinstance(at, slice) and down.dtype == np.int32 \
            and up.dtype == np.int32 and dev.cls.dtype in (np.uint8, np.uint16):
        sums = ARRIVALS.module.arrival_times(
            dev.cls[at], dev.cls.dtype == np.uint16, dev.factor(at), down, up,
            np.ascontiguousarray(dev.down_per_byte), np.ascontiguousarray(dev.up_per_byte),
            2.0 * dev.latency, compute_s * dev.slowness if compute_s else None,
            float(wire_bytes(broadcast)) if broadcast else 0.0, out)
        if totals is not None:
            totals[0] += sums[0]
            totals[1] += sums[1]
            totals[2] = max(totals[2], sums[2])
        return out
    tab_down, tab_up = _wire_table(down), _wire_table(up)
    extra = float(wire_bytes(broadcast)) if broadcast else 0.0
    # per class: 2 latency, the seconds per byte each way; an agent's are its class's times
    # its link factor, which multiplies the whole of its transfer time
    size = min(CHUNK, n)
    w, v = np.empty(size), np.empty(size)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        sel = slice(at.start + s, at.start + e) if isinstance(at, slice) else at[s:e]
        c = dev.cls[sel]
        o, ww, vv = out[s:e], w[:e - s], v[:e - s]
        _wire_into(tab_down, down[s:e], o)
        _wire_into(tab_up, up[s:e], vv)
        if totals is not None:
            totals[0] += float(o.sum())
            totals[1] += float(vv.sum())
        if extra:
            o += extra
        o *= np.take(dev.down_per_byte, c, out=ww)
        vv *= np.take(dev.up_per_byte, c, out=ww)
        o += vv
        o += np.take(2.0 * dev.latency, c, out=ww)
        f = dev.factor(sel)
        if f is not None:
            o *= f
        if compute_s:
            o += np.take(compute_s * dev.slowness, c, out=ww)
        if totals is not None:
            totals[2] = max(totals[2], float(o.max()))
    return out


def _wire_table(sizes: np.ndarray) -> np.ndarray | None:
    """``wire_bytes`` of 0 .. the largest of ``sizes`` (float64), when that is small (a
    round's envelopes take a few sizes); None: compute them one by one."""
    top = int(sizes.max()) if len(sizes) else 0
    return wire_bytes(np.arange(top + 1)).astype(np.float64) if top < 1 << 16 else None


def _wire_into(table: np.ndarray | None, sizes: np.ndarray, out: np.ndarray) -> None:
    if table is not None:
        np.take(table, sizes, out=out)
    else:
        out[...] = wire_bytes(sizes)


@dataclass(frozen=True)
class DeploymentModel:
    """A run's deployment model, built once from its configuration (``deployment_model``) and
    handed to the curator's session: the deployment (``RunSpec.deployment``), the network's
    device and availability stream keys, and the settings a round's close reads.
    ``network(n)`` gives the run's ``Network`` over n agents."""

    spec: Mapping[str, Any]
    keys: tuple[int, int]
    #: the round deadline in virtual seconds (None: none)
    deadline: float | None
    #: the share of the asked agents whose answers end a round
    quota: float
    #: availability drawn once per run (else each round)
    per_run: bool
    #: the curator's link: seconds per byte of what it sends (the queries and broadcasts)
    #: and of what it receives (the reports); 0: no limit (``links``)
    curator_down_s: float = 0.0
    curator_up_s: float = 0.0

    @classmethod
    def of(cls, spec: Mapping[str, Any], keys: tuple[int, int]) -> DeploymentModel:
        """The model of the deployment ``spec`` with the network's stream ``keys``."""
        return cls(spec=spec, keys=(int(keys[0]), int(keys[1])),
                   deadline=spec.get("round_deadline_s"),
                   quota=float(spec.get("quota", DEFAULTS["quota"])),
                   per_run=spec.get("availability_per", DEFAULTS["availability_per"]) == "run",
                   curator_down_s=_seconds_per_byte(spec.get("curator_down_mbps")),
                   curator_up_s=_seconds_per_byte(spec.get("curator_up_mbps")))

    @property
    def streams(self) -> bool:
        """Whether each answer's lateness follows from its own arrival alone (a report is
        late exactly when it lands after the deadline), so that a chunked run's rounds can
        stream (``streamnet``): the whole round answering (``quota`` 1) and no limit on the
        curator's own link (which queues every agent's traffic)."""
        return self.quota >= 1.0 and not self.curator_down_s and not self.curator_up_s

    def network(self, n: int, devices: bool = True) -> Network:
        """The network of a run of ``n`` agents under this model (``devices``: draw every
        agent's device now; else on first use, never in a streamed round)."""
        return Network(self, n, devices)


def _seconds_per_byte(mbps: float | None) -> float:
    """The seconds a byte takes on a link of ``mbps`` Mbit/s (None or inf: 0, no limit)."""
    return 0.0 if mbps is None or math.isinf(mbps) else 8e-6 / float(mbps)


def deployment_model(spec: Mapping[str, Any], keys: Any) -> DeploymentModel | None:
    """The deployment model of a run's configuration: its ``[deployment]`` (``spec``, empty
    without one: None) and the network's stream ``keys`` (``seeding.network_keys``; absent:
    (0, 0))."""
    return DeploymentModel.of(spec, tuple(keys or (0, 0))) if spec else None


@dataclass(frozen=True)
class RoundTraffic:
    """What a round's close (``Network.close_round``) reads of a round (``Round.traffic``).

    ``number`` the round's; ``agents`` its asked agents (the plan's, sorted); ``answered``
    the asked agents that answered (reported, sent an invalid report or refused); per row of
    ``agents``: ``reported`` (a valid report is stored), ``online`` (None: all were), ``down``
    and ``up`` (the bytes of the query envelope sent to the agent and of the report received
    from it, 0 where nothing was); ``broadcast`` the round's broadcast envelope (0: none),
    sent to every online agent; ``numbers`` the numbers of one report (the schema's length).
    """

    number: int
    agents: np.ndarray
    answered: int
    reported: np.ndarray
    online: np.ndarray | None
    down: np.ndarray
    broadcast: int
    up: np.ndarray
    numbers: int


class Network:
    """The network of one run as the curator simulates it (see the module docstring).

    Parameters
    ----------
    model : DeploymentModel
        The run's deployment model.
    n : int
        Agents of the run.
    devices : bool
        Draw every agent's device now (else on first use of ``devices``: a streamed round
        draws those of each batch instead, ``streamnet``).
    """

    def __init__(self, model: DeploymentModel, n: int, devices: bool = True) -> None:
        t0 = time.perf_counter()
        self.n = n
        self.model = model
        self._devices = run_devices(model.spec, model.keys[0], n) if devices else None
        self.clock = 0.0  # when the current round started (virtual seconds)
        self.asked = 0  # agents asked, summed over the rounds
        self.offline = 0
        self.late = 0
        self._sizes: tuple[np.ndarray, np.ndarray] | None = None
        self._times: np.ndarray | None = None  # a round's arrival times (reused)
        #: the seconds this model took in the run (timing.network_s): measured, never read
        #: by the model itself
        self.elapsed = time.perf_counter() - t0

    @property
    def devices(self) -> Devices:
        """Every agent's device (``run_devices``), drawn on first use."""
        if self._devices is None:
            t0 = time.perf_counter()
            self._devices = run_devices(self.model.spec, self.model.keys[0], self.n)
            self.elapsed += time.perf_counter() - t0
        return self._devices

    def sizes(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Two zeroed arrays of ``rows`` envelope sizes (down, up) for a round: one pair per
        run, reused by its rounds (a fresh array's pages cost more than zeroing them)."""
        have = self._sizes
        if have is None or len(have[0]) < rows:
            have = self._sizes = (np.zeros(rows, dtype=np.int32), np.zeros(rows, dtype=np.int32))
        down, up = have[0][:rows], have[1][:rows]
        down.fill(0)
        up.fill(0)
        return down, up

    def online(self, agents: np.ndarray, rnd: int) -> np.ndarray | None:
        """Which of ``agents`` are online in round ``rnd`` (a mask; None: every one)."""
        if self.availability is None or not len(agents):
            return None
        t0 = time.perf_counter()
        up = self.online_of(agents, rnd, self.devices.cls[span(agents)])
        self.elapsed += time.perf_counter() - t0
        return None if up.all() else up

    @functools.cached_property
    def availability(self) -> np.ndarray | None:
        """Each device class's availability (None: every agent always online)."""
        return availability_of(class_columns(self.model.spec))

    def online_of(self, agents: np.ndarray, rnd: int, cls: np.ndarray) -> np.ndarray:
        """Which of ``agents`` (of classes ``cls``) are online in round ``rnd``: a mask (the
        model has an availability below 1, ``availability``)."""
        m = self.model
        u = uniform(m.keys[1], agents, 0 if m.per_run else rnd, 1)[:, 0]
        return u < np.take(self.availability, cls)

    def close_round(self, rnd: RoundTraffic) -> tuple[np.ndarray | None, dict[str, Any]]:
        """End a round in virtual time: ``rnd`` is what it sent and received.

        Returns
        -------
        late : bool array or None
            Per row: a report that arrived after the round's end (left out of the aggregate);
            None: no report was late.
        record : dict
            The round's virtual entries of ``comm.per_round``.
        """
        t0 = time.perf_counter()
        agents, reported, online, model = rnd.agents, rnd.reported, rnd.online, self.model
        everyone_reported = bool(reported.all())
        if self._times is None or len(self._times) < len(agents):
            self._times = np.empty(len(agents))
        # every row's time (contiguous passes beat gathering the reporters'), then theirs
        wire = [0.0, 0.0, -math.inf]  # the bytes on the wire each way; the latest arrival
        every = completion_times(self.devices, span(agents), rnd.down, rnd.broadcast, rnd.up,
                                 compute_seconds(model.spec, rnd.number, rnd.numbers),
                                 self._times, wire)
        if model.curator_down_s or model.curator_up_s:
            wire[2] = self._through_curator(rnd, every)
        times = every if everyone_reported else every[reported]
        n_online = len(agents) if online is None else int(online.sum())
        everyone = everyone_reported or rnd.answered >= n_online
        pct, quota_time = order_stats(times, math.ceil(model.quota * len(agents) - 1e-9))
        last = wire[2] if everyone_reported else float(times.max()) if len(times) else None
        if last is not None and math.isinf(last):
            last = None
        end = round_end(last, quota_time, everyone, model.deadline)
        late = None
        n_late = 0
        if last is not None and last > end:
            late = every > end
            if not everyone_reported:
                late &= reported
            n_late = int(late.sum())
        record = self.closed(len(agents), n_online, n_late, end, pct,
                             round(wire[0]) + n_online * wire_bytes(rnd.broadcast),
                             round(wire[1]))
        self.elapsed += time.perf_counter() - t0
        return late, record

    def closed(self, asked: int, online: int, late: int, end: float,
               pct: list[float | None], wire_down: int, wire_up: int) -> dict[str, Any]:
        """A round's close (``close_round``, or a streamed round's, ``streamnet``): of its
        ``asked`` agents ``online`` were, ``late`` reports came after its ``end`` (virtual
        seconds after it started), ``pct`` its completion percentiles, ``wire_down`` and
        ``wire_up`` its bytes on the wire; the run's totals gain them. Returns the round's
        virtual entries of ``comm.per_round``."""
        record = {
            "virtual_start_s": self.clock, "virtual_s": end,
            "completion_p50_s": pct[0], "completion_p95_s": pct[1],
            "completion_p99_s": pct[2],
            "dropouts_offline": asked - online, "dropouts_late": late,
            "wire_bytes_down": wire_down, "wire_bytes_up": wire_up,
        }
        self.clock += end
        self.asked += asked
        self.offline += asked - online
        self.late += late
        return record

    def _through_curator(self, rnd: RoundTraffic, times: np.ndarray) -> float:
        """Shift the round's arrival ``times`` (per row, in place) by the curator's own link
        (``links``): each query leaves it in agent order, each report lands no faster than
        its link takes them. Returns the latest time (-inf: none)."""
        model, dev, at = self.model, self.devices, span(rnd.agents)
        if model.curator_down_s:
            sent = wire_bytes(rnd.down)
            if rnd.broadcast:  # to every online agent, a message of its own
                bc = wire_bytes(rnd.broadcast)
                sent += bc if rnd.online is None else np.where(rnd.online, bc, 0)
            # its own link's time for the query (``completion_times``'s first term)
            own = wire_bytes(rnd.down).astype(np.float64)
            if rnd.broadcast:
                own += float(wire_bytes(rnd.broadcast))
            own *= np.take(dev.down_per_byte, dev.cls[at])
            f = dev.factor(at)
            if f is not None:
                own *= f
            wait = query_departures(sent, model.curator_down_s)
            wait -= own
            np.maximum(wait, 0.0, out=wait)
            times += wait
        if model.curator_up_s:
            rows = np.flatnonzero(rnd.up > 0)
            times[rows] = report_landings(times[rows], wire_bytes(rnd.up[rows]),
                                          model.curator_up_s)
        return float(times.max()) if len(times) else -math.inf

    def summary(self) -> dict[str, Any]:
        """The run's virtual totals: its wall time, dropouts by cause, and the share of the
        asked agent-rounds that dropped out."""
        lost = self.offline + self.late
        return {"wall_s": self.clock, "dropouts_offline": self.offline,
                "dropouts_late": self.late,
                "dropout_rate": lost / self.asked if self.asked else 0.0}

