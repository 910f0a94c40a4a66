"""The accelerated path of the wire format: a numpy writer for batches of envelopes.

``simulator.codec.wire`` is the reference codec: msgpack-python, one envelope at a time, every field
validated. This module and its reader, ``simulator.codec.wire_numpy_read``, are its speed path for
the hot case of a round, "one envelope per agent" for 10^5..10^6 agents, where the reference's one
msgpack call per envelope is a Python-level cost paid for every agent (measured in
docs/performance.md).

**Layout.** A batch is the envelopes ``[1, kind, run, round, agent, payload]`` of many agents
written back to back, where ``payload`` is nil or one row of a 2-D numeric array (a report or a
query: ``k`` ints or ``k`` floats). msgpack-python writes every integer in its *shortest* form
(a fixint for -32..127, else the narrowest of uint8/16/32/64 for non-negative values and of
int8/16/32/64 for negative ones: a marker byte and 1, 2, 4 or 8 big-endian bytes) and every float
as a float64 (``0xcb`` and 8 big-endian bytes), so one envelope is::

    0x96 0x01 kind run round | agent | array header (k) | value_1 ... value_k     (or 0xc0: nil)
    ------ head: the same for every envelope ------------   ---- one width per value ----

The writer builds one *slot matrix*: a row per envelope, a block of columns per field (the
agent id; each value of a short int row, or all values of a long one), each slot as wide as
the widest encoding the field takes in the batch, each value written left-aligned in its slot
(its marker, then its big-endian bytes: the value shifted left by the bytes it does not use).
When every row is equally wide (the common case: fixints or floats, agents of one width, and
columns of one width each such as OLH's seeds) the frame is the matrix's bytes; else it is the
matrix with each slot's unused tail dropped (one boolean-mask selection, row-major, so the
envelopes stay in order).

Two promises, both tested against the reference (``tests/simulator/codec/test_wire.py``):

* **Writer.** Every frame ``encode_batch`` writes is byte for byte the concatenation of what
  the reference codec writes for the same envelopes (``b"".join(wire.encode_many(...)[0])``),
  with the same per-envelope sizes; a payload that is not a 2-D bool, int or float array (up to
  64 bits) is written by ``wire.encode_many`` itself.
* **Reader** (``wire_numpy_read``). It accepts only frames that are exactly such a canonical
  batch, and reads them as msgpack would; anything else, valid or hostile, gives None and the
  caller reads the frame with the reference reader, which validates every envelope.

The size helpers (``int_sizes``, ``array_header_size``, ``minimal_report_sizes``,
``batch_sizes``) give envelope sizes without encoding anything.

**The compiled codec.** Where the package was installed with a C compiler at hand, the
optional extension ``simulator/codec/_wirec.c`` does both jobs, one envelope after another in C:
``encode_batch`` and ``wire_numpy_read.match_prefix`` use it for every payload they would
vectorise, with the same two promises (the numpy code stays the fallback, and the tests hold
both to the reference). It moves an envelope in a few nanoseconds where numpy's column
operations take 15-30 (measured in docs/performance.md). ``CODEC``
(``protocols.accel.Accelerator``) says which one runs and switches (tests, benchmarks); the
environment variable ``LDPSIM_CODEC=numpy`` turns the compiled one off in every process that
inherits it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.codec import compiled
from ldpsim.simulator.codec.wire import VERSION, encode_many, packer

CODEC = compiled.CODEC

_PACKER = packer()  # the reference packer: one int's bytes are exactly what the codec writes

#: marker byte of a multi-byte int by its width in bytes: (non-negative, negative)
INT_MARKERS = {2: (0xCC, 0xD0), 3: (0xCD, 0xD1), 5: (0xCE, 0xD2), 9: (0xCF, 0xD3)}
FLOAT64 = 0xCB
NIL = 0xC0

# ------------------------------------------------------------------ sizes


def int_sizes(a: np.ndarray) -> np.ndarray:
    """Bytes of the shortest msgpack encoding of each integer (what msgpack-python emits).

    ``a`` is read as int64, or as uint64 when its dtype is unsigned (values up to 2^64 - 1)."""
    a = np.asarray(a)
    a = a.astype(np.uint64 if a.dtype.kind == "u" else np.int64, copy=False)
    if a.dtype.kind == "u" or not a.size or a.min() >= 0:
        x, edges = a, (1 << 7, 1 << 8, 1 << 16, 1 << 32)
    else:  # a negative value v needs the width of the non-negative ~v = -v - 1 below
        neg = a < 0
        x = np.where(neg, ~a, a)
        edges = tuple(np.where(neg, low, high) for low, high in (
            (32, 1 << 7), (1 << 7, 1 << 8), (1 << 15, 1 << 16), (1 << 31, 1 << 32)))
    s = np.ones(a.shape, dtype=np.int64)
    for edge, step in zip(edges, (1, 1, 2, 4), strict=True):  # widths 1, 2, 3, 5, 9
        s += step * (x >= edge)
    return s


def array_header_size(length: int) -> int:
    """Bytes of a msgpack array header for ``length`` items."""
    return 1 if length < 16 else 3 if length < 65536 else 5


def array_header(length: int) -> bytes:
    """A msgpack array header for ``length`` items (fixarray, array16 or array32)."""
    if length < 16:
        return bytes([0x90 | length])
    if length < 65536:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def head_bytes(kind: int, run: int, rnd: int) -> bytes:
    """The bytes every envelope of a batch starts with: ``[1, kind, run, rnd, ...``."""
    return bytes([0x96, VERSION, kind]) + _PACKER.pack(int(run)) + _PACKER.pack(int(rnd))


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


def batch_sizes(run: int, rnd: int, agents: np.ndarray, k: int | None,
                dtype: str) -> np.ndarray:
    """Envelope sizes of a batch whose payloads are nil (``k`` None), ``k`` fixints (``dtype``
    "int": every value in -32..127) or ``k`` floats: the narrowest batch for these agents."""
    agents = np.asarray(agents, dtype=np.int64)
    body = 1 if k is None else array_header_size(k) + k * (9 if dtype == "float" else 1)
    return len(head_bytes(0, run, rnd)) + int_sizes(agents) + body


# ------------------------------------------------------------------ writer

# per width in bytes (index): how far to shift a value left so its bytes start its slot
_SHIFT = np.array([0, 0, 56, 48, 0, 32, 0, 0, 0, 0], dtype=np.uint64)
# per width (index) and sign (0: non-negative, 1: negative): the marker byte
_MARKER = np.zeros((10, 2), dtype=np.uint8)
for _w, _marks in INT_MARKERS.items():
    _MARKER[_w] = _marks


def int_slots(a: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Each int of the 1-D ``a`` (int64, or uint64 up to 2^64 - 1) in its shortest msgpack
    encoding, left-aligned in a slot as wide as the widest: ((N, slot) uint8, the widths, or
    None when every int fills the slot)."""
    same = _one_width(a)
    return (same, None) if same is not None else _slots(a)


def _one_width(a: np.ndarray) -> np.ndarray | None:
    """``int_slots`` of ints that all have one encoding width and marker, else None: the
    marker and the low bytes big-endian (the ints of one marker are an interval, so the
    smallest and the largest tell)."""
    if not len(a):
        return np.zeros((0, 1), dtype=np.uint8)
    lo, hi = _PACKER.pack(int(a.min())), _PACKER.pack(int(a.max()))
    if len(lo) != len(hi) or (len(lo) > 1 and lo[0] != hi[0]):
        return None
    if len(lo) == 1:  # fixints: the low byte is the encoding
        return a.astype(np.uint8).reshape(-1, 1)
    out = np.empty((len(a), len(lo)), dtype=np.uint8)
    out[:, 0] = lo[0]
    be = a.astype(">u8" if a.dtype.kind == "u" else ">i8").view(np.uint8)
    out[:, 1:] = be.reshape(len(a), 8)[:, 9 - len(lo):]
    return out


def _slots(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``int_slots`` of ints of several widths: each int's marker (or fixint byte), then its
    bits shifted left by the bytes it does not use, big-endian."""
    widths = int_sizes(a)
    bits = a.astype(np.uint64) if a.dtype.kind == "u" else a.astype(np.int64).view(np.uint64)
    neg = np.zeros(len(a), dtype=np.intp) if a.dtype.kind == "u" else (a < 0).view(np.int8)
    out = np.empty((len(a), int(widths.max())), dtype=np.uint8)
    out[:, 0] = np.where(widths == 1, bits.astype(np.uint8), _MARKER[widths, neg])
    shifted = (bits << _SHIFT[widths]).astype(">u8").view(np.uint8).reshape(len(a), 8)
    out[:, 1:] = shifted[:, :out.shape[1] - 1]
    return out, widths


#: an int payload with at most this many values per row gets one slot width per column
#: (then a column of equal widths, e.g. OLH's seeds or a fixint, needs no mask)
SLOT_COLUMNS = 16


def _payload_blocks(payload: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]] | None:
    """The values of an (N, k) payload as blocks of slots: [((N, cells * slot) uint8, the
    (N, cells) widths or None when every value fills its slot)], or None for a dtype this
    writer does not take."""
    n, k = payload.shape
    kind = payload.dtype.kind
    if kind == "f" and payload.dtype.itemsize <= 8:  # msgpack-python writes every float as f8
        cells = np.empty((n, k, 9), dtype=np.uint8)
        cells[:, :, 0] = FLOAT64
        cells[:, :, 1:] = payload.astype(">f8").view(np.uint8).reshape(n, k, 8)
        return [(cells.reshape(n, 9 * k), None)]
    if kind == "b":  # bools travel as the ints 0/1
        return [(payload.astype(np.uint8), None)]
    if kind not in "iu":
        return None
    if k == 0:
        return []
    flat = payload.reshape(-1)
    same = _one_width(flat)
    if same is not None:  # one width for every value (e.g. fixints only)
        return [(same.reshape(n, -1), None)]
    if k <= SLOT_COLUMNS:
        return [int_slots(payload[:, j]) for j in range(k)]
    slots, widths = _slots(flat)
    return [(slots.reshape(n, -1), widths.reshape(n, k))]


def batchable(payload: Any) -> bool:
    """Whether ``encode_batch`` vectorises this query/report payload: None, or a 2-D bool,
    int or float array (at most 64-bit)."""
    return payload is None or (isinstance(payload, np.ndarray) and payload.ndim == 2
                               and payload.dtype.kind in "biuf" and payload.dtype.itemsize <= 8)


def encode_batch(kind: int, run: int, rnd: int, agents: np.ndarray,
                 payload: np.ndarray | None) -> tuple[bytes, np.ndarray]:
    """One frame of envelopes ``[1, kind, run, rnd, agents[i], list(payload[i])]``.

    Byte for byte what ``b"".join(wire.encode_many(...)[0])`` gives for the same values (a
    bool payload travels as the ints 0/1): vectorised for any agent ids and any ``batchable``
    payload (see the module docstring), else written by ``wire.encode_many`` itself. Returns
    the frame and each envelope's size.
    """
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    if n and CODEC.module is not None and (payload is None or batchable(payload)):
        return _encode_compiled(head_bytes(kind, run, rnd), agents, payload)
    cells = _payload_blocks(payload) if n and payload is not None and batchable(payload) \
        else None
    if n == 0 or (payload is not None and cells is None):
        rows = None if payload is None else np.asarray(payload)
        if rows is not None and rows.dtype.kind == "b":
            rows = rows.astype(np.int64)
        bufs, sizes = encode_many(kind, run, rnd, agents.tolist(),
                                  None if rows is None else rows.tolist())
        return b"".join(bufs), np.asarray(sizes, dtype=np.int64)
    head = np.frombuffer(head_bytes(kind, run, rnd), dtype=np.uint8)
    blocks = [(np.broadcast_to(head, (n, len(head))), None), int_slots(agents)]
    if payload is None:
        blocks.append((np.full((n, 1), NIL, dtype=np.uint8), None))
    else:
        hdr = np.frombuffer(array_header(payload.shape[1]), dtype=np.uint8)
        blocks += [(np.broadcast_to(hdr, (n, len(hdr))), None), *cells]
    rows = np.concatenate([b for b, _ in blocks], axis=1)
    if all(w is None for _, w in blocks):  # every row equally wide
        return rows.tobytes(), np.full(n, rows.shape[1], dtype=np.int64)
    # drop each slot's unused tail: a mask over the rows, in row-major (frame) order
    mask = np.ones(rows.shape, dtype=bool)
    c = 0
    for block, widths in blocks:
        if widths is not None:
            slot = block.shape[1] // widths.reshape(n, -1).shape[1]
            mask[:, c:c + block.shape[1]] = (np.arange(slot) < widths.reshape(
                n, -1, 1)).reshape(n, -1)
        c += block.shape[1]
    return rows[mask].tobytes(), mask.sum(axis=1)


def _encode_compiled(head: bytes, agents: np.ndarray,
                     payload: np.ndarray | None) -> tuple[bytes, np.ndarray]:
    """``encode_batch`` of a ``batchable`` payload by the compiled codec: the values as int64
    (bools as 0/1), uint64 (64-bit unsigned) or float64, as the numpy writer reads them."""
    k, mode, values = 0, 0, agents  # mode 0: nil payloads (values unread)
    if payload is not None:
        k = payload.shape[1]
        if payload.dtype.kind == "f":
            mode, values = 3, np.ascontiguousarray(payload, dtype=np.float64)
        elif payload.dtype.kind == "u" and payload.dtype.itemsize == 8:
            mode, values = 2, np.ascontiguousarray(payload, dtype=np.uint64)
        else:
            mode, values = 1, np.ascontiguousarray(payload, dtype=np.int64)
    sizes = np.empty(len(agents), dtype=np.int64)
    frame = CODEC.module.encode(head, np.ascontiguousarray(agents), values, k, mode, sizes)
    return frame, sizes
