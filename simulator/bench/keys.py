"""What independent agents cost (``ldpsim bench``): key derivation and policy checks at n agents,
against the run they are part of.

* **orchestrator: the parties' keys** (``seeding.local_parties``): each pool's restriction of the
  device-key tree (the nodes covering its block) and the configuration signed once per pool,
  before the pools start.
* **a pool: its agents' keys** (``AgentKeys.for_range``): every agent of its block's device key
  (two PRF calls), coin key and data key (one each), in one pass; the pools do this at once, as
  they start, so a run waits for the slowest.
* **a pool: the set-up check**: the orchestrator's signature verified, the configuration read,
  the run id looked up, the agents' policy applied.
* **orchestrator: the data keys of the truth**: every agent's data key, for the ground truth the
  orchestrator scores the output against (beside the run for large data sets).

The share is the first three (the slowest pool's keys once) over the whole run's wall time
(from the curator's set-up to the release, ``timing.wall_s``) of LDP-KwikSort:RR on the
processes backend at the same size, measured in the same invocation; without a secret of the
experiment's own (the seed's keys) and with one (then the orchestrator derives every agent's
device key once per sweep and each pool derives only the run's coin and data keys).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ldpsim.protocols import build_data
from ldpsim.protocols.keys import Secrets
from ldpsim.protocols.prf import SIPHASH
from ldpsim.simulator.session import Limits, PoolSession, block_of, seeding
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.seeding import local_parties, public_config


def _best(fn: Callable[[], Any], repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _pool_keys(parties: Any, config: dict[str, Any], n: int) -> float:
    """The slowest pool's key derivation for the run (they run at once), best of five."""
    public = public_config(config)
    pools = int(config["pools"])
    slowest = 0.0
    for i in range(pools):
        start, stop = block_of(i, pools, n)
        keys = parties.pools[i].agents
        slowest = max(slowest, _best(lambda k=keys, a=start, b=stop: k.for_range(
            a, b, coin_tag=public["run_id"], data_tag=public["data_id"])))
    return slowest


def measure(config: dict[str, Any], n: int) -> dict[str, float]:
    """Seconds of each step for the run ``config`` of ``n`` agents (best of five): without a
    secret (the seed's keys: each pool derives its agents' device keys too) and with the
    experiment's own secret (the orchestrator derives every device key once per sweep,
    ``first_parties``, and hands each pool its block's)."""
    out: dict[str, float] = {}
    seeded = local_parties(config, n)
    out["parties_seed"] = _best(lambda: local_parties(config, n))
    out["pool_seed"] = _pool_keys(seeded, config, n)
    secrets = Secrets(b"bench: the experiment's secret!!")
    seeding.device_keys.cache_clear()
    t0 = time.perf_counter()
    parties = local_parties(config, n, secrets)
    out["first_parties"] = time.perf_counter() - t0
    out["parties_secret"] = _best(lambda: local_parties(config, n, secrets))
    out["pool_secret"] = _pool_keys(parties, config, n)
    pool = PoolSession(0, int(config["pools"]), parties.auth, Limits(), parties.pools[0],
                       AgentPolicy(max_epsilon=10.0))
    cfg = parties.curator
    eps = float(config["params"]["epsilon"])

    def setup_check() -> None:  # as ``PoolSession._setup`` checks a set-up
        pool._check_setup(cfg["signed"], cfg["sigs"])
        pool.policy.refusal(config["protocol"], eps)

    out["setup_check"] = _best(setup_check, 50)
    data_keys = secrets.data_keys(config["seed"])
    n_all = build_data(config["data"], data_keys).n
    out["truth_keys"] = _best(lambda: secrets.agents.for_range(0, n_all,
                                                               data_tag=data_keys.tag))
    return out


def rows(config: dict[str, Any], n: int, run_wall_s: float) -> list[list[str]]:
    """The table's rows: each step's time and its share of the run's wall time."""
    m = measure(config, n)
    pools = int(config["pools"])
    per = f"{n // pools:,}"

    def row(name: str, s: float, note: str, share: bool = True) -> list[str]:
        return [name, f"{n:,}", f"{1e3 * s:.2f}",
                f"{100 * s / run_wall_s:.1f}%" if share else "-", note]

    seed_total = m["parties_seed"] + m["pool_seed"] + m["setup_check"]
    secret_total = m["parties_secret"] + m["pool_secret"] + m["setup_check"]
    return [
        row("no secret: the parties' keys", m["parties_seed"],
            f"the orchestrator: {pools} restrictions of the tree, {pools} signatures"),
        row("no secret: a pool's agents' keys", m["pool_seed"],
            f"device, coin and data keys of {per} agents (the slowest of {pools}, at once); "
            f"SipHash {SIPHASH.name()}"),
        row("a secret: the parties' keys", m["parties_secret"],
            f"as above, each pool's block of device keys attached (the sweep's first run: "
            f"{1e3 * m['first_parties']:.1f} ms, deriving all {n:,})"),
        row("a secret: a pool's agents' keys", m["pool_secret"],
            f"coin and data keys of {per} agents from their device keys"),
        row("a pool: the set-up check", m["setup_check"],
            "signature, configuration, run id, policy"),
        row("total in the run, no secret", seed_total,
            f"of the run's {run_wall_s:.3f} s (timing.wall_s, from the curator's set-up; "
            f"processes backend, LDP-KwikSort:RR, no secret)"),
        row("total in the run, a secret", secret_total, "the same run with a secret"),
        row("orchestrator: the truth's data keys", m["truth_keys"],
            "every agent's data key, for the ground truth (beside the run)", share=False),
    ]
