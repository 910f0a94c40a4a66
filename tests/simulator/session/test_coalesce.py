"""A pool answers the query batches queued on its socket together (``PoolSession.on_frames``):
one call of the randomizer over consecutive batches of a round. Every frame it sends must be
exactly what answering the batches one by one (``on_frame``) sends, refusals included."""

from __future__ import annotations

import copy
from collections import deque

import numpy as np
import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.codec import wire, wire_numpy
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession

from tests import drivers

LIMITS = Limits(timeout_s=20)
QUIET = {"colluders": 0, "curator": True}


def _config(protocol, data, batch=16, **over):
    cfg = {"protocol": protocol, "params": {"epsilon": 1.0}, "data": data, "seed": 3,
           "pools": 2, "agent_mode": "batched", "batch": batch,
           "collusion": {"colluders": 2, "curator": True}, "faults": []}
    cfg.update(over)
    return cfg


def _example(protocol, n=400, batch=16, **over):
    """The protocol's example data set with its own parameters (``protocols.local``)."""
    return {**_config(protocol, {**example_data(protocol), "n": n}, batch, **over),
            "params": {}}


CONFIGS = {name: _example(name) for name in
           ("dpwevote", "ldp_kwiksort_rr", "rank_olh", "safari", "truth_mf", "ethics_rldp_fm")}
CONFIGS["exact timing"] = _example("dpwevote", agent_mode="exact")


def _run_grouped(config):
    """``run_inproc``, except that every frame queued for a pool is handed to it at once
    (``on_frames``); each hand-over is checked against a copy of the pool answering the same
    frames one at a time. Returns the result and the largest number of query frames one
    hand-over held."""
    parties = drivers.parties(config)
    cur = CuratorSession(0, parties.curator, drivers.AUTH, LIMITS)
    pools = [PoolSession(i, int(config["pools"]), drivers.AUTH, LIMITS, parties.pools[i])
             for i in range(int(config["pools"]))]
    for p in pools:
        p.can_die = False
    queue: deque[tuple[int | None, bytes]] = deque((i, p.hello()) for i, p in enumerate(pools))
    most = 0
    while not cur.finished:
        if not queue:
            queue.extend((None, f) for _, f in cur.on_timeout())
            continue
        src, frame = queue.popleft()
        if src is not None:  # a pool's frame to the curator
            for dest, out in cur.on_frame(b"pool-%d" % src, frame):
                queue.append((None, dest + b"|" + out))
            continue
        dest, _, frame = frame.partition(b"|")
        index = int(dest.split(b"-")[1])
        frames = [frame]
        for item in [x for x in queue if x[0] is None and x[1].startswith(dest + b"|")]:
            queue.remove(item)
            frames.append(item[1].partition(b"|")[2])
        alone = copy.deepcopy(pools[index])
        expected = [out for f in frames for out in alone.on_frame(f)]
        got = pools[index].on_frames(frames)
        assert _untimed(got) == _untimed(expected)
        most = max(most, sum(f[2:3] == bytes([wire.QUERY]) for f in frames))
        queue.extend((index, out) for out in got)
    return cur.result, most


TIMES = ("agent_cpu_s", "agent_cpu_s_max", "pool_cpu_s", "peak_rss_mb")


def _untimed(frames):
    """The frames, each DONE's statistics without its clocks (they differ from run to run)."""
    out = []
    for f in frames:
        if f[2:3] == bytes([wire.DONE]):
            env = wire.check_envelope(*next(iter(wire.iter_frame(f, 1 << 20))))
            f = (env.run, {k: v for k, v in env.payload.items() if k not in TIMES})
        out.append(f)
    return out


def _comparable(res):
    res = {k: v for k, v in res.items() if k != "timing"}
    res["comm"] = {k: v for k, v in res["comm"].items() if k != "per_round"}
    return res


@pytest.fixture
def responded(monkeypatch):
    """Each ``PoolSession._respond`` call from now on, as (its agents, how many query
    batches it joins)."""
    calls = []
    respond = PoolSession._respond

    def spy(self, rnd, ids, queries, batches=None):
        calls.append((np.array(ids), 1 + len(batches or [])))
        return respond(self, rnd, ids, queries, batches)

    monkeypatch.setattr(PoolSession, "_respond", spy)
    return calls


@pytest.mark.parametrize("name", list(CONFIGS))
def test_queued_batches_answered_at_once_send_the_same_frames(name, responded):
    config = CONFIGS[name]
    res, most = _run_grouped(config)
    # the curator's send window queues 8 batches per pool: the test does join them
    assert most >= 8 and max(joined for _, joined in responded) >= 8
    assert _comparable(res) == _comparable(run_inproc(config, LIMITS))


def _set_up_pool(config):
    """Pool 0 of ``config``'s run, set up and registered, and the curator's run number."""
    cur = CuratorSession(0, drivers.parties(config).curator, drivers.AUTH, LIMITS)
    pool = PoolSession(0, 2, drivers.AUTH, LIMITS, drivers.parties(config).pools[0])
    pool.can_die = False
    for _, setup in cur.on_frame(b"p0", pool.hello()):
        pool.on_frames([setup])
    assert pool.config is not None
    return pool


def _queries(pool, rnd, agents, width=None):
    """Queries of round ``rnd`` for ``agents``: pair 0 each, as many pairs as the run asks
    (``width`` None; a pool refuses another width: ``Protocol.query_refusal``)."""
    ids = np.asarray(agents, dtype=np.int64)
    width = int(pool.bound.rounds[0].uses) if width is None else width
    return wire_numpy.encode_batch(wire.QUERY, pool.run, rnd, ids,
                                   np.zeros((len(ids), width), dtype=np.int64))[0]


@pytest.mark.parametrize("frames", [
    [(0, range(0, 10)), (0, range(10, 20)), (0, range(20, 30))],  # one group
    [(0, range(0, 10)), (0, range(0, 10)), (0, range(10, 20))],  # a repeat: refused
    [(0, range(0, 10)), (0, range(5, 15)), (0, range(15, 25))],  # overlapping: two groups
    [(0, range(0, 10)), (1, range(10, 20)), (1, range(20, 30))],  # a new round
    [(0, range(0, 10)), (0, range(10, 20)), (0, range(0, 20))],  # a group then refusals
    [(0, range(10, 20)), (0, range(0, 10)), (0, range(10, 20))],  # a refusal after reports
    [(0, range(140, 150)), (0, range(150, 160))],  # past the pool's block: the run fails
])
def test_refusals_rounds_and_gaps_are_answered_as_one_by_one(frames):
    config = _config("ldp_kwiksort_rr", {"kind": "mallows", "n": 300, "m": 6, "theta": 0.5},
                     collusion=QUIET)
    pool = _set_up_pool(config)
    sent = [_queries(pool, rnd, agents) for rnd, agents in frames]
    alone = copy.deepcopy(pool)
    try:
        expected = [out for f in sent for out in alone.on_frame(f)]
    except Exception as exc:  # noqa: BLE001 - the same failure either way
        with pytest.raises(type(exc), match="does not host"):
            pool.on_frames(sent)
        return
    assert pool.on_frames(sent) == expected
    assert pool.refusals == alone.refusals


def _pool_and_batches(starts, size=10):
    """A set-up pool of a small LDP-KwikSort run, and query batches of round 0 for the
    agents ``start .. start + size - 1`` of each start."""
    config = _config("ldp_kwiksort_rr", {"kind": "mallows", "n": 300, "m": 6, "theta": 0.5},
                     collusion=QUIET)
    pool = _set_up_pool(config)
    return pool, [_queries(pool, 0, range(s, s + size)) for s in starts]


def test_joined_batches_stop_at_the_group_cap(monkeypatch, responded):
    """Queued batches are joined up to ``GROUP_AGENTS`` agents per randomizer call; past it a
    new call starts, and the frames are still those of answering one by one."""
    from ldpsim.simulator.session import pool as pool_mod

    monkeypatch.setattr(pool_mod, "GROUP_AGENTS", 25)
    pool, sent = _pool_and_batches(range(0, 50, 10))
    alone = copy.deepcopy(pool)
    expected = [out for f in sent for out in alone.on_frame(f)]
    responded.clear()
    assert pool.on_frames(sent) == expected
    assert [len(ids) for ids, _ in responded] == [20, 20, 10]


def test_answer_yields_each_report_frame_before_the_next_batch_is_computed(monkeypatch,
                                                                           responded):
    """``answer`` hands a group's report frames to the driver before it computes the next
    group (the curator checks them while the pool works on), and its frames are those of
    ``on_frames``."""
    from ldpsim.simulator.session import pool as pool_mod

    monkeypatch.setattr(pool_mod, "GROUP_AGENTS", 10)
    pool, sent = _pool_and_batches(range(0, 30, 10))
    expected = copy.deepcopy(pool).on_frames(sent)
    responded.clear()
    frames = pool.answer(sent)
    assert next(frames) == expected[0] and len(responded) == 1
    assert [expected[0], *frames] == expected
    assert [int(ids[0]) for ids, _ in responded] == [0, 10, 20]
