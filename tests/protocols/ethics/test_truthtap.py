"""A pool's share of the ethics ground truth (``truthtap``): the pools' parts joined give
``truth()`` bit for bit, whatever the pools' boundaries (inside a block or on one), the batches
the randomizer solves and the blocks the rows are generated in; and the part is None whenever
a voter was not heard exactly once from the pool's own rows."""

from __future__ import annotations

import pytest
from ldpsim.protocols import DATA_KINDS, get_protocol
from ldpsim.protocols.ethics import data as ethics_data
from ldpsim.protocols.ethics import memo, truthtap
from ldpsim.protocols.ethics.estimates import memo_mle, split_rows, voter_mle
from ldpsim.protocols.keys import DataKeys

from tests.conftest import same_truth

KIND = DATA_KINDS["ethics_synthetic"]
VLDP = get_protocol("ethics_vldp")


@pytest.fixture(autouse=True)
def empty_memory(empty_ethics_memory):
    yield
    assert not truthtap._OPEN  # every tap a test opened is closed


def dataset(n: int, **kw):
    return KIND.build({"n": n, "d": 3, "records": 4, **kw}, DataKeys.of_seed(21))


def pool_part(ds, start: int, stop: int, batches, protocol=VLDP):
    """What a pool of voters ``start .. stop - 1`` hands over: its rows generated, then its
    voters solved by the randomizer in ``batches`` (sizes, repeated), from views of its rows."""
    tap = ds.truth_tap(start, stop, protocol)
    try:
        rows = ds.rows(start, stop)
        rows.setflags(write=False)
        tap.watch(rows)
        pos, i = start, 0
        while pos < stop:
            end = min(stop, pos + batches[i % len(batches)])
            _, z = split_rows(rows[pos - start:end - start], ds.public)
            voter_mle(z, ds.public)
            pos, i = end, i + 1
        return tap.part()
    finally:
        tap.close()


@pytest.mark.parametrize("bounds", [[0, 4321], [0, 2160, 4321], [0, 1440, 2880, 4321],
                                    [0, 1000, 3000, 4321], [0, 7, 999, 1001, 4321]])
@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_the_parts_joined_are_the_truth_bit_for_bit(monkeypatch, bounds, norm):
    monkeypatch.setattr(ethics_data, "BLOCK", 1000)  # five blocks, the last one short
    ds = dataset(4321, norm=norm, bound=1.5)
    want = ds.truth()
    memo.MLE.clear()
    memo.ROWS.clear()
    parts = [pool_part(ds, a, b, [1, 1, 333, 64]) for a, b in zip(bounds, bounds[1:], strict=False)]
    assert all(p is not None for p in parts)
    same_truth(ds.truth_join(parts), want)
    same_truth(ds.truth_join(parts[::-1]), want)  # whatever order they arrive in


def test_with_the_real_block_size():
    n = 2 * ethics_data.BLOCK + 1234
    ds = dataset(n, d=2, records=3)
    want = ds.truth()
    memo.MLE.clear()
    memo.ROWS.clear()
    bounds = [0, n // 3, 2 * n // 3, n]  # both inside a block
    parts = [pool_part(ds, a, b, [8192]) for a, b in zip(bounds, bounds[1:], strict=False)]
    assert [len(p.sums) for p in parts] == [0, 0, 1]  # the short last block whole
    same_truth(ds.truth_join(parts), want)


def test_a_voter_heard_from_a_copy_or_twice_or_not_at_all_leaves_no_part(monkeypatch):
    monkeypatch.setattr(ethics_data, "BLOCK", 100)
    ds = dataset(250)

    def heard(solve) -> truthtap.TruthPart | None:
        tap = ds.truth_tap(0, 250, VLDP)
        try:
            rows = ds.rows(0, 250)
            rows.setflags(write=False)
            tap.watch(rows)
            solve(rows)
            return tap.part()
        finally:
            tap.close()

    def z(rows):
        return split_rows(rows, ds.public)[1]

    assert heard(lambda rows: voter_mle(z(rows), ds.public)) is not None
    assert heard(lambda rows: voter_mle(z(rows.copy()), ds.public)) is None  # not in place
    assert heard(lambda rows: voter_mle(z(rows[:200]), ds.public)) is None  # some never
    assert heard(lambda rows: [voter_mle(z(rows), ds.public),
                               voter_mle(z(rows[10:20]), ds.public)]) is None  # twice
    assert heard(lambda rows: memo_mle(z(rows), 2.0, "l2")) is None  # another ball
    assert heard(lambda rows: voter_mle(z(rows[::2]), ds.public)) is None  # not its layout


def test_rows_of_another_data_set_object_are_not_heard():
    ds = dataset(300)
    tap = ds.truth_tap(0, 300, VLDP)
    try:
        rows = ds.with_keys(ds.keys).rows(0, 300)  # the same rows, another object
        tap.watch(rows)
        voter_mle(split_rows(rows, ds.public)[1], ds.public)
        assert tap.part() is None
    finally:
        tap.close()


def test_no_tap_without_eq3_or_outside_the_data():
    ds = dataset(300)
    assert ds.truth_tap(0, 300, get_protocol("ethics_rldp_fm")) is None
    assert ds.truth_tap(0, 301, VLDP) is None
    assert ds.truth_tap(5, 5, VLDP) is None
    assert not ds.truth_from_pools(get_protocol("ethics_rldp_fm"))
    assert ds.truth_from_pools(get_protocol("ethics_vlcp"))


def test_the_join_refuses_parts_that_do_not_make_the_truth(monkeypatch):
    monkeypatch.setattr(ethics_data, "BLOCK", 100)
    ds = dataset(250)
    parts = [pool_part(ds, 0, 120, [50]), pool_part(ds, 120, 250, [50])]
    assert ds.truth_join(parts) is not None
    assert ds.truth_join(parts[:1]) is None  # a pool's voters missing
    assert ds.truth_join([parts[0], None]) is None
    assert ds.truth_join([]) is None
    assert ds.truth_join(parts + parts[1:]) is None  # twice
    other = dataset(250, beta_sd=0.5)  # another data set of the same size
    assert other.truth_join(parts) is None
    for m in (memo.MLE, memo.ROWS):
        m.clear()
    assert ds.truth_join([parts[0], pool_part(ds, 100, 250, [50])]) is None  # overlapping
