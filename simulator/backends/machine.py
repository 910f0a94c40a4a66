"""What this machine offers the runs: the cores a process may run on."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on (what ``busy_cores`` is weighed against)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
