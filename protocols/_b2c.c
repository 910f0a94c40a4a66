/*
 * ldpsim.protocols._b2c: the stream keys of protocols/rng.py in bulk, in C (optional).
 *
 * ``digest_ints(prefix, values, suffix, out)`` writes, for every uint64 ``values[i]``,
 *
 *     out[i] = BLAKE2b-64(prefix + decimal(values[i]) + suffix)
 *
 * (unkeyed BLAKE2b with an 8-byte digest, RFC 7693, the digest read as a little-endian
 * uint64): what ``hashlib.blake2b(..., digest_size=8)`` gives, which is how ``rng.stream_key``
 * derives a key from a seed and labels. Any message length is hashed (one 128-byte block
 * suffices for a seed and a few short labels). Where the extension was not built, rng.py loops
 * over hashlib, to the same bits.
 *
 * Messages of one block are hashed LANES at a time, the compression function's every step a
 * loop over the lanes with no dependence between them; where the compiler offers function
 * multi-versioning (GCC or Clang on x86-64 Linux) that is built for AVX-512, AVX2 and the base
 * instruction set, and the loader picks the best the CPU has (as protocols/_prfc.c does).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t IV[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL,
    0xA54FF53A5F1D36F1ULL, 0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL,
    0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr(uint64_t x, int n)
{
    return (x >> n) | (x << (64 - n));
}

static inline uint64_t load64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24
        | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48
        | (uint64_t)p[7] << 56;
}

#define G(a, b, c, d, x, y)          \
    do {                             \
        v[a] = v[a] + v[b] + (x);    \
        v[d] = rotr(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];          \
        v[b] = rotr(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);    \
        v[d] = rotr(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];          \
        v[b] = rotr(v[b] ^ v[c], 63); \
    } while (0)

/* The compression function F of RFC 7693 on one 128-byte block; ``t`` is the byte count so far
 * (messages here are far below 2^64 bytes: the counter's high word stays 0). */
static void compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++)
        m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = IV[i];
    }
    v[12] ^= t;
    if (last)
        v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = SIGMA[r];
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++)
        h[i] ^= v[i] ^ v[i + 8];
}

/* BLAKE2b with an 8-byte digest (no key) of msg[0 .. len - 1], as a little-endian uint64. */
static uint64_t blake2b64(const uint8_t *msg, size_t len)
{
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ 8; /* fanout 1, depth 1, no key, digest length 8 */
    size_t done = 0;
    while (len - done > 128) {
        compress(h, msg + done, (uint64_t)(done + 128), 0);
        done += 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, msg + done, len - done);
    compress(h, block, (uint64_t)len, 1);
    return h[0];
}

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(LDPSIM_NO_CLONES)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

#define LANES 8

#define GL(a, b, c, d, x, y)                                \
    for (int l = 0; l < LANES; l++) {                       \
        uint64_t va = v[a][l], vb = v[b][l], vc = v[c][l], vd = v[d][l]; \
        va = va + vb + m[x][l];                             \
        vd = rotr(vd ^ va, 32);                             \
        vc = vc + vd;                                       \
        vb = rotr(vb ^ vc, 24);                             \
        va = va + vb + m[y][l];                             \
        vd = rotr(vd ^ va, 16);                             \
        vc = vc + vd;                                       \
        vb = rotr(vb ^ vc, 63);                             \
        v[a][l] = va; v[b][l] = vb; v[c][l] = vc; v[d][l] = vd; \
    }

/* BLAKE2b-64 of LANES messages of one block each: block[l] (zero-padded) of len[l] <= 128
 * bytes; out[l] the digest as a little-endian uint64. The same compression as ``compress``
 * with t = len and the last-block flag, one lane per message. */
CLONES static void blake2b64_lanes(const uint8_t block[LANES][128], const uint64_t len[LANES],
                                   uint64_t out[LANES])
{
    uint64_t m[16][LANES], v[16][LANES];
    const uint64_t h0 = IV[0] ^ 0x01010000ULL ^ 8;
    for (int i = 0; i < 16; i++)
        for (int l = 0; l < LANES; l++)
            m[i][l] = load64(block[l] + 8 * i);
    for (int l = 0; l < LANES; l++) {
        v[0][l] = h0;
        v[8][l] = IV[0];
    }
    for (int i = 1; i < 8; i++)
        for (int l = 0; l < LANES; l++) {
            v[i][l] = IV[i];
            v[i + 8][l] = IV[i];
        }
    for (int l = 0; l < LANES; l++) {
        v[12][l] ^= len[l];
        v[14][l] = ~v[14][l];
    }
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = SIGMA[r];
        GL(0, 4, 8, 12, s[0], s[1]);
        GL(1, 5, 9, 13, s[2], s[3]);
        GL(2, 6, 10, 14, s[4], s[5]);
        GL(3, 7, 11, 15, s[6], s[7]);
        GL(0, 5, 10, 15, s[8], s[9]);
        GL(1, 6, 11, 12, s[10], s[11]);
        GL(2, 7, 8, 13, s[12], s[13]);
        GL(3, 4, 9, 14, s[14], s[15]);
    }
    for (int l = 0; l < LANES; l++)
        out[l] = h0 ^ v[0][l] ^ v[8][l];
}

/* The decimal text of x at p (no terminator); returns its length (at most 20). */
static size_t decimal(uint64_t x, uint8_t *p)
{
    uint8_t tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)('0' + x % 10);
        x /= 10;
    } while (x);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static PyObject *digest_ints(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer prefix, values, suffix, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &prefix, &values, &suffix, &out))
        return NULL;
    PyObject *result = NULL;
    uint8_t *msg = NULL;
    if (values.len % 8 != 0 || out.len != values.len) {
        PyErr_Format(PyExc_ValueError, "digest_ints: values and out must be as many uint64s "
                     "(%zd and %zd bytes)", values.len, out.len);
        goto done;
    }
    msg = (uint8_t *)malloc((size_t)prefix.len + 20 + (size_t)suffix.len);
    if (msg == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(msg, prefix.buf, (size_t)prefix.len);
    {
        const char *vb = (const char *)values.buf;
        char *ob = (char *)out.buf;
        Py_ssize_t n = values.len / 8;
        size_t p = (size_t)prefix.len, s = (size_t)suffix.len;
        const uint8_t *sb = (const uint8_t *)suffix.buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t i = 0;
        if (p + 20 + s <= 128) { /* every message one block: LANES at a time */
            uint8_t block[LANES][128];
            uint64_t len[LANES], d[LANES];
            memset(block, 0, sizeof block);
            for (int l = 0; l < LANES; l++)
                memcpy(block[l], msg, p);
            for (; i + LANES <= n; i += LANES) {
                for (int l = 0; l < LANES; l++) {
                    uint64_t x;
                    memcpy(&x, vb + 8 * (i + l), 8);
                    size_t k = decimal(x, block[l] + p);
                    memcpy(block[l] + p + k, sb, s);
                    len[l] = p + k + s;
                    memset(block[l] + len[l], 0, 128 - len[l]);
                }
                blake2b64_lanes((const uint8_t(*)[128])block, len, d);
                memcpy(ob + 8 * i, d, sizeof d);
            }
        }
        for (; i < n; i++) {
            uint64_t x, d;
            memcpy(&x, vb + 8 * i, 8);
            size_t k = decimal(x, msg + p);
            memcpy(msg + p + k, sb, s);
            d = blake2b64(msg, p + k + s);
            memcpy(ob + 8 * i, &d, 8);
        }
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    free(msg);
    PyBuffer_Release(&out);
    PyBuffer_Release(&suffix);
    PyBuffer_Release(&values);
    PyBuffer_Release(&prefix);
    return result;
}

static PyMethodDef methods[] = {
    {"digest_ints", digest_ints, METH_VARARGS,
     "digest_ints(prefix, values, suffix, out): out[i] = BLAKE2b-64(prefix + decimal(values[i])"
     " + suffix) for uint64 buffers, the digest read little-endian."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_b2c",
    "BLAKE2b-64 of seeds' decimal text in bulk: ldpsim's stream keys (see protocols/rng.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__b2c(void)
{
    return PyModule_Create(&module);
}
