/*
 * ldpsim.protocols._prfc: SipHash-2-4 of one 8-byte word per row, in C (optional).
 *
 * ``siphash_words(k0, k1, m, out)`` writes out[i] = SipHash-2-4 under the key (k0[i], k1[i])
 * (the key's two little-endian halves; arrays of length 1 are one key for every row) of the
 * 8-byte message m[i] (little-endian): the same bits as protocols/prf.py's numpy ``prf``.
 * SipHash: Aumasson & Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012.
 *
 * ``olh_support(a, b, buckets, g, out)`` counts, for every value, the OLH reports whose hash of
 * it is their bucket (protocols/mechanisms/olh.py's ``support_counts``, the same counts).
 *
 * The loop over rows has no dependence between rows; where the compiler offers function
 * multi-versioning (GCC or Clang on x86-64 Linux) it is built for AVX-512, AVX2 and the base
 * instruction set, and the loader picks the best the CPU has.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                         \
    do {                                                                                 \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                        \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                           \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                           \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                        \
    } while (0)

static inline uint64_t siphash_word(uint64_t k0, uint64_t k1, uint64_t m)
{
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    const uint64_t b = 8ULL << 56; /* the last block: the message length, no tail bytes */
    v3 ^= m; SIPROUND; SIPROUND; v0 ^= m;
    v3 ^= b; SIPROUND; SIPROUND; v0 ^= b;
    v2 ^= 0xff; SIPROUND; SIPROUND; SIPROUND; SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(LDPSIM_NO_CLONES)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

CLONES static void rows_keyed(const uint64_t *k0, const uint64_t *k1, const uint64_t *m,
                              uint64_t *out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = siphash_word(k0[i], k1[i], m[i]);
}

CLONES static void rows_one_key(uint64_t k0, uint64_t k1, const uint64_t *m, uint64_t *out,
                                Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = siphash_word(k0, k1, m[i]);
}

/* The agents first .. first + n - 1 of a contiguous range, from the keys of their parents in the
 * tree (level LEVELS - 1, nodes base, base + 1, ... with base = first >> 8): each agent's device
 * key (child c = id & 255 at level 4 of its parent: two PRF calls, protocols/keys.py), then,
 * where asked, its coin key PRF_device(coin_tag) and its data key PRF_device(2^63 | data_tag).
 * Three loops per chunk of agents, each without a branch or a dependence between agents, so that
 * the compiler vectorises them (one key for a parent's children, then one key per agent). */
#define CHUNK 256
CLONES static void children(uint64_t k0, uint64_t k1, uint64_t first, Py_ssize_t n, uint64_t *d0,
                            uint64_t *d1)
{
    const uint64_t level = 4ULL << 8, half = 1ULL << 62;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t m = level | ((first + (uint64_t)i) & 255);
        d0[i] = siphash_word(k0, k1, m);
        d1[i] = siphash_word(k0, k1, m | half);
    }
}

CLONES static void keyed(const uint64_t *d0, const uint64_t *d1, uint64_t m, Py_ssize_t n,
                         uint64_t *out)
{
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = siphash_word(d0[i], d1[i], m);
}

static void leaves(const uint64_t *pk0, const uint64_t *pk1, uint64_t first, Py_ssize_t n,
                   uint64_t coin_tag, uint64_t data_tag, int want_dev, int want_coins,
                   int want_data, uint64_t *dev0, uint64_t *dev1, uint64_t *coins, uint64_t *data)
{
    const uint64_t base = first >> 8;
    uint64_t b0[CHUNK], b1[CHUNK];
    Py_ssize_t i = 0;
    while (i < n) {
        uint64_t id = first + (uint64_t)i, p = (id >> 8) - base;
        Py_ssize_t len = (Py_ssize_t)(256 - (id & 255)); /* to the end of this parent's block */
        if (len > n - i)
            len = n - i;
        uint64_t *d0 = want_dev ? dev0 + i : b0, *d1 = want_dev ? dev1 + i : b1;
        children(pk0[p], pk1[p], id, len, d0, d1);
        if (want_coins)
            keyed(d0, d1, coin_tag, len, coins + i);
        if (want_data)
            keyed(d0, d1, data_tag | (1ULL << 63), len, data + i);
        i += len;
    }
}

static int aligned8(const Py_buffer *b)
{
    return ((uintptr_t)b->buf % 8) == 0;
}

static PyObject *siphash_words(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *k0_o, *k1_o, *m_o, *out_o;
    if (!PyArg_ParseTuple(args, "OOOO", &k0_o, &k1_o, &m_o, &out_o))
        return NULL;
    Py_buffer bufs[4];
    PyObject *objs[4] = {k0_o, k1_o, m_o, out_o};
    int got = 0;
    for (; got < 4; got++) {
        int flags = PyBUF_C_CONTIGUOUS | (got == 3 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], &bufs[got], flags) < 0)
            break;
    }
    if (got == 4) {
        Py_ssize_t nk0 = bufs[0].len / 8, nk1 = bufs[1].len / 8, n = bufs[2].len / 8;
        int ok = bufs[0].len % 8 == 0 && bufs[1].len % 8 == 0 && bufs[2].len % 8 == 0
                 && bufs[3].len == bufs[2].len && nk0 == nk1 && (nk0 == 1 || nk0 == n);
        for (int i = 0; i < 4 && ok; i++)
            ok = aligned8(&bufs[i]);
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "siphash_words: k0 and k1 must hold one uint64 or "
                         "one per message, out one per message, all aligned (%zd, %zd, %zd, "
                         "%zd bytes)", bufs[0].len, bufs[1].len, bufs[2].len, bufs[3].len);
        } else {
            const uint64_t *k0 = (const uint64_t *)bufs[0].buf;
            const uint64_t *k1 = (const uint64_t *)bufs[1].buf;
            const uint64_t *m = (const uint64_t *)bufs[2].buf;
            uint64_t *out = (uint64_t *)bufs[3].buf;
            Py_BEGIN_ALLOW_THREADS
            if (nk0 == 1 && n != 1)
                rows_one_key(k0[0], k1[0], m, out, n);
            else
                rows_keyed(k0, k1, m, out, n);
            Py_END_ALLOW_THREADS
        }
    }
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&bufs[i]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static int get_out(PyObject *o, Py_buffer *b, Py_ssize_t n, int *want)
{
    *want = 0;
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return -1;
    if (b->len != n * 8 || !aligned8(b)) {
        PyErr_Format(PyExc_ValueError, "tree_leaves: an output must hold one aligned uint64 per "
                     "agent (%zd bytes for %zd agents)", b->len, n);
        PyBuffer_Release(b);
        return -1;
    }
    *want = 1;
    return 0;
}

static PyObject *tree_leaves(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *pk0_o, *pk1_o, *outs_o[4];
    unsigned long long first, coin_tag, data_tag;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOKnKKOOOO", &pk0_o, &pk1_o, &first, &n, &coin_tag, &data_tag,
                          &outs_o[0], &outs_o[1], &outs_o[2], &outs_o[3]))
        return NULL;
    if (n < 0 || (n > 0 && first > UINT64_MAX - (uint64_t)n)) {
        PyErr_SetString(PyExc_ValueError, "tree_leaves: bad range");
        return NULL;
    }
    Py_buffer pk0, pk1, outs[4];
    int want[4] = {0, 0, 0, 0}, got = 0, ok = 1;
    if (PyObject_GetBuffer(pk0_o, &pk0, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(pk1_o, &pk1, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&pk0);
        return NULL;
    }
    for (; got < 4; got++)
        if (get_out(outs_o[got], &outs[got], n, &want[got]) < 0) {
            ok = 0;
            break;
        }
    if (ok && n > 0) {
        uint64_t parents = ((first + (uint64_t)n - 1) >> 8) - (first >> 8) + 1;
        if (pk0.len != pk1.len || pk0.len % 8 || (uint64_t)(pk0.len / 8) < parents
                || !aligned8(&pk0) || !aligned8(&pk1) || want[0] != want[1]) {
            PyErr_Format(PyExc_ValueError, "tree_leaves: %llu parent keys needed, got %zd and "
                         "%zd bytes", (unsigned long long)parents, pk0.len, pk1.len);
            ok = 0;
        }
    }
    if (ok && n > 0) {
        uint64_t *o[4];
        for (int i = 0; i < 4; i++)
            o[i] = want[i] ? (uint64_t *)outs[i].buf : NULL;
        Py_BEGIN_ALLOW_THREADS
        leaves((const uint64_t *)pk0.buf, (const uint64_t *)pk1.buf, first, n, coin_tag,
               data_tag, want[0], want[2], want[3], o[0], o[1], o[2], o[3]);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < got; i++)
        if (want[i])
            PyBuffer_Release(&outs[i]);
    PyBuffer_Release(&pk1);
    PyBuffer_Release(&pk0);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *keyed_rows(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *k0_o, *k1_o, *out_o;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "OOKO", &k0_o, &k1_o, &tag, &out_o))
        return NULL;
    Py_buffer b[3];
    PyObject *objs[3] = {k0_o, k1_o, out_o};
    int got = 0;
    for (; got < 3; got++)
        if (PyObject_GetBuffer(objs[got], &b[got],
                               PyBUF_C_CONTIGUOUS | (got == 2 ? PyBUF_WRITABLE : 0)) < 0)
            break;
    if (got == 3) {
        if (b[0].len != b[2].len || b[1].len != b[2].len || b[2].len % 8 || !aligned8(&b[0])
                || !aligned8(&b[1]) || !aligned8(&b[2])) {
            PyErr_Format(PyExc_ValueError, "keyed_rows: k0, k1 and out must be aligned uint64 "
                         "arrays of one length (%zd, %zd, %zd bytes)", b[0].len, b[1].len,
                         b[2].len);
        } else {
            Py_BEGIN_ALLOW_THREADS
            keyed((const uint64_t *)b[0].buf, (const uint64_t *)b[1].buf, (uint64_t)tag,
                  b[2].len / 8, (uint64_t *)b[2].buf);
            Py_END_ALLOW_THREADS
        }
    }
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* OLH's support counts (protocols/mechanisms/olh.py, ``OLH.support_counts``): for every value v
 * in [0, domain), how many reports i have H_i(v) = y_i, where H_i(v) = ((((a_i v + b_i) mod 2^64)
 * >> 32) g) >> 32. For X = x >> 32 < 2^32, (X g) >> 32 = y exactly when ceil(y 2^32 / g) <= X <
 * ceil((y + 1) 2^32 / g), i.e. when (x - lo_i) mod 2^64 < wd_i with lo_i = ceil(y 2^32 / g) << 32
 * and wd_i = (ceil((y + 1) 2^32 / g) - ceil(y 2^32 / g)) << 32 (wd_i = 0 for a bucket outside
 * [0, g): it matches nothing). x_i steps by a_i from one value to the next (mod 2^64, the same
 * number as the product). Counts are integers: the order of the sums does not matter. OLH_VALS
 * values share one pass over the reports, whose loop the compiler vectorises. */
#define OLH_VALS 8
CLONES static void olh_counts(const uint64_t *a, uint64_t *x, const uint64_t *lo,
                              const uint64_t *wd, Py_ssize_t n, Py_ssize_t domain,
                              int64_t *counts)
{
    Py_ssize_t v = 0;
    for (; v + OLH_VALS <= domain; v += OLH_VALS) {
        uint64_t c[OLH_VALS] = {0};
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t xi = x[i], ai = a[i], li = lo[i], wi = wd[i];
            for (int j = 0; j < OLH_VALS; j++) {
                c[j] += (xi - li) < wi;
                xi += ai;
            }
            x[i] = xi;
        }
        for (int j = 0; j < OLH_VALS; j++)
            counts[v + j] = (int64_t)c[j];
    }
    for (; v < domain; v++) {
        uint64_t c = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            c += (x[i] - lo[i]) < wd[i];
            x[i] += a[i];
        }
        counts[v] = (int64_t)c;
    }
}

static PyObject *olh_support(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *a_o, *b_o, *y_o, *out_o;
    unsigned long long g;
    if (!PyArg_ParseTuple(args, "OOOKO", &a_o, &b_o, &y_o, &g, &out_o))
        return NULL;
    if (g < 2 || g > (1ULL << 31)) {
        PyErr_Format(PyExc_ValueError, "olh_support: g must be in [2, 2^31], got %llu", g);
        return NULL;
    }
    Py_buffer b[4];
    PyObject *objs[4] = {a_o, b_o, y_o, out_o};
    int got = 0;
    for (; got < 4; got++)
        if (PyObject_GetBuffer(objs[got], &b[got],
                               PyBUF_C_CONTIGUOUS | (got == 3 ? PyBUF_WRITABLE : 0)) < 0)
            break;
    uint64_t *work = NULL;
    if (got == 4) {
        Py_ssize_t n = b[0].len / 8;
        if (b[0].len % 8 || b[1].len != b[0].len || b[2].len != b[0].len || b[3].len % 8
                || !aligned8(&b[0]) || !aligned8(&b[1]) || !aligned8(&b[2]) || !aligned8(&b[3])) {
            PyErr_SetString(PyExc_ValueError, "olh_support: a, b, buckets (one length) and out "
                            "must be aligned 64-bit arrays");
        } else if ((work = PyMem_Malloc((size_t)(n > 0 ? n : 1) * 24)) == NULL) {
            PyErr_NoMemory();
        } else {
            const uint64_t *ab = b[0].buf, *bb = b[1].buf;
            const int64_t *yb = b[2].buf;
            uint64_t *x = work, *lo = work + n, *wd = work + 2 * n;
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t i = 0; i < n; i++) {
                x[i] = bb[i];
                if (yb[i] < 0 || (uint64_t)yb[i] >= g) {
                    lo[i] = 0;
                    wd[i] = 0;
                } else {
                    uint64_t y = (uint64_t)yb[i];
                    uint64_t l = ((y << 32) + g - 1) / g, h = (((y + 1) << 32) + g - 1) / g;
                    lo[i] = l << 32;
                    wd[i] = (h - l) << 32;
                }
            }
            olh_counts(ab, x, lo, wd, n, b[3].len / 8, (int64_t *)b[3].buf);
            Py_END_ALLOW_THREADS
        }
    }
    PyMem_Free(work);
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"keyed_rows", keyed_rows, METH_VARARGS,
     "keyed_rows(k0, k1, tag, out): out[i] = SipHash-2-4 under key (k0[i], k1[i]) of the "
     "8-byte word tag, for uint64 buffers."},
    {"tree_leaves", tree_leaves, METH_VARARGS,
     "tree_leaves(pk0, pk1, first, n, coin_tag, data_tag, dev0, dev1, coins, data): the device "
     "keys (and the coin and data keys where their output is not None) of agents first .. "
     "first + n - 1 from their parents' keys pk0[i], pk1[i] (parent i = (first >> 8) + i)."},
    {"siphash_words", siphash_words, METH_VARARGS,
     "siphash_words(k0, k1, m, out): out[i] = SipHash-2-4 under key (k0[i], k1[i]) of the "
     "8-byte word m[i], for uint64 buffers (k0, k1 of length 1: one key for every row)."},
    {"olh_support", olh_support, METH_VARARGS,
     "olh_support(a, b, buckets, g, out): out[v] = #{i: ((((a[i] v + b[i]) mod 2^64) >> 32) g) "
     ">> 32 = buckets[i]} for v in [0, len(out)): OLH's support counts (protocols/mechanisms/"
     "olh.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_prfc",
    "SipHash-2-4 of one word per row: the PRF of ldpsim's agent keys (see protocols/prf.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__prfc(void)
{
    return PyModule_Create(&module);
}
