"""Seeding and secrets: which party holds which key, on a need-to-know basis.

A run has a public **seed** and the experiment's **secrets** (``protocols.keys.Secrets``): a
master secret of at least 128 bits. ``[runtime] secret`` (``--secret``) says where it comes from
(``secret_kind``):

* not given (``""``, the default): a **fresh** 256-bit secret drawn once per sweep by the
  orchestrator and kept in the results directory as ``secret.key`` (``SECRET_FILE``, the format
  ``ldpsim keys`` writes, owner-only), reused when the sweep resumes there (``sweep_secret``);
  a run executed on its own, outside a sweep, draws one for itself;
* a **file**: the path of a key file ``secret.key`` of ``ldpsim keys`` (or of a results
  directory), to reproduce a run elsewhere or share one secret between sweeps;
* ``"seed"`` (``SEED_ONLY``): derived from each run's seed (``Secrets.of_seed``): reproducible
  from the scenario alone, and no secret against the curator or the pools: one that guesses a
  small seed (or reads it in the scenario) rebuilds every key and row.

With a secret of its own (fresh or a file) a run's seed is first keyed by the master
(``Secrets.run_seed``), so nothing the curator or a pool receives is a function of the seed
alone. The seed keys what is public (the curator's own draws: which agents it asks, its
queries); the master keys what is private (every agent's data and coins, ``protocols.keys``).
The run seed of repetition ``r`` of a scenario with seed ``s`` is derived from (s, r) only.

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
slot. On the local backends it is random per run; on the hosts backend it comes from a token
(``registration_key``): generated with 128 random bits by ``ldpsim keys``, or typed by a person,
then stretched with scrypt and the deployment's salt before any use, so that nothing stored or
seen on the wire lets anyone test a guess of it without paying the KDF.

The same seed and secrets give bit-identical outputs on every backend and pool count.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets as _random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols import build_data
from ldpsim.protocols.keys import AgentKeys, DataKeys, Secrets, data_tag, kdf, run_tag
from ldpsim.protocols.rng import stream_key, stream_keys
from ldpsim.simulator.session.poolstate import PoolState, state_path

#: a typed token shorter than this is refused (``registration_key``)
MIN_TOKEN_CHARS = 16
#: scrypt's cost for a typed token (Percival 2009; RFC 7914): 2^15 x 8 x 128 B = 32 MiB and
#: about 0.1 s per evaluation, paid once per process by a party that holds the token, and once
#: per guess by anyone trying to guess it
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1
#: the key-file format ``ldpsim keys`` writes and reads
KEY_FORMAT = "ldpsim-keys-1"
#: ``[runtime] secret``'s value for the seed-only mode (``Secrets.of_seed``)
SEED_ONLY = "seed"
#: the key file in a results directory that holds the fresh secret of its sweeps
SECRET_FILE = "secret.key"
#: where a run's master secret came from (``secret_kind``)
SECRET_KINDS = ("fresh", "file", "seed")


class KeyFileError(ValueError):
    """A key file or a token that cannot be used (the message says why and what to do)."""


@dataclass(frozen=True)
class PoolKeys:
    """What pool ``pool`` of ``pools`` holds: its agents' keys and nothing about any other
    agent's (see the module docstring)."""

    pool: int
    pools: int
    agents: AgentKeys
    population: bytes
    policy: bytes

    def data_keys(self, tag: int) -> DataKeys:
        """The data keys of the data set tagged ``tag`` that this pool can compute: its own
        agents' and the population's."""
        return DataKeys.of_population(self.population, tag, self.agents)

    def as_dict(self) -> dict[str, Any]:
        """A key file's content (``write_deployment`` writes it), plain JSON."""
        return {"format": KEY_FORMAT, "kind": "pool", "pool": self.pool, "pools": self.pools,
                "agents": [[str(x) for x in node] for node in self.agents.to_list()],
                "population": self.population.hex(), "policy": self.policy.hex()}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PoolKeys:
        try:
            if doc.get("format") != KEY_FORMAT or doc.get("kind") != "pool":
                raise ValueError("not a pool key file of this version")
            return cls(int(doc["pool"]), int(doc["pools"]),
                       AgentKeys.from_list([[int(x) for x in n] for n in doc["agents"]]),
                       bytes.fromhex(doc["population"]), bytes.fromhex(doc["policy"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise KeyFileError(f"not a pool key file written by `ldpsim keys`: {e}") from None


def policy_key(master: bytes, pool: int, pools: int) -> bytes:
    """Pool ``pool`` of ``pools``'s own key for checking the orchestrator's signatures."""
    return kdf(master, "policy", int(pool), int(pools))


def pool_keys(secrets: Secrets, pool: int, pools: int,
              ranges: list[tuple[int, int]]) -> PoolKeys:
    """What pool ``pool`` of ``pools`` receives: the keys of the agents in ``ranges`` only."""
    return PoolKeys(pool, pools, secrets.agents.restrict(ranges), secrets.population_secret,
                    policy_key(secrets.master, pool, pools))


def run_secrets(config: dict[str, Any], secrets: Secrets | None = None) -> Secrets:
    """The run's secrets: ``secrets``, or those of its seed alone."""
    return secrets if secrets is not None else Secrets.of_seed(config["seed"])


def run_id(config: dict[str, Any]) -> int:
    """The run's public id: the tag of its agents' coin keys (``protocols.keys.run_tag``)."""
    return run_tag(config["seed"], config["protocol"], config["params"], config["data"],
                   config.get("collusion"))


def public_config(config: dict[str, Any]) -> dict[str, Any]:
    """What every party may read of a run: ``config`` without the seed, with the run's and its
    data set's public ids and the coalition's stream key."""
    out = {k: v for k, v in config.items() if k != "seed"}
    out["run_id"] = run_id(config)
    out["data_id"] = data_tag(config["seed"])
    out["collusion_key"] = stream_key(config["seed"], "collusion")
    return out


def sign(policy: bytes, blob: bytes) -> bytes:
    """The orchestrator's signature of a run's configuration ``blob`` for one pool."""
    return hmac.new(policy, b"ldpsim\x1fsetup\x1f" + blob, hashlib.sha256).digest()


def verify(policy: bytes, blob: bytes, signature: Any) -> bool:
    """Whether ``signature`` is the orchestrator's for ``blob`` under this pool's key."""
    return type(signature) is bytes and hmac.compare_digest(sign(policy, blob), signature)


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
    out["keys"] = {"curator": stream_key(config["seed"], "curator"),
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


def local_parties(config: dict[str, Any], n: int, secrets: Secrets | None = None,
                  auth: bytes | None = None) -> Parties:
    """The keys of a run of ``n`` agents on a local backend: pool i gets the keys of its block
    (``block_of``) only; ``auth`` a fresh random registration key unless given. With a
    secret of the experiment's own, its agents' device keys are derived once for the sweep and
    each pool's block of them comes with its keys (a pool then derives only its agents' coin
    and data keys of the run)."""
    from ldpsim.simulator.session.common import block_of

    sec = run_secrets(config, secrets)
    pools = int(config["pools"])
    out = []
    for i in range(pools):
        keys = pool_keys(sec, i, pools, [block_of(i, pools, n)])
        if not sec.from_seed:  # a seed's secrets change with every repetition: nothing kept
            a, b = block_of(i, pools, n)
            d0, d1 = device_keys(sec.master, n)
            keys = replace(keys, agents=keys.agents.with_devices(a, d0[a:b], d1[a:b]))
        out.append(keys)
    return Parties(curator_config(config, sec), auth if auth is not None else auth_key(),
                   tuple(out))


def agents_of(config: dict[str, Any]) -> int:
    """How many agents the run's data set holds (built lazily: generated rows are not drawn;
    a file is read)."""
    return build_data(config["data"], 0).n


def auth_key() -> bytes:
    """A fresh random registration key (the local backends: one per run)."""
    return _random.token_bytes(32)


def stretch(token: str, salt: bytes) -> bytes:
    """A typed token through scrypt with the deployment's ``salt`` (``SCRYPT_*``); KeyFileError
    for a token shorter than ``MIN_TOKEN_CHARS``."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise KeyFileError(f"the token has {len(token) if isinstance(token, str) else 0} "
                        f"characters; use at least {MIN_TOKEN_CHARS} (`ldpsim keys` writes one "
                        "of 128 random bits)")
    return hashlib.scrypt(token.encode(), salt=b"ldpsim-token\x1f" + salt, n=SCRYPT_N,
                          r=SCRYPT_R, p=SCRYPT_P, maxmem=1 << 26, dklen=32)


@functools.lru_cache(maxsize=4)
def registration_key(token: str, salt: bytes) -> bytes:
    """The hosts backend's registration key from a token (``stretch``, then one-way): what the
    curator checks registrations with and the pools prove they hold. A party that holds the
    token pays scrypt once per process (the result is kept)."""
    return hmac.new(stretch(token, salt), b"ldpsim\x1fregistration", hashlib.sha256).digest()


def registration_mac(key: bytes, nonce: bytes, run: int, pool: int, pools: int) -> bytes:
    """A pool's answer to the curator's per-run challenge ``nonce``: it proves the pool holds
    the registration key without sending it, and cannot be replayed into another run or slot."""
    msg = b"ldpsim\x1fhello\x1f" + nonce + f"\x1f{int(run)}\x1f{int(pool)}\x1f{int(pools)}".encode()
    return hmac.new(key, msg, hashlib.sha256).digest()


def run_seed(scenario_seed: int, repeat: int) -> int:
    """The seed of repetition ``repeat`` of a scenario (a 63-bit integer)."""
    return stream_key(scenario_seed, "repeat", repeat) >> 1


def run_seeds(scenario_seed: int, first: int, count: int) -> np.ndarray:
    """``run_seed`` of repetitions ``first .. first + count - 1`` at once (a uint64 array)."""
    reps = np.arange(first, first + count, dtype=np.uint64)
    return stream_keys(scenario_seed, "repeat", last=reps) >> np.uint64(1)


# ------------------------------------------------------------------------ the key files


@dataclass(frozen=True)
class Deployment:
    """The orchestrator's key file (``secret.key`` of ``ldpsim keys``): the master secret, the
    salt typed tokens are stretched with, and the pool count the pools' files were written
    for."""

    secrets: Secrets
    salt: bytes
    pools: int

    def as_dict(self) -> dict[str, Any]:
        return {"format": KEY_FORMAT, "kind": "orchestrator", "master": self.secrets.master.hex(),
                "salt": self.salt.hex(), "pools": self.pools}


def read_key_file(path: str | Path) -> dict[str, Any]:
    """A key file's JSON, or KeyFileError naming the file and what is wrong."""
    p = Path(path).expanduser()
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no such key file (`ldpsim keys DIR --pools P` writes them)"
                        ) from None
    except (OSError, ValueError) as e:
        raise KeyFileError(f"{path}: not a readable key file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f"{path}: not a key file written by `ldpsim keys` (format "
                        f"{KEY_FORMAT!r})")
    return doc


def read_deployment(path: str | Path) -> Deployment:
    """The orchestrator's key file ``path`` (``secret.key``)."""
    doc = read_key_file(path)
    try:
        if doc.get("kind") != "orchestrator":
            raise ValueError(f"it is a {doc.get('kind')!r} key file; the orchestrator reads "
                             "secret.key")
        return Deployment(Secrets(bytes.fromhex(doc["master"])), bytes.fromhex(doc["salt"]),
                          int(doc["pools"]))
    except (KeyError, TypeError, ValueError) as e:
        raise KeyFileError(f"{path}: {e}") from None


def read_pool_keys(path: str | Path) -> tuple[PoolKeys, bytes]:
    """A pool's key file ``path``: its keys and the deployment's token salt."""
    doc = read_key_file(path)
    keys = PoolKeys.from_dict(doc)
    try:
        return keys, bytes.fromhex(doc["salt"])
    except (KeyError, TypeError, ValueError) as e:
        raise KeyFileError(f"{path}: no token salt ({e})") from None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only (0600), atomically (a file
    left beside it by an interrupted write is replaced, never reused with its permissions)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_deployment(out: str | Path, pools: int, ranges: list[list[tuple[int, int]]],
                     master: bytes | None = None) -> dict[str, Path]:
    """Write a deployment's key files into the directory ``out``: ``secret.key`` (the
    orchestrator's: the master secret and the salt), ``token`` (128 random bits, for
    registration), and ``pool-I.keys`` for every pool I, holding the keys of the agents in
    ``ranges[I]`` only, with its empty state file ``pool-I.state`` (``poolstate``: the agents'
    lifetime begins with their keys; with a given ``master``, the same agents, an existing one
    is kept). Returns the paths by name."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    dep = Deployment(Secrets(master or _random.token_bytes(32)), _random.token_bytes(16), pools)
    files = {"secret": d / "secret.key", "token": d / "token"}
    write_private(files["secret"], json.dumps(dep.as_dict(), indent=1) + "\n")
    write_private(files["token"], _random.token_hex(16) + "\n")
    for i in range(pools):
        doc = pool_keys(dep.secrets, i, pools, ranges[i]).as_dict()
        doc["salt"] = dep.salt.hex()
        files[f"pool-{i}"] = d / f"pool-{i}.keys"
        write_private(files[f"pool-{i}"], json.dumps(doc, indent=1) + "\n")
        state = state_path(files[f"pool-{i}"])
        if master is None:  # a new secret: new agents, a new lifetime
            state.unlink(missing_ok=True)
        if not state.exists():  # the same master's agents keep their record
            PoolState.create(state, i, pools, policy_key(dep.secrets.master, i, pools))
        files[f"pool-{i}-state"] = state
    return files


@functools.lru_cache(maxsize=8)
def _deployment(path: str, stamp: tuple[int, int, int]) -> Deployment:
    return read_deployment(path)


def secrets_of(runtime: dict[str, Any]) -> Secrets | None:
    """The experiment's secrets a ``[runtime]`` table names: ``secret`` the path of a key file
    ``secret.key`` (read once per process and version of the file); None for ``"seed"``
    (``SEED_ONLY``: each run's seed's own); for none given (``""``), a fresh secret drawn
    for this call alone: a sweep resolves its secret first (``sweep_secret``), so that its
    runs share one."""
    value = runtime.get("secret")
    if value == SEED_ONLY:
        return None
    if not value:
        return Secrets(_random.token_bytes(32))
    path = Path(str(value)).expanduser()
    try:
        st = path.stat()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (0, 0, 0)  # read_deployment says what is wrong
    return _deployment(str(path), stamp).secrets


def secret_kind(runtime: dict[str, Any], directory: str | Path | None = None) -> str:
    """Which kind of secret ``[runtime] secret`` gives a sweep into ``directory``: ``"seed"``
    (``SEED_ONLY``), ``"fresh"`` (none given, or the directory's own ``SECRET_FILE``, which a
    sweep drew) or ``"file"`` (another key file)."""
    value = runtime.get("secret")
    if value == SEED_ONLY:
        return "seed"
    if not value:
        return "fresh"
    if directory is not None:
        own = Path(directory, SECRET_FILE)
        try:
            if Path(str(value)).expanduser().resolve() == own.resolve():
                return "fresh"
        except OSError:
            pass
    return "file"


def write_fresh_secret(path: str | Path, pools: int = 1, master: bytes | None = None) -> Path:
    """Draw a fresh 256-bit master secret (or take ``master``) and write it to ``path`` as
    ``ldpsim keys`` writes ``secret.key`` (with a token salt of its own and ``pools``;
    owner-only, atomically); returns the path."""
    p = Path(path)
    dep = Deployment(Secrets(master or _random.token_bytes(32)), _random.token_bytes(16),
                     int(pools))
    write_private(p, json.dumps(dep.as_dict(), indent=1) + "\n")
    return p


def sweep_secret(runtime: dict[str, Any], directory: str | Path) -> dict[str, Any]:
    """``runtime`` as a sweep into the results directory ``directory`` uses it: with no
    secret given (``""``), ``secret`` the path of the directory's ``SECRET_FILE``, which
    ``keep_secret`` reads or writes; a key file's path or ``"seed"`` stays as it is. The hosts
    backend is left alone: its pools hold their keys from ``ldpsim keys``, so it needs a key
    file (``hosts_auth`` says so)."""
    if runtime.get("secret") or runtime.get("backend") == "hosts":
        return runtime
    return {**runtime, "secret": str(Path(directory, SECRET_FILE).resolve())}


def keep_secret(runtime: dict[str, Any], directory: str | Path, has_records: bool
                ) -> Path | None:
    """Make sure the fresh secret a sweep into ``directory`` uses exists (``runtime`` as
    ``sweep_secret`` resolved it): the directory's ``SECRET_FILE`` is checked if it exists (a
    resumed sweep keeps its secret), else drawn and written (``write_fresh_secret``). Returns
    its path, or None when the sweep uses another kind of secret (``secret_kind``).

    Raises
    ------
    KeyFileError
        The file is no key file; or it is missing from a directory that holds records
        (``has_records``): they were run with another secret, which must be given.
    """
    if secret_kind(runtime, directory) != "fresh" or not runtime.get("secret"):
        return None
    own = Path(directory, SECRET_FILE)
    if own.is_file():
        read_deployment(own)  # KeyFileError naming the file if it is not one
        return own
    if has_records:
        raise KeyFileError(
            f"{directory} holds runs but no {SECRET_FILE}: they were run with another secret; "
            f"give it (--secret FILE, or --secret {SEED_ONLY} if they were run with the "
            "seed-only secret), or use another --out")
    Path(directory).mkdir(parents=True, exist_ok=True)
    return write_fresh_secret(own, int(runtime.get("pools") or 1))


def hosts_auth(runtime: dict[str, Any]) -> tuple[Deployment, bytes]:
    """The hosts backend's deployment (``[runtime] secret``, the key file ``secret.key``) and
    registration key: from ``[runtime] token``, else the ``token`` file beside the key file
    (``ldpsim keys`` writes both). KeyFileError says what is missing."""
    path = runtime.get("secret")
    if not path or path == SEED_ONLY:
        raise KeyFileError("[runtime] secret: the hosts backend needs the deployment's keys "
                           "(--secret): run `ldpsim keys DIR --pools P --agents N` and give the "
                           "curator DIR/secret.key, each pool its own DIR/pool-I.keys; allowed: "
                           f"the path of a secret.key (not {SEED_ONLY!r}, nor none)")
    deployment = read_deployment(path)
    return deployment, registration_key(token_of(runtime.get("token"), path), deployment.salt)


def token_of(token: str | None, beside: str | Path) -> str:
    """The registration token: ``token`` if given, else the ``token`` file in the directory of
    the key file ``beside``."""
    if token:
        return token
    p = Path(beside).expanduser().parent / "token"
    try:
        return p.read_text().strip()
    except OSError:
        raise KeyFileError(f"no token: give --token, or put the token file `ldpsim keys` wrote "
                           f"at {p}") from None


def fingerprint_mac(secrets: Secrets, salt: bytes) -> str:
    """What a results directory records of the secret its runs used: a MAC under a salt of
    the directory's own (never the secret, never an unsalted hash of it)."""
    return hmac.new(secrets.master, b"ldpsim\x1ffingerprint\x1f" + salt,
                    hashlib.sha256).hexdigest()[:24]
