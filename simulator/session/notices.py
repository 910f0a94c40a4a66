"""A pool's messages to the curator other than reports and registrations: ERROR, DONE, DISCLOSE.

Each is taken by one function that checks it, makes its change and says what the curator
session does next (``Verdict``): nothing more, move its inactivity deadline (progress), reject
the message with a reason, or fail the run.

* An ERROR from a registered pool is its agents' refusal of a round's queries (code "budget":
  ``RoundLoop.refuse``) or its crash, which fails the run (``crash``); from a peer that is not
  registered, it counts only as a pool's authenticated refusal of the run's set-up
  (``Registration.refusal``), which fails the run too.
* A DONE, once the output is released, holds a pool's statistics (``accounting.check_stats``).
* A DISCLOSE is a colluder's row and coins, taken only from the pool that hosts it, when the
  curator colludes (``disclosure_refusal``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.accounting import CommStats, check_stats
from ldpsim.simulator.session.adversary import AdversaryView
from ldpsim.simulator.session.collusion import Coalition
from ldpsim.simulator.session.registration import PoolSlot, Registration


class Act(enum.Enum):
    """What the curator session does with a message taken."""

    NONE = "none"
    PROGRESS = "progress"  # the inactivity deadline moves
    REJECT = "reject"  # a counted rejection, with its reason
    FAIL = "fail"  # the run fails, with its reason


#: what the session does, and why (the rejection's or the failure's reason; "" otherwise)
Verdict = tuple[Act, str]


def take_error(pool: PoolSlot | None, env: wire.Envelope, registering: bool,
               registration: Registration,
               refuse: Callable[[PoolSlot, int, dict[str, Any]], bool]) -> Verdict:
    """An ERROR from ``pool`` (None: a peer that is not a registered pool; ``registering``:
    the run is still in its registrations; ``refuse``: ``RoundLoop.refuse``)."""
    p = env.payload if isinstance(env.payload, dict) else {}
    if pool is None and p.get("code") == "refused" and registering:
        why = registration.refusal(p)  # a pool's agents refuse the run: it ends here
        if why is not None:
            return Act.FAIL, why
    if pool is None:
        return Act.REJECT, "ERROR from an unregistered peer"
    if p.get("code") == "budget":  # the round stops waiting for the agents that refused
        return (Act.PROGRESS if refuse(pool, env.round, p) else Act.NONE), ""
    return Act.FAIL, crash(pool.index, p)


def take_done(pool: PoolSlot | None, env: wire.Envelope, done: bool) -> Verdict:
    """A DONE from ``pool`` (``done``: the output is released): its statistics, kept in
    ``pool.stats`` (an empty dict when they are not acceptable: answered, but not used)."""
    if pool is None or not done:
        return Act.REJECT, "unexpected DONE"
    why = check_stats(env.payload)
    if why is not None:
        pool.stats = {}
        return Act.REJECT, why
    pool.stats = env.payload
    return Act.PROGRESS, ""


def take_disclosure(pool: PoolSlot | None, env: wire.Envelope, colluders: Coalition | None,
                    curator_colludes: bool, comm: CommStats, view: AdversaryView) -> Verdict:
    """A DISCLOSE from ``pool``: the colluder's row and coins, into the adversary ``view``
    (its bytes counted in ``comm``)."""
    why = disclosure_refusal(pool, env, colluders, curator_colludes)
    if why is not None:
        return Act.REJECT, why
    comm.disclose_bytes += env.size
    agent = int(env.agent)
    comm.disclosed[agent] = comm.disclosed.get(agent, 0) + env.size
    view.disclosed(agent, env.payload)
    return Act.NONE, ""


def crash(index: int, payload: dict[str, Any]) -> str:
    """Why the run fails: pool ``index`` reported a crash (its ERROR's ``payload``: the error
    and its traceback, cut to size)."""
    error = payload.get("error", "?")
    trace = payload.get("traceback", "")
    error = error[:2000] if isinstance(error, str) else wire.quote(error)
    trace = trace[-20000:] if isinstance(trace, str) else ""
    return f"pool {index} failed: {error}\n{trace}"


def refused_agents(payload: dict[str, Any], start: int, stop: int) -> np.ndarray | None:
    """The agents a pool hosting ``[start, stop)`` says refuse a round (its ERROR's
    ``payload``), those of its block only; None if the payload names none readably."""
    agents = payload.get("agents")
    if not isinstance(agents, np.ndarray) or agents.ndim != 1 or agents.dtype.kind not in "iu":
        return None
    return agents[(agents >= start) & (agents < stop)].astype(np.int64)


def disclosure_refusal(pool: PoolSlot | None, env: wire.Envelope, colluders: Coalition | None,
                       curator_colludes: bool) -> str | None:
    """Why the curator does not take the DISCLOSE ``env`` from ``pool`` (its
    ``registration.PoolSlot``; None: not a registered pool), or None."""
    if pool is None or not pool.start <= env.agent < pool.stop:
        return f"unknown agent {env.agent} for this peer"
    if not curator_colludes or colluders is None or env.agent not in colluders:
        return f"agent {env.agent} is not in the coalition"
    if not isinstance(env.payload, dict) or "data" not in env.payload:
        return "DISCLOSE payload must hold data and coins"
    return None
