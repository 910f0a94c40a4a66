"""Benchmark: what the deployment model costs in a run (``ldpsim bench --deployment N``).

For each family's protocol of the ``deployment_*`` scenarios, one run at N agents on the
inproc backend (the scenarios') and on the processes backend, with and without a
``[deployment]`` of the shipped mobile trace in which
every agent is online and no deadline drops anyone: both runs do the same protocol work and
move the same bytes, and the second also draws every agent's device (in the curator's process,
fresh for each run), keeps each agent's bytes and computes every answer's arrival. Runs
alternate (A, B, A, B) and each figure is the best of ``REPEATS`` whole ``ldpsim.run`` calls
(set-up, data, rounds, scoring, record: what a user waits for). Because two runs on a
2-core machine differ by more than the model costs, the table also gives what the model took
inside the runs with it (``timing.network_s``: drawing the devices, who is online, every
round's arrivals and end; the curator measures it around those steps; the least of the
runs') and its share of the best ``ldpsim.run`` call: the figure to read. Apart, the
model's own computations at N agents, timed alone.
"""

from __future__ import annotations

import sys
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.simulator.scenario import deployment as deploy
from ldpsim.simulator.session.network import DeploymentModel, RoundTraffic, draw_devices

import ldpsim

REPEATS = 3
#: the deployment the bench times: the mobile trace, everyone online, no deadline
DEPLOYMENT = {"trace": "mobile", "availability": 1.0}
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FAMILIES = ("rank", "vote", "safari", "truth", "ethics")


def _scenario(family: str, n: int, deployment: bool, backend: str = "processes"
              ) -> dict[str, Any]:
    """The family's ``deployment_*`` scenario at ``n`` agents, one run on ``backend``, with
    the bench's deployment or none."""
    raw = tomllib.loads((SCENARIOS / f"deployment_{family}.toml").read_text())
    raw["data"]["n"] = n
    raw["params"] = {k: (v[0] if isinstance(v, list) else v)
                     for k, v in raw.get("params", {}).items()}
    raw.update(repeats=1, plot={})
    raw["runtime"] = {"backend": backend, "pools": 2, "timeout_s": 600, "progress": False}
    raw.pop("deployment")
    if deployment:
        raw["deployment"] = dict(DEPLOYMENT)
    return raw


def run_pair(family: str, n: int, backend: str = "processes"
             ) -> tuple[str, float, float, float, float]:
    """The protocol, the best-of-``REPEATS`` ``ldpsim.run`` call without and with the
    deployment (alternating), and the model's seconds in the runs with it (the least of
    them, as every figure is the best of its runs) and their share of the best call."""
    best = {False: np.inf, True: np.inf}
    protocol, model = "", np.nan
    for _ in range(REPEATS):
        for dep in (False, True):
            raw = _scenario(family, n, dep, backend)
            protocol = raw["protocol"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                rec = next(iter(ldpsim.run(raw)))
                took = time.perf_counter() - t
            if dep:
                model = np.nanmin([model, rec["timing"]["network_s"]])
            best[dep] = min(best[dep], took)
    return protocol, best[False], best[True], model, model / best[True]


def model_alone(n: int) -> dict[str, float]:
    """The model's computations at ``n`` agents, timed alone (best of three): drawing every
    device, who is online in a round (availability 0.9), and one round's end (every agent's
    arrival from its bytes, the percentiles, who is late)."""
    table = deploy.check({"trace": "mobile", "availability": 0.9, "round_deadline_s": 0.1}, None)
    spec = deploy.run_deployment(table, "ldp_kwiksort_rr", {}, {})
    agents = np.arange(n, dtype=np.int64)
    out = {"devices": np.inf, "online": np.inf, "round_end": np.inf}
    for _ in range(3):
        t = time.perf_counter()
        draw_devices(spec, 1, agents)  # as a run draws them
        out["devices"] = min(out["devices"], time.perf_counter() - t)
        net = DeploymentModel.of(spec, (1, 2)).network(n)
        t = time.perf_counter()
        online = net.online(agents, 0)
        out["online"] = min(out["online"], time.perf_counter() - t)
        down, up = net.sizes(n)
        down[online], up[online] = 9, 9
        t = time.perf_counter()
        net.close_round(RoundTraffic(0, agents, int(online.sum()), online, online, down, 0,
                                    up, 1))
        out["round_end"] = min(out["round_end"], time.perf_counter() - t)
    return out


def main(n: int) -> None:
    print(f"\nldpsim bench --deployment {n}: each family's deployment scenario, one run of "
          f"{n:,} agents (2 pools), without and with [deployment] trace = \"mobile\" "
          f"(everyone online, no deadline: the same work), best of {REPEATS}, alternating",
          file=sys.stderr)
    print(f"{'backend':10s} {'family':8s} {'protocol':16s} {'run, no model':>14s} "
          f"{'run, model':>11s} {'model in the run':>17s} {'share of the run':>17s}")
    for backend in ("inproc", "processes"):
        for family in FAMILIES:
            protocol, a, b, model, share = run_pair(family, n, backend)
            print(f"{backend:10s} {family:8s} {protocol:16s} {a:13.2f}s {b:10.2f}s "
                  f"{model:16.3f}s {100 * share:16.1f}%", flush=True)
    alone = model_alone(n)
    total = sum(alone.values())
    print(f"the model alone at {n:,} agents: drawing the devices {alone['devices']:.3f} s (once "
          f"per run), who is online {alone['online']:.3f} s and a round's end "
          f"{alone['round_end']:.3f} s (per round); total {total:.3f} s")
