"""Key files and tokens: where the experiment's master secret and the hosts' keys are kept.

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

**The hosts' key files** (``HostKeys``, written by ``ldpsim keys``, ``write_host_keys``): the
orchestrator's ``secret.key`` (the master secret and the salt typed tokens are stretched with),
each pool's ``pool-I.keys`` (its ``seeding.PoolKeys`` only), and the registration ``token``.

**Tokens.** On the hosts backend the registration key comes from a token
(``registration_key``): generated with 128 random bits by ``ldpsim keys``, or typed by a person,
then stretched with scrypt and the key files' salt before any use, so that nothing stored or
seen on the wire lets anyone test a guess of it without paying the KDF.

Which party receives which key is ``seeding``'s; signatures and MACs are ``signing``'s.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets as _random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpsim.protocols.keys import AgentKeys, Secrets
from ldpsim.simulator.session.poolstate import PoolState, state_path
from ldpsim.simulator.session.seeding import PoolKeys, pool_keys
from ldpsim.simulator.session.signing import policy_key

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
class HostKeys:
    """The orchestrator's key file (``secret.key`` of ``ldpsim keys``): the master secret, the
    salt typed tokens are stretched with, and the pool count the pools' files were written
    for."""

    secrets: Secrets
    salt: bytes
    pools: int

    def as_dict(self) -> dict[str, Any]:
        return {"format": KEY_FORMAT, "kind": "orchestrator", "master": self.secrets.master.hex(),
                "salt": self.salt.hex(), "pools": self.pools}


def pool_key_doc(keys: PoolKeys, salt: bytes) -> dict[str, Any]:
    """A pool's key file's content (``write_host_keys`` writes it), plain JSON: its keys and
    the token salt."""
    return {"format": KEY_FORMAT, "kind": "pool", "pool": keys.pool, "pools": keys.pools,
            "agents": [[str(x) for x in node] for node in keys.agents.to_list()],
            "population": keys.population.hex(), "policy": keys.policy.hex(),
            "salt": salt.hex()}


def pool_keys_of(doc: dict[str, Any]) -> PoolKeys:
    """The keys in a pool's key file's content ``doc``; KeyFileError if it is none."""
    try:
        if doc.get("format") != KEY_FORMAT or doc.get("kind") != "pool":
            raise ValueError("not a pool key file of this version")
        return PoolKeys(int(doc["pool"]), int(doc["pools"]),
                        AgentKeys.from_list([[int(x) for x in n] for n in doc["agents"]]),
                        bytes.fromhex(doc["population"]), bytes.fromhex(doc["policy"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise KeyFileError(f"not a pool key file written by `ldpsim keys`: {e}") from None


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


def read_host_keys(path: str | Path) -> HostKeys:
    """The orchestrator's key file ``path`` (``secret.key``)."""
    doc = read_key_file(path)
    try:
        if doc.get("kind") != "orchestrator":
            raise ValueError(f"it is a {doc.get('kind')!r} key file; the orchestrator reads "
                             "secret.key")
        return HostKeys(Secrets(bytes.fromhex(doc["master"])), bytes.fromhex(doc["salt"]),
                          int(doc["pools"]))
    except (KeyError, TypeError, ValueError) as e:
        raise KeyFileError(f"{path}: {e}") from None


def read_pool_keys(path: str | Path) -> tuple[PoolKeys, bytes]:
    """A pool's key file ``path``: its keys and the key files' token salt."""
    doc = read_key_file(path)
    keys = pool_keys_of(doc)
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


def write_host_keys(out: str | Path, pools: int, ranges: list[list[tuple[int, int]]],
                    master: bytes | None = None) -> dict[str, Path]:
    """Write the hosts' key files into the directory ``out``: ``secret.key`` (the
    orchestrator's: the master secret and the salt), ``token`` (128 random bits, for
    registration), and ``pool-I.keys`` for every pool I, holding the keys of the agents in
    ``ranges[I]`` only, with its empty state file ``pool-I.state`` (``poolstate``: the agents'
    lifetime begins with their keys; with a given ``master``, the same agents, an existing one
    is kept). Returns the paths by name."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    host = HostKeys(Secrets(master or _random.token_bytes(32)), _random.token_bytes(16), pools)
    files = {"secret": d / "secret.key", "token": d / "token"}
    write_private(files["secret"], json.dumps(host.as_dict(), indent=1) + "\n")
    write_private(files["token"], _random.token_hex(16) + "\n")
    for i in range(pools):
        doc = pool_key_doc(pool_keys(host.secrets, i, pools, ranges[i]), host.salt)
        files[f"pool-{i}"] = d / f"pool-{i}.keys"
        write_private(files[f"pool-{i}"], json.dumps(doc, indent=1) + "\n")
        state = state_path(files[f"pool-{i}"])
        if master is None:  # a new secret: new agents, a new lifetime
            state.unlink(missing_ok=True)
        if not state.exists():  # the same master's agents keep their record
            PoolState.create(state, i, pools, policy_key(host.secrets.master, i, pools))
        files[f"pool-{i}-state"] = state
    return files


@functools.lru_cache(maxsize=8)
def _host_keys(path: str, stamp: tuple[int, int, int]) -> HostKeys:
    return read_host_keys(path)


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
        stamp = (0, 0, 0)  # read_host_keys says what is wrong
    return _host_keys(str(path), stamp).secrets


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
    host = HostKeys(Secrets(master or _random.token_bytes(32)), _random.token_bytes(16),
                    int(pools))
    write_private(p, json.dumps(host.as_dict(), indent=1) + "\n")
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
        read_host_keys(own)  # KeyFileError naming the file if it is not one
        return own
    if has_records:
        raise KeyFileError(
            f"{directory} holds runs but no {SECRET_FILE}: they were run with another secret; "
            f"give it (--secret FILE, or --secret {SEED_ONLY} if they were run with the "
            "seed-only secret), or use another --out")
    Path(directory).mkdir(parents=True, exist_ok=True)
    return write_fresh_secret(own, int(runtime.get("pools") or 1))


def stretch(token: str, salt: bytes) -> bytes:
    """A typed token through scrypt with the key files' ``salt`` (``SCRYPT_*``); KeyFileError
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


def hosts_auth(runtime: dict[str, Any]) -> tuple[HostKeys, bytes]:
    """The hosts backend's key file (``[runtime] secret``, the orchestrator's ``secret.key``) and
    registration key: from ``[runtime] token``, else the ``token`` file beside the key file
    (``ldpsim keys`` writes both). KeyFileError says what is missing."""
    path = runtime.get("secret")
    if not path or path == SEED_ONLY:
        raise KeyFileError("[runtime] secret: the hosts backend needs the deployment's keys "
                           "(--secret): run `ldpsim keys DIR --pools P --agents N` and give the "
                           "curator DIR/secret.key, each pool its own DIR/pool-I.keys; allowed: "
                           f"the path of a secret.key (not {SEED_ONLY!r}, nor none)")
    host = read_host_keys(path)
    return host, registration_key(token_of(runtime.get("token"), path), host.salt)


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
