"""A chunked run (``[runtime] chunk`` below the run's agents) gives the same record, field for
field (timing aside), as the same run unchunked: on both local backends, with one to three
pools, for every protocol whose curator absorbs its reports in parts (the curator then streams
its rounds) and one of each family that does not, with colluders, with a lost pool's
dropouts, with an adversary view (which reads whole rounds: the run falls back to them) and
with a ``[deployment]`` (which streams where each report's lateness is its own:
``test_streamed_deployment.py``).

The unchunked run sets ``chunk`` too, to a number above the run's agents that msgpack writes
in as many bytes (``SMALL`` and ``LARGE`` are both 16-bit): the chunk travels in the
configuration each pool gets, so the set-up frame, and the physical bytes the record counts,
are the same length only then.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import msgpack
import numpy as np
import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import Limits

import ldpsim

#: the chunk of a chunked run (a prime: it divides no pool's block) and of an unchunked one
SMALL, LARGE = 997, 65521
#: protocols whose curators absorb in parts (their chunked runs stream)
STREAMING = ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr", "ldp_kwiksort_lap", "rank_grr",
             "rank_olh", "rank_calm", "safari", "rank_harmony", "ethics_vldp"]
#: one protocol of each family whose curator reads whole rounds (the ethics family's with
#: the weighted aggregate: ``test_in_order.py``)
WHOLE = ["dpwevote", "truth_two_layer"]
#: what a record holds that is measured live
LIVE = ("wall_s", "curator_cpu_s")


def cfg(protocol: str, chunk: int, n: int = 3000, pools: int = 2, colluders: Any = 0,
        faults: tuple = (), seed: int = 5, batch: Any = "auto") -> dict:
    return {"protocol": protocol, "params": {}, "data": {**example_data(protocol), "n": n},
            "seed": seed, "pools": pools, "agent_mode": "batched", "batch": batch,
            "chunk": chunk, "collusion": {"colluders": colluders, "curator": True},
            "faults": list(faults)}


def fields(res: dict, physical: bool = True) -> bytes:
    """Every field of a curator's result but its timing (the view as well), as bytes; without
    the socket's own counts unless ``physical`` (on the processes backend how many frames a
    pool's reports take depends on how its queued batches met, run to run, and the pools'
    disclosures come in any order: they are compared by agent)."""
    out = {k: v for k, v in res.items() if k != "timing"}
    out["disclosed_bytes"] = sorted(res["disclosed_bytes"].items())
    out["comm"] = {k: v for k, v in res["comm"].items()
                   if physical or not k.startswith("physical_")}
    out["comm"]["per_round"] = [{k: v for k, v in r.items() if k not in LIVE}
                                for r in res["comm"]["per_round"]]
    return msgpack.packb(out, default=wire.pack_ext, use_bin_type=True)


def _pair(run, protocol: str, **kw) -> tuple[bytes, bytes]:
    """The fields of a run unchunked and chunked (the socket's counts on inproc only)."""
    physical = run is run_inproc
    limits = Limits(timeout_s=kw.pop("timeout_s", 5.0))
    return (fields(run(cfg(protocol, LARGE, **kw), limits), physical),
            fields(run(cfg(protocol, SMALL, **kw), limits), physical))


@pytest.mark.parametrize("pools", [1, 2, 3])
@pytest.mark.parametrize("protocol", STREAMING + WHOLE)
def test_a_chunked_run_gives_the_same_record_inproc(protocol, pools, streamed):
    whole, chunked = _pair(run_inproc, protocol, n=3000 if protocol in STREAMING else 1200,
                           pools=pools)
    assert whole == chunked
    assert streamed == [False, protocol in STREAMING]


@pytest.mark.parametrize("protocol", STREAMING + ["dpwevote"])
def test_a_chunked_run_gives_the_same_record_on_processes(protocol):
    whole, chunked = _pair(run_processes, protocol, pools=2)
    assert whole == chunked
    assert whole == fields(run_inproc(cfg(protocol, SMALL), Limits(timeout_s=5)), False)


@pytest.mark.parametrize("colluders", [0.1, 7, [3, 1500, 2999]])
@pytest.mark.parametrize("run", [run_inproc, run_processes], ids=["inproc", "processes"])
def test_colluders_disclose_the_same_in_a_chunked_run(run, colluders, streamed):
    res = run(cfg("ldp_kwiksort_rr", SMALL, colluders=colluders, pools=3), Limits(timeout_s=5))
    assert res["colluders"] == (300 if colluders == 0.1 else 7 if colluders == 7 else 3)
    assert res["comm"]["disclose_bytes_total"] > 0
    whole, chunked = _pair(run, "ldp_kwiksort_rr", colluders=colluders, pools=3)
    assert whole == chunked == fields(res, run is run_inproc)


@pytest.mark.parametrize("action", ["silent", "kill"])
@pytest.mark.parametrize("run", [run_inproc, run_processes], ids=["inproc", "processes"])
def test_a_lost_pools_dropouts_are_the_same_in_a_chunked_run(run, action, streamed):
    faults = ({"pool": 1, "round": 0, "action": action},)
    res = run(cfg("ldp_kwiksort_rr", SMALL, faults=faults, pools=3), Limits(timeout_s=1.0))
    assert res["dropouts"] == 1000
    whole, chunked = _pair(run, "ldp_kwiksort_rr", faults=faults, pools=3, timeout_s=1.0)
    assert whole == chunked


@pytest.mark.parametrize("protocol", ["ldp_kwiksort_lap", "dpwevote"])
def test_an_adversary_view_reads_whole_rounds_in_a_chunked_run(protocol, streamed):
    whole, chunked = (run_inproc(cfg(protocol, chunk, colluders=5), Limits(timeout_s=5),
                                 record_view=True) for chunk in (LARGE, SMALL))
    assert fields(whole) == fields(chunked) and chunked["view"]["rounds"]
    assert streamed == [False, False]


def test_a_deployment_gives_the_same_record_in_a_chunked_run(streamed):
    free = {"latency_ms": 1.0, "down_mbps": math.inf, "up_mbps": 10.0, "availability": 0.9,
            "compute": 0.0}
    recs = []
    for chunk in (LARGE, SMALL):
        table = {"protocol": "ldp_kwiksort_rr", "data": {**example_data("ldp_kwiksort_rr"),
                                                         "n": 3000},
                 "runtime": {"backend": "inproc", "chunk": chunk}, "seed": 7,
                 "deployment": free}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            recs.append(list(ldpsim.run(table, secret="seed"))[0])
    a, b = ({k: v for k, v in r.items() if k not in ("timing", "comm")} for r in recs)
    assert a == b and recs[0]["virtual"] and streamed == [False, True]
    ra, rb = (r["comm"]["per_round"] for r in recs)
    assert [{k: v for k, v in r.items() if k not in LIVE} for r in ra] == [
        {k: v for k, v in r.items() if k not in LIVE} for r in rb]
    assert np.isclose(recs[0]["comm"]["bytes_total"], recs[1]["comm"]["bytes_total"])


@pytest.mark.parametrize("limit", [0, 1])
def test_a_streamed_round_whose_flags_become_bitsets_gives_the_same_record(monkeypatch, limit):
    """Three pools' batches, answered in turn, make several intervals of who reported: with
    the intervals capped below that (``idsets.LIMIT``) the round's flags turn into bitsets
    mid-round, and the record is the same (a dropout pool and colluders too)."""
    from ldpsim.simulator.session import idsets

    faults = ({"pool": 2, "round": 0, "action": "silent"},)
    kw = {"pools": 3, "colluders": 9, "faults": faults, "timeout_s": 1.0, "batch": 100}
    want = _pair(run_inproc, "ldp_kwiksort_rr", **kw)
    monkeypatch.setattr(idsets, "LIMIT", limit)
    sets = []
    init = idsets.IdSet.__init__

    def spy(self, n):
        init(self, n)
        sets.append(self)

    monkeypatch.setattr(idsets.IdSet, "__init__", spy)
    assert _pair(run_inproc, "ldp_kwiksort_rr", **kw) == want
    assert any(s.bits is not None for s in sets)


@pytest.mark.parametrize("protocol", STREAMING)
def test_a_streamed_run_never_makes_the_array_of_its_agents(monkeypatch, protocol):
    """Nothing in a streamed run reads its agents as a whole array (``AgentRange`` stays two
    numbers), nor a round's queries whole (``RowQueries.full``)."""
    from ldpsim.protocols.agentrange import AgentRange
    from ldpsim.protocols.queries import RowQueries

    want = _pair(run_inproc, protocol, colluders=4)[1]

    def whole(*a, **k):
        raise AssertionError("a streamed run made a whole array")

    monkeypatch.setattr(AgentRange, "__array__", whole)
    monkeypatch.setattr(AgentRange, "__iter__", whole)
    monkeypatch.setattr(RowQueries, "full", whole)
    got = fields(run_inproc(cfg(protocol, SMALL, colluders=4), Limits(timeout_s=5)))
    assert got == want


def test_a_curator_that_says_one_round_and_plans_two_fails_its_streamed_run(monkeypatch):
    """Without per-agent byte counters a second round could not be counted: a curator that
    says it plans one round (``Curator.single_round``) and plans another fails the run."""
    from ldpsim.protocols import PROTOCOLS
    from ldpsim.simulator.session import RunFailed

    cls = PROTOCOLS["kwiksort"].curator_cls
    plan = cls.plan
    monkeypatch.setattr(cls, "plan", lambda self, rnd: plan(self, 0) if rnd < 2 else None)
    with pytest.raises(RunFailed, match="plans round 1, but says it plans one round"):
        run_inproc(cfg("kwiksort", SMALL), Limits(timeout_s=5))


#: the other streaming curators of the ethics family and SAFARI's (in agent order), with the
#: parameters that choose them, for the test at 10^7 agents
STREAMING_TOO = [("ethics_nonprivate", {}), ("ethics_vlcp", {}), ("ethics_rlcp", {}),
                 ("ethics_rldp_laplace", {"aggregate": "weighted"}), ("ethics_rldp_fm", {}),
                 ("safari", {"oracle": "harmony"})]


@pytest.mark.slow
@pytest.mark.parametrize("protocol, params", [(p, {}) for p in STREAMING] + STREAMING_TOO)
def test_at_ten_million_agents_a_chunked_run_gives_the_same_record(protocol, params):
    """Issue 52's done-when at its size: 10^7 agents on the processes backend, held in chunks
    of 2^20 + 7 (the curator streams) and held whole (a chunk above n), every field the same
    but the socket's own counts (two chunk settings msgpack writes in as many bytes)."""
    n, limits = 10**7, Limits(timeout_s=600.0)
    whole, chunked = ({**cfg(protocol, chunk, n=n), "params": dict(params)}
                      for chunk in (2**24 + 43, 2**20 + 7))
    assert fields(run_processes(whole, limits), False) == \
        fields(run_processes(chunked, limits), False)
