"""Queries drawn a range of rows at a time (``protocols.queries.RowQueries``).

Exact tests: whatever ranges are read, in whatever order, the array is the one drawing it
whole gives; a curator that plans with it (LDP-KwikSort) plans exactly the eager array; and
the runtime sends its first query batch before the round's queries are all drawn.
"""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.queries import CHUNK, RowQueries, full

from tests import drivers

ROWS = 3 * CHUNK + 123  # a partial last chunk
KEY = rngm.stream_key(7, "curator")


def _keyed(width: int = 3):
    """Queries keyed by row (as a curator's keyed draws are), and a log of the draws made."""
    agents = np.arange(ROWS, dtype=np.int64) * 5 + 2
    calls: list[tuple[int, int]] = []

    def draw(lo: int, hi: int) -> np.ndarray:
        calls.append((lo, hi))
        return rngm.distinct_indices(rngm.uniform(KEY, agents[lo:hi], 0, width), 40)

    whole = rngm.distinct_indices(rngm.uniform(KEY, agents, 0, width), 40)
    return RowQueries(draw, ROWS, width, np.int64), whole, calls


def test_ranges_read_in_any_order_give_the_whole_array_and_draw_each_row_once():
    q, whole, calls = _keyed()
    rng = np.random.default_rng(3)
    cuts = np.sort(rng.choice(np.arange(1, ROWS), size=9, replace=False))
    ranges = list(zip(np.r_[0, cuts], np.r_[cuts, ROWS], strict=True))
    for lo, hi in (ranges[i] for i in rng.permutation(len(ranges))):
        assert np.array_equal(q[int(lo):int(hi)], whole[lo:hi])
    assert np.array_equal(np.asarray(q), whole)
    drawn = np.zeros(ROWS, dtype=int)
    for lo, hi in calls:
        drawn[lo:hi] += 1
    assert (drawn == 1).all()  # every row drawn exactly once, in whole chunks
    assert all(lo % CHUNK == 0 and (hi % CHUNK == 0 or hi == ROWS) for lo, hi in calls)


def test_a_range_draws_only_the_chunks_it_covers():
    q, whole, calls = _keyed()
    assert np.array_equal(q[CHUNK + 5:CHUNK + 10], whole[CHUNK + 5:CHUNK + 10])
    assert calls == [(CHUNK, 2 * CHUNK)]
    assert np.array_equal(q[0:2 * CHUNK + 1], whole[:2 * CHUNK + 1])
    # the missing chunks on either side of the drawn one: one call per run of them
    assert calls == [(CHUNK, 2 * CHUNK), (0, CHUNK), (2 * CHUNK, 3 * CHUNK)]
    assert len(q[5:6]) == 1 and len(calls) == 3  # drawn already: no new call
    assert "chunks drawn 3/4" in repr(q)


def test_other_indices_read_the_whole_array():
    q, whole, _ = _keyed()
    idx = np.array([ROWS - 1, 0, 17])
    assert np.array_equal(q[idx], whole[idx])
    assert np.array_equal(q[::2], whole[::2])
    assert q.tolist() == whole.tolist()
    assert np.asarray(q, dtype=np.float64).dtype == np.float64
    assert full(q) is np.asarray(q) and full(None) is None and full(whole) is whole
    assert len(q) == ROWS and q.shape == (ROWS, 3) and q.ndim == 2
    mine = np.array(q)  # a copy: writing into it leaves the plan's queries as they were
    mine[:] = -1
    assert np.array_equal(np.asarray(q), whole) and np.asarray(q) is np.asarray(q)


def test_a_block_reads_a_plans_queries_whole():
    q, whole, _ = _keyed()
    block = Block(0, np.zeros((ROWS, 2)), queries=q)
    assert isinstance(block.queries, np.ndarray) and np.array_equal(block.queries, whole)


def test_bad_draws_and_dtypes_are_refused():
    with pytest.raises(ValueError, match=rf"draw\(0, {ROWS}\) gave shape \({ROWS}, 2\), "
                                         rf"expected \({ROWS}, 3\)"):
        np.asarray(RowQueries(lambda lo, hi: np.zeros((hi - lo, 2)), ROWS, 3, np.int64))
    with pytest.raises(ValueError, match=r"values in \[40000, 40000\], outside int16"):
        RowQueries(lambda lo, hi: np.full((hi - lo, 1), 40_000), 10, 1, np.int16)[0:2]
    narrow = RowQueries(lambda lo, hi: np.full((hi - lo, 1), 32_767), 10, 1, np.int16)
    assert np.asarray(narrow).tolist() == [[32_767]] * 10
    with pytest.raises(TypeError, match="dtype object"):
        RowQueries(lambda lo, hi: None, 10, 1, object)
    with pytest.raises(TypeError, match="dtype complex128"):
        RowQueries(lambda lo, hi: None, 10, 1, np.complex128)
    with pytest.raises(ValueError, match="width >= 1"):
        RowQueries(lambda lo, hi: None, 10, 0, np.int64)
    assert np.asarray(RowQueries(lambda lo, hi: None, 0, 2, np.int64)).shape == (0, 2)


@pytest.mark.parametrize("name", ["ldp_kwiksort_rr", "ldp_kwiksort_lap"])
def test_ldp_kwiksort_plans_exactly_the_eager_draw(name):
    proto = PROTOCOLS[name]
    data = DATA_KINDS["mallows"].build({"n": 6 * CHUNK + 1, "m": 7, "theta": 0.5},
                                       keys=rngm.stream_key(1, "data"))
    agents = np.arange(data.n, dtype=np.int64)[::2]  # not a range: keyed by id, not by row
    _, cur = drivers.curator(proto, {"epsilon": 1.0, "queries": 4}, data, 1, agents=agents,
                             key=KEY)
    plan = cur.plan(0)
    assert isinstance(plan.queries, RowQueries)
    eager = rngm.distinct_indices(rngm.uniform(KEY, agents, 0, 4), 21)
    tail = np.array(plan.queries[len(agents) - 3:])  # read from the end first
    assert np.array_equal(tail, eager[-3:])
    assert np.array_equal(np.asarray(plan.queries), eager)


def test_the_local_loop_times_the_draw_as_the_plans_work():
    """``protocols.local`` (the benchmarks' kernel) draws a plan's queries inside its "plan"
    step: drawing them on demand moves the work in the runtime, not out of the kernel."""
    from ldpsim.protocols.local import local_rounds

    proto = PROTOCOLS["ldp_kwiksort_rr"]
    data = DATA_KINDS["mallows"].build({"n": 2 * CHUNK + 5, "m": 6, "theta": 0.5},
                                       keys=rngm.stream_key(1, "data"))
    drawn = []

    def phase(name, fn, *args):
        out = fn(*args)
        if name == "plan" and getattr(out, "queries", None) is not None:
            drawn.append(repr(out.queries))
        return out

    local_rounds(proto.bind({"epsilon": 1.0}, data.public), data, 1, phase)
    assert drawn == ["RowQueries(shape=(8197, 1), dtype=int16, chunks drawn 3/3)"]


@pytest.mark.parametrize(("m", "dtype"), [(256, np.int16), (257, np.int32)])
def test_pair_indices_are_kept_in_the_narrowest_integers_that_hold_them(m, dtype):
    """C(256, 2) = 32,640 pairs fit int16; C(257, 2) = 32,896 do not."""
    proto = PROTOCOLS["ldp_kwiksort_rr"]
    public = {"m": m, "data_type": "ranking"}  # a ranking file may hold more items than
    # generated data allow
    cur = proto.bind({"epsilon": 1.0, "queries": 3}, public).curator(np.arange(40), KEY)
    q = np.asarray(cur.plan(0).queries)
    eager = rngm.distinct_indices(rngm.uniform(KEY, np.arange(40), 0, 3), m * (m - 1) // 2)
    assert q.dtype == dtype and np.array_equal(q, eager)


def test_rows_and_take_read_without_keeping_and_streaming_keeps_nothing():
    """``rows`` and ``take`` give the whole array's rows, from what is kept or drawn afresh
    without keeping it; once ``streaming``, every read is drawn afresh and nothing is kept."""
    q, whole, calls = _keyed()
    assert np.array_equal(q.rows(CHUNK - 3, CHUNK + 7), whole[CHUNK - 3:CHUNK + 7])
    assert calls == [(CHUNK - 3, CHUNK + 7)] and "chunks drawn 0/4" in repr(q)
    rng = np.random.default_rng(5)
    for _ in range(20):
        rows = np.unique(rng.integers(0, ROWS, int(rng.integers(0, 60))))
        assert np.array_equal(q.take(rows), whole[rows])
    assert q.take(np.arange(10, 30)).shape == (20, 3) and q.rows(5, 5).shape == (0, 3)
    np.asarray(q)  # kept whole now: reads come from it
    calls.clear()
    assert np.array_equal(q.take(np.array([1, 400, 9000])), whole[[1, 400, 9000]])
    assert calls == []
    q.streaming()
    for lo, hi in [(0, 10), (CHUNK - 1, CHUNK + 1), (ROWS - 5, ROWS)]:
        assert np.array_equal(q[lo:hi], whole[lo:hi])
    assert calls == [(0, 10), (CHUNK - 1, CHUNK + 1), (ROWS - 5, ROWS)]
    assert np.array_equal(q.full(), whole) and "chunks drawn 0/4" in repr(q)



def test_a_streamed_slice_read_is_kept_until_its_rows_are_read_back():
    """``streaming(keep)``: the rows a query batch went out with are kept, up to ``keep`` rows
    (the oldest forgotten first), until ``rows`` reads them back whole or in consecutive
    pieces; whatever is not kept is drawn again, the same."""
    q, whole, calls = _keyed()
    q.streaming(keep=250)
    for lo in (0, 100, 200):
        assert np.array_equal(q[lo:lo + 100], whole[lo:lo + 100])
    assert len(calls) == 3 and q._sent_rows == 200  # the first batch is forgotten
    calls.clear()
    assert np.array_equal(q.rows(100, 130), whole[100:130])  # a piece, then the rest
    assert np.array_equal(q.take(np.arange(130, 200)), whole[130:200])
    assert np.array_equal(q.rows(200, 300), whole[200:300])
    assert calls == [] and q._sent_rows == 0 and not q._sent
    assert np.array_equal(q.rows(0, 100), whole[:100]) and calls == [(0, 100)]
    q[300:400]
    assert np.array_equal(q.rows(300, 450), whole[300:450])  # beyond what was kept: drawn
    assert calls[-1] == (300, 450) and not q._sent
