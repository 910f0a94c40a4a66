"""The privacy odometer each pool keeps for its agents.

Agents enforce their own budget: whatever the curator asks, an agent answers each round at
most once and never past its ε (``Bound.agent_budget``), charging each round's spend as the
run's bound mechanisms compose it (``Bound.round_epsilon``), and never past its lifetime
budget on the run's data set, when its pool has one (``policy.Ledger``,
``AgentPolicy.lifetime_epsilon``). A round or batch that would break a rule is refused for
the agents concerned; the pool tells the curator with an ERROR of code "budget".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.common import MAX_REASON, MAX_ROUNDS, span
from ldpsim.simulator.session.piecewise import Piecewise, Span


class Odometer:
    """What each agent of a pool's block ``[start, stop)`` has spent, and which rounds it
    has answered: runs of agents alike (``piecewise``), as a run's query batches charge them,
    each agent's value the same bits as an array's.

    Parameters
    ----------
    bound
        The run's bound protocol (``protocols.base.Bound``): each round's ε is its
        ``round_epsilon``, composed from the mechanisms it bound once for the run.
    budget : float
        Every agent's total ε in the run.
    start, stop : int
        The pool's agents.
    lifetime : Span, optional
        The agents' spending on the run's data set over the pool's lifetime (a window of
        ``policy.Ledger``'s store, ``Ledger.block``): charged with every round's spend.
    lifetime_cap : float, optional
        The most an agent may spend on the data set over the pool's lifetime.
    """

    def __init__(self, bound: Any, budget: float,
                 start: int, stop: int, lifetime: Span | None = None,
                 lifetime_cap: float | None = None) -> None:
        self.bound = bound
        self.budget = budget
        self.start = start
        self.stop = stop
        self._spent = Piecewise(start, stop, 0.0)
        self.lifetime = lifetime
        self.lifetime_cap = lifetime_cap
        self._answered: dict[int, Piecewise] = {}
        self.round_eps: dict[int, float] = {}

    @property
    def spent(self) -> Span:
        """What each agent has spent in this run (indexed from the block's first agent)."""
        return Span(self._spent)

    @property
    def answered(self) -> dict[int, Span]:
        """Per round answered so far: which agents have answered it."""
        return {r: Span(s) for r, s in self._answered.items()}

    def admit(self, rnd: int, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` may answer round ``rnd``: not answered in this round yet (nor
        earlier in this batch), and within the agent's budget after this round's spend. Spends
        it for them; returns None when all may."""
        eps = self.round_eps.get(rnd)
        if eps is None:
            eps = float(self.bound.round_epsilon(rnd))
            if len(self.round_eps) < MAX_ROUNDS:
                self.round_eps[rnd] = eps
        seen = self._answered.get(rnd)
        if not 0 <= eps < math.inf or (seen is None and len(self._answered) >= MAX_ROUNDS):
            return np.zeros(len(ids), dtype=bool)
        limit = self.budget * (1 + 1e-9) + 1e-12
        life = None if self.lifetime is None or self.lifetime_cap is None else self.lifetime
        cap = None if life is None else self.lifetime_cap * (1 + 1e-9) + 1e-12
        at = span(ids)
        if isinstance(at, slice) and (seen is None or not seen.any_in(at.start, at.stop)) \
                and self._spent.max_in(at.start, at.stop) + eps <= limit \
                and (life is None or life.store.max_in(at.start, at.stop) + eps <= cap):
            ok = None  # the common case: a range of agents, all may answer
        else:
            ok = np.zeros(len(ids), dtype=bool)
            ok[np.unique(ids, return_index=True)[1]] = True  # first occurrence in the batch
            if seen is not None:
                ok &= ~seen.take(ids)
            ok &= self._spent.take(ids) + eps <= limit
            if life is not None:
                ok &= life.store.take(ids) + eps <= cap
            if not ok.any():
                return ok
            at = ids[ok]
        if seen is None:
            seen = self._answered[rnd] = Piecewise(self.start, self.stop, False, bool)
        for store, op, value in ((seen, "set", True), (self._spent, "add", eps),
                                 (None if self.lifetime is None else self.lifetime.store,
                                  "add", eps)):
            if store is None:
                continue
            if isinstance(at, slice):
                store.update(at.start, at.stop, op, value)
            else:
                store.update_ids(at, op, value)
        return ok


def refused_batches(ids: np.ndarray, ok: np.ndarray, firsts: list[int]
                    ) -> list[tuple[int, np.ndarray]]:
    """The agents of ``ids`` the odometer refused (``ok`` False, from ``Odometer.admit``), by
    query batch: (batch, its refused agents) for each batch with any (``firsts``: the first
    agent of each batch after the first, when ``ids`` joins several)."""
    cuts = [0, *np.searchsorted(ids, firsts).tolist(), len(ids)]
    out = []
    for b, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        bad = ids[lo:hi][~ok[lo:hi]]
        if len(bad):
            out.append((b, bad))
    return out


def refusal_frame(run: int, rnd: int, bad: np.ndarray, why: str | None,
                  budget: float | None, lifetime_epsilon: float | None) -> bytes:
    """The ERROR (code "budget") telling the curator that agents ``bad`` refuse round
    ``rnd``: ``why`` (the round's queries are not the protocol's:
    ``Protocol.query_refusal``), or else their odometer's refusal (the run's ``budget``, and
    the pool's ``lifetime_epsilon`` on the data set, if any)."""
    if why is not None:
        return wire.encode(wire.ERROR, run, rnd, wire.NO_AGENT, {
            "error": f"{len(bad)} agents refuse round {rnd}: {why}"[:MAX_REASON],
            "code": "budget", "agents": bad})
    return wire.encode(wire.ERROR, run, rnd, wire.NO_AGENT, {
        "error": f"privacy budget: {len(bad)} agents refuse round {rnd} (answered it "
                 f"already, or it would take them past epsilon = {budget:g}"
                 + ("" if lifetime_epsilon is None else
                    f" in the run or {lifetime_epsilon:g} on the data set over "
                    "the pool's lifetime") + ")",
        "code": "budget", "agents": bad})
