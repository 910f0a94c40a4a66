"""Benchmarks (``make bench`` / ``ldpsim bench``): transport ceiling against full protocol runs.

* **transport ceiling**: the same number of agent envelopes, of the same sizes and in the same
  batches, pushed curator -> pools -> curator through the same sockets (ROUTER/DEALER, same
  options, one process per pool), with no protocol logic: frames are pre-built bytes and pools
  answer each query frame with a pre-built report frame of the same agent count.
* **full run**: LDP-KwikSort:RR (m = 10, K = 1) end to end on the processes backend (set-up,
  data generation, registration, queries, local randomizers, validation, estimation, KwikSort,
  the pools' closing statistics), and on inproc. Both it and the ceiling are timed from the
  moment every pool is connected and has said it is ready. A processes pool builds its agents'
  data as it starts, before it says ready (as real agents hold theirs before anyone asks), so
  the row "whole wall_s" gives the same run from the curator's set-up: it also counts the
  pools' process start-up and data generation (``timing.pools_ready_s``).

Speeds are agents per second over the run's wall time; every row is the best of three, and the
ratio to the ceiling is measured in the same invocation, so machine noise affects both alike.
"CPU s" adds up every process's CPU time (curator and pools). A run whose CPU s comes close to
cores × wall s is CPU-bound: it cannot finish in less than CPU s / cores.

Then what independent agents cost: key derivation and policy checks at the largest size, against
that run (``bench_keys``); and, each in its own module: every local protocol's rounds against
its own kernel
(``bench_kernels``, ``--kernels N``), ldpsim's frequency oracles against two Python LDP
libraries on equal work (``bench_peers``, ``--peers N``) and the privacy audit
(``bench_audit``, ``--audit-trials N``), and where runs execute: ``--jobs`` and Dask sweeps, and
the dask backend against the processes backend (``bench_dask``, ``--sweeps N``,
``--dask-agents N``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ldpsim.protocols.rng import MIXER
from ldpsim.simulator.backends.alloc import request_tuning
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.bench.ceiling import (
    from_ready,
    kwiksort_config,
    transport_ceiling,
    used_batch,
)
from ldpsim.simulator.codec import wire_numpy
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.runconfig import DEFAULTS


def _row(name: str, n: int, wall: float, ceiling: float | None, mem: str,
         raw: float | None = None, cpu: float | None = None) -> list[str]:
    rate = n / wall
    ratio = "" if ceiling is None else f"{ceiling / wall:.2f}"
    ratio_raw = "" if raw is None else f"{raw / wall:.3f}"
    return [name, f"{n:,}", f"{wall:.2f}", "" if cpu is None else f"{cpu:.2f}", f"{rate:,.0f}",
            ratio, ratio_raw, mem]


HEADLINE = ("accuracy", "correct", "mae_change", "mae", "avd_q1", "avd_q2", "error_rate",
            "kendall_tau")


def scenario_rows(paths: list[Path]) -> list[list[str]]:
    """One row per run of each benchmark scenario, each run by a fresh ``ldpsim run``.

    A fresh process per scenario keeps the peak-memory figures honest (a forked child would
    count the orchestrator's pages too). The scenario file chooses the backend (processes).
    """
    rows = []
    for path in paths:
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "ldpsim", "run", str(path), "--out",
                                   out, "--no-progress"], capture_output=True, text=True)
            total = time.perf_counter() - t
            if done.returncode != 0:
                rows.append([path.stem, "", "", "", "", "", "", f"failed: {done.stderr[-200:]}"])
                continue
            records = [json.loads(x) for x in (Path(out) / "results.jsonl").read_text()
                       .splitlines()]
        for rec in records:
            t, c, m = rec["timing"], rec["comm"], rec["metrics"]
            shown = [k for k in HEADLINE if k in m][:2] or list(m)[:2]
            metric = ", ".join(f"{k} {m[k]:.3g}" for k in shown)
            rows.append([f"{path.stem} {rec['protocol']}", f"{rec['n_agents']:,}",
                         f"{t['wall_s']:.2f}", f"{t['curator_cpu_s'] + t['pools_cpu_s']:.2f}",
                         f"{rec['n_agents'] / t['wall_s']:,.0f}", "", "",
                         f"agent {1e6 * t['agent_cpu_s_mean']:.1f} us mean per agent, batch "
                         f"({t['agent_time_mode']}; alone "
                         f"{1e6 * t.get('agent_alone_cpu_s_mean', 0.0):.0f} us),"
                         f" up {c['bytes_up_per_agent_mean']:,.0f} B / down "
                         f"{c['bytes_down_per_agent_mean']:,.0f} B per agent, curator "
                         f"{t['curator_peak_rss_mb']:.0f} MB, pool "
                         f"{t['pool_peak_rss_mb']:.0f} MB; {metric}; whole command "
                         f"{total:.0f} s"])
    return rows


def main(args: Any) -> int:
    """``make bench`` / ``ldpsim bench``: the tables the module lists, one after another (or
    the one table a ``--calibrate``, ``--deployment-only``, ``--engines-only`` or
    ``--headline`` asks for); the exit code."""
    # before any child starts: the pools, the curator's fork server and each scenario's
    # ``ldpsim run`` inherit the setting (``simulator.backends.alloc``)
    request_tuning()
    alone = _alone(args)
    if alone is not None:
        return alone
    from ldpsim.simulator.bench import headline

    headline.main(getattr(args, "audit_trials", 0) or 10**6, quick=args.quick)
    if getattr(args, "headline", False):
        return 0
    sizes = [2000, 20000] if args.quick else [int(x) for x in args.sizes.split(",")]
    pools = args.pools
    batch = getattr(args, "batch", DEFAULTS.batch)
    limits = Limits(timeout_s=120)
    rows = []
    print(f"ldpsim bench: LDP-KwikSort:RR m=10 K=1, {pools} pools, batch {batch}, "
          f"{os.cpu_count()} cores; batch codec {wire_numpy.CODEC.name()}, stream mixer "
          f"{MIXER.name()}", file=sys.stderr)
    for n in sizes:
        cfg = kwiksort_config(n, pools, batch)
        size_rows, last_wall = _size_rows(cfg, n, pools, limits)
        rows += size_rows
    if not args.quick and not getattr(args, "no_scenarios", False):
        here = Path(__file__).resolve().parents[2] / "scenarios"
        rows.extend(scenario_rows(sorted(here.glob("bench_*.toml"))))
    _print_run_tables(rows, cfg, sizes[-1], last_wall, args.quick)
    _optional_tables(args, pools, batch)
    return _engines(args)


def _alone(args: Any) -> int | None:
    """The exit code of a bench that runs one table alone (``--calibrate``,
    ``--deployment-only``, ``--engines-only``); None for the whole bench."""
    if getattr(args, "calibrate", False):
        from ldpsim.simulator.bench import calibrate

        return calibrate.main(write=getattr(args, "write", False))
    if getattr(args, "deployment_only", False):
        from ldpsim.simulator.bench import deployment as bench_deployment

        size = _size(args, "deployment", 20_000, 10**6)
        if size:
            bench_deployment.main(size)
        return 0
    if getattr(args, "engines_only", False):
        return _engines(args)
    return None


def _size_rows(cfg: dict[str, Any], n: int, pools: int, limits: Limits
               ) -> tuple[list[list[str]], float]:
    """The rows of ``n`` agents: the transport's ceilings at the run's envelope sizes and
    batches, the full run on the processes backend (from pools ready, its rounds alone, its
    whole wall time) and on inproc. Returns them and the run's whole wall time."""
    # best of three for every row, full runs and ceilings alike
    res = min((run_processes(cfg, limits) for _ in range(3)), key=from_ready)
    q = round(res["comm"]["bytes_down_per_agent_mean"])
    r = round(res["comm"]["bytes_up_per_agent_mean"])
    size = used_batch(res)  # the ceilings move the same batches as the run
    rows, raw, ceiling = _ceiling_rows(n, pools, size, q, r)
    t = res["timing"]
    mem = (f"batches of {size:,}; from pools ready (their data built); "
           f"curator {t['curator_peak_rss_mb']:.0f} MB, pool {t['pool_peak_rss_mb']:.0f} MB")
    rows.append(_row("full run, processes", n, from_ready(res), ceiling, mem, raw,
                     cpu=t["curator_cpu_s"] + t["pools_cpu_s"]))
    rounds = sum(x["wall_s"] for x in res["comm"]["per_round"])
    rows.append(_row("  rounds only", n, rounds, ceiling,
                     "queries out to estimate; the rest is registration, set-up and "
                     "the closing statistics", raw))
    # the same run counted from the curator's start: its pools' process start-up and their
    # data generation (they build their rows before they say ready) are in it
    rows.append(_row("  whole wall_s", n, t["wall_s"], ceiling,
                     f"the same run from the curator's set-up: "
                     f"{1e3 * t['pools_ready_s']:.0f} ms until every pool had started, "
                     f"built its agents' data and said ready", raw))
    rows.append(_inproc_row(cfg, n, limits, ceiling, raw))
    return rows, t["wall_s"]


def _ceiling_rows(n: int, pools: int, size: int, q: int, r: int
                  ) -> tuple[list[list[str]], float, float]:
    """The transport's ceilings for ``n`` agents in batches of ``size``, ``q`` bytes down and
    ``r`` up per agent: raw bytes, envelopes with the batch codec (best of three each) and
    with msgpack. Returns their rows and the first two's wall times."""
    raw, raw_cpu = min(transport_ceiling(n, pools, size, q, r) for _ in range(3))
    ceiling, ceiling_cpu = min(transport_ceiling(n, pools, size, q, r, "batch")
                               for _ in range(3))
    general, general_cpu = transport_ceiling(n, pools, size, q, r, "msgpack")
    return [_row("ceiling: raw bytes", n, raw, None, f"{q} B down / {r} B up per agent",
                 cpu=raw_cpu),
            _row("ceiling: envelopes", n, ceiling, None,
                 "one envelope per agent, runtime's batch codec, no protocol logic",
                 cpu=ceiling_cpu),
            _row("  (msgpack per envelope)", n, general, None,
                 "same, one msgpack call per envelope (the general codec)",
                 cpu=general_cpu)], raw, ceiling


def _inproc_row(cfg: dict[str, Any], n: int, limits: Limits, ceiling: float,
                raw: float) -> list[str]:
    """The same run on the inproc backend (best of three), and this process's peak memory."""
    walls = []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        run_inproc(cfg, limits)
        walls.append((time.perf_counter() - t0, time.process_time() - c0))
    wall_in, cpu_in = min(walls)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return _row("full run, inproc", n, wall_in, ceiling, f"process {rss:.0f} MB", raw,
                cpu=cpu_in)


def _print_run_tables(rows: list[list[str]], cfg: dict[str, Any], n: int, last_wall: float,
                      quick: bool) -> None:
    """The full runs against the ceilings (and the scenarios'); then what independent agents
    cost at ``n`` agents against that run, and the decoder's bound."""
    from ldpsim.simulator.bench import audit as bench_audit
    from ldpsim.simulator.bench import hardening as bench_hardening
    from ldpsim.simulator.bench import keys as bench_keys

    bench_audit.print_table(["benchmark", "agents", "wall s", "CPU s", "agents/s", "/ceiling",
                             "/raw", "notes"], rows)
    print(f"\nindependent agents: key derivation and policy checks at {n:,} agents, "
          f"against the whole run (best of five)")
    bench_audit.print_table(["step", "agents", "ms", "of the run", "notes"],
                            bench_keys.rows(cfg, n, last_wall))
    print("\nthe decoder's bound: checked before the reference reader decodes a frame "
          "(best of five)")
    bench_audit.print_table(["step", "frame", "ms", "of decoding", "notes"],
                            bench_hardening.rows(20_000 if quick else 200_000))


def _optional_tables(args: Any, pools: int, batch: int | str) -> None:
    """The tables each of their own size (0 skips one): every local protocol against its
    kernel, the peer libraries, the privacy audit, the deployment model."""
    from ldpsim.simulator.bench import audit as bench_audit

    kernels = _size(args, "kernels", 2000, 10**6)
    if kernels:
        from ldpsim.simulator.bench import kernels as bench_kernels

        bench_kernels.main(kernels, pools, batch)
    peers = _size(args, "peers", 2000, 10**6)
    if peers:
        from ldpsim.simulator.bench import peers as bench_peers

        bench_peers.main(peers, _size(args, "peer_users", 200, 10**5),
                         repeats=1 if args.quick else 3)
    trials = 100 if args.quick else getattr(args, "audit_trials", 0)
    if trials:
        bench_audit.main(trials, full_trials=min(trials, 2000))
    deployed = _size(args, "deployment", 20_000, 10**6)
    if deployed:
        from ldpsim.simulator.bench import deployment as bench_deployment

        bench_deployment.main(deployed)


def _engines(args: Any) -> int:
    """Where runs execute: --jobs and Dask sweeps, the dask backend (``bench_dask``)."""
    runs = _size(args, "sweeps", 12, 200)
    agents = _size(args, "dask_agents", 20_000, 10**6)
    if runs or agents:
        from ldpsim.simulator.bench import cluster as bench_dask

        bench_dask.main(runs, agents)
    return 0


def _size(args: Any, name: str, quick: int, full: int) -> int:
    """A table's size: the option when given (0 skips the table), else ``quick`` with
    ``--quick`` and ``full`` without."""
    value = getattr(args, name, None)
    if value is not None:
        return value
    return quick if args.quick else full


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--pools", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--kernels", type=int)
    ap.add_argument("--peers", type=int)
    ap.add_argument("--peer-users", type=int)
    sys.exit(main(ap.parse_args()))
