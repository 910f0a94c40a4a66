/*
 * ldpsim.protocols._dlapc: the exact discrete Laplace state machine of
 * protocols/mechanisms/dlap.py in C (optional).
 *
 * ``dlap(words, width, t, z, used)`` runs, for every row of the C-contiguous uint64 buffer
 * ``words`` (rows x width), Canonne, Kamath & Steinke (2020) Algorithm 2 with s = 1 (discrete
 * Laplace of scale t, a power of two), Algorithm 1 for its Bernoulli(exp(-U/t)) and
 * Bernoulli(exp(-1)) draws, and exact Bernoulli(n/d) draws by rejection, one word per step:
 *
 *   U = w & (t - 1), sign = w >> 63;  K = 1, 2, ... while Bernoulli(U / (t K)), keep U if K odd;
 *   V = 0; K = 2, 3, ... while Bernoulli(1 / K); K odd: V += 1 and again, K even: stop;
 *   X = U + t V; a negative zero starts again; Z = sign ? -X : X.
 *
 * Bernoulli(n/d) from a word w: accepted when w <= 2^64 - 1 - ((2^64 - d) mod d), then
 * [w mod d < n]; a rejected word is spent. It writes z[i] and used[i] (the words row i used,
 * -1 when it did not finish within its words): the same results as the numpy state machine
 * (``dlap._kernel_numpy``), which runs where the extension was not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One try at Bernoulli(n/d) from the word w: 1 or 0, or -1 for a rejected word. Only the top d
 * words can be rejected (2^64 mod d < d), so the remainder is computed for those alone; for a
 * power of two d nothing is rejected and w mod d is a mask. */
static inline int bernoulli(uint64_t w, uint64_t n, uint64_t d)
{
    if ((d & (d - 1)) == 0)
        return (w & (d - 1)) < n;
    if (w >= (uint64_t)0 - d && w > UINT64_MAX - (((uint64_t)0 - d) % d))
        return -1;
    return (w % d) < n;
}

/* The agents' words, made here: word c of a stream whose first draw index is ``first`` is
 * mix(h ^ mix((rnd << 32) + first + c + C)), the word protocols/rng.py's ``bits_at`` gives for
 * the agent whose own key is h (SplitMix64's finaliser: protocols/_rngc.c). ``ctr`` holds the
 * mixed counters of a stream's first ``CACHED`` words (the same for every agent of a column). */
#define CACHED 32
/* streams made together, and the words of each made beforehand (CACHED or fewer) */
#define BLOCK 128
#define PRE 16
static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

typedef struct {
    uint64_t h, base; /* the agent's key; (rnd << 32) + first + C */
    const uint64_t *ctr;
    Py_ssize_t i, limit;
    const uint64_t *words; /* given words (``dlap``), or NULL: made from h, base and ctr */
    const uint64_t *pre;   /* made words: the first npre, made beforehand, stride apart */
    Py_ssize_t npre, stride;
} stream;

/* The first words of a block of streams, made in one pass that the compiler vectorises (built
 * for AVX-512, AVX2 and the base instruction set where the compiler offers function
 * multi-versioning, as protocols/_prfc.c): buf[c stride + r] = word c of the stream of key
 * h[r]. The state machine then reads them from the cache instead of waiting for each word's
 * mixing after every decision it could not predict. */
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(LDPSIM_NO_CLONES)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif
CLONES static void premake(const uint64_t *h, Py_ssize_t nb, const uint64_t *ctr,
                           Py_ssize_t npre, uint64_t *buf, Py_ssize_t stride)
{
    for (Py_ssize_t c = 0; c < npre; c++) {
        uint64_t k = ctr[c];
        uint64_t *out = buf + c * stride;
        for (Py_ssize_t r = 0; r < nb; r++)
            out[r] = mix(h[r] ^ k);
    }
}

/* Word i of the stream (i below its limit). ``given`` is a constant at each call of
 * ``dlap_stream``, so the compiler builds one state machine for each kind of stream. */
#if defined(__GNUC__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif
ALWAYS_INLINE uint64_t word_at(const stream *s, Py_ssize_t i, const int given)
{
    if (given)
        return s->words[i];
    if (i < s->npre)
        return s->pre[i * s->stride];
    uint64_t c = i < CACHED ? s->ctr[i] : mix(s->base + (uint64_t)i);
    return mix(s->h ^ c);
}

/* The stream's next word, or 0 past its limit. */
ALWAYS_INLINE int next_word(stream *s, uint64_t *w, const int given)
{
    if (s->i >= s->limit)
        return 0;
    *w = word_at(s, s->i++, given);
    return 1;
}

/* Algorithm 1's loop from K = k: K = k, k + 1, ... while Bernoulli(n / (d K)) gives 1 (a
 * rejected word is spent and K tried again). Returns K at the first 0, or -1 past the limit. */
ALWAYS_INLINE int64_t alg1_from(stream *s, uint64_t n, uint64_t d, uint64_t k, const int given)
{
    uint64_t w;
    for (;;) {
        int a;
        if (!next_word(s, &w, given))
            return -1;
        a = bernoulli(w, n, d * k);
        if (a == 1)
            k++;
        else if (a == 0)
            return (int64_t)k;
    }
}

/* Z of one stream (given or made words); returns the words used, or -1 past its limit. */
ALWAYS_INLINE Py_ssize_t dlap_stream(stream *s, uint64_t t, int64_t *z, const int given)
{
    uint64_t w;
    for (;;) {
        uint64_t u, neg;
        int64_t k;
        for (;;) { /* U, kept with probability exp(-U/t) (Algorithm 1) */
            if (!next_word(s, &w, given))
                return -1;
            u = w & (t - 1);
            neg = w >> 63;
            k = alg1_from(s, u, t, 1, given);
            if (k < 0)
                return -1;
            if (k & 1)
                break;
        }
        uint64_t v = 0;
        for (;;) { /* Bernoulli(exp(-1)) successes before the first failure */
            k = alg1_from(s, 1, 1, 2, given);
            if (k < 0)
                return -1;
            if (k & 1)
                v++;
            else
                break;
        }
        uint64_t x = u + t * v;
        if (neg && x == 0)
            continue;
        *z = neg ? -(int64_t)x : (int64_t)x;
        return s->i;
    }
}

static int get(PyObject *o, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, view, flags) < 0)
        return -1;
    if (view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "dlap: %s has %zd bytes, not a whole number of 64-bit "
                     "values", name, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *dlap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *words_o, *z_o, *used_o;
    Py_ssize_t width;
    unsigned long long t;
    if (!PyArg_ParseTuple(args, "OnKOO", &words_o, &width, &t, &z_o, &used_o))
        return NULL;
    if (t == 0 || (t & (t - 1)) != 0 || width < 1) {
        PyErr_Format(PyExc_ValueError, "dlap: t must be a power of two and width >= 1, got "
                     "t = %llu, width = %zd", t, width);
        return NULL;
    }
    Py_buffer words, z, used;
    if (get(words_o, &words, 0, "words") < 0)
        return NULL;
    if (get(z_o, &z, 1, "z") < 0) {
        PyBuffer_Release(&words);
        return NULL;
    }
    if (get(used_o, &used, 1, "used") < 0) {
        PyBuffer_Release(&z);
        PyBuffer_Release(&words);
        return NULL;
    }
    Py_ssize_t rows = z.len / 8;
    if (words.len / 8 != rows * width || used.len != z.len) {
        PyErr_Format(PyExc_ValueError, "dlap: words must hold rows x width = %zd x %zd values "
                     "(%zd bytes), used as many as z", rows, width, words.len);
    } else {
        const uint64_t *wb = (const uint64_t *)words.buf;
        int64_t *zb = (int64_t *)z.buf, *ub = (int64_t *)used.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; r++) {
            stream s = {0, 0, NULL, 0, width, wb + r * width, NULL, 0, 0};
            int64_t zr = 0;
            Py_ssize_t n = dlap_stream(&s, (uint64_t)t, &zr, 1);
            zb[r] = n < 0 ? 0 : zr;
            ub[r] = (int64_t)n;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&used);
    PyBuffer_Release(&z);
    PyBuffer_Release(&words);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *dlap_agents(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *h_o, *z_o;
    unsigned long long rnd, first, region, t;
    Py_ssize_t cols;
    if (!PyArg_ParseTuple(args, "OKKnKKO", &h_o, &rnd, &first, &cols, &region, &t, &z_o))
        return NULL;
    if (t == 0 || (t & (t - 1)) != 0 || cols < 1 || region < 1 || rnd >= (1ULL << 32)) {
        PyErr_SetString(PyExc_ValueError, "dlap_agents: t a power of two, cols >= 1, region "
                        ">= 1, rnd < 2^32");
        return NULL;
    }
    Py_buffer h, z;
    if (get(h_o, &h, 0, "h") < 0)
        return NULL;
    if (get(z_o, &z, 1, "z") < 0) {
        PyBuffer_Release(&h);
        return NULL;
    }
    Py_ssize_t rows = h.len / 8;
    Py_ssize_t failed = 0;
    uint64_t *ctr = NULL;
    if (z.len != h.len * cols) {
        PyErr_Format(PyExc_ValueError, "dlap_agents: z must hold rows x cols = %zd x %zd values",
                     rows, cols);
    } else if ((ctr = PyMem_Malloc((size_t)cols * CACHED * 8 + BLOCK * PRE * 8)) == NULL) {
        PyErr_NoMemory();
    } else {
        const uint64_t C = 0xD1B54A32D192ED03ULL;
        const uint64_t *hb = (const uint64_t *)h.buf;
        int64_t *zb = (int64_t *)z.buf;
        uint64_t *pre = ctr + cols * CACHED;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < cols; j++)
            for (Py_ssize_t c = 0; c < CACHED; c++)
                ctr[j * CACHED + c] = mix((rnd << 32) + first + (uint64_t)j * region
                                          + (uint64_t)c + C);
        Py_ssize_t npre = (Py_ssize_t)region < PRE ? (Py_ssize_t)region : PRE;
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += BLOCK) {
            Py_ssize_t nb = rows - r0 < BLOCK ? rows - r0 : BLOCK;
            for (Py_ssize_t j = 0; j < cols; j++) {
                premake(hb + r0, nb, ctr + j * CACHED, npre, pre, BLOCK);
                for (Py_ssize_t r = r0; r < r0 + nb; r++) {
                    stream s = {hb[r], (rnd << 32) + first + (uint64_t)j * region + C,
                                ctr + j * CACHED, 0, (Py_ssize_t)region, NULL, pre + (r - r0),
                                npre, BLOCK};
                    int64_t zr = 0;
                    if (dlap_stream(&s, t, &zr, 0) < 0) {
                        failed++;
                        zr = 0;
                    }
                    zb[r * cols + j] = zr;
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(ctr);
    PyBuffer_Release(&z);
    PyBuffer_Release(&h);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(failed);
}

static PyMethodDef methods[] = {
    {"dlap_agents", dlap_agents, METH_VARARGS,
     "dlap_agents(h, rnd, first, cols, region, t, z): exact discrete Laplace of scale t for "
     "every agent key h[i] and column j, from the agent's words first + j region + 0, 1, ... "
     "of round rnd (made here, as rng.bits_at gives them); returns how many streams went past "
     "their region (their z is 0)."},
    {"dlap", dlap, METH_VARARGS,
     "dlap(words, width, t, z, used): exact discrete Laplace of scale t per row of words."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dlapc",
    "The exact discrete Laplace sampler of ldpsim (see protocols/mechanisms/dlap.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dlapc(void)
{
    return PyModule_Create(&module);
}
