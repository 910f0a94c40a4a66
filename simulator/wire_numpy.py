"""The accelerated path of the wire format: a numpy writer and reader for batches of envelopes.

``simulator.wire`` is the reference codec: msgpack-python, one envelope at a time, every field
validated. This module is its speed path for the hot case of a round, "one envelope per agent"
for 10^5..10^6 agents, where the reference's one msgpack call per envelope is a Python-level
cost paid for every agent (measured in the README's Performance section). In the common case
every envelope of a batch has the same layout: the agent ids have the same msgpack width (ids
are sorted, so a batch splits into at most a few such groups) and every payload value is a
fixint (small non-negative ints such as RR bits or pair indices) or a float64. Such a group is
a fixed-width byte matrix, built or checked column by column with numpy.

Two promises, both tested against the reference (``tests/simulator/test_wire.py``):

* **Writer.** Every frame ``encode_batch`` writes is byte for byte the concatenation of what
  the reference codec writes for the same envelopes (``b"".join(wire.encode_many(...)[0])``),
  with the same per-envelope sizes; a batch whose layout is not uniform is written by
  ``wire.encode_many`` itself.
* **Reader.** ``match_batch``, ``parse_consecutive`` and ``first_agent`` accept only frames that
  are exactly such a canonical batch, and read them as msgpack would. Anything else, valid or
  hostile, gives None, and the caller reads the frame with the reference reader
  (``wire.iter_frame`` / ``wire.unpack_all`` and ``wire.check_envelope``), which validates
  every envelope: a non-canonical frame loses nothing but speed.

The size helpers (``int_sizes``, ``array_header_size``, ``minimal_report_sizes``,
``batch_sizes``) give envelope sizes of such batches without encoding them, so per-agent byte
counts stay exact on the fast path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.wire import VERSION, encode_many, packer

_PACKER = packer()  # the reference packer: one int's bytes are exactly what the codec writes


# ------------------------------------------------------------------ sizes


def int_sizes(a: np.ndarray) -> np.ndarray:
    """Bytes of the shortest msgpack encoding of each integer (what msgpack-python emits)."""
    a = np.asarray(a, dtype=np.int64)
    s = np.full(a.shape, 9, dtype=np.int64)
    pos = a >= 0
    for bound, size in ((1 << 32, 5), (1 << 16, 3), (1 << 8, 2), (1 << 7, 1)):
        s[pos & (a < bound)] = size
    neg = ~pos
    for bound, size in ((-(1 << 31), 5), (-(1 << 15), 3), (-(1 << 7), 2), (-32, 1)):
        s[neg & (a >= bound)] = size
    return s


def array_header_size(length: int) -> int:
    """Bytes of a msgpack array header for ``length`` items."""
    return 1 if length < 16 else 3 if length < 65536 else 5


def minimal_report_sizes(run: int, rnd: int, agents: np.ndarray, values: np.ndarray,
                         dtype: str) -> np.ndarray:
    """Shortest possible size of each envelope ``[1, REPORT, run, rnd, agent, list(values)]``.

    If these sum to the frame's length, every envelope in it has exactly this size (no
    envelope can be shorter than its shortest encoding), so per-agent bytes stay exact.
    """
    k = values.shape[1]
    head = 3 + int(int_sizes(np.array([run]))[0]) + int(int_sizes(np.array([rnd]))[0])
    body = array_header_size(k) + (int_sizes(values).sum(axis=1) if dtype == "int"
                                   else np.full(len(agents), 9 * k, dtype=np.int64))
    return head + int_sizes(agents) + body


# ------------------------------------------------------------------ writer


_INT_MARK = {2: (0xCC, 0xD0), 3: (0xCD, 0xD1), 5: (0xCE, 0xD2), 9: (0xCF, 0xD3)}


def _array_header(length: int) -> bytes:
    if length < 16:
        return bytes([0x90 | length])
    if length < 65536:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def _int_bytes(v: int) -> bytes:
    return _PACKER.pack(int(v))


def _int_columns(a: np.ndarray, width: int) -> np.ndarray:
    """(N, width) msgpack bytes of non-negative ints that all encode in ``width`` bytes."""
    be = a.astype(">i8").view(np.uint8).reshape(len(a), 8)
    if width == 1:
        return be[:, 7:]
    out = np.empty((len(a), width), dtype=np.uint8)
    out[:, 0] = _INT_MARK[width][0]
    out[:, 1:] = be[:, 9 - width:]
    return out


_WIDTH_EDGES = np.array([1 << 7, 1 << 8, 1 << 16, 1 << 32], dtype=np.int64)
_WIDTHS = (1, 2, 3, 5, 9)


def _groups(agents: np.ndarray) -> list[tuple[int, int, int]]:
    """Split sorted non-negative ids into runs of equal msgpack width: (lo, hi, width).

    Sorted ids change width only at 2^7, 2^8, 2^16 and 2^32, so this is a binary search.
    """
    cuts = np.searchsorted(agents, _WIDTH_EDGES).tolist()
    edges = [0, *cuts, len(agents)]
    return [(lo, hi, _WIDTHS[i]) for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:],
                                                                strict=True)) if hi > lo]


def batch_sizes(run: int, rnd: int, agents: np.ndarray, k: int | None,
                dtype: str) -> np.ndarray:
    """Envelope sizes of the canonical batch ``match_batch`` accepts (sorted ids)."""
    head = 3 + len(_int_bytes(run)) + len(_int_bytes(rnd))
    body = 1 if k is None else len(_array_header(k)) + k * (9 if dtype == "float" else 1)
    sizes = np.empty(len(agents), dtype=np.int64)
    for lo, hi, width in _groups(np.asarray(agents, dtype=np.int64)):
        sizes[lo:hi] = head + width + body
    return sizes


def _payload_kind(payload: np.ndarray | None) -> str | None:
    """"nil", "fixint" or "float" when the payload has a uniform layout, else None."""
    if payload is None:
        return "nil"
    if not isinstance(payload, np.ndarray) or payload.ndim != 2:
        return None
    if payload.dtype.kind == "f":
        return "float"
    if payload.dtype.kind in "biu" and (payload.size == 0 or (
            payload.min() >= 0 and payload.max() < 128)):
        return "fixint"
    return None


def batchable(payload: Any) -> bool:
    """Whether ``encode_batch`` takes this query/report array (None or a 2-D numeric array)."""
    return payload is None or (isinstance(payload, np.ndarray) and payload.ndim == 2
                               and payload.dtype.kind in "biuf")


def _head(kind: int, run: int, rnd: int) -> np.ndarray:
    return np.frombuffer(bytes([0x96, VERSION, kind]) + _int_bytes(run) + _int_bytes(rnd),
                         dtype=np.uint8)


def encode_batch(kind: int, run: int, rnd: int, agents: np.ndarray,
                 payload: np.ndarray | None) -> tuple[bytes, np.ndarray]:
    """One frame of envelopes ``[1, kind, run, rnd, agents[i], list(payload[i])]``.

    Byte for byte what ``b"".join(wire.encode_many(...)[0])`` gives for the same values (a
    bool payload travels as the ints 0/1): vectorised when the layout is uniform (see the
    module docstring), else written by ``wire.encode_many`` itself. Returns the frame and each
    envelope's size.
    """
    agents = np.asarray(agents, dtype=np.int64)
    pk = _payload_kind(payload)
    if pk is None or len(agents) == 0 or agents[0] < 0 or (np.diff(agents) <= 0).any():
        rows = None if payload is None else np.asarray(payload)
        if rows is not None and rows.dtype.kind == "b":
            rows = rows.astype(np.int64)
        bufs, sizes = encode_many(kind, run, rnd, agents.tolist(),
                                  None if rows is None else rows.tolist())
        return b"".join(bufs), np.asarray(sizes, dtype=np.int64)
    head = _head(kind, run, rnd)
    if pk == "nil":
        body = [np.full((len(agents), 1), 0xC0, dtype=np.uint8)]
    else:
        k = payload.shape[1]
        hdr = np.frombuffer(_array_header(k), dtype=np.uint8)
        if pk == "float":
            cells = np.empty((len(agents), k, 9), dtype=np.uint8)
            cells[:, :, 0] = 0xCB
            cells[:, :, 1:] = payload.astype(">f8").view(np.uint8).reshape(len(agents), k, 8)
            vals = cells.reshape(len(agents), 9 * k)
        else:
            vals = payload.astype(np.uint8)
        body = [np.broadcast_to(hdr, (len(agents), len(hdr))), vals]
    out, sizes = [], np.empty(len(agents), dtype=np.int64)
    for lo, hi, width in _groups(agents):
        n = hi - lo
        rows = np.concatenate([np.broadcast_to(head, (n, len(head))),
                               _int_columns(agents[lo:hi], width),
                               *(b[lo:hi] for b in body)], axis=1)
        out.append(rows.tobytes())
        sizes[lo:hi] = rows.shape[1]
    return b"".join(out), sizes


# ------------------------------------------------------------------ reader


def match_batch(frame: bytes, kind: int, run: int, rnd: int, agents: np.ndarray, k: int | None,
                dtype: str) -> np.ndarray | None:
    """The payload rows if ``frame`` is exactly the canonical batch for these agents, else None.

    Canonical: what ``encode_batch`` produces for ``agents`` (sorted, in this order) with ``k``
    values per payload, each a non-negative fixint (0..127) when ``dtype`` is "int" or a float64
    when "float" (``k`` None: a nil payload). Such a frame decodes to exactly these envelopes, so
    the receiver may skip the per-envelope decoder. Returns an (N, k) int64 or float64 array (an
    (N, 0) array for nil payloads).
    """
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    if n == 0 or agents[0] < 0:
        return None
    head = _head(kind, run, rnd)
    if k is None:
        body, hdr = 1, np.array([0xC0], dtype=np.uint8)
    else:
        hdr = np.frombuffer(_array_header(k), dtype=np.uint8)
        body = len(hdr) + k * (9 if dtype == "float" else 1)
    groups = _groups(agents)
    total = sum((hi - lo) * (len(head) + w + body) for lo, hi, w in groups)
    if len(frame) != total:
        return None
    fb = np.frombuffer(frame, dtype=np.uint8)
    out = np.empty((n, 0 if k is None else k),
                   dtype=np.float64 if dtype == "float" else np.int64)
    pos = 0
    for lo, hi, width in groups:
        m = hi - lo
        w = len(head) + width + body
        rows = fb[pos:pos + m * w].reshape(m, w)
        pos += m * w
        c = len(head)
        if not (rows[:, :c] == head).all():
            return None
        if not np.array_equal(rows[:, c:c + width], _int_columns(agents[lo:hi], width)):
            return None
        c += width
        if not (rows[:, c:c + len(hdr)] == hdr).all():
            return None
        c += len(hdr)
        if k is None or k == 0:
            continue
        if dtype == "float":
            cells = rows[:, c:].reshape(m, k, 9)
            if not (cells[:, :, 0] == 0xCB).all():
                return None
            out[lo:hi] = cells[:, :, 1:].copy().view(">f8").reshape(m, k)
        else:
            vals = rows[:, c:]
            if (vals >= 0x80).any():
                return None
            out[lo:hi] = vals
    return out


def _read_int(fb: np.ndarray, i: int) -> tuple[int, int] | None:
    """Decode one msgpack int at byte ``i``: (value, next offset), or None if not an int."""
    if i >= len(fb):
        return None
    b = int(fb[i])
    if b < 0x80:
        return b, i + 1
    if b >= 0xE0:
        return b - 256, i + 1
    for size, (pos, neg) in _INT_MARK.items():
        if b in (pos, neg):
            if i + size > len(fb):
                return None
            raw = fb[i + 1:i + size].tobytes()
            return int.from_bytes(raw, "big", signed=b == neg), i + size
    return None


def _first(fb: np.ndarray, kind: int) -> tuple[int, int, int, int, int] | None:
    """(run, round, agent, prefix length, payload offset) of the frame's first envelope."""
    if len(fb) < 7 or fb[0] != 0x96 or fb[1] != VERSION or fb[2] != kind:
        return None
    r1 = _read_int(fb, 3)
    r2 = r1 and _read_int(fb, r1[1])
    r3 = r2 and _read_int(fb, r2[1])
    if not r3 or r3[0] < 0 or r3[1] >= len(fb):
        return None
    return r1[0], r2[0], r3[0], r2[1], r3[1]


def first_agent(frame: bytes, kind: int) -> tuple[int, int, int] | None:
    """(run, round, agent) of a frame's first envelope if it is a ``kind`` envelope, else None."""
    head = _first(np.frombuffer(frame, dtype=np.uint8), kind)
    return None if head is None else head[:3]


def parse_consecutive(frame: bytes, kind: int,
                      dtype: str = "int") -> tuple[int, int, np.ndarray, np.ndarray | None] | None:
    """Fast decode of a frame of ``kind`` envelopes for consecutive agent ids.

    The common case of a round that asks every agent: envelopes for agents a0, a0+1, ... with
    payloads of k fixints (or float64s, or nil). Returns (run, round, agents, payload rows or
    None) when the frame is exactly that canonical batch, else None (use the general decoder).
    """
    fb = np.frombuffer(frame, dtype=np.uint8)
    first = _first(fb, kind)
    if first is None:
        return None
    run, rnd, a0, head, i = first
    h = int(fb[i])
    if h == 0xC0:
        k, body = None, 1
    elif 0x90 <= h <= 0x9F:
        k = h & 0x0F
        body = 1 + k * (9 if dtype == "float" else 1)
    else:
        return None
    # widths only change at 2^7, 2^8, 2^16, 2^32: count envelopes segment by segment
    n, left, a = 0, len(fb), a0
    while left > 0:
        width = len(_int_bytes(a))
        bound = next(b for b in (1 << 7, 1 << 8, 1 << 16, 1 << 32, 1 << 63) if a < b)
        size = head + width + body
        take = min(left // size, bound - a)
        if take == 0:
            return None
        n, left, a = n + take, left - take * size, a + take
    agents = np.arange(a0, a0 + n, dtype=np.int64)
    vals = match_batch(frame, kind, run, rnd, agents, k, dtype)
    if vals is None:
        return None
    return run, rnd, agents, None if k is None else vals
