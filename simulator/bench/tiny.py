"""Benchmark: what a tiny run costs on top of its protocol (``python -m
ldpsim.simulator.bench.tiny [REPEATS] [JOBS ...]``).

``scenarios/paper002_fig4.toml`` at ``REPEATS`` repetitions per point (default 20: 2,160
DPWeVote runs of 10, 100 and 500 partners on the inproc backend) is swept with ``--secret
seed`` at each ``JOBS`` (default 1 and 2), and each of its runs is then made by the protocol
alone (``protocols.local.run_locally``: the data set built, every party's keys derived, the
rounds' plan, respond and absorb, the output scored; no sessions, messages or records).

Per run: the sweep's wall time and CPU time (this process and its workers), the protocol's
CPU time alone, and their difference, the sweep's overhead per run (key and session set-up,
messages, scoring, the record, the summary at the end).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from ldpsim.protocols import get_protocol
from ldpsim.protocols.local import run_locally
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep.runner import run_scenario

SCENARIO = "paper002_fig4"


def _cpu() -> float:
    """CPU seconds of this process and its finished children (a sweep's ``--jobs`` workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def sweep(repeats: int, jobs: int) -> tuple[int, float, float]:
    """The runs of the scenario at ``repeats`` and ``jobs``, and its wall and CPU seconds.

    Parameters
    ----------
    repeats : int
        Repetitions per point.
    jobs : int
        Worker processes (``--jobs``).

    Returns
    -------
    tuple[int, float, float]
        Runs, wall seconds, CPU seconds (this process and its workers).
    """
    scenario = sc.load(sc.find(SCENARIO), [f"repeats={repeats}", f"runtime.jobs={jobs}",
                                           "runtime.secret='seed'", "output.plots=false"])
    with tempfile.TemporaryDirectory(prefix="ldpsim-tiny-") as out:
        t0, c0 = time.perf_counter(), _cpu()
        run_scenario(scenario, Path(out) / "out", show_progress=False,
                     echo=lambda *a, **k: None)
        return len(scenario.runs()), time.perf_counter() - t0, _cpu() - c0


def protocol_alone(repeats: int) -> float:
    """CPU seconds per run of the scenario's runs made by the protocol alone
    (``run_locally``), at ``repeats`` repetitions per point."""
    specs = sc.load(sc.find(SCENARIO), [f"repeats={repeats}"]).runs()
    proto = get_protocol(specs[0].protocol)
    c0 = time.process_time()
    for spec in specs:
        run_locally(proto, spec.params, spec.data, spec.seed)
    return (time.process_time() - c0) / len(specs)


def main(repeats: int = 20, jobs: tuple[int, ...] = (1, 2)) -> None:
    """Print, per ``jobs``, the sweep's runs per second, its wall and CPU ms per run, the
    protocol's own ms per run and the overhead per run (CPU ms of the sweep minus the
    protocol's)."""
    alone = protocol_alone(repeats)
    print(f"{SCENARIO} at repeats = {repeats}; the protocol alone: {alone * 1e3:.3f} ms/run")
    for j in jobs:
        runs, wall, cpu = sweep(repeats, j)
        print(f"jobs {j}: {runs} runs, {runs / wall:.0f} runs/s, wall {wall / runs * 1e3:.3f} "
              f"ms/run, CPU {cpu / runs * 1e3:.3f} ms/run, overhead "
              f"{(cpu / runs - alone) * 1e3:.3f} ms/run")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args[:1] or [20]), jobs=tuple(args[1:]) or (1, 2))
