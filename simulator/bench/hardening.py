"""``ldpsim bench``: what the decoder's bound costs (``wire.check_frame``, before a frame is
decoded by the reference reader) against the decoding it guards, and how fast it refuses a
container bomb; each implementation, best of five."""

from __future__ import annotations

import struct
import time

from ldpsim.simulator.codec import wire, wire_numpy


def _best(fn, repeats: int = 5) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def _refuse(frame: bytes) -> None:
    try:
        wire.check_frame(frame)
    except wire.WireError:
        return
    raise AssertionError("the bomb was not refused")


def rows(envelopes: int = 200_000) -> list[list[str]]:
    """One row per (frame, implementation): ms to bound it, and the reference reader's ms to
    decode the honest frame."""
    agents = list(range(10**6, 10**6 + envelopes))
    bufs, _ = wire.encode_many(wire.QUERY, 3, 1, agents, [[1, 2]] * envelopes)
    honest = b"".join(bufs)
    n = 8 << 20
    bomb = b"\xdd" + struct.pack(">I", n) + b"\x90" * n
    decode = _best(lambda: wire.unpack_all(honest, len(honest)), 3)
    out = []
    before = wire_numpy.CODEC.name()
    try:
        for impl in ("compiled", "numpy"):
            if impl == "compiled" and wire_numpy.CODEC.built is None:
                continue
            wire_numpy.CODEC.use(impl)
            scan = _best(lambda: wire.check_frame(honest))
            out.append([f"bound, {impl}", f"{len(honest) / 1e6:.1f} MB", f"{1e3 * scan:.1f}",
                        f"{scan / decode:.3f}",
                        f"{envelopes:,} envelopes with list payloads; decoding them: "
                        f"{1e3 * decode:.0f} ms"])
            refuse = _best(lambda: _refuse(bomb), 3 if impl == "compiled" else 1)
            out.append([f"bomb refused, {impl}", f"{len(bomb) / 1e6:.1f} MB",
                        f"{1e3 * refuse:.1f}", "", "8 MB of empty-array markers (decoded: "
                        "about 600 MB of lists)"])
    finally:
        wire_numpy.CODEC.use(before)
    return out
