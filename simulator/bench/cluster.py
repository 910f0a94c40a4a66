"""Benchmarks of where runs execute (``ldpsim bench --sweeps N --dask-agents N``).

* **sweep engines**: the same sweep of small inproc runs (LDP-KwikSort:RR at two ε and
  KwikSort, Mallows m = 6) serially, with ``--jobs 2`` and on a 2-worker Dask LocalCluster
  (started before the clock; its start-up is reported apart), each timed end to end by
  ``run_scenario`` into a fresh directory, in alternation, best of ``rounds``; the speed-ups
  are ratios within the one bench run. Once with many tiny runs (n = 2000: per-run overhead)
  and once with fewer larger ones (n = 10^5: the work itself).
* **dask backend**: one LDP-KwikSort:RR run at N agents with its 2 pools as tasks on 2 Dask
  workers against the processes backend, best of ``rounds`` each, and the fixed cost of
  placing the pools (``timing.pools_ready_s``: from the curator's start to every pool
  registered and ready).

Dask is optional (``pip install 'ldpsim[dask]'``): without it the Dask rows say so.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import DaskBackend
from ldpsim.simulator.backends.dask_client import DaskConnection
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.bench import audit as bench_audit
from ldpsim.simulator.bench.ceiling import kwiksort_config
from ldpsim.simulator.scenario.scenario import load
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.runconfig import DEFAULTS
from ldpsim.simulator.sweep.runner import run_scenario


def _sweep(n: int, repeats: int, dask: str | None = None, **runtime: Any) -> Any:
    """A sweep of small runs; ``dask``: the cluster its runs execute on."""
    if dask is not None:
        runtime["executor"] = "dask"
    return load(raw={
        "name": "bench_sweep", "protocols": ["ldp_kwiksort_rr", "kwiksort"],
        "repeats": repeats, "seed": 3, "data": {"kind": "mallows", "n": n, "m": 6,
                                                  "theta": 0.5},
        "params": {"epsilon": [0.5, 2.0]},
        "runtime": {"backend": "inproc", "pools": 2, "progress": False, **runtime},
        **({"dask": {"address": dask}} if dask is not None else {}),
        "output": {"plots": False, "per_round": False}})


def time_sweep(scenario: Any) -> float:
    out = Path(tempfile.mkdtemp(prefix="ldpsim-bench-sweep-"))
    try:
        t = time.perf_counter()
        run_scenario(scenario, out, show_progress=False, echo=lambda *a, **k: None)
        return time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _have_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def sweep_rows(runs: int, rounds: int = 3) -> list[list[str]]:
    """The sweep-engine rows: ``runs`` runs at n = 2000 and ``runs // 5`` at n = 10^5."""
    rows = []
    conn = None
    if _have_dask():
        t = time.perf_counter()
        conn = DaskConnection("local:2")
        startup = time.perf_counter() - t
    try:
        for n, count in ((2000, runs), (100_000, max(3, runs // 5))):
            repeats = max(1, count // 3)
            ways: dict[str, Any] = {"--jobs 1": _sweep(n, repeats, jobs=1),
                                    "--jobs 2": _sweep(n, repeats, jobs=2)}
            if conn is not None:
                ways["dask, 2 workers"] = _sweep(n, repeats,
                                                 dask=conn.client.scheduler.address)
            best: dict[str, float] = {}
            for _ in range(rounds):  # alternating, so machine noise hits every way alike
                for name, scen in ways.items():
                    best[name] = min(best.get(name, float("inf")), time_sweep(scen))
            for name, wall in best.items():
                note = f"{best['--jobs 1'] / wall:.2f}x the serial sweep"
                if name.startswith("dask"):
                    note += f"; cluster start-up {startup:.1f} s apart"
                rows.append([f"sweep {name}", f"{3 * repeats} runs", f"n = {n:,}",
                             f"{wall:.2f}", f"{1e3 * wall / (3 * repeats):.1f} ms", note])
            if conn is None:
                rows.append(["sweep dask", "", "", "", "", "skipped: pip install "
                             "'ldpsim[dask]'"])
    finally:
        if conn is not None:
            conn.close()
    return rows


def backend_rows(n: int, rounds: int = 3) -> list[list[str]]:
    """The dask backend (2 pools on 2 workers) against the processes backend at ``n``."""
    if not _have_dask():
        return [["backend dask", "", f"n = {n:,}", "", "", "skipped: pip install "
                 "'ldpsim[dask]'"]]
    cfg = kwiksort_config(n, 2, DEFAULTS.batch)
    limits = Limits(timeout_s=120)
    runtime = {"dask_address": "local:2", "pools": 2}
    t = time.perf_counter()
    backend = DaskBackend.build(runtime, echo=lambda *a, **k: None)
    startup = time.perf_counter() - t
    got: dict[str, list[dict[str, Any]]] = {"processes": [], "dask": []}
    try:
        for _ in range(rounds):
            got["processes"].append(run_processes(cfg, limits))
            got["dask"].append(backend.run(cfg, limits, False, None))
    finally:
        backend.close()
    assert got["dask"][0]["output"] == got["processes"][0]["output"]  # the same run
    best = {k: min(v, key=lambda r: r["timing"]["wall_s"]) for k, v in got.items()}
    rows = []
    for name, res in best.items():
        t = res["timing"]
        ready = [r["timing"]["pools_ready_s"] for r in got[name]]
        rows.append([f"backend {name}, 2 pools", "1 run", f"n = {n:,}", f"{t['wall_s']:.2f}",
                     f"{t['wall_s'] / best['processes']['timing']['wall_s']:.2f} of processes",
                     f"placing the pools (pools_ready_s) {min(ready):.3f}-{max(ready):.3f} s"
                     + (f"; cluster start-up {startup:.1f} s apart" if name == "dask"
                        else "")])
    return rows


def main(runs: int, agents: int) -> None:
    rows = []
    if runs:
        rows += sweep_rows(runs)
    if agents:
        rows += backend_rows(agents)
    if rows:
        bench_audit.print_table(["where", "runs", "size", "wall s", "per run / ratio", "notes"],
                                rows)
