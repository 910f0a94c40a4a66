"""A pool's durable memory: the runs its agents answered and what they spent, across restarts.

An independent pool (``ldpsim agents``, the hosts backend) refuses a run it has answered (its
agents' coins are spent: the same coins under other questions would tell more than ε) and
charges every round to its agents' lifetime ledger on the run's data set (``policy.Ledger``).
Both must outlive the pool's process: a curator can make a pool exit (DONE), and a supervisor
starts it again with the same command. They live in the pool's state file, ``pool-I.state``
beside its key file ``pool-I.keys``:

* ``ldpsim keys`` writes an empty one with the keys (the agents' lifetime begins with their
  keys); ``ldpsim agents --new-lifetime`` writes one where none exists (a new machine, a state
  file lost on purpose), and never over an existing one;
* a pool refuses to start on a missing, unreadable or altered state file (``StateFileError``,
  one line): nothing ever resets the ledger silently;
* it is rewritten whole, atomically (a temporary file, fsync, rename, fsync of the directory),
  before a report that spends leaves the pool (``PoolSession``): a pool killed at any moment
  has charged at least what it sent;
* one process at a time: ``lock`` takes an exclusive ``fcntl.flock`` on ``pool-I.state.lock``
  (beside it; the state file itself is replaced on every write, so it cannot carry the lock)
  for the pool's life. A second ``ldpsim agents`` on the same state file is refused with one
  line: it would keep its own memory, answer again a run the first answered (the same coins
  under other questions) and erase the other's writes. The operating system drops the lock
  when the process ends, however it ends (a crash or SIGKILL included).

The file is ``MAGIC``, then a MAC of the body under a key derived from the pool's policy key
(so a state file is this pool's of this deployment, and a changed byte is caught), then the
body (msgpack): the pool, the answered run ids each with the digest of the signed configuration
it answered, and each data set's ledger run-length encoded (spending is piecewise constant over
a block: a run charges a range of agents alike).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols.keys import kdf
from ldpsim.simulator.session.common import span
from ldpsim.simulator.session.piecewise import Piecewise
from ldpsim.simulator.session.policy import Ledger

MAGIC = b"ldpsim pool state 1\n"
_MAC = 32


class StateFileError(ValueError):
    """A pool's state file that cannot be used (the message says why and what to do)."""


def state_path(keyfile: str | Path) -> Path:
    """The state file beside a pool's key file: ``pool-I.keys`` -> ``pool-I.state``."""
    return Path(keyfile).with_suffix(".state")


def lock_path(state: str | Path) -> Path:
    """The lock file of a state file: ``pool-I.state`` -> ``pool-I.state.lock``."""
    state = Path(state)
    return state.with_name(state.name + ".lock")


def lock(state: str | Path) -> int:
    """Hold the state file ``state`` for this process: an exclusive ``flock`` on its lock file
    (``lock_path``), created if need be, with this process's id written in it for the message
    another process gets. Returns the lock's file descriptor: keep it open for the pool's life
    (closed, or the process ended, the lock is free). StateFileError (one line) when another
    process holds it, or the lock file cannot be opened."""
    state = Path(state)
    path = lock_path(state)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise StateFileError(f"state file {state}: cannot open its lock file {path}: "
                             f"{e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = b""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0)
        os.close(fd)
        who = holder.decode("ascii", "replace").strip()
        raise StateFileError(
            f"state file {state} is in use by another running pool"
            + (f" (process {who})" if who.isdigit() else "")
            + ": two processes on one state file would each answer what the other answered; "
            "stop the other one first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _mac_key(policy: bytes) -> bytes:
    return kdf(policy, "pool state")


def _encode_ledger(stores: dict[int, Piecewise]) -> list[list[Any]]:
    """Each data set's spending (``Ledger.stores``) as [data_id, first agent, agents, run
    starts, run values] (adjacent runs of equal values joined)."""
    out = []
    for data_id, store in stores.items():
        starts, values = store.runs()
        out.append([int(data_id), int(store.lo), len(store),
                    (starts - store.lo).astype("<i8").tobytes(),
                    np.asarray(values, dtype="<f8").tobytes()])
    return out


def _decode_ledger(items: Any) -> dict[int, Piecewise]:
    out: dict[int, Piecewise] = {}
    for data_id, first, n, starts, values in items:
        s = np.frombuffer(starts, dtype="<i8")
        v = np.frombuffer(values, dtype="<f8")
        if len(s) != len(v) or (len(s) and (s[0] != 0 or np.any(np.diff(s) <= 0)
                                            or s[-1] >= n)) or (n and not len(s)):
            raise ValueError("a ledger's runs do not cover its agents")
        if not np.all(np.isfinite(v) & (v >= 0)):
            raise ValueError("a ledger holds a negative or non-finite spend")
        first = int(first)
        out[int(data_id)] = Piecewise.of_runs(first, first + int(n), s.astype(np.int64) + first,
                                              v.astype(np.float64))
    return out


class PoolState:
    """The state file of pool ``pool`` of ``pools``, checked with its policy key.

    Parameters
    ----------
    path : Path
        The state file (``state_path`` of the key file).
    pool, pools : int
        Whose it is.
    policy : bytes
        The pool's policy key (``seeding.PoolKeys.policy``): the state file's MAC key is
        derived from it.
    """

    def __init__(self, path: str | Path, pool: int, pools: int, policy: bytes) -> None:
        self.path = Path(path)
        self.pool, self.pools = int(pool), int(pools)
        self._key = _mac_key(policy)
        #: answered run id -> digest of the signed configuration answered
        self.answered: dict[int, bytes] = {}
        #: data id -> the agents' spending on it, as ``policy.Ledger`` holds it (``stores``)
        self.ledger: dict[int, Piecewise] = {}

    # ------------------------------------------------------------------ reading and writing

    @classmethod
    def create(cls, path: str | Path, pool: int, pools: int, policy: bytes) -> PoolState:
        """A new lifetime: an empty state file at ``path``, never over an existing one."""
        st = cls(path, pool, pools, policy)
        if st.path.exists() or st.path.is_symlink():
            raise StateFileError(
                f"state file {st.path} exists already: a new lifetime would forget what the "
                "agents answered and spent; start without --new-lifetime, or move it away "
                "first if you mean to")
        st.save()
        return st

    @classmethod
    def read(cls, path: str | Path, pool: int, pools: int, policy: bytes) -> PoolState:
        """The state file at ``path``; StateFileError if it is missing, unreadable, altered
        or another pool's."""
        st = cls(path, pool, pools, policy)
        p = st.path
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            raise StateFileError(
                f"state file {p} not found: it holds the runs this pool's agents answered and "
                "what they spent; restore its newest copy, or start a new lifetime with "
                "--new-lifetime (only if these agents never answered anything, or you accept "
                "that they answer again, with the same coins)") from None
        except OSError as e:
            raise StateFileError(f"state file {p}: cannot read it: {e.strerror}") from None
        why = st._load(raw)
        if why is not None:
            raise StateFileError(
                f"state file {p}: {why}; refusing to start (the agents' record must never be "
                "reset silently): restore its newest copy (an older one has forgotten the runs "
                "answered since), or move it away and start a new lifetime with "
                "--new-lifetime")
        return st

    def _load(self, raw: bytes) -> str | None:
        """Take the state from ``raw``; why it cannot be used, or None."""
        if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + _MAC:
            return "not a pool state file (empty, truncated or another format)"
        mac, body = raw[len(MAGIC):len(MAGIC) + _MAC], raw[len(MAGIC) + _MAC:]
        if not hmac.compare_digest(mac, self._mac(body)):
            return ("altered, truncated, or another pool's or deployment's (its MAC does not "
                    "check under this pool's keys)")
        try:
            doc = msgpack.unpackb(body, raw=False, strict_map_key=False)
            pool, pools = int(doc["pool"]), int(doc["pools"])
            answered = {int(r): bytes(d) for r, d in doc["answered"]}
            ledger = _decode_ledger(doc["ledger"])
        except Exception as e:
            return f"unreadable ({type(e).__name__}: {e})"
        if (pool, pools) != (self.pool, self.pools):
            return f"it is pool {pool} of {pools}'s, not pool {self.pool} of {self.pools}'s"
        self.answered, self.ledger = answered, ledger
        return None

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, MAGIC + body, hashlib.sha256).digest()

    def save(self, answered: dict[int, bytes] | None = None,
             ledger: Ledger | None = None) -> None:
        """Write the state (``answered`` and ``ledger`` if given) atomically and durably:
        a temporary file beside it, fsync, rename over the state file, fsync of the
        directory."""
        if answered is not None:
            self.answered = dict(answered)
        if ledger is not None:
            self.ledger = {d: st.copy() for d, st in ledger.stores().items()}
        items = _encode_ledger(self.ledger)
        body = msgpack.packb({"pool": self.pool, "pools": self.pools,
                              "answered": sorted([r, d] for r, d in self.answered.items()),
                              "ledger": items}, use_bin_type=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + self._mac(body) + body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def restore(self, ledger: Ledger) -> None:
        """Give ``ledger`` the spending this state holds."""
        ledger.load_stores(self.ledger)


class Reservations:
    """The spend a pool's state file holds ahead of its agents in the current run
    (``PoolSession``): the first batch of a round reserves the round's ε for every agent of
    the block that has not answered it (the file is then written), later batches of the round
    only move their agents' spend from the reservation to the ledger (nothing to write). The
    file thus holds at least what any report sent has spent, with one synced write per round
    instead of one per batch; the pool writes the exact ledger once the run has ended. Runs of
    agents alike (``piecewise``), as the odometer's."""

    def __init__(self) -> None:
        #: the run's rounds whose spend the state file holds in advance
        self.rounds: set[int] = set()
        #: per agent of the block: what the file holds beyond its exact spending (None: none)
        self.spend: Piecewise | None = None

    def reserve(self, rnd: int, eps: float, charged: np.ndarray, start: int, stop: int
                ) -> bool:
        """The odometer has just charged the agents ``charged`` (ids in the block ``[start,
        stop)``) round ``rnd``'s ``eps``: reserve the round for the block if it is new (True:
        write the file), and move their spend from the reservation to the ledger."""
        if self.spend is None:
            self.spend = Piecewise(start, stop, 0.0)
        new = rnd not in self.rounds
        if new:
            self.rounds.add(rnd)
            self.spend.update(start, stop, "add", eps)
        at = span(np.asarray(charged, dtype=np.int64))
        if isinstance(at, slice):
            self.spend.update(at.start, at.stop, "sub", eps)
        else:
            self.spend.update_ids(at, "sub", eps)
        return new

    def on(self, ledger: Ledger, data_id: int, start: int, stop: int) -> Ledger:
        """``ledger`` with the reserved spend of the block ``[start, stop)`` on top (a copy;
        ``ledger`` itself when nothing is reserved)."""
        if self.spend is None:
            return ledger
        out = Ledger()
        out.load_stores(ledger.stores())
        out.block(data_id, start, stop).store.add_positive(self.spend)
        return out
