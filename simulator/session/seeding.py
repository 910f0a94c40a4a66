"""Seeding and secrets: which party holds which key, on a need-to-know basis.

A run has a public **seed** and the experiment's **secrets** (``protocols.keys.Secrets``): a
master secret of at least 128 bits, fresh, from a key file or from the seed alone
(``keyfiles``: where the secret comes from, and the files it is kept in).

With a secret of its own (fresh or a file) a run's seed is first keyed by the master
(``Secrets.run_seed``), so nothing the curator or a pool receives is a function of the seed
alone. The seed keys what is public (the curator's own draws: which agents it asks, its
queries); the master keys what is private (every agent's data and coins, ``protocols.keys``).
The run seed of repetition ``r`` of a scenario with seed ``s`` is derived from (s, r) only
(``protocols.keys.run_seed``).

**Who gets which key.**

* the orchestrator (the experiment's referee) holds the seed and the secrets: it builds the data
  set to score the output, and it signs each run's configuration for the pools;
* the curator process gets ``curator_config``: the public configuration, the run's public id
  (``run_id``, the tag of its agents' coin keys) and its data set's (``data_id``), its own stream
  key (public draws, common to a repetition's runs), its private coin key for this run (a
  central mechanism's noise: ``Secrets.curator_coins``), the collusion key, the signed
  configuration it relays to the pools, and the registration key (``auth``): never the seed,
  the master or any agent's key;
* pool ``i`` gets ``PoolKeys``: the device keys of its own agents only (``AgentKeys.restrict``),
  the population secret (every agent's generated row depends on the population's draws) and its
  own policy key, which checks the orchestrator's signature on a run's configuration: from the
  orchestrator on the local backends, from the key file ``ldpsim keys`` wrote for it on the
  hosts backend. It computes its agents' coin and data keys from the public tags.

**Authentication** is a separate secret: the registration key ``auth`` proves a pool may take a
slot. On the local backends it is random per run (``signing.auth_key``); on the hosts backend
it comes from a token, stretched with scrypt before any use (``keyfiles.registration_key``).
Signatures and MACs are ``signing``'s.

The same seed and secrets give bit-identical outputs on every backend and pool count.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols import build_data
from ldpsim.protocols.keys import AgentKeys, DataKeys, Secrets, data_tag, run_tag
from ldpsim.protocols.rng import stream_key
from ldpsim.simulator.session.common import block_of
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.signing import auth_key, policy_key, sign


@dataclass(frozen=True)
class PoolKeys:
    """What pool ``pool`` of ``pools`` holds: its agents' keys and nothing about any other
    agent's (see the module docstring)."""

    pool: int
    pools: int
    agents: AgentKeys
    population: bytes
    policy: bytes

    @functools.cached_property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        """The agents whose keys this pool holds, as disjoint ranges (``AgentKeys.ranges``),
        found once (the keys are immutable)."""
        return tuple(self.agents.ranges())

    def covers(self, start: int, stop: int) -> bool:
        """Whether this pool holds the keys of every agent of ``[start, stop)``."""
        return start >= stop or any(a <= start and stop <= b for a, b in self.ranges)

    def data_keys(self, tag: int) -> DataKeys:
        """The data keys of the data set tagged ``tag`` that this pool can compute: its own
        agents' and the population's."""
        return DataKeys.of_population(self.population, tag, self.agents)


def pool_keys(secrets: Secrets, pool: int, pools: int,
              ranges: list[tuple[int, int]]) -> PoolKeys:
    """What pool ``pool`` of ``pools`` receives: the keys of the agents in ``ranges`` only."""
    return _pool_keys(secrets, int(pool), int(pools),
                      tuple((int(a), int(b)) for a, b in ranges))


@functools.lru_cache(maxsize=8192)
def _pool_keys(secrets: Secrets, pool: int, pools: int,
               ranges: tuple[tuple[int, int], ...]) -> PoolKeys:
    """``pool_keys``, derived once per secrets and block: a sweep's runs of one repetition
    share the seed's secrets, and all its runs the experiment's (the keys are immutable)."""
    return PoolKeys(pool, pools, secrets.agents.restrict(ranges), secrets.population_secret,
                    policy_key(secrets.master, pool, pools))


def run_secrets(config: dict[str, Any], secrets: Secrets | None = None) -> Secrets:
    """The run's secrets: ``secrets``, or those of its seed alone."""
    return secrets if secrets is not None else _seed_secrets(int(config["seed"]))


@functools.lru_cache(maxsize=8192)
def _seed_secrets(seed: int) -> Secrets:
    """``Secrets.of_seed``, once per seed (a sweep's points share a repetition's seed)."""
    return Secrets.of_seed(seed)


def run_id(config: dict[str, Any]) -> int:
    """The run's public id: the tag of its agents' coin keys (``protocols.keys.run_tag``)."""
    return run_tag(config["seed"], config["protocol"], config["params"], config["data"])


def public_config(config: dict[str, Any]) -> dict[str, Any]:
    """What every party may read of a run: ``config`` without the seed, with the run's and its
    data set's public ids and the coalition's stream key."""
    out = {k: v for k, v in config.items() if k != "seed"}
    out["run_id"] = run_id(config)
    out["data_id"], out["collusion_key"], _ = _seed_ids(int(config["seed"]))
    return out


@functools.lru_cache(maxsize=8192)
def _seed_ids(seed: int) -> tuple[int, int, int]:
    """A run seed's data set id (``data_tag``), collusion and curator stream keys: the same
    for every run of a repetition, derived once."""
    return data_tag(seed), stream_key(seed, "collusion"), stream_key(seed, "curator")


def curator_config(config: dict[str, Any], secrets: Secrets | None = None) -> dict[str, Any]:
    """What the curator process receives for a run: the public configuration, its own stream
    key and private coin key (``keys``), and the configuration as the pools must receive it
    (``signed``: msgpack bytes, with ``sigs``, one signature per pool under that pool's policy
    key). The curator relays the bytes and the signatures; it cannot alter the configuration
    without every pool refusing it."""
    sec = run_secrets(config, secrets)
    public = public_config(config)
    blob = msgpack.packb(public, use_bin_type=True)
    pools = int(config["pools"])
    out = dict(public)
    out["keys"] = {"curator": _seed_ids(int(config["seed"]))[2],
                   "coins": sec.curator_coins(public["run_id"]),
                   "collusion": public["collusion_key"]}
    if config.get("deployment"):  # the simulated network's own streams (``network``)
        out["keys"]["network"] = network_keys(config["seed"])
    out["signed"] = blob
    out["sigs"] = [sign(policy_key(sec.master, i, pools), blob) for i in range(pools)]
    return out


def network_keys(seed: int) -> tuple[int, int]:
    """The stream keys of a run's simulated network (``session.network``): its agents' devices
    and their availability. Public draws: what the network does is what the curator observes
    (who answers, and when); no party's coins depend on them."""
    return stream_key(seed, "network", "device"), stream_key(seed, "network", "availability")


@dataclass(frozen=True)
class RunKeys:
    """One run's keys as the orchestrator (the referee) holds them: to build the data set it
    scores against, and for tests and the audit to recompute what a party drew."""

    seed: int
    secrets: Secrets
    data: DataKeys
    curator: int
    collusion: int

    def coins(self, config: dict[str, Any], agents: Any) -> np.ndarray:
        """The coin keys of ``agents`` in the run ``config`` (its run tag)."""
        return self.secrets.agents.coins(np.asarray(agents, dtype=np.int64).reshape(-1),
                                         run_id(dict(config, seed=self.seed)))


def run_keys(seed: int, secrets: Secrets | None = None) -> RunKeys:
    """The keys of a run with this seed (and the experiment's ``secrets``; default the
    seed's own)."""
    sec = run_secrets({"seed": seed}, secrets)
    return RunKeys(int(seed), sec, sec.data_keys(seed), stream_key(seed, "curator"),
                   stream_key(seed, "collusion"))


@dataclass(frozen=True)
class Parties:
    """What the orchestrator hands out for one run on a local backend (processes, inproc,
    dask): the curator's configuration, the run's registration key, and each pool's keys."""

    curator: dict[str, Any]
    auth: bytes
    pools: tuple[PoolKeys, ...]


@functools.lru_cache(maxsize=2)
def device_keys(master: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every agent's device key under ``master``: derived once per sweep (the runs of a sweep
    share the master and the agents), 16 bytes per agent."""
    got = Secrets(master).agents.for_range(0, n, device=True)
    for a in (got["device0"], got["device1"]):
        a.setflags(write=False)
    return got["device0"], got["device1"]


class _KeptShares:
    """The pools' keys of the runs met last (``_shares``), kept while they hold at most
    ``AGENTS`` agents in all: a sweep's points meet the same secrets again (its repetitions'
    seeds, or the experiment's secret), and a small run's key tree costs more than its
    protocol. The keys are immutable."""

    AGENTS = 1 << 20

    def __init__(self) -> None:
        self._kept: dict[tuple[Secrets, int, int, bool], tuple[PoolKeys, ...]] = {}
        self._agents = 0
        self._lock = threading.Lock()  # runs may be made in threads (a Dask worker's)

    def get(self, sec: Secrets, pools: int, n: int, chunked: bool = False
            ) -> tuple[PoolKeys, ...]:
        """The keys of each of ``pools`` pools of a run of ``n`` agents under ``sec``
        (``chunked``: the run's agents are held a chunk at a time, ``_shares``)."""
        key = (sec, pools, n, chunked)
        with self._lock:
            got = self._kept.pop(key, None)
            if got is not None:
                self._kept[key] = got  # the most recently used last
                return got
        got = _shares(sec, pools, n, chunked)
        if n > self.AGENTS // 64:
            return got
        with self._lock:
            if key not in self._kept:
                self._agents += n
            self._kept[key] = got
            while self._kept and self._agents > self.AGENTS:
                oldest = next(iter(self._kept))  # the least recently used
                del self._kept[oldest]
                self._agents -= oldest[2]
        return got


_KEPT = _KeptShares()


def _shares(sec: Secrets, pools: int, n: int, chunked: bool = False) -> tuple[PoolKeys, ...]:
    """Pool i's keys for each i: those of its block (``block_of``) only. With a secret of the
    experiment's own, its agents' device keys are derived once for the sweep and each pool's
    block of them comes with its keys (a pool then derives only its agents' coin and data keys
    of the run); a seed's, for a small run. A ``chunked`` run's never: 16 bytes per agent of
    the run, where its pools hold a chunk's keys at a time (each derives its agents' device
    keys from its nodes of the key tree, the same keys)."""
    devices = (None if chunked else device_keys(sec.master, n) if not sec.from_seed
               else _seed_device_keys(sec.master, n) if n <= _KeptShares.AGENTS // 64 else None)
    out = []
    for i in range(pools):
        keys = pool_keys(sec, i, pools, [block_of(i, pools, n)])
        if devices is not None:
            a, b = block_of(i, pools, n)
            d0, d1 = devices
            keys = replace(keys, agents=keys.agents.with_devices(a, d0[a:b], d1[a:b]))
        out.append(keys)
    return tuple(out)


def _seed_device_keys(master: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``device_keys`` of a seed's secrets, not cached apart (``_KeptShares`` keeps them)."""
    got = Secrets(master).agents.for_range(0, n, device=True)
    for a in (got["device0"], got["device1"]):
        a.setflags(write=False)
    return got["device0"], got["device1"]


def local_parties(config: dict[str, Any], n: int, secrets: Secrets | None = None,
                  auth: bytes | None = None) -> Parties:
    """The keys of a run of ``n`` agents on a local backend: pool i gets the keys of its block
    (``block_of``) only; ``auth`` a fresh random registration key unless given. With a
    secret of the experiment's own, its agents' device keys are derived once for the sweep and
    each pool's block of them comes with its keys (a pool then derives only its agents' coin
    and data keys of the run), unless the run is chunked (``RunConfig.chunked``: ``_shares``)."""
    sec = run_secrets(config, secrets)
    out = _KEPT.get(sec, int(config["pools"]), int(n), RunConfig.of(config).chunked(int(n)))
    return Parties(curator_config(config, sec), auth if auth is not None else auth_key(),
                   out)


def agents_of(config: dict[str, Any]) -> int:
    """How many agents the run's data set holds (built lazily: generated rows are not drawn;
    a file is read)."""
    data = config["data"]
    if any(isinstance(v, str) for k, v in data.items() if k != "kind"):
        return build_data(data, 0).n  # a file, say: read each time
    try:
        packed = msgpack.packb(data, use_bin_type=True)
    except (TypeError, ValueError):
        return build_data(data, 0).n
    return _generated_size(packed)


@functools.lru_cache(maxsize=256)
def _generated_size(data: bytes) -> int:
    """The size of a generated data set, by its packed ``[data]`` table (``agents_of``)."""
    return build_data(msgpack.unpackb(data, raw=False), 0).n
