"""``IdSet`` and ``PlanMembers`` read and write exactly as boolean arrays over all agents do:
random writes (slices and ids, sorted or not, with duplicates) against a dense array, through
the switch to a bitset, and every kind of read."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.simulator.session import idsets
from ldpsim.simulator.session.idsets import IdSet, PlanMembers


def _reads(s: IdSet, dense: np.ndarray, rng: np.random.Generator) -> None:
    n = len(dense)
    assert np.array_equal(s[slice(0, n)], dense)
    for _ in range(5):
        a = int(rng.integers(0, n))
        b = int(rng.integers(a, n + 1))
        assert np.array_equal(s[slice(a, b)], dense[a:b])
        ids = rng.integers(0, n, int(rng.integers(0, 40)))
        assert np.array_equal(s[ids], dense[ids])
        assert np.array_equal(s[AgentRange(a, b)], dense[a:b])


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("limit", [3, 1024])
def test_an_id_set_is_a_boolean_array(monkeypatch, seed, limit):
    monkeypatch.setattr(idsets, "LIMIT", limit)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    s, dense = IdSet(n), np.zeros(n, dtype=bool)
    for _ in range(60):
        value = bool(rng.random() < 0.7)
        kind = rng.integers(0, 4)
        if kind == 0:  # a batch of consecutive agents
            a = int(rng.integers(0, n))
            at = slice(a, int(rng.integers(a, min(n, a + 300) + 1)))
        elif kind == 1:  # sorted, distinct ids
            at = np.unique(rng.integers(0, n, int(rng.integers(0, 50))))
        elif kind == 2:  # any order, duplicates
            at = rng.integers(0, n, int(rng.integers(0, 50)))
        else:  # a run of ids, as arrays
            a = int(rng.integers(0, n))
            at = np.arange(a, min(n, a + int(rng.integers(1, 100))))
        s[at] = value
        dense[at] = value
        _reads(s, dense, rng)
    if limit == 3:
        assert s.bits is not None  # the fallback was exercised


def test_honest_batches_stay_a_few_intervals():
    s = IdSet(10**9)  # no flag per agent: nothing of this size is allocated
    end = 4096 * 2000
    for lo in range(0, end, 4096):  # two pools' batches, interleaved
        s[slice(lo, lo + 4096)] = True
        s[slice(5 * 10**8 + lo, 5 * 10**8 + lo + 4096)] = True
    assert s.intervals == 2 and s.bits is None
    assert s[np.array([0, end - 1, end, 5 * 10**8, 5 * 10**8 - 1])].tolist() == [
        True, True, False, True, False]


@pytest.mark.parametrize("agents", [np.array([], dtype=np.int64), np.array([3, 4, 9]),
                                    np.arange(5, 40), AgentRange(5, 40), AgentRange(0, 0)])
def test_plan_members_are_the_plans_agents(agents):
    dense = np.zeros(60, dtype=bool)
    dense[np.asarray(agents)] = True
    m = PlanMembers(agents)
    ids = np.array([0, 3, 4, 5, 8, 9, 39, 40, 59, 3])
    assert np.array_equal(m[ids], dense[ids])
    assert np.array_equal(m[slice(2, 45)], dense[2:45])
