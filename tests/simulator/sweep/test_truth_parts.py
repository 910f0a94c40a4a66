"""The pools' shares of the ethics ground truth (``session.truthshare``): on the processes
backend each pool sends its part to the orchestrator over a pipe of its own, the orchestrator
joins them into the truth ``truth()`` gives, bit for bit, and computes it itself whenever a
part is missing (a silent or dead pool, offline or refusing agents, the audit's override, a
protocol that solves no Eq. (3)). The parts never pass through the curator."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.ethics import data as ethics_data
from ldpsim.protocols.ethics import truthtap
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.seeding import local_parties
from ldpsim.simulator.session.truthshare import TruthShare
from ldpsim.simulator.sweep import execute

from tests.conftest import same_truth
from tests.simulator.sweep.truthparts import scored_both_ways, truth_of


@pytest.fixture(autouse=True)
def empty_memory(empty_ethics_memory):
    """Each test with the ethics memories empty (``tests.conftest.empty_ethics_memory``)."""


def _strip(obj: Any) -> Any:
    """A record without its timings (wall and CPU seconds differ from run to run)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items()
                if k != "timing" and not k.endswith(("wall_s", "cpu_s"))
                and not k.startswith("physical_")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def spec(n: int, pools: int, protocol: str = "ethics_vldp", d: int = 3, records: int = 4,
         **top: Any):
    raw = {"protocol": protocol, "seed": 4,
           "data": {"kind": "ethics_synthetic", "n": n, "d": d, "records": records},
           "runtime": {"backend": "processes", "pools": pools, "secret": "seed", "batch": 256,
                       "timeout_s": 3, **top.pop("runtime", {})}, **top}
    return sc.validate(raw).runs()[0]


def processes_parts(s, policy: AgentPolicy | None = None) -> tuple[dict, list]:
    """The processes backend's result of the run ``s`` and the parts its pools sent."""
    config = dict(s.config(), seed=s.seed)
    parts: list = []
    res = run_processes(config, Limits.of_runtime(s.runtime), policy=policy, truth_parts=parts)
    return res, parts


@pytest.mark.parametrize("pools", [1, 2, 3])
def test_the_pools_parts_are_the_truth_bit_for_bit(monkeypatch, pools):
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)  # the pools are forked: the same blocks
    s = spec(4321, pools)  # 2 pools: a boundary at 2160, 3 pools: at 1440 and 2880
    res, parts = processes_parts(s)
    assert res["n_agents"] == 4321 and len(parts) == pools
    assert all(isinstance(p, truthtap.TruthPart) for p in parts)
    ds, want = truth_of(s)
    same_truth(ds.truth_join(parts), want)


@pytest.mark.parametrize("pools", [1, 3])
def test_chunked_pools_parts_are_the_truth_bit_for_bit(monkeypatch, pools):
    """Pools that hold their voters a chunk at a time (``[runtime] chunk``) hear each chunk's
    rows and solves as they come (chunks of 700 across blocks of 1000 and the pools' bounds;
    the run's curator streams): the same parts, the same truth."""
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)
    s = spec(4321, pools, runtime={"chunk": 700})
    res, parts = processes_parts(s)
    assert res["n_agents"] == 4321 and len(parts) == pools
    assert all(isinstance(p, truthtap.TruthPart) for p in parts)
    ds, want = truth_of(s)
    same_truth(ds.truth_join(parts), want)


def test_the_real_block_size_on_the_processes_backend():
    n = 2 * ethics_data.BLOCK + 1234
    s = spec(n, 3, d=2, records=3)  # boundaries at n/3 and 2n/3, both inside a block
    _, parts = processes_parts(s)
    ds, want = truth_of(s)
    same_truth(ds.truth_join(parts), want)


def test_a_run_scored_from_the_parts_is_the_record_scored_from_truth(monkeypatch):
    """execute: the orchestrator solves no voter (``truth`` is never called) and the record
    is the one a truth computed by the orchestrator gives."""
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)
    s = spec(2500, 2)

    joined, computed = scored_both_ways(monkeypatch, s, ethics_data.PairwiseChoices,
                                        ethics_data.PairwiseChoices)
    assert _strip(joined) == _strip(computed)
    assert joined["metrics"] == computed["metrics"]


@pytest.mark.parametrize("case", ["silent", "kill", "offline", "refused", "no_eq3"])
def test_without_every_voter_heard_the_orchestrator_computes_it(monkeypatch, case):
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)
    policy = None
    if case in ("silent", "kill"):
        s = spec(2500, 2, runtime={"faults": [{"pool": 1, "round": 0, "action": case}]})
    elif case == "offline":
        s = spec(2500, 2, deployment={"availability": 0.9})
    elif case == "refused":  # every agent's lifetime budget is spent: its odometer refuses
        s = spec(2500, 2)
        policy = AgentPolicy(lifetime_epsilon=1.0, spent=1.0)
    else:  # the functional mechanism: its voters never solve Eq. (3)
        s = spec(2500, 2, protocol="ethics_rldp_fm")
    _, parts = processes_parts(s, policy)
    ds, want = truth_of(s)
    assert ds.truth_join(parts) is None
    if case in ("silent", "kill"):
        assert parts[0] is not None and parts[1] is None  # the other pool's is whole
    cache = execute.TruthCache()
    cache.offer(s.data, s.seed, None, parts)
    same_truth(cache.get(s.data, s.seed, None), want)


def drive(config: dict, override: dict | None = None) -> tuple[dict, list[bytes], list]:
    """A run in this process as the inproc backend makes it, with the pools sharing their
    truth (as on the processes backend): the curator's result, every frame the curator
    received, and the parts the pools made for the orchestrator."""
    n_pools = int(config["pools"])
    parties = local_parties(config, int(config["data"]["n"]), None)
    limits = Limits(timeout_s=5)
    cur = CuratorSession(0, parties.curator, parties.auth, limits, False)
    pools = [PoolSession(i, n_pools, parties.auth, limits, parties.pools[i])
             for i in range(n_pools)]
    for p in pools:
        p.can_die, p.override, p.share = False, override, TruthShare()
    queue: deque[tuple[bool, int, bytes]] = deque((True, i, p.hello())
                                                  for i, p in enumerate(pools))
    received, parts = [], []
    while not cur.finished:
        if not queue:
            queue.extend((False, int(peer[5:]), f) for peer, f in cur.on_timeout())
            continue
        to_curator, i, frame = queue.popleft()
        if to_curator:
            received.append(frame)
            queue.extend((False, int(peer[5:]), f) for peer, f in
                         cur.on_frame(b"pool-%d" % i, frame))
        else:
            queue.extend((True, i, f) for f in pools[i].on_frame(frame))
            parts += [part for _, part in pools[i].take_truth()]
    return cur.result, received, parts


def test_the_curator_never_receives_a_part(monkeypatch):
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)
    s = spec(2600, 3)
    config = dict(s.config(), seed=s.seed)
    res, received, parts = drive(config)
    ds, want = truth_of(s)
    same_truth(ds.truth_join(parts), want)
    # no sum and no edge of any part is in anything the curator received or released
    pieces = [a.tobytes() for p in parts for m, g, _ in p.sums.values() for a in (m, g)]
    pieces += [a[:4].tobytes() for p in parts for _, e, g in p.edges.values() for a in (e, g)]
    assert pieces and not any(x in frame for frame in received for x in pieces)
    assert "truth" not in repr(sorted(res))


def test_an_audit_override_leaves_no_part(monkeypatch):
    """The privacy audit's neighbouring data set (one agent's row replaced): the pools' rows
    are not the data set's, so no pool hands a part over."""
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)
    s = spec(2600, 2)
    config = dict(s.config(), seed=s.seed)
    row = np.zeros(1 + 4 * 3)
    _, _, parts = drive(config, {"agent": 5, "row": row})
    assert parts == [None, None]
