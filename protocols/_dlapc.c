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
 * (``dlap._kernel_numpy``), which runs where the extension was not built. ``dlap_agents`` does
 * the same for the agents' words, which it makes itself.
 *
 * The engines give the same values from the same words. The stream engine (``dlap_stream``)
 * runs one stream after the other, and each step ends in a branch on a coin flip. The lane
 * engine (x86-64, chosen at run time: 8 lanes a vector with AVX-512, else 4 with AVX2) runs
 * 16 streams side by side, one word per step each, with masks instead of branches, and gives
 * a lane whose stream has finished the next one, its first steps already taken in a pass over
 * many streams (two with AVX-512, which never reject a word; five with AVX2, whose K is a
 * power of two but for word 3's K = 3), for scales up to 2^32 (``run_job``). It decides
 * Bernoulli(n/d) without dividing: in the phase of U, d = t K (t = 2^s) and n = U < t, and
 * w mod tK = (w & (t - 1)) + t ((w >> s) mod K), so the bit is
 * [(w >> s) mod K = 0 and (w & (t - 1)) < U]; in the phase of V, d = K and n = 1, and the bit
 * is [w mod K = 0]. For K = 2^a b (b odd), x mod K = 0 exactly when rotr(x inv(b), a) <=
 * (2^64 - 1) / K, inv(b) the inverse of b modulo 2^64 (Granlund & Montgomery 1994, as compilers
 * divide by constants). A word that could be rejected (w >= 2^64 - d, which needs w >= 2^64 - 8t
 * here) and K >= 8 are rare (below 10^-3 per value) and take ``step_one``, the stream engine's
 * step, exactly. ``dlap(..., scalar=True)`` and ``dlap_agents(..., scalar=True)`` run the stream
 * engine on any CPU; ``engine()`` names the one the others use ("avx512", "avx2" or
 * "streams"), ``engines()`` the ones this CPU runs, and ``use_engine(name)`` makes one of them
 * the one in use (tests and benchmarks).
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

/* ------------------------------------------------------------------ a job, by the stream engine */

/* A run of many streams: the agents' (stream (r, j) reads word c as mix(h ^ mix(base + j region
 * + c)), the word ``word_at`` makes, h the agent's key: h[r], or with ``keyed``
 * mix(key + h[r] GOLDEN), h[r] the agent's id, as protocols/rng.py's ``agent_keys``) or given
 * words (h NULL; row r's word c is words[r limit + c]). Stream (r, j) writes z[r cols + j] (and
 * used[r], given words only); ``failed`` counts the streams that went past their limit (their z
 * is 0). */
typedef struct {
    const uint64_t *h, *words;
    Py_ssize_t rows, cols, limit;
    uint64_t base, region, t;
    int64_t *z, *used;
    Py_ssize_t failed;
    int keyed;
    uint64_t key;
} job;

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* The key of the agent of row r. */
static inline uint64_t agent_key(const job *jb, Py_ssize_t r)
{
    return jb->keyed ? mix(jb->key + jb->h[r] * GOLDEN) : jb->h[r];
}

/* The stream engine over a whole job; -1 when out of memory. */
static int run_streams(job *jb)
{
    int64_t zr;
    if (!jb->h) {
        for (Py_ssize_t r = 0; r < jb->rows; r++) {
            stream s = {0, 0, NULL, 0, jb->limit, jb->words + r * jb->limit, NULL, 0, 0};
            Py_ssize_t n = dlap_stream(&s, jb->t, &zr, 1);
            jb->z[r] = n < 0 ? 0 : zr;
            jb->used[r] = (int64_t)n;
            jb->failed += n < 0;
        }
        return 0;
    }
    Py_ssize_t cols = jb->cols, npre = jb->limit < PRE ? jb->limit : PRE;
    uint64_t *ctr = PyMem_RawMalloc((size_t)cols * CACHED * 8 + BLOCK * PRE * 8), *pre;
    if (ctr == NULL)
        return -1;
    pre = ctr + cols * CACHED;
    for (Py_ssize_t j = 0; j < cols; j++)
        for (Py_ssize_t c = 0; c < CACHED; c++)
            ctr[j * CACHED + c] = mix(jb->base + (uint64_t)j * jb->region + (uint64_t)c);
    for (Py_ssize_t r0 = 0; r0 < jb->rows; r0 += BLOCK) {
        Py_ssize_t nb = jb->rows - r0 < BLOCK ? jb->rows - r0 : BLOCK;
        uint64_t keys[BLOCK];
        for (Py_ssize_t r = 0; r < nb; r++)
            keys[r] = agent_key(jb, r0 + r);
        for (Py_ssize_t j = 0; j < cols; j++) {
            premake(keys, nb, ctr + j * CACHED, npre, pre, BLOCK);
            for (Py_ssize_t r = r0; r < r0 + nb; r++) {
                stream s = {keys[r - r0], jb->base + (uint64_t)j * jb->region, ctr + j * CACHED,
                            0, jb->limit, NULL, pre + (r - r0), npre, BLOCK};
                zr = 0;
                if (dlap_stream(&s, jb->t, &zr, 0) < 0) {
                    jb->failed++;
                    zr = 0;
                }
                jb->z[r * cols + j] = zr;
            }
        }
    }
    PyMem_RawFree(ctr);
    return 0;
}

/* ------------------------------------------------------------------ the lane engine */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(LDPSIM_NO_CLONES)
#define HAVE_LANES 1
#include <immintrin.h>
#define LANES_TARGET __attribute__((target("avx512f,avx512dq,popcnt")))
#define LANES_INLINE LANES_TARGET static inline __attribute__((always_inline))

/* A stream's state between words, in two numbers. K: 0 in phase 0 (a fresh U next), K in
 * phase 1 (Algorithm 1 at U/t), K | P2 in phase 2 (Algorithm 1 at 1, from K = 2). X: the sign in
 * bit 63, below it U in phase 1, U + t V in phase 2 (V the Bernoulli(exp(-1)) successes so
 * far); a finished stream's value is X. */
#define SIGN (1ULL << 63)
#define P2 (1ULL << 40)

/* One word's step of one stream, the step ``dlap_stream`` takes with that word (the lane
 * engine's step for the rare words its masks leave out). Returns 1 when the stream has
 * finished. */
static int step_one(uint64_t *kp, uint64_t *x, uint64_t w, uint64_t t)
{
    uint64_t k = *kp & ~P2;
    if (k == 0) {
        *x = w & ((t - 1) | SIGN);
        *kp = 1;
        return 0;
    }
    int in_u = !(*kp & P2);
    int a = bernoulli(w, in_u ? *x & ~SIGN : 1, (in_u ? t : 1) * k);
    if (a < 0)
        return 0;
    if (a) {
        (*kp)++;
        return 0;
    }
    if (k & 1) { /* U kept (phase 1), or one more success (phase 2): V's Algorithm 1 again */
        *x += in_u ? 0 : t;
        *kp = 2 | P2;
        return 0;
    }
    if (in_u || *x == SIGN) { /* U redrawn, or a negative zero: a fresh U */
        *kp = 0;
        return 0;
    }
    return 1;
}

/* Z of a finished stream's X (no branch on the sign, a coin flip). */
static inline int64_t value_of(uint64_t x)
{
    uint64_t neg = (uint64_t)((int64_t)x >> 63);
    return (int64_t)(((x & ~SIGN) ^ neg) - neg);
}

/* GROUPS vectors of 8 lanes side by side, each with its own queue of the next STAGE streams;
 * every step's lanes are logged, and the log written out every LOG steps. */
#define GROUPS 2
#define STAGE 128
#define LOG 32
#define SINK UINT64_MAX /* the slot of a stream beyond the job's: its value is dropped */
#define TABLE 8         /* K below which the divisibility test has its constants */

/* a queue's rows: key (or first word's offset), word base, slot, the stream's K and X after its
 * first two words (``restage``), its third word */
enum { QH, QBASE, QSLOT, QK2, QX2, QW2, QROWS };
typedef struct {
    uint64_t a[QROWS][STAGE + 4]; /* 4 beyond: the AVX2 engine stores 4 at a time */
} queue;

/* queues of the AVX2 engine (GROUPS2 vectors of 4 lanes); the AVX-512 engine uses GROUPS */
#define GROUPS2 4
/* the AVX2 engine's candidates for a queue (``candidates``): key (or first word's offset),
 * column, slot, and the column's counters of the FIRST words its first steps read */
#define FIRST 6
enum { CH, CCOL, CSLOT, CC0, CROWS = CC0 + FIRST };
typedef struct {
    queue q[GROUPS2];
    Py_ssize_t s, r, j; /* the next stream of the job: its index, row and column */
    uint64_t cand[CROWS][STAGE + 4];
} staging;

/* each lane's slot, X and words used at every step, the lanes that finished, and the log's
 * finished streams gathered (``flush``) */
typedef struct {
    uint64_t slot[LOG * GROUPS][8], x[LOG * GROUPS][8];
    int64_t used[LOG * GROUPS][8];
    __mmask8 fin[LOG * GROUPS];
    uint64_t cslot[LOG * GROUPS * 8 + 8], cx[LOG * GROUPS * 8 + 8];
    int64_t cused[LOG * GROUPS * 8 + 8];
} results;

/* Moves the streams of queue qu from ``from`` on to its front and fills the rest with the next
 * streams of the job, then with streams of slot SINK (row 0's words, or key 0's), each with its
 * first two steps taken: a fresh U and sign from word 0, and Bernoulli(U / t) from word 1
 * (d = t, a power of two: nothing is rejected), which keeps U (phase 2, K = 2) on a 0 and goes
 * on in phase 1 at K = 2 on a 1; its third word. The lanes need limit >= 3. */
ALWAYS_INLINE void restage_as(const job *jb, staging *sb, queue *qu, Py_ssize_t from)
{
    Py_ssize_t keep = STAGE - from, total = jb->rows * jb->cols;
    uint64_t tm = jb->t - 1, tms = tm | SIGN, *h = qu->a[QH], *base = qu->a[QBASE];
    uint64_t *k2 = qu->a[QK2], *x2 = qu->a[QX2], *w2 = qu->a[QW2];
    for (int a = 0; a < QROWS; a++)
        memmove(qu->a[a], qu->a[a] + from, (size_t)keep * 8);
    for (Py_ssize_t q = keep; q < STAGE; q++) {
        if (sb->s < total) {
            h[q] = jb->h ? jb->h[sb->r] : (uint64_t)sb->r * (uint64_t)jb->limit;
            base[q] = jb->base + (uint64_t)sb->j * jb->region;
            qu->a[QSLOT][q] = (uint64_t)sb->s++;
            if (++sb->j == jb->cols) {
                sb->j = 0;
                sb->r++;
            }
        } else {
            h[q] = 0;
            base[q] = jb->base;
            qu->a[QSLOT][q] = SINK;
        }
    }
    if (jb->h && jb->keyed) /* loops the compiler vectorises */
        for (Py_ssize_t q = keep; q < STAGE; q++)
            h[q] = mix(jb->key + h[q] * GOLDEN);
    if (jb->h && jb->cols == 1) { /* one word base: its counters mixed once */
        uint64_t c0 = mix(jb->base), c1 = mix(jb->base + 1), c2 = mix(jb->base + 2);
        for (Py_ssize_t q = keep; q < STAGE; q++) {
            uint64_t w0 = mix(h[q] ^ c0), w1 = mix(h[q] ^ c1);
            x2[q] = w0 & tms;
            k2[q] = (w1 & tm) < (w0 & tm) ? 2 : 2 | P2;
            w2[q] = mix(h[q] ^ c2);
        }
    } else if (jb->h) {
        for (Py_ssize_t q = keep; q < STAGE; q++) {
            uint64_t w0 = mix(h[q] ^ mix(base[q])), w1 = mix(h[q] ^ mix(base[q] + 1));
            x2[q] = w0 & tms;
            k2[q] = (w1 & tm) < (w0 & tm) ? 2 : 2 | P2;
            w2[q] = mix(h[q] ^ mix(base[q] + 2));
        }
    } else {
        for (Py_ssize_t q = keep; q < STAGE; q++) {
            uint64_t w0 = jb->words[h[q]], w1 = jb->words[h[q] + 1];
            x2[q] = w0 & tms;
            k2[q] = (w1 & tm) < (w0 & tm) ? 2 : 2 | P2;
            w2[q] = jb->words[h[q] + 2];
        }
    }
}

/* ``restage`` for each engine's instruction set */
LANES_TARGET static void restage(const job *jb, staging *sb, queue *qu, Py_ssize_t from)
{
    restage_as(jb, sb, qu, from);
}

/* Writes out the finished streams of the log's first ``blocks`` steps. */
LANES_TARGET static void flush(job *jb, results *out, Py_ssize_t blocks)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        __mmask8 f = out->fin[b];
        _mm512_storeu_si512(out->cslot + n,
                            _mm512_maskz_compress_epi64(f, _mm512_loadu_si512(out->slot[b])));
        _mm512_storeu_si512(out->cx + n,
                            _mm512_maskz_compress_epi64(f, _mm512_loadu_si512(out->x[b])));
        if (jb->used)
            _mm512_storeu_si512(out->cused + n, _mm512_maskz_compress_epi64(
                f, _mm512_loadu_si512(out->used[b])));
        n += __builtin_popcount(f);
    }
    for (Py_ssize_t q = 0; q < n; q++)
        jb->z[out->cslot[q]] = value_of(out->cx[q]);
    if (jb->used)
        for (Py_ssize_t q = 0; q < n; q++)
            jb->used[out->cslot[q]] = out->cused[q];
}

/* Divisibility by K = 2^a b (b odd, 0 < K < TABLE): inv(b) mod 2^64, a, (2^64 - 1) / K. */
static uint64_t div_inv[TABLE], div_rot[TABLE], div_lim[TABLE];

static void div_tables(void)
{
    for (uint64_t k = 1; k < TABLE; k++) {
        uint64_t a = 0, b = k, x;
        while (!(b & 1)) {
            b >>= 1;
            a++;
        }
        x = b; /* Newton's iteration: each step doubles the low bits of b x that are right */
        for (int i = 0; i < 6; i++)
            x *= 2 - b * x;
        div_inv[k] = x;
        div_rot[k] = a;
        div_lim[k] = UINT64_MAX / k;
    }
}

/* 8 lanes' streams: key (or first word's offset), word base, output slot, the index i of the
 * word w each reads next, and their state K and X */
typedef struct {
    __m512i h, base, slot, i, w, k, x;
} lanes;

typedef struct {
    __m512i zero, one, two, two2, rarek, thr, tm, tms, sign, flag, t, limit, total, inv, rot,
        lim;
    __m128i s;
    uint64_t tt, m1, m2;
    const uint64_t *words;
} consts;

/* SplitMix64's finaliser (``mix``) of 8 words */
LANES_INLINE __m512i vmix(__m512i x, const consts *c)
{
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
    x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)c->m1));
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
    x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)c->m2));
    return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

/* The lanes in m take the next streams of queue qu, in order, their first two words taken
 * (``restage``) and their third next (``onecol``: every stream has the same word base). */
LANES_INLINE void refill(lanes *L, __mmask8 m, const queue *qu, Py_ssize_t *next,
                         const consts *c, const int onecol)
{
    L->h = _mm512_mask_expand_epi64(L->h, m, _mm512_loadu_si512(qu->a[QH] + *next));
    if (!onecol)
        L->base = _mm512_mask_expand_epi64(L->base, m,
                                           _mm512_loadu_si512(qu->a[QBASE] + *next));
    L->slot = _mm512_mask_expand_epi64(L->slot, m, _mm512_loadu_si512(qu->a[QSLOT] + *next));
    L->w = _mm512_mask_expand_epi64(L->w, m, _mm512_loadu_si512(qu->a[QW2] + *next));
    L->x = _mm512_mask_expand_epi64(L->x, m, _mm512_loadu_si512(qu->a[QX2] + *next));
    L->k = _mm512_mask_expand_epi64(L->k, m, _mm512_loadu_si512(qu->a[QK2] + *next));
    L->i = _mm512_mask_mov_epi64(L->i, m, c->two);
    *next += __builtin_popcount(m);
}

/* The lanes in ``rare`` take their step by ``step_one`` from the state before it (ko, xo); kn
 * and xn hold the vector step's new state; returns the lanes that finished. */
__attribute__((noinline)) static unsigned rare_steps(unsigned rare, unsigned done,
                                                     const uint64_t *w, const uint64_t *ko,
                                                     const uint64_t *xo, uint64_t *kn,
                                                     uint64_t *xn, uint64_t t)
{
    for (int l = 0; l < 8; l++) {
        if (!(rare >> l & 1))
            continue;
        kn[l] = ko[l], xn[l] = xo[l];
        int fin = step_one(kn + l, xn + l, w[l], t);
        done = fin ? done | 1u << l : done & ~(1u << l);
    }
    return done;
}

/* One step of the 8 lanes of L, a word each: ``step_one`` with masks (for K < TABLE and words
 * below 2^64 - TABLE t, which no rejection reaches; any other lane takes ``step_one``), then
 * each lane's next word made. The lanes go to step b of the log; returns the lanes to refill
 * (finished, or past their limit: counted in *failed when they ran a stream of the job). What
 * a 0 would decide is prepared from K and X beforehand: the Bernoulli bit is the last thing a
 * step waits for. */
LANES_INLINE __mmask8 vstep(lanes *L, const consts *c, results *out, Py_ssize_t b,
                            Py_ssize_t *failed, const int given)
{
    __m512i w = L->w, k = L->k, x = L->x;
    __mmask8 fail = _mm512_cmpge_epu64_mask(L->i, c->limit);
    __mmask8 f0 = _mm512_testn_epi64_mask(k, k), act = _knot_mask8(f0);
    __mmask8 p1 = _mm512_mask_testn_epi64_mask(act, k, c->flag), p2 = _kandn_mask8(p1, act);
    __mmask8 oddk = _mm512_test_epi64_mask(k, c->one);
    __mmask8 neg0 = _mm512_mask_cmpeq_epu64_mask(p2, x, c->sign); /* a negative zero so far */
    __mmask8 fin_if0 = _kandn_mask8(_kor_mask8(oddk, neg0), p2);  /* a 0 finishes the stream */
    __mmask8 to0_if0 = _kandn_mask8(oddk, _kor_mask8(p1, neg0));  /* a 0 goes to phase 0 */
    /* Bernoulli(U / (t K)) in phase 1, Bernoulli(1 / K) in phase 2 */
    __m512i q = _mm512_mullo_epi64(_mm512_mask_srl_epi64(w, p1, w, c->s),
                                   _mm512_permutexvar_epi64(k, c->inv));
    q = _mm512_rorv_epi64(q, _mm512_permutexvar_epi64(k, c->rot));
    __mmask8 a = _kand_mask8(
        _mm512_mask_cmple_epu64_mask(act, q, _mm512_permutexvar_epi64(k, c->lim)),
        _mm512_cmplt_epu64_mask(_mm512_maskz_and_epi64(p1, w, c->tm),
                                _mm512_mask_andnot_epi64(c->one, p1, c->sign, x)));
    __mmask8 rare_w = _mm512_mask_cmpge_epu64_mask(act, w, c->thr);
    __mmask8 rare_k = _mm512_mask_test_epi64_mask(act, k, c->rarek);
    /* a 1 raises K; a 0 ends Algorithm 1 at K: U kept (phase 1, K odd) or one more success
     * (phase 2, K odd) go on in phase 2 at K = 2; U redrawn (phase 1, K even) or a negative
     * zero go to phase 0; otherwise the stream has finished */
    __mmask8 end = _kandn_mask8(a, act);
    __mmask8 done = _kandn_mask8(a, fin_if0);
    __mmask8 odd = _kand_mask8(end, oddk);
    __m512i kn = _mm512_mask_mov_epi64(k, f0, c->one);
    kn = _mm512_mask_add_epi64(kn, a, kn, c->one);
    kn = _mm512_mask_mov_epi64(kn, odd, c->two2);
    kn = _mm512_mask_mov_epi64(kn, _kand_mask8(end, to0_if0), c->zero);
    __m512i xn = _mm512_mask_and_epi64(x, f0, w, c->tms);
    xn = _mm512_mask_add_epi64(xn, _kand_mask8(odd, p2), xn, c->t);
    if (__builtin_expect(!_kortestz_mask8_u8(rare_w, rare_k), 0)) {
        uint64_t ws[8], ko[8], xo[8], kk[8], xx[8];
        _mm512_storeu_si512(ws, w), _mm512_storeu_si512(ko, k), _mm512_storeu_si512(xo, x);
        _mm512_storeu_si512(kk, kn), _mm512_storeu_si512(xx, xn);
        done = (__mmask8)rare_steps(_kor_mask8(rare_w, rare_k), done, ws, ko, xo, kk, xx,
                                    c->tt);
        kn = _mm512_loadu_si512(kk), xn = _mm512_loadu_si512(xx);
    }
    done = _kor_mask8(done, fail);
    __m512i used = L->i = _mm512_add_epi64(L->i, c->one);
    if (__builtin_expect(!_kortestz_mask8_u8(fail, fail), 0)) {
        xn = _mm512_mask_mov_epi64(xn, fail, c->zero);
        used = _mm512_mask_mov_epi64(used, fail, _mm512_set1_epi64(-1));
        *failed += __builtin_popcount(_mm512_mask_cmplt_epu64_mask(fail, L->slot, c->total));
    }
    L->k = kn, L->x = xn;
    if (given)
        L->w = _mm512_mask_i64gather_epi64(c->zero, _mm512_cmplt_epu64_mask(L->i, c->limit),
                                           _mm512_add_epi64(L->h, L->i),
                                           (const void *)c->words, 8);
    else
        L->w = vmix(_mm512_xor_si512(L->h, vmix(_mm512_add_epi64(L->base, L->i), c)), c);
    out->fin[b] = _mm512_mask_cmplt_epu64_mask(done, L->slot, c->total);
    _mm512_storeu_si512(out->slot[b], L->slot);
    _mm512_storeu_si512(out->x[b], xn);
    if (given)
        _mm512_storeu_si512(out->used[b], used);
    return done;
}

LANES_INLINE void consts_of(consts *c, const job *jb)
{
    int s = __builtin_ctzll(jb->t);
    c->zero = _mm512_setzero_si512(), c->one = _mm512_set1_epi64(1);
    c->two = _mm512_set1_epi64(2);
    c->two2 = _mm512_set1_epi64((long long)(2 | P2));
    c->rarek = _mm512_set1_epi64((long long)~(uint64_t)((TABLE - 1) | P2));
    c->thr = _mm512_set1_epi64((long long)(0 - ((uint64_t)TABLE << s)));
    c->tm = _mm512_set1_epi64((long long)(jb->t - 1));
    c->tms = _mm512_set1_epi64((long long)((jb->t - 1) | SIGN));
    c->sign = _mm512_set1_epi64((long long)SIGN), c->flag = _mm512_set1_epi64((long long)P2);
    c->s = _mm_cvtsi64_si128(s), c->t = _mm512_set1_epi64((long long)jb->t);
    c->limit = _mm512_set1_epi64(jb->limit), c->total = _mm512_set1_epi64(jb->rows * jb->cols);
    c->inv = _mm512_loadu_si512(div_inv), c->rot = _mm512_loadu_si512(div_rot);
    c->lim = _mm512_loadu_si512(div_lim);
    c->m1 = 0xBF58476D1CE4E5B9ULL, c->m2 = 0x94D049BB133111EBULL;
    __asm__("" : "+r"(c->m1), "+r"(c->m2)); /* values, not constants: read from memory */
    c->tt = jb->t;
    c->words = jb->words;
}

/* The lane engine over a whole job (``given``: given words; ``onecol``: one column). */
LANES_INLINE void run_lanes_as(job *jb, staging *sb, results *out, const int given,
                               const int onecol)
{
    consts c;
    Py_ssize_t total = jb->rows * jb->cols, next[GROUPS], e = 0, failed = 0;
    lanes L[GROUPS];
    __mmask8 m[GROUPS];
    consts_of(&c, jb);
    sb->s = sb->r = sb->j = 0;
    for (int g = 0; g < GROUPS; g++) {
        L[g].h = L[g].slot = L[g].i = L[g].w = L[g].k = L[g].x = c.zero;
        L[g].base = _mm512_set1_epi64((long long)jb->base);
        m[g] = 0xFF;
        next[g] = STAGE;
    }
    for (;;) {
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS; g++) {
            if (next[g] + 8 > STAGE) {
                restage(jb, sb, &sb->q[g], next[g]);
                next[g] = 0;
            }
            refill(&L[g], m[g], &sb->q[g], &next[g], &c, onecol);
        }
        if (sb->s == total) { /* every stream queued: done when none is queued or running */
            __mmask8 running = 0;
            for (int g = 0; g < GROUPS; g++)
                running |= _mm512_cmplt_epu64_mask(L[g].slot, c.total)
                    | (next[g] == STAGE || sb->q[g].a[QSLOT][next[g]] != SINK);
            if (!running)
                break;
        }
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS; g++)
            m[g] = vstep(&L[g], &c, out, e * GROUPS + g, &failed, given);
        if (++e == LOG) {
            flush(jb, out, LOG * GROUPS);
            e = 0;
        }
    }
    flush(jb, out, e * GROUPS);
    jb->failed += failed;
}

LANES_TARGET static void run_lanes(job *jb, staging *sb, results *out)
{
    if (!jb->h)
        run_lanes_as(jb, sb, out, 1, 1);
    else if (jb->cols == 1)
        run_lanes_as(jb, sb, out, 0, 1);
    else
        run_lanes_as(jb, sb, out, 0, 0);
}


/* ------------------------------------------------------------------ the lane engine, AVX2 */

/* The same lanes on CPUs with AVX2 but not AVX-512: GROUPS2 vectors of 4 lanes, masks held
 * as vectors of all-ones or zero lanes (and as 4-bit numbers where they steer), unsigned
 * comparisons made signed by flipping the top bit, a 64 x 64-bit product (low half) made of
 * three 32 x 32-bit ones, and expanding and compressing lanes by permutations from tables.
 * The divisibility constants of K (below TABLE) are held as 32-bit halves, 8 to a vector,
 * and looked up by permutation with K's low half as the index. A stream takes five steps
 * before it gets a lane, 4 streams at a time (``restage2``: no K but word 3's, 3, is other
 * than a power of two; almost half the streams finish there, at word 2 or 4), and a lane reads
 * its stream's counters mixed beforehand (``ctab``: the first CACHED of each column). */
#define AVX2_TARGET __attribute__((target("avx2,popcnt")))
#define AVX2_INLINE AVX2_TARGET static inline __attribute__((always_inline))
#define LOG_CACHED 5
_Static_assert(CACHED == 1 << LOG_CACHED && CACHED >= FIRST, "CACHED = 2^LOG_CACHED >= FIRST");

typedef struct {
    uint64_t slot[LOG * GROUPS2][4], x[LOG * GROUPS2][4];
    int64_t used[LOG * GROUPS2][4];
    unsigned char fin[LOG * GROUPS2];
    uint64_t cslot[LOG * GROUPS2 * 4 + 4], cx[LOG * GROUPS2 * 4 + 4];
    int64_t cused[LOG * GROUPS2 * 4 + 4];
} results2;

/* For each 4-bit mask m: the lanes of m as all-ones words; the 32-bit permutation that puts
 * element r of 4 in a row at the r-th lane of m (expand), and the one that puts the r-th
 * lane of m at element r (compress). */
static uint64_t lane_mask[16][4];
static uint32_t expand_idx[16][8], compress_idx[16][8];
/* inv(b) (its low and high 32 bits), a and 64 - a, and ((2^64 - 1) / K) ^ SIGN (its low and
 * high 32 bits) for K = 2^a b < TABLE; entry 0 is 0 (the index of a word's high half is 0) */
static uint32_t div32[6][TABLE];
enum { D_INVLO, D_INVHI, D_ROT, D_ROT64, D_LIMLO, D_LIMHI };

static void avx2_tables(void)
{
    for (unsigned m = 0; m < 16; m++) {
        unsigned r = 0, e = 0;
        for (unsigned l = 0; l < 4; l++) {
            unsigned in = m >> l & 1;
            lane_mask[m][l] = in ? UINT64_MAX : 0;
            expand_idx[m][2 * l] = in ? 2 * e : 0;
            expand_idx[m][2 * l + 1] = in ? 2 * e + 1 : 1;
            e += in;
            compress_idx[m][2 * l] = 0, compress_idx[m][2 * l + 1] = 1;
        }
        for (unsigned l = 0; l < 4; l++)
            if (m >> l & 1) {
                compress_idx[m][2 * r] = 2 * l, compress_idx[m][2 * r + 1] = 2 * l + 1;
                r++;
            }
    }
    for (unsigned k = 1; k < TABLE; k++) {
        uint64_t lim = div_lim[k] ^ SIGN;
        div32[D_INVLO][k] = (uint32_t)div_inv[k];
        div32[D_INVHI][k] = (uint32_t)(div_inv[k] >> 32);
        div32[D_ROT][k] = (uint32_t)div_rot[k], div32[D_ROT64][k] = 64 - (uint32_t)div_rot[k];
        div32[D_LIMLO][k] = (uint32_t)lim, div32[D_LIMHI][k] = (uint32_t)(lim >> 32);
    }
}

/* ---- the lanes */

typedef struct {
    __m256i h, col, slot, i, w, k, x;
} lanes2;

typedef struct {
    __m256i zero, one, start, two2, ones, flag, sign, rarek, thrs, tm, tms, t, limm1, limit,
        totals, m1, m1s, m2, m2s, hi32, cachedm1, base, region, regionh, d[6], four, inv3,
        inv3s, lim3s, key, golden, goldens, five_ok, three, five, kbits;
    __m128i s;
    uint64_t tt;
    const uint64_t *words, *ctab;
} consts2;

#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STOREU(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define PERM(table, idx) _mm256_permutevar8x32_epi32(table, idx)
#define MASK4(v) ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(v)))

/* the low 64 bits of a b, from the low (blo) and high (bhi) 32 bits of b, each in the low half
 * of its lane */
AVX2_INLINE __m256i mul64(__m256i a, __m256i blo, __m256i bhi)
{
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), blo),
                                     _mm256_mul_epu32(a, bhi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, blo), _mm256_slli_epi64(cross, 32));
}

/* the low 64 bits of a b, from b and b with its halves swapped (bswap): the low half of a b
 * (32 x 32 bits) and the two cross products (their low 32 bits, in one multiplication of the
 * 32-bit halves), added in the high half; ``hi`` has the high 32 bits of each lane set */
AVX2_INLINE __m256i mulc(__m256i a, __m256i b, __m256i bswap, __m256i hi)
{
    __m256i p = _mm256_mullo_epi32(a, bswap);
    __m256i cross = _mm256_add_epi64(_mm256_slli_epi64(p, 32), _mm256_and_si256(p, hi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), cross);
}

/* SplitMix64's finaliser (``mix``) of 4 words */
AVX2_INLINE __m256i vmix2(__m256i x, const consts2 *c)
{
    x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 30));
    x = mulc(x, c->m1, c->m1s, c->hi32);
    x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 27));
    x = mulc(x, c->m2, c->m2s, c->hi32);
    return _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
}

/* ``refill`` of 4 lanes */
AVX2_INLINE void refill2(lanes2 *L, unsigned m, const queue *qu, Py_ssize_t *next,
                         const consts2 *c, const int onecol)
{
    __m256i idx = LOADU(expand_idx[m]), sel = LOADU(lane_mask[m]);
#define EXPAND(v, row) v = _mm256_blendv_epi8(v, PERM(LOADU(qu->a[row] + *next), idx), sel)
    EXPAND(L->h, QH);
    if (!onecol)
        EXPAND(L->col, QBASE);
    EXPAND(L->slot, QSLOT);
    EXPAND(L->w, QW2);
    EXPAND(L->x, QX2);
    EXPAND(L->k, QK2);
#undef EXPAND
    L->i = _mm256_blendv_epi8(L->i, c->start, sel);
    *next += __builtin_popcount(m);
}

/* The Bernoulli bits of a step (``vstep``): x mod K = 0 for x = w >> s in phase 1 and w in
 * phase 2, and in phase 1 also (w & (t - 1)) < U; 0 in phase 0 and garbage for K >= TABLE. */
AVX2_INLINE __m256i bits2(__m256i w, __m256i k, __m256i x, __m256i f0, __m256i p1,
                          const consts2 *c)
{
    __m256i v = _mm256_blendv_epi8(w, _mm256_srl_epi64(w, c->s), p1);
    __m256i q = mul64(v, PERM(c->d[D_INVLO], k), PERM(c->d[D_INVHI], k));
    q = _mm256_or_si256(_mm256_srlv_epi64(q, PERM(c->d[D_ROT], k)),
                        _mm256_sllv_epi64(q, PERM(c->d[D_ROT64], k)));
    __m256i kk = _mm256_shuffle_epi32(k, 0xA0); /* K in both halves of its lane */
    __m256i lim = _mm256_blend_epi32(PERM(c->d[D_LIMLO], kk), PERM(c->d[D_LIMHI], kk), 0xAA);
    __m256i over = _mm256_cmpgt_epi64(_mm256_xor_si256(q, c->sign), lim);
    __m256i below = _mm256_cmpgt_epi64(_mm256_andnot_si256(c->sign, x),
                                       _mm256_and_si256(w, c->tm));
    return _mm256_andnot_si256(
        _mm256_or_si256(_mm256_or_si256(f0, over), _mm256_andnot_si256(below, p1)), c->ones);
}

/* Each lane's word i (made: ``word_at``), from the counters mixed beforehand where i <
 * CACHED in every lane. */
AVX2_INLINE __m256i next_word2(const lanes2 *L, const consts2 *c, const int onecol)
{
    if (__builtin_expect(!MASK4(_mm256_cmpgt_epi64(L->i, c->cachedm1)), 1)) {
        uint64_t at[4];
        STOREU(at, onecol ? L->i
                          : _mm256_add_epi64(_mm256_slli_epi64(L->col, LOG_CACHED), L->i));
        __m256i ctr = _mm256_set_epi64x((long long)c->ctab[at[3]], (long long)c->ctab[at[2]],
                                        (long long)c->ctab[at[1]], (long long)c->ctab[at[0]]);
        return vmix2(_mm256_xor_si256(L->h, ctr), c);
    }
    __m256i base = onecol ? c->base
                          : _mm256_add_epi64(c->base, mul64(L->col, c->region, c->regionh));
    return vmix2(_mm256_xor_si256(L->h, vmix2(_mm256_add_epi64(base, L->i), c)), c);
}

/* ---- a stream's first five steps, before it gets a lane */

/* The next n streams of the job (then streams of slot SINK) as candidates: key (or first
 * word's offset), column, slot (and with several columns, the column's counters 0 to 4). */
AVX2_INLINE void candidates(const job *jb, staging *sb, Py_ssize_t n, const uint64_t *ctab)
{
    uint64_t(*cd)[STAGE + 4] = sb->cand;
    Py_ssize_t left = jb->rows * jb->cols - sb->s, nr = n < left ? n : left, s0 = sb->s;
    if (jb->cols == 1) { /* loops the compiler vectorises */
        if (jb->h) /* the keys of the streams after the next STAGE, on their way to the cache */
            for (Py_ssize_t c = 0; c < nr; c += 8)
                _mm_prefetch((const char *)((uintptr_t)(jb->h + s0 + c) + 16 * STAGE),
                             _MM_HINT_T0);
        for (Py_ssize_t c = 0; c < nr; c++) {
            cd[CH][c] = jb->h ? jb->h[s0 + c] : (uint64_t)(s0 + c) * (uint64_t)jb->limit;
            cd[CSLOT][c] = (uint64_t)(s0 + c), cd[CCOL][c] = 0;
        }
        sb->s += nr, sb->r += nr;
    } else {
        for (Py_ssize_t c = 0; c < nr; c++) {
            cd[CH][c] = jb->h[sb->r], cd[CCOL][c] = (uint64_t)sb->j;
            cd[CSLOT][c] = (uint64_t)sb->s++;
            for (int j = 0; j < FIRST; j++)
                cd[CC0 + j][c] = ctab[((uint64_t)sb->j << LOG_CACHED) + (uint64_t)j];
            if (++sb->j == jb->cols) {
                sb->j = 0;
                sb->r++;
            }
        }
    }
    for (Py_ssize_t c = nr; c < n + 4; c++) {
        cd[CH][c] = cd[CCOL][c] = 0, cd[CSLOT][c] = SINK;
        for (int j = 0; j < FIRST; j++)
            cd[CC0 + j][c] = ctab ? ctab[j] : 0;
    }
}

/* Words 0 to FIRST - 1 of candidates c to c + 3 (a word past the limit: the last one,
 * unused). */
AVX2_INLINE void first_words(const job *jb, staging *sb, Py_ssize_t c, const consts2 *k,
                             const int given, const int onecol, __m256i *w)
{
    __m256i h = LOADU(sb->cand[CH] + c);
    if (given && jb->limit >= FIRST) { /* rows' words 0 to 3 and 2 to 5, transposed */
        const uint64_t *r[4], *wd = jb->words;
        for (int l = 0; l < 4; l++) {
            r[l] = wd + sb->cand[CH][c + l];
            if (jb->limit > 8) /* the row's next words, which its lane reads */
                _mm_prefetch((const char *)(r[l] + 8), _MM_HINT_T0);
        }
        for (int half = 0; half < 2; half++) {
            __m256i t0 = _mm256_unpacklo_epi64(LOADU(r[0] + 2 * half), LOADU(r[1] + 2 * half));
            __m256i t1 = _mm256_unpackhi_epi64(LOADU(r[0] + 2 * half), LOADU(r[1] + 2 * half));
            __m256i t2 = _mm256_unpacklo_epi64(LOADU(r[2] + 2 * half), LOADU(r[3] + 2 * half));
            __m256i t3 = _mm256_unpackhi_epi64(LOADU(r[2] + 2 * half), LOADU(r[3] + 2 * half));
            w[2 * half] = _mm256_permute2x128_si256(t0, t2, 0x20);
            w[2 * half + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
            w[2 * half + 2] = _mm256_permute2x128_si256(t0, t2, 0x31);
            w[2 * half + 3] = _mm256_permute2x128_si256(t1, t3, 0x31);
        }
        return;
    }
    if (given) {
        for (int j = 0; j < FIRST; j++)
            w[j] = _mm256_i64gather_epi64((const long long *)k->words,
                                          _mm256_add_epi64(h, _mm256_set1_epi64x(
                                              j < jb->limit ? j : jb->limit - 1)), 8);
        return;
    }
    if (jb->keyed)
        h = vmix2(_mm256_add_epi64(k->key, mulc(h, k->golden, k->goldens, k->hi32)), k);
    STOREU(sb->cand[CH] + c, h);
    for (int j = 0; j < FIRST; j++)
        w[j] = vmix2(_mm256_xor_si256(h, onecol ? _mm256_set1_epi64x((long long)k->ctab[j])
                                                : LOADU(sb->cand[CC0 + j] + c)), k);
}

/* K and X of 4 candidates after their first four words (w[0] to w[3]): a fresh U and sign
 * (word 0), Bernoulli(U / t) (1), then at K = 2 in phase 1 or 2 (2: d = 2t or 2, a power of
 * two; a 0 redraws U, or in phase 2 finishes unless X is a negative zero), then a fresh U in
 * phase 0, else Bernoulli at K = 3 by the divisibility test by 3 (3). Sets X after word 1,
 * the lanes that finished at word 2 (``fin``) and the rare ones (a word 3 that a rejection
 * could reach). */
AVX2_INLINE void four_steps(const __m256i *w, const consts2 *c, __m256i *k, __m256i *x,
                            __m256i *x1, __m256i *fin, __m256i *rare)
{
    __m256i u = _mm256_and_si256(w[0], c->tm), xs = _mm256_and_si256(w[0], c->tms);
    __m256i p1 = _mm256_cmpgt_epi64(u, _mm256_and_si256(w[1], c->tm)); /* else phase 2 */
    __m256i bit = _mm256_blendv_epi8(w[2], _mm256_srl_epi64(w[2], c->s), p1);
    __m256i b2 = _mm256_andnot_si256(
        _mm256_andnot_si256(_mm256_cmpgt_epi64(u, _mm256_and_si256(w[2], c->tm)), p1),
        _mm256_cmpeq_epi64(_mm256_and_si256(bit, c->one), c->zero));
    __m256i stay = _mm256_or_si256(_mm256_or_si256(p1, b2), _mm256_cmpeq_epi64(xs, c->sign));
    __m256i zero = _mm256_andnot_si256(b2, stay); /* a fresh U next */
    __m256i v = _mm256_blendv_epi8(w[3], _mm256_srl_epi64(w[3], c->s), p1);
    __m256i over = _mm256_cmpgt_epi64(
        _mm256_xor_si256(mulc(v, c->inv3, c->inv3s, c->hi32), c->sign), c->lim3s);
    __m256i b3 = _mm256_andnot_si256(
        _mm256_or_si256(over, _mm256_andnot_si256(
                                  _mm256_cmpgt_epi64(u, _mm256_and_si256(w[3], c->tm)), p1)),
        c->ones);
    __m256i kp = _mm256_blendv_epi8(c->two2, _mm256_or_si256(c->four,
                                                             _mm256_andnot_si256(p1, c->flag)),
                                    b3);
    *k = _mm256_blendv_epi8(kp, c->one, zero);
    __m256i xp = _mm256_add_epi64(xs, _mm256_andnot_si256(_mm256_or_si256(b3, p1), c->t));
    *x = _mm256_blendv_epi8(xp, _mm256_and_si256(w[3], c->tms), zero);
    *x1 = xs;
    *fin = _mm256_andnot_si256(stay, c->ones);
    *rare = _mm256_andnot_si256(
        _mm256_or_si256(zero, _mm256_cmpgt_epi64(c->thrs, _mm256_xor_si256(w[3], c->sign))),
        stay);
}

/* The first five steps of 4 candidates (``four_steps``, then word 4 at K = 1, 2 or 4: a power
 * of two, nothing rejected; a 0 at K = 1 keeps U, at K = 2 or 4 redraws U in phase 1 and
 * finishes in phase 2 unless X is a negative zero). Sets K and X after five words, and Z's X
 * and the words used of a candidate that finished (at word 2 or 4); returns the lanes that
 * finished in the low 4 bits, and the rare ones (``four_steps``) above. */
AVX2_INLINE unsigned first_steps(const __m256i *w, const consts2 *c, __m256i *k, __m256i *x,
                                 __m256i *xv, __m256i *used)
{
    __m256i k4, x4, x1, fin2, rare;
    four_steps(w, c, &k4, &x4, &x1, &fin2, &rare);
    __m256i p1 = _mm256_cmpeq_epi64(_mm256_and_si256(k4, c->flag), c->zero);
    __m256i v = _mm256_blendv_epi8(w[4], _mm256_srl_epi64(w[4], c->s), p1);
    __m256i low = _mm256_sub_epi64(_mm256_and_si256(k4, c->kbits), c->one); /* K - 1 */
    __m256i bit = _mm256_andnot_si256(
        _mm256_andnot_si256(_mm256_cmpgt_epi64(_mm256_andnot_si256(c->sign, x4),
                                               _mm256_and_si256(w[4], c->tm)), p1),
        _mm256_cmpeq_epi64(_mm256_and_si256(v, low), c->zero));
    __m256i odd = _mm256_cmpeq_epi64(_mm256_and_si256(k4, c->one), c->one);
    __m256i fin4 = _mm256_andnot_si256(
        _mm256_or_si256(_mm256_or_si256(bit, odd), _mm256_or_si256(p1, _mm256_cmpeq_epi64(
                                                                           x4, c->sign))),
        c->five_ok);
    *k = _mm256_blendv_epi8(_mm256_and_si256(odd, c->two2), _mm256_add_epi64(k4, c->one), bit);
    *x = x4;
    *xv = _mm256_blendv_epi8(x4, x1, fin2);
    *used = _mm256_blendv_epi8(c->five, c->three, fin2);
    return MASK4(_mm256_or_si256(fin2, fin4)) | MASK4(rare) << 4;
}

/* A rare candidate's steps 2 to 4 by ``step_one`` (lane l of the vectors stored, word j at
 * w[4 j + l]), from K = 2 in the phase of word 1; returns the words it used if it finished,
 * else 0. */
static int rare_first(uint64_t *k, uint64_t *x, uint64_t *xv, const uint64_t *w, int l,
                      const job *jb)
{
    uint64_t kk = (w[4 + l] & (jb->t - 1)) < (w[l] & (jb->t - 1)) ? 2 : 2 | P2;
    uint64_t xx = w[l] & ((jb->t - 1) | SIGN);
    int fin = step_one(&kk, &xx, w[8 + l], jb->t) ? 3 : 0;
    if (!fin && jb->limit > 3) /* K odd, or a fresh U: it does not finish here */
        step_one(&kk, &xx, w[12 + l], jb->t);
    if (!fin && jb->limit > 4)
        fin = step_one(&kk, &xx, w[16 + l], jb->t) ? 5 : 0;
    k[l] = kk, x[l] = xx, xv[l] = xx;
    return fin;
}

/* The values of the finished candidates i to i + 3 (in fin; the ``real`` ones: every stream's
 * is written, a queued one's again when it finishes) and, for given words, the words used. */
AVX2_INLINE void write_firsts(job *jb, uint64_t s0, unsigned real, __m256i xv, __m256i used,
                              const consts2 *c)
{
    __m256i neg = _mm256_cmpgt_epi64(c->zero, xv);
    __m256i val = _mm256_sub_epi64(_mm256_xor_si256(_mm256_andnot_si256(c->sign, xv), neg),
                                   neg);
    if (real == 0xF) {
        STOREU(jb->z + s0, val);
        if (jb->used)
            STOREU(jb->used + s0, used);
        return;
    }
    uint64_t vs[4], us[4];
    STOREU(vs, val), STOREU(us, used);
    for (int l = 0; l < 4; l++)
        if (real >> l & 1) {
            jb->z[s0 + (uint64_t)l] = (int64_t)vs[l];
            if (jb->used)
                jb->used[s0 + (uint64_t)l] = (int64_t)us[l];
        }
}

/* ``restage`` of the AVX2 engine: each stream takes its first five steps (``first_steps``)
 * before it is queued, and one finished by then is written out instead (almost half of
 * them). The queue's rows QBASE, QK2, QX2 and QW2 hold its column, K and X after five words,
 * and word 5 (lanes start at i = 5, or at the limit where it is below: the stream fails there
 * if it did not finish). A SINK stream is queued whatever it does (they are all alike). */
AVX2_INLINE void restage2_as(job *jb, staging *sb, queue *qu, Py_ssize_t from,
                             const consts2 *c, const int given, const int onecol)
{
    Py_ssize_t q = STAGE - from;
    for (int a = 0; a < QROWS; a++)
        memmove(qu->a[a], qu->a[a] + from, (size_t)q * 8);
    while (q < STAGE) {
        Py_ssize_t n = STAGE - q;
        candidates(jb, sb, n, c->ctab);
        for (Py_ssize_t i = 0; i < n; i += 4) {
            __m256i w[FIRST], k, x, xv, used;
            first_words(jb, sb, i, c, given, onecol, w);
            unsigned f = first_steps(w, c, &k, &x, &xv, &used);
            if (__builtin_expect(f >> 4 != 0, 0)) {
                uint64_t ws[4 * FIRST], kk[4], xx[4], xvs[4], us[4];
                for (int j = 0; j < FIRST; j++)
                    STOREU(ws + 4 * j, w[j]);
                STOREU(kk, k), STOREU(xx, x), STOREU(xvs, xv), STOREU(us, used);
                for (int l = 0; l < 4; l++)
                    if (f >> (4 + l) & 1) {
                        int u = rare_first(kk, xx, xvs, ws, l, jb);
                        f = (f & ~(1u << l)) | (unsigned)(u > 0) << l;
                        us[l] = (uint64_t)u;
                    }
                k = LOADU(kk), x = LOADU(xx), xv = LOADU(xvs), used = LOADU(us);
            }
            __m256i slot = LOADU(sb->cand[CSLOT] + i);
            unsigned real =
                MASK4(_mm256_cmpgt_epi64(c->totals, _mm256_xor_si256(slot, c->sign)));
            unsigned valid = n - i < 4 ? (1u << (n - i)) - 1 : 0xF, keep = valid & ~(f & real);
            write_firsts(jb, sb->cand[CSLOT][i], real & valid, xv, used, c);
            __m256i idx = LOADU(compress_idx[keep]);
            STOREU(qu->a[QH] + q, PERM(LOADU(sb->cand[CH] + i), idx));
            STOREU(qu->a[QBASE] + q, PERM(LOADU(sb->cand[CCOL] + i), idx));
            STOREU(qu->a[QSLOT] + q, PERM(slot, idx));
            STOREU(qu->a[QK2] + q, PERM(k, idx));
            STOREU(qu->a[QX2] + q, PERM(x, idx));
            STOREU(qu->a[QW2] + q, PERM(w[FIRST - 1], idx));
            q += __builtin_popcount(keep);
        }
    }
}

AVX2_TARGET __attribute__((noinline)) static void restage2(job *jb, staging *sb, queue *qu,
                                                           Py_ssize_t from, const consts2 *c,
                                                           int given, int onecol)
{
    if (given)
        restage2_as(jb, sb, qu, from, c, 1, 1);
    else if (onecol)
        restage2_as(jb, sb, qu, from, c, 0, 1);
    else
        restage2_as(jb, sb, qu, from, c, 0, 0);
}

/* ``vstep`` of 4 lanes; returns the lanes to refill as a 4-bit mask. */
AVX2_INLINE unsigned vstep2(lanes2 *L, const consts2 *c, results2 *out, Py_ssize_t b,
                            Py_ssize_t *failed, const int given, const int onecol)
{
    __m256i w = L->w, k = L->k, x = L->x;
    __m256i fail = _mm256_cmpgt_epi64(L->i, c->limm1);
    __m256i f0 = _mm256_cmpeq_epi64(k, c->zero);
    __m256i np2 = _mm256_cmpeq_epi64(_mm256_and_si256(k, c->flag), c->zero);
    __m256i p1 = _mm256_andnot_si256(f0, np2);
    __m256i oddk = _mm256_cmpeq_epi64(_mm256_and_si256(k, c->one), c->one);
    __m256i neg0 = _mm256_andnot_si256(np2, _mm256_cmpeq_epi64(x, c->sign));
    __m256i fin_if0 = _mm256_andnot_si256(_mm256_or_si256(_mm256_or_si256(oddk, neg0), np2),
                                          c->ones);
    __m256i to0_if0 = _mm256_andnot_si256(oddk, _mm256_or_si256(p1, neg0));
    __m256i a = bits2(w, k, x, f0, p1, c);
    __m256i common = _mm256_or_si256(
        f0, _mm256_and_si256(_mm256_cmpgt_epi64(c->thrs, _mm256_xor_si256(w, c->sign)),
                             _mm256_cmpeq_epi64(_mm256_and_si256(k, c->rarek), c->zero)));
    __m256i end = _mm256_andnot_si256(_mm256_or_si256(a, f0), c->ones);
    __m256i odd = _mm256_and_si256(end, oddk);
    __m256i kn = _mm256_sub_epi64(_mm256_blendv_epi8(k, c->one, f0), a);
    kn = _mm256_blendv_epi8(kn, c->two2, odd);
    kn = _mm256_andnot_si256(_mm256_and_si256(end, to0_if0), kn);
    __m256i xn = _mm256_blendv_epi8(x, _mm256_and_si256(w, c->tms), f0);
    xn = _mm256_add_epi64(xn, _mm256_and_si256(c->t, _mm256_andnot_si256(np2, odd)));
    unsigned done = MASK4(_mm256_andnot_si256(a, fin_if0)), rare = MASK4(common) ^ 0xF;
    if (__builtin_expect(rare != 0, 0)) {
        uint64_t ws[4], ko[4], xo[4], kk[4], xx[4];
        STOREU(ws, w), STOREU(ko, k), STOREU(xo, x), STOREU(kk, kn), STOREU(xx, xn);
        done = rare_steps(rare, done, ws, ko, xo, kk, xx, c->tt);
        kn = LOADU(kk), xn = LOADU(xx);
    }
    unsigned failm = MASK4(fail);
    __m256i used = L->i = _mm256_add_epi64(L->i, c->one);
    __m256i live = _mm256_cmpgt_epi64(c->totals, _mm256_xor_si256(L->slot, c->sign));
    if (__builtin_expect(failm != 0, 0)) {
        xn = _mm256_andnot_si256(fail, xn);
        used = _mm256_or_si256(used, fail);
        *failed += __builtin_popcount(failm & MASK4(live));
    }
    done |= failm;
    L->k = kn, L->x = xn;
    if (given) { /* word i of each row; word 0 past the limit (the lane fails there) */
        uint64_t at[4];
        STOREU(at, _mm256_add_epi64(L->h, _mm256_and_si256(L->i, _mm256_cmpgt_epi64(c->limit,
                                                                                    L->i))));
        L->w = _mm256_set_epi64x((long long)c->words[at[3]], (long long)c->words[at[2]],
                                 (long long)c->words[at[1]], (long long)c->words[at[0]]);
    } else
        L->w = next_word2(L, c, onecol);
    out->fin[b] = (unsigned char)(done & MASK4(live));
    STOREU(out->slot[b], L->slot);
    STOREU(out->x[b], xn);
    if (given)
        STOREU(out->used[b], used);
    return done;
}

AVX2_INLINE void consts2_of(consts2 *c, const job *jb, const uint64_t *ctab)
{
    int s = __builtin_ctzll(jb->t);
    c->zero = _mm256_setzero_si256(), c->one = _mm256_set1_epi64x(1);
    c->start = _mm256_set1_epi64x(jb->limit < FIRST - 1 ? jb->limit : FIRST - 1);
    c->ones = _mm256_set1_epi64x(-1);
    c->five_ok = _mm256_set1_epi64x(jb->limit > 4 ? -1 : 0); /* word 4 within the limit */
    c->three = _mm256_set1_epi64x(3), c->five = _mm256_set1_epi64x(5);
    c->kbits = _mm256_set1_epi64x(TABLE - 1);
    c->two2 = _mm256_set1_epi64x((long long)(2 | P2));
    c->rarek = _mm256_set1_epi64x((long long)~(uint64_t)((TABLE - 1) | P2));
    c->thrs = _mm256_set1_epi64x((long long)((0 - ((uint64_t)TABLE << s)) ^ SIGN));
    c->tm = _mm256_set1_epi64x((long long)(jb->t - 1));
    c->tms = _mm256_set1_epi64x((long long)((jb->t - 1) | SIGN));
    c->sign = _mm256_set1_epi64x((long long)SIGN), c->flag = _mm256_set1_epi64x((long long)P2);
    c->s = _mm_cvtsi64_si128(s), c->t = _mm256_set1_epi64x((long long)jb->t);
    c->limit = _mm256_set1_epi64x(jb->limit), c->limm1 = _mm256_set1_epi64x(jb->limit - 1);
    c->totals = _mm256_set1_epi64x((long long)((uint64_t)(jb->rows * jb->cols) ^ SIGN));
    c->m1 = _mm256_set1_epi64x((long long)0xBF58476D1CE4E5B9ULL);
    c->m2 = _mm256_set1_epi64x((long long)0x94D049BB133111EBULL);
    /* the multipliers with their 32-bit halves swapped (``mulc``) */
    c->m1s = _mm256_shuffle_epi32(c->m1, 0xB1), c->m2s = _mm256_shuffle_epi32(c->m2, 0xB1);
    c->hi32 = _mm256_set1_epi64x((long long)0xFFFFFFFF00000000ULL);
    c->cachedm1 = _mm256_set1_epi64x(CACHED - 1);
    c->base = _mm256_set1_epi64x((long long)jb->base);
    c->region = _mm256_set1_epi64x((long long)jb->region);
    c->regionh = _mm256_srli_epi64(c->region, 32);
    for (int d = 0; d < 6; d++)
        c->d[d] = LOADU(div32[d]);
    c->four = _mm256_set1_epi64x(4);
    c->inv3 = _mm256_set1_epi64x((long long)0xAAAAAAAAAAAAAAABULL); /* 3's inverse mod 2^64 */
    c->inv3s = _mm256_shuffle_epi32(c->inv3, 0xB1);
    c->lim3s = _mm256_set1_epi64x((long long)(UINT64_MAX / 3 ^ SIGN));
    c->key = _mm256_set1_epi64x((long long)jb->key);
    c->golden = _mm256_set1_epi64x((long long)GOLDEN);
    c->goldens = _mm256_shuffle_epi32(c->golden, 0xB1);
    c->tt = jb->t;
    c->words = jb->words, c->ctab = ctab;
}

/* ``flush`` of the AVX2 engine's log */
AVX2_TARGET static void flush2(job *jb, results2 *out, Py_ssize_t blocks)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        unsigned f = out->fin[b];
        __m256i idx = LOADU(compress_idx[f]);
        STOREU(out->cslot + n, PERM(LOADU(out->slot[b]), idx));
        STOREU(out->cx + n, PERM(LOADU(out->x[b]), idx));
        if (jb->used)
            STOREU(out->cused + n, PERM(LOADU(out->used[b]), idx));
        n += __builtin_popcount(f);
    }
    for (Py_ssize_t q = 0; q < n; q++)
        jb->z[out->cslot[q]] = value_of(out->cx[q]);
    if (jb->used)
        for (Py_ssize_t q = 0; q < n; q++)
            jb->used[out->cslot[q]] = out->cused[q];
}

/* ``run_lanes_as`` of the AVX2 engine */
AVX2_INLINE void run_lanes2_as(job *jb, staging *sb, results2 *out, const uint64_t *ctab,
                               const int given, const int onecol)
{
    consts2 c;
    Py_ssize_t total = jb->rows * jb->cols, next[GROUPS2], e = 0, failed = 0;
    lanes2 L[GROUPS2];
    unsigned m[GROUPS2];
    consts2_of(&c, jb, ctab);
    sb->s = sb->r = sb->j = 0;
    for (int g = 0; g < GROUPS2; g++) {
        L[g].h = L[g].col = L[g].slot = L[g].i = L[g].w = L[g].k = L[g].x = c.zero;
        m[g] = 0xF;
        next[g] = STAGE;
    }
    for (;;) {
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS2; g++) {
            if (next[g] + 4 > STAGE) {
                restage2(jb, sb, &sb->q[g], next[g], &c, given, onecol);
                next[g] = 0;
            }
            refill2(&L[g], m[g], &sb->q[g], &next[g], &c, onecol);
        }
        if (sb->s == total) { /* every stream queued: done when none is queued or running */
            unsigned running = 0;
            for (int g = 0; g < GROUPS2; g++)
                running |= MASK4(_mm256_cmpgt_epi64(c.totals,
                                                    _mm256_xor_si256(L[g].slot, c.sign)))
                    | (next[g] == STAGE || sb->q[g].a[QSLOT][next[g]] != SINK);
            if (!running)
                break;
        }
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS2; g++)
            m[g] = vstep2(&L[g], &c, out, e * GROUPS2 + g, &failed, given, onecol);
        if (++e == LOG) {
            flush2(jb, out, LOG * GROUPS2);
            e = 0;
        }
    }
    flush2(jb, out, e * GROUPS2);
    jb->failed += failed;
}

/* The AVX2 engine over a whole job, with the agents' counters of each column mixed
 * beforehand (``ctab``: column j's first CACHED at j CACHED); -1 when out of memory. */
AVX2_TARGET static int run_lanes2(job *jb, staging *sb, results2 *out)
{
    if (!jb->h) {
        run_lanes2_as(jb, sb, out, NULL, 1, 1);
        return 0;
    }
    uint64_t *ctab = PyMem_RawMalloc((size_t)jb->cols * CACHED * 8);
    if (ctab == NULL)
        return -1;
    for (Py_ssize_t j = 0; j < jb->cols; j++)
        for (Py_ssize_t i = 0; i < CACHED; i++)
            ctab[j * CACHED + i] = mix(jb->base + (uint64_t)j * jb->region + (uint64_t)i);
    if (jb->cols == 1)
        run_lanes2_as(jb, sb, out, ctab, 0, 1);
    else
        run_lanes2_as(jb, sb, out, ctab, 0, 0);
    PyMem_RawFree(ctab);
    return 0;
}
#endif

/* ------------------------------------------------------------------ which engine */

/* the engines, by name; ``engine_in_use`` runs every job not asked for the stream engine (the
 * best this CPU runs, chosen at import; ``use_engine`` changes it) */
enum { E_STREAMS, E_AVX2, E_AVX512, E_COUNT };
static const char *const ENGINE_NAMES[E_COUNT] = {"streams", "avx2", "avx512"};
static int engine_in_use = E_STREAMS;

static int can_run(int e)
{
#ifdef HAVE_LANES
    if (e == E_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
            && __builtin_cpu_supports("popcnt");
    if (e == E_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#endif
    return e == E_STREAMS;
}

/* ------------------------------------------------------------------ Python */

/* The job by engine e (E_STREAMS for a job asked for the stream engine). A lane engine needs
 * streams of at least 3 words, and holds a stream's sign and |X| = U + t V in one word, below
 * 2^63 for scales up to 2^32 (the mechanisms') and streams of fewer than 2^30 words (V is
 * below the words); other jobs take the stream engine. -1 when out of memory. Runs without
 * the interpreter's lock. */
static int run_job(job *jb, int e)
{
#ifdef HAVE_LANES
    if (e != E_STREAMS && jb->limit >= 3 && jb->limit < (1 << 30) && jb->t <= (1ULL << 32)) {
        staging *sb = PyMem_RawMalloc(sizeof(staging));
        void *out = PyMem_RawMalloc(sizeof(results) > sizeof(results2) ? sizeof(results)
                                                                         : sizeof(results2));
        int ok = sb != NULL && out != NULL;
        if (ok && jb->rows * jb->cols > 0) {
            if (e == E_AVX512)
                run_lanes(jb, sb, out);
            else if (run_lanes2(jb, sb, out) < 0)
                ok = 0;
        }
        PyMem_RawFree(out);
        PyMem_RawFree(sb);
        return ok ? 0 : -1;
    }
#endif
    (void)e;
    return run_streams(jb);
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
    int scalar = 0;
    if (!PyArg_ParseTuple(args, "OnKOO|p", &words_o, &width, &t, &z_o, &used_o, &scalar))
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
        job jb = {NULL, (const uint64_t *)words.buf, rows, 1, width, 0, 0, (uint64_t)t,
                  (int64_t *)z.buf, (int64_t *)used.buf, 0, 0, 0};
        int rc, e = scalar ? E_STREAMS : engine_in_use;
        Py_BEGIN_ALLOW_THREADS
        rc = run_job(&jb, e);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            PyErr_NoMemory();
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
    PyObject *key_o = Py_None;
    int scalar = 0;
    if (!PyArg_ParseTuple(args, "OKKnKKO|pO", &h_o, &rnd, &first, &cols, &region, &t, &z_o,
                          &scalar, &key_o))
        return NULL;
    unsigned long long key = 0;
    if (key_o != Py_None) {
        key = PyLong_AsUnsignedLongLong(key_o);
        if (PyErr_Occurred())
            return NULL;
    }
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
    job jb = {(const uint64_t *)h.buf, NULL, rows, cols, (Py_ssize_t)region,
              (rnd << 32) + first + 0xD1B54A32D192ED03ULL, region, t, (int64_t *)z.buf, NULL, 0,
              key_o != Py_None, key};
    if (z.len != h.len * cols) {
        PyErr_Format(PyExc_ValueError, "dlap_agents: z must hold rows x cols = %zd x %zd values",
                     rows, cols);
    } else {
        int rc, e = scalar ? E_STREAMS : engine_in_use;
        Py_BEGIN_ALLOW_THREADS
        rc = run_job(&jb, e);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            PyErr_NoMemory();
    }
    PyBuffer_Release(&z);
    PyBuffer_Release(&h);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(jb.failed);
}

static PyObject *engine(PyObject *self, PyObject *args)
{
    (void)self, (void)args;
    return PyUnicode_FromString(ENGINE_NAMES[engine_in_use]);
}

static PyObject *engines(PyObject *self, PyObject *args)
{
    (void)self, (void)args;
    const char *names[E_COUNT];
    int n = 0;
    for (int e = E_COUNT - 1; e >= 0; e--) /* the fastest first */
        if (can_run(e))
            names[n++] = ENGINE_NAMES[e];
    PyObject *out = PyTuple_New(n);
    for (int i = 0; out != NULL && i < n; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, name);
    }
    return out;
}

static PyObject *use_engine(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    for (int e = 0; e < E_COUNT; e++)
        if (strcmp(name, ENGINE_NAMES[e]) == 0) {
            if (!can_run(e)) {
                PyErr_Format(PyExc_ValueError, "use_engine: this CPU cannot run the %s engine",
                             name);
                return NULL;
            }
            int before = engine_in_use;
            engine_in_use = e;
            return PyUnicode_FromString(ENGINE_NAMES[before]);
        }
    PyErr_Format(PyExc_ValueError, "use_engine: %s is not one of avx512, avx2, streams", name);
    return NULL;
}

static PyMethodDef methods[] = {
    {"dlap_agents", dlap_agents, METH_VARARGS,
     "dlap_agents(h, rnd, first, cols, region, t, z, scalar=False, key=None): exact discrete "
     "Laplace of scale t for every agent key h[i] and column j, from the agent's words first + "
     "j region + 0, 1, ... of round rnd (made here, as rng.bits_at gives them); with a stream "
     "key, h[i] is agent i's id and its key mix(key + h[i] GOLDEN) (rng.agent_keys). Returns "
     "how many streams went past their region (their z is 0). scalar: the stream engine, "
     "whatever the CPU."},
    {"dlap", dlap, METH_VARARGS,
     "dlap(words, width, t, z, used, scalar=False): exact discrete Laplace of scale t per row "
     "of words. scalar: the stream engine, whatever the CPU."},
    {"engine", engine, METH_NOARGS,
     "engine(): the engine that runs the calls not asked for the stream engine: 'avx512' or "
     "'avx2' (the lane engine, on CPUs with that instruction set) or 'streams'."},
    {"engines", engines, METH_NOARGS,
     "engines(): the engines this CPU runs, fastest first (the first is the one in use after "
     "import)."},
    {"use_engine", use_engine, METH_VARARGS,
     "use_engine(name): run the calls not asked for the stream engine by engine name (one of "
     "engines(): for tests and benchmarks; every engine gives the same values); returns the "
     "name of the one used before."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dlapc",
    "The exact discrete Laplace sampler of ldpsim (see protocols/mechanisms/dlap.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dlapc(void)
{
#ifdef HAVE_LANES
    __builtin_cpu_init();
    div_tables();
    avx2_tables();
#endif
    for (int e = E_COUNT - 1; e > 0 && engine_in_use == E_STREAMS; e--)
        if (can_run(e))
            engine_in_use = e;
    return PyModule_Create(&module);
}
