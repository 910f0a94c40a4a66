/*
 * ldpsim.protocols._rngc: the SplitMix64 finaliser of protocols/rng.py in C (optional).
 *
 * ``mix_inplace(buf)`` applies, to every uint64 of a writable C-contiguous buffer,
 *
 *     x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31
 *
 * with wrapping arithmetic: the same bits as numpy's nine passes in ``rng._mix_inplace``, in one
 * pass over the data. ``mix_xor(keys, ctr, out)`` writes out[i, j] = mix(keys[i] ^ ctr[j]) (the
 * draws of ``rng._draw_chunks``: each agent's key against each draw's counter). Where the
 * extension was not built, rng.py does both with numpy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

static PyObject *mix_inplace(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return NULL;
    if (view.len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "mix_inplace: %zd bytes is not a whole number of "
                     "uint64s", view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    char *p = (char *)view.buf;
    Py_ssize_t n = view.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t x;
        memcpy(&x, p + 8 * i, 8);
        x = mix(x);
        memcpy(p + 8 * i, &x, 8);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *mix_xor(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_o, *ctr_o, *out_o;
    if (!PyArg_ParseTuple(args, "OOO", &keys_o, &ctr_o, &out_o))
        return NULL;
    Py_buffer keys, ctr, out;
    if (PyObject_GetBuffer(keys_o, &keys, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(ctr_o, &ctr, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&keys);
        return NULL;
    }
    if (PyObject_GetBuffer(out_o, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&ctr);
        PyBuffer_Release(&keys);
        return NULL;
    }
    Py_ssize_t m = keys.len / 8, n = ctr.len / 8;
    if (keys.len % 8 || ctr.len % 8 || (n > 0 && m > PY_SSIZE_T_MAX / 8 / n)
            || out.len != m * n * 8) {
        PyErr_Format(PyExc_ValueError, "mix_xor: out must hold len(keys) x len(ctr) uint64s "
                     "(%zd and %zd bytes of keys and counters, %zd of out)", keys.len,
                     ctr.len, out.len);
    } else {
        const char *kb = (const char *)keys.buf, *cb = (const char *)ctr.buf;
        char *ob = (char *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            uint64_t k;
            memcpy(&k, kb + 8 * i, 8);
            for (Py_ssize_t j = 0; j < n; j++) {
                uint64_t c, x;
                memcpy(&c, cb + 8 * j, 8);
                x = mix(k ^ c);
                memcpy(ob + 8 * (i * n + j), &x, 8);
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&ctr);
    PyBuffer_Release(&keys);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"mix_xor", mix_xor, METH_VARARGS,
     "mix_xor(keys, ctr, out): out[i, j] = mix(keys[i] ^ ctr[j]) for uint64 buffers."},
    {"mix_inplace", mix_inplace, METH_O,
     "mix_inplace(buf): the SplitMix64 finaliser on every uint64 of a writable buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rngc",
    "The SplitMix64 finaliser of ldpsim's counter-based streams (see protocols/rng.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rngc(void)
{
    return PyModule_Create(&module);
}
