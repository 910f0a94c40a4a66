/*
 * ldpsim.simulator.session._netc: a round's arrival times in one pass, and the agents' link
 * factors (``link_factors``, at the end), in C (optional).
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
 * ``link_factors(b, cls, wide, spread, tails)``: each agent's link factor exp(spread[c] z),
 * c = cls[i] (uint8, or uint16 with ``wide``), z its link quality from its 64-bit draw b, written
 * over b in place (the uint64 array then holds doubles), as simulator/session/links.py's
 * ``link_factors`` computes it where that takes no logarithm:
 *
 *   p = ((b >> 11) & (2^52 - 1) + 0.5) 2^-53, and for p in the central region (|p - 0.5| <=
 *   0.5 - 0.02425) z = q A(r) / B(r) with q = p - 0.5, r = q q (Acklam's coefficients), negated
 *   where b's top bit is set; x = z spread[c]; exp(x) = 2^k e^r with k = rint(x / ln2),
 *   r = (x - k ln2_hi) - k ln2_lo and e^r by its Taylor series to 1/13!.
 *
 * Each polynomial by Horner's rule, each step one IEEE double operation in numpy's order (no
 * fused multiply-add: built with -ffp-contract=off), the scaling exact. A tail element (p <
 * 0.02425: about 4.85% of them) keeps its draw and its index goes to ``tails`` (int64, as long
 * as b), for numpy to fill (with links.py's ``log``), so the two paths give the same bits.
 * Returns the number of tails.
 */
static const double LA[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
static const double LB[6] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01, 1.0};
/* 1/k! for k = 13 .. 0 (links.py's _EXP_C, the same doubles) */
static const double EXPC[14] = {0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29,
                                0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22,
                                0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16,
                                0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
                                0x1.1111111111111p-7, 0x1.5555555555555p-5,
                                0x1.5555555555555p-3, 0x1.0p-1, 0x1.0p+0, 0x1.0p+0};
static const double LN2_HI = 0x1.62e42fee00000p-1, LN2_LO = 0x1.a39ef35793c76p-33;
static const double INV_LN2 = 0x1.71547652b82fep+0;

/* e^x as links.py's ``exp`` (|x| < 700): k the nearest integer to x / ln2, ties to even (as
 * numpy's rint: adding and taking away 1.5 2^52 rounds so, exactly, for |x / ln2| < 2^51), the
 * scaling by 2^k exact (as numpy's ldexp) */
static inline double exp_fixed(double x)
{
    double k = x * INV_LN2;
    k += 0x1.8p52;
    k -= 0x1.8p52;
    double r = x - k * LN2_HI;
    r -= k * LN2_LO;
    double e = EXPC[0];
    for (int j = 1; j < 14; j++) {
        e *= r;
        e += EXPC[j];
    }
    uint64_t scale_bits = (uint64_t)((int64_t)k + 1023) << 52;
    double scale;
    memcpy(&scale, &scale_bits, 8);
    return e * scale;
}

static PyObject *link_factors(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b, cls, spread, tails;
    int wide;
    if (!PyArg_ParseTuple(args, "w*y*py*w*", &b, &cls, &wide, &spread, &tails))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = b.len / 8, classes = spread.len / 8;
    if (b.len % 8 || tails.len != n * 8 || cls.len != n * (wide ? 2 : 1)) {
        PyErr_SetString(PyExc_ValueError, "link_factors: arrays of inconsistent lengths");
        goto release;
    }
    {
        uint64_t *d = (uint64_t *)b.buf;
        const uint8_t *c8 = (const uint8_t *)cls.buf;
        const uint16_t *c16 = (const uint16_t *)cls.buf;
        const double *sp = (const double *)spread.buf;
        int64_t *t = (int64_t *)tails.buf;
        const double edge = 0.5 - 0.02425;
        Py_ssize_t k = 0;
        int bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t c = wide ? c16[i] : c8[i];
            if (c >= classes) {
                bad = 1;
                break;
            }
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
            z *= sp[c];
            double f = exp_fixed(z);
            memcpy(&d[i], &f, 8);
        }
        Py_END_ALLOW_THREADS
        if (bad)
            PyErr_SetString(PyExc_ValueError, "link_factors: a class beyond the spreads");
        else
            result = PyLong_FromSsize_t(k);
    }
release:
    PyBuffer_Release(&b);
    PyBuffer_Release(&cls);
    PyBuffer_Release(&spread);
    PyBuffer_Release(&tails);
    return result;
}

static PyMethodDef methods[] = {
    {"link_factors", link_factors, METH_VARARGS,
     "Each agent's link factor outside the tails, over its draw (see the module's source)."},
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
