"""The three figures users wait on, each beside its peer (``ldpsim bench --headline``).

* **The audit.** ``ldpsim audit``'s batch path on LDP-KwikSort:RR (``audit_rank``: the curator
  and 9 colluders against one honest agent, ε = 1) at N trials per input, in trials per
  second (of both inputs, as the audit record counts them) against ldp-audit's core loop
  (Arcolezi & Gambs, PETS 2024) on binary randomized response at ε = 1 with as many trials:
  one multi-freq-ldpy ``GRR_Client`` call per trial and input (``pip install
  'ldpsim[bench]'``; without it the same draws restated in numpy), its Clopper-Pearson
  estimator restated in ``simulator.bench.audit`` (ldp-audit is not on a package registry).
* **A sweep of small runs.** 3,000 inproc DPWeVote games (n = 10^3 and 10^4, three ε, both
  protocols; 24 and no Dask with ``--quick``) with ``--jobs 2`` against ``--jobs 1``, and on
  a 2-worker Dask LocalCluster (its start-up reported apart), as speed-ups.
* **A run that starts at once.** ``ldpsim run`` of a 10-agent scenario on the processes
  backend, end to end as a user types it, against ``python -c 'import numpy, zmq, msgpack,
  scipy'``: what any Python program using the same libraries pays before its first line.

Every figure is the best of several tries, alternating the ways compared, so that machine
noise hits each alike.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.audit.audit_harness import audit_setting, make_setting
from ldpsim.simulator.backends.dask_client import DaskConnection
from ldpsim.simulator.bench.audit import ldp_audit_estimator, print_table
from ldpsim.simulator.bench.cluster import time_sweep
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.scenario import load

import ldpsim

#: the sweep of small runs (3,000 runs: 2 protocols x 2 n x 3 eps x 250 repeats)
SWEEP = {"name": "bench_small_runs", "protocols": ["dpwevote", "dpwevote_laplace"],
         "repeats": 250, "seed": 5,
         "data": {"kind": "weighted_votes", "n": [1000, 10000], "candidates": 1},
         "params": {"epsilon": [0.5, 1.0, 2.0]},
         "runtime": {"backend": "inproc", "pools": 1, "progress": False},
         "output": {"plots": False}}
#: the 10-agent run
TINY = """name = "bench_tiny"
protocol = "ldp_kwiksort_rr"
repeats = 1
seed = 1
[data]
kind = "mallows"
n = 10
m = 5
theta = 0.5
[params]
epsilon = 1.0
[runtime]
backend = "processes"
pools = 2
[output]
plots = false
"""


def _best(fn: Any, tries: int) -> float:
    return min(fn() for _ in range(tries))


def ldp_audit_core_loop(trials: int, seed: int = 7) -> tuple[float, float, str]:
    """ldp-audit's loop on binary randomized response at ε = 1: (seconds, ε lower bound,
    what ran). With multi-freq-ldpy installed (``pip install 'ldpsim[bench]'``) it is
    ldp-audit's own: one ``GRR_Client(v, 2, ε)`` call per trial and input, counting the
    reports of the first input; else the same draws restated in numpy (faster than the
    original)."""
    try:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
    except ImportError:
        GRR_Client = None
    if GRR_Client is not None:
        GRR_Client(0, 2, 1.0)  # numba compiles on the first call: not part of the work
        t0 = time.perf_counter()
        tp = sum(GRR_Client(0, 2, 1.0) == 0 for _ in range(trials))
        fp = sum(GRR_Client(1, 2, 1.0) == 0 for _ in range(trials))
        eps = ldp_audit_estimator(int(tp), int(fp), trials)
        return time.perf_counter() - t0, eps, "ldp-audit's loop (multi-freq-ldpy GRR_Client)"
    t0 = time.perf_counter()
    gen = np.random.default_rng(seed)  # the peer's own generator, as it draws
    p = np.e / (1 + np.e)
    truthful = [gen.random(trials) < p for _ in (0, 1)]
    reports = [np.where(truthful[0], 0, 1), np.where(truthful[1], 1, 0)]
    tp, fp = int((reports[0] == 0).sum()), int((reports[1] == 0).sum())
    eps = ldp_audit_estimator(tp, fp, trials)
    return time.perf_counter() - t0, eps, ("ldp-audit's loop restated in numpy (pip install "
                                           "'ldpsim[bench]' for its own)")


def audit_row(trials: int, tries: int = 3) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = sc.load(sc.find("audit_rank"), ['protocols=["ldp_kwiksort_rr"]'])
    spec = next(r for r in s.runs() if r.repeat == 0)
    setting = make_setting(spec.config(), s.seed)
    whole, rate, peer, rec, eps_peer, what = float("inf"), 0.0, float("inf"), None, 0.0, ""
    for _ in range(tries):  # alternating
        t0 = time.perf_counter()
        rec = audit_setting(setting, trials, path="batch")
        whole = min(whole, time.perf_counter() - t0)
        rate = max(rate, float(rec["trials_per_second"]))
        took, eps_peer, what = ldp_audit_core_loop(trials)
        peer = min(peer, took)
    assert rec is not None
    peer_rate = 2 * trials / peer  # as ldpsim counts: the trials of both inputs
    return ["audit, LDP-KwikSort:RR, eps = 1", f"{rate:,.0f} trials/s",
            f"{what}, binary RR: {peer_rate:,.0f} trials/s",
            f"{rate / peer_rate:.2f}x", f"{trials:,} trials per input; the whole setting "
            f"{whole:.2f} s (its attacks included); eps_lower {rec['epsilon_lower']:.4f} "
            f"(ldp-audit's {eps_peer:.4f} at 99% confidence)"]


def _sweep_time(jobs: int | None, dask: str | None = None, repeats: int = 250) -> float:
    raw = {**SWEEP, "repeats": repeats, "runtime": {**SWEEP["runtime"]}}
    if dask is not None:
        raw["runtime"]["executor"] = "dask"
        raw["dask"] = {"address": dask}
    else:
        raw["runtime"]["jobs"] = jobs
    return time_sweep(load(raw=raw))


def sweep_row(tries: int = 2, repeats: int = 250, dask: bool = True) -> list[str]:
    conn, startup = None, 0.0
    if dask:
        try:
            t0 = time.perf_counter()
            conn = DaskConnection("local:2")
            startup = time.perf_counter() - t0
        except ImportError:
            pass
    best = {"1": float("inf"), "2": float("inf"), "dask": float("inf")}
    try:
        for _ in range(tries):
            best["1"] = min(best["1"], _sweep_time(1, repeats=repeats))
            best["2"] = min(best["2"], _sweep_time(2, repeats=repeats))
            if conn is not None:
                best["dask"] = min(best["dask"], _sweep_time(
                    None, conn.client.scheduler.address, repeats=repeats))
    finally:
        if conn is not None:
            conn.close()
    runs = 12 * repeats
    peer = (f"Dask LocalCluster, 2 workers: {best['1'] / best['dask']:.2f}x (start-up "
            f"{startup:.1f} s apart)" if conn is not None else
            "Dask: not installed" if dask else "Dask: not with --quick")
    return [f"sweep of {runs:,} small runs, --jobs 2", f"{best['1'] / best['2']:.2f}x --jobs 1",
            peer, f"{best['1'] / best['dask']:.2f}x" if conn is not None else "",
            f"inproc DPWeVote, n = 10^3 and 10^4: --jobs 1 {best['1']:.2f} s "
            f"({1e3 * best['1'] / runs:.1f} ms a run), --jobs 2 {best['2']:.2f} s"]


def start_row(tries: int = 7) -> list[str]:
    exe = str(Path(sys.executable).parent / "ldpsim")
    with tempfile.TemporaryDirectory(prefix="ldpsim-bench-tiny-") as tmp:
        scen = Path(tmp) / "tiny.toml"
        scen.write_text(TINY)
        runs = iter(range(10**6))

        def ours() -> float:
            t0 = time.perf_counter()
            subprocess.run([exe, "run", str(scen), "--out", str(Path(tmp) / f"o{next(runs)}"),
                            "--no-progress", "-q"], check=True, capture_output=True)
            return time.perf_counter() - t0

        def peer() -> float:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import numpy, zmq, msgpack, scipy"],
                           check=True, capture_output=True)
            return time.perf_counter() - t0

        # bytecode compiled, as a user's second run finds it (even where the environment
        # says not to write it: PYTHONDONTWRITEBYTECODE)
        subprocess.run([sys.executable, "-m", "compileall", "-q", *ldpsim.__path__],
                       check=False, capture_output=True)
        ours()
        a, b = [], []
        for _ in range(tries):  # alternating
            a.append(ours())
            b.append(peer())
    return ["10-agent run, processes backend", f"{min(a):.3f} s end to end",
            f"python -c 'import numpy, zmq, msgpack, scipy': {min(b):.3f} s",
            f"{min(a) / min(b):.1f}x the imports", f"best of {tries}; median "
            f"{sorted(a)[tries // 2]:.3f} s (imports {sorted(b)[tries // 2]:.3f} s)"]


def main(audit_trials: int = 10**6, quick: bool = False) -> None:
    """Print the headline table."""
    rows = [audit_row(200 if quick else audit_trials, tries=1 if quick else 3),
            sweep_row(tries=1 if quick else 2, repeats=2 if quick else 250, dask=not quick),
            start_row(tries=2 if quick else 7)]
    print("\nwhere users wait, beside the peers (ldpsim bench --headline)")
    print_table(["figure", "ldpsim", "peer", "ratio", "notes"], rows)
    print()
