"""Rejections: every message the curator refuses is counted, recorded and answered.

O(1) whatever the history: a per-peer reply counter (bounded, see ``MAX_PEERS``), a bounded
list of records, and reasons cut to ``MAX_REASON`` characters, so a flood of garbage costs the
curator what a few messages do.
"""

from __future__ import annotations

from typing import Any

from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.common import MAX_REASON, Bounded, Limits


class Rejections:
    """The rejections of one run: ``count`` (all of them) and ``records`` (the first
    ``limits.max_rejections``), with at most ``limits.max_error_replies`` ERROR replies per
    peer."""

    def __init__(self, run: int, limits: Limits) -> None:
        self.run = run
        self.limits = limits
        self.count = 0
        self.records: list[dict[str, Any]] = []
        self.replies: Bounded = Bounded()  # ERROR envelopes sent per peer

    def reject(self, peer: bytes, reason: str, env: wire.Envelope | None = None,
               code: str | None = None) -> bytes | None:
        """Count and record a rejected message; the ERROR frame to answer ``peer`` with, or
        None once it has had its share."""
        self.count += 1
        if len(reason) > MAX_REASON:
            reason = reason[:MAX_REASON] + "..."
        if len(self.records) < self.limits.max_rejections:
            rec = {"peer": peer[:16].hex(), "reason": reason}
            if env is not None:
                rec.update(type=wire.TYPE_NAMES.get(env.kind, env.kind), run=env.run,
                           round=env.round, agent=env.agent)
            self.records.append(rec)
        sent = self.replies.get(peer, 0)
        if sent >= self.limits.max_error_replies:
            return None
        self.replies[peer] = sent + 1
        agent = env.agent if env is not None else wire.NO_AGENT
        rnd = env.round if env is not None else wire.SETUP_ROUND
        payload = {"error": reason} if code is None else {"error": reason, "code": code}
        return wire.encode(wire.ERROR, self.run, rnd, agent, payload)
