"""The accelerated reader of the wire format: canonical batches read with numpy.

``simulator.codec.wire_numpy`` writes a batch of envelopes ``[1, kind, run, round, agent, payload]``
exactly as msgpack-python would (its docstring describes the layout). This module reads such a
batch back without one msgpack call per envelope, and accepts nothing else: every function
returns None for a frame that is not exactly the canonical batch it looks for, whatever that
frame holds, and the caller then reads it with the reference reader (``wire.iter_frame`` /
``wire.unpack_all`` and ``wire.check_envelope``), which validates every envelope. A
non-canonical frame, valid msgpack or not, loses nothing but speed.

How a batch is read: every envelope starts with the same head (``0x96 0x01 kind run round``)
and is followed by its agent id, so the envelopes' starts are

* computed, when every envelope's size follows from its agent id (nil payloads, floats, or
  ints that are all fixints: the narrowest layout, tried first; or ints of one width and
  marker per column, such as OLH's uint32 hash seeds), or
* found, when the ints' widths vary: every place the head occurs, kept if an agent id of the
  batch follows and a whole envelope can be read from there that ends where the next kept
  one starts. Bytes inside a payload that happen to look like a head are thereby dropped.

Then the fields are read column by column for all envelopes at once (an int: its marker byte
gives its width, its big-endian bytes its value), and the frame is accepted only when each
field is in its shortest encoding (the encoding msgpack-python writes), the agents are the
expected ones, and the envelopes tile the frame exactly, first byte to last.
"""

from __future__ import annotations

import numpy as np
from ldpsim.simulator.codec import wire_numpy
from ldpsim.simulator.codec.wire import VERSION, packer
from ldpsim.simulator.codec.wire_numpy import (
    FLOAT64,
    INT_MARKERS,
    NIL,
    array_header,
    array_header_size,
    head_bytes,
    int_slots,
)

#: zero bytes after a frame's copy, so that an int read at any position up to the frame's end
#: stays inside the buffer (an int is at most 9 bytes)
_PAD = 16
_PACKER = packer()

# per marker byte: the width of the int it starts (0: none); how its value is read from the 8
# bytes after the marker taken as a big-endian int64: shifted right (arithmetically, which
# extends the sign of int8/16/32), masked (the unsigned ones), plus the fixint's own value;
# and the range of values whose shortest encoding it is (empty for a non-int, so never ok)
_WIDTH = np.zeros(256, dtype=np.int64)
_SHIFT = np.zeros(256, dtype=np.int64)
_MASK = np.zeros(256, dtype=np.int64)
_FIXINT = np.zeros(256, dtype=np.int64)
_LOW = np.ones(256, dtype=np.int64)
_HIGH = np.zeros(256, dtype=np.int64)
for _m in [*range(0x80), *range(0xE0, 0x100)]:
    _WIDTH[_m], _FIXINT[_m] = 1, _m if _m < 0x80 else _m - 256
    _LOW[_m] = _HIGH[_m] = _FIXINT[_m]
# the values the narrower widths leave to each width: (non-negative from, negative up to)
_NARROWER = {2: (1 << 7, -33), 3: (1 << 8, -(1 << 7) - 1), 5: (1 << 16, -(1 << 15) - 1),
             9: (1 << 32, -(1 << 31) - 1)}
for _w, (_pos, _neg) in INT_MARKERS.items():
    _bits = 8 * (_w - 1)
    _WIDTH[[_pos, _neg]] = _w
    _SHIFT[[_pos, _neg]] = 64 - _bits
    _MASK[_pos] = (1 << _bits) - 1 if _bits < 64 else -1
    _MASK[_neg] = -1
    _LOW[_pos], _HIGH[_pos] = _NARROWER[_w][0], (1 << min(_bits, 63)) - 1
    _LOW[_neg], _HIGH[_neg] = -(1 << (_bits - 1)), _NARROWER[_w][1]
# values below each edge need the width before it, from -2^31 up (sorted ids' widths)
_EDGES = np.array([-(1 << 31), -(1 << 15), -(1 << 7), -32, 1 << 7, 1 << 8, 1 << 16, 1 << 32])
_EDGE_WIDTHS = (9, 5, 3, 2, 1, 2, 3, 5, 9)


def _sorted_int_sizes(a: np.ndarray) -> np.ndarray:
    """``int_sizes`` of sorted int64s: widths change only at the edges, found by bisection."""
    out = np.empty(len(a), dtype=np.int64)
    bounds = [0, *np.searchsorted(a, _EDGES).tolist(), len(a)]
    for lo, hi, width in zip(bounds[:-1], bounds[1:], _EDGE_WIDTHS, strict=True):
        out[lo:hi] = width
    return out


class _Buffer:
    """A frame's bytes followed by ``_PAD`` zeros, and the 8 bytes from each position."""

    def __init__(self, frame: bytes) -> None:
        self.size = len(frame)
        self.bytes = np.zeros(len(frame) + _PAD, dtype=np.uint8)
        self.bytes[:len(frame)] = np.frombuffer(frame, dtype=np.uint8)
        # the 8 bytes from each position as one big-endian int (unaligned, overlapping)
        self.words = np.ndarray((len(self.bytes) - 7,), dtype=">i8", buffer=self.bytes,
                                strides=(1,))

    def take(self, pos: np.ndarray, width: int) -> np.ndarray:
        """(N, width) bytes from each position (positions past the end read the padding)."""
        idx = np.minimum(pos, self.size)[:, None] + np.arange(width)
        return self.bytes[np.minimum(idx, len(self.bytes) - 1)]

    def ints(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The msgpack int at each position (at most the frame's end): (values int64, widths,
        ok). ok is False where there is no int, or an int not in its shortest encoding, or one
        above 2^63 - 1."""
        pos = np.minimum(pos, self.size)
        marker = self.bytes[pos]
        word = self.words[pos + 1].astype(np.int64)
        value = ((word >> _SHIFT[marker]) & _MASK[marker]) + _FIXINT[marker]
        return value, _WIDTH[marker], (_LOW[marker] <= value) & (value <= _HIGH[marker])


def _int_rows(buf: _Buffer, pos: np.ndarray,
              k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read an array of ``k`` ints at each position: (values (N, k) int64, end positions, ok).

    ok is False for a row whose header or ints are not in their shortest encoding, or that
    runs past the frame's end."""
    hdr = np.frombuffer(array_header(k), dtype=np.uint8)
    ok = (buf.take(pos, len(hdr)) == hdr).all(axis=1)
    pos = pos + len(hdr)
    values = np.empty((len(pos), k), dtype=np.int64)
    for j in range(k):  # the ints' widths vary: one column at a time
        values[:, j], width, good = buf.ints(pos)
        ok &= good
        pos = pos + width
    return values, pos, ok & (pos <= buf.size)


def _tiles(starts: np.ndarray, ends: np.ndarray, size: int) -> bool:
    """Whether envelopes [starts[i], ends[i]) cover [0, size) exactly, in order."""
    return (len(starts) > 0 and starts[0] == 0 and ends[-1] == size
            and bool((ends[:-1] == starts[1:]).all()))


def _envelope_rows(fb: np.ndarray, head: np.ndarray, agents: np.ndarray, sizes: np.ndarray,
                   hdr: np.ndarray) -> list[tuple[int, int, int, np.ndarray, int]] | None:
    """The envelopes of ``agents``, of ``sizes`` bytes each from byte 0 of ``fb`` on, as byte
    matrices, one per run of equal sizes (sorted ids change width at most four times): (first
    agent, end agent, first byte, rows, the payload's offset in a row), once every row's head,
    agent id and payload header (``hdr``) are checked; None if one is not as expected."""
    cuts = np.flatnonzero(sizes[1:] != sizes[:-1]) + 1
    if len(cuts) > 4:
        return None
    bounds, pos, out = [0, *cuts.tolist(), len(agents)], 0, []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=False):
        m, size = hi - lo, int(sizes[lo])
        rows = fb[pos:pos + m * size].reshape(m, size)
        ids = int_slots(agents[lo:hi])[0]
        c = len(head) + ids.shape[1]
        if not ((rows[:, :len(head)] == head).all() and np.array_equal(rows[:, len(head):c], ids)
                and (rows[:, c:c + len(hdr)] == hdr).all()):
            return None
        out.append((lo, hi, pos, rows, c + len(hdr)))
        pos += m * size
    return out


def _read_narrowest(frame: bytes, head: np.ndarray, agents: np.ndarray, sizes: np.ndarray,
                    k: int | None, dtype: str) -> np.ndarray | None:
    """The values if ``frame`` is the batch of ``agents`` in the narrowest layout: nil
    payloads, floats, or ints that are all fixints, so that each envelope's size (``sizes``)
    follows from its agent id. Agents of one width make a block of equal rows, checked and read
    column by column (``_envelope_rows``)."""
    hdr = np.array([NIL], dtype=np.uint8) if k is None else np.frombuffer(
        array_header(k), dtype=np.uint8)
    blocks = _envelope_rows(np.frombuffer(frame, dtype=np.uint8), head, agents, sizes, hdr)
    if blocks is None:
        return None
    out = np.empty((len(agents), k or 0), dtype=np.float64 if dtype == "float" else np.int64)
    if not k:  # nil payloads, or empty arrays: nothing to read
        return out
    for lo, hi, _, rows, off in blocks:
        m = hi - lo
        cells = rows[:, off:]
        if dtype == "float":
            cells = cells.reshape(m, k, 9)
            if not (cells[:, :, 0] == FLOAT64).all():
                return None
            out[lo:hi] = cells[:, :, 1:].copy().view(">f8").reshape(m, k)
        else:
            fixints = cells.view(np.int8)  # 0x00..0x7f: 0..127, 0xe0..0xff: -32..-1
            if fixints.min() < -32:
                return None
            out[lo:hi] = fixints
    return out


def _read_uniform(frame: bytes, head: np.ndarray, agents: np.ndarray,
                  k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, sizes) if ``frame`` is the canonical batch of ``k``-int payloads for
    ``agents[:j]`` (some j >= 1) whose ints have, column by column, the first envelope's
    width and, above a fixint, its marker, else None.

    OLH's (seed, value) pairs are the case: 32-bit hash seeds, all but about one in 65,536
    a uint32, and small values. Every envelope's size then follows from its agent id, as in the
    narrowest layout, and the envelopes of one id width are the rows of a byte matrix: each
    int column is one marker byte and the 8 bytes after it read as a big-endian word through
    a strided view, no search. A frame holding an envelope of other widths (a narrower seed)
    is left to the head search.
    """
    n, size_f = len(agents), len(frame)
    buf = _Buffer(frame)
    hdr = np.frombuffer(array_header(k), dtype=np.uint8)
    h, lh = len(head), len(hdr)
    id_sizes = _sorted_int_sizes(agents)
    markers, at = [], h + int(id_sizes[0]) + lh
    for _ in range(k):  # the first envelope's markers give each column's width
        markers.append(int(buf.bytes[min(at, size_f)]))
        if _WIDTH[markers[-1]] == 0:
            return None
        at += int(_WIDTH[markers[-1]])
    widths = [int(_WIDTH[m]) for m in markers]
    sizes = h + id_sizes + lh + sum(widths)
    ends = np.cumsum(sizes)
    j = int(np.searchsorted(ends, size_f)) + 1
    if j > n or ends[j - 1] != size_f:
        return None
    blocks = _envelope_rows(buf.bytes, head, agents[:j], sizes[:j], hdr)
    if blocks is None:
        return None
    out = np.empty((j, k), dtype=np.int64)
    for lo, hi, pos, rows, off in blocks:
        m, size = hi - lo, int(sizes[lo])
        for col, (marker, w) in enumerate(zip(markers, widths, strict=True)):
            cells = rows[:, off]
            if w == 1:  # fixints: 0x00..0x7f are 0..127, 0xe0..0xff are -32..-1
                value = cells.view(np.int8)
                if value.min() < -32:
                    return None
            else:
                start = pos + off + 1
                word = buf.words[start:start + (m - 1) * size + 1:size].astype(np.int64)
                value = (word >> _SHIFT[marker]) & _MASK[marker]
                if not ((cells == marker).all() and _LOW[marker] <= value.min()
                        and value.max() <= _HIGH[marker]):
                    return None
            out[lo:hi, col] = value
            off += w
    return out, sizes[:j]


def match_prefix(frame: bytes, kind: int, run: int, rnd: int, agents: np.ndarray,
                 k: int | None, dtype: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, sizes) if ``frame`` is exactly the canonical batch of ``kind`` envelopes for
    ``agents[:j]`` (some j >= 1), in this order, each with ``k`` values of ``dtype`` ("int":
    int64, "float": float64; ``k`` None: nil payloads), else None.

    ``agents`` are sorted and distinct (a query batch as sent). Returns the (j, k) values (an
    (j, 0) array for nil payloads) and each envelope's size in bytes.
    """
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    if n == 0 or not frame or (k or 0) > len(frame):
        return None
    compiled = wire_numpy.CODEC.module
    if compiled is not None:  # the compiled reader: one envelope after another
        values = np.empty((n, k or 0), dtype=np.float64 if dtype == "float" else np.int64)
        sizes = np.empty(n, dtype=np.int64)
        j = compiled.read(frame, head_bytes(kind, run, rnd), np.ascontiguousarray(agents),
                          -1 if k is None else k, dtype == "float", values, sizes)
        return None if j < 0 else (values[:j], sizes[:j])
    head = np.frombuffer(head_bytes(kind, run, rnd), dtype=np.uint8)
    h = len(head)
    # the narrowest layout first: every envelope's size follows from its agent id
    fixed = k is None or k == 0 or dtype == "float"
    body = 1 if k is None else array_header_size(k) + k * (9 if dtype == "float" else 1)
    sizes = h + _sorted_int_sizes(agents) + body
    ends = np.cumsum(sizes)
    j = int(np.searchsorted(ends, len(frame))) + 1
    if j <= n and ends[j - 1] == len(frame):
        values = _read_narrowest(frame, head, agents[:j], sizes[:j], k, dtype)
        if values is not None:
            return values, sizes[:j]
    if fixed:
        return None
    # ints of one width per column (e.g. OLH's 32-bit seeds): sizes follow from the ids
    if k <= 64:
        got = _read_uniform(frame, head, agents, k)
        if got is not None:
            return got
    # ints of varying widths: find the envelopes by their head
    buf = _Buffer(frame)
    starts = np.flatnonzero(buf.bytes[:max(0, buf.size - h + 1)] == head[0])
    for t in range(1, h):
        starts = starts[buf.bytes[starts + t] == head[t]]
    ids, width, ok = buf.ints(starts + h)
    ok &= agents[np.minimum(np.searchsorted(agents, ids), n - 1)] == ids
    starts, ids, width = starts[ok], ids[ok], width[ok]
    # the values are read in k steps over every candidate: leave to the reference reader a
    # frame of few envelopes with many values, or with more candidates than its bytes allow
    # (each envelope holds k values, at least k bytes)
    if k > max(64, len(starts)) or k * len(starts) > 2 * buf.size:
        return None
    values, ends, ok = _int_rows(buf, starts + h + width, k)
    # keep the candidates an envelope ends at (a head-like run of payload bytes is not one)
    ended = np.zeros(buf.size + 1, dtype=bool)
    ended[ends[ok]] = True  # rows that are ok end inside the frame
    ended[0] = True
    ok &= ended[starts]
    starts, ids, values, ends = starts[ok], ids[ok], values[ok], ends[ok]
    if not _tiles(starts, ends, buf.size) or len(ids) > n or not np.array_equal(
            ids, agents[:len(ids)]):
        return None
    return values, ends - starts


def match_batch(frame: bytes, kind: int, run: int, rnd: int, agents: np.ndarray, k: int | None,
                dtype: str) -> np.ndarray | None:
    """The payload rows if ``frame`` is exactly the canonical batch for all of ``agents``
    (sorted, distinct, in this order), each payload ``k`` values of ``dtype`` ("int" or
    "float"; ``k`` None: nil), else None. Such a frame decodes to exactly these envelopes, so
    the receiver may skip the per-envelope decoder. Returns an (N, k) int64 or float64 array
    (an (N, 0) array for nil payloads)."""
    got = match_prefix(frame, kind, run, rnd, agents, k, dtype)
    return None if got is None or len(got[1]) != len(agents) else got[0]


def _int_at(b: bytes, i: int) -> tuple[int, int] | None:
    """The msgpack int at byte ``i`` if it is in its shortest encoding: (value, next offset)."""
    if i >= len(b):
        return None
    marker = b[i]
    width = int(_WIDTH[marker])
    if width == 0 or i + width > len(b):
        return None
    if width == 1:
        return int(_FIXINT[marker]), i + 1
    value = int.from_bytes(b[i + 1:i + width], "big", signed=marker >= 0xD0)
    return (value, i + width) if _PACKER.pack(value) == b[i:i + width] else None


def _first(frame: bytes, kind: int) -> tuple[int, int, int, int, int] | None:
    """(run, round, agent, head length, payload offset) of the frame's first envelope, if it
    is a ``kind`` envelope with a non-negative agent id."""
    if len(frame) < 7 or frame[0] != 0x96 or frame[1] != VERSION or frame[2] != kind:
        return None
    run = _int_at(frame, 3)
    rnd = run and _int_at(frame, run[1])
    agent = rnd and _int_at(frame, rnd[1])
    if not agent or agent[0] < 0 or agent[1] >= len(frame):
        return None
    return run[0], rnd[0], agent[0], rnd[1], agent[1]


def first_agent(frame: bytes, kind: int) -> tuple[int, int, int] | None:
    """(run, round, agent) of a frame's first envelope if it is a ``kind`` envelope (its ints
    in their shortest encoding), else None."""
    head = _first(frame[:64], kind)
    return None if head is None else head[:3]


def _batch_layout(frame: bytes, kind: int, dtype: str | None
                  ) -> tuple[int, int, int, int, int | None, str, int] | None:
    """The layout of a canonical batch of ``kind`` envelopes, read from its first: (run,
    round, first agent, head length, values per payload or None for nil, their dtype, the
    most envelopes the frame could hold), or None when it cannot be one."""
    first = _first(frame[:64], kind)
    if first is None:
        return None
    run, rnd, a0, h, i = first
    marker = frame[i]
    if marker == NIL:
        k = None
    elif 0x90 <= marker <= 0x9F:
        k = marker & 0x0F
    elif marker in (0xDC, 0xDD):
        size = 3 if marker == 0xDC else 5
        k = int.from_bytes(frame[i + 1:i + size], "big")
        if array_header_size(k) != size or k > len(frame):
            return None
    else:
        return None
    if dtype is None:
        at = i + array_header_size(k or 0)
        dtype = "float" if not k or frame[at:at + 1] == bytes([FLOAT64]) else "int"
    # at most this many envelopes fit (each at least as long as in the narrowest layout)
    body = 1 if k is None else array_header_size(k) + k * (9 if dtype == "float" else 1)
    return run, rnd, a0, h, k, dtype, len(frame) // (h + 1 + body) + 1


def parse_consecutive(frame: bytes, kind: int, dtype: str | None = None
                      ) -> tuple[int, int, np.ndarray, np.ndarray | None] | None:
    """Fast decode of a frame of ``kind`` envelopes for consecutive agent ids.

    The common case of a round that asks every agent: envelopes for agents a0, a0+1, ... with
    payloads of k ints (int64), k floats (float64) or nil. ``dtype`` ("int" or "float") is
    what the payloads must be; None takes it from the first payload (what ``np.asarray`` of
    the decoded lists would give: float64 for k = 0). Returns (run, round, agents, payload
    rows or None) when the frame is exactly that canonical batch, else None (use the general
    decoder).
    """
    layout = _batch_layout(frame, kind, dtype)
    if layout is None:
        return None
    run, rnd, a0, h, k, dtype, most = layout
    agents = np.arange(a0, min(a0 + most, 2**63 - 1), dtype=np.int64)
    got = match_prefix(frame, kind, run, rnd, agents, k, dtype)
    if got is None:
        return None
    values, sizes = got
    return run, rnd, agents[:len(sizes)], None if k is None else values


def parse_increasing(frame: bytes, kind: int, dtype: str | None = None
                     ) -> tuple[int, int, np.ndarray, np.ndarray | None] | None:
    """``parse_consecutive`` of a batch whose agent ids increase with gaps (a round's batch
    without its offline agents, ``session.network``): the same canonical envelopes, their ids
    read from the frame, each above the one before. None when the frame is not such a batch,
    or without the compiled reader (use the general decoder)."""
    compiled = wire_numpy.CODEC.module
    layout = None if compiled is None else _batch_layout(frame, kind, dtype)
    if layout is None:
        return None
    run, rnd, _, _, k, dtype, most = layout
    agents = np.empty(most, dtype=np.int64)
    values = np.empty((most, k or 0), dtype=np.float64 if dtype == "float" else np.int64)
    sizes = np.empty(most, dtype=np.int64)
    j = compiled.read_ids(frame, head_bytes(kind, run, rnd), agents, -1 if k is None else k,
                          dtype == "float", values, sizes)
    if j < 0:
        return None
    return run, rnd, agents[:j], None if k is None else values[:j]
