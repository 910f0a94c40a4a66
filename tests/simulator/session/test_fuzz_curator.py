"""Sans-IO fuzzing of the curator session: hostile frames never crash it, never change the output.

A small driver (``drive``) runs one clean run like the ``inproc`` backend (a curator and two
honest ``PoolSession``s, frames passed as bytes by direct calls) and, at chosen points, hands the
curator hostile frames from

* an *intruder*: a peer that never registered, at any step of the run, and
* the identity of registered pool 1 (while the real pool 1 keeps running honestly), at the points
  where nothing it sends can legitimately count: after its registration, after its reports of the
  round (pool 0's are still outstanding), after the curator's DONE, after its own DONE.

The frames come from Hypothesis strategies: random bytes, valid msgpack of random objects,
envelopes with hostile fields (ndarray exts, huge or negative ints, floats, strings, ...),
truncated and concatenated batches, and byte-level and field-level mutations of frames captured
from an honest run. Whatever arrives, ``on_frame``, ``on_ready`` and ``on_timeout`` must not raise
(nor lean on the curator's last-resort exception handler), the run must finish, its output must
equal that of a clean run with no dropouts, and the hostile frames must have been rejected
(counted). The one exception allowed to leave ``on_frame`` is ``RunFailed`` after a registered
pool sent an ERROR envelope: that is how a pool reports a crash.

A failing example names the hostile frame, who sent it and when (an exception note, or the
assertion message).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession, RunFailed

from tests import drivers
from tests.conftest import each_chunking

# ----------------------------------------------------------------------------- the run set-up

TOKEN = "fuzz-secret-7f3a"
CONFIG: dict[str, Any] = {
    "protocol": "ldp_kwiksort_rr", "params": {"epsilon": 2.0, "queries": 1},
    "data": {"kind": "mallows", "n": 300, "m": 6, "theta": 0.5}, "seed": 11, "pools": 2,
    "agent_mode": "batched", "batch": 4096,
    "collusion": {"colluders": 6, "curator": True},  # a few colluders: DISCLOSE frames too
    "faults": []}
# an envelope limit well below the frame limit, so that both checks can be reached
LIMITS = Limits(timeout_s=10.0, max_frame_bytes=64 * 1024, max_envelope_bytes=8 * 1024)
#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "CONFIG")




def make_run(config: dict[str, Any], limits: Limits
             ) -> tuple[CuratorSession, list[PoolSession], list[bytes]]:
    """The curator of run 0, its honest pools and their peer identities (pool i is peers[i]).

    The only place that constructs sessions: adapt it here when the constructors change.
    """
    n_pools = int(config["pools"])
    parties = drivers.parties(config)  # what run_inproc hands the curator and its pools
    cur = CuratorSession(0, parties.curator, drivers.AUTH, limits)
    pools = [PoolSession(i, n_pools, drivers.AUTH, limits, parties.pools[i])
             for i in range(n_pools)]
    for p in pools:
        p.can_die = False
    return cur, pools, [b"pool-%d" % i for i in range(n_pools)]


@functools.cache
def clean_output() -> Any:
    """The reference: what a clean run of the same configuration releases."""
    return run_inproc(CONFIG, LIMITS)["output"]


# --------------------------------------------------------------------------------- wire bits
# Written out here rather than imported: the test must not share the code it attacks.

VERSION = 1
HELLO, QUERY, BCAST, REPORT, DISCLOSE, ERROR, DONE = range(7)
EXT_NDARRAY = 1
ND_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float32", "float64"]


def nd(values: Any, dtype: str = "int64") -> msgpack.ExtType:
    """A numpy array as the wire's ndarray ext (dtype code, ndim, uint32 dims, raw bytes)."""
    arr = np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    head = struct.pack(f"<BB{arr.ndim}I", ND_DTYPES.index(dtype), arr.ndim, *arr.shape)
    return msgpack.ExtType(EXT_NDARRAY, head + arr.tobytes())


def pack(*objs: Any) -> bytes:
    return b"".join(msgpack.packb(o, use_bin_type=True) for o in objs)


def kind_of(frame: bytes) -> int | None:
    """Type of the first envelope of an honestly (canonically) encoded frame."""
    if len(frame) >= 4 and frame[0] == 0x96 and frame[1] == VERSION:
        return frame[2]
    return None


def decode_loosely(frame: bytes) -> tuple[list[tuple[Any, int]], bool]:
    """(object, size) of each msgpack object the frame starts with, and whether all of it
    decoded. Laxer than the curator (any map key, any ext), never stricter."""
    up = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=True,
                          ext_hook=lambda code, data: msgpack.ExtType(code, data),
                          max_buffer_size=max(LIMITS.max_frame_bytes, len(frame)))
    up.feed(frame)
    out, prev = [], 0
    try:
        for obj in up:
            out.append((obj, up.tell() - prev))
            prev = up.tell()
    except Exception:
        return out, False
    return out, prev == len(frame)


def _ints(obj: list, *idx: int) -> bool:
    return all(type(obj[i]) is int for i in idx)


def may_hold_error(frame: bytes) -> bool:
    """Whether the frame may carry an ERROR envelope (a registered pool's crash report)."""
    return any(type(o) is list and len(o) == 6 and _ints(o, 1) and o[1] == ERROR
               for o, _ in decode_loosely(frame)[0])


def may_be_accepted(frame: bytes, from_pool: bool, phase: int) -> bool:
    """Whether a hostile frame may legitimately be taken without a rejection: empty, or only
    "ready" HELLOs, or (from the registered pool's identity) disclosures, ERRORs (a crash
    report, a refusal) and, once the curator said DONE, DONE statistics. Everything else must
    be rejected."""
    if len(frame) > LIMITS.max_frame_bytes:
        return False
    objs, whole = decode_loosely(frame)
    if not whole:
        return False
    for o, size in objs:
        if not (type(o) is list and len(o) == 6 and _ints(o, 0, 1, 2, 3, 4)
                and o[0] == VERSION and size <= LIMITS.max_envelope_bytes):
            return False
        if o[1] == HELLO and o[2] == -1:
            continue
        if from_pool and o[2] == 0 and isinstance(o[5], dict) and (
                o[1] in (DISCLOSE, ERROR) or (o[1] == DONE and phase >= 2)):
            continue
        return False
    return True


# ------------------------------------------------------------------------------------ driver

INTRUDER = "intruder"
POOL = "pool"
INTRUDER_PEER = b"intruder"
HOSTILE_POOL = 1  # the registered pool whose identity hostile frames borrow
#: Where frames from the registered pool's identity go in (see ``drive``).
PHASES = {0: "after its registration", 1: "after its reports of round 0",
          2: "after the curator's DONE", 3: "after its DONE statistics"}
MAX_STEPS = 1000
#: Intruder hits go in before driver step 0..MAX_WHEN. A clean run takes 17 steps (registering
#: at steps 0-6, round 0 at 7-11, DONE at 12-16): later hits reach a finished curator.
MAX_WHEN = 20


@dataclass(frozen=True)
class Hit:
    """One hostile action: ``frame`` (None: just say "ready") from ``sender``, at driver step
    ``when`` (intruder) or at injection point ``when`` of ``PHASES`` (pool)."""

    sender: str
    when: int
    frame: bytes | None

    def __repr__(self) -> str:
        f = self.frame
        shown = "None" if f is None else repr(f) if len(f) <= 400 else (
            f"{f[:400]!r} + ... ({len(f)} bytes)")
        return f"Hit({self.sender!r}, {self.when}, {shown})"


class _PoolCrashReport(Exception):
    """A registered pool's ERROR ended the run (allowed): the example stops there."""


@dataclass
class Outcome:
    cur: CuratorSession
    phases: list[int] = field(default_factory=list)
    delivered: list[Hit] = field(default_factory=list)  # hostile frames handled while running
    undelivered: list[Hit] = field(default_factory=list)  # an injection point never came
    must_reject: bool = False
    crash_report: str | None = None  # RunFailed message after a pool's ERROR


def _describe(hit: Hit | None, where: str) -> str:
    what = "an honest frame" if hit is None else repr(hit)
    return f"the curator raised {where}, handling {what}"


def drive(hits: list[Hit] = (), capture: list[tuple[bytes, bytes]] | None = None) -> Outcome:
    """Run CONFIG by direct calls, injecting ``hits``; ``capture`` collects the honest frames
    the curator received.

    Messages to pools go first; of those to the curator, pool 1's go before pool 0's, so pool 1
    registers first and reports first: its injection points fall where pool 0 is still awaited
    (nothing pool 1 sends there can count, so the output cannot depend on it).
    """
    with _quiet():
        return _drive(hits, capture)


@contextlib.contextmanager
def _quiet() -> Any:
    """The curator logs every failed registration: thousands of examples would flood a report."""
    log = logging.getLogger("ldpsim")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _drive(hits: list[Hit], capture: list[tuple[bytes, bytes]] | None) -> Outcome:
    cur, pools, peers = make_run(CONFIG, LIMITS)
    out = Outcome(cur)
    pool_of = dict(zip(peers, pools, strict=True))
    me = peers[HOSTILE_POOL]
    order = [me] + [p for p in peers if p != me]
    intruder = deque(sorted((h for h in hits if h.sender == INTRUDER), key=lambda h: h.when))
    by_phase: dict[int, list[Hit]] = {}
    for h in hits:
        if h.sender == POOL:
            by_phase.setdefault(h.when, []).append(h)
    to_pools: deque[tuple[bytes, bytes]] = deque()
    inbox: dict[bytes, deque[bytes]] = {p: deque() for p in peers}
    for peer, pool in zip(peers, pools, strict=True):
        inbox[peer].append(pool.hello())
    started = False  # the curator sent queries (registrations are closed)
    done_sent = False  # the curator released the output
    phase = -1

    def route(outs: Any) -> list[int | None]:
        nonlocal started, done_sent
        kinds = []
        for dest, frame in outs:
            k = kind_of(frame)
            kinds.append(k)
            started |= k in (QUERY, DONE)
            done_sent |= k == DONE
            if dest in pool_of:
                to_pools.append((dest, frame))
            # replies to the intruder (ERRORs, a set-up) go nowhere
        return kinds

    def call(where: str, gen: Any, hit: Hit | None = None) -> list:
        try:
            return list(gen)
        except Exception as e:
            e.add_note(_describe(hit, where))
            raise

    def hostile(peer: bytes, hit: Hit) -> None:
        if hit.frame is None:
            route(call(f"in on_ready({peer!r})", cur.on_ready(peer), hit))
            return
        running = not cur.finished
        try:
            outs = list(cur.on_frame(peer, hit.frame))
        except RunFailed as e:
            if peer == me and may_hold_error(hit.frame):
                raise _PoolCrashReport(str(e)) from None
            e.add_note(_describe(hit, f"in on_frame from {peer!r}"))
            raise
        except Exception as e:
            e.add_note(_describe(hit, f"in on_frame from {peer!r}"))
            raise
        if running:
            out.delivered.append(hit)
            if not may_be_accepted(hit.frame, peer == me, phase):
                out.must_reject = True
        route(outs)

    def inject(at: int) -> None:
        nonlocal phase
        phase = at
        out.phases.append(at)
        for h in by_phase.pop(at, []):
            hostile(me, h)

    try:
        step = 0
        while not cur.finished:
            while intruder and intruder[0].when <= step and not cur.finished:
                hostile(INTRUDER_PEER, intruder.popleft())
            if cur.finished:
                break
            step += 1
            assert step <= MAX_STEPS, "the run does not finish"
            if done_sent and 2 not in out.phases:
                inject(2)  # before the pools answer the curator's DONE
                continue
            if to_pools:
                dest, frame = to_pools.popleft()
                try:
                    inbox[dest].extend(pool_of[dest].on_frame(frame))
                except Exception as e:
                    e.add_note(f"an honest pool ({dest!r}) raised on the curator's {frame[:200]!r}")
                    raise
                continue
            peer = next((p for p in order if inbox[p]), None)
            if peer is None:  # nothing in flight: exactly when a timeout would fire
                route(call("in on_timeout", cur.on_timeout()))
                continue
            frame = inbox[peer].popleft()
            if capture is not None:
                capture.append((peer, frame))
            kinds = route(call(f"in on_frame from {peer!r}", cur.on_frame(peer, frame)))
            k = kind_of(frame)
            if peer == me and not cur.finished:
                if k == HELLO and frame[3] != 0xFF and not started:  # its registration
                    inject(0)
                elif k == REPORT and not any(x in (QUERY, BCAST, DONE) for x in kinds):
                    inject(1)
                elif k == DONE:
                    inject(3)
        for h in intruder:  # too late: the curator has finished, but must still not raise
            hostile(INTRUDER_PEER, h)
    except _PoolCrashReport as e:
        out.crash_report = str(e)
        return out
    out.undelivered = [h for hs in by_phase.values() for h in hs]
    return out


def check(hits: list[Hit]) -> None:
    """The fuzz property: the curator survives ``hits`` and releases the clean output."""
    out = drive(hits)
    if out.crash_report is not None:
        assert out.crash_report.startswith(f"pool {HOSTILE_POOL} failed"), out.crash_report
        return
    cur = out.cur
    res = cur.result or {}
    why = (f"\n  hostile frames: {hits!r}\n  rejected {res.get('rejected', cur.rejected)}, "
           f"dropouts {res.get('dropouts')}, first rejections: "
           f"{[r['reason'] for r in cur.rejections[:4]]}")
    assert cur.finished, "the run did not finish" + why
    assert not out.undelivered, f"injection points never reached: {out.undelivered}" + why
    # the curator's last-resort handler turned an exception into a rejection: not a crash, but
    # a path its checks did not foresee (and the rest of that frame went unread)
    caught = [r["reason"] for r in cur.rejections if r["reason"].startswith("frame rejected:")]
    assert not caught, f"an exception reached the curator's catch-all: {caught[0]}" + why
    assert res["output"] == clean_output(), "hostile frames changed the output" + why
    assert res["dropouts"] == 0, "hostile frames cost honest reports" + why
    if out.must_reject:
        assert res["rejected"] > 0, "hostile frames were taken without a rejection" + why


# ------------------------------------------------------------------------------- strategies

NASTY_INTS = [0, 1, -1, 2, 3, 5, 6, 7, 127, 128, 149, 150, 151, 255, 256, 299, 300, 65535,
              65536, 2**31 - 1, -2**31, 2**32, 2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**64 - 1,
              -2**63, -2**63 + 1, -33, -129, 10**12]
NASTY_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, 0.5, 3.0, -1.0, 1e300, 5e-324,
                1e16, 2.0**63]
FIELD_NAMES = ["token", "pool", "pools", "n", "agents", "public", "config", "output", "error",
               "traceback", "data", "coins", "agent_cpu_s", "agent_calls", "agent_cpu_s_max",
               "agent_time_mode", "pool_cpu_s", "peak_rss_mb", "m", "data_type", "kind",
               "nonce", "mac", "refused", "code"]
STATS = ["pool", "agent_cpu_s", "agent_calls", "agent_cpu_s_max", "agent_time_mode",
         "pool_cpu_s", "peak_rss_mb"]

ints = st.one_of(st.sampled_from(NASTY_INTS), st.integers(-2**63, 2**64 - 1))
floats = st.one_of(st.sampled_from(NASTY_FLOATS), st.floats())
texts = st.one_of(st.sampled_from([TOKEN, "", "0", "1", "exact", "amortised", "nan", "x" * 300,
                                   *FIELD_NAMES]), st.text(max_size=12))
blobs = st.one_of(st.sampled_from([b"", b"\x00", TOKEN.encode(), b"\xff" * 16]),
                  st.binary(max_size=24))

SPECIAL_ND = [nd([1, 1]), nd([1]), nd([]), nd([[1]]), nd([3, 3]), nd([0, 0]), nd([0]),
              nd([1.0, 1.0], "float64"), nd([True, True], "bool"), nd([2**64 - 1], "uint64"),
              nd([[0], [1]]), nd([math.nan], "float32")]


@st.composite
def nd_exts(draw: Any) -> msgpack.ExtType:
    """ndarray exts: well-formed of any dtype and a small shape, or with a bogus header
    (unknown dtype code, ndim not matching, dims whose product overflows, wrong body size)."""
    how = draw(st.integers(0, 3))
    if how == 0:
        return draw(st.sampled_from(SPECIAL_ND))
    if how == 1:
        code = draw(st.integers(0, len(ND_DTYPES) - 1))
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(ND_DTYPES[code]).itemsize
        head = struct.pack(f"<BB{len(shape)}I", code, len(shape), *shape)
        return msgpack.ExtType(EXT_NDARRAY, head + draw(st.binary(min_size=size, max_size=size)))
    dims = draw(st.one_of(st.lists(st.sampled_from([0, 1, 2, 3, 2**16, 2**31, 2**32 - 1]),
                                   max_size=5),
                          st.just([2**16] * 4)))  # 2^64 elements: wraps to 0 in int64
    code = draw(st.one_of(st.integers(0, 12), st.integers(0, 255)))
    ndim = draw(st.one_of(st.just(len(dims)), st.integers(0, 255)))
    body = draw(st.binary(max_size=24))
    ext = draw(st.sampled_from([EXT_NDARRAY, EXT_NDARRAY, 0, 2, 127]))
    return msgpack.ExtType(ext, bytes([code, ndim]) + b"".join(struct.pack("<I", d)
                                                               for d in dims) + body)


atoms = st.one_of(st.none(), st.booleans(), ints, floats, texts, blobs, nd_exts())
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=6), ints, blobs, st.none(),
                 st.booleans())  # non-string keys: the curator only takes string keys
objects = st.recursive(
    atoms, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                   st.dictionaries(keys, inner, max_size=4)),
    max_leaves=8)
#: a hostile value for any field: the nastiest scalars, or a small container
values = st.one_of(atoms, st.lists(atoms, max_size=3), st.dictionaries(keys, atoms, max_size=3))

#: the values most likely to get past a check that compares before it checks the type
NASTY_VERSIONS = [nd([1, 1]), nd([]), nd([1]), [1], 1.0, True, "1", 2, 2**64 - 1, None]
NASTY_KINDS = [nd([3, 3]), nd([]), 3.0, True, 7, 255, -1, 2**64 - 1, "3", None]
NASTY_FIELDS = [2**64 - 1, 2**63, -2**63, -2, 2**62 + 1, True, False, 0.0, math.nan, "0",
                nd([0, 0]), nd([]), None, [0]]
bad_versions = st.one_of(st.sampled_from(NASTY_VERSIONS), values)
bad_kinds = st.one_of(st.sampled_from(NASTY_KINDS), values)
bad_ints = st.one_of(st.sampled_from(NASTY_FIELDS), values)
runs = st.sampled_from([0, 0, 0, -1, 1])
rounds = st.sampled_from([0, 0, -1, 1])
agents = st.sampled_from([0, 1, 5, 149, 150, 151, 299, 300, -1])


@functools.cache
def _captured() -> tuple[tuple[bytes, bytes], ...]:
    """Every frame an honest run's curator receives (peer, frame), made deterministic: DONE
    statistics hold timings, a registration answers that session's random challenge (its
    "mac", stale in any other session anyway, becomes a fixed one)."""
    frames: list[tuple[bytes, bytes]] = []
    drive([], capture=frames)
    out = []
    for peer, frame in frames:
        if kind_of(frame) == HELLO and frame[3] != 0xFF:
            (obj, _), = decode_loosely(frame)[0]
            if isinstance(obj[5], dict) and "mac" in obj[5]:
                obj[5]["mac"] = bytes(range(32))
                frame = pack(obj)
        if kind_of(frame) == DONE:
            (obj, _), = decode_loosely(frame)[0]
            obj[5] = {"pool": obj[5]["pool"], "agent_cpu_s": 0.0005, "agent_calls": 150,
                      "agent_cpu_s_max": 1e-05, "agent_time_mode": "amortised",
                      "pool_cpu_s": 0.01, "peak_rss_mb": 120.5}
            frame = pack(obj)
        out.append((peer, frame))
    return tuple(out)


def captured_frames() -> list[bytes]:
    return [f for _, f in _captured()]


def registration() -> dict[str, Any]:
    for f in captured_frames():
        if kind_of(f) == HELLO and f[3] != 0xFF:
            return decode_loosely(f)[0][0][0][5]
    raise AssertionError("no registration captured")


# an index, not sampled_from(frames): a strategy's repr would hold every frame
captured = st.integers(0, 63).map(lambda i: captured_frames()[i % len(captured_frames())])
public = st.deferred(lambda: st.just(registration()["public"]))

#: numbers that int() or a numpy cast cannot take, and their look-alikes
NASTY_NUMBERS = [math.inf, -math.inf, math.nan, 2**64 - 1, -2**63, "1", b"1", None, nd([1, 1])]
report_payloads = st.one_of(
    st.sampled_from([[0], [1], [2], [-1], [1.0], [True], [None], [], [0, 1], [[0]], "1", {},
                     [2**64 - 1], [math.nan], nd([1]), nd([[1]]), [nd([1])]]),
    st.lists(atoms, max_size=3), values, st.just([0] * 3000))
registration_payloads = st.fixed_dictionaries(
    {"mac": st.one_of(st.binary(min_size=32, max_size=32), values),
     "pool": st.one_of(st.sampled_from([0, 1, 2, -1, *NASTY_NUMBERS]), values),
     "n": st.one_of(st.sampled_from([300, 299, 0, *NASTY_NUMBERS]), values),
     "agents": st.one_of(st.sampled_from([[0, 150], [150, 300], [150, 300, 1], [],
                                          [150, math.inf], [math.nan, 300], "12"]),
                         st.lists(values, max_size=3), values),
     "public": st.one_of(public, objects)},
    optional={"pools": st.one_of(st.sampled_from([2, 1, 3, *NASTY_NUMBERS]), values),
              "token": st.one_of(st.just(TOKEN), values), "extra": objects})
stats_payloads = st.fixed_dictionaries(
    {}, optional={name: st.one_of(values, st.sampled_from(["1", "x", None, [], {}, -1, math.nan,
                                                           math.inf, 2**64 - 1, True]))
                  for name in STATS}).map(lambda d: d or {"agent_calls": "many"})
disclose_payloads = st.fixed_dictionaries({"data": st.one_of(objects, nd_exts()),
                                           "coins": values}, optional={"more": objects})
error_payloads = st.fixed_dictionaries({"error": values}, optional={"traceback": values})
payloads = st.one_of(report_payloads, registration_payloads, stats_payloads, disclose_payloads,
                     error_payloads, objects)


@st.composite
def envelopes(draw: Any) -> list:
    """A plausible envelope (any type, a payload of its kind or not), then 0-3 hostile fields."""
    kind = draw(st.integers(0, 6))
    by_kind = {REPORT: report_payloads, HELLO: registration_payloads, DONE: stats_payloads,
               DISCLOSE: disclose_payloads, ERROR: error_payloads}
    pay = draw(by_kind.get(kind, payloads) if draw(st.booleans()) else payloads)
    env = [VERSION, kind, draw(runs), draw(rounds), draw(agents), pay]
    for i in draw(st.lists(st.integers(0, 4), max_size=3)):
        env[i] = draw((bad_versions, bad_kinds, bad_ints, bad_ints, bad_ints)[i])
    return env


def _int_forms(v: int) -> list[bytes]:
    """Every msgpack encoding of the integer v (canonical or not)."""
    forms = []
    if 0 <= v < 128 or -32 <= v < 0:
        forms.append(struct.pack("b", v) if v < 0 else bytes([v]))
    for mark, fmt in ((0xCC, ">B"), (0xCD, ">H"), (0xCE, ">I"), (0xCF, ">Q"),
                      (0xD0, ">b"), (0xD1, ">h"), (0xD2, ">i"), (0xD3, ">q")):
        try:
            forms.append(bytes([mark]) + struct.pack(fmt, v))
        except struct.error:
            pass
    return forms


def pack_loose(obj: Any, rng: np.random.Generator) -> bytes:
    """msgpack that decodes to ``obj`` but not necessarily in its shortest form (wider ints,
    wider container headers): what a size-accounting shortcut must not trust."""
    if type(obj) is int:
        forms = _int_forms(obj)
        return forms[int(rng.integers(len(forms)))]
    if isinstance(obj, list):
        n = len(obj)
        heads = [bytes([0x90 | n])] if n < 16 else []
        heads += [b"\xdc" + struct.pack(">H", n), b"\xdd" + struct.pack(">I", n)]
        return heads[int(rng.integers(len(heads)))] + b"".join(pack_loose(o, rng) for o in obj)
    if isinstance(obj, dict):
        n = len(obj)
        heads = [bytes([0x80 | n])] if n < 16 else []
        heads += [b"\xde" + struct.pack(">H", n), b"\xdf" + struct.pack(">I", n)]
        return heads[int(rng.integers(len(heads)))] + b"".join(
            pack_loose(k, rng) + pack_loose(v, rng) for k, v in obj.items())
    if isinstance(obj, str) and rng.random() < 0.5:
        b = obj.encode()
        return b"\xdb" + struct.pack(">I", len(b)) + b
    return msgpack.packb(obj, use_bin_type=True)


#: REPORTs for run 0, round 0 (the round the hostile frames meet), from any agent id
report_envelopes = st.builds(
    lambda a, p: [VERSION, REPORT, 0, 0, a, p],
    st.one_of(agents, st.sampled_from([2**64 - 1, 2**63, -2**63, -2, 2**62 + 1]), ints),
    report_payloads)


@st.composite
def envelope_frames(draw: Any) -> bytes:
    """One to three hostile envelopes (or one to five reports) in a frame, canonically or
    loosely encoded."""
    envs = draw(st.one_of(st.lists(envelopes(), min_size=1, max_size=3),
                          st.lists(report_envelopes, min_size=1, max_size=5)))
    if draw(st.integers(0, 3)) == 0:
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        return b"".join(pack_loose(e, rng) for e in envs)
    return pack(*envs)


HUGE_HEADERS = [b"\xdd\xff\xff\xff\xff", b"\xdc\xff\xff", b"\xdb\xff\xff\xff\xff",
                b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01", b"\xdf\xff\xff\xff\xff",
                b"\xc8\xff\xff\x01", b"\xd9\xff", b"\xde\xff\xff", b"\xc5\xff\xff", b"\xc1",
                b"\xd7\x01", b"\xd4\x01"]
random_bytes = st.one_of(
    st.binary(max_size=64),
    # a plausible envelope start, then garbage: gets past the first byte checks
    st.tuples(st.sampled_from([b"\x96\x01\x03\x00\x00", b"\x96\x01\x00\xff\xff\xff",
                               b"\x96\x01\x06\x00\xff\xff", b"\x96\x01\x04\x00\xff",
                               b"\x96\x01\x03\x00\x00\xcf", b"\x96"]),
              st.sampled_from([b"", *HUGE_HEADERS]), st.binary(max_size=32)).map(b"".join),
    st.sampled_from([b"\x91" * 3000 + b"\x00", b"\x81\xa1a" * 2000 + b"\xc0",  # deep nesting
                     b"\x00" * (64 * 1024 + 1), b"\x96" * 20000,  # oversized, many headers
                     pack([1, REPORT, 0, 0, 150, [0] * 9000]),  # one envelope > its limit
                     b"".join(pack([1, REPORT, 0, 0, a, [1]]) for a in range(150, 300)) * 60]))
msgpack_frames = st.lists(objects, min_size=1, max_size=2).map(lambda objs: pack(*objs))

MUTATIONS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
    st.tuples(st.just("set"), st.integers(0, 1 << 16),
              st.one_of(st.sampled_from([0x00, 0x7F, 0x80, 0x96, 0xC0, 0xC1, 0xC3, 0xCB, 0xCC,
                                         0xCF, 0xD3, 0xD4, 0xDC, 0xDD, 0xDF, 0xE0, 0xFF]),
                        st.integers(0, 255))),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
    st.tuples(st.just("dup")),
    st.tuples(st.just("dup_slice"), st.integers(0, 1 << 16), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 16)),
    st.tuples(st.just("append"), captured))


def mutate(frame: bytes, ops: list[tuple]) -> bytes:
    b = bytearray(frame)
    for op, *args in ops:
        at = args[0] % (len(b) + 1) if args and isinstance(args[0], int) else 0
        if op == "flip" and b:
            b[at % len(b)] ^= args[1]
        elif op == "set" and b:
            b[at % len(b)] = args[1]
        elif op == "cut":
            del b[at:]
        elif op == "dup":
            b.extend(bytes(b))
        elif op == "dup_slice":
            b[at:at] = b[at:at + args[1]]
        elif op == "insert":
            b[at:at] = args[1]
        elif op == "delete":
            del b[at:at + args[1]]
        elif op == "append":
            b += args[0]
    return bytes(b)


mutated_captured = st.builds(mutate, captured, st.lists(MUTATIONS, min_size=1, max_size=3))


@st.composite
def edited_captured(draw: Any) -> bytes:
    """A captured frame with one field of one envelope replaced by a hostile value (a REPORT
    batch with one agent 2^64-1, a DONE with a string statistic, a registration whose "n" is a
    list, ...), the other envelopes left as they were."""
    frame = draw(captured)
    envs = [o for o, _ in decode_loosely(frame)[0]]
    i = draw(st.integers(0, len(envs) - 1))
    env = list(envs[i])
    j = draw(st.integers(0, 5))
    if j == 5 and isinstance(env[5], dict) and env[5] and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(env[5], key=repr)))
        env[5] = {**env[5], key: draw(values)}
    else:
        env[j] = draw((bad_versions, bad_kinds, bad_ints, bad_ints, bad_ints, payloads)[j])
    envs[i] = env
    keep = draw(st.sampled_from(["all", "one", "from"]))
    if keep == "one":
        envs = [env]
    elif keep == "from":
        envs = envs[i:]
    return pack(*envs)


@st.composite
def batches(draw: Any) -> bytes:
    """Valid and hostile envelopes and captured frames concatenated, then maybe truncated."""
    parts = draw(st.lists(st.one_of(envelope_frames(), captured, msgpack_frames,
                                    st.binary(max_size=8)), min_size=1, max_size=4))
    frame = b"".join(parts)
    cut = draw(st.one_of(st.none(), st.integers(0, len(frame))))
    return frame if cut is None else frame[:cut]


def schedules(frames: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[Hit]]:
    """1-4 hostile actions: intruder frames at any step, pool-identity frames at any injection
    point, and now and then an intruder that only says it is ready."""
    hit = st.one_of(
        st.builds(Hit, st.just(INTRUDER), st.integers(0, MAX_WHEN), frames),
        st.builds(Hit, st.just(POOL), st.sampled_from(sorted(PHASES)), frames),
        st.builds(Hit, st.just(INTRUDER), st.integers(0, MAX_WHEN), st.none()))
    return st.lists(hit, min_size=1, max_size=4)


everything = st.one_of(random_bytes, msgpack_frames, envelope_frames(), batches(),
                       mutated_captured, edited_captured())

# -------------------------------------------------------------------------------------- tests

#: The default-suite profile: deterministic (the same examples every run), no deadline (a run
#: takes a few ms, a 64 KiB frame more), no example database, one shrunk failure per test (the
#: slow variant reports every distinct one). 2,350 examples below, about half a minute.
FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=False,
                report_multiple_bugs=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much,
                                       HealthCheck.large_base_example])


def test_driver_reaches_every_injection_point_and_matches_inproc():
    out = drive([])
    assert out.cur.finished and out.phases == sorted(PHASES)
    assert out.cur.result["output"] == clean_output()
    assert out.cur.result["rejected"] == 0
    kinds = {kind_of(f) for f in captured_frames()}
    assert {HELLO, DISCLOSE, REPORT, DONE} <= kinds


def test_hostile_frames_are_counted():
    check([Hit(INTRUDER, 0, b"\xc1"), Hit(POOL, 1, pack([1, REPORT, 0, 0, 150, [1]]))])
    out = drive([Hit(INTRUDER, 3, pack({"not": "an envelope"}))])
    assert out.cur.result["rejected"] == 1


@settings(FUZZ, max_examples=300)
@given(schedules(random_bytes))
def test_fuzz_random_bytes(hits):
    check(hits)


@settings(FUZZ, max_examples=400)
@given(schedules(msgpack_frames))
def test_fuzz_random_msgpack(hits):
    check(hits)


@settings(FUZZ, max_examples=500)
@given(schedules(envelope_frames()))
def test_fuzz_hostile_envelopes(hits):
    check(hits)


@settings(FUZZ, max_examples=250)
@given(schedules(batches()))
def test_fuzz_truncated_and_concatenated(hits):
    check(hits)


@settings(FUZZ, max_examples=400)
@given(schedules(mutated_captured))
def test_fuzz_mutated_captured_frames(hits):
    check(hits)


@settings(FUZZ, max_examples=500)
@given(schedules(edited_captured()))
def test_fuzz_edited_captured_frames(hits):
    check(hits)


@pytest.mark.slow
@settings(FUZZ, max_examples=20000, report_multiple_bugs=True)  # every distinct crash
@given(schedules(everything))
def test_fuzz_everything_slow(hits):
    check(hits)
