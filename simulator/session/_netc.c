/*
 * ldpsim.simulator.session._netc: a round's arrival times in one pass, and the agents' link
 * qualities (``link_z``, at the end), in C (optional).
 *
 * ``arrival_times(cls, wide, factor, down, up, down_per_byte, up_per_byte, latency2, compute,
 * extra, out)`` writes, for every agent i of a round (simulator/session/network.py,
 * ``completion_times``):
 *
 *     out[i] = ((wire(down[i]) + extra) * down_per_byte[c] + wire(up[i]) * up_per_byte[c]
 *               + latency2[c]) * factor[i] + compute[c]   with c = cls[i]
 *
 * evaluated in exactly numpy's order of operations there (each step one IEEE double
 * operation, no fused multiply-add: built with -ffp-contract=off), so that the compiled and
 * the numpy path give the same bits; ``extra`` is added only when non-zero, the factor (None:
 * 1) and ``compute`` (None: 0) only when given, as numpy does. ``factor`` holds each agent's
 * link factor (a double: exp(spread z), drawn in numpy). ``wire(e)`` is
 * ``network.wire_bytes``: e plus a ZMTP frame header (2 bytes up to 255, else 9) plus 40
 * bytes of TCP/IPv4 headers per 1460-byte segment, 0 for e = 0. ``cls`` holds uint8 (``wide``
 * 0) or uint16 (``wide`` 1) class numbers, ``down``/``up`` int32 envelope sizes. Returns the
 * wire bytes of every query and of every report, summed, and the largest time (-inf: none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline int64_t wire(int64_t e)
{
    if (e <= 0)
        return 0;
    int64_t framed = e + (e > 255 ? 9 : 2);
    return framed + 40 * ((framed + 1459) / 1460);
}

static PyObject *arrival_times(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer cls, factors = {0}, down, up, dpb, upb, lat2, comp = {0}, out;
    PyObject *factors_obj, *comp_obj;
    int wide;
    double extra;
    if (!PyArg_ParseTuple(args, "y*pOy*y*y*y*y*Odw*", &cls, &wide, &factors_obj, &down, &up,
                          &dpb, &upb, &lat2, &comp_obj, &extra, &out))
        return NULL;
    PyObject *result = NULL;
    int has_factor = factors_obj != Py_None, has_comp = comp_obj != Py_None;
    if (has_factor && PyObject_GetBuffer(factors_obj, &factors, PyBUF_SIMPLE) < 0)
        goto release;
    if (has_comp && PyObject_GetBuffer(comp_obj, &comp, PyBUF_SIMPLE) < 0)
        goto release;
    Py_ssize_t n = down.len / 4;
    Py_ssize_t classes = dpb.len / 8;
    if (up.len != down.len || cls.len != n * (wide ? 2 : 1) || out.len < n * 8
        || (has_factor && factors.len != n * 8)
        || upb.len != dpb.len || lat2.len != dpb.len
        || (has_comp && comp.len != dpb.len)) {
        PyErr_SetString(PyExc_ValueError, "arrival_times: arrays of inconsistent lengths");
        goto release;
    }
    {
        const uint8_t *c8 = (const uint8_t *)cls.buf;
        const uint16_t *c16 = (const uint16_t *)cls.buf;
        const double *f = (const double *)factors.buf, *dp = (const double *)dpb.buf;
        const double *upp = (const double *)upb.buf, *l2 = (const double *)lat2.buf;
        const double *cp = (const double *)comp.buf;
        const int32_t *d = (const int32_t *)down.buf, *u = (const int32_t *)up.buf;
        double *o = (double *)out.buf;
        int64_t sum_down = 0, sum_up = 0;
        double top = -INFINITY;
        int bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t c = wide ? c16[i] : c8[i];
            if (c >= classes) {
                bad = 1;
                break;
            }
            int64_t wd = wire(d[i]), wu = wire(u[i]);
            sum_down += wd;
            sum_up += wu;
            double t = (double)wd;
            if (extra != 0.0)
                t += extra;
            t *= dp[c];
            double v = (double)wu;
            v *= upp[c];
            t += v;
            t += l2[c];
            if (has_factor)
                t *= f[i];
            if (has_comp)
                t += cp[c];
            o[i] = t;
            if (t > top)
                top = t;
        }
        Py_END_ALLOW_THREADS
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "arrival_times: a class beyond the tables");
            goto release;
        }
        result = Py_BuildValue("LLd", (long long)sum_down, (long long)sum_up, top);
    }
release:
    PyBuffer_Release(&cls);
    PyBuffer_Release(&down);
    PyBuffer_Release(&up);
    PyBuffer_Release(&dpb);
    PyBuffer_Release(&upb);
    PyBuffer_Release(&lat2);
    PyBuffer_Release(&out);
    if (factors.obj != NULL)
        PyBuffer_Release(&factors);
    if (comp.obj != NULL)
        PyBuffer_Release(&comp);
    return result;
}

/*
 * ``link_z(b, tails)``: each agent's link quality z from its 64-bit draw b, written over b in
 * place (the uint64 array then holds doubles), as simulator/session/links.py's ``link_z``
 * computes it where that takes no logarithm: p = ((b >> 11) & (2^52 - 1) + 0.5) 2^-53, and for
 * p in the central region (|p - 0.5| <= 0.5 - 0.02425) z = q A(r) / B(r) with q = p - 0.5,
 * r = q q (Acklam's coefficients, Horner's rule, each step one IEEE double operation in numpy's
 * order), negated where b's top bit is set. A tail element (p < 0.02425: about 4.85% of them)
 * keeps its draw, and its index goes to ``tails`` (int64, as long as b), for numpy to fill (its
 * logarithm is numpy's), so the two paths give the same bits. Returns the number of tails.
 */
static const double LA[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
static const double LB[6] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01, 1.0};

static PyObject *link_z(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b, tails;
    if (!PyArg_ParseTuple(args, "w*w*", &b, &tails))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = b.len / 8;
    if (b.len % 8 || tails.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "link_z: arrays of inconsistent lengths");
        goto release;
    }
    {
        uint64_t *d = (uint64_t *)b.buf;
        int64_t *t = (int64_t *)tails.buf;
        const double edge = 0.5 - 0.02425;
        Py_ssize_t k = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t bits = d[i];
            double p = (double)(int64_t)((bits >> 11) & ((UINT64_C(1) << 52) - 1));
            p += 0.5;
            p *= 0x1p-53;
            double q = p - 0.5;
            if (fabs(q) > edge) {
                t[k++] = (int64_t)i;
                continue;
            }
            double r = q * q;
            double num = LA[0], den = LB[0];
            for (int j = 1; j < 6; j++) {
                num *= r;
                num += LA[j];
                den *= r;
                den += LB[j];
            }
            num *= q;
            num /= den;
            double z = (bits >> 63) ? -num : num;
            memcpy(&d[i], &z, 8);
        }
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(k);
    }
release:
    PyBuffer_Release(&b);
    PyBuffer_Release(&tails);
    return result;
}

static PyMethodDef methods[] = {
    {"link_z", link_z, METH_VARARGS,
     "Each draw's link quality z outside the tails; tails NaN (see the module's source)."},
    {"arrival_times", arrival_times, METH_VARARGS,
     "A round's arrival times and its wire bytes each way (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_netc",
    "A round's arrival times in one pass and the agents' link qualities "
    "(simulator/session/network.py, links.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__netc(void)
{
    return PyModule_Create(&module);
}
