"""The pools' shares of a generated SAFARI data set's truth (the §6.1 marginals' counts): each
pool counts the rankings it makes, whole or a chunk at a time (``safari.data.MarginalTap``),
and the orchestrator adds the parts (``SafariRankings.truth_join``) instead of generating every
ranking a second time. Counts are integers, so the join is ``truth()`` bit for bit; a part that
misses an agent or hears one twice leaves the truth to the orchestrator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.safari import data as safari_data
from ldpsim.protocols.safari import metrics
from ldpsim.simulator.scenario import scenario as sc

from tests.simulator.sweep.truthparts import (
    check_a_tap_that_misses_or_repeats_agents,
    check_parts_of_another_data_set_or_short_are_refused,
    parts_of,
    scored_both_ways,
    truth_of,
)


def spec(n: int, pools: int, chunk: int | str = "auto", protocol: str = "safari",
         d: int = 5, **params: Any):
    raw = {"protocol": protocol, "seed": 5, "params": params,
           "data": {"kind": "safari_mallows", "n": n, "d": d, "theta": 0.4},
           "runtime": {"backend": "processes", "pools": pools, "secret": "seed",
                       "timeout_s": 10, "chunk": chunk}}
    return sc.validate(raw).runs()[0]


def same(got: dict | None, want: dict) -> None:
    """Every value of the truth the same, bit for bit (arrays: dtype and elements)."""
    assert got is not None and list(got) == list(want)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
            assert got[k].tobytes() == v.tobytes(), k
        else:
            assert got[k] == v, k


@pytest.mark.parametrize("pools", [1, 2, 3])
@pytest.mark.parametrize("chunk", [997, "auto"])
def test_the_pools_counts_are_the_truth(pools, chunk):
    """Whole blocks and chunks of 997 rankings (not dividing a pool's block), 1-3 pools."""
    s = spec(5003, pools, chunk, split="users")
    parts = parts_of(s)
    assert len(parts) == pools and all(isinstance(p, safari_data.MarginalPart) for p in parts)
    ds, want = truth_of(s)
    same(ds.truth_join(parts), want)


def test_beyond_twelve_items_the_truth_has_no_s3():
    s = spec(3001, 2, 499, protocol="ldp_kwiksort_rr", d=13, epsilon=1.0)
    ds, want = truth_of(s)
    assert want["s3"] is None
    same(ds.truth_join(parts_of(s)), want)


def test_the_truth_from_counts_is_the_truth_of_the_rankings():
    gen = np.random.default_rng(3)
    rows = np.stack([gen.permutation(6) for _ in range(2000)])
    want = metrics.truth_of([rows[:700], rows[700:]], 6)
    halves = [metrics.marginal_counts([rows[:1234]], 6), metrics.marginal_counts([rows[1234:]], 6)]
    got = metrics.truth_of_counts(metrics.add_counts(*halves), 6)
    same(got, want)


def test_a_run_scored_from_the_parts_never_generates_the_rankings_again(monkeypatch):
    joined, computed = scored_both_ways(monkeypatch, spec(4001, 2, 499),
                                        safari_data.MallowsRankings, safari_data.SafariRankings)
    assert joined["metrics"] == computed["metrics"] and joined["output"] == computed["output"]


def test_a_tap_that_misses_or_repeats_agents_gives_no_part():
    check_a_tap_that_misses_or_repeats_agents(*truth_of(spec(1000, 1)), same)


def test_parts_of_another_data_set_or_short_of_every_agent_are_refused():
    check_parts_of_another_data_set_or_short_are_refused(truth_of(spec(1000, 1))[0],
                                                         truth_of(spec(1001, 1))[0])


def test_file_rankings_leave_their_truth_to_the_orchestrator():
    table = np.tile(np.arange(4), (10, 1)).astype(np.int16)
    ds = safari_data.TableRankings(kind="sushi_subset", n=10, d=4, table=table,
                                   public={"d": 4})
    assert ds.truth_tap(0, 10, None) is None
