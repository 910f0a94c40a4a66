"""A ``[deployment]`` over a chunked run (``session.streamnet``): where each report's lateness
follows from its own arrival (the whole round answering, the curator's link unlimited) the
round streams, and its record is the one a whole round gives, field for field (timing aside):
who is online, who came late, the virtual end and time, the completion percentiles (on their
evenly spaced sample too), the bytes on the wire; on both local backends, with one to three
pools, a lost pool and every way a trace draws its devices. A deployment whose round end reads
every arrival (a quota, the curator's own link) reads whole rounds, as before.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.session import idsets, network, roundend, streamnet
from ldpsim.simulator.session.idsets import IdSet

import ldpsim

#: a chunk below the runs' agents (they stream) and one above them (whole rounds); both
#: 16-bit, so the configuration each pool gets is as long
SMALL, LARGE = 997, 65521
#: the mobile trace with a deadline some phones miss (offline, late and on time)
MOBILE = {"trace": "mobile", "round_deadline_s": 0.05}
#: what a record holds that is measured live
LIVE = ("wall_s", "curator_cpu_s")


def _record(deployment: dict, chunk: int, backend: str = "inproc", pools: int = 2,
            n: int = 3000, protocol: str = "ldp_kwiksort_rr", batch: Any = "auto",
            **extra: Any) -> dict:
    table = {"protocol": protocol, "data": {**example_data(protocol), "n": n},
             "runtime": {"backend": backend, "chunk": chunk, "pools": pools, "batch": batch,
                         "timeout_s": extra.pop("timeout_s", 10.0)},
             "seed": 7, "deployment": deployment, **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(ldpsim.run(table, secret="seed"))[0]


def _same(a: dict, b: dict) -> None:
    """Every field of two records but their timing, the run's key and chunk, and the socket's
    own counts (the chunk travels in the configuration; frames meet as they come)."""
    def strip(r: dict) -> dict:
        out = {k: v for k, v in r.items() if k not in ("timing", "comm", "key", "config")}
        out["comm"] = {k: v for k, v in r["comm"].items()
                       if not k.startswith("physical_") and k != "per_round"}
        out["per_round"] = [{k: v for k, v in x.items() if k not in LIVE}
                            for x in r["comm"]["per_round"]]
        return out
    assert strip(a) == strip(b)


@pytest.mark.parametrize("pools", [1, 3])
@pytest.mark.parametrize("backend", ["inproc", "processes"])
@pytest.mark.parametrize("deployment", [
    MOBILE,
    {**MOBILE, "availability_per": "run"},
    {"trace": "mobile"},  # no deadline: nobody is late
    {**MOBILE, "round_deadline_s": 0.001},  # every report late
    {"latency_ms": 5.0, "up_mbps": 1.0, "spread": 0.3, "round_deadline_s": 0.011},
    {"latency_ms": 5.0, "availability": 0.3, "compute": 0.0},
], ids=["mobile", "per-run", "no-deadline", "all-late", "one-class", "mostly-offline"])
def test_a_streamed_deployment_gives_the_whole_rounds_record(deployment, backend, pools,
                                                             streamed):
    whole = _record(deployment, LARGE, backend, pools)
    chunked = _record(deployment, SMALL, backend, pools)
    _same(whole, chunked)
    # (the processes backend's curator runs in a process of its own: its choice is not seen)
    assert streamed == ([False, True] if backend == "inproc" else [])
    v = chunked["virtual"]
    rnd = chunked["comm"]["per_round"][0]
    assert v["wall_s"] == rnd["virtual_s"] and rnd["completion_p50_s"] is not None
    if "availability" in deployment or "trace" in deployment:
        assert v["dropouts_offline"] > 0
    if deployment.get("round_deadline_s") is not None and "trace" in deployment:
        assert v["dropouts_late"] > 0


@pytest.mark.parametrize("split", ["budget", "users"])
@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_safaris_two_streamed_rounds_and_broadcast_give_the_whole_rounds_record(backend, split,
                                                                             streamed):
    """Two rounds, the second with a broadcast to every online agent (counted a pass at a
    time, ``StreamedTimes.online_parts``; of a random half of the agents with the users
    split), both rounds' late reports left out."""
    whole, chunked = (_record(MOBILE, chunk, backend, 3, protocol="safari",
                              params={"split": split})
                      for chunk in (LARGE, SMALL))
    _same(whole, chunked)
    assert streamed == ([False, True] if backend == "inproc" else [])
    rounds = chunked["comm"]["per_round"]
    assert len(rounds) == 2 and all(r["dropouts_late"] > 0 for r in rounds)


def test_the_percentiles_sample_every_kth_reporter_as_a_whole_round_does(monkeypatch,
                                                                         streamed):
    """Above ``PERCENTILE_SAMPLE`` reporters the percentiles read every k-th one in agent
    order: a streamed round picks the same ones on its second pass (the sample made small
    here, so that 3,000 agents use it)."""
    full = _record(MOBILE, LARGE)
    monkeypatch.setattr(roundend, "PERCENTILE_SAMPLE", 61)
    whole, chunked = _record(MOBILE, LARGE), _record(MOBILE, SMALL)
    _same(whole, chunked)
    assert streamed[-2:] == [False, True]
    p = [r["comm"]["per_round"][0]["completion_p95_s"] for r in (full, whole)]
    assert p[0] != p[1]  # the sample is another one than all of them


@pytest.mark.parametrize("action", ["silent", "kill"])
@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_a_lost_pools_agents_are_the_same_dropouts_in_a_streamed_deployment(backend, action,
                                                                            streamed):
    """A pool that never answers: its online agents are dropouts, its offline ones (whose
    batches are never sent) offline, as in a whole round."""
    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.backends.transport import run_processes
    from ldpsim.simulator.scenario import scenario as sc
    from ldpsim.simulator.session import Limits

    run = run_inproc if backend == "inproc" else run_processes
    out = []
    for chunk in (LARGE, SMALL):
        raw = {"name": "lost", "protocol": "ldp_kwiksort_rr", "seed": 7,
               "data": {**example_data("ldp_kwiksort_rr"), "n": 3000},
               "runtime": {"backend": backend, "chunk": chunk, "pools": 3, "batch": 40},
               "deployment": MOBILE}  # (small batches: the lost pool's last are never sent)
        config = sc.load(raw=raw).runs()[0].config()
        config["faults"] = [{"pool": 1, "round": 0, "action": action}]
        res = run(config, Limits(timeout_s=1.0))
        res.pop("timing")
        res["comm"] = {k: v for k, v in res["comm"].items() if not k.startswith("physical_")}
        res["comm"]["per_round"] = [{k: v for k, v in r.items() if k not in LIVE}
                                    for r in res["comm"]["per_round"]]
        out.append(res)
    assert out[0] == out[1]
    assert out[1]["dropouts"] > 0 and out[1]["virtual"]["dropouts_offline"] > 0
    assert streamed == ([False, True] if backend == "inproc" else [])


@pytest.mark.parametrize("deployment", [{**MOBILE, "quota": 0.9},
                                        {**MOBILE, "curator_up_mbps": 5.0},
                                        {**MOBILE, "curator_down_mbps": 5.0}])
def test_a_deployment_whose_end_reads_every_arrival_reads_whole_rounds(deployment, streamed):
    whole, chunked = (_record(deployment, chunk) for chunk in (LARGE, SMALL))
    _same(whole, chunked)
    assert streamed == [False, False]


def test_a_streamed_deployment_never_draws_every_agents_device(monkeypatch, streamed):
    want = _record(MOBILE, SMALL)

    def whole(*a, **k):
        raise AssertionError("a streamed round drew every agent's device")

    monkeypatch.setattr(network, "run_devices", whole)
    _same(_record(MOBILE, SMALL), want)
    assert streamed == [True, True]


def test_a_curators_memory_check_counts_a_streamed_deployment_by_its_chunk(monkeypatch):
    """10^9 agents with a deadline fit 1 GiB (the rounds stream); with a quota or the curator's
    own link (whole rounds) they do not, and the estimate says so."""
    from ldpsim.simulator.scenario import scenario as sc

    monkeypatch.setattr(sc, "memory_limit", lambda: 1 << 30)

    def check(**deployment):
        raw = {"name": "demo", "protocols": ["ldp_kwiksort_rr"], "seed": 1,
               "data": {"kind": "mallows", "n": 10**9, "m": 10, "theta": 0.5},
               "runtime": {"backend": "processes"},
               "deployment": {"trace": "mobile", **deployment}}
        sc.check_runs(sc.load(raw=raw).runs())

    check(round_deadline_s=0.1)
    for whole in ({"quota": 0.5}, {"curator_up_mbps": 100.0}):
        with pytest.raises(sc.ScenarioError, match=r"1000000000 agents x 1 numbers"):
            check(**whole)


# ---------------------------------------------------------------------------- the parts


@pytest.mark.parametrize("bits", [False, True])
def test_an_idsets_members_are_its_ids_in_a_range(monkeypatch, bits):
    rng = np.random.default_rng(3)
    if bits:
        monkeypatch.setattr(idsets, "LIMIT", 0)
    s = IdSet(5000)
    flags = np.zeros(5000, dtype=bool)
    for _ in range(40):
        a = int(rng.integers(0, 4990))
        b = a + int(rng.integers(1, 40))
        s[slice(a, b)] = True
        flags[a:b] = True
    assert (s.bits is not None) == bits
    for a, b in ((0, 5000), (3, 4), (17, 4093), (4000, 4000), (4999, 5000), (8, 16)):
        assert s.members(a, b).tolist() == (np.flatnonzero(flags[a:b]) + a).tolist()


def test_sizes_fill_the_gaps_but_keep_earlier_reporters():
    ids = np.array([10, 11, 14, 17])
    sizes = np.array([5, 5, 6, 6])
    assert streamnet._filled(ids, sizes).tolist() == [5, 5, 5, 5, 6, 6, 6, 6]
    keep = np.full(8, np.nan)
    keep[3] = 9.0  # agent 13 reported before: its size stays
    assert streamnet._filled(ids, sizes, keep).tolist() == [5, 5, 5, 9, 6, 6, 6, 6]
    assert streamnet._filled(ids, sizes, a=8, b=19).tolist() == [5, 5] + [5] * 4 + [6] * 5


def test_a_report_out_of_order_keeps_every_agents_bytes():
    """A pool that sends an agent's report before those around it: their later frame
    spans it, and its bytes stay its own (the percentile sample reads them)."""
    model = network.DeploymentModel.of({"latency_ms": 1.0, "up_mbps": 1.0}, (1, 2))
    net = model.network(100, devices=False)
    t = streamnet.StreamedTimes(net, 0, np.arange(100), 1)
    t.sent(np.arange(100), np.full(100, 20), 0, 100)
    got = IdSet(100)
    got[np.array([50])] = True
    t.arrived(np.array([50]), np.array([300]), 0, got)
    got[np.array([40, 60])] = True
    t.arrived(np.array([40, 60]), np.array([30, 30]), 0, got)
    assert t.up.take(np.array([40, 50, 60])).tolist() == [30, 300, 30]
    assert t.wire_up == sum(network.wire_bytes(np.array([300, 30, 30])))
    dev = network.draw_devices(model.spec, 1, np.array([50]))
    want = network.completion_times(dev, slice(0, 1), np.array([20], np.int32), 0,
                                    np.array([300], np.int32), 0.0)
    assert t.times(np.array([50]), np.array([300]), 0).tolist() == want.tolist()
    assert math.isfinite(t.last)


@pytest.mark.parametrize("chunk", [SMALL, LARGE])
def test_a_pool_reads_a_batch_without_its_offline_agents_fast_and_answers_the_same(
        monkeypatch, chunk):
    """The query batches of a deployment skip its offline agents: the pools read them with
    the compiled reader (``parse_increasing``), and every report is the one the envelope by
    envelope decoder gives."""
    from ldpsim.simulator.codec import wire_numpy, wire_numpy_read

    fast = []
    parse = wire_numpy_read.parse_increasing

    def spy(*a, **k):
        fast.append(parse(*a, **k))
        return fast[-1]

    monkeypatch.setattr(wire_numpy_read, "parse_increasing", spy)
    want = _record(MOBILE, chunk)
    assert fast and (wire_numpy.CODEC.module is None or any(f is not None for f in fast))
    monkeypatch.setattr(wire_numpy_read, "parse_increasing", lambda *a, **k: None)
    _same(_record(MOBILE, chunk), want)


def test_a_streamed_rounds_bytes_stay_a_few_runs(monkeypatch):
    """Small batches, a third of the agents offline: every agent's bytes each way are still
    a run per envelope size (an id's msgpack width), never an array of them."""

    made = []
    init = streamnet.StreamedTimes.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(streamnet.StreamedTimes, "__init__", spy)
    rec = _record(MOBILE, SMALL, batch=7)
    assert rec["virtual"]["dropouts_offline"] > 500 and len(made) == 1
    for store in (made[0].down, made[0].up):  # sizes: ids below 128, 256 and above
        assert store.arr is None and store.runs_count <= 3
