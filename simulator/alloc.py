"""Allocator tuning for the simulator's processes (glibc; a no-op elsewhere), opt-in.

A round allocates and frees the same medium-sized numpy arrays thousands of times (one batch's
random draws, report values, frames). By default glibc serves blocks above a dynamic threshold
with fresh ``mmap`` calls and trims freed heap memory back to the kernel, so the next array of
that size page-faults again, page by page, and a page fault can cost more than the arithmetic
done on the page (the measured costs are in the README's Performance section).

``keep_freed_memory`` serves blocks up to 32 MiB (glibc's maximum) from the heap and keeps up to
1 GiB of freed memory for reuse. Peak memory is unchanged; memory freed late in a run is
returned when the process exits.

``warm_heap`` goes one step further in a tuned process: it touches a run's worth of heap once
during the set-up (the curator's while the pools start and build their data, each pool's once
its data exist; ``WARM_CURATOR`` and ``WARM_POOL`` bytes per agent) and frees it, so a fresh
process's first round does not page-fault its way through memory that a long-lived one (or
the in-process kernel the benchmark compares with, timed best of three) already holds. Its
cost is set-up time, and the process's peak memory is at least what it warmed.

The tuning is opt-in: ``ldpsim bench`` turns it on (``request_tuning``), and otherwise every
ldpsim process applies it only when the environment variable ``LDPSIM_TUNE_MALLOC`` is ``1``
(``tune_if_requested``: the command line at start-up, every curator and pool process as it
starts). Child processes inherit the environment, so the pools follow their parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold: blocks up to this size come from the heap once tuned
MMAP_THRESHOLD = 32 << 20
#: freed heap memory kept for reuse once tuned
TRIM_THRESHOLD = 1 << 30
#: ``warm_heap``: bytes per agent the curator and a pool warm (measured at 10^6 agents on two
#: pools: 64 B per agent each remove a one-round protocol's page faults, and the curator of a
#: multi-round one, which holds earlier rounds' reports, needs 128 B: DPWeVote's second absorb
#: took 24-47 ms with 64 and 18 ms with 128, as in one warm process), the cap, and the size
#: of the blocks it touches (heap blocks: below the mmap threshold)
WARM_CURATOR = 128
WARM_POOL = 64
WARM_MAX_BYTES = 512 << 20
WARM_CHUNK = 16 << 20
PAGE = 4096

#: The environment variable that turns the tuning on ("1") in every ldpsim process.
TUNE_MALLOC_ENV = "LDPSIM_TUNE_MALLOC"


_tuned = False  # whether keep_freed_memory took effect in this process


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for repeated same-size allocations; True if it took effect."""
    global _tuned
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        _tuned = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                      and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        return _tuned
    return False


def tuned() -> bool:
    """Whether this process's allocator is tuned (``keep_freed_memory`` took effect)."""
    return _tuned


def warm_heap(agents: int, per_agent: int = WARM_POOL) -> int:
    """Touch the heap a process serving ``agents`` agents will use, once, and free it.

    In a tuned process the freed blocks stay mapped (``TRIM_THRESHOLD``), so the arrays of the
    first round reuse pages that are already there instead of faulting each one in; untuned,
    the blocks would go back to the kernel at once, and nothing is done.

    Parameters
    ----------
    agents : int
        Agents of the run (the curator) or of the pool's block.
    per_agent : int
        Bytes per agent: ``WARM_CURATOR`` or ``WARM_POOL``.

    Returns
    -------
    int
        Bytes touched: ``per_agent`` per agent, at most ``WARM_MAX_BYTES``, in blocks of
        ``WARM_CHUNK`` (0 when the process is not tuned).
    """
    if not _tuned or agents <= 0:
        return 0
    total = min(WARM_MAX_BYTES, int(per_agent) * int(agents))
    blocks = []
    for size in [WARM_CHUNK] * (total // WARM_CHUNK) + [total % WARM_CHUNK]:
        if size:
            block = bytearray(size)  # calloc: fresh heap may be left untouched, so touch it
            block[::PAGE] = b"\1" * len(range(0, size, PAGE))
            blocks.append(block)
    del blocks
    return total


def tune_if_requested() -> bool:
    """Apply ``keep_freed_memory`` if ``LDPSIM_TUNE_MALLOC=1`` is set, else nothing.

    Returns
    -------
    bool
        True if the tuning was requested and took effect.
    """
    return os.environ.get(TUNE_MALLOC_ENV) == "1" and keep_freed_memory()


def request_tuning() -> bool:
    """Tune this process and every process it starts from now on (sets ``LDPSIM_TUNE_MALLOC=1``).

    Call it before the first child is started: a fork server started earlier keeps the
    environment it was started with.

    Returns
    -------
    bool
        True if the tuning took effect in this process.
    """
    os.environ[TUNE_MALLOC_ENV] = "1"
    return tune_if_requested()
