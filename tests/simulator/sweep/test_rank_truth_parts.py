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
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep import execute

from tests.simulator.sweep.truthparts import (
    check_a_tap_that_misses_or_repeats_agents,
    check_parts_of_another_data_set_or_short_are_refused,
    parts_of,
    scored_both_ways,
    truth_of,
)


def spec(n: int, pools: int, chunk: int | str = "auto", protocol: str = "ldp_kwiksort_rr",
         **top: Any):
    raw = {"protocol": protocol, "seed": 5,
           "data": {"kind": "mallows", "n": n, "m": 6, "theta": 0.4},
           "params": {"epsilon": 1.0} if protocol.startswith("ldp") else {},
           "runtime": {"backend": "processes", "pools": pools, "secret": "seed",
                       "timeout_s": 5, "chunk": chunk, **top.pop("runtime", {})}, **top}
    return sc.validate(raw).runs()[0]


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
    joined, computed = scored_both_ways(monkeypatch, spec(4001, 2, 499), rank_data.MallowsData,
                                        rank_data.RankingData)
    assert joined["metrics"] == computed["metrics"] and joined["output"] == computed["output"]


def test_a_tap_that_misses_or_repeats_agents_gives_no_part():
    check_a_tap_that_misses_or_repeats_agents(*truth_of(spec(1000, 1)), same)


def test_parts_of_another_data_set_or_short_of_every_agent_are_refused():
    check_parts_of_another_data_set_or_short_are_refused(truth_of(spec(1000, 1))[0],
                                                         truth_of(spec(1001, 1))[0])


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
