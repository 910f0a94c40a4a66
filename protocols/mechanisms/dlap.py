"""Exact discrete Laplace sampling with integer arithmetic (Canonne, Kamath & Steinke, 2020).

From Canonne, Kamath & Steinke, 2020, "The Discrete Gaussian for Differential Privacy"
(NeurIPS; arXiv:2004.00010), as OpenDP implements it (``sample_discrete_laplace``,
``sample_geometric_exp_fast``, ``sample_bernoulli_exp`` in ``rust/src/traits/samplers/cks20``).
``sample`` draws Z with

    P(Z = z) = (1 - α) / (1 + α) · α^|z|,   α = e^(-1/t),   z ∈ ℤ

for an integer scale t, a power of two, from random 64-bit words. Every decision is an exact
comparison of integers; nothing is rounded and no float is compared:

* **Bernoulli(n/d)** (``bernoulli_step``): a word w below 2^64 - (2^64 mod d) gives the uniform
  integer w mod d (the accepted words are an exact multiple of d), and the bit is
  [w mod d < n]; any other word is rejected and the next one tried.
* **Bernoulli(exp(-γ))**, γ = n/d rational (CKS20 Algorithm 1, ``bernoulli_exp``): for γ ≤ 1,
  K = 1, 2, ... while Bernoulli(γ/K) comes out 1; the result is [K odd], which has probability
  Σ_k (-γ)^k / k! = e^(-γ). For γ > 1, as OpenDP: Bernoulli(exp(-1)) while γ > 1, each 1
  lowering γ by 1 (a 0 is the answer 0), then Algorithm 1 at the γ ∈ (0, 1] left.
* **Discrete Laplace of scale t** (CKS20 Algorithm 2 with s = 1, in OpenDP's arrangement):
  U uniform on {0 .. t-1} (the low log2 t bits of a word), kept with probability e^(-U/t)
  (Algorithm 1 with γ = U/t) or redrawn; V the number of Bernoulli(exp(-1)) successes before
  the first failure (Algorithm 1 with γ = 1, whose first draw, Bernoulli(1/1), is always 1 and
  takes no word); X = U + tV, so P(X = x) ∝ e^(-x/t) on x ≥ 0; the sign is bit 63 of U's word
  (OpenDP draws it apart; bit 63 is independent of U, which is bits 0 .. log2 t - 1, and of
  whether U is kept); a negative zero is rejected and everything redrawn, which leaves
  P(Z = z) ∝ α^|z| on all of ℤ.

Every step of the state machine takes exactly one word, so ``sample`` runs all the values of a
block side by side: value s reads its own words, from its own stream of a ``WordSource``
(``protocols.words``), and its Z depends on those words only -- the same drawn alone, in any
batch or in any order. A stream that has not finished within its first words is run again from
its first word with more of them (the result is a function of the word sequence, so this is the
same as having had them all at once).

Words used per value: (2e - 1)/(1 - 1/e) = 7.02 on average for t = 2^20 (U: 1 + (e - 1) words
per attempt, 1/(1 - 1/e) attempts; V: e - 1 words per Bernoulli(exp(-1)), 1/(1 - 1/e) of them;
rejected words and negative zeros add less than 10^-6). A stream that would need more than its
source's ``limit`` (2^16 for the agents' regions) raises instead: by Markov's inequality on
E[1.25^N] (``words_tail_bound``), that has probability below 10^-6000, and it depends only on
the words, never on the value the noise is added to.

The state machine runs in C (``protocols/_dlapc.c``, built at install where a compiler exists)
or in numpy, with the same words and the same result; ``LDPSIM_RNG=numpy`` chooses numpy. On
CPUs with AVX-512 or AVX2 (chosen at run time) the C code runs 16 streams side by side, one
word per step each, with masks instead of branches (every Bernoulli outcome is a coin flip that
a branch predictor cannot guess) and each Bernoulli(n/d) decided without dividing (d = tK or K,
t a power of two: a divisibility test by K's odd part, Granlund & Montgomery 1994); the rare
words that could be rejected (w >= 2^64 - d) and K >= 8 take the one-stream step exactly. The
same words give the same values on any CPU.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.accel import Accelerator
from ldpsim.protocols.words import REGION, WORD_BASE, AgentWords, WordSource

from ldpsim import environment

#: the state machine in use: compiled or numpy, the same results; ``LDPSIM_RNG=numpy``
#: chooses numpy
DLAP = Accelerator.load("discrete Laplace sampler", "ldpsim.protocols._dlapc", environment.RNG,
                        "protocols/_dlapc.c")

#: words first given to each stream (one that needs more gets twice as many, and so on): 7.0
#: are used on average, 17% of the streams need more than 10
FIRST_WIDTH = 10
#: streams per block of work (a block's words stay in cache), at least ``MIN_ROWS`` rows
CHUNK = 1 << 15
MIN_ROWS = 64

_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
_ZERO, _ONE, _TWO = np.uint64(0), np.uint64(1), np.uint64(2)
_SIGN = np.uint64(63)


def check_scale(t: int) -> int:
    """``t`` as an int if it is a power of two >= 1 (U is a slice of a word's low bits)."""
    t = int(t)
    if t < 1 or t & (t - 1) or t > 1 << 32:
        raise ValueError(f"discrete Laplace: the scale t must be a power of two in [1, 2^32], "
                         f"got {t}")
    return t


# ------------------------------------------------------------------------ the primitives


def bernoulli_step(w: np.ndarray, num: np.ndarray, den: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One word's try at Bernoulli(num/den), elementwise over uint64 arrays (den >= 1).

    Returns (accepted, bit): the word is accepted when w < 2^64 - (2^64 mod den), i.e.
    w <= 2^64 - 1 - r with r = (2^64 - den) mod den; then bit = [w mod den < num], exactly
    Bernoulli(num/den) (the 2^64 - r accepted words fold evenly onto 0 .. den - 1). A rejected
    word is spent and the next one tried. Only words w >= 2^64 - den can be rejected (r < den),
    so r is computed for those alone.
    """
    ok = w < _ZERO - den
    top = np.flatnonzero(~ok)
    if len(top):
        d = den[top] if np.ndim(den) else den
        ok[top] = w[top] <= _MAX - (_ZERO - d) % d
    return ok, (w % den) < num


def _run_rows(words: np.ndarray, step, state: dict[str, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
    """Run a one-word-per-step state machine over the rows of ``words``.

    ``step(w, state) -> (done, result)`` advances the active rows' ``state`` (arrays, one entry
    per active row) by their next word ``w``. Returns (result, words used; -1 where a row did
    not finish within the row's words).
    """
    n, width = words.shape
    out = np.zeros(n, dtype=np.int64)
    used = np.full(n, -1, dtype=np.int64)
    act = np.arange(n)
    for i in range(width):
        if not len(act):
            break
        done, res = step(words[act, i], state)
        if done.any():
            fin = act[done]
            out[fin], used[fin] = res[done], i + 1
            keep = ~done
            act = act[keep]
            for name, arr in state.items():
                state[name] = arr[keep]
    return out, used


def bernoulli_rational(words: np.ndarray, num: int | np.ndarray, den: int | np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Bernoulli(num/den) per row of ``words`` (uint64, shape (rows, width)) by rejection.

    Returns (bits as int64, words used; -1 where a row's words were all rejected).
    """
    n = words.shape[0]
    st = {"num": np.broadcast_to(np.asarray(num, dtype=np.uint64), (n,)).copy(),
          "den": np.broadcast_to(np.asarray(den, dtype=np.uint64), (n,)).copy()}

    def step(w, s):
        ok, bit = bernoulli_step(w, s["num"], s["den"])
        return ok, bit.astype(np.int64)

    return _run_rows(words, step, st)


def bernoulli_exp(words: np.ndarray, num: int | np.ndarray, den: int | np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Bernoulli(exp(-num/den)) per row of ``words`` (CKS20 Algorithm 1), num >= 0, den >= 1.

    As OpenDP's ``sample_bernoulli_exp``: while γ = num/den > 1, one Bernoulli(exp(-1)) (a 0
    ends with 0, a 1 lowers γ by 1); then Bernoulli(exp(-γ)) for the γ ∈ [0, 1] left. Each is
    Algorithm 1: K = 1, 2, ... while Bernoulli(γ/K) gives 1; the result is [K odd]. Returns
    (bits as int64, words used; -1 where a row did not finish within its words).
    """
    n = words.shape[0]
    num = np.broadcast_to(np.asarray(num, dtype=np.uint64), (n,)).copy()
    den = np.broadcast_to(np.asarray(den, dtype=np.uint64), (n,)).copy()
    pre = np.where(num > _ZERO, (num - _ONE) // den, _ZERO)  # stages at γ = 1 first
    st = {"pre": pre, "num": num - pre * den, "den": den, "k": np.ones(n, dtype=np.uint64)}

    def step(w, s):
        at_one = s["pre"] > _ZERO
        g_num = np.where(at_one, _ONE, s["num"])
        g_den = np.where(at_one, _ONE, s["den"])
        ok, a = bernoulli_step(w, g_num, g_den * s["k"])
        s["k"] = np.where(ok & a, s["k"] + _ONE, s["k"])
        end = ok & ~a  # this stage's Algorithm 1 returns [K odd]
        odd = (s["k"] & _ONE) == _ONE
        done = end & (~odd | ~at_one)
        nxt = end & odd & at_one
        s["pre"] = np.where(nxt, s["pre"] - _ONE, s["pre"])
        s["k"] = np.where(nxt, _ONE, s["k"])
        return done, odd.astype(np.int64)

    return _run_rows(words, step, st)


# ------------------------------------------------------------------ the discrete Laplace


def _dlap_step(t: int):
    """The one-word step of the discrete Laplace state machine (``_kernel_numpy``).

    Phases: 0, a fresh U and sign from the word; 1, Algorithm 1 at γ = U/t (Bernoulli(U/(tK))
    for K = 1, 2, ...): a 1 goes on, a 0 ends it, keeping U when K is odd (phase 2, K = 2) and
    drawing a new U when K is even; 2, Algorithm 1 at γ = 1 from K = 2 (Bernoulli(1/K)): at the
    end, K odd is one more success (V += 1, K = 2 again), K even ends V and the value is
    ±(U + tV), or a new attempt for a negative zero.
    """
    tu = np.uint64(t)
    mask = np.uint64(t - 1)

    def step(w, s):
        ph, k = s["ph"], s["k"]
        fresh = ph == 0
        in_u = ph == 1
        num = np.where(in_u, s["u"], _ONE)
        den = np.where(in_u, k * tu, np.where(fresh, _ONE, k))
        ok, a = bernoulli_step(w, num, den)
        ok &= ~fresh
        more = ok & a
        end = ok & ~a
        odd = (k & _ONE) == _ONE
        keep_u = end & in_u & odd
        new_u = end & in_u & ~odd
        success = end & ~in_u & odd
        stop = end & ~in_u & ~odd
        x = s["u"] + tu * s["v"]
        neg = s["neg"]
        retry = stop & neg & (x == _ZERO)
        done = stop & ~retry
        res = np.where(neg, -x.astype(np.int64), x.astype(np.int64))
        s["u"] = np.where(fresh, w & mask, s["u"])
        s["neg"] = np.where(fresh, (w >> _SIGN) == _ONE, neg)
        s["v"] = np.where(keep_u | retry, _ZERO, np.where(success, s["v"] + _ONE, s["v"]))
        s["k"] = np.where(fresh, _ONE, np.where(more, k + _ONE,
                                                np.where(keep_u | success, _TWO, k)))
        s["ph"] = np.where(fresh, np.int8(1), np.where(new_u | retry, np.int8(0),
                                                      np.where(keep_u, np.int8(2), ph)))
        return done, res

    return step


def _kernel_numpy(words: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Z per row of ``words`` (uint64, shape (rows, width)): (Z as int64, words used; -1 where
    a row did not finish within its words). The state machine of ``_dlapc.c``, one word per
    step for every row still running (``_dlap_step``)."""
    n = words.shape[0]
    st = {"ph": np.zeros(n, dtype=np.int8), "u": np.zeros(n, dtype=np.uint64),
          "neg": np.zeros(n, dtype=bool), "v": np.zeros(n, dtype=np.uint64),
          "k": np.ones(n, dtype=np.uint64)}
    return _run_rows(words, _dlap_step(t), st)


def kernel(words: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Z per row of ``words`` by the implementation in use (compiled or numpy, the same
    results): (Z as int64, words used; -1 where a row did not finish within its words)."""
    t = check_scale(t)
    words = np.ascontiguousarray(words, dtype=np.uint64)
    if words.ndim != 2:
        raise ValueError(f"discrete Laplace: words must be (rows, width), got {words.shape}")
    if DLAP.module is None:
        return _kernel_numpy(words, t)
    z = np.empty(words.shape[0], dtype=np.int64)
    used = np.empty(words.shape[0], dtype=np.int64)
    DLAP.module.dlap(words, words.shape[1], t, z, used)
    return z, used


def sample(source: WordSource, rows: int, cols: int, t: int) -> np.ndarray:
    """Discrete Laplace Z of scale ``t`` (CKS20 Algorithm 2), shape (rows, cols), int64.

    Value (i, j) reads the words of stream (i, j) of ``source``: first ``FIRST_WIDTH``, then,
    while it has not finished, the next as many again, and runs again from its first word (a
    source hands out each word once; the value is a function of the word sequence). Raises
    RuntimeError when a stream would need more than ``source.limit`` words (probability below
    10^-6000). The agents' own words (``AgentWords``) are made inside the compiled sampler
    where it was built, each as its stream needs it (and with one stream key, the agents' keys
    from their ids too); the same words, the same values.
    """
    t = check_scale(t)
    out = np.empty((rows, cols), dtype=np.int64)
    if not rows or not cols:
        return out
    if isinstance(source, AgentWords) and DLAP.module is not None:
        return _sample_agents(source, rows, cols, t, out)
    per = max(MIN_ROWS, CHUNK // cols)
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        srow = np.repeat(np.arange(r0, r1), cols)
        scol = np.tile(np.arange(cols), r1 - r0)
        out[r0:r1] = _sample_streams(source, srow, scol, t).reshape(r1 - r0, cols)
    return out


def _sample_agents(source: AgentWords, rows: int, cols: int, t: int, out: np.ndarray
                   ) -> np.ndarray:
    """``sample`` of the agents' words in one compiled pass (``_dlapc.dlap_agents``). With one
    stream key for the block, the agents' own keys (``rng.agent_keys``) are made inside it
    too, from their ids."""
    agents = np.asarray(source.agents)
    if isinstance(source.key, np.ndarray):  # one key per agent, or a StreamKeys
        h, key = np.ascontiguousarray(rngm.agent_keys(source.key, agents), dtype=np.uint64), None
    else:  # the ids as uint64 (as agent_keys casts them), and the key
        h, key = _as_words(agents), int(np.uint64(source.key))
    if len(h) != rows:
        raise ValueError(f"discrete Laplace: {rows} rows of values for {len(h)} agents")
    source.check_columns(cols)
    first = WORD_BASE + source.column * REGION
    failed = DLAP.module.dlap_agents(h, int(source.rnd), first, cols, REGION, t, out, False,
                                     key)
    if failed:
        raise _too_many_words(failed, REGION)
    return out


def _as_words(a: np.ndarray) -> np.ndarray:
    """A contiguous uint64 array of the integers ``a`` (a view where they are 64-bit)."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype in (np.int64, np.uint64):
        return a.view(np.uint64)
    return a.astype(np.uint64)


def _too_many_words(count: int, limit: int) -> RuntimeError:
    return RuntimeError(
        f"discrete Laplace: {count} value(s) need more than {limit} random words "
        "(probability below 10^-6000 per value; the words, not the values, decide it)")


def _sample_streams(source: WordSource, srow: np.ndarray, scol: np.ndarray, t: int
                    ) -> np.ndarray:
    """Z of the streams (srow[s], scol[s]), growing the words of those that need more."""
    limit = source.limit
    width = FIRST_WIDTH if limit is None else min(FIRST_WIDTH, limit)
    words = source.words(srow, scol, 0, width)
    z, used = kernel(words, t)
    left = used < 0
    pend, words = np.flatnonzero(left), words[left]
    while len(pend):
        if limit is not None and width >= limit:
            raise _too_many_words(len(pend), limit)
        grow = width if limit is None else min(width, limit - width)
        words = np.concatenate([words, source.words(srow[pend], scol[pend], width, grow)],
                               axis=1)
        width += grow
        zp, up = kernel(words, t)
        z[pend] = zp
        left = up < 0
        pend, words = pend[left], words[left]
    return z


def pmf(z: np.ndarray, t: float) -> np.ndarray:
    """P(Z = z) = (1 - α)/(1 + α) α^|z|, α = e^(-1/t) (= tanh(1/(2t)) e^(-|z|/t))."""
    return math.tanh(0.5 / t) * np.exp(-np.abs(np.asarray(z, dtype=np.float64)) / t)


def words_tail_bound(n: int, t: int, limit: int, s: float = 1.25) -> float:
    """An upper bound on log10 P(a value needs >= ``n`` words), by Markov's inequality on
    E[s^N] (N the words one value uses, CKS20 Algorithms 1-2 as run here, scale ``t``, at most
    ``limit`` words per stream).

    A Bernoulli draw with denominator d takes a geometric number of words, rejection probability
    below d / 2^64 <= r = t ``limit`` / 2^64 (K < ``limit``), so E[s^words] <= s' =
    s (1 - r) / (1 - s r), independently of the bit it gives. Algorithm 1 from K = 1 at γ ends at
    K = k with P_γ(k) = γ^(k-1)/(k-1)! - γ^k/k! after k draws; from K = 2 at γ = 1 (V's draws)
    with P(k) = 1/(k-1)! - 1/k! after k - 1. An attempt at U gives A = E_U[s Σ_(k even)
    P_γ(k) s'^k] (U redrawn) and B likewise over odd k (U kept), U uniform on 0 .. t-1; V gives
    C (a success, k odd) and E (the end, k even). A negative zero (sign, U = 0 kept, V = 0)
    restarts, with weight R = s s' E / (2 t (1 - A)). Then

        E[s^N] <= B / (1 - A) * E / (1 - C) / (1 - R)

    (each series to k = 40; the rest is below 10^-40 and is added).
    """
    t = check_scale(t)
    r = t * float(limit) / 2.0**64
    sp = s * (1 - r) / (1 - s * r)
    ks = np.arange(1, 41, dtype=np.float64)
    lfact = np.array([math.lgamma(k + 1) for k in ks])
    tail = 1e-40
    a = b = 0.0
    for u0 in range(0, t, 1 << 16):
        g = (np.arange(u0, min(t, u0 + (1 << 16)), dtype=np.float64) / t)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.log(g)
            # γ^(k-1)/(k-1)! and γ^k/k! (0^0 = 1)
            p_ge = np.where(ks == 1, 1.0, np.exp((ks - 1) * lg - lfact + np.log(ks)))
            p_gt = np.exp(ks * lg - lfact)
        w = (p_ge - p_gt) * sp**ks
        odd = (ks % 2) == 1
        a += float(w[:, ~odd].sum())
        b += float(w[:, odd].sum())
    a, b = s * a / t + tail, s * b / t + tail
    k2 = ks[1:]
    p1 = np.exp(-lfact[:-1]) - np.exp(-lfact[1:])  # 1/(k-1)! - 1/k!, k = 2 .. 40
    w1 = p1 * sp ** (k2 - 1)
    c = float(w1[(k2 % 2) == 1].sum()) + tail
    e = float(w1[(k2 % 2) == 0].sum()) + tail
    if a >= 1 or c >= 1:
        raise ValueError(f"words_tail_bound: s = {s} is too large for a finite bound")
    rho = s * sp * e / (2 * t * (1 - a))
    if rho >= 1:
        raise ValueError(f"words_tail_bound: s = {s} is too large for a finite bound")
    moment = b / (1 - a) * e / (1 - c) / (1 - rho)
    return math.log10(moment) - n * math.log10(s)
