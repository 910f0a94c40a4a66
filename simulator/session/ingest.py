"""Ingest: decoding a frame's reports and deciding which of them count.

Two readers give the same reports for the same bytes:

* ``EnvelopeReader`` is the reference. It reads a frame envelope by envelope with the
  reference codec (``wire.iter_frame``), hands every envelope that is not a well-formed report
  of this round back to the curator one at a time, and gathers the reports into validated
  ``Reports`` chunks of at most ``REPORT_CHUNK`` (so a large hostile frame never exists as
  Python objects all at once).
* ``decode_reports`` is the accelerator in front of it. It answers only for a frame made of
  nothing but well-formed, in-domain reports of this round: first by matching the frame byte
  for byte against the canonical encoding of a query batch the pool was sent
  (``wire_numpy_read.match_prefix``: no per-envelope decoding at all), then by decoding the
  frame in one C call. Anything else, valid or not, makes it return None and the reference reader
  decides. ``tests/simulator/test_ingest.py`` checks that whenever it answers, it answers
  what the reference reader reads.

Before either, ``frame_refusal`` and ``checked_envelope`` say why a frame or an envelope is
refused whatever it holds (its size, its form). ``screen`` then checks a batch of reports
against the round (hosted by the sending pool,
asked, not yet reported, within the plan's per-agent bound) and says why each rejected one is
rejected. Nothing here changes a round; ``rounds.Round`` stores what ``screen`` accepts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from ldpsim.protocols.base import ReportSchema
from ldpsim.protocols.queries import RowQueries
from ldpsim.simulator.codec import wire, wire_numpy, wire_numpy_read
from ldpsim.simulator.session.common import span

#: Reports decoded before they are checked and stored, on the reference path (bounds the
#: memory one large frame can take as Python objects).
REPORT_CHUNK = 4096
#: Frames up to this size may be decoded whole by the one-call accelerator.
FAST_DECODE_BYTES = 4 << 20


def frame_refusal(size: int, registered: bool, max_frame_bytes: int, max_envelope_bytes: int
                  ) -> str | None:
    """Why a frame of ``size`` bytes is refused unread, or None: over the frame limit, or,
    from a peer that is not a ``registered`` pool, over one envelope's (such a peer can only
    say it is ready or register: one envelope)."""
    if size > max_frame_bytes:
        return f"oversized frame: {size} bytes > limit {max_frame_bytes}"
    if not registered and size > max_envelope_bytes:
        return (f"oversized frame from an unregistered peer: {size} bytes > "
                f"{max_envelope_bytes}")
    return None


def checked_envelope(obj: Any, size: int, max_envelope_bytes: int
                     ) -> tuple[wire.Envelope | None, str | None]:
    """The envelope ``obj`` (of ``size`` bytes) checked (``wire.check_envelope``) and within
    the envelope limit; and why it is refused, or None."""
    try:
        env = wire.check_envelope(obj, size)
    except wire.WireError as e:
        return None, str(e)
    if size > max_envelope_bytes:
        return env, f"envelope of {size} bytes > limit {max_envelope_bytes}"
    return env, None


@dataclass(frozen=True)
class Expected:
    """What a report frame must be for the current round."""

    run: int
    round: int
    n: int  # agent ids are in [0, n)
    schema: ReportSchema
    max_frame_bytes: int
    max_envelope_bytes: int


@dataclass
class Reports:
    """Decoded reports: the agents, their values (rows of the schema's dtype; rows of invalid
    payloads are zero), which are in the schema's domain, and each envelope's size."""

    agents: np.ndarray  # int64
    values: np.ndarray
    ok: np.ndarray  # bool: payload in the schema's domain
    sizes: np.ndarray  # int64: bytes of each envelope
    #: the raw payloads (to explain a rejection); None when every one is in the domain
    payloads: list[Any] | None = None
    #: the query batch these reports answer, as (pending key, how many of its agents): its
    #: agents are hosted by the sender, asked, sorted and distinct by construction
    answers: tuple[tuple[bytes, int], int] | None = None


def is_report(obj: Any, run: int, rno: int | None, n: int) -> bool:
    """A well-formed REPORT envelope for this run and round from an agent id in [0, n)
    (fields checked, payload not). Types are checked before values: a peer's ndarray compared
    with ``==`` is an array, not a bool."""
    if type(obj) is not list or len(obj) != 6:
        return False
    v, k, r, rr, a = obj[0], obj[1], obj[2], obj[3], obj[4]
    return (type(v) is int and v == wire.VERSION and type(k) is int and k == wire.REPORT
            and type(r) is int and r == run and type(rr) is int and rr == rno
            and type(a) is int and 0 <= a < n)


def validated(agents: list[int], payloads: list[Any], sizes: list[int],
              schema: ReportSchema) -> Reports:
    """Reports of ``agents`` with these payloads and envelope sizes, checked against
    ``schema``."""
    ok, values = schema.validate(payloads)
    return Reports(np.asarray(agents, dtype=np.int64), values, ok,
                   np.asarray(sizes, dtype=np.int64), payloads)


class EnvelopeReader:
    """The reference reader of one frame (see the module docstring).

    Iterating yields, in the frame's order, every envelope that is not a report of this round
    as ``(object, size)`` and every full chunk of reports as ``Reports``; ``rest()`` gives the
    reports gathered but not yet yielded (call it after the loop, also when it stopped early
    or ``wire.WireError`` ended it). ``expected`` is None between rounds and ``registered``
    False for a peer without a slot: then every envelope is yielded as it is.
    """

    def __init__(self, frame: bytes, expected: Expected | None, registered: bool,
                 max_frame_bytes: int, max_envelope_bytes: int) -> None:
        self.frame = frame
        self.expected = expected if registered else None
        self.max_frame_bytes = max_frame_bytes
        self.max_envelope_bytes = max_envelope_bytes
        self._agents: list[int] = []
        self._payloads: list[Any] = []
        self._sizes: list[int] = []

    def __iter__(self) -> Iterator[Reports | tuple[Any, int]]:
        exp, max_env = self.expected, self.max_envelope_bytes
        run, rno, n = (exp.run, exp.round, exp.n) if exp is not None else (0, None, 0)
        for obj, size in wire.iter_frame(self.frame, self.max_frame_bytes):
            if exp is not None and is_report(obj, run, rno, n) and size <= max_env:
                self._agents.append(obj[4])
                self._payloads.append(obj[5])
                self._sizes.append(size)
                if len(self._agents) >= REPORT_CHUNK:
                    yield self.rest()
            else:
                yield obj, size

    def rest(self) -> Reports | None:
        """The reports gathered since the last chunk, validated (None if there are none)."""
        if not self._agents:
            return None
        out = validated(self._agents, self._payloads, self._sizes, self.expected.schema)
        self._agents, self._payloads, self._sizes = [], [], []
        return out


def decode_reports(frame: bytes, pending: dict[tuple[bytes, int], np.ndarray],
                   expected: Expected, peer: bytes) -> Reports | None:
    """The reports of a frame that holds only in-domain reports of this round, or None.

    ``pending`` maps (peer, first agent) to the agents of each query batch sent and not yet
    answered; a frame that answers one of ``peer``'s (or a prefix of it, when the pool split
    a large reply) canonically is read without decoding envelopes. None means: read it with
    ``EnvelopeReader``. Never raises on a peer's input.
    """
    out = _match_sent(frame, pending, expected, peer)
    if out is None and len(frame) <= FAST_DECODE_BYTES:
        out = _decode_whole(frame, expected)
    return out


def _match_sent(frame: bytes, pending: dict[tuple[bytes, int], np.ndarray],
                expected: Expected, peer: bytes) -> Reports | None:
    """Fastest path: the frame is byte for byte the canonical encoding of the reports of a
    query batch ``peer`` was sent, or of its first agents (a pool splits large replies)
    (``wire_numpy_read.match_prefix``), so its payloads are read as one array. The domain and
    size limits are checked as on every path."""
    run, rno, schema = expected.run, expected.round, expected.schema
    first = wire_numpy_read.first_agent(frame, wire.REPORT)
    if first is None or first[0] != run or first[1] != rno:
        return None
    sent = pending.get((peer, first[2]))
    if sent is None:
        return None
    got = wire_numpy_read.match_prefix(frame, wire.REPORT, run, rno, sent, schema.length,
                                       schema.dtype)
    if got is None:
        return None
    values, sizes = got
    if not schema.all_inside(values) or sizes.max() > expected.max_envelope_bytes:
        return None
    ids = sent[:len(sizes)]
    return Reports(ids, values, np.ones(len(ids), dtype=bool), sizes, None,
                   ((peer, first[2]), len(ids)))


def _decode_whole(frame: bytes, expected: Expected) -> Reports | None:
    """A frame made only of well-formed, in-domain reports of this round, decoded object by
    object and given up at the first that is no report of the round (a frame of nils builds
    nothing: ``tests/simulator/session/test_attacks.py``); each envelope's size is recovered
    as its shortest encoding (valid because the sizes must add up to the frame's length)."""
    run, rno, n = expected.run, expected.round, expected.n
    objs = []
    try:
        for o in wire.objects(frame, expected.max_frame_bytes):
            if not is_report(o, run, rno, n):
                return None
            objs.append(o)
    except wire.WireError:
        return None
    if not objs:
        return None
    agents = np.fromiter((o[4] for o in objs), dtype=np.int64, count=len(objs))
    payloads = [o[5] for o in objs]
    ok, values = expected.schema.validate(payloads)
    if not ok.all():
        return None
    sizes = wire_numpy.minimal_report_sizes(run, rno, agents, values, expected.schema.dtype)
    if int(sizes.sum()) != len(frame) or sizes.max() > expected.max_envelope_bytes:
        return None
    return Reports(agents, values, ok, sizes, payloads)


@dataclass
class Screened:
    """What ``screen`` decided about a batch of reports."""

    #: reports to store: ``store_ids`` (sorted agent ids), where (the ids or the same range as
    #: a slice), their values and sizes
    store_ids: np.ndarray
    store_at: slice | np.ndarray
    store_values: np.ndarray
    store_sizes: np.ndarray
    #: asked agents whose first report of the round is out of domain (sorted, distinct)
    invalid: np.ndarray
    #: (agent, reason, envelope size) of every report that does not count, in batch order
    rejects: list[tuple[int, str, int]]

    def ahead_of(self, cursor: int) -> Screened:
        """The same, storing only the reports of agents at or above ``cursor`` (a round
        absorbed in agent order: ``inorder``)."""
        keep = self.store_ids >= cursor
        ids = self.store_ids[keep]
        return replace(self, store_ids=ids, store_at=ids, store_values=self.store_values[keep],
                       store_sizes=self.store_sizes[keep])


def _rows_of(high: Any, rows: np.ndarray) -> np.ndarray:
    """The plan's ``report_high`` at ``rows``: a ``RowQueries`` (bounds drawn per agent, as
    a streamed round's queries) draws only the rows asked for."""
    if isinstance(high, RowQueries):
        at, back = np.unique(rows, return_inverse=True)
        return high.take(at)[back]
    return np.asarray(high)[rows]


def screen(reports: Reports, start: int, stop: int, pool_index: int, asked: np.ndarray,
           reported: np.ndarray, plan: Any, rno: int) -> Screened:
    """Check ``reports`` from the pool hosting agents ``[start, stop)`` against the round:
    ``asked``/``reported`` (bool per agent) and the plan's ``report_high`` bound.

    A report counts when its agent is hosted by the sender, was asked, has not reported yet in
    this round (the first of duplicates in one batch), and its payload is in the domain.
    """
    ids, sz = reports.agents, reports.sizes
    high = plan.report_high
    ok, values = reports.ok, reports.values
    empty = np.zeros(0, dtype=np.int64)
    if reports.answers is not None:  # a prefix of a batch sent to this pool
        at = span(ids)
        fresh = ~reported[at]
        if high is None and isinstance(at, slice) and fresh.all():  # the common case
            return Screened(ids, at, values, sz, empty, [])
        inside = asked_ = np.ones(len(ids), dtype=bool)
    else:
        at = None
        inside = (ids >= start) & (ids < stop)
        safe = np.where(inside, ids, 0)
        asked_ = inside & asked[safe]
        fresh = asked_ & ~reported[safe]
        # duplicates inside this batch: keep the first occurrence only
        _, first = np.unique(ids, return_index=True)
        first_mask = np.zeros(len(ids), dtype=bool)
        first_mask[first] = True
        fresh &= first_mask
    above = np.zeros(len(ids), dtype=bool)
    if high is not None and len(ids):
        rows = np.minimum(np.searchsorted(plan.agents, ids), len(plan.agents) - 1)
        bound = _rows_of(high, rows)
        bound = bound[:, None] if bound.ndim == 1 else bound
        above = ok & (values > bound).any(axis=1)
        ok = ok & ~above
    good = fresh & ok
    invalid = fresh & ~ok
    rejects = []
    for i in np.flatnonzero(~good):
        a = int(ids[i])
        if not inside[i]:
            why = f"unknown agent {a}: not hosted by pool {pool_index}"
        elif not asked_[i]:
            why = f"agent {a} was not asked in round {rno}"
        elif not fresh[i]:
            why = f"duplicate report from agent {a} in round {rno}"
        elif above[i]:
            why = (f"out-of-domain report from agent {a}: {values[i].tolist()[:8]} above "
                   f"this agent's bound {np.ravel(bound[i]).tolist()[:8]}")
        else:
            why = f"out-of-domain report from agent {a}: {plan.schema.reason(reports.payloads[i])}"
        rejects.append((a, why, int(sz[i])))
    bad = np.unique(ids[invalid]) if invalid.any() else empty
    if not good.any():
        return Screened(empty, empty, values[:0], sz[:0], bad, rejects)
    if at is not None and good.all():
        return Screened(ids, at, values, sz, bad, rejects)
    gi = ids[good]
    return Screened(gi, gi, values[good], sz[good], bad, rejects)
