"""The pools' shares of a generated ranking data set's truth (the count matrix C): each pool
counts the rankings it makes, whole or a chunk at a time (``rank.data.CountTap``), and the
orchestrator adds the parts (``RankingData.truth_join``) instead of generating every ranking a
second time. Counts are integers, so the join is ``truth()`` exactly; a part that misses an
agent or hears one twice leaves the truth to the orchestrator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.rank import data as rank_data
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session import Limits
from ldpsim.simulator.sweep import execute


def spec(n: int, pools: int, chunk: int | str = "auto", protocol: str = "ldp_kwiksort_rr",
         **top: Any):
    raw = {"protocol": protocol, "seed": 5,
           "data": {"kind": "mallows", "n": n, "m": 6, "theta": 0.4},
           "params": {"epsilon": 1.0} if protocol.startswith("ldp") else {},
           "runtime": {"backend": "processes", "pools": pools, "secret": "seed",
                       "timeout_s": 5, "chunk": chunk, **top.pop("runtime", {})}, **top}
    return sc.validate(raw).runs()[0]


def parts_of(s) -> list:
    parts: list = []
    run_processes(dict(s.config(), seed=s.seed), Limits.of_runtime(s.runtime),
                  truth_parts=parts)
    return parts


def truth_of(s) -> tuple[Any, dict]:
    ds = execute._dataset(s.data, s.seed, None)
    return ds, ds.truth()


def same(got: dict | None, want: dict) -> None:
    assert got is not None and got.keys() == want.keys()
    assert got["counts"].dtype == np.int64
    np.testing.assert_array_equal(got["counts"], want["counts"])
    assert got["n"] == want["n"] and got.get("reference") == want.get("reference")


@pytest.mark.parametrize("pools", [1, 2, 3])
@pytest.mark.parametrize("chunk", [997, "auto"])
def test_the_pools_counts_are_the_truth(pools, chunk):
    """Whole blocks and chunks of 997 rankings (not dividing a pool's block), 1-3 pools."""
    s = spec(5003, pools, chunk)
    parts = parts_of(s)
    assert len(parts) == pools and all(isinstance(p, rank_data.CountPart) for p in parts)
    ds, want = truth_of(s)
    same(ds.truth_join(parts), want)


def test_a_run_scored_from_the_parts_never_generates_the_rankings_again(monkeypatch):
    s = spec(4001, 2, 499)

    def never(self):
        raise AssertionError("the orchestrator computed the truth")

    with monkeypatch.context() as m:
        m.setattr(rank_data.MallowsData, "truth", never)
        joined = execute.execute(s)
    monkeypatch.setattr(rank_data.RankingData, "truth_join", lambda self, parts: None)
    computed = execute.execute(s)
    assert joined["metrics"] == computed["metrics"] and joined["output"] == computed["output"]


def test_a_tap_that_misses_or_repeats_agents_gives_no_part():
    ds, want = truth_of(spec(1000, 1))
    rows = ds.rows(0, 1000)
    tap = ds.truth_tap(0, 1000, None)
    tap.watch(rows[:400], 0)
    assert tap.part() is None  # 400 .. 999 unheard
    tap.watch(rows[400:], 400)
    tap.watch(rows[400:], 400)  # a chunk made again: heard once
    same(ds.truth_join([tap.part()]), want)
    tap.watch(rows[:10], 200)  # inside what was heard, not a chunk made again
    assert tap.part() is None


def test_parts_of_another_data_set_or_short_of_every_agent_are_refused():
    ds, _ = truth_of(spec(1000, 1))
    other, _ = truth_of(spec(1001, 1))
    whole = ds.truth_tap(0, 1000, None)
    whole.watch(ds.rows(0, 1000))
    assert other.truth_join([whole.part()]) is None
    half = ds.truth_tap(0, 500, None)
    half.watch(ds.rows(0, 500))
    assert ds.truth_join([half.part()]) is None and ds.truth_join([]) is None
    assert ds.truth_join([half.part(), half.part()]) is None


def test_file_rankings_leave_their_truth_to_the_orchestrator():
    table = rank_data.profile.positions(np.tile(np.arange(4), (10, 1)).astype(np.int16))
    ds = rank_data.FileRankings(kind="preflib", n=10, m=4, table=table, public={"m": 4})
    assert ds.truth_tap(0, 10, None) is None


def test_the_pools_count_a_truth_only_while_the_orchestrator_lacks_it():
    """In a sweep the runs on one data set share its truth: the first run's pools count it,
    and no later run's pools repeat that work (their pools get no channel for it)."""
    from ldpsim.simulator.backends import ProcessesBackend

    cache, backend = execute.TruthCache(), ProcessesBackend()
    asked = []
    run = backend.run

    def spy(*a, **k):
        asked.append(backend.share_truth)
        return run(*a, **k)

    backend.run = spy
    first, second = spec(3001, 2, 499), spec(3001, 2, 499, protocol="kwiksort")
    for s in (first, second, first):
        execute.execute(s, cache, backend)
    assert asked == [True, False, False]
    assert backend.take_truth_parts() is None
