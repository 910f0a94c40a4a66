"""The ``inproc`` backend: curator and pools in one process, frames passed by direct calls.

The sessions are the same objects the process backends run, and every message is still encoded
to and decoded from msgpack bytes, so accounting and validation are identical; only the sockets
are missing. A pool that would time out (silent or dead) is detected at once: when no message is
in flight and the curator still waits, that is exactly the situation a timeout resolves.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ldpsim.protocols.keys import Secrets
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.seeding import agents_of, local_parties


def run_inproc(config: dict[str, Any], limits: Limits, record_view: bool = False,
               override: dict[str, Any] | None = None, secrets: Secrets | None = None,
               policy: AgentPolicy | None = None, n: int | None = None) -> dict:
    """Run one configured run in this process; return the curator's result record.

    ``config`` is the orchestrator's (with the seed); the curator session gets only
    ``curator_config`` and each pool its own keys (``seeding.local_parties``), as on the
    process backends. ``secrets``: the experiment's (default: the seed's alone); the same seed
    and secrets give the same output on every backend. ``policy``: the agents' own limits.
    ``n``: the data set's size, when the caller knows it.
    ``override`` ({"agent": a, "row": values}) replaces agent a's private row in the pool that
    hosts it: the privacy audit's neighbouring data sets; with ``"key": k`` that agent also
    draws its coins from the coin key ``k`` (another run's: the audit's trials with the
    coalition's coins fixed). It bypasses the curator entirely.
    """
    n_pools = int(config["pools"])
    parties = local_parties(config, agents_of(config) if n is None else n, secrets)
    cur = CuratorSession(0, parties.curator, parties.auth, limits, record_view)
    pools = [PoolSession(i, n_pools, parties.auth, limits, parties.pools[i], policy)
             for i in range(n_pools)]
    for p in pools:
        p.can_die = False
        p.override = override
    peers = [b"pool-%d" % i for i in range(n_pools)]
    index = {peer: i for i, peer in enumerate(peers)}
    queue: deque[tuple[bool, bytes, bytes]] = deque()  # (to_curator, peer, frame)
    for peer, pool in zip(peers, pools, strict=True):
        queue.append((True, peer, pool.hello()))
    while not cur.finished:
        if not queue:
            for peer, frame in cur.on_timeout():
                queue.append((False, peer, frame))
            continue
        to_curator, peer, frame = queue.popleft()
        if to_curator:
            for dest, out in cur.on_frame(peer, frame):
                queue.append((False, dest, out))
        else:
            for out in pools[index[peer]].on_frame(frame):
                queue.append((True, peer, out))
    return cur.result
