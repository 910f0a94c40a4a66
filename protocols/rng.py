"""Counter-based random streams: every draw is a pure function of (key, agent, round, index).

A draw for an agent whose own key is ``h`` (its "random coins" in a run, or its data key), in
round ``r`` at index ``i``, is::

    u = mix(h ^ mix(r << 32 | i + C))   # 64 random bits, top 53 become a float in (0, 1)

where ``mix`` is the SplitMix64 finaliser (Steele, Lea & Flood, OOPSLA 2014), a bijection on 64-bit
words with full avalanche. Because nothing is sequential, a draw does not depend on which pool hosts
the agent, on how many agents are evaluated together, or on message arrival order: the batched path
(vectorised over a block of agents) and the per-agent path (arrays of length one) produce the same
bits. Creating a numpy ``Generator`` per agent would cost a Python object and its set-up per
agent, far more than the draws themselves; this costs a few vectorised integer operations per
draw (the measured costs are in the documentation's performance page).

Where the agents' keys come from. Every function takes ``key`` in one of two forms:

* **one key per agent** (a uint64 array aligned with ``agents``): each agent's own key, used as
  ``h``. Agents' private draws (their coins, their generated data) always take this form, the
  keys coming from a PRF (``protocols.keys``): nothing one agent's key shows predicts another's.
* **one stream key** of a party (an int), for that party's own draws indexed by agent, e.g. the
  curator's public choice of which agents it asks: then ``h = mix(key + agent * GOLDEN)``. This
  is a public bijection of the stream key, so one such ``h`` gives the whole stream away: never
  use it for what an agent must keep secret. ``StreamKeys`` holds one such stream key per row
  (the privacy audit's copies of a curator from many runs, one run's key each).

Sequential randomness of a single party (e.g. the curator's KwikSort pivots) uses
``party_generator``: a numpy ``Generator(Philox)`` keyed by the same stream key.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the SplitMix64 finaliser in use: compiled (one pass) or numpy's nine passes, the same bits;
#: ``LDPSIM_RNG=numpy`` chooses numpy
MIXER = Accelerator.load("mixer", "ldpsim.protocols._rngc", environment.RNG,
                          "protocols/_rngc.c")
#: the stream keys of many seeds at once: compiled BLAKE2b-64, or hashlib one by one, the same
#: bits; ``LDPSIM_RNG=numpy`` chooses hashlib
BLAKE2B = Accelerator.load("blake2b", "ldpsim.protocols._b2c", environment.RNG,
                           "protocols/_b2c.c")

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C = np.uint64(0xD1B54A32D192ED03)
_S30, _S27, _S31, _S32, _S11 = (np.uint64(s) for s in (30, 27, 31, 32, 11))
_TWO_M53 = 2.0**-53
_BELOW_ONE = 1.0 - 2.0**-53  # largest float64 below 1


_CHUNK = 1 << 14  # elements per pass: the working set stays in cache (on a whole array of many
# draws, each of mix's nine passes would stream the whole array through memory)


def _mix_inplace(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser applied in place to a C-contiguous uint64 array: in one pass by the
    compiled finaliser, else with numpy chunk by chunk."""
    if MIXER.module is not None and x.dtype == np.uint64 and x.flags.c_contiguous:
        MIXER.module.mix_inplace(x)
        return x
    flat = x.reshape(-1)
    tmp = np.empty(min(_CHUNK, flat.size), dtype=np.uint64)
    for s in range(0, flat.size, _CHUNK):
        v = flat[s:s + _CHUNK]
        t = tmp[: len(v)]
        np.right_shift(v, _S30, out=t)
        v ^= t
        v *= _M1
        np.right_shift(v, _S27, out=t)
        v ^= t
        v *= _M2
        np.right_shift(v, _S31, out=t)
        v ^= t
    return x


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on an array of uint64 (wrapping arithmetic); returns a new array."""
    return _mix_inplace(np.array(x, dtype=np.uint64, order="C", copy=True))


class StreamKeys(np.ndarray):
    """One party stream key per row: row ``i`` draws what the party with stream key
    ``keys[i]`` draws for agent ``agents[i]`` (``h = mix(keys[i] + agent * GOLDEN)``), unlike a
    plain array of keys, which are the agents' own. The privacy audit builds a curator over
    copies of its target, each with another run's curator key."""

    def __new__(cls, keys: Any) -> StreamKeys:
        return np.asarray(keys, dtype=np.uint64).view(cls)


def stream_key(seed: int | np.ndarray, *labels: str | int) -> int | np.ndarray:
    """Derive a 64-bit stream key from the run seed and labels (stable across platforms).

    ``seed`` may be an array of keys (one per row): then the result is the array of each one's
    derived key (a ``StreamKeys`` for a ``StreamKeys``).
    """
    if isinstance(seed, np.ndarray):
        flat = seed.view(np.ndarray).reshape(-1)
        if flat.dtype.kind == "u" or (flat.dtype.kind == "i" and not (flat < 0).any()):
            out = _digests(b"", flat, _label_text(labels))
        else:  # negative or non-integer seeds: their text as int() writes it
            out = np.fromiter((stream_key(int(k), *labels) for k in flat),
                              dtype=np.uint64, count=flat.size)
        out = out.reshape(seed.shape)
        return StreamKeys(out) if isinstance(seed, StreamKeys) else out
    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(seed)).encode())
    for label in labels:
        h.update(b"\x1f" + str(label).encode())
    return int.from_bytes(h.digest(), "little")


def stream_keys(seed: int, *labels: str | int, last: np.ndarray) -> np.ndarray:
    """``stream_key(seed, *labels, i)`` for every non-negative integer ``i`` of ``last`` (a
    uint64 array of their keys, in ``last``'s shape): e.g. the seeds of many repetitions."""
    last = np.asarray(last)
    flat = last.reshape(-1)
    if flat.size and (flat.dtype.kind not in "iu" or (flat < 0).any()):
        raise ValueError("stream_keys: the last labels must be non-negative integers")
    prefix = str(int(seed)).encode() + _label_text(labels) + b"\x1f"
    return _digests(prefix, flat, b"").reshape(last.shape)


def _label_text(labels: tuple[str | int, ...]) -> bytes:
    """What ``stream_key`` hashes after the seed for ``labels``."""
    return b"".join(b"\x1f" + str(label).encode() for label in labels)


def _digests(prefix: bytes, values: np.ndarray, suffix: bytes) -> np.ndarray:
    """BLAKE2b-64 of ``prefix + decimal(v) + suffix`` (the digest read little-endian) for every
    v of the non-negative integer array ``values``: compiled in one pass, or with hashlib."""
    values = np.ascontiguousarray(values, dtype=np.uint64).reshape(-1)
    out = np.empty(values.shape, dtype=np.uint64)
    if BLAKE2B.module is not None:
        BLAKE2B.module.digest_ints(prefix, values, suffix, out)
        return out
    for i, v in enumerate(values.tolist()):
        d = hashlib.blake2b(prefix + str(v).encode() + suffix, digest_size=8).digest()
        out[i] = int.from_bytes(d, "little")
    return out


def agent_keys(key: int | np.ndarray, agents: np.ndarray) -> np.ndarray:
    """The agents' own 64-bit keys ``h``: ``key`` itself when it holds one key per agent (a
    uint64 array of ``agents``' shape), else ``mix(key + agent * GOLDEN)`` of the stream key
    ``key`` (a party's own draws indexed by agent; see the module docstring), or of each row's
    stream key (``StreamKeys``)."""
    agents = np.asarray(agents)
    return _agent_keys_into(key, agents, np.empty(agents.shape, dtype=np.uint64))


def _agent_keys_into(key: int | np.ndarray, agents: np.ndarray,
                     out: np.ndarray) -> np.ndarray:
    """``agent_keys`` written into the uint64 array ``out`` (of ``agents``' shape)."""
    if isinstance(key, np.ndarray) and not isinstance(key, StreamKeys):
        out[...] = key.reshape(out.shape)
        return out
    out[...] = agents
    out *= _GOLDEN
    if isinstance(key, StreamKeys):
        out += key.view(np.ndarray).reshape(out.shape)
    else:
        out += np.uint64(key)
    return _mix_inplace(out)


def _row_keys(key: int | np.ndarray, agents: np.ndarray) -> int | np.ndarray:
    """``key`` as ``bits`` and ``bits_at`` take it: one stream key as it is, one key per agent
    as a flat uint64 array (a ``StreamKeys`` stays one); ValueError for a count that is not
    the agents'."""
    if not isinstance(key, np.ndarray):
        return key
    key = np.asanyarray(key, dtype=np.uint64).reshape(-1)
    if key.shape != agents.shape:
        raise ValueError(f"one key per agent: {key.shape} keys for {agents.shape} agents")
    return key


def _draw_chunks(key: int | np.ndarray, agents: np.ndarray, rnd: int, n: int, offset: int):
    """The draws of ``bits`` a cache-sized block of agents at a time: yields (first row,
    block of raw draws). The block's buffer is reused, so each must be consumed at once.
    ``key``: one stream key, or one key per agent (``agent_keys``)."""
    agents = np.atleast_1d(np.asarray(agents))
    per_row = isinstance(key, np.ndarray)
    key = _row_keys(key, agents)
    ctr = mix((np.uint64(rnd) << _S32) + np.arange(offset, offset + n, dtype=np.uint64) + _C)
    rows = max(64, _CHUNK // max(n, 1))  # at least 64 agents per pass: few Python steps
    ak = np.empty(min(rows, len(agents)), dtype=np.uint64)
    buf = np.empty((len(ak), n), dtype=np.uint64)
    for s in range(0, len(agents), rows):
        a = agents[s:s + rows]
        k = _agent_keys_into(key[s:s + rows] if per_row else key, a, ak[: len(a)])
        b = buf[: len(a)]
        if MIXER.module is not None:  # the same bits in one pass
            MIXER.module.mix_xor(k, ctr, b)
            yield s, b
            continue
        np.bitwise_xor(k[:, None], ctr[None, :], out=b)
        yield s, _mix_inplace(b)


def bits(key: int | np.ndarray, agents: np.ndarray, rnd: int, n: int,
         offset: int = 0) -> np.ndarray:
    """Raw 64-bit draws, shape ``(len(agents), n)``, for draw indices ``offset .. offset+n-1``
    (``key``: one stream key, or one per agent)."""
    out = np.empty((np.atleast_1d(agents).shape[0], n), dtype=np.uint64)
    for s, b in _draw_chunks(key, agents, rnd, n, offset):
        out[s:s + len(b)] = b
    return out


def bits_at(key: int | np.ndarray, agents: np.ndarray, rnd: int, idx: np.ndarray) -> np.ndarray:
    """Raw 64-bit draws at per-row draw indices: ``out[i, j]`` is draw ``idx[i, j]`` of agent
    ``agents[i]`` in round ``rnd`` (``idx`` of shape ``(len(agents), k)``, or ``(len(agents),)``
    for one draw each), the same word ``bits`` gives for that agent and index.

    For samplers that use a variable number of draws per agent (each row advances its own
    draw index, so a row's words never depend on the other rows of the block).
    """
    agents = np.atleast_1d(np.asarray(agents))
    idx = np.asarray(idx, dtype=np.uint64)
    flat = idx.ndim == 1
    idx2 = idx[:, None] if flat else idx
    if idx2.shape[0] != agents.shape[0]:
        raise ValueError(f"one row of draw indices per agent: {idx2.shape[0]} rows for "
                         f"{agents.shape[0]} agents")
    h = agent_keys(_row_keys(key, agents), agents)
    out = (np.uint64(rnd) << _S32) + idx2 + _C
    _mix_inplace(out)
    out ^= h[:, None]
    _mix_inplace(out)
    return out[:, 0] if flat else out


def uniform(key: int | np.ndarray, agents: np.ndarray, rnd: int, n: int,
            offset: int = 0) -> np.ndarray:
    """Uniform floats in the open interval (0, 1), shape ``(len(agents), n)``.

    ``u = ((b >> 11) + 0.5) * 2^-53`` from each 64-bit draw ``b``; for the top value
    2^53 - 1, "+ 0.5" rounds (half to even) to 2^53, i.e. u = 1.0, so u is clamped below 1.
    Computed block by block in cache: no array of raw draws is ever made.
    """
    out = np.empty((np.atleast_1d(agents).shape[0], n), dtype=np.float64)
    for s, b in _draw_chunks(key, agents, rnd, n, offset):
        _uniform_into(b, out[s:s + len(b)])
    return out


def uniform_of(b: np.ndarray) -> np.ndarray:
    """The uniform ``uniform`` makes of each 64-bit draw in ``b`` (for a few draws at a time)."""
    b = np.array(b, dtype=np.uint64, copy=True)
    out = np.empty(b.shape, dtype=np.float64)
    _uniform_into(b, out)
    return out


def _uniform_into(b: np.ndarray, out: np.ndarray) -> None:
    """``out = min(((b >> 11) + 0.5) * 2^-53, 1 - 2^-53)``; shifts the uint64 ``b`` in place."""
    b >>= _S11
    out[...] = b.view(np.int64)  # < 2^53: exact, and int64 -> float64 converts fastest
    out += 0.5
    out *= _TWO_M53
    np.minimum(out, _BELOW_ONE, out=out)


def laplace_from_uniform(u: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """Inverse-CDF Laplace(0, scale) from uniforms in (0, 1)."""
    x = u - 0.5
    return -np.asarray(scale) * np.sign(x) * np.log1p(-2.0 * np.abs(x))


def distinct_indices(u: np.ndarray, population: int, dtype: Any = np.int64) -> np.ndarray:
    """Per row, ``u.shape[1]`` distinct indices from ``range(population)`` (Floyd's algorithm).

    Every K-subset is equally likely. ``u`` holds one uniform per drawn index; the result has
    the same shape and the integer ``dtype`` (int64 by default; a narrower one must hold
    ``population - 1``). Row ``i`` depends on ``u[i]`` only.
    """
    n, k = u.shape
    if k > population:
        raise ValueError(f"cannot draw {k} distinct indices from {population}")
    if population - 1 > np.iinfo(dtype).max:
        raise ValueError(f"{np.dtype(dtype)} cannot hold indices up to {population - 1}")
    out = np.empty((n, k), dtype=dtype)
    for idx, j in enumerate(range(population - k, population)):
        # floor(u * (j + 1)) by truncation (u > 0), clamped for u rounding up to j + 1
        t = np.minimum((u[:, idx] * (j + 1)).astype(np.int64), j)
        if idx == 0:  # nothing drawn yet: no duplicate to replace
            out[:, 0] = t
        else:
            dup = (out[:, :idx] == t[:, None]).any(axis=1)
            out[:, idx] = np.where(dup, j, t)
    return out


def party_generator(key: int) -> np.random.Generator:
    """A sequential numpy Generator (Philox) for one party's own draws."""
    return np.random.Generator(np.random.Philox(key=key))


def party_generator_at(key: int, offset: int) -> np.random.Generator:
    """``party_generator(key)`` after ``offset`` 64-bit draws (each ``random()`` float takes
    one): its next ``random(m)`` gives floats ``offset .. offset + m - 1`` of the sequence, so
    any range of a long sequential draw can be made on its own (Philox's counter moves four
    draws at a time: ``advance`` by the whole blocks, the rest drawn and dropped)."""
    bits = np.random.Philox(key=key)
    bits.advance(int(offset) // 4)
    if int(offset) % 4:
        bits.random_raw(int(offset) % 4)
    return np.random.Generator(bits)
