"""Registration: which peers become the run's pools.

A pool says it is ready (HELLO with ``run = -1``) and gets the run's set-up: the configuration
as the orchestrator signed it for the pools (``signed``, ``sigs``: the curator relays the bytes
and cannot alter them) and a fresh nonce. It registers with HELLO(run), answering the nonce with
``signing.registration_mac`` of the run's authentication key, and claiming the block of agents
``block_of`` gives it. Only a pool that proves it holds the token and claims exactly its block
gets a slot; a peer that fails authentication ``MAX_AUTH_FAILURES`` times is ignored for the
rest of the run. The first accepted pool fixes the run's agents (``n``) and public data; every
later pool must agree byte for byte.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.protocols.base import MAX_AGENTS
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session.collusion import Coalition
from ldpsim.simulator.session.common import MAX_AUTH_FAILURES, MAX_REASON, Bounded, block_of
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.signing import registration_mac

log = logging.getLogger("ldpsim.curator")


@dataclass
class PoolSlot:
    """A registered pool: its peer identity, index and block of agents ``[start, stop)``."""

    peer: bytes
    index: int
    start: int
    stop: int
    #: its DONE statistics (``accounting.check_stats``), once it sent them; {} if unusable
    stats: dict[str, Any] | None = None


class Registration:
    """The registration handshake of one run (see the module docstring).

    Parameters
    ----------
    run : int
        The run's number on this curator.
    config : RunConfig
        The run's configuration (pool count, the scenario's ``data.n``, collusion).
    signed : bytes, sigs : list of bytes
        The configuration as the orchestrator signed it, and one signature per pool
        (``seeding.curator_config``): the set-up relays them.
    auth : bytes
        The run's registration key: checks the answers to this run's nonce.
    collusion_key : int
        The coalition's stream key (``collusion.Coalition``).
    """

    def __init__(self, run: int, config: RunConfig, signed: bytes, sigs: list[bytes],
                 auth: bytes, collusion_key: int) -> None:
        self.run = run
        self.config = config
        self.auth = auth
        self.collusion_key = collusion_key
        self.n_pools = config.pools
        self.nonce = secrets.token_bytes(16)  # this run's registration challenge
        self.setup_frame = wire.encode(wire.BCAST, run, wire.SETUP_ROUND, wire.NO_AGENT,
                                       {"config": signed, "sigs": list(sigs),
                                        "nonce": self.nonce})
        self.pools: dict[bytes, PoolSlot] = {}
        self.ready: Bounded = Bounded()  # peers that said they are ready (most recent last)
        self.setup_sent: Bounded = Bounded()
        self.auth_failures: Bounded = Bounded()  # failed registrations per peer
        self.auth_failed = 0
        self.t_ready: float | None = None  # when every pool had said it is ready
        # fixed by the first accepted pool
        self.n: int | None = None
        self.public: dict[str, Any] | None = None
        #: the coalition (``collusion.Coalition``: selected on first use)
        self.colluders: Coalition | None = None

    @property
    def complete(self) -> bool:
        """Every pool has registered."""
        return len(self.pools) == self.n_pools

    def ignored(self, peer: bytes) -> bool:
        """``peer`` failed authentication too often: nothing it sends is read."""
        return self.auth_failures.get(peer, 0) >= MAX_AUTH_FAILURES

    def on_ready(self, peer: bytes, open_: bool) -> bool:
        """``peer`` said it is ready; True when it should get the set-up now (once, while the
        registration is ``open_``)."""
        if peer in self.pools:  # a registered pool's keep-alive while it waits
            return False
        self.ready[peer] = True
        if self.t_ready is None and len(self.ready) >= self.n_pools:
            self.t_ready = time.perf_counter()
        if open_ and peer not in self.setup_sent:
            self.setup_sent[peer] = True
            return True
        return False

    def register(self, peer: bytes, payload: Any, open_: bool) -> str | None:
        """Register ``peer`` from its HELLO ``payload``: None when it got a slot, else why it
        is refused (the caller answers with a refusal; the pool waits for the next run)."""
        if not self._authentic(payload):  # never a slot for a peer that fails authentication
            fails = self.auth_failures.get(peer, 0) + 1
            self.auth_failures[peer] = fails
            self.auth_failed += 1
            if self.auth_failed <= 10 or fails == MAX_AUTH_FAILURES:
                log.warning("run %d: registration from %s failed authentication (%d from this "
                            "peer%s)", self.run, peer[:16].hex(), fails,
                            "; ignoring it for the rest of the run"
                            if fails >= MAX_AUTH_FAILURES else "")
            return ("authentication failed (wrong or missing token, or an answer to another "
                    "run's challenge)")
        if not open_:
            return "the rounds have started"
        p = payload
        index = p["pool"]
        try:
            n, agents, public = p["n"], p["agents"], p["public"]
            start, stop = agents
            if not all(type(x) is int for x in (n, start, stop)) or not isinstance(public, dict):
                raise TypeError
        except (KeyError, TypeError, ValueError):
            return "the payload must hold pool, pools, n, agents = [start, stop], public and mac"
        # a loader keeps *at most* data.n agents; a generator exactly data.n
        most = self.config.data.get("n")
        most = most if type(most) is int and 1 <= most <= MAX_AGENTS else MAX_AGENTS
        if not 1 <= n <= most:
            return f"n = {wire.quote(n)} agents is outside the scenario's [1, {most}]"
        if any(q.index == index for q in self.pools.values()):
            return f"pool index {index} is taken"
        if self.n is None:
            self.n, self.public = n, public
            self.colluders = Coalition(n, dict(self.config.collusion), self.collusion_key,
                                       self.config.chunk_agents)
        elif n != self.n or wire.packer().pack(public) != wire.packer().pack(self.public):
            return f"pool {index} disagrees on the data (n={n})"
        if (start, stop) != block_of(index, self.n_pools, self.n):
            return f"unknown agents: pool {index} must host {block_of(index, self.n_pools, self.n)}"
        self.pools[peer] = PoolSlot(peer, index, start, stop)
        return None

    def refusal(self, payload: Any) -> str | None:
        """A pool's authenticated refusal of this run's set-up (an ERROR of code "refused" that
        answers the nonce like a registration): "pool I refused the run: why"; None when the
        payload is not one (an outsider's noise is not a reason to end a run)."""
        if not self._authentic(payload):
            return None
        why = payload.get("error")
        why = why[:MAX_REASON] if isinstance(why, str) else wire.quote(why)
        return f"pool {payload['pool']} refused the run: {why}"

    def _authentic(self, p: Any) -> bool:
        """The payload answers this run's nonce with the MAC of the token's key."""
        try:
            if not isinstance(p, dict):
                return False
            index, pools, mac = p["pool"], p["pools"], p["mac"]
            return (type(index) is int and type(pools) is int and type(mac) is bytes
                    and pools == self.n_pools and 0 <= index < pools
                    and hmac.compare_digest(mac, registration_mac(
                        self.auth, self.nonce, self.run, index, pools)))
        except (KeyError, TypeError, ValueError, IndexError):
            return False

    def registered_agents(self) -> AgentRange | np.ndarray:
        """The ids of every registered pool's agents, sorted (the pools' blocks are disjoint:
        one index each): an ``AgentRange`` when the blocks are adjacent (the usual case: no
        array of ids at all), else the array of one range per run of adjacent blocks."""
        runs: list[list[int]] = []
        for start, stop in sorted((q.start, q.stop) for q in self.pools.values()):
            if runs and runs[-1][1] == start:
                runs[-1][1] = stop
            elif start < stop:
                runs.append([start, stop])
        if not runs:
            return np.zeros(0, dtype=np.int64)
        if len(runs) == 1:  # the usual case: one range, held as its two ends
            return AgentRange(*runs[0])
        return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in runs])
