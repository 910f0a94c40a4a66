"""Benchmark: each local protocol's rounds on the processes backend against its own kernel
(``ldpsim bench --kernels N``).

For every protocol whose claim is local (the curator is not trusted), on its example data
(``protocols.local.example_data``) scaled to N agents:

* **rounds**: one run on the processes backend (curator + pools over ZeroMQ, batched agents),
  its rounds' wall time summed (``comm.per_round[].wall_s``: each from the curator's plan to the
  end of its absorb: queries out, the pools' randomizers, reports back and validated, the
  estimator). Set-up (process start, data generation, registration) and the curator's
  ``finish`` after the last round are not in it: a processes pool builds its data as it
  starts, before it says ready.
* **kernel**: the same protocol in this process with no transport and no runtime: the
  curator's ``plan`` and ``absorb`` and one vectorised ``respond`` over all asked agents' rows
  per round (the loop of ``protocols.local.run_locally`` with the data built beforehand and the
  reports' schema check outside the clock). ``finish`` is timed on its own (``finish s``): it
  follows the rounds on both backends.

``rounds / kernel`` is what the runtime costs on top of the science: below 1, the pools'
parallel randomizers win more than the transport costs; far above 1, transport or batching
dominates. ``envelopes`` (``envelope_floor``) is the same number of agent envelopes moved with
no protocol logic: where ``envelopes / kernel`` is itself above 2, no runtime that sends one
envelope per agent (and so keeps the per-agent bytes exact) gets its rounds within 2× the
kernel. The notes say whether the reports fit the runtime's vectorised batch codec (reports
that did not would travel as one msgpack envelope per agent). Rounds and kernel are each the
best of three runs, like every row of ``ldpsim bench`` (the notes give the rounds' range);
the envelope floor is timed once.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
from ldpsim.protocols import PROTOCOLS, ParamError, build_data
from ldpsim.protocols.keys import DataKeys
from ldpsim.protocols.local import example_data, local_rounds
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.bench.audit import print_table
from ldpsim.simulator.bench.ceiling import transport_ceiling
from ldpsim.simulator.codec import wire, wire_numpy, wire_numpy_read
from ldpsim.simulator.session import Limits

#: protocols that cannot run at the requested size: name -> (largest n, why)
CAPS: dict[str, tuple[int, str]] = {}
SEED = 1


def local_protocols() -> list[str]:
    """The registered protocols whose claim on their example data is local."""
    out = []
    for name in sorted(PROTOCOLS):
        data = example_data(name)
        if data is None:
            continue
        proto = PROTOCOLS[name]
        public = build_data(data, 0).public
        if proto.claim(proto.resolve({}, public), public).model == "local":
            out.append(name)
    return out


def data_table(name: str, n: int) -> dict[str, Any]:
    """The protocol's example ``[data]`` table with n agents."""
    return {**example_data(name), "n": n}


def kernel(name: str, n: int, seed: int = SEED) -> dict[str, Any]:
    """Seconds of one in-process run's plan, respond, absorb and finish (``protocols.local``'s
    loop; the data set is built before the clock starts), its number of rounds, and whether
    every round's reports fit the runtime's batch codec (``batch_codec``); per round, the
    respond's seconds (``respond_rounds``), the agents asked and the report's numbers."""
    proto = PROTOCOLS[name]
    table = data_table(name, n)
    data = build_data(table, DataKeys.of_seed(seed))
    t: dict[str, Any] = {"plan": 0.0, "respond": 0.0, "absorb": 0.0, "finish": 0.0,
                         "respond_rounds": []}
    proto.import_curator_modules()  # as the runtime does at set-up: not round time

    def timed(phase: str, fn, *a):
        t0 = time.perf_counter()
        out = fn(*a)
        took = time.perf_counter() - t0
        t[phase] += took
        if phase == "respond":
            t["respond_rounds"].append(took)
        return out

    rounds, _ = local_rounds(timed("plan", proto.bind, {}, data.public), data, seed, timed)
    batched = [batch_codec(rnd, r.plan, r.block.agents, r.reports)
               for rnd, r in enumerate(rounds)]
    rnd = len(rounds)
    t["rounds"] = rnd
    t["asked"] = [len(r.plan.agents) for r in rounds]
    t["numbers"] = [r.plan.schema.length for r in rounds]
    t["batch_codec"] = all(batched)
    return t


def batch_codec(rnd: int, plan: Any, agents: np.ndarray, reports: np.ndarray,
                sample: int = 1000) -> bool:
    """Whether the runtime's vectorised batch codec carries these reports (else the pools and
    the curator encode and decode one msgpack envelope per agent), judged on the first
    ``sample`` reports: their frame must read back through ``wire_numpy_read.match_batch``."""
    m = min(sample, len(agents))
    if m == 0:
        return True
    frame, _ = wire_numpy.encode_batch(wire.REPORT, 0, rnd, agents[:m], reports[:m])
    return wire_numpy_read.match_batch(frame, wire.REPORT, 0, rnd, agents[:m],
                                       plan.schema.length, plan.schema.dtype) is not None


def processes_rounds(name: str, n: int, pools: int, batch: int | str,
                     timeout_s: float = 300.0, data: dict[str, Any] | None = None,
                     params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One processes-backend run (on ``data``, by default the protocol's example data with n
    agents, and ``params``, by default the protocol's): its rounds' summed wall time and the
    run's record."""
    cfg = {"protocol": name, "params": params or {}, "data": data or data_table(name, n),
           "seed": SEED,
           "pools": pools, "agent_mode": "batched", "batch": batch,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    res = run_processes(cfg, Limits(timeout_s=timeout_s))
    res["rounds_wall_s"] = sum(r["wall_s"] for r in res["comm"]["per_round"])
    return res


def rows(n: int, pools: int = 2, batch: int | str = "auto", names: list[str] | None = None,
         progress: bool = True, repeats: int = 3) -> list[list[str]]:
    """One row per local protocol (see the module docstring): the best of ``repeats`` runs of
    each side (the processes run with the fewest rounds seconds, the kernel with the fewest
    plan + respond + absorb seconds), as every row of ``ldpsim bench``; the notes give the
    processes runs' range."""
    out = []
    for name in names or local_protocols():
        size, note = n, ""
        if name in CAPS and CAPS[name][0] < n:
            size, why = CAPS[name]
            note = f"n = {size:,} (cannot run at {n:,}: {why}); "
        try:
            runs = [processes_rounds(name, size, pools, batch) for _ in range(repeats)]
            res = min(runs, key=lambda r: r["rounds_wall_s"])
            k = min((kernel(name, size) for _ in range(repeats)),
                    key=lambda t: t["plan"] + t["respond"] + t["absorb"])
        except (ParamError, RuntimeError, MemoryError) as exc:  # RunFailed is a RuntimeError
            out.append([name, f"{size:,}", "", "", "", "", "", "", "", "",
                        f"failed: {exc}"[:120]])
            continue
        rounds = res["rounds_wall_s"]
        core = k["plan"] + k["respond"] + k["absorb"]
        ratio = rounds / core if core > 0 else math.inf
        floor = envelope_floor(res, pools)
        t = res["timing"]
        codec = ("batch codec" if k["batch_codec"] else
                 "reports outside the batch codec's layout: one msgpack envelope per agent")
        spread = sorted(r["rounds_wall_s"] for r in runs)
        sizes = sorted({r["batch"] for r in res["comm"]["per_round"] if r["asked"]})
        note += (f"{k['rounds']:.0f} round(s), {codec}; batches of "
                 f"{'/'.join(f'{b:,}' for b in sizes)}; best of {repeats} (rounds "
                 f"{_s(spread[0])}-{_s(spread[-1])} s); the processes run's wall_s "
                 f"{_s(t['wall_s'])} s")
        out.append([name, f"{size:,}", _s(rounds), _s(core), _s(k["respond"]),
                    _s(k["plan"] + k["absorb"]), _s(k["finish"]), f"{ratio:.2f}", _s(floor),
                    f"{floor / core:.2f}" if core > 0 else "", note])
        if progress:
            print("  " + "  ".join(out[-1][:8]), file=sys.stderr, flush=True)
    return out


def envelope_floor(res: dict[str, Any], pools: int) -> float:
    """Seconds the run's rounds would take if they did nothing but move one envelope per asked
    agent each way through the runtime's sockets and batch codec
    (``bench.ceiling.transport_ceiling`` "batch": one small integer per query and report, no
    protocol logic; each round's batches as large as the run's), summed over the rounds: a
    floor for any round that keeps one envelope per agent, whatever its kernel."""
    return sum(transport_ceiling(r["asked"], pools, r["batch"], 1, 1, "batch")[0]
               for r in res["comm"]["per_round"] if r["asked"])


def _s(x: float) -> str:
    """Seconds with three significant digits (0.00412, 1.23, 45.6)."""
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


HEAD = ["protocol", "agents", "rounds s", "kernel s", "respond s", "plan+absorb s", "finish s",
        "rounds/kernel", "envelopes s", "envelopes/kernel", "notes"]


def main(n: int, pools: int = 2, batch: int | str = "auto", names: list[str] | None = None) -> None:
    """Print the table."""
    print(f"\nprotocol rounds (processes backend, {pools} pools, batch {batch}) / the protocol's "
          "own kernel in one process (plan + respond over all rows + absorb; finish apart)")
    print_table(HEAD, rows(n, pools, batch, names))
