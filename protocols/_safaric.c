/*
 * ldpsim.protocols._safaric: the pass over all d! rankings of CALM's maximum-entropy fit
 * (protocols/safari/calm.py, ``maxent_rankings``) in C (optional).
 *
 * ``ipf_pass(pos, d, f, ratio, ra, rb, cur, ca, cb)`` walks the rankings k = 0, 1, ... once, in
 * order: where ``ratio`` is not None it first scales f[k] *= ratio[pos[k, ra] d + pos[k, rb]]
 * (the previous pair's fit), then, where ``cur`` is not None, adds f[k] to
 * cur[pos[k, ca] d + pos[k, cb]] (the next pair's marginal). Each product and each sum is the
 * one numpy's ``f *= ratio[idx]`` and ``np.bincount(idx, weights=f)`` make, in the same order
 * (bincount adds the weights in index order), so the results are the same bits; built without
 * fused multiply-add (setup.py's extra_compile_args). ``marginals`` makes the first- and
 * second-order marginals of a weight vector over the rankings (protocols/safari/metrics.py,
 * ``distribution_marginals``) in one pass, each cell's sum in numpy's order; ``ipf_triple`` fits
 * a 3-D marginal to three 2-D ones (``calm.ipf_triple``) with numpy's products, quotients and
 * sums (its sum over a contiguous axis is numpy's pairwise sum: ``sum_contiguous``); ``fwht`` is
 * the Hadamard oracle's transform (protocols/mechanisms/hadamard.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

static void pass(const int8_t *pos, Py_ssize_t d, Py_ssize_t n, double *f, const double *ratio,
                 Py_ssize_t ra, Py_ssize_t rb, double *cur, Py_ssize_t ca, Py_ssize_t cb)
{
    if (ratio != NULL && cur != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            const int8_t *p = pos + k * d;
            double v = f[k] * ratio[p[ra] * d + p[rb]];
            f[k] = v;
            cur[p[ca] * d + p[cb]] += v;
        }
    } else if (ratio != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            const int8_t *p = pos + k * d;
            f[k] *= ratio[p[ra] * d + p[rb]];
        }
    } else if (cur != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            const int8_t *p = pos + k * d;
            cur[p[ca] * d + p[cb]] += f[k];
        }
    }
}

static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t itemsize)
{
    if (o == Py_None) {
        b->obj = NULL;
        b->buf = NULL;
        b->len = 0;
        return 0;
    }
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->len % itemsize || ((uintptr_t)b->buf) % itemsize) {
        PyErr_SetString(PyExc_ValueError, "ipf_pass: a buffer is not an aligned array of its "
                        "item type");
        PyBuffer_Release(b);
        b->obj = NULL;
        return -1;
    }
    return 0;
}

static void release(Py_buffer *b)
{
    if (b->obj != NULL)
        PyBuffer_Release(b);
}

static PyObject *ipf_pass(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *pos_o, *f_o, *ratio_o, *cur_o;
    Py_ssize_t d, ra, rb, ca, cb;
    if (!PyArg_ParseTuple(args, "OnOOnnOnn", &pos_o, &d, &f_o, &ratio_o, &ra, &rb, &cur_o, &ca,
                          &cb))
        return NULL;
    if (d < 1 || d > 127 || ra < 0 || rb < 0 || ca < 0 || cb < 0 || ra >= d || rb >= d
            || ca >= d || cb >= d) {
        PyErr_SetString(PyExc_ValueError, "ipf_pass: d in [1, 127] and columns in [0, d)");
        return NULL;
    }
    Py_buffer pos, f, ratio, cur;
    int got = 0;
    if (get(pos_o, &pos, 0, 1) == 0) {
        got = 1;
        if (get(f_o, &f, 1, 8) == 0) {
            got = 2;
            if (get(ratio_o, &ratio, 0, 8) == 0) {
                got = 3;
                if (get(cur_o, &cur, 1, 8) == 0)
                    got = 4;
            }
        }
    }
    if (got == 4) {
        Py_ssize_t n = f.len / 8, cells = d * d * 8;
        if (pos_o == Py_None || f_o == Py_None || pos.len != n * d
                || (ratio.obj != NULL && ratio.len != cells)
                || (cur.obj != NULL && cur.len != cells)) {
            PyErr_SetString(PyExc_ValueError, "ipf_pass: pos must be (len(f), d) int8, ratio "
                            "and cur d * d float64");
        } else {
            Py_BEGIN_ALLOW_THREADS
            pass((const int8_t *)pos.buf, d, n, (double *)f.buf, (const double *)ratio.buf, ra,
                 rb, (double *)cur.buf, ca, cb);
            Py_END_ALLOW_THREADS
        }
    }
    if (got >= 4)
        release(&cur);
    if (got >= 3)
        release(&ratio);
    if (got >= 2)
        release(&f);
    if (got >= 1)
        release(&pos);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* The first- and second-order marginals of a weight vector over the rankings: for k = 0, 1, ...
 * in order, q1[i d + pos[k, i]] += f[k] for every item i and q2[(j d + pos[k, a_j]) d +
 * pos[k, b_j]] += f[k] for every pair j = (a_j, b_j): each cell's sum is the one numpy's
 * ``np.bincount(idx, weights=f)`` makes, in the same order. */
static void marg(const int8_t *pos, Py_ssize_t d, Py_ssize_t n, const double *f,
                 const int64_t *pairs, Py_ssize_t np_, double *q1, double *q2)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        const int8_t *p = pos + k * d;
        double v = f[k];
        for (Py_ssize_t i = 0; i < d; i++)
            q1[i * d + p[i]] += v;
        for (Py_ssize_t j = 0; j < np_; j++)
            q2[(j * d + p[pairs[2 * j]]) * d + p[pairs[2 * j + 1]]] += v;
    }
}

static PyObject *marginals(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *pos_o, *f_o, *pairs_o, *q1_o, *q2_o;
    Py_ssize_t d;
    if (!PyArg_ParseTuple(args, "OnOOOO", &pos_o, &d, &f_o, &pairs_o, &q1_o, &q2_o))
        return NULL;
    if (d < 1 || d > 127) {
        PyErr_SetString(PyExc_ValueError, "marginals: d in [1, 127]");
        return NULL;
    }
    Py_buffer b[5];
    PyObject *objs[5] = {pos_o, f_o, pairs_o, q1_o, q2_o};
    Py_ssize_t size[5] = {1, 8, 8, 8, 8};
    int got = 0;
    for (; got < 5; got++)
        if (objs[got] == Py_None || get(objs[got], &b[got], got >= 3, size[got]) < 0)
            break;
    if (got == 5) {
        Py_ssize_t n = b[1].len / 8, np_ = b[2].len / 16;
        int ok = b[0].len == n * d && b[2].len % 16 == 0 && b[3].len == d * d * 8
                 && b[4].len == np_ * d * d * 8;
        const int64_t *pr = (const int64_t *)b[2].buf;
        for (Py_ssize_t j = 0; ok && j < 2 * np_; j++)
            ok = pr[j] >= 0 && pr[j] < d;
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "marginals: pos (len(f), d) int8, pairs (P, 2) "
                            "int64 in [0, d), q1 d * d and q2 P * d * d float64");
        } else {
            Py_BEGIN_ALLOW_THREADS
            marg((const int8_t *)b[0].buf, d, n, (const double *)b[1].buf, pr, np_,
                 (double *)b[3].buf, (double *)b[4].buf);
            Py_END_ALLOW_THREADS
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "marginals: None for an array");
    }
    for (int i = 0; i < got; i++)
        release(&b[i]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* numpy's sum of n contiguous float64 (``add.reduce`` over a contiguous axis, as numpy 2 makes
 * it): 0 + the pairwise sum, which below 8 terms adds them in order and from 8 to 128 adds
 * eight running sums, then ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in
 * order. n <= 127 here (d <= 127). */
static double sum_contiguous(const double *a, Py_ssize_t n)
{
    double res;
    if (n < 8) {
        res = 0.;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i];
    } else {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
    }
    return 0. + res;
}

/* The three marginals' sums of a (d, d, d) table, as numpy's T.sum(axis=2) (contiguous),
 * T.sum(axis=1) and T.sum(axis=0) (terms added in order along the reduced axis). */
static void sum_axis(const double *t, Py_ssize_t d, int axis, double *out)
{
    Py_ssize_t dd = d * d;
    if (axis == 2) {
        for (Py_ssize_t i = 0; i < dd; i++)
            out[i] = sum_contiguous(t + i * d, d);
    } else if (axis == 1) {
        for (Py_ssize_t a = 0; a < d; a++)
            for (Py_ssize_t c = 0; c < d; c++) {
                double r = 0.;
                for (Py_ssize_t b = 0; b < d; b++)
                    r += t[a * dd + b * d + c];
                out[a * d + c] = r;
            }
    } else {
        for (Py_ssize_t i = 0; i < dd; i++) {
            double r = 0.;
            for (Py_ssize_t a = 0; a < d; a++)
                r += t[a * dd + i];
            out[i] = r;
        }
    }
}

/* np.where(cur > 0, target / cur, 0.0) in place of cur */
static void fit(double *cur, const double *target, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        cur[i] = cur[i] > 0 ? target[i] / cur[i] : 0.0;
}

/* max |s - p| as numpy's np.abs(s - p).max(): a NaN wins */
static double max_abs_diff(const double *s, const double *p, Py_ssize_t n)
{
    double m = fabs(s[0] - p[0]);
    for (Py_ssize_t i = 1; i < n; i++) {
        double v = fabs(s[i] - p[i]);
        if (isnan(m))
            break;
        if (isnan(v) || v > m)
            m = v;
    }
    return m;
}

/* CALM's iterative proportional fitting of a (d, d, d) table to three 2-D marginals, each step
 * as protocols/safari/calm.py's ``ipf_triple`` makes it in numpy (the same products, quotients
 * and sums in the same order); ``work`` holds 2 d^2 doubles. */
static void ipf3(double *t, const double *pab, const double *pac, const double *pbc,
                 Py_ssize_t d, Py_ssize_t iters, double tol, double *work)
{
    Py_ssize_t dd = d * d;
    double *cur = work, *cur2 = work + dd;
    for (Py_ssize_t it = 0; it < iters; it++) {
        sum_axis(t, d, 2, cur);
        fit(cur, pab, dd);
        for (Py_ssize_t i = 0; i < dd; i++)
            for (Py_ssize_t c = 0; c < d; c++)
                t[i * d + c] = t[i * d + c] * cur[i];
        sum_axis(t, d, 1, cur);
        fit(cur, pac, dd);
        for (Py_ssize_t a = 0; a < d; a++)
            for (Py_ssize_t b = 0; b < d; b++)
                for (Py_ssize_t c = 0; c < d; c++)
                    t[a * dd + b * d + c] = t[a * dd + b * d + c] * cur[a * d + c];
        sum_axis(t, d, 0, cur);
        fit(cur, pbc, dd);
        for (Py_ssize_t a = 0; a < d; a++)
            for (Py_ssize_t i = 0; i < dd; i++)
                t[a * dd + i] = t[a * dd + i] * cur[i];
        sum_axis(t, d, 2, cur);
        sum_axis(t, d, 1, cur2);
        double m1 = max_abs_diff(cur, pab, dd), m2 = max_abs_diff(cur2, pac, dd);
        double m = m2 > m1 ? m2 : m1; /* Python's max(m1, m2) */
        if (m < tol)
            break;
    }
}

static PyObject *ipf_triple(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[4];
    Py_ssize_t d, iters;
    double tol;
    if (!PyArg_ParseTuple(args, "OOOOnnd", &objs[0], &objs[1], &objs[2], &objs[3], &d, &iters,
                          &tol))
        return NULL;
    if (d < 1 || d > 127) {
        PyErr_SetString(PyExc_ValueError, "ipf_triple: d in [1, 127]");
        return NULL;
    }
    Py_buffer b[4];
    int got = 0;
    for (; got < 4; got++)
        if (objs[got] == Py_None || get(objs[got], &b[got], got == 0, 8) < 0)
            break;
    double *work = NULL;
    if (got == 4) {
        Py_ssize_t dd = d * d * 8;
        if (b[0].len != dd * d || b[1].len != dd || b[2].len != dd || b[3].len != dd) {
            PyErr_SetString(PyExc_ValueError, "ipf_triple: t (d, d, d) and three (d, d) float64");
        } else if ((work = PyMem_Malloc((size_t)dd * 2)) == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            ipf3((double *)b[0].buf, (const double *)b[1].buf, (const double *)b[2].buf,
                 (const double *)b[3].buf, d, iters, tol, work);
            Py_END_ALLOW_THREADS
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "ipf_triple: None for an array");
    }
    PyMem_Free(work);
    for (int i = 0; i < got; i++)
        release(&b[i]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* The unnormalised fast Walsh-Hadamard transform (Sylvester order) of x, in place: at each
 * level h = 1, 2, 4, ... every pair (x[j], x[j + h]) of a block of 2h becomes (sum, difference),
 * the sums and differences protocols/mechanisms/hadamard.py's numpy ``fwht`` makes. The levels
 * below FWHT_BLOCK run block by block (in cache); a value's sums are the same in any order of
 * the independent pairs. */
#define FWHT_BLOCK 4096
static void fwht_levels(double *x, Py_ssize_t n, Py_ssize_t h0, Py_ssize_t h1)
{
    for (Py_ssize_t h = h0; h < h1; h *= 2)
        for (Py_ssize_t i = 0; i < n; i += 2 * h)
            for (Py_ssize_t j = i; j < i + h; j++) {
                double a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

static PyObject *fwht(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *x_o;
    if (!PyArg_ParseTuple(args, "O", &x_o))
        return NULL;
    Py_buffer x;
    if (x_o == Py_None || get(x_o, &x, 1, 8) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "fwht: None for an array");
        return NULL;
    }
    Py_ssize_t n = x.len / 8;
    if (n & (n - 1)) {
        PyErr_Format(PyExc_ValueError, "fwht: the length must be a power of two, got %zd", n);
    } else {
        double *b = (double *)x.buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t blk = n < FWHT_BLOCK ? n : FWHT_BLOCK;
        for (Py_ssize_t s = 0; s < n; s += blk)
            fwht_levels(b + s, blk, 1, blk);
        fwht_levels(b, n, blk, n);
        Py_END_ALLOW_THREADS
    }
    release(&x);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"ipf_pass", ipf_pass, METH_VARARGS,
     "ipf_pass(pos, d, f, ratio, ra, rb, cur, ca, cb): f[k] *= ratio[pos[k, ra] d + pos[k, rb]] "
     "(ratio not None), then cur[pos[k, ca] d + pos[k, cb]] += f[k] (cur not None), k in order."},
    {"marginals", marginals, METH_VARARGS,
     "marginals(pos, d, f, pairs, q1, q2): q1[i, pos[k, i]] += f[k] and q2[j, pos[k, a_j], "
     "pos[k, b_j]] += f[k] for k in order (q1, q2 zeroed by the caller)."},
    {"ipf_triple", ipf_triple, METH_VARARGS,
     "ipf_triple(t, p_ab, p_ac, p_bc, d, iters, tol): CALM's IPF sweeps of the (d, d, d) table t "
     "in place, as calm.ipf_triple makes them in numpy."},
    {"fwht", fwht, METH_VARARGS,
     "fwht(x): the unnormalised fast Walsh-Hadamard transform of the float64 power-of-two "
     "vector x, in place, as hadamard.fwht makes it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_safaric",
    "The maximum-entropy pass over all rankings of ldpsim's CALM (see protocols/safari/calm.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__safaric(void)
{
    return PyModule_Create(&module);
}
