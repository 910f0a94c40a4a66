"""Benchmark: the exact discrete Laplace sampler against the floating-point sampler it replaced
(``python -m ldpsim.simulator.bench.laplace [N] [REPEATS]``).

N values (default 10^6) of one column at the Laplace mechanism's scale t = 2^20, each from its
agent's own words (``protocols.mechanisms.dlap``, the compiled ``dlap_agents`` with the agents'
keys given), by

* **lane engine, AVX-512** and **lane engine, AVX2**: 16 streams side by side, one word per
  step each, masks instead of branches (``protocols/_dlapc.c``; 8 lanes a vector with
  AVX-512, 4 with AVX2), each made the engine in use for its call (``use_engine``); a CPU
  without the instruction set leaves its row empty, and says so;
* **stream engine**: one stream after the other, a branch on every coin flip (``scalar=True``:
  the sampler as it was before the lane engines);
* **floating-point sampler**: one uniform per value (``rng.uniform``), the inverse CDF
  (``rng.laplace_from_uniform``), snapped to the grid 2^-20 (what the Laplace mechanism did
  before it sampled exactly);

and ``Laplace(1, 1).perturb`` of N values from the agents' words (``AgentWords``: the lattice,
the sampler with the agents' keys made inside it, the release; by the engine chosen at
import). Every row is the median of REPEATS (default 7) runs, the rows interleaved
(A B C D A B C D ...), wall and CPU time (``time.thread_time``) alike, and each over the
floating-point sampler's.
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


#: the lane engines' rows, by the engine's name in ``_dlapc.engines()``
LANES = {"avx512": "lane engine, AVX-512", "avx2": "lane engine, AVX2"}


def samplers(n: int) -> dict[str, Callable[[], object]]:
    """The timed calls on ``n`` values (module docstring), by row name: a lane engine's only
    where this CPU runs it."""
    agents = np.arange(n)
    keys = np.ascontiguousarray(rngm.agent_keys(KEY, agents), dtype=np.uint64)
    values = np.random.default_rng(0).random(n)
    z = np.empty((n, 1), dtype=np.int64)
    lap = Laplace(1.0, 1.0)
    words = AgentWords(KEY, agents, 1)
    module = dlap.DLAP.built
    chosen = module.engines()[0]

    def engine(name: str, scalar: bool = False) -> Callable[[], object]:
        def call() -> object:
            module.use_engine(name)
            return module.dlap_agents(keys, 1, WORD_BASE, 1, REGION, T, z, scalar)
        return call

    def floating() -> np.ndarray:
        u = rngm.uniform(KEY, agents, 1, 1)[:, 0]
        grid = 2.0**-20
        return np.rint((values + rngm.laplace_from_uniform(u, 1.0)) / grid) * grid

    def perturb() -> np.ndarray:
        module.use_engine(chosen)
        return lap.perturb(values, words)

    lanes = {row: engine(name) for name, row in LANES.items() if name in module.engines()}
    return {**lanes, "stream engine": engine(chosen, scalar=True),
            "floating-point sampler": floating, "Laplace.perturb": perturb}


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


NOTES = {"lane engine, AVX-512": "8 lanes a vector, 2 vectors: masks instead of branches",
         "lane engine, AVX2": "4 lanes a vector, 4 vectors; first 5 steps before a lane",
         "stream engine": "one stream after the other (scalar=True): the sampler before",
         "floating-point sampler": "rng.uniform, laplace_from_uniform, snapped to 2^-20",
         "Laplace.perturb": "lattice, sampler (agents' keys made inside), release"}


def rows(n: int, repeats: int = 7) -> list[list[str]]:
    """One row per timed call: wall and CPU ms, CPU ns per value, and wall and CPU time over
    the floating-point sampler's (on a shared machine the CPU times hold steadier); a lane
    engine this CPU does not run has a row without times."""
    module = dlap.DLAP.built
    if module is None:
        raise RuntimeError("the compiled discrete Laplace sampler was not built at install")
    before = module.engine()
    try:
        took = timings(samplers(n), repeats)
    finally:
        module.use_engine(before)
    ref_wall, ref_cpu = took["floating-point sampler"]
    out = []
    for name in NOTES:
        if name not in took:
            isa = name.split(", ")[1]
            out.append([name, f"{n:,}", "-", "-", "-", "-", "-",
                        f"not run: this CPU has no {isa} (or it was not built)"])
            continue
        wall, cpu = took[name]
        out.append([name, f"{n:,}", f"{1e3 * wall:.2f}", f"{1e3 * cpu:.2f}",
                    f"{1e9 * cpu / n:.1f}", f"{wall / ref_wall:.2f}", f"{cpu / ref_cpu:.2f}",
                    NOTES[name]])
    return out


def main(n: int = 10**6, repeats: int = 7) -> None:
    """Print the table."""
    table = rows(n, repeats)
    print(f"exact discrete Laplace, t = 2^20, one column: medians of {repeats}, interleaved; "
          f"the engine chosen at import: {dlap.DLAP.built.engines()[0]}")
    print_table(["sampler", "values", "wall ms", "CPU ms", "CPU ns/value", "wall /float",
                 "CPU /float", "notes"], table)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
