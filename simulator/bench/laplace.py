"""Benchmark: the exact discrete Laplace sampler against the floating-point sampler it replaced
(``python -m ldpsim.simulator.bench.laplace [N] [REPEATS]``).

N values (default 10^6) of one column at the Laplace mechanism's scale t = 2^20, each from its
agent's own words (``protocols.mechanisms.dlap``, the compiled ``dlap_agents`` with the agents'
keys given), by

* **lane engine**: 16 streams side by side, one word per step each, masks instead of branches
  (``protocols/_dlapc.c``; on a CPU without AVX-512 the stream engine runs instead, and the row
  says so);
* **stream engine**: one stream after the other, a branch on every coin flip (``scalar=True``:
  the sampler as it was before the lane engine);
* **floating-point sampler**: one uniform per value (``rng.uniform``), the inverse CDF
  (``rng.laplace_from_uniform``), snapped to the grid 2^-20 (what the Laplace mechanism did
  before it sampled exactly);

and ``Laplace(1, 1).perturb`` of N values from the agents' words (``AgentWords``: the lattice,
the sampler with the agents' keys made inside it, the release). Every row is the median of
REPEATS (default 7) runs, the rows interleaved (A B C D A B C D ...), wall and CPU time
(``time.thread_time``) alike, and each over the floating-point sampler's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.mechanisms import dlap
from ldpsim.protocols.mechanisms.laplace import Laplace
from ldpsim.protocols.words import REGION, WORD_BASE, AgentWords
from ldpsim.simulator.bench.audit import print_table

KEY = 12345
T = 1 << 20


def samplers(n: int) -> dict[str, Callable[[], object]]:
    """The four timed calls on ``n`` values (module docstring), by row name."""
    agents = np.arange(n)
    keys = np.ascontiguousarray(rngm.agent_keys(KEY, agents), dtype=np.uint64)
    values = np.random.default_rng(0).random(n)
    z = np.empty((n, 1), dtype=np.int64)
    lap = Laplace(1.0, 1.0)
    words = AgentWords(KEY, agents, 1)
    module = dlap.DLAP.built

    def engine(scalar: bool) -> Callable[[], object]:
        return lambda: module.dlap_agents(keys, 1, WORD_BASE, 1, REGION, T, z, scalar)

    def floating() -> np.ndarray:
        u = rngm.uniform(KEY, agents, 1, 1)[:, 0]
        grid = 2.0**-20
        return np.rint((values + rngm.laplace_from_uniform(u, 1.0)) / grid) * grid

    return {"lane engine": engine(False), "stream engine": engine(True),
            "floating-point sampler": floating,
            "Laplace.perturb": lambda: lap.perturb(values, words)}


def timings(calls: dict[str, Callable[[], object]], repeats: int
            ) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each call, the calls interleaved ``repeats`` times."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            call()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.thread_time() - c0)
    return {name: (float(np.median(wall[name])), float(np.median(cpu[name])))
            for name in calls}


NOTES = {"lane engine": "16 streams side by side (AVX-512), masks instead of branches",
         "stream engine": "one stream after the other (scalar=True): the sampler before",
         "floating-point sampler": "rng.uniform, laplace_from_uniform, snapped to 2^-20",
         "Laplace.perturb": "lattice, sampler (agents' keys made inside), release"}


def rows(n: int, repeats: int = 7) -> list[list[str]]:
    """One row per timed call: wall and CPU ms, CPU ns per value, and wall and CPU time over
    the floating-point sampler's (on a shared machine the CPU times hold steadier)."""
    if dlap.DLAP.built is None:
        raise RuntimeError("the compiled discrete Laplace sampler was not built at install")
    took = timings(samplers(n), repeats)
    ref_wall, ref_cpu = took["floating-point sampler"]
    out = []
    for name, (wall, cpu) in took.items():
        note = NOTES[name]
        if name == "lane engine" and dlap.DLAP.built.engine() != "lanes":
            note = "this CPU has no AVX-512: the stream engine ran"
        out.append([name, f"{n:,}", f"{1e3 * wall:.2f}", f"{1e3 * cpu:.2f}",
                    f"{1e9 * cpu / n:.1f}", f"{wall / ref_wall:.2f}", f"{cpu / ref_cpu:.2f}",
                    note])
    return out


def main(n: int = 10**6, repeats: int = 7) -> None:
    """Print the table."""
    print(f"exact discrete Laplace, t = 2^20, one column: medians of {repeats}, interleaved")
    print_table(["sampler", "values", "wall ms", "CPU ms", "CPU ns/value", "wall /float",
                 "CPU /float", "notes"], rows(n, repeats))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
