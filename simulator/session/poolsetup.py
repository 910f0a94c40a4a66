"""A pool's side of a run's set-up: its checks of the curator's relay, and the frames it answers.

The curator relays the configuration the orchestrator signed for each pool, with a fresh
challenge (``nonce``). Before its agents answer anything, a pool checks that it holds its own
keys, that the configuration is signed for it (``check_setup``) and that its keys cover its
block (``uncovered``); the session then checks the run against its agents' policy
(``policy.AgentPolicy.refusal``). It answers with its registration (``registration``), the
coalition's disclosures if the curator colludes (``disclosures``), or an authenticated refusal
(``setup_refusal``). All pure: the session (``pool.PoolSession``) holds the state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.collusion import HASH_CHUNK, Coalition
from ldpsim.simulator.session.common import MAX_REASON
from ldpsim.simulator.session.signing import registration_mac, verify


def check_setup(keys: Any, index: int, n_pools: int, answered: set[int], blob: Any, sigs: Any
                ) -> tuple[dict[str, Any] | None, str | None]:
    """The configuration of a set-up, or why the agents of pool ``index`` of ``n_pools``
    (holding ``keys``, ``seeding.PoolKeys``; None: none) refuse it: not signed by the
    orchestrator for this pool, or a run whose coins are spent (its run id in ``answered``)."""
    if keys is None:
        return None, (f"pool {index} has no keys (the orchestrator hands them over, or "
                      "`ldpsim agents --keys` reads them)")
    if keys.pool != index or keys.pools != n_pools:
        return None, (f"these are the keys of pool {keys.pool} of {keys.pools}, "
                      f"not of pool {index} of {n_pools}")
    sig = sigs[index] if isinstance(sigs, list) and len(sigs) > index else None
    if type(blob) is not bytes or not verify(keys.policy, blob, sig):
        return None, ("the configuration is not signed by the orchestrator for this pool "
                      "(altered or forged by the curator, or another deployment's keys)")
    try:  # signed: whatever is wrong here is the orchestrator's own bug
        cfg = msgpack.unpackb(blob, raw=False, strict_map_key=False)
        run_id, _, _ = (int(cfg[k]) for k in ("run_id", "data_id", "collusion_key"))
        pools = int(cfg["pools"])
    except Exception as e:
        return None, f"unreadable configuration: {type(e).__name__}: {e}"
    if run_id in answered:
        return None, (f"run {run_id} was answered already: its agents' coins are spent "
                      "(a repeated run would show them under other questions)")
    if pools != n_pools:
        return None, f"the configuration is for {pools} pools, not {n_pools}"
    return cfg, None


def uncovered(keys: Any, start: int, stop: int, n: int) -> str | None:
    """Why ``keys`` (``seeding.PoolKeys``) cannot serve the block ``[start, stop)`` of ``n``
    agents (they do not cover it), or None."""
    if keys.covers(start, stop):
        return None
    return (f"this pool's keys cover agents {list(keys.ranges[:4])}, not its block "
            f"[{start}, {stop}) of n = {n} (write them with `ldpsim keys --agents {n}`)")


def setup_refusal(auth: bytes, run: int, nonce: bytes, index: int, n_pools: int, why: str
                  ) -> bytes:
    """The ERROR refusing a run's set-up, authenticated like a registration (so the curator
    can tell a pool's refusal from an outsider's noise)."""
    return wire.encode(wire.ERROR, run, wire.SETUP_ROUND, wire.NO_AGENT, {
        "code": "refused", "error": why[:MAX_REASON], "pool": index, "pools": n_pools,
        "mac": registration_mac(auth, nonce, run, index, n_pools)})


def registration(auth: bytes, run: int, nonce: bytes, index: int, n_pools: int, n: int,
                 start: int, stop: int, public: Any) -> bytes:
    """The HELLO registering the block ``[start, stop)`` of pool ``index`` for ``run``, its
    answer to the curator's challenge ``nonce`` under the registration key ``auth``."""
    return wire.encode(wire.HELLO, run, wire.SETUP_ROUND, wire.NO_AGENT, {
        "pool": index, "pools": n_pools, "n": n, "agents": [start, stop], "public": public,
        "mac": registration_mac(auth, nonce, run, index, n_pools)})


def disclosures(run: int, n: int, collusion: dict[str, Any], collusion_key: int, start: int,
                stop: int, disclosed: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                chunk: int = HASH_CHUNK) -> bytes | None:
    """The DISCLOSE frame of the block ``[start, stop)``'s colluders (their rows and coin keys,
    for a colluding curator), or None: the block holds none.

    The colluders are ``collusion.Coalition``'s, found ``chunk`` agents at a time (no mask
    over all ``n`` agents); ``disclosed(ids)`` gives the rows and coin keys of the block's
    agents ``ids`` (only theirs are made); it is called only if there are colluders."""
    ids = Coalition(n, collusion, collusion_key, chunk).ids(start, stop)
    if not len(ids):
        return None
    rows, coins = disclosed(ids)
    bufs, _ = wire.encode_many(
        wire.DISCLOSE, run, wire.SETUP_ROUND, ids.tolist(),
        [{"data": row, "coins": int(c)} for row, c in zip(rows, coins.tolist(), strict=True)])
    return b"".join(bufs)
