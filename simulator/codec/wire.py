"""The wire format: msgpack envelopes ``[version, type, run, round, agent, payload]``.

A ZeroMQ message carries one frame holding a *batch*: the concatenation of many envelopes, each
encoded on its own. Because msgpack is self-delimiting, the receiver reads them back one by one
and knows each envelope's exact size, so per-agent byte counts are what that agent would have sent
alone (``len`` of its envelope), whatever the batching.

numpy arrays travel as msgpack ext type 1: one byte dtype code, one byte ndim, ndim little-endian
uint32 dimensions, then the raw little-endian bytes.

This module is the readable reference codec: msgpack-python, one envelope at a time, and every
received envelope validated (``check_envelope``). Its accelerated sibling for batches of one
envelope per agent, ``simulator.codec.wire_numpy`` (writer) and ``simulator.codec.wire_numpy_read``
(reader), writes byte-identical frames and hands back to this module's reader any frame it
cannot read.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
from ldpsim.simulator.codec import compiled

VERSION = 1

HELLO, QUERY, BCAST, REPORT, DISCLOSE, ERROR, DONE = range(7)
TYPE_NAMES = {HELLO: "HELLO", QUERY: "QUERY", BCAST: "BCAST", REPORT: "REPORT",
              DISCLOSE: "DISCLOSE", ERROR: "ERROR", DONE: "DONE"}
NO_AGENT = -1  # agent field of pool-level messages (HELLO, BCAST, DONE, ERROR)
SETUP_ROUND = -1  # round field of the set-up broadcast and registration HELLO
ANY_RUN = -1

EXT_NDARRAY = 1
_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float32", "float64"]
_DTYPE_CODE = {np.dtype(d).str.lstrip("<>|="): i for i, d in enumerate(_DTYPES)}
_CODE_DTYPE = [np.dtype(d).newbyteorder("<") for d in _DTYPES]


class WireError(ValueError):
    """A message could not be decoded or does not have the envelope shape."""


def pack_ext(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        code = _DTYPE_CODE.get(obj.dtype.str.lstrip("<>|="))
        if code is None:
            raise TypeError(f"cannot send numpy dtype {obj.dtype}")
        arr = np.ascontiguousarray(obj, dtype=_CODE_DTYPE[code])
        head = struct.pack(f"<BB{arr.ndim}I", code, arr.ndim, *arr.shape)
        return msgpack.ExtType(EXT_NDARRAY, head + arr.tobytes())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


def unpack_ext(code: int, data: bytes) -> Any:
    if code != EXT_NDARRAY:
        raise WireError(f"unknown msgpack ext type {code}")
    if len(data) < 2 or data[0] >= len(_CODE_DTYPE):
        raise WireError("malformed ndarray ext")
    dtype = _CODE_DTYPE[data[0]]
    ndim = data[1]
    head = 2 + 4 * ndim
    if len(data) < head:
        raise WireError("malformed ndarray ext")
    shape = struct.unpack(f"<{ndim}I", data[2:head])
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - head != count * dtype.itemsize:
        raise WireError("ndarray ext size does not match its shape")
    return np.frombuffer(data, dtype=dtype, offset=head).reshape(shape)


def packer() -> msgpack.Packer:
    """A reusable msgpack Packer with the ndarray hook (not thread-safe)."""
    return msgpack.Packer(default=pack_ext, use_bin_type=True)


_PACKER = packer()


def encode(kind: int, run: int, rnd: int, agent: int, payload: Any = None) -> bytes:
    """One envelope as bytes."""
    return _PACKER.pack([VERSION, kind, run, rnd, agent, payload])


def encode_many(kind: int, run: int, rnd: int, agents: Iterable[int],
                payloads: Iterable[Any] | None) -> tuple[list[bytes], list[int]]:
    """Encode one envelope per agent; returns the envelopes and their sizes in bytes."""
    pack = _PACKER.pack
    if payloads is None:
        bufs = [pack([VERSION, kind, run, rnd, a, None]) for a in agents]
    else:
        bufs = [pack([VERSION, kind, run, rnd, a, p]) for a, p in zip(agents, payloads,
                                                                      strict=True)]
    return bufs, [len(b) for b in bufs]


@dataclass
class Envelope:
    """A decoded envelope and its exact size on the wire."""

    kind: int
    run: int
    round: int
    agent: int
    payload: Any
    size: int


#: The decoder's bound on what a frame may make it build (``check_frame``): Python objects of at
#: most ``COST_RATIO`` bytes per byte of the frame, plus ``COST_BASE``. An honest batch costs
#: 10-20x its bytes (an envelope: a 6-list, a few ints, its payload); a frame of empty arrays
#: (0x90) 64x, of empty maps 72x.
COST_RATIO = 32
COST_BASE = 1 << 20
#: nesting beyond this is refused (msgpack-python's own limit is 1,024)
MAX_DEPTH = 512
#: the object costs the bound counts, in bytes: a container and each of its element slots, an
#: int or float outside the small-int cache, a str or bin (plus its length), an ext (plus its
#: length: the bytes and the ndarray on them), and each object at the frame's top level (its
#: slot in the list ``unpack_all`` returns, with that list's growth reserve: a frame of nils
#: builds no object, but 9 bytes of list per byte)
_CONTAINER, _SLOT, _NUMBER, _BLOB, _EXT, _TOP = 64, 8, 32, 48, 160, 10
# per marker byte from 0xc4: (bytes of the length field or fixed size, kind); kinds: "b" bin or
# str (length field), "e" ext (length field, then a type byte), "n" number (fixed size), "E"
# fixext (fixed size), "a"/"m" array/map (length field)
_LONG = {0xC4: (1, "b"), 0xC5: (2, "b"), 0xC6: (4, "b"), 0xC7: (1, "e"), 0xC8: (2, "e"),
         0xC9: (4, "e"), 0xCA: (5, "n"), 0xCB: (9, "n"), 0xCC: (2, "n"), 0xCD: (3, "n"),
         0xCE: (5, "n"), 0xCF: (9, "n"), 0xD0: (2, "n"), 0xD1: (3, "n"), 0xD2: (5, "n"),
         0xD3: (9, "n"), 0xD4: (3, "E"), 0xD5: (4, "E"), 0xD6: (6, "E"), 0xD7: (10, "E"),
         0xD8: (18, "E"), 0xD9: (1, "b"), 0xDA: (2, "b"), 0xDB: (4, "b"), 0xDC: (2, "a"),
         0xDD: (4, "a"), 0xDE: (2, "m"), 0xDF: (4, "m")}


def scan_frame(frame: bytes | memoryview) -> tuple[int, str | None]:
    """What decoding ``frame`` would build, computed from its bytes before anything is built:
    ``(cost, why)``, ``why`` a reason to refuse it or None.

    Refused: a container whose declared length exceeds what the rest of the frame could hold
    (each element takes at least a byte, besides the elements the enclosing containers still
    await), nesting beyond ``MAX_DEPTH``, or objects costing more than ``COST_RATIO`` bytes per
    byte of the frame plus ``COST_BASE``. The scan stops without a reason at the first byte
    that is not msgpack or at a truncated object: the decoder then reports it. The reference
    implementation; the compiled codec's ``scan`` gives the same answer."""
    buf = memoryview(frame).cast("B")
    end, pos, cost, need = len(buf), 0, 0, 0
    budget = COST_RATIO * end + COST_BASE
    stack: list[int] = []  # elements each open container still awaits
    while pos < end:
        b = buf[pos]
        elements = -1  # a container's, or -1 for a scalar
        if not stack:
            cost += _TOP
        if b <= 0x7F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
            pos += 1
        elif b <= 0x8F:
            elements, pos = 2 * (b & 0x0F), pos + 1
        elif b <= 0x9F:
            elements, pos = b & 0x0F, pos + 1
        elif b <= 0xBF:
            pos, cost = pos + 1 + (b & 0x1F), cost + _BLOB + (b & 0x1F)
        elif b == 0xC1:
            return cost, None
        else:
            width, kind = _LONG[b]
            if kind in "nE":
                pos, cost = pos + width, cost + (_NUMBER if kind == "n" else _EXT + width)
            else:
                if pos + 1 + width > end:
                    return cost, None
                n = int.from_bytes(buf[pos + 1:pos + 1 + width], "big")
                pos += 1 + width
                if kind == "b":
                    pos, cost = pos + n, cost + _BLOB + n
                elif kind == "e":
                    pos, cost = pos + 1 + n, cost + _EXT + n
                else:
                    elements = 2 * n if kind == "m" else n
        if pos > end:
            return cost, None  # truncated: the decoder says so
        if stack:
            stack[-1] -= 1
            need -= 1
        if elements >= 0:
            cost += _CONTAINER + _SLOT * elements
            if elements:
                stack.append(elements)
                need += elements
                if need > end - pos:
                    return cost, (f"a container at byte {pos - 1} declares {elements} "
                                  f"elements, more than the {end - pos} bytes left could hold")
                if len(stack) > MAX_DEPTH:
                    return cost, f"nested deeper than {MAX_DEPTH} containers"
        while stack and stack[-1] == 0:
            stack.pop()
        if cost > budget:
            return cost, (f"decoding would build more than {COST_RATIO} bytes of objects per "
                          f"byte of the frame (by byte {pos} of {end})")
    return cost, None


def check_frame(frame: bytes) -> None:
    """Raise WireError if decoding ``frame`` is refused (``scan_frame``), before any object is
    built; in C when the compiled codec is built (``simulator/codec/_wirec.c``: the same answer)."""
    scan = _compiled_scan()
    if scan is not None:
        code = scan(frame, COST_RATIO, COST_BASE, MAX_DEPTH)
        if code >= 0:
            return
        raise WireError(f"frame refused: {_REFUSALS[code]}")
    if _surely_cheap(frame):  # without the compiled scan: most frames need no walk
        return
    why = scan_frame(frame)[1]
    if why is not None:
        raise WireError(f"frame refused: {why}")


#: the compiled scan's refusals, in the words of ``scan_frame``
_REFUSALS = {-1: "a container declares more elements than the rest of the frame could hold",
             -2: f"decoding would build more than {COST_RATIO} bytes of objects per byte of "
                 "the frame",
             -3: f"nested deeper than {MAX_DEPTH} containers"}


def _surely_cheap(frame: bytes) -> bool:
    """An upper bound of ``scan_frame``'s cost from the frame's bytes (every byte that could
    start a container, a number, a str or bin, or an ext counted as one) is within the budget:
    one pass in C over a copy of the frame's size, through ``bytes.translate``. Declared
    lengths are not looked at: the decoder's own limits (``_unpacker``) refuse a container
    longer than the frame."""
    kinds = bytes(frame).translate(_KINDS)
    bound = (_CONTAINER * kinds.count(b"c") + _NUMBER * kinds.count(b"n")
             + _BLOB * kinds.count(b"b") + _EXT * kinds.count(b"e")
             + (_SLOT + _TOP + 1) * len(frame))
    return bound <= COST_RATIO * len(frame) + COST_BASE


#: each byte value's kind, for ``_surely_cheap``: c container, n number, b str or bin, e ext
_KINDS = bytes(ord("c") if 0x80 <= v <= 0x9F or 0xDC <= v <= 0xDF
               else ord("n") if 0xCA <= v <= 0xD3
               else ord("b") if 0xA0 <= v <= 0xBF or 0xC4 <= v <= 0xC6 or 0xD9 <= v <= 0xDB
               else ord("e") if 0xC7 <= v <= 0xC9 or 0xD4 <= v <= 0xD8
               else ord(".") for v in range(256))


def _compiled_scan():
    """The compiled codec's ``scan`` when the codec in use is the compiled one, else None."""
    return getattr(compiled.CODEC.module, "scan", None)


def _unpacker(frame: bytes, max_buffer: int) -> msgpack.Unpacker:
    """An Unpacker reading one batch frame (ndarray ext hook, string map keys only).

    Small frames are fed whole; a large one is read through a view in 1 MiB pieces, so that a
    peer's 16 MiB frame is never copied whole into the unpacker's buffer (whoever stops
    reading early, as the curator does after too many invalid envelopes, pays for what it
    read only)."""
    check_frame(frame)  # what it would build, bounded before anything is
    size = max(max_buffer, len(frame))
    # no container may declare more elements than the frame has bytes (each takes one)
    lengths = {"max_array_len": len(frame), "max_map_len": len(frame) // 2}
    if len(frame) <= 1 << 20:
        unpacker = msgpack.Unpacker(raw=False, ext_hook=unpack_ext, max_buffer_size=size,
                                    strict_map_key=True, use_list=True, **lengths)
        unpacker.feed(frame)
        return unpacker
    return msgpack.Unpacker(io.BytesIO(frame), read_size=1 << 20, raw=False,
                            ext_hook=unpack_ext, max_buffer_size=size, strict_map_key=True,
                            use_list=True, **lengths)


def iter_frame(frame: bytes, max_buffer: int) -> Iterator[tuple[Any, int]]:
    """Yield ``(object, size)`` for each msgpack object in a batch frame.

    Raises WireError at the first undecodable or truncated object (objects before it have
    already been yielded).
    """
    unpacker = _unpacker(frame, max_buffer)
    prev = 0
    try:
        for obj in unpacker:
            pos = unpacker.tell()
            yield obj, pos - prev
            prev = pos
    except WireError:
        raise
    except Exception as e:  # msgpack raises several types (FormatError, StackError, ValueError)
        raise WireError(f"undecodable msgpack at byte {prev}: {type(e).__name__}: {e}") from None
    if prev != len(frame):
        raise WireError(f"truncated envelope: {len(frame) - prev} trailing bytes at byte {prev}")


def check_envelope(obj: Any, size: int) -> Envelope:
    """Validate the envelope shape and field types; raise WireError with the reason."""
    if type(obj) is not list or len(obj) != 6:
        raise WireError(f"not an envelope: expected a list of 6 fields, got "
                        f"{type(obj).__name__}{'' if type(obj) is not list else f' of {len(obj)}'}")
    version, kind, run, rnd, agent, payload = obj
    # types first: a peer's ndarray compared with == gives an array, not a bool
    if type(version) is not int or version != VERSION:
        raise WireError(f"unsupported version {quote(version)}; this is version {VERSION}")
    if type(kind) is not int or kind not in TYPE_NAMES:
        raise WireError(f"unknown message type {quote(kind)}")
    for name, v in (("run", run), ("round", rnd), ("agent", agent)):
        if type(v) is not int:
            raise WireError(f"field {name} must be an integer, got {type(v).__name__}")
        if not FIELD_MIN <= v <= FIELD_MAX:
            raise WireError(f"field {name} out of range: {quote(v)} (allowed {FIELD_MIN} to "
                            f"2^62)")
    return Envelope(kind, run, rnd, agent, payload, size)


#: Bounds of the integer fields run, round and agent: -1 (ANY_RUN, SETUP_ROUND, NO_AGENT) to
#: 2^62, so that every accepted value fits numpy's int64 with room for arithmetic.
FIELD_MIN, FIELD_MAX = -1, 1 << 62

#: How much of a peer's input a reason quotes (a reason must never grow with the input).
QUOTE_CHARS = 120


def quote(value: Any, limit: int = QUOTE_CHARS, _depth: int = 0) -> str:
    """``repr`` of a peer's value, cut to ``limit`` characters, computed on a bounded prefix
    (formatting a 16 MB string or a deeply nested list must not cost 16 MB first)."""
    if isinstance(value, str | bytes | bytearray):
        text = repr(value[:limit])
        long = len(value) > limit
    elif isinstance(value, list | tuple):
        inner = ", ".join(quote(v, 24, _depth + 1) for v in value[:8]) if _depth < 2 else "..."
        text = f"[{inner}]"
        long = len(value) > 8
    elif isinstance(value, dict):
        text = f"<map of {len(value)} keys>"
        long = False
    elif isinstance(value, np.ndarray):
        text = f"<ndarray {value.dtype} {value.shape}>"
        long = False
    else:
        text = repr(value)
        long = False
    if len(text) > limit:
        text, long = text[:limit], True
    return text + ("..." if long else "")


def decode_one(buf: bytes, max_buffer: int = 1 << 20) -> Envelope:
    """Decode a frame that holds exactly one envelope."""
    items = list(iter_frame(buf, max_buffer))
    if len(items) != 1:
        raise WireError(f"expected one envelope, got {len(items)}")
    return check_envelope(*items[0])


def objects(frame: bytes, max_buffer: int) -> Iterator[Any]:
    """The objects of a batch frame one at a time, without their sizes (a caller that stops
    early has built only what it read). Raises WireError on undecodable or truncated input."""
    unpacker = _unpacker(frame, max_buffer)
    try:
        yield from unpacker
    except Exception as e:
        raise WireError(f"undecodable msgpack: {type(e).__name__}: {e}") from None
    if unpacker.tell() != len(frame):
        raise WireError("truncated envelope")


def unpack_all(frame: bytes, max_buffer: int) -> list[Any]:
    """All objects of a batch frame, decoded in one C loop (no per-object sizes).

    Raises WireError on undecodable or truncated input.
    """
    unpacker = _unpacker(frame, max_buffer)
    try:
        objs = list(unpacker)
    except Exception as e:
        raise WireError(f"undecodable msgpack: {type(e).__name__}: {e}") from None
    if unpacker.tell() != len(frame):
        raise WireError("truncated envelope")
    return objs
