"""Algorithm 1 on the answered cells only (``protocols.truth.sparse``) gives the same bits as the
dense matrix form it replaced: the dense reference below is that form, kept verbatim."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import ordered
from ldpsim.protocols.truth import inference
from ldpsim.protocols.truth.inference import SIGMA_FLOOR, Inference, infer_truth
from ldpsim.protocols.truth.sparse import SPARSE_FILL, SparseAnswers


def _dense_reference(answers: np.ndarray, tol: float = inference.TOL,
                     max_iter: int = inference.MAX_ITER) -> Inference:
    """Algorithm 1 on the dense matrix, every sum over every cell (NULL as 0)."""
    x = np.asarray(answers, dtype=np.float64)
    m, n = x.shape
    mask = np.isfinite(x)
    w = mask.astype(np.float64)
    x0 = np.where(mask, x, 0.0)
    counts = w.sum(axis=1)
    has = counts > 0
    sq = (x0 * x0).sum(axis=1)
    q = np.where(has, 1.0 / max(int(has.sum()), 1), 0.0)
    mu = np.zeros(n)
    sigma = np.full(m, np.nan)
    converged = False
    it = 0
    for it in range(1, max(1, int(max_iter)) + 1):
        num = ordered.matmul(q, x0)
        den = ordered.matmul(q, w)
        total = den.sum()
        fallback = num.sum() / total if total > 0 else 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            new = np.where(den > 0, num / np.where(den > 0, den, 1.0), fallback)
        ss = np.maximum(sq - 2.0 * ordered.matmul(x0, new) + ordered.matmul(w, new * new), 0.0)
        sigma = np.where(has, np.sqrt(ss / np.maximum(counts, 1.0)), np.nan)
        q = np.where(has, 1.0 / np.maximum(np.nan_to_num(sigma, nan=1.0), SIGMA_FLOOR), 0.0)
        q = q / q.sum() if q.sum() > 0 else q
        delta = np.max(np.abs(new - mu)) if it > 1 else np.inf
        mu = new
        if delta < tol:
            converged = True
            break
    return Inference(mu, q, sigma, it, converged)


def _same(a: Inference, b: Inference) -> None:
    for f in ("mu", "quality", "sigma"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.shape == y.shape, f
        assert np.array_equal(x.view(np.int64), y.view(np.int64)), f
    assert (a.iterations, a.converged) == (b.iterations, b.converged)


def _answers(rng: np.random.Generator, m: int, n: int, fill: float, kind: str) -> np.ndarray:
    mask = rng.random((m, n)) < fill
    if kind == "int":
        vals = rng.integers(0, 10, (m, n)).astype(np.float64)
    else:  # LP-like reports: real values of both signs
        vals = rng.integers(0, 5, (m, n)) + rng.laplace(0.0, 3.0, (m, n))
    return np.where(mask, vals, np.nan)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 7), (9, 130), (140, 9), (300, 1100), (1000, 40)])
@pytest.mark.parametrize("fill", [0.005, 0.03, 0.07, 0.2, 0.6, 1.0])
@pytest.mark.parametrize("kind", ["int", "real"])
def test_sparse_equals_dense_reference(m, n, fill, kind):
    rng = np.random.default_rng([m, n, int(fill * 1000), kind == "int"])
    x = _answers(rng, m, n, fill, kind)
    want = _dense_reference(x, max_iter=60)
    _same(infer_truth(x, max_iter=60), want)
    _same(infer_truth(SparseAnswers.from_dense(x), max_iter=60), want)


def test_worker_and_task_without_answers():
    rng = np.random.default_rng(7)
    x = _answers(rng, 200, 300, 0.02, "int")
    x[5] = np.nan  # a worker with no answers
    x[:, 17] = np.nan  # a task with no answers
    x[:, 0] = np.nan
    x[-1] = np.nan
    x[:, -1] = np.nan
    want = _dense_reference(x)
    got = infer_truth(SparseAnswers.from_dense(x))
    _same(got, want)
    _same(infer_truth(x), want)
    assert np.isnan(got.sigma[5]) and got.quality[5] == 0.0
    assert np.isfinite(got.mu[17])


def test_no_answers_at_all_and_empty_shapes():
    for shape in [(4, 6), (0, 5), (5, 1)]:
        x = np.full(shape, np.nan)
        want = _dense_reference(x, max_iter=5)
        _same(infer_truth(x, max_iter=5), want)
        _same(infer_truth(SparseAnswers.from_dense(x), max_iter=5), want)


def test_non_finite_cells_are_null():
    rng = np.random.default_rng(3)
    x = _answers(rng, 50, 80, 0.1, "real")
    x[1, 2], x[3, 4] = np.inf, -np.inf
    _same(infer_truth(SparseAnswers.from_dense(x), max_iter=30), _dense_reference(x, max_iter=30))
    _same(infer_truth(x, max_iter=30), _dense_reference(x, max_iter=30))


def test_both_ordered_implementations():
    """The sparse sums' numpy form (no compiled kernel) gives the same bits."""
    rng = np.random.default_rng(11)
    x = _answers(rng, 260, 400, 0.03, "real")
    want = _dense_reference(x, max_iter=20)
    before = ordered.KERNEL.name()
    try:
        for impl in ("numpy", before):
            ordered.KERNEL.use(impl)
            _same(infer_truth(SparseAnswers.from_dense(x), max_iter=20), want)
    finally:
        ordered.KERNEL.use(before)


def test_from_cells_any_order_and_dense_round_trip():
    rng = np.random.default_rng(5)
    x = _answers(rng, 30, 40, 0.1, "int")
    s = SparseAnswers.from_dense(x)
    perm = rng.permutation(len(s.values))
    t = SparseAnswers.from_cells(x.shape, s.workers[perm], s.tasks[perm], s.values[perm])
    assert np.array_equal(t.workers, s.workers) and np.array_equal(t.tasks, s.tasks)
    assert np.array_equal(t.dense(), x, equal_nan=True)


@pytest.mark.parametrize("n", [1, 5, 8, 9, 127, 128, 129, 255, 256, 1000, 4099])
def test_segment_sums_match_matmul_rows(n):
    rng = np.random.default_rng(n)
    m = 25
    for fill in (0.0, 0.01, 0.3, 1.0):
        mask = rng.random((m, n)) < fill
        x = np.where(mask, rng.standard_normal((m, n)) * 10.0 ** rng.integers(-6, 6, (m, n)),
                     0.0)
        x[0, : min(n, 3)] = -0.0  # signed zeros among the present terms
        mask[0, : min(n, 3)] = True
        y = rng.standard_normal(n)
        rows, cols = np.nonzero(mask)
        starts = np.concatenate(([0], np.cumsum(mask.sum(axis=1))))
        want = ordered.matmul(x, y)
        for impl in ("numpy", "compiled"):
            if impl == "compiled" and ordered.KERNEL.built is None:
                continue
            before = ordered.KERNEL.use(impl)
            try:
                got = ordered.segment_sums(x[rows, cols] * y[cols], cols, starts, n)
            finally:
                ordered.KERNEL.use(before)
            assert np.array_equal(got.view(np.int64), want.view(np.int64)), (impl, fill)


def test_segment_sums_rejects_bad_layout():
    if ordered.KERNEL.module is None:
        pytest.skip("the compiled kernel checks the layout")
    with pytest.raises(ValueError):
        ordered.segment_sums(np.ones(2), np.array([3, 1]), np.array([0, 2]), 5)
    with pytest.raises(ValueError):
        ordered.segment_sums(np.ones(2), np.array([0, 5]), np.array([0, 2]), 5)
    with pytest.raises(ValueError):
        ordered.segment_sums(np.ones(2), np.array([0, 1]), np.array([0, 1]), 5)


# --------------------------------------------------------------------------- the protocols' inputs


def _sparse_rows(rng: np.random.Generator, m: int, n: int, levels: int, fill: float):
    x = np.where(rng.random((m, n)) < fill, rng.integers(0, levels, (m, n)), np.nan)
    x[0] = np.nan  # a worker without answers
    x[:, 1] = np.nan  # a task nobody answered
    return x


@pytest.mark.parametrize("epsilon", [0.5, 3.0, 8.0])
def test_rr_and_two_layer_reports(epsilon):
    """RR and the 2-Layer mechanism report NULL for most NULLs at a large ε: sparse input."""
    from ldpsim.protocols.truth import mechanisms as tm

    rng = np.random.default_rng(int(epsilon * 10))
    levels, m, n = 4, 300, 700
    codes = tm.to_codes(_sparse_rows(rng, m, n, levels, 0.02), levels)
    for reports in (tm.rr_perturb(codes, rng.random((m, n)), levels, epsilon),
                    tm.TwoLayer(levels, epsilon, 0.5).perturb(codes, rng.random(m),
                                                              rng.random((m, n)))):
        x = tm.from_codes(reports, levels)
        want = _dense_reference(x, max_iter=200)
        _same(infer_truth(x, max_iter=200), want)
        _same(infer_truth(SparseAnswers.from_dense(x), max_iter=200), want)


def test_mf_and_lp_reports_dense():
    """MF's reports u_i V and LP's are finite in every cell: the dense form, mask summed once."""
    from ldpsim.protocols.truth import mf

    rng = np.random.default_rng(4)
    levels, m, n, d = 5, 150, 260, 6
    rows = _sparse_rows(rng, m, n, levels, 0.05)
    v = mf.task_profiles(rng, d, n)
    eta = rng.laplace(0.0, levels / 1.0, (m, d))
    uv = mf.reconstruct(mf.solve_profiles(rows, v, eta, 1.0), v)
    lp = np.where(np.isnan(rows), rng.integers(0, levels, (m, n)), rows) + rng.laplace(
        0.0, 5.0, (m, n))
    for x in (uv, lp):
        assert np.isfinite(x).all()
        want = _dense_reference(x, max_iter=100)
        _same(infer_truth(x, max_iter=100), want)
        _same(infer_truth(SparseAnswers.from_dense(x), max_iter=100), want)


def test_codes_round_trip_as_before():
    from ldpsim.protocols.truth import mechanisms as tm

    rng = np.random.default_rng(9)
    rows = _sparse_rows(rng, 40, 60, 7, 0.3)
    old = np.where(np.isnan(rows), 7, np.nan_to_num(rows)).astype(np.int64)
    codes = tm.to_codes(rows, 7)
    assert codes.dtype == np.int64 and np.array_equal(codes, old)
    back = tm.from_codes(codes, 7)
    assert np.array_equal(back, np.where(old == 7, np.nan, old).astype(np.float64),
                          equal_nan=True)


def test_synthetic_rows_as_the_dense_answer_model():
    """The answer model on the chosen cells only gives the rows the model on every cell did."""
    from ldpsim.protocols import DATA_KINDS
    from ldpsim.protocols import rng as rngm
    from scipy import special

    for sparsity in (0.0, 0.5, 0.97):
        ds = DATA_KINDS["crowd_synthetic"].build(
            {"n": 300, "tasks": 90, "sparsity": sparsity}, keys=rngm.stream_key(3, "data"))
        start, stop = 17, 300
        ids = np.arange(start, stop)
        own = ds.keys.range(start, stop)
        k = ds.answered()
        pick = rngm.uniform(own, ids, 0, ds.tasks)
        z = special.ndtri(rngm.uniform(own, ids, 1, ds.tasks))
        vals = np.clip(np.rint(ds.ground_truth()[None, :] + ds.sigmas()[start:stop, None] * z),
                       0, ds.levels - 1)
        want = vals.copy()
        if k < ds.tasks:
            chosen = np.argpartition(pick, k - 1, axis=1)[:, :k]
            want = np.full(vals.shape, np.nan)
            r = np.arange(len(ids))[:, None]
            want[r, chosen] = vals[r, chosen]
        got = ds.rows(start, stop)
        assert np.array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("fill", [0.0, 0.01, 0.04, 0.06, 0.3, 1.0])
def test_curator_input_of_integer_reports(fill):
    """The curator's input from integer reports: the answered cells (few answers) or the dense
    matrix, the same inference and the same NULL fraction as the decoded matrix."""
    from ldpsim.protocols.truth import mechanisms as tm
    from ldpsim.protocols.truth.sparse import answers_of_codes

    rng = np.random.default_rng(int(fill * 100))
    levels = 5
    rows = np.where(rng.random((120, 90)) < fill, rng.integers(0, levels, (120, 90)), np.nan)
    codes = tm.to_codes(rows, levels)
    dense = tm.from_codes(codes, levels)
    got = answers_of_codes(codes, levels)
    assert isinstance(got, SparseAnswers) == (np.isfinite(dense).sum() <= SPARSE_FILL * dense.size)
    if isinstance(got, SparseAnswers):
        assert np.array_equal(got.dense(), dense, equal_nan=True)
        assert got.null_fraction == float(np.isnan(dense).mean())
    else:
        assert np.array_equal(got, dense, equal_nan=True)
    _same(infer_truth(got, max_iter=80), _dense_reference(dense, max_iter=80))
