"""Every agent's keys: independent per-agent secrets from a PRF, and who may compute them.

An agent is meant to be as independent as a real device: what one agent's keys are must tell
nothing about another's. So no agent key is derived from another party's by a public bijection
(as ``mix(run key + id * constant)`` was: one disclosed key gave the run key back, and with it
every agent's coins). Here every key is an output of SipHash-2-4 (``protocols.prf``), a PRF:

* **device keys.** Agent ``a`` has a 128-bit device key, the leaf ``a`` of a tree of keys over the
  agent ids ``0 .. 2^32 - 1``: four levels of 256 children each, the root derived from the
  experiment's master secret, and child ``c`` of a node keyed ``K`` at level ``l`` keyed
  ``(PRF_K(l << 8 | c), PRF_K(2^62 | l << 8 | c))`` (a GGM-style tree, Goldreich, Goldwasser &
  Micali 1986). Whoever holds a node's key can compute the device keys below it and no other:
  ``AgentKeys`` holds the keys of the nodes that exactly cover some ranges of agents, which is
  how a pool gets its own agents' keys and nothing about the others' (``restrict``). A range of
  ``N`` agents is covered by at most ``2 * 255 * 4`` nodes; computing its device keys costs two
  PRF calls per agent (the inner nodes are few).
* **coin keys** (the agent's random coins in one run): ``PRF_device(run tag)``, the run tag being
  the run's public id (``run_tag``): fresh for every run of a sweep, so the views of a whole
  sweep compose as independent mechanisms do.
* **data keys** (what an agent's private row is drawn with, for generated data): ``PRF_device(2^63
  | data tag)``, the data tag depending on the repetition only (``data_tag``): the runs of one
  repetition share their data (common random numbers), never their coins.

An agent that discloses its coin key (a colluder) gives away its own draws of that run and
nothing else. A fast mixer (SplitMix64, ``protocols.rng``) then expands a coin or data key into
the agent's draws; it never derives one agent's key from another's.

Everything here is a pure function of the master secret, the seeds and public tags: it knows
nothing of parties, files or processes (the runtime decides which party receives what). The
device-key tree is ``protocols.keytree`` (its names are importable from here too).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from ldpsim.protocols.keytree import (
    TAG_BITS,
    AgentKeys,
    Node,
    cover,
    device_rows,
    key_message,
    root_words,
)
from ldpsim.protocols.prf import prf
from ldpsim.protocols.rng import stream_key, stream_keys

#: the secrets, tags and data keys, with the device-key tree's names (``keytree``)
__all__ = ["AgentKeys", "DataKeys", "Node", "Secrets", "TAG_BITS", "as_data_keys", "cover",
           "data_tag", "data_tags", "device_rows", "kdf", "master_from_seed",
           "master_words_of_seeds", "population_key", "root_words", "run_seed", "run_seeds",
           "run_tag", "run_tags", "seed_run_keys", "tag_of"]


def kdf(secret: bytes, *labels: str | int, size: int = 32) -> bytes:
    """A key derived from ``secret`` for the purpose ``labels`` (keyed BLAKE2b)."""
    h = hashlib.blake2b(key=secret[:64], digest_size=size, person=b"ldpsim-kdf")
    h.update(b"\x1f".join(str(x).encode() for x in labels))
    return h.digest()


#: public SipHash keys of the derivations that take a seed or a tag (a PRF keyed by a public
#: key is a fixed, well-mixed function: what is secret there is the seed itself)
_SEED_KEY = (0x6C647073696D2D73, 0x6565642D6D617374)
_DATA_KEY = (0x6C647073696D2D64, 0x6174612D74616773)


def _seed63(seed: int | np.ndarray) -> np.ndarray:
    """Seeds as 63-bit words (a seed of 63 bits or fewer as it is, a larger one folded by
    BLAKE2b): what the seed-keyed derivations take."""
    if isinstance(seed, np.ndarray):
        out = np.array(seed, dtype=np.uint64).reshape(-1)
        big = (out >> np.uint64(63)) != 0
        if big.any():
            out[big] = [_seed63(int(x))[0] for x in out[big]]
        return out
    seed = int(seed)
    if 0 <= seed < 1 << 63:
        return np.array([seed], dtype=np.uint64)
    h = hashlib.blake2b(str(seed).encode(), digest_size=8, person=b"ldpsim-seed")
    return np.array([int.from_bytes(h.digest(), "little") >> 1], dtype=np.uint64)


def master_words_of_seeds(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``master_from_seed`` of many run seeds at once, as the two words it keys the tree's
    root with (uint64 arrays)."""
    s = _seed63(np.asarray(seeds, dtype=np.uint64))
    return prf(*_SEED_KEY, s), prf(*_SEED_KEY, s | np.uint64(1 << 63))


def master_from_seed(seed: int) -> bytes:
    """The master secret of a run that was given none: a function of its seed alone.

    Then the seed is the only secret: anyone who guesses it (a curator that tries small seeds
    against the run's public id) can compute every agent's keys. Give a run a secret of its own
    (``ldpsim keys``) wherever that matters."""
    m0, m1 = master_words_of_seeds(_seed63(seed))
    return int(m0[0]).to_bytes(8, "little") + int(m1[0]).to_bytes(8, "little")


def _canon(x: Any) -> Any:
    """``x`` in a canonical form for hashing: numbers as floats (1 and 1.0 are one ε), tuples
    as lists, numpy scalars and arrays as Python values."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, np.generic):
        return _canon(x.item())
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, dict):
        return {str(k): _canon(v) for k, v in x.items()}
    if isinstance(x, list | tuple | np.ndarray):
        return [_canon(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
    return str(x)


#: ``json.dumps(..., sort_keys=True, separators=(",", ":"))``, its encoder made once
_CANON_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def tag_of(*parts: Any) -> int:
    """A 63-bit public tag of ``parts`` (BLAKE2b of their canonical JSON)."""
    blob = _CANON_JSON.encode(_canon(list(parts)))
    h = hashlib.blake2b(blob.encode(), digest_size=8, person=b"ldpsim-tag")
    return int.from_bytes(h.digest(), "little") >> (64 - TAG_BITS)


def data_tags(seeds: np.ndarray) -> np.ndarray:
    """``data_tag`` of many run seeds at once."""
    return prf(*_DATA_KEY, _seed63(np.asarray(seeds, dtype=np.uint64))) >> np.uint64(1)


def data_tag(seed: int) -> int:
    """The public id of a run's data set: the same for every run of one repetition (common
    random numbers), different across repetitions."""
    return int(data_tags(_seed63(seed))[0])


def run_seed(scenario_seed: int, repeat: int) -> int:
    """The seed of repetition ``repeat`` of a scenario (a 63-bit integer)."""
    return stream_key(scenario_seed, "repeat", repeat) >> 1


def run_seeds(scenario_seed: int, first: int, count: int) -> np.ndarray:
    """``run_seed`` of repetitions ``first .. first + count - 1`` at once (a uint64 array)."""
    reps = np.arange(first, first + count, dtype=np.uint64)
    return stream_keys(scenario_seed, "repeat", last=reps) >> np.uint64(1)


@functools.lru_cache(maxsize=256)
def _identity_key(blob: str) -> tuple[int, int]:
    h = hashlib.blake2b(blob.encode(), digest_size=16, person=b"ldpsim-run")
    d = h.digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little")


def _run_identity(protocol: str, params: dict[str, Any], data: dict[str, Any]
                  ) -> tuple[int, int]:
    # the trailing 0 stood for the colluders, which once keyed the coins: kept, so that a run's
    # coins are what they always were
    blob = _CANON_JSON.encode(_canon([protocol, params, data, 0]))
    return _identity_key(blob)


def run_tags(seeds: np.ndarray, protocol: str, params: dict[str, Any], data: dict[str, Any]
             ) -> np.ndarray:
    """``run_tag`` of one run's settings under many run seeds at once."""
    key = _run_identity(protocol, params, data)
    return prf(*key, _seed63(np.asarray(seeds, dtype=np.uint64))) >> np.uint64(1)


def run_tag(seed: int, protocol: str, params: dict[str, Any], data: dict[str, Any]) -> int:
    """The public id of one run, and the tag its agents' coin keys derive from: different for
    every protocol, parameter point, data setting and repetition of a sweep, the same on every
    backend and pool count. The coalition leaves it alone: semi-honest colluders follow the
    protocol, so a coalition is an analysis of one execution, and every coalition of a sweep
    point analyses the same coins (the same reports, disclosed to the curator or not). A PRF of
    the seed under a key of the run's settings, so a block of trials computes its tags at
    once."""
    return int(run_tags(_seed63(seed), protocol, params, data)[0])


def seed_run_keys(seeds: np.ndarray, n: int, run_tags: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The coin keys and data keys of agents ``0 .. n - 1`` in the runs of ``seeds`` given no
    secret (``Secrets.of_seed``), run i tagged ``run_tags[i]`` and its data set tagged by its
    seed (``data_tag``): two uint64 arrays of shape (runs, n), what ``AgentKeys.coins`` and
    ``AgentKeys.data`` give, for many runs at once."""
    seeds = np.asarray(seeds, dtype=np.uint64).reshape(-1)
    runs = len(seeds)
    k0, k1 = root_words(*master_words_of_seeds(seeds))
    d0, d1 = device_rows(np.repeat(k0, n), np.repeat(k1, n),
                         np.tile(np.arange(n, dtype=np.int64), runs))
    coins = prf(d0, d1, key_message(np.repeat(np.asarray(run_tags, dtype=np.uint64), n),
                                 runs * n, False))
    data = prf(d0, d1, key_message(np.repeat(data_tags(seeds), n), runs * n, True))
    return coins.reshape(runs, n), data.reshape(runs, n)


@dataclass(frozen=True)
class DataKeys:
    """What a data set's rows are drawn with: ``population``, a 64-bit key of the draws every
    agent's row depends on (a Mallows centre, the tasks' true answers: every party that
    generates rows holds it), the data set's public ``tag`` and the agents' keys. ``range``
    and ``of`` give agents' own data keys, which no other agent's reveal.

    ``cached``: the data keys of one block, computed already (a pool computes its agents'
    coin and data keys in one pass, ``AgentKeys.for_range``): ``range`` slices it.
    """

    population: int
    tag: int
    agents: AgentKeys
    cached: tuple[int, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def range(self, start: int, stop: int) -> np.ndarray:
        """The data keys of agents ``start .. stop - 1`` (one uint64 each)."""
        if self.cached is not None:
            first, keys = self.cached
            if first <= start and stop <= first + len(keys):
                return keys[start - first:stop - first]
        return self.agents.for_range(start, stop, data_tag=self.tag)["data"]

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The data keys of agents ``ids`` (any order)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(ids) and np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
            return self.range(int(ids[0]), int(ids[0]) + len(ids))
        return self.agents.data(ids, self.tag)

    def with_cache(self, start: int, keys: np.ndarray) -> DataKeys:
        """The same keys, with agents ``start ..``'s data keys ``keys`` already computed."""
        return replace(self, cached=(int(start), keys))

    @classmethod
    def of_population(cls, secret: bytes, tag: int, agents: AgentKeys) -> DataKeys:
        """The data keys of the data set tagged ``tag`` for a party that holds the population
        secret ``secret`` and ``agents``' keys (the orchestrator: every agent's; a pool: its
        block's)."""
        return cls(population_key(secret, tag), int(tag), agents)

    @classmethod
    def of_seed(cls, seed: int) -> DataKeys:
        """The data keys of run seed ``seed``'s data set given no secret (tests, a run without
        a secret): ``Secrets.of_seed(seed).data_keys(seed)``."""
        return Secrets.of_seed(seed).data_keys(seed)


def as_data_keys(keys: DataKeys | int) -> DataKeys:
    """``keys`` itself, or the data keys of one integer (``DataKeys.of_seed``)."""
    if isinstance(keys, DataKeys):
        return keys
    if isinstance(keys, bool) or not isinstance(keys, int | np.integer):
        raise TypeError(f"data keys must be DataKeys or an integer, got {type(keys).__name__}")
    return DataKeys.of_seed(int(keys))


@dataclass(frozen=True)
class Secrets:
    """The experiment's master secret and what derives from it: every agent's device keys,
    the population secret of generated data sets. The referee's (orchestrator's) view: other
    parties get parts (``AgentKeys.restrict``, ``population_secret``).

    ``from_seed``: the master came from the run's seed (``master_from_seed``), then the seed
    is the only secret.
    """

    master: bytes
    from_seed: bool = False

    def __post_init__(self) -> None:
        if len(self.master) < 16:
            raise ValueError(f"a master secret has at least 128 bits, got {8 * len(self.master)}")

    @classmethod
    def of_seed(cls, seed: int) -> Secrets:
        """The secrets of a run given no secret: all from its seed."""
        return cls(master_from_seed(seed), from_seed=True)

    @property
    def agents(self) -> AgentKeys:
        """Every agent's keys (the root of the device-key tree)."""
        return AgentKeys.root(self.master)

    @property
    def population_secret(self) -> bytes:
        """What every data-generating party holds: the population keys of all data sets."""
        return kdf(self.master, "population")

    def curator_coins(self, run: int) -> int:
        """The curator's private coin key in the run tagged ``run`` (its public id): what a
        central mechanism's noise is drawn from (``Curator.coins``). Fresh per run, so the
        releases of a sweep compose as independent mechanisms; from the master, so neither the
        seed nor the run's id, both public, predicts it."""
        return int.from_bytes(kdf(self.master, "curator-coins", int(run), size=8), "little")

    def run_seed(self, seed: int) -> int:
        """The seed a run of seed ``seed`` derives its public ids and stream keys from:
        ``seed`` itself for the secrets of a seed, else a 63-bit
        PRF of it under this master. So with a secret of its own, what the curator and the
        pools receive (the run's and its data set's ids, the curator's stream key) is no
        function of the run's seed: nobody who guesses, or reads, the seed can match them,
        let alone rebuild a key."""
        if self.from_seed:
            return int(seed)
        return int.from_bytes(kdf(self.master, "run-seed", int(seed), size=8), "little") >> 1

    def data_keys(self, seed: int, agents: AgentKeys | None = None) -> DataKeys:
        """The data keys of run seed ``seed``'s data set (``agents``: a restriction of this
        master's agent keys; default all)."""
        return DataKeys.of_population(self.population_secret, data_tag(seed),
                                      self.agents if agents is None else agents)


def population_key(secret: bytes, tag: int) -> int:
    """The population key of the data set tagged ``tag`` (``DataKeys.population``) from the
    population secret, ``kdf(master, "population")``, which every data-generating party holds
    (the orchestrator and every pool: each agent's row depends on the population's draws)."""
    return int.from_bytes(kdf(secret, "population", int(tag), size=8), "little")
