"""Allocator tuning for the simulator's processes (glibc; a no-op elsewhere), opt-in.

A round allocates and frees the same medium-sized numpy arrays thousands of times (one batch's
random draws, report values, frames). By default glibc serves blocks above a dynamic threshold
with fresh ``mmap`` calls and trims freed heap memory back to the kernel, so the next array of
that size page-faults again, page by page, and a page fault can cost more than the arithmetic
done on the page (the measured costs are in docs/performance.md).

``keep_freed_memory`` serves blocks up to 32 MiB (glibc's maximum) from the heap and keeps up to
1 GiB of freed memory for reuse. Peak memory is unchanged; memory freed late in a run is
returned when the process exits.

The tuning is opt-in: ``ldpsim bench`` turns it on (``request_tuning``), and otherwise every
ldpsim process applies it only when the environment variable ``LDPSIM_TUNE_MALLOC`` is ``1``
(``tune_if_requested``: the command line at start-up, every curator and pool process as it
starts). Child processes inherit the environment, so the pools follow their parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

from ldpsim import environment

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: The environment variable that turns the tuning on ("1") in every ldpsim process.
TUNE_MALLOC_ENV = environment.TUNE_MALLOC


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for repeated same-size allocations; True if it took effect."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
                    and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    return False


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
