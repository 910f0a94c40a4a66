"""Signatures and MACs: what proves a message came from the party that holds a key.

* the orchestrator signs each run's configuration for every pool under that pool's own
  **policy key** (``policy_key``, ``sign``); a pool checks it (``verify``), so the curator
  that relays the configuration cannot alter a byte of it;
* a pool proves it may take a slot with a MAC of the curator's per-run challenge under the
  **registration key** (``registration_mac``): random per run on the local backends
  (``auth_key``), from a token on the hosts backend (``keyfiles.registration_key``);
* a results directory records of the secret its runs used only a MAC under a salt of its own
  (``fingerprint_mac``).

Which party receives which key is ``seeding``'s; the files keys are kept in are ``keyfiles``'.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets as _random
from typing import Any

from ldpsim.protocols.keys import Secrets, kdf


def policy_key(master: bytes, pool: int, pools: int) -> bytes:
    """Pool ``pool`` of ``pools``'s own key for checking the orchestrator's signatures."""
    return _policy_key(master, int(pool), int(pools))


@functools.lru_cache(maxsize=1024)
def _policy_key(master: bytes, pool: int, pools: int) -> bytes:
    """``policy_key``, derived once per master and slot: every run of a sweep under the
    experiment's secret (or of one repetition under its seed's) signs with the same keys."""
    return kdf(master, "policy", pool, pools)


def sign(policy: bytes, blob: bytes) -> bytes:
    """The orchestrator's signature of a run's configuration ``blob`` for one pool."""
    return hmac.digest(policy, b"ldpsim\x1fsetup\x1f" + blob, "sha256")


def verify(policy: bytes, blob: bytes, signature: Any) -> bool:
    """Whether ``signature`` is the orchestrator's for ``blob`` under this pool's key."""
    return type(signature) is bytes and hmac.compare_digest(sign(policy, blob), signature)


def auth_key() -> bytes:
    """A fresh random registration key (the local backends: one per run)."""
    return _random.token_bytes(32)


def registration_mac(key: bytes, nonce: bytes, run: int, pool: int, pools: int) -> bytes:
    """A pool's answer to the curator's per-run challenge ``nonce``: it proves the pool holds
    the registration key without sending it, and cannot be replayed into another run or slot."""
    msg = b"ldpsim\x1fhello\x1f" + nonce + f"\x1f{int(run)}\x1f{int(pool)}\x1f{int(pools)}".encode()
    return hmac.digest(key, msg, "sha256")


def fingerprint_mac(secrets: Secrets, salt: bytes) -> str:
    """What a results directory records of the secret its runs used: a MAC under a salt of
    the directory's own (never the secret, never an unsalted hash of it)."""
    return hmac.new(secrets.master, b"ldpsim\x1ffingerprint\x1f" + salt,
                    hashlib.sha256).hexdigest()[:24]
