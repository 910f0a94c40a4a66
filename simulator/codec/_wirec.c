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

#if defined(__GNUC__) || defined(__clang__)
#define BSWAP16(x) __builtin_bswap16(x)
#define BSWAP32(x) __builtin_bswap32(x)
#define BSWAP64(x) __builtin_bswap64(x)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#else
static inline uint16_t BSWAP16(uint16_t x) { return (uint16_t)((x >> 8) | (x << 8)); }
static inline uint32_t BSWAP32(uint32_t x)
{
    return ((x >> 24) & 0xff) | ((x >> 8) & 0xff00) | ((x << 8) & 0xff0000) | (x << 24);
}
static inline uint64_t BSWAP64(uint64_t x)
{
    return ((uint64_t)BSWAP32((uint32_t)x) << 32) | BSWAP32((uint32_t)(x >> 32));
}
#define LIKELY(x) (x)
#endif

static inline int little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* the low `bytes` (2, 4 or 8) bytes of v, big-endian, at p */
static inline void put_be(uint8_t *p, uint64_t v, int bytes)
{
    if (!little_endian()) {
        for (int i = bytes - 1; i >= 0; i--) {
            p[i] = (uint8_t)(v & 0xff);
            v >>= 8;
        }
        return;
    }
    if (bytes == 2) { uint16_t x = BSWAP16((uint16_t)v); memcpy(p, &x, 2); }
    else if (bytes == 4) { uint32_t x = BSWAP32((uint32_t)v); memcpy(p, &x, 4); }
    else { uint64_t x = BSWAP64(v); memcpy(p, &x, 8); }
}

/* the big-endian int of `bytes` (1, 2, 4 or 8) bytes at p */
static inline uint64_t get_be(const uint8_t *p, int bytes)
{
    if (!little_endian() || (bytes != 2 && bytes != 4 && bytes != 8)) {
        uint64_t v = 0;
        for (int i = 0; i < bytes; i++)
            v = (v << 8) | p[i];
        return v;
    }
    if (bytes == 2) { uint16_t x; memcpy(&x, p, 2); return BSWAP16(x); }
    if (bytes == 4) { uint32_t x; memcpy(&x, p, 4); return BSWAP32(x); }
    uint64_t x;
    memcpy(&x, p, 8);
    return BSWAP64(x);
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

enum { SLACK = 16 };

/* The envelopes of n agents at p (see encode); returns their total length. With `mode` a
   constant at each call, the compiler makes one loop per mode. A head of at most 16 bytes is
   copied as 16 (the scratch buffer has SLACK bytes beyond the envelopes' room). */
static inline Py_ssize_t encode_rows(uint8_t *p, const uint8_t *hb, Py_ssize_t hlen,
                                     const char *ab, const char *vb, char *sb, Py_ssize_t n,
                                     Py_ssize_t k, const int mode, const uint8_t *hdr,
                                     Py_ssize_t hl)
{
    uint8_t *start = p, hpad[16] = {0};
    int short_head = hlen <= 16;
    if (short_head)
        memcpy(hpad, hb, hlen);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t *e = p;
        int64_t a;
        memcpy(&a, ab + 8 * i, 8);
        if (LIKELY(short_head))
            memcpy(p, hpad, 16);
        else
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
    return p - start;
}

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
    if (most * n + SLACK > scratch_size) {  /* SLACK: a head is copied 16 bytes at a time */
        uint8_t *grown = PyMem_RawRealloc(scratch, most * n + SLACK);
        if (grown == NULL) {
            PyErr_NoMemory();
            goto done_values;
        }
        scratch = grown;
        scratch_size = most * n + SLACK;
    }
    {
        uint8_t hdr[5];
        Py_ssize_t hl = mode == MODE_NIL ? 0 : put_array_header(hdr, k);
        Py_ssize_t len;
        const uint8_t *hb = (const uint8_t *)head.buf;
        const char *ab = (const char *)agents.buf, *vb = (const char *)values.buf;
        char *sb = (char *)sizes.buf;
        switch (mode) {  /* one loop per mode, each compiled for it */
        case MODE_NIL: len = encode_rows(scratch, hb, head.len, ab, vb, sb, n, 0, MODE_NIL, hdr, hl); break;
        case MODE_INT: len = encode_rows(scratch, hb, head.len, ab, vb, sb, n, k, MODE_INT, hdr, hl); break;
        case MODE_UINT: len = encode_rows(scratch, hb, head.len, ab, vb, sb, n, k, MODE_UINT, hdr, hl); break;
        default: len = encode_rows(scratch, hb, head.len, ab, vb, sb, n, k, MODE_FLOAT, hdr, hl); break;
        }
        out = PyBytes_FromStringAndSize((const char *)scratch, len);
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

/* The canonical range [lo, hi] of the ints msgpack writes with marker m, and the int's
   length with its marker (0 for a marker this fast path does not take). */
static inline int marker_range(uint8_t m, int64_t *lo, int64_t *hi)
{
    switch (m) {
    case 0xcc: *lo = 0x80; *hi = 0xff; return 2;
    case 0xcd: *lo = 0x100; *hi = 0xffff; return 3;
    case 0xce: *lo = 0x10000; *hi = 0xffffffffLL; return 5;
    case 0xcf: *lo = 0x100000000LL; *hi = INT64_MAX; return 9;
    default: return 0;
    }
}

/* The fast path of read_rows for the usual batch: every envelope as long as the first, its
   agent id with the first one's marker and every payload value one byte (a positive fixint)
   or a float64, so each field sits at a fixed offset. It checks, field by field, what the
   general loop checks for such a frame (the head, each id equal to its agent and canonical
   for its marker, the payload header, each value's marker) and returns j, or 0 when the
   frame is not such a batch (the general loop then reads it, from the start). */
static inline Py_ssize_t read_fixed(const uint8_t *f, Py_ssize_t size, const uint8_t *hb,
                                    Py_ssize_t hlen, const char *ab, Py_ssize_t n,
                                    Py_ssize_t k, const int nil, const int is_float,
                                    const uint8_t *hdr, Py_ssize_t hl, char *vb, char *sb)
{
    int64_t a0, lo = 0, hi = 0x7f;
    if (n < 1 || hlen > 8 || size <= hlen)
        return 0;
    memcpy(&a0, ab, 8);
    uint8_t m = f[hlen];
    Py_ssize_t wa = m < 0x80 ? 1 : marker_range(m, &lo, &hi);
    if (wa == 0 || a0 < lo || a0 > hi)
        return 0;
    Py_ssize_t body = nil ? 1 : hl + k * (is_float ? 9 : 1);
    Py_ssize_t stride = hlen + wa + body;
    if (stride < 8 || size % stride != 0 || size / stride > n)
        return 0;  /* (a stride of 8 or more lets every head be read as one word) */
    Py_ssize_t j = size / stride;
    uint64_t hword = 0, hmask = 0;
    memcpy(&hword, hb, hlen);
    memset(&hmask, 0xff, hlen);
    for (Py_ssize_t i = 0; i < j; i++) {
        const uint8_t *e = f + i * stride, *q = e + hlen + wa;
        uint64_t x;
        int64_t a;
        memcpy(&x, e, 8);
        memcpy(&a, ab + 8 * i, 8);
        if ((x & hmask) != hword || a < lo || a > hi)
            return 0;
        if (wa == 1) {
            if (e[hlen] != (uint64_t)a)
                return 0;
        } else if (e[hlen] != m || get_be(e + hlen + 1, (int)(wa - 1)) != (uint64_t)a) {
            return 0;
        }
        if (nil) {
            if (*q != 0xc0)
                return 0;
        } else {
            for (Py_ssize_t t = 0; t < hl; t++)
                if (q[t] != hdr[t])
                    return 0;
            q += hl;
            char *row = vb + 8 * k * i;
            for (Py_ssize_t t = 0; t < k; t++) {
                if (is_float) {
                    if (q[9 * t] != 0xcb)
                        return 0;
                    uint64_t u = get_be(q + 9 * t + 1, 8);
                    memcpy(row + 8 * t, &u, 8);
                } else {
                    int64_t v = q[t];
                    if (v >= 0x80)
                        return 0;
                    memcpy(row + 8 * t, &v, 8);
                }
            }
        }
        int64_t sz = (int64_t)stride;
        memcpy(sb + 8 * i, &sz, 8);
    }
    return j;
}

/* The envelopes of agents[0..j) read from the frame f (see read): j, or -1. With `nil` and
   `is_float` constants at each call, the compiler makes one loop per payload kind. A head of
   at most 8 bytes is compared as one masked 8-byte word where 8 bytes remain. With `ids`
   (read_ids) the agents are not given but read: each id non-negative and above the one
   before, written to ids[i]. */
static inline Py_ssize_t read_rows(const uint8_t *f, Py_ssize_t size, const uint8_t *hb,
                                   Py_ssize_t hlen, const char *ab, Py_ssize_t n, Py_ssize_t k,
                                   const int nil, const int is_float, char *vb, char *sb,
                                   int64_t *ids)
{
    uint8_t hdr[5];
    Py_ssize_t hl = nil ? 0 : put_array_header(hdr, k), pos = 0, i = 0;
    Py_ssize_t fixed = ids ? 0 : read_fixed(f, size, hb, hlen, ab, n, k, nil, is_float, hdr, hl,
                                            vb, sb);
    if (fixed > 0)
        return fixed;
    uint64_t hword = 0, hmask = 0;
    int word_head = hlen <= 8;
    if (word_head) {
        memcpy(&hword, hb, hlen);
        memset(&hmask, 0xff, hlen);  /* the first hlen bytes in memory, whatever the order */
    }
    while (pos < size && i < n) {
        Py_ssize_t start = pos, w;
        int64_t a, v;
        if (LIKELY(word_head && size - pos >= 8)) {
            uint64_t x;
            memcpy(&x, f + pos, 8);
            if ((x & hmask) != hword) return -1;
        } else if (size - pos < hlen || memcmp(f + pos, hb, hlen) != 0) {
            return -1;
        }
        pos += hlen;
        w = get_int(f + pos, size - pos, &v);
        if (w == 0) return -1;
        if (ids) {
            if (v < 0 || (i > 0 && v <= ids[i - 1])) return -1;
            ids[i] = v;
        } else {
            memcpy(&a, ab + 8 * i, 8);
            if (v != a) return -1;
        }
        pos += w;
        if (nil) {
            if (pos >= size || f[pos] != 0xc0) return -1;
            pos += 1;
        } else {
            if (size - pos < hl || memcmp(f + pos, hdr, hl) != 0) return -1;
            pos += hl;
            char *row = vb + 8 * k * i;
            for (Py_ssize_t j = 0; j < k; j++) {
                if (is_float) {
                    if (size - pos < 9 || f[pos] != 0xcb) return -1;
                    uint64_t u = get_be(f + pos + 1, 8);
                    memcpy(row + 8 * j, &u, 8);
                    pos += 9;
                } else {
                    w = get_int(f + pos, size - pos, &v);
                    if (w == 0) return -1;
                    memcpy(row + 8 * j, &v, 8);
                    pos += w;
                }
            }
        }
        int64_t sz = (int64_t)(pos - start);
        memcpy(sb + 8 * i, &sz, 8);
        i++;
    }
    return (i == 0 || pos != size) ? -1 : i;
}

PyDoc_STRVAR(read_doc,
"read(frame, head, agents, k, is_float, values, sizes) -> int\n\n"
"j >= 1 if ``frame`` is exactly the canonical batch of envelopes head + agents[i] + payload\n"
"for i < j (``agents``: n int64), each payload nil (k = -1) or a k-array of shortest-form\n"
"ints that fit an int64 (is_float 0) or of float64s (is_float 1); their values go to\n"
"``values`` (n * k int64 or float64, writable) and their sizes to ``sizes`` (n int64).\n"
"Else -1: the frame is not such a batch and nothing in it is trusted.");

PyDoc_STRVAR(read_ids_doc,
"read_ids(frame, head, agents, k, is_float, values, sizes) -> int\n\n"
"``read`` of a batch whose agents are not known: j >= 1 if ``frame`` is exactly such a batch\n"
"of j <= n envelopes whose ids increase strictly from 0 or more, written to ``agents`` (n\n"
"int64, writable); else -1.");

static PyObject *read_any(PyObject *args, int free_ids);

static PyObject *read_batch(PyObject *self, PyObject *args)
{
    return read_any(args, 0);
}

static PyObject *read_ids(PyObject *self, PyObject *args)
{
    return read_any(args, 1);
}

static PyObject *read_any(PyObject *args, int free_ids)
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
    if (get_buffer(agents_o, &agents, free_ids, 0, "agents") < 0)
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
        int64_t *ids = free_ids ? (int64_t *)agents.buf : NULL;
        Py_ssize_t size = frame.len, hlen = head.len;
        Py_BEGIN_ALLOW_THREADS
        if (k < 0)
            got = read_rows(f, size, hb, hlen, ab, n, 0, 1, 0, vb, sb, ids);
        else if (is_float)
            got = read_rows(f, size, hb, hlen, ab, n, k, 0, 1, vb, sb, ids);
        else
            got = read_rows(f, size, hb, hlen, ab, n, k, 0, 0, vb, sb, ids);
        Py_END_ALLOW_THREADS
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

PyDoc_STRVAR(scan_doc,
"scan(frame, ratio, base, max_depth) -> int\n\n"
"simulator.wire.scan_frame in C: the cost in bytes of the objects decoding ``frame`` would\n"
"build (>= 0), or a refusal: -1 a container declares more elements than the rest of the frame\n"
"could hold, -2 the cost exceeds ratio * len(frame) + base, -3 nesting beyond max_depth.\n"
"Stops without a refusal at a byte that is not msgpack or a truncated object.");

enum { C_CONTAINER = 64, C_SLOT = 8, C_NUMBER = 32, C_BLOB = 48, C_EXT = 160, C_TOP = 10 };

static int64_t scan_rows(const uint8_t *f, Py_ssize_t end, int64_t budget, Py_ssize_t max_depth,
                         int64_t *stack)
{
    Py_ssize_t pos = 0, depth = 0;
    int64_t cost = 0, need = 0;
    while (pos < end) {
        uint8_t b = f[pos];
        int64_t elements = -1;
        if (!depth)
            cost += C_TOP; /* its slot in the list of the frame's objects */
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            pos += 1;
        } else if (b <= 0x8f) {
            elements = 2 * (b & 0x0f);
            pos += 1;
        } else if (b <= 0x9f) {
            elements = b & 0x0f;
            pos += 1;
        } else if (b <= 0xbf) {
            pos += 1 + (b & 0x1f);
            cost += C_BLOB + (b & 0x1f);
        } else if (b == 0xc1) {
            return cost;
        } else if ((b >= 0xca && b <= 0xd3)) {
            static const uint8_t width[] = {5, 9, 2, 3, 5, 9, 2, 3, 5, 9};
            pos += width[b - 0xca];
            cost += C_NUMBER;
        } else if (b >= 0xd4 && b <= 0xd8) {
            static const uint8_t width[] = {3, 4, 6, 10, 18};
            pos += width[b - 0xd4];
            cost += C_EXT + width[b - 0xd4];
        } else {
            int w;
            char kind;
            switch (b) {
            case 0xc4: w = 1; kind = 'b'; break;
            case 0xc5: w = 2; kind = 'b'; break;
            case 0xc6: w = 4; kind = 'b'; break;
            case 0xc7: w = 1; kind = 'e'; break;
            case 0xc8: w = 2; kind = 'e'; break;
            case 0xc9: w = 4; kind = 'e'; break;
            case 0xd9: w = 1; kind = 'b'; break;
            case 0xda: w = 2; kind = 'b'; break;
            case 0xdb: w = 4; kind = 'b'; break;
            case 0xdc: w = 2; kind = 'a'; break;
            case 0xdd: w = 4; kind = 'a'; break;
            case 0xde: w = 2; kind = 'm'; break;
            default: w = 4; kind = 'm'; break; /* 0xdf */
            }
            if (pos + 1 + w > end)
                return cost;
            int64_t n = 0;
            for (int i = 0; i < w; i++)
                n = (n << 8) | f[pos + 1 + i];
            pos += 1 + w;
            if (kind == 'b') {
                pos += n;
                cost += C_BLOB + n;
            } else if (kind == 'e') {
                pos += 1 + n;
                cost += C_EXT + n;
            } else {
                elements = kind == 'm' ? 2 * n : n;
            }
        }
        if (pos > end)
            return cost;
        if (depth) {
            stack[depth - 1]--;
            need--;
        }
        if (elements >= 0) {
            cost += C_CONTAINER + C_SLOT * elements;
            if (elements) {
                if (depth == max_depth)
                    return -3;
                stack[depth++] = elements;
                need += elements;
                if (need > end - pos)
                    return -1;
            }
        }
        while (depth && stack[depth - 1] == 0)
            depth--;
        if (cost > budget)
            return -2;
    }
    return cost;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    PyObject *frame_o;
    long long ratio, base;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "OLLn", &frame_o, &ratio, &base, &max_depth))
        return NULL;
    if (ratio < 0 || base < 0 || max_depth < 1 || max_depth > 4096) {
        PyErr_SetString(PyExc_ValueError, "ratio, base >= 0 and 1 <= max_depth <= 4096");
        return NULL;
    }
    Py_buffer frame;
    if (get_buffer(frame_o, &frame, 0, 0, "frame") < 0)
        return NULL;
    int64_t stack[4097];
    int64_t got;
    Py_BEGIN_ALLOW_THREADS
    got = scan_rows((const uint8_t *)frame.buf, frame.len, (int64_t)ratio * frame.len + base,
                    max_depth, stack);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&frame);
    return PyLong_FromLongLong(got);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
    {"encode", encode, METH_VARARGS, encode_doc},
    {"read", read_batch, METH_VARARGS, read_doc},
    {"read_ids", read_ids, METH_VARARGS, read_ids_doc},
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
