"""``protocols.ordered``: linear algebra whose sums run in an order the code fixes.

Each function must (1) compute what numpy/LAPACK computes, to rounding, and (2) give every matrix
of a batch the bits it gets alone. That no kernel's order leaks in is ``tests/test_machines.py``'s
part: it runs every protocol under other processors' BLAS kernels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from ldpsim.protocols import ordered

GEN = np.random.default_rng(20261128)


@contextlib.contextmanager
def _path(name: str) -> Iterator[None]:
    """``ordered``'s computations by ``name`` ("compiled" or "numpy") inside the block."""
    was = ordered.KERNEL.use(name)
    try:
        yield
    finally:
        ordered.KERNEL.use(was)


@pytest.mark.parametrize(("sa", "sb"), [((4,), (4,)), ((5, 4), (4,)), ((4,), (4, 3)),
                                        ((6, 4), (4, 3)), ((7, 5, 4), (7, 4, 3)),
                                        ((2, 1, 5, 4), (3, 4, 2)), ((3, 0), (0, 2))])
def test_matmul_is_numpys_product_with_its_shapes(sa, sb):
    a, b = GEN.normal(size=sa), GEN.normal(size=sb)
    got = ordered.matmul(a, b)
    assert got.shape == (a @ b).shape
    assert np.allclose(got, a @ b, rtol=1e-13, atol=1e-13)


def test_matmul_is_exact_on_integers_and_refuses_misaligned_shapes():
    a = GEN.integers(-1000, 1000, size=(40, 30))
    b = GEN.integers(-1000, 1000, size=(30, 7))
    assert np.array_equal(ordered.matmul(a, b), (a @ b).astype(np.float64))
    with pytest.raises(ValueError, match="do not align"):
        ordered.matmul(np.ones((2, 3)), np.ones((2, 3)))


def test_a_row_gets_the_same_bits_alone_as_in_any_block(monkeypatch):
    big = GEN.normal(size=(700, 1500))
    v = GEN.normal(size=1500)
    whole = ordered.matmul(big, v)
    assert ordered.matmul(big[123:124], v)[0] == whole[123]
    monkeypatch.setattr(ordered, "BLOCK", 1 << 12)  # many small blocks: the same bits
    assert np.array_equal(ordered.matmul(big, v), whole)


def test_solve_matches_lapack_and_is_batch_independent():
    a = GEN.normal(size=(60, 8, 8))
    a = a @ a.transpose(0, 2, 1) + np.eye(8)
    b = GEN.normal(size=(60, 8))
    x = ordered.solve(a, b)
    assert np.allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-10, atol=1e-12)
    assert np.array_equal(ordered.solve(a[7:8], b[7:8]), x[7:8])
    b2 = GEN.normal(size=(60, 8, 3))
    assert np.allclose(ordered.solve(a, b2), np.linalg.solve(a, b2), rtol=1e-10, atol=1e-12)
    g = GEN.normal(size=(6, 6))  # general (pivoting needed), one matrix, a vector
    assert np.allclose(ordered.solve(g, b[0, :6]), np.linalg.solve(g, b[0, :6]), rtol=1e-10)


def test_solve_pivots_on_a_zero_leading_entry_exactly():
    a = np.array([[0.0, 1.0], [2.0, 0.0]])
    assert np.array_equal(ordered.solve(a, np.array([3.0, 4.0])), [2.0, 3.0])


@pytest.mark.parametrize("d", [1, 2, 3, 5, 10, 31])
def test_eigh_decomposes_and_is_batch_independent(d):
    s = GEN.normal(size=(30, d, d))
    s = s + s.transpose(0, 2, 1)
    s[0] = np.diag(np.arange(d, dtype=float)[::-1])  # already diagonal: only sorted
    s[1] = 0.0
    if d > 2:
        s[2] = np.outer(np.arange(d), np.arange(d))  # rank one, many zero eigenvalues
    w, v = ordered.eigh(s)
    ref = np.linalg.eigh(s)[0]
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.all(np.diff(w, axis=1) >= 0)
    assert np.allclose(w, ref, atol=1e-12 * scale)
    assert np.allclose(v @ (w[..., None] * v.transpose(0, 2, 1)), s, atol=1e-12 * scale)
    assert np.allclose(v.transpose(0, 2, 1) @ v, np.eye(d), atol=1e-13)
    assert np.array_equal(w[0], np.arange(d, dtype=float))
    for i in (0, 1, 5):
        wi, vi = ordered.eigh(s[i:i + 1])
        assert np.array_equal(wi, w[i:i + 1]) and np.array_equal(vi, v[i:i + 1])


def test_round_robin_meets_every_pair_once_in_disjoint_rounds():
    for d in (2, 3, 6, 7):
        seen = []
        for p, q in ordered._round_robin(d):
            assert len(set(p) | set(q)) == 2 * len(p)  # disjoint within a round
            seen += list(zip(p.tolist(), q.tolist(), strict=True))
        assert sorted(seen) == [(i, j) for i in range(d) for j in range(i + 1, d)]


def test_lstsq_pearson_and_norm_match_numpy():
    m = GEN.normal(size=(100, 6))
    y = GEN.normal(size=(100, 3))
    assert np.allclose(ordered.lstsq(m, y), np.linalg.lstsq(m, y, rcond=None)[0], atol=1e-12)
    x, z = GEN.normal(size=50), GEN.normal(size=50)
    assert ordered.pearson(x, z) == pytest.approx(np.corrcoef(x, z)[0, 1], abs=1e-14)
    assert np.isnan(ordered.pearson(np.ones(5), z[:5]))
    assert ordered.norm(np.array([3.0, 4.0])) == 5.0


def test_nnls_matches_the_kkt_conditions_and_scipy():
    from scipy.optimize import nnls

    for _ in range(20):
        m, n = int(GEN.integers(3, 15)), int(GEN.integers(2, 20))
        a, b = GEN.normal(size=(m, n)), GEN.normal(size=m)
        x = ordered.nnls(a, b)
        ref, _ = nnls(a, b)
        r = a @ x - b
        assert (x >= 0).all()
        assert r @ r <= (a @ ref - b) @ (a @ ref - b) + 1e-10
        g = a.T @ (b - a @ x)  # KKT: g <= 0 where x = 0, g = 0 where x > 0
        assert (g[x == 0] <= 1e-9).all() and np.allclose(g[x > 0], 0.0, atol=1e-9)


def test_basic_solution_solves_a_rank_deficient_consistent_system():
    a = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])  # rank 2
    b = np.array([2.0, 3.0, 5.0])
    x = ordered.basic_solution(a, b)
    assert np.array_equal(a @ x, b) and x[1] == 0.0  # the free variable at zero


def test_the_tree_is_numpys_pairwise_sum_written_out():
    """On numpy >= 2 (whose reduction starts from the identity) ``add.reduce`` along a
    contiguous axis is exactly ``_tree_sum``: the same tree, in every size class (< 8, <= 128,
    split halves)."""
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip("numpy < 2 starts its reduction from the first element")
    for n in [*range(0, 140), 255, 256, 257, 1000, 1029, 5000]:
        x = GEN.normal(size=(3, n)) * 10.0 ** GEN.integers(-6, 6, size=(3, n))
        assert np.array_equal(ordered._tree_sum(x), np.add.reduce(x, axis=-1)), n


@pytest.mark.skipif(ordered.KERNEL.built is None, reason="the compiled kernel was not built")
@pytest.mark.parametrize(("sa", "sb"), [((5, 4), (4, 3)), ((7, 9, 130), (7, 130, 2)),
                                        ((3, 1000), (1000,)), ((4, 2, 6, 17), (2, 17, 3)),
                                        ((6, 300), (300, 5)), ((2, 3), (3, 0)), ((0, 3), (3, 4)),
                                        ((3,), (3,))])
def test_the_compiled_kernel_gives_numpys_bits(sa, sb):
    a, b = GEN.normal(size=sa), GEN.normal(size=sb)
    with _path("numpy"):
        slow = ordered.matmul(a, b)
    with _path("compiled"):
        assert np.array_equal(ordered.matmul(a, b), slow)


@pytest.mark.skipif(ordered.KERNEL.built is None, reason="the compiled kernel was not built")
@pytest.mark.parametrize("rows", [0, 1, 7, 8, 9, 127, 128, 129, 300, 1031])
def test_a_vector_times_a_matrix_streams_its_rows_to_the_same_bits(rows, monkeypatch):
    q, x = GEN.normal(size=rows), GEN.normal(size=(rows, 37))
    fast = ordered.matmul(q, x)  # the compiled row-streaming tree
    assert np.array_equal(fast, ordered.matmul(x.T.copy(), q))  # the same tree, transposed
    monkeypatch.setattr(ordered, "BLOCK", 64)  # numpy's path in many blocks
    with _path("numpy"):
        assert np.array_equal(ordered.matmul(q, x), fast)


@pytest.mark.skipif(ordered.KERNEL.built is None, reason="the compiled kernel was not built")
@pytest.mark.parametrize("d", [1, 2, 3, 4, 7, 10, 24])
def test_the_compiled_jacobi_gives_numpys_bits(d):
    s = GEN.normal(size=(40, d, d))
    s = s + s.transpose(0, 2, 1)
    s[0] = 0.0
    s[1] = np.diag(np.arange(d, dtype=float))
    if d > 2:
        s[2] = np.outer(np.arange(d), np.arange(d))
        s[3, 0, 1] = s[3, 1, 0] = 1e-300  # below the floor: not rotated
    fast = ordered.eigh(s)
    with _path("numpy"):
        slow = ordered.eigh(s)
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])


@pytest.mark.skipif(ordered.KERNEL.built is None, reason="the compiled kernel was not built")
@pytest.mark.parametrize(("d", "k"), [(1, 1), (2, 1), (5, 3), (10, 1), (19, 2)])
def test_the_compiled_solve_gives_numpys_bits(d, k):
    a = GEN.normal(size=(50, d, d))
    a[0] = 0.0  # singular: inf/NaN in its own rows only
    if d > 1:
        a[1, 0, 0] = 0.0  # a pivot to find
        a[2, 1, 0] = np.nan
    b = GEN.normal(size=(50, d, k))
    fast = ordered.solve(a, b)
    with _path("numpy"):
        slow = ordered.solve(a, b)
    assert np.array_equal(fast, slow, equal_nan=True)
    assert np.isfinite(fast[3:]).all()


def test_solve_takes_fortran_ordered_and_broadcast_operands():
    a = GEN.normal(size=(4, 4)) + 4 * np.eye(4)
    b = np.asfortranarray(GEN.normal(size=(4, 3)))
    assert np.allclose(ordered.solve(np.asfortranarray(a), b), np.linalg.solve(a, b))
    x = ordered.solve(np.broadcast_to(a, (5, 4, 4)), b[None])
    assert x.shape == (5, 4, 3) and np.array_equal(x[0], x[4])


@pytest.mark.skipif(ordered.KERNEL.built is None, reason="the compiled kernel was not built")
def test_the_compiled_kernel_reads_transposes_in_place_to_the_same_bits():
    z = GEN.normal(size=(30, 13, 10))
    beta = GEN.normal(size=(30, 10, 1))
    cases = [(z.swapaxes(1, 2), z), (z, z.swapaxes(1, 2)[:, :, :4]), (z[0].T, z[1]),
             (z[:, 3, :], beta[:, :, 0].T), (z[:, ::2], beta)]
    for a, b in cases:
        fast = ordered.matmul(a, b)
        with _path("numpy"):
            assert np.array_equal(fast, ordered.matmul(a, b))
        assert np.allclose(fast, np.matmul(a, b), rtol=1e-12, atol=1e-12)
