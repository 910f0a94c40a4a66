"""The result record: what the curator returns for a run (``curator_result``) and what the
orchestrator stores for it in ``results.jsonl`` (``run_record``).

The ``comm`` and ``timing`` parts are ``accounting.CommStats`` and ``accounting.Timing``'s
(their ``FIELDS`` say what each key means); docs/results.md lists the same keys
(a test checks that they agree).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from ldpsim.simulator.session.accounting import CommStats, Timing
from ldpsim.simulator.session.collusion import Coalition

#: rejection records a result keeps (all are counted in ``rejected``)
KEPT_REJECTIONS = 50


def curator_result(*, output: Any, params: Any, public: Any, n: int, registered: np.ndarray,
                   comm: CommStats, timing: Timing, pool_stats: Iterable[dict[str, Any]],
                   pools_registered: int, rejected: int, rejections: list[dict[str, Any]],
                   refused: int, refusal: str | None, round_dropouts: int,
                   colluders: Coalition | None, curator_colludes: bool,
                   virtual: dict[str, Any] | None = None,
                   view: dict[str, Any] | None = None) -> dict[str, Any]:
    """The curator's result for a run: its public output, what the run cost, and what went
    wrong (rejections, refusals, dropouts). ``registered`` are the registered agents' ids;
    ``pool_stats`` the pools' accepted DONE statistics; ``virtual`` the virtual time of a
    ``[deployment]`` (``Network.summary``) and ``view`` the adversary view, when kept."""
    # by pool, however they arrived: sums over them (the mean spend) are the same on every
    # backend
    stats = sorted((s for s in pool_stats if s), key=lambda s: int(s.get("pool", 0)))
    out = {
        "spent": spent(stats),
        "output": output,
        "params": params,
        "public": public,
        "n_agents": n,
        "comm": comm.as_record(registered),
        "timing": timing.as_record(stats),
        "rejected": rejected,
        "rejections": rejections[:KEPT_REJECTIONS],
        "refused": refused,
        "refusal": refusal,
        "dropouts": int(round_dropouts + (n - len(registered))),
        "dropouts_registration": int(n - len(registered)),
        "pools_registered": pools_registered,
        "pools_reported_done": len(stats),
        "colluders": len(colluders) if colluders is not None else 0,
        "curator_colludes": curator_colludes,
        # by colluder: what a smaller coalition of this execution disclosed (not recorded)
        "disclosed_bytes": dict(comm.disclosed),
    }
    if virtual is not None:
        out["virtual"] = virtual
    if view is not None:
        out["view"] = view
    return out


def spent(stats: list[dict[str, Any]]) -> dict[str, float] | None:
    """What the agents spent, from the pools' statistics: the largest and the mean ε per agent
    in this run, and the largest spent on the run's data set over the pools' lifetimes (at
    least this run's); None when no pool kept an odometer (no local claim)."""
    kept = [s for s in stats if "epsilon_spent_max" in s]
    if not kept:
        return None
    agents = sum(int(s.get("agents", 0)) for s in kept)
    return {"epsilon_spent_max": max(float(s["epsilon_spent_max"]) for s in kept),
            "epsilon_spent_mean": (sum(float(s["epsilon_spent_sum"]) for s in kept) / agents
                                   if agents else 0.0),
            "epsilon_lifetime_max": max(float(s["epsilon_lifetime_max"]) for s in kept)}


def run_record(*, spec: Any, res: dict[str, Any], backend: str, metrics: dict[str, Any],
               privacy: dict[str, Any], run_wall_s: float, versions: dict[str, str],
               degraded: str) -> dict[str, Any]:
    """The record ``results.jsonl`` stores for a run: the curator's result ``res`` for the
    ``RunSpec`` ``spec``, scored (``metrics``) and with the protocol's ``privacy`` claim.

    A run that lost agents (a dead, silent, refused or never-registered pool, or round
    dropouts) gets the status ``degraded`` and how many it lost.
    """
    timing = dict(res["timing"])
    timing["run_wall_s"] = run_wall_s
    pools = spec.runtime["pools"]
    registered = res.get("pools_registered", pools)
    lost = (res["dropouts_registration"] > 0 or registered < pools
            or res.get("pools_reported_done", registered) < registered or res["dropouts"] > 0)
    return {
        "key": spec.key, "status": degraded if lost else "complete",
        "lost_agents": int(res["dropouts"]),
        "scenario": spec.scenario, "protocol": spec.protocol,
        "params": res["params"], "params_requested": spec.params, "data": spec.data,
        "point": spec.point, "repeat": spec.repeat, "seed": spec.seed,
        "scenario_seed": spec.scenario_seed, "backend": backend,
        "pools": pools, "n_agents": res["n_agents"], "output": res["output"],
        "metrics": metrics, "privacy": {**privacy, **(res.get("spent") or {})},
        "comm": res["comm"], "timing": timing,
        "rejected": res["rejected"], "rejections": res["rejections"],
        "refused": res["refused"], "refusal": res["refusal"],
        "dropouts": res["dropouts"], "dropouts_registration": res["dropouts_registration"],
        "collusion": {"colluders": res["colluders"], "curator": res["curator_colludes"],
                      "spec": spec.collusion["colluders"]},
        "versions": versions,
        # a deployment's settings and what it did in virtual time (only with one)
        **({"deployment": spec.deployment, "virtual": res.get("virtual")}
           if spec.deployment else {}),
    }
