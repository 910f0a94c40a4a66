"""The faults a scenario injects into a pool (``[faults]``, ``RunConfig.faults_of``).

Each fault names a round and an action: ``kill`` (the pool's process dies; in one process, a
dead pool is a silent one), ``silent`` (the pool stops answering) or ``raise`` (the pool
crashes: the run fails).
"""

from __future__ import annotations

import os
from typing import Any


def inject(faults: list[dict[str, Any]], rnd: int, index: int, can_die: bool) -> bool:
    """Carry out pool ``index``'s ``faults`` of round ``rnd`` (``can_die``: it may kill its
    own process); True: the pool falls silent."""
    silent = False
    for f in faults:
        if int(f.get("round", 0)) == rnd:
            action = f.get("action")
            if action == "kill" and can_die:
                os.kill(os.getpid(), 9)
            elif action == "kill":  # in-process backend: a dead pool is a silent one
                silent = True
            elif action == "silent":
                silent = True
            elif action == "raise":
                raise RuntimeError(f"injected fault in pool {index}, round {rnd}")
    return silent
