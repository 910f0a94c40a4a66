/*
 * ldpsim.simulator._wirec: the compiled batch codec of the wire format (optional).
 *
 * The same two promises as the numpy batch codec (simulator/wire_numpy.py, whose docstring
 * describes the layout), for a batch of envelopes [1, kind, run, round, agent, payload]:
 *
 *   encode  writes exactly what msgpack-python writes for each envelope, back to back: every
 *           int in its shortest form (non-negative ints unsigned, negative ones signed), every
 *           float as a float64, the payload a fixed-length array (or nil);
 *   read    accepts only a frame that is exactly such a canonical batch for the expected
 *           agents (a prefix of them, in order), reading each envelope's fields as msgpack
 *           would, and returns -1 for anything else: the caller then reads the frame with the
 *           reference reader, which validates every envelope.
 *
 * It uses no numpy C API: arrays come in through the buffer protocol (C-contiguous int64,
 * uint64 or float64 buffers), and every read of the frame is bounds-checked. The frame is
 * untrusted input (an agent writes it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { MODE_NIL = 0, MODE_INT = 1, MODE_UINT = 2, MODE_FLOAT = 3 };

static inline void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
}

static inline uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = (v << 8) | p[i];
    return v;
}

/* a non-negative int in msgpack-python's shortest form; returns its length */
static inline Py_ssize_t put_uint(uint8_t *p, uint64_t v)
{
    if (v < 0x80) { p[0] = (uint8_t)v; return 1; }
    if (v < 0x100) { p[0] = 0xcc; p[1] = (uint8_t)v; return 2; }
    if (v < 0x10000) { p[0] = 0xcd; put_be(p + 1, v, 2); return 3; }
    if (v < 0x100000000ULL) { p[0] = 0xce; put_be(p + 1, v, 4); return 5; }
    p[0] = 0xcf; put_be(p + 1, v, 8); return 9;
}

/* an int64 in msgpack-python's shortest form: unsigned forms for v >= 0, signed below */
static inline Py_ssize_t put_int(uint8_t *p, int64_t v)
{
    if (v >= 0) return put_uint(p, (uint64_t)v);
    if (v >= -32) { p[0] = (uint8_t)(v & 0xff); return 1; }
    if (v >= -128) { p[0] = 0xd0; p[1] = (uint8_t)(v & 0xff); return 2; }
    if (v >= -32768) { p[0] = 0xd1; put_be(p + 1, (uint64_t)v, 2); return 3; }
    if (v >= -2147483648LL) { p[0] = 0xd2; put_be(p + 1, (uint64_t)v, 4); return 5; }
    p[0] = 0xd3; put_be(p + 1, (uint64_t)v, 8); return 9;
}

/* the msgpack array header for k items; returns its length */
static inline Py_ssize_t put_array_header(uint8_t *p, Py_ssize_t k)
{
    if (k < 16) { p[0] = (uint8_t)(0x90 | k); return 1; }
    if (k < 65536) { p[0] = 0xdc; put_be(p + 1, (uint64_t)k, 2); return 3; }
    p[0] = 0xdd; put_be(p + 1, (uint64_t)k, 4); return 5;
}

/*
 * Read the int at p (at most `left` bytes) if it is in its shortest encoding and fits an
 * int64: its length, or 0 (no int, not shortest, beyond int64, or past the end).
 */
static inline Py_ssize_t get_int(const uint8_t *p, Py_ssize_t left, int64_t *out)
{
    if (left < 1) return 0;
    uint8_t m = p[0];
    if (m < 0x80) { *out = m; return 1; }
    if (m >= 0xe0) { *out = (int64_t)m - 256; return 1; }
    int64_t v;
    Py_ssize_t w;
    switch (m) {
    case 0xcc: w = 2; break;
    case 0xcd: w = 3; break;
    case 0xce: w = 5; break;
    case 0xcf: w = 9; break;
    case 0xd0: w = 2; break;
    case 0xd1: w = 3; break;
    case 0xd2: w = 5; break;
    case 0xd3: w = 9; break;
    default: return 0;
    }
    if (left < w) return 0;
    uint64_t u = get_be(p + 1, (int)(w - 1));
    switch (m) {
    case 0xcc: if (u < 0x80) return 0; v = (int64_t)u; break;
    case 0xcd: if (u < 0x100) return 0; v = (int64_t)u; break;
    case 0xce: if (u < 0x10000) return 0; v = (int64_t)u; break;
    case 0xcf: if (u < 0x100000000ULL || u > (uint64_t)INT64_MAX) return 0; v = (int64_t)u; break;
    case 0xd0: v = (int8_t)u; if (v >= -32) return 0; break;
    case 0xd1: v = (int16_t)u; if (v >= -128) return 0; break;
    case 0xd2: v = (int32_t)u; if (v >= -32768) return 0; break;
    default: v = (int64_t)u; if (v >= -2147483648LL) return 0; break;
    }
    *out = v;
    return w;
}

/* a buffer of at least `need` bytes, C-contiguous, or an exception */
static int get_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t need,
                      const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->len < need) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, need %zd", name, view->len, need);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(encode_doc,
"encode(head, agents, values, k, mode, sizes) -> bytes\n\n"
"The frame of envelopes head + agent + payload for n agents (``agents``: n int64), each payload\n"
"nil (mode 0) or a k-array of ``values`` (n * k int64, uint64 or float64 for modes 1, 2, 3), as\n"
"msgpack-python writes them; each envelope's size goes to ``sizes`` (n int64, writable).");

static uint8_t *scratch = NULL;
static Py_ssize_t scratch_size = 0;

static PyObject *encode(PyObject *self, PyObject *args)
{
    PyObject *head_o, *agents_o, *values_o, *sizes_o;
    Py_ssize_t k;
    int mode;
    if (!PyArg_ParseTuple(args, "OOOniO", &head_o, &agents_o, &values_o, &k, &mode, &sizes_o))
        return NULL;
    if (mode < MODE_NIL || mode > MODE_FLOAT || k < 0 || k > (1LL << 31)) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0..3 and k in 0..2^31");
        return NULL;
    }
    Py_buffer head, agents, values = {0}, sizes;
    if (get_buffer(head_o, &head, 0, 0, "head") < 0)
        return NULL;
    if (get_buffer(agents_o, &agents, 0, 0, "agents") < 0) {
        PyBuffer_Release(&head);
        return NULL;
    }
    Py_ssize_t n = agents.len / 8;
    PyObject *out = NULL;
    int have_values = 0;
    if (get_buffer(sizes_o, &sizes, 1, n * 8, "sizes") < 0)
        goto done_agents;
    if (mode != MODE_NIL) {
        if (k > 0 && n > PY_SSIZE_T_MAX / 8 / k) {
            PyErr_NoMemory();
            goto done_sizes;
        }
        if (get_buffer(values_o, &values, 0, n * k * 8, "values") < 0)
            goto done_sizes;
        have_values = 1;
    }
    /* at most: head, a 9-byte agent id, a 5-byte header, 9 bytes per value (or a nil) */
    Py_ssize_t per_value = 9, body = mode == MODE_NIL ? 1 : 5;
    if (mode != MODE_NIL && k > (PY_SSIZE_T_MAX - head.len - 9 - body) / per_value) {
        PyErr_NoMemory();
        goto done_values;
    }
    Py_ssize_t most = head.len + 9 + body + (mode == MODE_NIL ? 0 : per_value * k);
    if (n > 0 && most > PY_SSIZE_T_MAX / n) {
        PyErr_NoMemory();
        goto done_values;
    }
    /* written into a scratch buffer kept between calls (the GIL is held throughout), then
       copied into a bytes object of the exact size: a fresh worst-case-sized buffer per
       batch would pay its page faults every time */
    if (most * n > scratch_size) {
        uint8_t *grown = PyMem_RawRealloc(scratch, most * n);
        if (grown == NULL) {
            PyErr_NoMemory();
            goto done_values;
        }
        scratch = grown;
        scratch_size = most * n;
    }
    {
        uint8_t *p = scratch, *start = p;
        const uint8_t *hb = (const uint8_t *)head.buf;
        const char *ab = (const char *)agents.buf, *vb = (const char *)values.buf;
        char *sb = (char *)sizes.buf;
        uint8_t hdr[5];
        Py_ssize_t hl = mode == MODE_NIL ? 0 : put_array_header(hdr, k), hlen = head.len;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint8_t *e = p;
            int64_t a;
            memcpy(&a, ab + 8 * i, 8);
            memcpy(p, hb, hlen);
            p += hlen;
            p += put_int(p, a);
            if (mode == MODE_NIL) {
                *p++ = 0xc0;
            } else {
                memcpy(p, hdr, hl);
                p += hl;
                const char *row = vb + 8 * k * i;
                for (Py_ssize_t j = 0; j < k; j++) {
                    uint64_t u;
                    memcpy(&u, row + 8 * j, 8);
                    if (mode == MODE_INT) {
                        p += put_int(p, (int64_t)u);
                    } else if (mode == MODE_UINT) {
                        p += put_uint(p, u);
                    } else {
                        *p = 0xcb;
                        put_be(p + 1, u, 8);
                        p += 9;
                    }
                }
            }
            int64_t size = (int64_t)(p - e);
            memcpy(sb + 8 * i, &size, 8);
        }
        out = PyBytes_FromStringAndSize((const char *)start, p - start);
    }
done_values:
    if (have_values)
        PyBuffer_Release(&values);
done_sizes:
    PyBuffer_Release(&sizes);
done_agents:
    PyBuffer_Release(&agents);
    PyBuffer_Release(&head);
    return out;
}

PyDoc_STRVAR(read_doc,
"read(frame, head, agents, k, is_float, values, sizes) -> int\n\n"
"j >= 1 if ``frame`` is exactly the canonical batch of envelopes head + agents[i] + payload\n"
"for i < j (``agents``: n int64), each payload nil (k = -1) or a k-array of shortest-form\n"
"ints that fit an int64 (is_float 0) or of float64s (is_float 1); their values go to\n"
"``values`` (n * k int64 or float64, writable) and their sizes to ``sizes`` (n int64).\n"
"Else -1: the frame is not such a batch and nothing in it is trusted.");

static PyObject *read_batch(PyObject *self, PyObject *args)
{
    PyObject *frame_o, *head_o, *agents_o, *values_o, *sizes_o;
    Py_ssize_t k;
    int is_float;
    if (!PyArg_ParseTuple(args, "OOOnpOO", &frame_o, &head_o, &agents_o, &k, &is_float,
                          &values_o, &sizes_o))
        return NULL;
    if (k < -1 || k > (1LL << 31)) {
        PyErr_SetString(PyExc_ValueError, "k must be -1..2^31");
        return NULL;
    }
    Py_buffer frame, head, agents, values = {0}, sizes;
    Py_ssize_t got = -1, kk = k < 0 ? 0 : k;
    if (get_buffer(frame_o, &frame, 0, 0, "frame") < 0)
        return NULL;
    if (get_buffer(head_o, &head, 0, 0, "head") < 0)
        goto done_frame;
    if (get_buffer(agents_o, &agents, 0, 0, "agents") < 0)
        goto done_head;
    Py_ssize_t n = agents.len / 8;
    if (kk > 0 && n > PY_SSIZE_T_MAX / 8 / kk) {
        PyErr_NoMemory();
        goto done_agents;
    }
    if (get_buffer(values_o, &values, 1, n * kk * 8, "values") < 0)
        goto done_agents;
    if (get_buffer(sizes_o, &sizes, 1, n * 8, "sizes") < 0)
        goto done_values;
    {
        const uint8_t *f = (const uint8_t *)frame.buf, *hb = (const uint8_t *)head.buf;
        const char *ab = (const char *)agents.buf;
        char *vb = (char *)values.buf, *sb = (char *)sizes.buf;
        Py_ssize_t size = frame.len, hlen = head.len, pos = 0, i = 0;
        uint8_t hdr[5];
        Py_ssize_t hl = k < 0 ? 0 : put_array_header(hdr, k);
        int bad = 0;
        Py_BEGIN_ALLOW_THREADS
        while (pos < size && i < n) {
            Py_ssize_t start = pos, w;
            int64_t a, v;
            if (size - pos < hlen || memcmp(f + pos, hb, hlen) != 0) { bad = 1; break; }
            pos += hlen;
            memcpy(&a, ab + 8 * i, 8);
            w = get_int(f + pos, size - pos, &v);
            if (w == 0 || v != a) { bad = 1; break; }
            pos += w;
            if (k < 0) {
                if (pos >= size || f[pos] != 0xc0) { bad = 1; break; }
                pos += 1;
            } else {
                if (size - pos < hl || memcmp(f + pos, hdr, hl) != 0) { bad = 1; break; }
                pos += hl;
                char *row = vb + 8 * kk * i;
                for (Py_ssize_t j = 0; j < kk; j++) {
                    if (is_float) {
                        if (size - pos < 9 || f[pos] != 0xcb) { bad = 1; break; }
                        uint64_t u = get_be(f + pos + 1, 8);
                        memcpy(row + 8 * j, &u, 8);
                        pos += 9;
                    } else {
                        w = get_int(f + pos, size - pos, &v);
                        if (w == 0) { bad = 1; break; }
                        memcpy(row + 8 * j, &v, 8);
                        pos += w;
                    }
                }
                if (bad) break;
            }
            int64_t s = (int64_t)(pos - start);
            memcpy(sb + 8 * i, &s, 8);
            i++;
        }
        Py_END_ALLOW_THREADS
        got = (bad || i == 0 || pos != size) ? -1 : i;
    }
    PyBuffer_Release(&sizes);
done_values:
    PyBuffer_Release(&values);
done_agents:
    PyBuffer_Release(&agents);
done_head:
    PyBuffer_Release(&head);
done_frame:
    PyBuffer_Release(&frame);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(got);
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {"read", read_batch, METH_VARARGS, read_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wirec",
    "The compiled batch codec of ldpsim's wire format (see simulator/wire_numpy.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__wirec(void)
{
    return PyModule_Create(&module);
}
