"""A store of few distinct values held as a byte an agent (a bit while they are two:
``palette.Palette``, ``BitCodes``) reads, writes, updates and sums exactly as the plain array of
them: every value's bits, numpy's pairwise sums to the bit, and the plain array itself once
the values are too many."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim.simulator.session import palette
from ldpsim.simulator.session.palette import Palette
from ldpsim.simulator.session.piecewise import Piecewise, Span

EPS = [0.1, 0.25, 1 / 3, 1e-12, 2.0, -0.0, 0.7]
_OPS = st.lists(st.tuples(st.sampled_from(["add", "sub", "set", "setitem", "ids"]),
                          st.integers(0, 299), st.integers(1, 300),
                          st.sampled_from(EPS)), max_size=40)


def _bits(a: np.ndarray) -> list[int]:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64).tolist()


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, seed=st.integers(0, 2**32 - 1), codes=st.sampled_from([4, 255]))
def test_a_palettes_values_are_the_arrays_after_any_updates(ops, seed, codes):
    rng = np.random.default_rng(seed)
    old = palette.CODES
    palette.CODES = codes  # small: it compacts, and goes plain, on the way
    try:
        arr = np.zeros(300)
        p = Palette.of_runs([0, 100], [0.0, 0.5], 300, np.float64)
        arr[100:] = 0.5
        for op, a, m, v in ops:
            b = min(300, a + m)
            if op in ("add", "sub", "set"):
                p.update(slice(a, b), op, v)
                arr[a:b] = arr[a:b] + v if op == "add" else arr[a:b] - v if op == "sub" else v
            elif op == "setitem":
                vals = rng.choice(np.array(EPS), b - a)
                p[a:b] = vals
                arr[a:b] = vals
            else:
                ids = np.unique(rng.integers(0, 300, 20))
                p.update(ids, "add", v)
                arr[ids] += v
            assert _bits(p[:]) == _bits(arr)
        assert p.pairwise(0, 300) == float(arr.sum()) and p.pairwise(7, 7) == 0.0
        assert _bits(p[np.array([5, 0, 299])]) == _bits(arr[[5, 0, 299]])
        assert p.plain is not None or len(p.values) <= codes
    finally:
        palette.CODES = old


@pytest.mark.parametrize("n", [1, 7, 128, 129, 70001, 1 << 17, 3_000_017])
def test_its_sums_are_numpys_to_the_bit(n):
    rng = np.random.default_rng(n)
    vals = np.array([0.1, 0.7000000001, 1 / 3, 0.0, -0.0, 1e-17])
    codes = rng.integers(0, len(vals), n).astype(np.uint8)
    p, arr = Palette(vals, codes), vals[codes]
    for a, b in ((0, n), (n // 3, n), (1, max(1, n - 1))):
        assert p.pairwise(a, b).hex() == float(arr[a:b].sum()).hex()


def test_a_store_broken_into_runs_by_scattered_agents_holds_a_byte_an_agent():
    """The odometer's pattern under a deployment: each batch charges its online agents only.
    The store becomes a palette of two values, never a float64 array, and its span's sum is
    the array's."""
    rng = np.random.default_rng(3)
    store, arr = Piecewise(0, 200_000, 0.0), np.zeros(200_000)
    for s in range(0, 200_000, 5000):
        ids = s + np.flatnonzero(rng.random(5000) < 0.7)
        store.update_ids(ids, "add", 0.5)
        arr[ids] += 0.5
    assert isinstance(store.arr, Palette) and store.arr.plain is None
    assert store.arr.codes.nbytes == 25_000 and len(store.arr.values) == 2  # a bit an agent
    assert Span(store).sum() == arr.sum() and store.pairwise(17, 190_001) == arr[17:190_001].sum()
    assert _bits(Span(store)[:]) == _bits(arr)
    copy = store.copy()
    store.update(0, 10, "add", 1.0)
    assert _bits(copy.dense(0, 10)) == _bits(arr[:10])


def test_a_bool_store_becomes_a_palette_of_two():
    store = Piecewise(0, 10_000, False, bool)
    flags = np.zeros(10_000, dtype=bool)
    ids = np.arange(0, 10_000, 2)
    store.update_ids(ids, "set", True)
    flags[ids] = True
    assert isinstance(store.arr, Palette) and store.arr.values.dtype == bool
    assert np.array_equal(Span(store)[:], flags) and not Span(store).all() and Span(store).any()
    assert Span(store).sum() == 5000


def test_bit_codes_read_and_write_as_the_byte_array():
    rng = np.random.default_rng(5)
    bits, ref = palette.BitCodes(1000), np.zeros(1000, dtype=np.uint8)
    for _ in range(200):
        a = int(rng.integers(0, 1000))
        b = min(1000, a + int(rng.integers(0, 70)))
        kind = rng.integers(0, 3)
        if kind == 0:
            c = np.uint8(rng.integers(0, 2))
            bits[a:b] = c
            ref[a:b] = c
        elif kind == 1:
            v = rng.integers(0, 2, b - a).astype(np.uint8)
            bits[a:b] = v
            ref[a:b] = v
        else:
            idx = np.unique(rng.integers(0, 1000, 9))
            v = rng.integers(0, 2, len(idx)).astype(np.uint8)
            bits[idx] = v
            ref[idx] = v
        assert np.array_equal(bits[:], ref) and np.array_equal(bits[a:b], ref[a:b])
    assert np.array_equal(bits.widened(), ref) and np.array_equal(bits[[3, 999]], ref[[3, 999]])
    assert np.array_equal(palette.counts(bits, 2, 17, 900), np.bincount(ref[17:900], minlength=2))


def test_a_third_value_widens_the_bits_to_bytes():
    p = Palette.of_runs([0, 40, 70], [0.0, 0.5, 0.0], 100, np.float64)
    assert isinstance(p.codes, palette.BitCodes)
    p.update(slice(50, 60), "add", 0.25)
    want = np.zeros(100)
    want[40:70] = 0.5
    want[50:60] += 0.25
    assert not isinstance(p.codes, palette.BitCodes) and _bits(p[:]) == _bits(want)
