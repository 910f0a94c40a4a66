"""The ``inproc`` backend: curator and pools in one process, frames passed by direct calls.

The sessions are the same objects the process backends run, and every message is still encoded
to and decoded from msgpack bytes, so accounting and validation are identical; only the sockets
are missing. A pool that would time out (silent or dead) is detected at once: when no message is
in flight and the curator still waits, that is exactly the situation a timeout resolves.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ldpsim.simulator.seeding import auth_key, curator_config, pool_keys
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession


def run_inproc(config: dict[str, Any], limits: Limits, record_view: bool = False,
               override: dict[str, Any] | None = None, secret: str | None = None) -> dict:
    """Run one configured run in this process; return the curator's result record.

    ``config`` is the orchestrator's (with the seed); the curator session gets only
    ``curator_config`` and the pools their keys, as on the process backends. ``secret`` is the
    out-of-band secret of the hosts backend: the same seed and secret give the same output.
    ``override`` ({"agent": a, "row": values}) replaces agent a's private row in the pool that
    hosts it: the privacy audit's neighbouring data sets; with ``"key": k`` that agent also
    draws its coins under agents' stream key ``k`` (another run's: the audit's trials with the
    coalition's coins fixed). It bypasses the curator entirely.
    """
    token = secret or "inproc"
    n_pools = int(config["pools"])
    cur = CuratorSession(0, curator_config(config, secret), auth_key(token), limits, record_view)
    keys = pool_keys(config["seed"], secret)
    pools = [PoolSession(i, n_pools, token, limits, keys) for i in range(n_pools)]
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
