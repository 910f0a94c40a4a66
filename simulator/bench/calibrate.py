"""The compute-cost model of ``[deployment]``: what one agent's randomizer costs per round.

``ldpsim bench --calibrate`` times each registered protocol's ``respond`` (the agents' local
randomizer, vectorised over the round's asked agents, in this process: the kernel, no
transport) round by round on its example data at ``AGENTS`` agents, best of ``REPEATS``, and
prints seconds per agent of each round beside its report's numbers; ``--write`` stores them in
``scenarios/compute_costs.json``, which a deployment's virtual time reads (``session.network``:
a device of speed s takes this cost / s, scaled by its round's report numbers). A deployment
therefore never times anything while it runs: who misses a deadline is the same on every
machine and backend, and changes only when the file is re-calibrated (then the run keys change
with it, as they hold the costs).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols.local import example_data
from ldpsim.simulator.bench.kernels import data_table, kernel
from ldpsim.simulator.scenario.catalogue import SCENARIO_DIRS
from ldpsim.simulator.scenario.deployment import COSTS_FILE

#: agents per calibration run (large enough that per-call overheads vanish per agent)
AGENTS = 20_000
REPEATS = 3
SEED = 1


def calibrate(name: str, n: int = AGENTS, repeats: int = REPEATS) -> dict[str, Any] | None:
    """Seconds per agent of each round of ``name``'s ``respond`` (``kernels.kernel``, best of
    ``repeats`` round by round) and each round's report length; None for a protocol without
    example data."""
    if example_data(name) is None:
        return None
    runs = [kernel(name, n, SEED) for _ in range(repeats)]
    best = [min(r) for r in zip(*(k["respond_rounds"] for k in runs), strict=True)]
    asked, numbers = runs[0]["asked"], runs[0]["numbers"]
    per_agent = [t / a if a else 0.0 for t, a in zip(best, asked, strict=True)]
    return {"round_s": [float(f"{x:.3g}") for x in per_agent], "numbers": numbers,
            "data": data_table(name, n)}


def measure(names: list[str] | None = None, n: int = AGENTS) -> dict[str, Any]:
    """The costs file's content for ``names`` (default: every registered protocol)."""
    out: dict[str, Any] = {}
    for name in names or sorted(PROTOCOLS):
        entry = calibrate(name, n)
        if entry is not None:
            out[name] = entry
            print(f"  {name:24s} " + "  ".join(f"round {i}: {1e6 * s:8.3f} µs/agent "
                                               f"({k} numbers)" for i, (s, k) in enumerate(
                                                   zip(entry["round_s"], entry["numbers"],
                                                       strict=True))),
                  file=sys.stderr)
    return {
        "about": "seconds per agent of each round of the agents' randomizer (respond, "
                 "vectorised over the round's agents), and each round's report numbers: the "
                 "compute cost of [deployment] (a device of speed s takes cost / s)",
        "command": "ldpsim bench --calibrate --write",
        "machine": {"cores": os.cpu_count(), "processor": platform.processor() or
                    platform.machine(), "python": platform.python_version()},
        "agents": n, "protocols": out}


def main(write: bool = False, n: int = AGENTS) -> int:
    print(f"ldpsim bench --calibrate: each protocol's respond per agent and round, {n:,} "
          f"agents, best of {REPEATS}", file=sys.stderr)
    doc = measure(n=n)
    if write:
        path = Path(SCENARIO_DIRS[-1]) / COSTS_FILE
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0
