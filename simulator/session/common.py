"""What the curator's and the pools' sessions share: limits, the run's failure, the agent
layout, and a bounded per-peer memory; and ``counted``, the count and noun of every message
(the rooms above use it too)."""

from __future__ import annotations

import resource
import traceback
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.simulator.session.runconfig import DEFAULTS

#: Invalid envelopes in one frame after which the rest of the frame is dropped unread (one
#: more rejection): a frame of a million garbage objects costs what 64 do.
MAX_REJECTS_PER_FRAME = 64
#: Peers the curator remembers (said "ready", got ERROR replies, failed authentication):
#: the oldest are forgotten first, so a flood of new identities cannot grow memory or push an
#: honest pool out for good (an idle pool repeats its "ready" every 0.5 s).
MAX_PEERS = 4096
#: Failed registrations after which a peer identity is ignored for the rest of the run.
MAX_AUTH_FAILURES = 3
#: Characters of a rejection reason that are kept (reasons quote peers' input).
MAX_REASON = 300
#: Rounds a pool keeps an agent's answers for (a curator asking more is refused).
MAX_ROUNDS = 10**4


class RunFailed(RuntimeError):
    """A run cannot complete (a process raised, nobody registered, ...)."""


@dataclass
class Limits:
    """Validation limits and timeouts of a session (defaults from ``runconfig.DEFAULTS``)."""

    max_frame_bytes: int = DEFAULTS.max_frame_bytes
    max_envelope_bytes: int = DEFAULTS.max_envelope_bytes
    #: inactivity timeout while waiting for registrations or reports
    timeout_s: float = DEFAULTS.timeout_s
    #: how long to wait for pools' DONE stats, plus ``done_s_per_agent`` an agent of the
    #: largest pool (its statistics read every agent's odometer: seconds at 10^8 agents)
    done_timeout_s: float = 2.0
    done_s_per_agent: float = 2e-8
    max_error_replies: int = 100  # ERROR envelopes sent back per peer per run
    max_rejections: int = 200  # rejection records kept per run (all are counted)

    @classmethod
    def of_runtime(cls, runtime: dict[str, Any]) -> Limits:
        """The limits a scenario's validated ``[runtime]`` table sets."""
        return cls(max_frame_bytes=runtime["max_frame_bytes"],
                   max_envelope_bytes=runtime["max_envelope_bytes"],
                   timeout_s=runtime["timeout_s"])


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun, singular for one: ``counted(1, "pool")`` is ``"1 pool"``,
    ``counted(2, "pool")`` ``"2 pools"`` (``plural``: when it is not the noun and an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def block_of(index: int, n_pools: int, n: int) -> tuple[int, int]:
    """Agents ``[start, stop)`` hosted by pool ``index`` of ``n_pools``."""
    return index * n // n_pools, (index + 1) * n // n_pools


def span(ids: np.ndarray) -> slice | np.ndarray:
    """Strictly increasing ids as a slice when they form one range (in-place slice updates
    are much faster than fancy indexing), else the ids themselves."""
    if len(ids) and int(ids[-1]) - int(ids[0]) + 1 == len(ids):
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids


def written_zeros(shape: int | tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """A zero array whose pages are faulted in by writes, for arrays a round updates in place.

    ``np.zeros`` of a large array returns untouched memory (``calloc``): the first read of a
    page maps the kernel's shared zero page, and the first write to it after that copies it
    into a page of its own, a second fault. An array that a round first reads and then updates
    (``counter[ids] += sizes``) pays both faults for every page, inside the round. On the
    project's 2-vCPU machine that cost about 10 µs per 4 KiB page, against about 1.3 µs for a
    page first touched by a write: 5-6 ms for a 2 MB array read and updated slice by slice
    against 0.6 ms to write it full of zeros first (docs/performance.md). This
    array is written once, here, so every later access finds its pages present.

    Parameters
    ----------
    shape : int or tuple of int
        As for ``np.zeros``.
    dtype : data-type
        As for ``np.zeros``.

    Returns
    -------
    numpy.ndarray
        Zeros, every page present.
    """
    return np.full(shape, 0, dtype=dtype)


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def out_of_memory(e: MemoryError) -> str:
    """The one-line error of a curator that could not allocate what its run needs."""
    return (f"the curator ran out of memory: {e or 'MemoryError'}; the run needs more memory "
            "than this machine gives it (a smaller [data] n, or fewer numbers per report)")


class protocol_code:  # noqa: N801  (a context manager, named as the function it was)
    """The protocol's own curator code failed: that ends the run (``RunFailed`` with the
    traceback), unlike a peer's bad input, which is only ever a rejection. A context
    manager: ``with protocol_code("set-up"): ...``."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> bool:
        if kind is None or issubclass(kind, RunFailed) or not issubclass(kind, Exception):
            return False  # nothing failed, the run's own failure, or not an error at all
        if issubclass(kind, MemoryError):
            raise RunFailed(out_of_memory(exc)) from None
        raise RunFailed(f"the protocol's curator code failed in {self.what}:\n"
                        + "".join(traceback.format_exception(kind, exc, tb))) from None


class Bounded(OrderedDict):
    """A dict that forgets its least recently set keys beyond ``limit`` entries."""

    def __init__(self, limit: int = MAX_PEERS) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value) -> None:
        if key in self:
            self.move_to_end(key)
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)
