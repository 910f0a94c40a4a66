"""SipHash-2-4, vectorised: the pseudorandom function every agent's keys come from.

SipHash (Aumasson & Bernstein, INDOCRYPT 2012) is a keyed PRF with a 128-bit key and a 64-bit
output, designed to be secure as a MAC and a PRF, and fast on short inputs. ldpsim evaluates it
on one 8-byte word per agent (``prf``): an agent's device key, and from it each run's coin key and
each data set's data key (``protocols.keys``). Because it is a PRF, what one agent's keys are
tells nothing about another's -- unlike a fast mixer such as SplitMix64, whose finaliser is a
bijection that a disclosed output inverts.

``prf`` runs in the optional compiled extension (``protocols/_prfc.c``, with clones for AVX-512
and AVX2 where the compiler offers them) or in numpy, with the same bits; ``LDPSIM_RNG=numpy``
chooses numpy. ``siphash24`` is the general form (any message length, numpy only), checked
against the reference implementation's published test vectors.
"""

from __future__ import annotations

import numpy as np
from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the compiled SipHash in use (one-word messages), or numpy's, the same bits
SIPHASH = Accelerator.load("siphash", "ldpsim.protocols._prfc", environment.RNG,
                           "protocols/_prfc.c")

_C0 = np.uint64(0x736F6D6570736575)
_C1 = np.uint64(0x646F72616E646F6D)
_C2 = np.uint64(0x6C7967656E657261)
_C3 = np.uint64(0x7465646279746573)
_FF = np.uint64(0xFF)
_CHUNK = 1 << 14  # rows per numpy pass (the state stays in cache)


def _rotl(x: np.ndarray, b: int, tmp: np.ndarray) -> None:
    """x = rotate-left(x, b), in place (tmp: scratch of x's shape)."""
    np.right_shift(x, np.uint64(64 - b), out=tmp)
    np.left_shift(x, np.uint64(b), out=x)
    x |= tmp


def _rounds(v: list[np.ndarray], n: int, tmp: np.ndarray) -> None:
    """``n`` SipRounds on the state ``v`` (four uint64 arrays), in place."""
    v0, v1, v2, v3 = v
    for _ in range(n):
        v0 += v1
        _rotl(v1, 13, tmp)
        v1 ^= v0
        _rotl(v0, 32, tmp)
        v2 += v3
        _rotl(v3, 16, tmp)
        v3 ^= v2
        v0 += v3
        _rotl(v3, 21, tmp)
        v3 ^= v0
        v2 += v1
        _rotl(v1, 17, tmp)
        v1 ^= v2
        _rotl(v2, 32, tmp)


def siphash24(k0: np.ndarray | int, k1: np.ndarray | int, words: np.ndarray,
              length: int) -> np.ndarray:
    """SipHash-2-4 of ``length``-byte messages, one per row (numpy; the general form).

    Parameters
    ----------
    k0, k1 : uint64 scalar or array of shape (N,)
        The key's two little-endian 64-bit halves (key bytes 0-7 and 8-15).
    words : uint64 array, shape (N, W) with 8 W >= length
        Each row's message, little-endian 8-byte words; bytes past ``length`` are ignored.
    length : int
        The message length in bytes.

    Returns
    -------
    uint64 array of shape (N,): the 64-bit tag (read little-endian from the reference's bytes).
    """
    words = np.asarray(words, dtype=np.uint64)
    n = words.shape[0]
    full, tail = divmod(int(length), 8)
    if words.ndim != 2 or words.shape[1] * 8 < length:
        raise ValueError(f"words must be (N, W) with 8 W >= {length}, got {words.shape}")
    k0 = np.broadcast_to(np.asarray(k0, dtype=np.uint64), (n,))
    k1 = np.broadcast_to(np.asarray(k1, dtype=np.uint64), (n,))
    v = [k0 ^ _C0, k1 ^ _C1, k0 ^ _C2, k1 ^ _C3]
    tmp = np.empty(n, dtype=np.uint64)
    last = np.full(n, np.uint64((length & 0xFF) << 56), dtype=np.uint64)
    if tail:
        last |= words[:, full] & np.uint64((1 << (8 * tail)) - 1)
    for m in [words[:, i] for i in range(full)] + [last]:
        v[3] ^= m
        _rounds(v, 2, tmp)
        v[0] ^= m
    v[2] ^= _FF
    _rounds(v, 4, tmp)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _prf_numpy(k0: np.ndarray, k1: np.ndarray, m: np.ndarray, out: np.ndarray) -> None:
    """``prf`` with numpy, a cache-sized chunk of rows at a time."""
    for s in range(0, len(m), _CHUNK):
        e = min(s + _CHUNK, len(m))
        sl = slice(s, e)
        kk0 = k0[sl] if k0.shape[0] > 1 else k0
        kk1 = k1[sl] if k1.shape[0] > 1 else k1
        out[sl] = siphash24(kk0, kk1, m[sl, None], 8)


def prf(k0: np.ndarray | int, k1: np.ndarray | int, m: np.ndarray | int) -> np.ndarray:
    """SipHash-2-4 of one 8-byte word per row: ``out[i] = SipHash_{(k0[i], k1[i])}(m[i])``.

    ``k0`` and ``k1`` (the key's halves) are scalars or arrays of ``m``'s length; ``m`` is the
    message word (little-endian). Returns a new uint64 array of ``m``'s shape (1-d).
    """
    m = np.ascontiguousarray(np.atleast_1d(np.asarray(m, dtype=np.uint64)).reshape(-1))
    k0 = np.ascontiguousarray(np.atleast_1d(np.asarray(k0, dtype=np.uint64)).reshape(-1))
    k1 = np.ascontiguousarray(np.atleast_1d(np.asarray(k1, dtype=np.uint64)).reshape(-1))
    for name, k in (("k0", k0), ("k1", k1)):
        if k.shape[0] not in (1, m.shape[0]):
            raise ValueError(f"{name}: one key or one per message ({k.shape[0]} keys for "
                             f"{m.shape[0]} messages)")
    out = np.empty(m.shape[0], dtype=np.uint64)
    if SIPHASH.module is not None:
        SIPHASH.module.siphash_words(k0, k1, m, out)
    else:
        _prf_numpy(k0, k1, m, out)
    return out


def prf_tag(k0: np.ndarray, k1: np.ndarray, tag: int) -> np.ndarray:
    """``prf(k0, k1, tag)`` for one message word and one key per row (no array of copies of the
    message): every agent's key of one run or data set from its device key."""
    k0 = np.ascontiguousarray(k0, dtype=np.uint64).reshape(-1)
    k1 = np.ascontiguousarray(k1, dtype=np.uint64).reshape(-1)
    if k0.shape != k1.shape:
        raise ValueError(f"k0 and k1: one key each per row ({k0.shape} and {k1.shape})")
    if SIPHASH.module is not None:
        out = np.empty(len(k0), dtype=np.uint64)
        SIPHASH.module.keyed_rows(k0, k1, int(tag), out)
        return out
    return prf(k0, k1, np.full(len(k0), tag, dtype=np.uint64))
