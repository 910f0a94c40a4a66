"""A pool's messages to the curator other than reports, read: ERROR, DISCLOSE.

An ERROR from a registered pool is either its agents' refusal of a round (code "budget":
``refused_agents``) or its crash, which fails the run (``crash``); a DISCLOSE is a colluder's
row and coins, taken only from the pool that hosts it, when the curator colludes
(``disclosure_refusal``). A DONE's statistics are checked by ``accounting.check_stats``. All
pure: the curator session (``curator.CuratorSession``) acts on what they say.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.codec import wire


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


def disclosure_refusal(pool: Any, env: wire.Envelope, colluders: np.ndarray | None,
                       curator_colludes: bool) -> str | None:
    """Why the curator does not take the DISCLOSE ``env`` from ``pool`` (its
    ``registration.PoolSlot``; None: not a registered pool), or None."""
    if pool is None or not pool.start <= env.agent < pool.stop:
        return f"unknown agent {env.agent} for this peer"
    if not curator_colludes or colluders is None or not colluders[env.agent]:
        return f"agent {env.agent} is not in the coalition"
    if not isinstance(env.payload, dict) or "data" not in env.payload:
        return "DISCLOSE payload must hold data and coins"
    return None
