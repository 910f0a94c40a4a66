"""Benchmark: what a tiny run costs on top of its protocol (``python -m
ldpsim.simulator.bench.tiny [REPEATS] [JOBS ...]``).

``scenarios/paper002_fig4.toml`` at ``REPEATS`` repetitions per point (default 20: 2,160
DPWeVote runs of 10, 100 and 500 partners on the inproc backend) is swept with ``--secret
seed`` at each ``JOBS`` (default 1 and 2), and each of its runs is then made by the protocol
alone (``protocols.local.run_locally``: the data set built, every party's keys derived, the
rounds' plan, respond and absorb, the output scored; no sessions, messages or records).

Per run: the sweep's wall time and CPU time (this process and its workers), the protocol's
CPU time alone, and their difference, the sweep's overhead per run (key and session set-up,
messages, scoring, the record, the summary at the end); and the orchestrator's own CPU time
(with ``--jobs``, the serial part: storing the records, the summary at the end).
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


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    """CPU seconds of this process (``RUSAGE_SELF``) or of its finished children
    (``RUSAGE_CHILDREN``: a sweep's ``--jobs`` workers)."""
    use = resource.getrusage(who)
    return use.ru_utime + use.ru_stime


def sweep(repeats: int, jobs: int) -> tuple[int, float, float, float]:
    """The runs of the scenario at ``repeats`` and ``jobs``, and its wall and CPU seconds.

    Parameters
    ----------
    repeats : int
        Repetitions per point.
    jobs : int
        Worker processes (``--jobs``).

    Returns
    -------
    tuple[int, float, float, float]
        Runs, wall seconds, CPU seconds (this process and its workers), this process's CPU
        seconds (the orchestrator's).
    """
    scenario = sc.load(sc.find(SCENARIO), [f"repeats={repeats}", f"runtime.jobs={jobs}",
                                           "runtime.secret='seed'", "output.plots=false"])
    with tempfile.TemporaryDirectory(prefix="ldpsim-tiny-") as out:
        t0, me0, kids0 = time.perf_counter(), _cpu(), _cpu(resource.RUSAGE_CHILDREN)
        run_scenario(scenario, Path(out) / "out", show_progress=False,
                     echo=lambda *a, **k: None)
        wall, me = time.perf_counter() - t0, _cpu() - me0
        return (len(scenario.runs()), wall, me + _cpu(resource.RUSAGE_CHILDREN) - kids0, me)


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
    protocol's own ms per run, the overhead per run (CPU ms of the sweep minus the
    protocol's) and the orchestrator's CPU ms per run."""
    alone = protocol_alone(repeats)
    print(f"{SCENARIO} at repeats = {repeats}; the protocol alone: {alone * 1e3:.3f} ms/run")
    for j in jobs:
        runs, wall, cpu, own = sweep(repeats, j)
        print(f"jobs {j}: {runs} runs, {runs / wall:.0f} runs/s, wall {wall / runs * 1e3:.3f} "
              f"ms/run, CPU {cpu / runs * 1e3:.3f} ms/run, overhead "
              f"{(cpu / runs - alone) * 1e3:.3f} ms/run, orchestrator "
              f"{own / runs * 1e3:.3f} ms/run")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args[:1] or [20]), jobs=tuple(args[1:]) or (1, 2))
