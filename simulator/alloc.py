"""Allocator tuning for the simulator's processes (glibc; a no-op elsewhere).

A round allocates and frees the same medium-sized numpy arrays thousands of times (one batch's
random draws, report values, frames). By default glibc serves blocks above a dynamic threshold
with fresh ``mmap`` calls and trims freed heap memory back to the kernel, so the next array of
that size page-faults again, page by page. On the 2-core virtual machines we benchmark on a
fault costs about 1-4 µs per 4 KiB page, often more than the arithmetic done on it: generating one
block of 8192 Mallows rankings took 2.4 ms with the default and 1.1 ms with the tuning below.

``keep_freed_memory`` serves blocks up to 32 MiB (glibc's maximum) from the heap and keeps up to
1 GiB of freed memory for reuse. Peak memory is unchanged; memory freed late in a run is
returned when the process exits.
"""

from __future__ import annotations

import contextlib
import ctypes

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for repeated same-size allocations; True if it took effect."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
                    and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    return False
