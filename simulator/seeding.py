"""Seeding: one run seed, one stream key per party (see ``protocols.rng``), on a need-to-know basis.

Every random draw of a run is a pure function of (run seed, party, round, draw index): the data
generator, the agents' randomizers (keyed further by agent id), the curator, and the choice of
colluders each have their own key. The run seed of repetition ``r`` of a scenario with seed ``s``
is derived from (s, r) only, so every protocol and parameter point of one repetition sees the same
data and the same agents' coins (common random numbers: differences between protocols are not
drowned in data noise), while different repetitions and different scenario seeds are independent.

**Who gets which key.** The curator is the adversary ldpsim studies, so it never receives the run
seed nor anything from which an agent's data or coins can be computed:

* the orchestrator (the experiment's referee) holds the seed and derives every key;
* the curator process gets ``curator_config``: the public configuration, the public ``run_id``,
  its own stream key and the collusion key (who is in its coalition is its own business);
* the pools get the data, agent and collusion keys (``PoolKeys``): on the ``processes`` and
  ``inproc`` backends straight from the orchestrator, never through the curator's socket; on the
  ``hosts`` backend they derive them from the out-of-band *secret* (the token) and the public
  ``run_id`` of the run's set-up, and the curator only ever holds ``auth_key(secret)``, a one-way
  function of it that is enough to check the pools' registration MACs.

Without a secret the keys are those of earlier versions (``stream_key(seed, party)``); with one,
the private keys are HMAC-SHA256(secret, run_id, party), on every backend, so the same seed and
secret give bit-identical outputs on every backend and pool count.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from ldpsim.protocols.rng import stream_key


@dataclass(frozen=True)
class RunKeys:
    """The stream keys of one run (the orchestrator's view: all of them)."""

    data: int
    agents: int
    curator: int
    collusion: int


@dataclass(frozen=True)
class PoolKeys:
    """What a pool needs to generate its agents' rows and coins, and to find its colluders."""

    data: int
    agents: int
    collusion: int


def run_id(seed: int) -> int:
    """The public handle of a run: a one-way function of its seed (tells nothing about it)."""
    return stream_key(seed, "run-id")


def secret_key(secret: str, rid: int, party: str) -> int:
    """A 64-bit stream key from the out-of-band secret, a run's public id and a party label."""
    mac = hmac.new(secret.encode(), f"ldpsim\x1f{int(rid)}\x1f{party}".encode(), hashlib.sha256)
    return int.from_bytes(mac.digest()[:8], "little")


def pool_keys_from_secret(secret: str, rid: int) -> PoolKeys:
    """The keys a pool derives itself from the secret it holds and the run's public id."""
    return PoolKeys(data=secret_key(secret, rid, "data"), agents=secret_key(secret, rid, "agents"),
                    collusion=secret_key(secret, rid, "collusion"))


def run_keys(seed: int, secret: str | None = None) -> RunKeys:
    """Stream keys for every party of a run with this seed (and out-of-band secret, if any)."""
    curator = stream_key(seed, "curator")
    if secret:
        pk = pool_keys_from_secret(secret, run_id(seed))
        return RunKeys(data=pk.data, agents=pk.agents, curator=curator, collusion=pk.collusion)
    return RunKeys(data=stream_key(seed, "data"), agents=stream_key(seed, "agents"),
                   curator=curator, collusion=stream_key(seed, "collusion"))


def pool_keys(seed: int, secret: str | None = None) -> PoolKeys:
    """The pools' share of ``run_keys`` (handed to them by the orchestrator)."""
    k = run_keys(seed, secret)
    return PoolKeys(data=k.data, agents=k.agents, collusion=k.collusion)


def auth_key(secret: str) -> bytes:
    """The key the curator checks registrations with: one-way from the secret, and no use for
    deriving the pools' keys (those are HMACs under the secret itself)."""
    return hmac.new(secret.encode(), b"ldpsim\x1fregistration", hashlib.sha256).digest()


def registration_mac(key: bytes, nonce: bytes, run: int, pool: int, pools: int) -> bytes:
    """A pool's answer to the curator's per-run challenge ``nonce``: it proves the pool holds
    the secret without sending it, and cannot be replayed into another run or another slot."""
    msg = b"ldpsim\x1fhello\x1f" + nonce + f"\x1f{int(run)}\x1f{int(pool)}\x1f{int(pools)}".encode()
    return hmac.new(key, msg, hashlib.sha256).digest()


def curator_config(config: dict[str, Any], secret: str | None = None) -> dict[str, Any]:
    """What the curator process receives for a run: ``config`` without the seed, plus the
    run's public id and the curator's own and the collusion stream keys."""
    keys = run_keys(config["seed"], secret)
    out = {k: v for k, v in config.items() if k != "seed"}
    out["run_id"] = run_id(config["seed"])
    out["keys"] = {"curator": keys.curator, "collusion": keys.collusion}
    return out


def run_seed(scenario_seed: int, repeat: int) -> int:
    """The seed of repetition ``repeat`` of a scenario (a 63-bit integer)."""
    return stream_key(scenario_seed, "repeat", repeat) >> 1
