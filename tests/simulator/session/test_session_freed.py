"""A finished run's curator session holds no reference cycle: dropped by its driver, it and
everything of the run it holds are freed at once, with nothing left for the cyclic garbage
collector (a sweep of many tiny runs would otherwise make it go through them over and
over)."""

from __future__ import annotations

import gc
import weakref

from ldpsim.simulator.backends import inproc
from ldpsim.simulator.session import Limits

CONFIG = {"protocol": "dpwevote", "params": {"epsilon": 1.0},
          "data": {"kind": "weighted_votes", "n": 40, "candidates": 2}, "seed": 5,
          "pools": 2, "agent_mode": "batched", "batch": 4096,
          "collusion": {"colluders": 0, "curator": True}, "faults": []}


def test_a_finished_session_is_freed_without_the_collector(monkeypatch):
    made: list[weakref.ref] = []
    real = inproc.CuratorSession

    def session(*args, **kwargs):
        cur = real(*args, **kwargs)
        made.append(weakref.ref(cur))
        made.append(weakref.ref(cur.loop))
        return cur

    monkeypatch.setattr(inproc, "CuratorSession", session)
    was = gc.isenabled()
    gc.disable()
    try:
        res = inproc.run_inproc(dict(CONFIG), Limits(timeout_s=10.0))
        assert res["output"]["released"]
        assert made and all(ref() is None for ref in made)
    finally:
        if was:
            gc.enable()


def test_the_result_is_the_same_run_after_run(monkeypatch):
    """The loop let go of its session only once the run was over: two runs of one
    configuration, the same result but the clocks."""
    a = inproc.run_inproc(dict(CONFIG), Limits(timeout_s=10.0))
    b = inproc.run_inproc(dict(CONFIG), Limits(timeout_s=10.0))
    for res in (a, b):
        res.pop("timing")
        for entry in res["comm"]["per_round"]:
            entry.pop("wall_s"), entry.pop("curator_cpu_s")
    assert repr(a) == repr(b)
