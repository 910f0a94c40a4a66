"""Values kept as runs of agents alike (``session.piecewise``) against the arrays they replace:
every value, every maximum and numpy's float64 sum to the bit, after any sequence of updates,
in runs and past ``LIMIT`` as an array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim.simulator.session import palette, piecewise
from ldpsim.simulator.session.common import span
from ldpsim.simulator.session.odometer import Odometer
from ldpsim.simulator.session.piecewise import Piecewise, Span, pairwise_sum
from ldpsim.simulator.session.policy import Ledger


def _runs_of(values: np.ndarray) -> tuple[list[int], list[float]]:
    """The runs of an array (adjacent equal bits joined), as ``pairwise_sum`` takes them."""
    if not len(values):
        return [], []
    bits = values.view(np.uint64)
    first = np.concatenate(([0], np.flatnonzero(bits[1:] != bits[:-1]) + 1))
    return first.tolist(), values[first].tolist()


def _pattern(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """``n`` float64 values: one run, a few, many short ones, or all different."""
    if kind == "constant":
        return np.full(n, rng.choice([0.0, 0.1, 1.0 / 3.0, 2.5e-7, 1e300, -0.0]))
    if kind == "all different":
        return rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n)
    runs = {"few": 5, "many": max(1, n // 3)}[kind]
    cuts = np.sort(rng.choice(np.arange(1, max(n, 2)), size=min(runs, max(n - 1, 0)),
                              replace=False)) if n > 1 else np.zeros(0, dtype=np.int64)
    vals = rng.choice([0.0, 0.1, 0.2, 0.30000000000000004, 1.0 / 3.0, 7.5, 1e-300, -0.0, 1e16],
                      size=len(cuts) + 1)
    return np.repeat(vals, np.diff(np.concatenate(([0], cuts, [n])))).astype(np.float64)


LENGTHS = sorted({*range(0, 300), *(2 ** k + d for k in range(4, 21) for d in (-9, -1, 0, 1, 7)),
                  1000, 4095, 10 ** 5 + 3, 10 ** 6 + 1, 10 ** 6 + 17})


@pytest.mark.parametrize("kind", ["constant", "few", "many", "all different"])
def test_the_sum_on_runs_is_numpys_to_the_bit(kind: str) -> None:
    rng = np.random.default_rng(52)
    for n in LENGTHS:
        if kind in ("many", "all different") and n > 70000:
            continue  # term by term: the cost grows with the runs
        a = _pattern(rng, n, kind)
        starts, vals = _runs_of(a)
        got = pairwise_sum(starts, vals, 0, n)
        want = np.sum(a)
        assert got == want and np.signbit(got) == np.signbit(want), (kind, n)


def test_the_sum_of_a_window_and_of_a_billion_agents() -> None:
    rng = np.random.default_rng(7)
    a = _pattern(rng, 10 ** 6 + 1, "few")
    store = Piecewise.of_array(100, a)
    for lo, hi in [(100, 100), (100, 10 ** 6 + 101), (133, 9000), (5000, 10 ** 6 + 3)]:
        assert Span(store, lo, hi).sum() == np.sum(a[lo - 100:hi - 100])
    # a 10^9-agent block charged by query batches of 32768 (two rounds, a third half-way):
    # the sum is numpy's on the same values as an array, computed in milliseconds
    n = 10 ** 9
    big = Piecewise(0, n)
    for eps, stop in ((0.1, n), (0.25, n), (1.0 / 3.0, n // 2 + 12345)):
        for s in range(0, stop, 32768):
            big.update(s, min(stop, s + 32768), "add", eps)
    assert big.runs_count == 2
    small = Piecewise(0, 2 * 10 ** 6 + 7)  # the same pattern at 2 * 10^6 + 7, as an array
    for eps, stop in ((0.1, len(small)), (0.25, len(small)), (1.0 / 3.0, 10 ** 6 + 1)):
        small.update(0, stop, "add", eps)
    arr = np.zeros(len(small))
    arr += 0.1
    arr += 0.25
    arr[:10 ** 6 + 1] += 1.0 / 3.0
    assert small.pairwise() == np.sum(arr)
    assert big.pairwise() > 0.5 * n


_OPS = st.lists(st.tuples(
    st.sampled_from(["add", "sub", "set", "ids", "assign", "assign_ids"]),
    st.integers(0, 199), st.integers(0, 199),
    st.sampled_from([0.0, 0.1, 0.25, 1.0 / 3.0, 1e-12, 2.0])), max_size=40)


def _apply(store: Piecewise, arr: np.ndarray, op: str, a: int, b: int, v: float,
           rng: np.random.Generator) -> None:
    """One update on both: the store and the plain array."""
    a, b = min(a, b), max(a, b)
    lo = store.lo
    if op in ("add", "sub", "set"):
        store.update(lo + a, lo + b, op, v)
        palette.apply(arr, slice(a, b), op, v)
    elif op == "ids":
        ids = np.unique(rng.integers(a, b + 1, size=max(1, (b - a) // 2)))
        rng.shuffle(ids)
        store.update_ids(ids + lo, "add", v)
        arr[ids] += v
    elif op == "assign":
        vals = rng.choice([v, 0.5, v], size=b - a)
        Span(store)[a:b] = vals
        arr[a:b] = vals
    else:
        ids = rng.choice(np.arange(200), size=3, replace=False)
        Span(store)[ids] = v
        arr[ids] = v


def _same(store: Piecewise, arr: np.ndarray) -> None:
    lo, hi = store.lo, store.hi
    assert np.array_equal(store.dense(lo, hi).view(np.uint64), arr.view(np.uint64))
    assert store.pairwise() == np.sum(arr)
    span = Span(store)
    assert np.array_equal(np.asarray(span), arr) and span.max() == arr.max()
    idx = np.array([0, 199, 5, 5, 77])
    assert np.array_equal(span[idx], arr[idx]) and span[3] == arr[3]
    for a, b in ((0, 200), (10, 11), (37, 150)):
        assert store.max_in(lo + a, lo + b) == arr[a:b].max()
    starts, vals = store.runs()
    back = np.repeat(vals, np.diff(np.append(starts - lo, hi - lo)))
    assert np.array_equal(back, arr)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS, seed=st.integers(0, 2 ** 32 - 1), limit=st.sampled_from([4, 64, 4096]))
def test_updates_give_the_arrays_values(ops: list, seed: int, limit: int,
                                         ) -> None:
    rng = np.random.default_rng(seed)
    old = piecewise.LIMIT
    piecewise.LIMIT = limit  # small: the store turns into an array on the way
    try:
        store, arr = Piecewise(1000, 1200, 0.0), np.zeros(200)
        for op, a, b, v in ops:
            _apply(store, arr, op, a, b, v, rng)
            if store.arr is None:
                assert store.runs_count <= limit
        _same(store, arr)
        grown = store.grown(900, 1300, 0.0 + 0.5)
        want = np.full(400, 0.5)
        want[100:300] = arr
        assert np.array_equal(grown.dense(900, 1300), want)
        reserve = Piecewise(1050, 1150, 0.0)
        reserve.update(1050, 1150, "add", 0.3)
        reserve.update(1060, 1090, "sub", 0.3)
        reserve.update_ids(np.array([1100, 1120]), "sub", 0.7)
        before = grown.copy()
        grown.add_positive(reserve)
        want[150:250] += np.maximum(reserve.dense(1050, 1150), 0.0)
        assert np.array_equal(grown.dense(900, 1300), want)
        assert np.array_equal(before.dense(900, 1300)[150:250], arr[50:150])  # a copy
    finally:
        piecewise.LIMIT = old


def test_a_bool_store_and_the_odometers_common_case_stay_a_few_runs() -> None:
    seen = Piecewise(0, 10 ** 9, False, bool)
    for s in range(0, 10 ** 9, 32768):
        assert not seen.any_in(s, min(10 ** 9, s + 32768))
        seen.update(s, min(10 ** 9, s + 32768), "set", True)
    assert seen.runs_count == 1 and Span(seen).all() and seen.any_in(5, 6)
    seen.update_ids(np.array([7, 3, 11]), "set", False)
    assert Span(seen)[[3, 4, 7, 11]].tolist() == [False, True, False, False]
    assert not Span(seen).all() and Span(seen, 4, 7).all()


def test_the_store_refuses_agents_outside_it() -> None:
    store = Piecewise(10, 20)
    with pytest.raises(IndexError):
        store.update(5, 12, "add", 1.0)
    with pytest.raises(IndexError):
        store.take(np.array([20]))
    with pytest.raises(IndexError):
        Span(store)[[10]]


class _DenseOdometer:
    """The odometer as arrays (what ``Odometer`` was): the reference for its runs."""

    def __init__(self, eps: dict[int, float], budget: float, start: int, stop: int,
                 lifetime: np.ndarray, cap: float | None) -> None:
        self.eps, self.budget, self.start, self.stop = eps, budget, start, stop
        self.spent = np.zeros(stop - start)
        self.lifetime, self.cap = lifetime, cap
        self.answered: dict[int, np.ndarray] = {}

    def admit(self, rnd: int, ids: np.ndarray) -> np.ndarray | None:
        eps = self.eps[rnd]
        seen = self.answered.get(rnd)
        limit = self.budget * (1 + 1e-9) + 1e-12
        life = self.lifetime if self.cap is not None else None
        cap = None if life is None else self.cap * (1 + 1e-9) + 1e-12
        local = ids - self.start
        at = span(local)
        if isinstance(at, slice) and (seen is None or not seen[at].any()) \
                and self.spent[at].max() + eps <= limit \
                and (life is None or life[at].max() + eps <= cap):
            ok = None
        else:
            ok = np.zeros(len(ids), dtype=bool)
            ok[np.unique(local, return_index=True)[1]] = True
            if seen is not None:
                ok &= ~seen[local]
            ok &= self.spent[local] + eps <= limit
            if life is not None:
                ok &= life[local] + eps <= cap
            if not ok.any():
                return ok
            at = local[ok]
        if seen is None:
            seen = self.answered[rnd] = np.zeros(self.stop - self.start, bool)
        seen[at] = True
        self.spent[at] += eps
        self.lifetime[at] += eps
        return ok


class _Bound:
    def __init__(self, eps: dict[int, float]) -> None:
        self.eps = eps

    def round_epsilon(self, rnd: int) -> float:
        return self.eps[rnd]


@pytest.mark.parametrize("seed", range(12))
def test_the_odometer_admits_and_charges_as_its_arrays_did(seed: int) -> None:
    """Batches in ranges, out of order, with repeats and across rounds, under a lifetime
    cap or none, and with ``LIMIT`` small enough that the stores turn into arrays: the same
    agents admitted, and every value, maximum and sum the same bits."""
    rng = np.random.default_rng(seed)
    start, stop = 500, 500 + int(rng.integers(50, 3000))
    eps = {r: float(rng.choice([0.1, 0.25, 1.0 / 3.0, 0.7])) for r in range(4)}
    cap = None if seed % 3 == 0 else 2.0
    old = piecewise.LIMIT
    piecewise.LIMIT = 4096 if seed % 2 else 16
    try:
        ledger = Ledger(0.3 if seed % 4 == 1 else 0.0)
        odo = Odometer(_Bound(eps), 1.5, start, stop, ledger.block(9, start, stop), cap)
        life = ledger.arrays()[9][1]
        ref = _DenseOdometer(eps, 1.5, start, stop, life, cap)
        for _ in range(60):
            rnd = int(rng.integers(0, 4))
            a = int(rng.integers(start, stop))
            b = min(stop, a + int(rng.integers(1, 400)))
            ids = np.arange(a, b, dtype=np.int64)
            if rng.random() < 0.3:  # out of order, repeats
                ids = rng.choice(ids, size=len(ids))
            got, want = odo.admit(rnd, ids), ref.admit(rnd, ids)
            assert (got is None) == (want is None)
            assert got is None or np.array_equal(got, want)
        assert np.array_equal(np.asarray(odo.spent).view(np.uint64), ref.spent.view(np.uint64))
        assert np.array_equal(np.asarray(odo.lifetime), ref.lifetime)
        assert odo.spent.sum() == ref.spent.sum() and odo.spent.max() == ref.spent.max()
        assert set(odo.answered) == set(ref.answered)
        for r, seen in ref.answered.items():
            assert np.array_equal(np.asarray(odo.answered[r]), seen)
    finally:
        piecewise.LIMIT = old
