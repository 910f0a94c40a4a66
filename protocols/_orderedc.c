/*
 * ldpsim.protocols._orderedc: the fixed-order matrix product of protocols/ordered.py, in C
 * (optional).
 *
 * ``matmul(a, sa, ra, ka, bt, sb, rb, kb, out, batch, n, k, m)`` writes, for every batch index
 * p < batch, row i < n and column j < m,
 *
 *     out[(p * n + i) * m + j] = 0.0 + tree(a[p sa + i ra + t ka] * bt[p sb + j rb + t kb], t < k)
 *
 * where ``a`` and ``bt`` are contiguous float64 buffers read through element strides (batch,
 * row, contracted axis: a matrix or its transpose, in place; batch stride 0 for one matrix
 * shared by the batch; ``bt`` is b transposed), and ``tree`` is ordered.py's ``_tree_sum``: numpy's pairwise summation (blocks of
 * at most 128 summed with eight accumulators, larger ones split in two at a multiple of 8,
 * fewer than 8 summed from 0.0 in order). Each product and each sum is one IEEE double operation
 * (no fused multiply-add: built with -ffp-contract=off), so the compiled and the numpy path give
 * the same bits on every processor.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static double tree(const double *a, Py_ssize_t sa, const double *b, Py_ssize_t sb,
                   Py_ssize_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i * sa] * b[i * sb];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[j * sa] * b[j * sb];
        Py_ssize_t i, full = n - n % 8;
        for (i = 8; i < full; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[(i + j) * sa] * b[(i + j) * sb];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i * sa] * b[i * sb];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return tree(a, sa, b, sb, n2) + tree(a + n2 * sa, sa, b + n2 * sb, sb, n - n2);
}

/* res[j] = tree over i < rows of q[i] * x[i * n + j], for j < n: the same tree as ``tree``,
 * each of its eight running sums a row of ``scratch`` (8 n doubles), the rows of x read in
 * order (a vector times a C-contiguous matrix, without its transpose). */
static int tree_rows(const double *q, const double *x, Py_ssize_t rows, Py_ssize_t n,
                     double *res, double *scratch)
{
    if (rows < 8) {
        for (Py_ssize_t j = 0; j < n; j++)
            res[j] = 0.0;
        for (Py_ssize_t i = 0; i < rows; i++)
            for (Py_ssize_t j = 0; j < n; j++)
                res[j] += q[i] * x[i * n + j];
        return 0;
    }
    if (rows <= 128) {
        Py_ssize_t i, full = rows - rows % 8;
        for (int r = 0; r < 8; r++)
            for (Py_ssize_t j = 0; j < n; j++)
                scratch[r * n + j] = q[r] * x[r * n + j];
        for (i = 8; i < full; i += 8)
            for (int r = 0; r < 8; r++)
                for (Py_ssize_t j = 0; j < n; j++)
                    scratch[r * n + j] += q[i + r] * x[(i + r) * n + j];
        const double *s = scratch;
        for (Py_ssize_t j = 0; j < n; j++)
            res[j] = ((s[j] + s[n + j]) + (s[2 * n + j] + s[3 * n + j]))
                     + ((s[4 * n + j] + s[5 * n + j]) + (s[6 * n + j] + s[7 * n + j]));
        for (; i < rows; i++)
            for (Py_ssize_t j = 0; j < n; j++)
                res[j] += q[i] * x[i * n + j];
        return 0;
    }
    Py_ssize_t r2 = rows / 2;
    r2 -= r2 % 8;
    double *right = (double *)malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (right == NULL)
        return -1;
    if (tree_rows(q, x, r2, n, res, scratch) < 0
        || tree_rows(q + r2, x + r2 * n, rows - r2, n, right, scratch) < 0) {
        free(right);
        return -1;
    }
    for (Py_ssize_t j = 0; j < n; j++)
        res[j] = res[j] + right[j];
    free(right);
    return 0;
}

/* vecmat(q, x, out, rows, n): out[j] = 0.0 + tree_rows(q, x)[j] */
static PyObject *vecmat(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer q, x, out;
    Py_ssize_t rows, n;
    if (!PyArg_ParseTuple(args, "y*y*w*nn", &q, &x, &out, &rows, &n))
        return NULL;
    PyObject *result = NULL;
    if (rows < 0 || n < 0 || q.len != rows * 8 || x.len != rows * n * 8 || out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "vecmat: buffers of inconsistent sizes");
        goto release;
    }
    double *scratch = (double *)malloc((size_t)(8 * n > 0 ? 8 * n : 1) * sizeof(double));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    double *po = (double *)out.buf;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = tree_rows((const double *)q.buf, (const double *)x.buf, rows, n, po, scratch);
    if (!failed)
        for (Py_ssize_t j = 0; j < n; j++)
            po[j] = 0.0 + po[j];
    Py_END_ALLOW_THREADS
    free(scratch);
    if (failed) {
        PyErr_NoMemory();
        goto release;
    }
    result = Py_None;
    Py_INCREF(result);
release:
    PyBuffer_Release(&q);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

/* jacobi(m, v, floor, pairs_p, pairs_q, round_sizes, batch, d, max_sweeps): ordered.py's
 * ``eigh`` sweeps on each of ``batch`` row-major d x d matrices m (symmetric) with their
 * accumulated rotations v (identity on entry), in place. The rounds of disjoint pairs are given
 * (``_round_robin``: round r holds round_sizes[r] pairs, flattened in pairs_p/pairs_q). Per
 * round, every pair's rotation is decided and computed from the matrix as the round found it,
 * then applied to the columns of m and v, then to the rows of m, and the pair is zeroed: the
 * operations of the numpy path, one IEEE operation each, for each matrix alone (a matrix stops
 * after its first sweep without a rotation, which leaves it unchanged, as the numpy path's
 * further sweeps do). */
static PyObject *jacobi(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer mb, vb, fb, pb, qb, rb;
    Py_ssize_t batch, d, max_sweeps;
    if (!PyArg_ParseTuple(args, "w*w*y*y*y*y*nnn", &mb, &vb, &fb, &pb, &qb, &rb, &batch, &d,
                          &max_sweeps))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t rounds = rb.len / 8, npairs = pb.len / 8;
    if (batch < 0 || d < 0 || mb.len != batch * d * d * 8 || vb.len != mb.len
        || fb.len != batch * 8 || qb.len != pb.len) {
        PyErr_SetString(PyExc_ValueError, "jacobi: buffers of inconsistent sizes");
        goto release;
    }
    const int64_t *pp = (const int64_t *)pb.buf, *pq = (const int64_t *)qb.buf;
    const int64_t *rs = (const int64_t *)rb.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t r = 0; r < rounds; r++)
        total += rs[r];
    for (Py_ssize_t i = 0; i < npairs; i++)
        if (pp[i] < 0 || pp[i] >= d || pq[i] < 0 || pq[i] >= d)
            total = -1;
    if (total != npairs) {
        PyErr_SetString(PyExc_ValueError, "jacobi: pairs out of range");
        goto release;
    }
    double *cs = (double *)malloc((size_t)(3 * (npairs > 0 ? npairs : 1)) * sizeof(double));
    if (cs == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < batch; b++) {
        double *m = (double *)mb.buf + b * d * d, *v = (double *)vb.buf + b * d * d;
        double floor_ = ((const double *)fb.buf)[b];
        for (Py_ssize_t sweep = 0; sweep < max_sweeps; sweep++) {
            int rotated = 0;
            Py_ssize_t first = 0;
            for (Py_ssize_t r = 0; r < rounds; first += rs[r], r++) {
                int any = 0;
                for (Py_ssize_t i = first; i < first + rs[r]; i++) {
                    Py_ssize_t p = pp[i], q = pq[i];
                    double apq = m[p * d + q], app = m[p * d + p], aqq = m[q * d + q];
                    double g = 100.0 * fabs(apq);
                    int rot = ((fabs(app) + g != fabs(app)) || (fabs(aqq) + g != fabs(aqq)))
                              && fabs(apq) > floor_;
                    cs[3 * i] = rot;
                    if (rot) {
                        double theta = (aqq - app) / (2.0 * apq);
                        double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + hypot(theta, 1.0));
                        double c = 1.0 / sqrt(t * t + 1.0);
                        cs[3 * i + 1] = c;
                        cs[3 * i + 2] = t * c;
                        any = 1;
                    }
                }
                if (!any)
                    continue;
                rotated = 1;
                for (Py_ssize_t i = first; i < first + rs[r]; i++) {
                    if (!cs[3 * i])
                        continue;
                    Py_ssize_t p = pp[i], q = pq[i];
                    double c = cs[3 * i + 1], s = cs[3 * i + 2];
                    for (Py_ssize_t row = 0; row < d; row++) {
                        double xp = m[row * d + p], xq = m[row * d + q];
                        m[row * d + p] = c * xp - s * xq;
                        m[row * d + q] = s * xp + c * xq;
                        xp = v[row * d + p];
                        xq = v[row * d + q];
                        v[row * d + p] = c * xp - s * xq;
                        v[row * d + q] = s * xp + c * xq;
                    }
                }
                for (Py_ssize_t i = first; i < first + rs[r]; i++) {
                    if (!cs[3 * i])
                        continue;
                    Py_ssize_t p = pp[i], q = pq[i];
                    double c = cs[3 * i + 1], s = cs[3 * i + 2];
                    for (Py_ssize_t col = 0; col < d; col++) {
                        double mp = m[p * d + col], mq = m[q * d + col];
                        m[p * d + col] = c * mp - s * mq;
                        m[q * d + col] = s * mp + c * mq;
                    }
                }
                for (Py_ssize_t i = first; i < first + rs[r]; i++)
                    if (cs[3 * i]) {
                        m[pp[i] * d + pq[i]] = 0.0;
                        m[pq[i] * d + pp[i]] = 0.0;
                    }
            }
            if (!rotated)
                break;
        }
    }
    Py_END_ALLOW_THREADS
    free(cs);
    result = Py_None;
    Py_INCREF(result);
release:
    PyBuffer_Release(&mb);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&rb);
    return result;
}

/* solve(lu, rhs, x, batch, d, k): ordered.py's ``solve`` on each of ``batch`` row-major d x d
 * matrices lu and d x k right-hand sides rhs (both overwritten), the solutions into x: for
 * j = 0..d-1 the pivot is the first row of largest |lu[r][j]|, r >= j (a NaN counts as the
 * largest, as numpy's argmax has it), rows j and p swap, and every row below subtracts
 * f * row j, f = lu[r][j] / lu[j][j]; then from row d-1 up, x[i] = (rhs[i] - t) / lu[i][i]
 * with t = 0.0 + tree over c > i of lu[i][c] * x[c]. */
static PyObject *solve(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer lb, rb, xb;
    Py_ssize_t batch, d, k;
    if (!PyArg_ParseTuple(args, "w*w*w*nnn", &lb, &rb, &xb, &batch, &d, &k))
        return NULL;
    PyObject *result = NULL;
    if (batch < 0 || d < 0 || k < 0 || lb.len != batch * d * d * 8 || rb.len != batch * d * k * 8
        || xb.len != rb.len) {
        PyErr_SetString(PyExc_ValueError, "solve: buffers of inconsistent sizes");
        goto release;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < batch; b++) {
        double *lu = (double *)lb.buf + b * d * d, *rhs = (double *)rb.buf + b * d * k;
        double *x = (double *)xb.buf + b * d * k;
        for (Py_ssize_t j = 0; j < d; j++) {
            Py_ssize_t piv = j;
            double best = fabs(lu[j * d + j]);
            if (!isnan(best))
                for (Py_ssize_t r = j + 1; r < d; r++) {
                    double v = fabs(lu[r * d + j]);
                    if (isnan(v)) {
                        piv = r;
                        break;
                    }
                    if (v > best) {
                        piv = r;
                        best = v;
                    }
                }
            if (piv != j) {
                for (Py_ssize_t c = 0; c < d; c++) {
                    double t = lu[j * d + c];
                    lu[j * d + c] = lu[piv * d + c];
                    lu[piv * d + c] = t;
                }
                for (Py_ssize_t c = 0; c < k; c++) {
                    double t = rhs[j * k + c];
                    rhs[j * k + c] = rhs[piv * k + c];
                    rhs[piv * k + c] = t;
                }
            }
            for (Py_ssize_t r = j + 1; r < d; r++) {
                double f = lu[r * d + j] / lu[j * d + j];
                for (Py_ssize_t c = j + 1; c < d; c++)
                    lu[r * d + c] = lu[r * d + c] - f * lu[j * d + c];
                for (Py_ssize_t c = 0; c < k; c++)
                    rhs[r * k + c] = rhs[r * k + c] - f * rhs[j * k + c];
            }
        }
        for (Py_ssize_t i = d - 1; i >= 0; i--)
            for (Py_ssize_t c = 0; c < k; c++) {
                double done = 0.0 + tree(lu + i * d + i + 1, 1, x + (i + 1) * k + c, k,
                                         d - i - 1);
                x[i * k + c] = (rhs[i * k + c] - done) / lu[i * d + i];
            }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release:
    PyBuffer_Release(&lb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&xb);
    return result;
}

static PyObject *matmul(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer a, bt, out;
    Py_ssize_t sa, ra, ka, sb, rb, kb, batch, n, k, m;
    if (!PyArg_ParseTuple(args, "y*nnny*nnnw*nnnn", &a, &sa, &ra, &ka, &bt, &sb, &rb, &kb, &out,
                          &batch, &n, &k, &m))
        return NULL;
    PyObject *result = NULL;
    /* the largest element offset each operand's strides reach (all strides are >= 0) */
    Py_ssize_t last_a = (batch - 1) * sa + (n - 1) * ra + (k - 1) * ka;
    Py_ssize_t last_b = (batch - 1) * sb + (m - 1) * rb + (k - 1) * kb;
    if (batch < 0 || n < 0 || k < 0 || m < 0 || sa < 0 || ra < 0 || ka < 0 || sb < 0 || rb < 0
        || kb < 0 || out.len != batch * n * m * 8
        || (batch > 0 && n > 0 && k > 0 && a.len < (last_a + 1) * 8)
        || (batch > 0 && m > 0 && k > 0 && bt.len < (last_b + 1) * 8)) {
        PyErr_SetString(PyExc_ValueError, "matmul: buffers of inconsistent sizes");
        goto release;
    }
    const double *pa = (const double *)a.buf, *pb = (const double *)bt.buf;
    double *po = (double *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < batch; p++)
        for (Py_ssize_t i = 0; i < n; i++) {
            const double *row = pa + p * sa + i * ra;
            for (Py_ssize_t j = 0; j < m; j++)
                *po++ = 0.0 + tree(row, ka, pb + p * sb + j * rb, kb, k);
        }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release:
    PyBuffer_Release(&a);
    PyBuffer_Release(&bt);
    PyBuffer_Release(&out);
    return result;
}

/* The tree of ``tree`` over n positions (off .. off + n - 1), of which only the terms
 * v[a .. b - 1] at the ascending positions pos[a .. b - 1] are present, the others being zero:
 * the same additions in the same nesting, a sum over no term being the identity 0.0 (an exact
 * zero added to any sum changes it at most in the sign of a zero result, which the caller's
 * final 0.0 + ... makes +0.0 as the dense sum does). */
static double sparse_tree_of(const double *v, const int64_t *pos, Py_ssize_t a, Py_ssize_t b,
                             int64_t off, Py_ssize_t n)
{
    if (a == b)
        return 0.0;
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = a; i < b; i++)
            res += v[i];
        return res;
    }
    if (n <= 128) {
        double r[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        int64_t full = off + (int64_t)(n - n % 8);
        Py_ssize_t i = a;
        for (; i < b && pos[i] < full; i++)
            r[(pos[i] - off) % 8] += v[i];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < b; i++)
            res += v[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    Py_ssize_t c = a;
    while (c < b && pos[c] < off + (int64_t)n2)
        c++;
    return sparse_tree_of(v, pos, a, c, off, n2)
           + sparse_tree_of(v, pos, c, b, off + (int64_t)n2, n - n2);
}

/* sparse_tree(v, pos, starts, out, segments, n): out[s] = 0.0 + the tree over n positions of
 * segment s, whose present terms are v[starts[s] .. starts[s + 1] - 1] at the ascending
 * positions pos[...] in [0, n) (the sparse form of ``matmul``'s sums over a row with zeros). */
static PyObject *sparse_tree(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer v, pos, starts, out;
    Py_ssize_t segs, n;
    if (!PyArg_ParseTuple(args, "y*y*y*w*nn", &v, &pos, &starts, &out, &segs, &n))
        return NULL;
    PyObject *result = NULL;
    const int64_t *ps = (const int64_t *)starts.buf, *pp = (const int64_t *)pos.buf;
    Py_ssize_t nnz = v.len / 8;
    if (segs < 0 || n < 0 || starts.len != (segs + 1) * 8 || out.len != segs * 8
        || pos.len != v.len || ps[0] != 0 || ps[segs] != nnz) {
        PyErr_SetString(PyExc_ValueError, "sparse_tree: buffers of inconsistent sizes");
        goto release;
    }
    for (Py_ssize_t s = 0; s < segs; s++)
        if (ps[s + 1] < ps[s]) {
            PyErr_SetString(PyExc_ValueError, "sparse_tree: segment starts must not decrease");
            goto release;
        }
    for (Py_ssize_t s = 0; s < segs; s++)
        for (Py_ssize_t i = ps[s]; i < ps[s + 1]; i++)
            if (pp[i] < 0 || pp[i] >= n || (i > ps[s] && pp[i] <= pp[i - 1])) {
                PyErr_SetString(PyExc_ValueError,
                                "sparse_tree: positions must ascend within [0, n)");
                goto release;
            }
    double *po = (double *)out.buf;
    const double *pv = (const double *)v.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < segs; s++)
        po[s] = 0.0 + sparse_tree_of(pv, pp, ps[s], ps[s + 1], 0, n);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release:
    PyBuffer_Release(&v);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"matmul", matmul, METH_VARARGS,
     "The fixed-order matrix product of protocols/ordered.py (see the module's source)."},
    {"jacobi", jacobi, METH_VARARGS,
     "The Jacobi sweeps of ordered.eigh on each matrix of a batch (see the module's source)."},
    {"solve", solve, METH_VARARGS,
     "The Gaussian elimination of ordered.solve on each system of a batch (see the source)."},
    {"vecmat", vecmat, METH_VARARGS,
     "A vector times a C-contiguous matrix in the same tree, row by row (see the source)."},
    {"sparse_tree", sparse_tree, METH_VARARGS,
     "The same tree over the present terms of sparse segments (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_orderedc",
    "The fixed-order matrix product (protocols/ordered.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__orderedc(void)
{
    return PyModule_Create(&module);
}
