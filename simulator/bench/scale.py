"""Benchmark: time and peak memory of one run as the agents grow, and as the pools grow.

``python -m ldpsim.simulator.bench.scale agents 1e5 1e6 1e7 1e8`` runs one LDP-KwikSort:RR run
(10 items, ε = 1, K chosen by "auto", the processes backend) at each number of agents, each as
a whole ``ldpsim run`` command in a process of its own, and prints its wall time, its CPU (the
command and every process it started), the peak of the summed resident memory of all its
processes (sampled every ``SAMPLE_S`` from ``/proc``; Linux only), the bytes an agent that peak
comes to, and the log-log slope of the time between neighbouring sizes and over all of them.

``python -m ldpsim.simulator.bench.scale pools 1e7 --pools 1 2 4 8`` runs one size with each
number of pool processes. ``--chunk N`` sets ``[runtime] chunk`` (agents a party holds at
once), ``--set KEY=VALUE`` anything else of the scenario. ``--scenario NAME`` runs a shipped
scenario (or a file) instead, its ``[data] n`` set to each size (e.g. ``--scenario
bench_ethics`` for the ethics family's voters).

Each row is one run: on a 2-core machine the runs of a table differ by a few per cent from one
invocation to the next, and the peak memory by less.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: how often the process tree's memory is read
SAMPLE_S = 0.02


def scenario_text(n: int, pools: int, chunk: int | None, protocol: str = "ldp_kwiksort_rr"
                  ) -> str:
    """The scenario of one run: ``protocol`` over ``n`` Mallows rankings of 10 items."""
    lines = [f'name = "scale_{n}"', f'protocols = ["{protocol}"]', "repeats = 1", "seed = 1",
             "[data]", 'kind = "mallows"', f"n = {n}", "m = 10", "theta = 0.5",
             "[params]", "epsilon = 1.0", 'queries = "auto"',
             "[runtime]", 'backend = "processes"', f"pools = {pools}", "timeout_s = 3600",
             "progress = false"]
    if chunk is not None:
        lines.append(f"chunk = {chunk}")
    return "\n".join(lines) + "\n"


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc``."""
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree_rss(root: int) -> int:
    """Bytes resident in process ``root`` and all its descendants now."""
    kids, total, todo = _children(), 0, [root]
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, ()))
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            continue
    return total


def measure(n: int, pools: int = 2, chunk: int | None = None, sets: tuple[str, ...] = (),
            scenario: str | None = None) -> dict[str, float]:
    """One run as a whole command: wall and CPU seconds, peak summed memory (bytes); of
    ``scenario`` (a shipped one's name or a file) at ``n`` agents, else of ``scenario_text``."""
    with tempfile.TemporaryDirectory(prefix="ldpsim-scale-") as tmp:
        path = Path(tmp) / "scale.toml"
        path.write_text(scenario_text(n, pools, chunk))
        if scenario is not None:
            sets = (f"data.n={n}", f"runtime.pools={pools}",
                    *(() if chunk is None else (f"runtime.chunk={chunk}",)), *sets)
        cmd = [sys.executable, "-m", "ldpsim", "run", str(path) if scenario is None else scenario,
               "--no-progress", "-q", "--out", str(Path(tmp) / "out"),
               *[a for s in sets for a in ("--set", s)]]
        before = os.times()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss(proc.pid))
                done.wait(SAMPLE_S)

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        code = proc.wait()
        wall = time.perf_counter() - t0
        done.set()
        watcher.join()
        after = os.times()
        if code:
            raise SystemExit(f"the run of {n} agents failed (exit code {code})")
    cpu = (after.children_user - before.children_user
           + after.children_system - before.children_system)
    return {"n": n, "pools": pools, "wall_s": wall, "cpu_s": cpu, "peak_bytes": peak[0]}


def slope(rows: list[dict[str, float]], key: str = "wall_s") -> float:
    """The least-squares slope of log(``key``) on log(n) over ``rows``."""
    xs = [math.log(r["n"]) for r in rows]
    ys = [math.log(r[key]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def table(rows: list[dict[str, float]]) -> str:
    """The rows as a Markdown table, with each row's slope from the row before."""
    out = ["| agents | pools | wall s | CPU s | peak memory, all processes | bytes an agent | "
           "slope of wall |", "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        s = "–" if i == 0 or rows[i - 1]["n"] == r["n"] else f"{slope(rows[i - 1:i + 1]):.2f}"
        out.append(f"| {r['n']:.3g} | {r['pools']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                   f"{r['peak_bytes'] / 2**20:,.0f} MiB | {r['peak_bytes'] / r['n']:.1f} | {s} |")
    if len({r["n"] for r in rows}) > 2:
        out.append(f"\nlog-log slope of wall time over all sizes: {slope(rows):.2f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ldpsim.simulator.bench.scale",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("agents", "pools"))
    ap.add_argument("n", nargs="+", type=float, help="numbers of agents (1e7 is fine)")
    ap.add_argument("--pools", nargs="+", type=int, default=[2])
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--scenario", default=None,
                    help="a shipped scenario's name or a file, run at each size instead")
    a = ap.parse_args(argv)
    if not os.path.isdir("/proc"):
        raise SystemExit("this benchmark reads /proc (Linux)")
    rows = []
    for n in (int(x) for x in a.n):
        for p in (a.pools if a.mode == "pools" else a.pools[:1]):
            rows.append(measure(n, p, a.chunk, tuple(a.sets), a.scenario))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
