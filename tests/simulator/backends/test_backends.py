"""The backends must agree bit for bit: inproc vs processes with any pool count, batched vs
exact agent mode; same seed => same run, different seed => different run."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, rank
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits
from ldpsim.simulator.sweep.execute import TruthCache

LIMITS = Limits(timeout_s=10)


def config(protocol: str, seed: int = 5, n: int = 3000, m: int = 8, pools: int = 2,
           **extra) -> dict:
    params = {} if protocol == "kwiksort" else {"epsilon": 1.5}
    if protocol.startswith("ldp"):
        params["queries"] = 2
    cfg = {"protocol": protocol, "params": params,
           "data": {"kind": "mallows", "n": n, "m": m, "theta": 0.4}, "seed": seed,
           "pools": pools, "agent_mode": "batched", "batch": 700,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    cfg.update(extra)
    return cfg


def score(cfg: dict, res: dict) -> dict:
    return PROTOCOLS[cfg["protocol"]].evaluate(res["output"], TruthCache().get(cfg["data"],
                                                                               cfg["seed"]))


COMM_KEYS = ("bytes_up_per_agent_mean", "bytes_down_per_agent_mean", "bytes_total",
             "messages_total", "rounds", "report_bits_per_agent", "bytes_up_per_agent_max")


@pytest.mark.parametrize("protocol", sorted(p.name for p in rank.PROTOCOLS))
def test_inproc_equals_processes_for_any_pool_count(protocol):
    ref_cfg = config(protocol, pools=1)
    ref = run_inproc(ref_cfg, LIMITS)
    ref_metrics = score(ref_cfg, ref)
    for backend, pools in (("inproc", 3), ("processes", 1), ("processes", 2),
                           ("processes", 3)):
        cfg = config(protocol, pools=pools)
        res = run_inproc(cfg, LIMITS) if backend == "inproc" else run_processes(cfg, LIMITS)
        assert res["output"] == ref["output"], (backend, pools)
        assert score(cfg, res) == ref_metrics
        assert {k: res["comm"][k] for k in COMM_KEYS} == {k: ref["comm"][k] for k in COMM_KEYS}
        assert res["rejected"] == 0 and res["dropouts"] == 0


@pytest.mark.parametrize("protocol", ["ldp_kwiksort_rr", "ldp_kwiksort_lap", "dp_kwiksort"])
def test_exact_agent_mode_equals_batched(protocol):
    batched = run_inproc(config(protocol, n=400), LIMITS)
    exact = run_processes(config(protocol, n=400, agent_mode="exact"), LIMITS)
    assert exact["output"] == batched["output"]
    assert exact["timing"]["agent_time_mode"] == "exact"
    assert batched["timing"]["agent_time_mode"] == "amortised"
    assert exact["timing"]["agent_cpu_s_mean"] > 0


def test_seeds_reproduce_and_differ():
    a = run_inproc(config("ldp_kwiksort_rr", seed=1, n=500), LIMITS)
    b = run_inproc(config("ldp_kwiksort_rr", seed=1, n=500), LIMITS)
    c = run_inproc(config("ldp_kwiksort_rr", seed=2, n=500), LIMITS)
    assert a["output"] == b["output"]
    assert a["output"]["cmp_hat"] != c["output"]["cmp_hat"]


def test_per_agent_bytes_are_exact_envelope_sizes():
    """K=2 RR: every query and report envelope is [1, t, run, round, agent, [x, y]]."""
    import msgpack

    cfg = config("ldp_kwiksort_rr", n=300)
    res = run_inproc(cfg, LIMITS)
    agents = np.arange(300)
    up = [len(msgpack.packb([1, 3, 0, 0, int(a), [0, 0]])) for a in agents]
    assert res["comm"]["bytes_up_per_agent_mean"] == pytest.approx(np.mean(up), abs=1e-12)
    assert res["comm"]["report_bits_per_agent"] == 2
    assert res["comm"]["messages_total"] == 600
    assert res["comm"]["messages_up_per_agent_mean"] == 1.0
    assert res["comm"]["messages_down_per_agent_mean"] == 1.0


@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_large_replies_are_split_under_the_frame_limit(backend):
    """A pool splits a reply that would exceed the frame limit; nothing is lost or rejected."""
    cfg = config("ldp_kwiksort_lap", n=3000)
    ref = run_inproc(cfg, LIMITS)
    small = Limits(timeout_s=10, max_frame_bytes=4096)
    res = run_inproc(cfg, small) if backend == "inproc" else run_processes(cfg, small)
    assert res["output"] == ref["output"]
    assert res["rejected"] == 0 and res["dropouts"] == 0
    assert {k: res["comm"][k] for k in COMM_KEYS} == {k: ref["comm"][k] for k in COMM_KEYS}
    assert res["comm"]["physical_frames"] > 2 * ref["comm"]["physical_frames"]
