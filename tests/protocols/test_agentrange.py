"""``AgentRange`` reads exactly as the array of its ids: slices, single ids, index arrays,
boolean masks, ``np.searchsorted`` on either side, ``np.asarray``."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols.agentrange import AgentRange, whole


@pytest.mark.parametrize(("start", "stop"), [(0, 0), (0, 1), (0, 10), (7, 19), (1000, 5000)])
def test_an_agent_range_reads_as_the_array_of_its_ids(start, stop):
    r, a = AgentRange(start, stop), np.arange(start, stop, dtype=np.int64)
    n = len(a)
    assert len(r) == n and r.shape == a.shape and r.size == n and r.dtype == a.dtype
    assert np.array_equal(np.asarray(r), a) and np.asarray(r).dtype == np.int64
    assert r.tolist() == a.tolist() and list(r) == list(a)
    for sl in [slice(None), slice(2, 5), slice(-3, None), slice(None, -2), slice(5, 2),
               slice(1, None, 3), slice(None, None, -1), slice(n + 5, n + 9)]:
        assert np.array_equal(r[sl], a[sl]) and r[sl].dtype == np.int64
    for i in range(-n, n):
        assert r[i] == a[i] and type(r[i]) is np.int64
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            r[bad]
    rng = np.random.default_rng(start + stop)
    if n:
        idx = rng.integers(-n, n, 50)
        assert np.array_equal(r[idx], a[idx])
        assert np.array_equal(r[idx.astype(np.int32)], a[idx])
        mask = rng.random(n) < 0.3
        assert np.array_equal(r[mask], a[mask])
    probes = np.concatenate([np.arange(start - 3, stop + 3), rng.integers(0, 10**6, 20)])
    for side in ("left", "right"):
        assert np.array_equal(np.searchsorted(r, probes, side=side),
                              np.searchsorted(a, probes, side=side))
        for p in (start - 1, start, stop, stop + 1):
            assert np.searchsorted(r, p, side=side) == np.searchsorted(a, p, side=side)
    assert np.array_equal(np.searchsorted(r, probes + 0.5), np.searchsorted(a, probes + 0.5))


def test_whole_makes_a_range_an_array_and_leaves_an_array_alone():
    a = np.arange(5)
    assert whole(a) is a
    w = whole(AgentRange(3, 8))
    assert np.array_equal(w, np.arange(3, 8)) and not w.flags.writeable
    with pytest.raises(ValueError):
        AgentRange(5, 3)
    AgentRange(0, 3).setflags(write=False)
    with pytest.raises(ValueError):
        AgentRange(0, 3).setflags(write=True)
