"""Attacks on the runtime, one test each, named for the attack (docs/threat-model.md).

Each test mounts an attack an untrusted curator, a colluding or stolen-token pool, or an
outsider on the network could mount, and checks that it fails: the curator neither crashes nor
stalls nor bloats, clean agents' results are unchanged, and the curator learns no more than the
privacy claim allows. Most run the sessions sans-IO (frames passed by direct calls, as the inproc
backend does); the ones about sockets, deadlines and file descriptors use real ZeroMQ sockets.
"""

from __future__ import annotations

import math
import threading
import time
import tracemalloc
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq
from ldpsim.protocols import PROTOCOLS, get_data_kind, get_protocol
from ldpsim.protocols.base import Bound
from ldpsim.protocols.keys import DataKeys, Secrets
from ldpsim.simulator.backends.door import show
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession, RunFailed
from ldpsim.simulator.session.keyfiles import registration_key
from ldpsim.simulator.session.seeding import curator_config, local_parties, run_keys
from ldpsim.simulator.session.signing import registration_mac

from tests.conftest import each_chunking, free_port

TOKEN = "attack-test-token"
SALT = b"attack-test-salt"
#: the registration key every honest pool of these tests holds (from the token, as on hosts)
AUTH = registration_key(TOKEN, SALT)
#: an experiment's own master secret (the hosts backend's, or ``--secret``)
SECRETS = Secrets(b"attack-test master secret, 32 B!")
LIMITS = Limits(timeout_s=10.0)


def config(n: int = 400, seed: int = 5, **over: Any) -> dict:
    cfg = {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 1},
           "data": {"kind": "mallows", "n": n, "m": 6, "theta": 0.5}, "seed": seed,
           "pools": 2, "agent_mode": "batched", "batch": 4096,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    cfg.update(over)
    return cfg


#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "config")


class Run:
    """A curator and honest pools driven by hand; ``inject`` hands the curator extra frames."""

    def __init__(self, cfg: dict, limits: Limits = LIMITS, secrets: Secrets | None = SECRETS,
                 record_view: bool = False) -> None:
        self.cfg = cfg
        self.parties = local_parties(cfg, cfg["data"]["n"], secrets, AUTH)
        self.cur = CuratorSession(0, self.parties.curator, AUTH, limits, record_view)
        self.pools = {b"pool-%d" % i: PoolSession(i, cfg["pools"], AUTH, limits,
                                                  self.parties.pools[i])
                      for i in range(cfg["pools"])}
        self.queue: list[tuple[bool, bytes, bytes]] = [
            (True, peer, p.hello()) for peer, p in self.pools.items()]
        self.to_others: list[tuple[bytes, bytes]] = []  # what the curator sent to non-pools

    def inject(self, peer: bytes, frame: bytes) -> None:
        self._deliver(self.cur.on_frame(peer, frame))

    def _deliver(self, outs) -> None:
        for dest, f in outs:
            if dest in self.pools:
                self.queue.append((False, dest, f))
            else:
                self.to_others.append((dest, f))

    def step(self) -> bool:
        if not self.queue:
            self._deliver(self.cur.on_timeout())
            return not self.cur.finished
        to_cur, peer, frame = self.queue.pop(0)
        if to_cur:
            self._deliver(self.cur.on_frame(peer, frame))
        else:
            self.queue += [(True, peer, f) for f in self.pools[peer].on_frame(frame)]
        return not self.cur.finished

    def until(self, cond) -> None:
        while not cond() and self.step():
            pass

    def finish(self) -> dict:
        while self.step():
            pass
        return self.cur.result


def clean(cfg: dict) -> dict:
    return run_inproc(cfg, LIMITS, secrets=SECRETS)


def registered(run: Run) -> bool:
    return run.cur.state != "registering"


# ------------------------------------------------------------------- 2. crashes from one frame

def test_attack_ndarray_version_field_is_a_rejection_not_a_crash():
    """31 bytes: an envelope whose version is a 2-element ndarray ext (== gives an array)."""
    head = bytes([7, 1]) + (2).to_bytes(4, "little")
    version = msgpack.ExtType(wire.EXT_NDARRAY, head + np.array([1, 1]).tobytes())
    frame = msgpack.packb([version, wire.REPORT, 0, 0, 0, [1]])
    cfg = config()
    run = Run(cfg)
    run.inject(b"outsider", frame)  # before registration
    run.until(lambda: registered(run))
    run.inject(b"outsider", frame)
    run.inject(b"pool-1", frame)  # from a registered pool, during the round
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert res["rejected"] == 3
    assert "unsupported version <ndarray int64 (2,)>" in res["rejections"][0]["reason"]


def test_attack_report_from_agent_id_2_64_minus_1_is_a_rejection_not_a_crash():
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    for agent in (2**64 - 1, 2**63, -5, cfg["data"]["n"], 10**12):
        frames = [msgpack.packb([1, wire.REPORT, 0, 0, agent, [1]]),
                  msgpack.packb([1, wire.REPORT, 0, 0, agent, [1]]) * 3]
        for f in frames:
            run.inject(b"pool-1", f)
    res = run.finish()
    assert res["output"] == clean(cfg)["output"] and res["dropouts"] == 0
    assert res["rejected"] == 20


def test_attack_done_statistics_of_the_wrong_type_are_rejected():
    cfg = config()
    run = Run(cfg)
    run.until(lambda: run.cur.state == "done")
    bad = wire.encode(wire.DONE, 0, -1, -1, {"agent_cpu_s": "lots", "agent_calls": 2**64 - 1})
    run.inject(b"pool-0", bad)  # arrives before pool 0's own DONE
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert res["rejected"] == 1 and "DONE statistic" in res["rejections"][0]["reason"]
    assert isinstance(res["timing"]["agent_cpu_s_mean"], float)


@pytest.mark.parametrize("n", [10**12, -1, 0, "many"])
def test_attack_token_holder_registering_absurd_n_is_refused(n):
    """A pool with the token claims n = 10^12 (or -1): refused, no allocation, no crash."""
    cfg = config()
    run = Run(cfg)
    (_, setup), = run.cur.on_ready(b"thief")
    nonce = wire.decode_one(setup).payload["nonce"]
    mac = registration_mac(AUTH, nonce, 0, 0, 2)
    run.inject(b"thief", wire.encode(wire.HELLO, 0, -1, -1, {
        "pool": 0, "pools": 2, "n": n, "agents": [0, 5], "public": {}, "mac": mac}))
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert "registration refused" in res["rejections"][0]["reason"]


# ----------------------------------------------------- 2. CPU, memory and deadline amplification

def test_attack_frame_of_garbage_costs_a_bounded_number_of_rejections():
    """200 KB of msgpack nils used to cost a scan of every stored rejection per object."""
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    t = time.process_time()
    run.inject(b"pool-1", b"\xc0" * 200_000)
    spent = time.process_time() - t
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert res["rejected"] == 65  # 64 objects, then the rest of the frame dropped unread
    assert "rest of the frame dropped" in run.cur.rejections[-1]["reason"]
    assert spent < 1.0  # it took 16 s before; generous for a loaded machine


@pytest.mark.parametrize("kind", ["reports", "garbage after a hello"])
def test_attack_an_outsiders_frame_of_many_envelopes_costs_one_envelope(kind, monkeypatch):
    """An outsider (no registered pool) packs 50 envelopes into one message during a round
    (each report of the soak test's attack cost the curator a decode and a schema check: 665
    us a frame). An unregistered peer can only say it is ready or register, one envelope per
    message: the curator reads the first envelope, then drops the frame's rest unread."""
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    one = msgpack.packb([1, wire.REPORT, 0, 0, 5, [1]])
    frame = (one * 50 if kind == "reports" else
             wire.encode(wire.HELLO, -1, -1, -1, {"pool": 0, "pools": 2}) + b"\xc0" * 49)
    decoded = []
    check = wire.check_envelope
    monkeypatch.setattr(wire, "check_envelope",
                        lambda obj, size: decoded.append(obj) or check(obj, size))
    for _ in range(3):
        run.inject(b"outsider", frame)
    monkeypatch.undo()
    res = run.finish()
    assert res["output"] == clean(cfg)["output"] and res["dropouts"] == 0
    assert len(decoded) <= 3  # the first envelope of each frame, nothing after it
    assert res["rejected"] == (6 if kind == "reports" else 3)  # per frame: (report,) rest
    assert all("one envelope per message" in r["reason"]
               for r in res["rejections"] if "rest" in r["reason"])
    assert sum("one envelope per message" in r["reason"] for r in res["rejections"]) == 3


def test_attack_large_frames_of_empty_arrays_do_not_bloat_the_curator():
    """16 MiB of empty msgpack arrays used to become 16 M Python lists (1.3 GB)."""
    cfg = config()
    run = Run(cfg, Limits(timeout_s=10.0, max_frame_bytes=32 << 20))
    run.until(lambda: registered(run))
    junk = b"\x90" * (16 << 20)
    tracemalloc.start()
    try:
        run.inject(b"outsider", junk)  # unregistered: refused by size, never decoded
        run.inject(b"pool-1", junk)  # registered: decoded as a stream, dropped after 64
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB"  # read in chunks, never whole
    assert "oversized frame from an unregistered peer" in res["rejections"][0]["reason"]


def test_attack_reasons_quote_a_bounded_part_of_the_input():
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    huge = "x" * 500_000
    run.inject(b"pool-1", msgpack.packb([1, huge, 0, 0, 0, None]))
    run.inject(b"pool-1", msgpack.packb([1, wire.REPORT, 0, 0, 3, [huge] * 8]))
    res = run.finish()
    assert res["rejected"] == 2
    assert all(len(r["reason"]) <= 310 for r in res["rejections"])
    errors = [f for dest, f in run.to_others]
    assert all(len(f) < 1000 for f in errors)


def test_attack_error_replies_are_capped_per_peer():
    cfg = config()
    run = Run(cfg, Limits(timeout_s=10.0, max_error_replies=5))
    for _ in range(50):
        run.inject(b"outsider", b"\xc1")
    res = run.finish()
    assert res["rejected"] == 50 and len(run.to_others) == 5
    assert len(res["rejections"]) == 50


# ------------------------------------------------------------- 1. the curator cannot derive data

def _integers(obj: Any, out: set[int]) -> set[int]:
    """Every integer (and every 8-byte chunk of every byte string) in what a party holds."""
    if isinstance(obj, bool):
        return out
    if isinstance(obj, int):
        out.add(obj)
    elif isinstance(obj, bytes | bytearray):
        for i in range(0, len(obj) - 7):
            out.add(int.from_bytes(obj[i:i + 8], "little"))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _integers(k, out)
            _integers(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _integers(v, out)
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "iu" and obj.size < 10_000:
        out.update(int(x) for x in obj.ravel())
    return out


def _regenerate(cfg: dict, data_keys: DataKeys, coins: Any, view: dict) -> bool:
    """Do these keys reproduce round 0's reports exactly (the data and every agent's coins:
    one coin key per agent of the round, or a stream key)?"""
    rnd = view["rounds"][0]
    n = cfg["data"]["n"]
    ds = get_data_kind("mallows").build({k: v for k, v in cfg["data"].items() if k != "kind"},
                                        data_keys)
    proto = get_protocol(cfg["protocol"])
    params = proto.resolve(cfg["params"], ds.public)
    agents = np.asarray(rnd["report_agents"])
    if isinstance(coins, np.ndarray):
        coins = coins[agents]
    bound = proto.bind(params, ds.public, resolved=True)
    reports = proto.respond(bound.block(0, ds.rows(0, n)[agents], agents, coins,
                                        queries=rnd["queries"], broadcast=rnd["broadcast"]))
    return bool(np.array_equal(np.asarray(reports), np.asarray(rnd["reports"])))


@pytest.mark.parametrize("secrets", [None, SECRETS], ids=["the seed's", "a secret"])
def test_attack_curator_regenerates_reports_from_all_it_received(secrets):
    """Hand an attack everything the curator process received -- its configuration, its key,
    the registration key, every frame -- and let it try every integer in there as the run
    seed (the keys a run without a secret derives from it), as a data key and as the agents'
    stream key. It must not reproduce the agents' reports; the same attack given the real seed
    (and secret) does (so it is not vacuous)."""
    cfg = config(n=300, seed=77)
    ccfg = curator_config(cfg, secrets)
    assert "seed" not in ccfg and cfg["seed"] not in _integers(ccfg, set())
    run = Run(cfg, secrets=secrets, record_view=True)
    frames: list[bytes] = []
    orig = run.cur.on_frame

    def spy(peer, frame):
        frames.append(frame)
        return orig(peer, frame)

    run.cur.on_frame = spy
    res = run.finish()
    view = res["view"]
    received = _integers([ccfg, AUTH, frames], set())
    assert len(received) > 100
    every = np.arange(cfg["data"]["n"])
    hits = 0
    for c in received:
        if c < 0 or c >= 1 << 64:
            continue
        k = run_keys(c)
        guesses = [(k.data, k.coins(cfg, every)), (DataKeys.of_seed(c), c)]
        hits += any(_regenerate(cfg, d, a, view) for d, a in guesses)
    assert hits == 0
    true = run_keys(cfg["seed"], secrets)
    assert _regenerate(cfg, true.data, true.coins(cfg, every), view)  # works with the seed


def test_attack_hello_without_token_gets_no_seed_and_no_keys():
    """A stranger's set-up holds the public configuration (signed) and a nonce: no seed, no
    key of the curator's, no agent's key."""
    cfg = config()
    run = Run(cfg)
    (_, setup), = run.cur.on_ready(b"stranger")
    payload = wire.decode_one(setup).payload
    public = msgpack.unpackb(payload["config"], strict_map_key=False)
    assert "seed" not in public and "keys" not in public
    assert cfg["seed"] not in _integers(payload, set())
    keys = run_keys(cfg["seed"], SECRETS)
    agents = set(keys.coins(cfg, np.arange(cfg["data"]["n"])).tolist())
    agents |= set(keys.data.range(0, cfg["data"]["n"]).tolist())
    leaked = _integers(payload, set()) & ({keys.curator, keys.data.population} | agents)
    assert not leaked


# ------------------------------------------------------------------------- 3. registration

def _registration(run: Run, peer: bytes, pool_index: int) -> bytes:
    """The registration an honest pool would send to ``run``'s curator (captured)."""
    p = PoolSession(pool_index, 2, AUTH, LIMITS, run.parties.pools[pool_index])
    (_, setup), = run.cur.on_ready(peer)
    (hello,) = p.on_frame(setup)[:1]
    return hello


def test_attack_replayed_registration_from_an_earlier_run_is_refused():
    cfg = config()
    old = Run(cfg)
    captured = _registration(old, b"victim", 0)  # sniffed on the wire in an earlier run
    run = Run(cfg)
    run.inject(b"replayer", captured)
    res = run.finish()
    assert res["output"] == clean(cfg)["output"] and res["pools_registered"] == 2
    assert "authentication failed" in res["rejections"][0]["reason"]
    assert b"token" not in captured and TOKEN.encode() not in captured  # never in clear
    assert AUTH not in captured


def test_attack_outsider_cannot_steal_a_pool_slot():
    cfg = config()
    run = Run(cfg)
    (_, setup), = run.cur.on_ready(b"thief")
    nonce = wire.decode_one(setup).payload["nonce"]
    for guess in ("attack-test-tokem", "token token token", "attack-test-token!"):
        mac = registration_mac(registration_key(guess, SALT), nonce, 0, 0, 2)
        run.inject(b"thief", wire.encode(wire.HELLO, 0, -1, -1, {  # wrong tokens: refused
            "pool": 0, "pools": 2, "n": 400, "agents": [0, 200], "public": {}, "mac": mac}))
    run.inject(b"thief", wire.encode(wire.HELLO, 0, -1, -1, {"pool": 0, "pools": 2, "n": 400,
                                                              "agents": [0, 200], "public": {},
                                                              "mac": nonce * 2}))
    res = run.finish()
    assert res["output"] == clean(cfg)["output"] and res["pools_registered"] == 2
    assert res["rejected"] == 3  # the fourth attempt is ignored: three failures per peer
    assert all("authentication failed" in r["reason"] for r in res["rejections"])


def test_refused_pool_waits_for_the_next_run_and_joins_it():
    cfg = config()
    run = Run(cfg)
    late = PoolSession(0, 2, AUTH, LIMITS, run.parties.pools[0])
    run.until(lambda: registered(run))  # both slots taken by the honest pools
    assert not list(run.cur.on_ready(b"late"))  # no set-up once the rounds started
    setup = run.cur.registration.setup_frame  # it kept the one it got while the curator registered
    outs = []
    for f in late.on_frame(setup):
        outs += [fr for dest, fr in run.cur.on_frame(b"late", f)]
    assert late.config is not None
    for f in outs:
        late.on_frame(f)  # the refusal
    assert late.idle and "registration refused" in late.refused_reason
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    nxt = Run(cfg)
    (_, setup2), = nxt.cur.on_ready(b"late")
    assert late.on_frame(setup2) and not late.idle  # set up for the next run


def test_pool_set_up_for_a_dead_curator_takes_the_new_curators_run():
    """After a curator crash, the new curator's set-up (a new nonce) replaces the dead run."""
    cfg = config()
    dead, alive = Run(cfg), Run(cfg)
    pool = PoolSession(0, 2, AUTH, LIMITS, alive.parties.pools[0])
    (_, setup), = dead.cur.on_ready(b"p")
    pool.on_frame(setup)
    assert pool.nonce == dead.cur.registration.nonce
    (_, setup2), = alive.cur.on_ready(b"p")
    hello = pool.on_frame(setup2)[0]
    assert pool.nonce == alive.cur.registration.nonce
    list(alive.cur.on_frame(b"p", hello))
    assert b"p" in alive.cur.pools


# --------------------------------------------------------------------- 4. the privacy odometer

class _RogueCurator:
    """Asks every agent the same pair in ``rounds`` rounds, to average the coins away."""

    def __init__(self, inner, rounds: int) -> None:
        self.inner, self.rounds, self.answers = inner, rounds, []
        self.first = None

    def plan(self, rnd: int):
        if rnd >= self.rounds:
            return None
        if self.first is None:
            self.first = self.inner.plan(0)
        p = self.first
        return type(p)(rnd, p.agents, p.queries, p.broadcast, p.schema, p.report_bits)

    def absorb(self, rnd, agents, reports):
        self.answers.append((np.asarray(agents).copy(), np.asarray(reports).copy()))

    def finish(self):
        return {"ranking": []}


def _rogue_run(monkeypatch, enforce: bool) -> tuple[float, dict, _RogueCurator]:
    proto = PROTOCOLS["ldp_kwiksort_rr"]
    holder: dict = {}

    def make_curator(bound, agents, key, coins=0):
        holder["c"] = _RogueCurator(type(proto).make_curator(proto, bound, agents, key, coins),
                                    301)
        return holder["c"]

    monkeypatch.setattr(proto, "make_curator", make_curator)
    if not enforce:  # the attack's positive control: pools that answer anything
        # every round free, as the pools' odometers read it from the run's bound mechanisms
        monkeypatch.setattr(Bound, "round_epsilon", lambda self, rnd: 0.0)
    cfg = config(n=200, seed=3, pools=1)
    res = run_inproc(cfg, LIMITS)
    rogue = holder["c"]
    # majority vote per agent over every answer it gave, against its true answer
    agents0 = rogue.answers[0][0]
    votes = np.zeros(len(agents0))
    count = np.zeros(len(agents0))
    for agents, reports in rogue.answers:
        pos = np.searchsorted(agents0, agents)
        votes[pos] += reports[:, 0]
        count[pos] += 1
    guess = (votes / np.maximum(count, 1)) > 0.5
    ds = get_data_kind("mallows").build({"n": 200, "m": 6, "theta": 0.5}, run_keys(3).data)
    rows = ds.rows(0, 200)[agents0]
    from ldpsim.protocols.rank.profile import answers

    truth = answers(rows, np.asarray(rogue.first.queries))[:, 0] == 1
    return float(np.mean(guess == truth)), res, rogue


def test_attack_rogue_curator_reasking_a_pair_in_301_rounds_meets_refusals(monkeypatch):
    acc, res, rogue = _rogue_run(monkeypatch, enforce=True)
    assert res["refused"] == 300 * 200  # every agent answers once, refuses 300 times
    assert "privacy budget" in res["refusal"]
    assert sum(len(a) for a, _ in rogue.answers) == 200
    # one ε = 1 randomized response per agent: accuracy e/(1+e) = 0.731, 5 standard errors
    p = math.e / (1 + math.e)
    assert acc <= p + 5 * math.sqrt(p * (1 - p) / 200)


def test_attack_rogue_curator_without_the_odometer_recovers_everything(monkeypatch):
    acc, res, _ = _rogue_run(monkeypatch, enforce=False)
    assert res["refused"] == 0 and acc == 1.0  # what the odometer prevents


def test_honest_runs_of_every_multi_round_protocol_are_never_refused():
    for protocol, data in (("dpwevote", {"kind": "weighted_votes", "n": 300, "candidates": 3}),
                           ("dpwevote_laplace", {"kind": "weighted_votes", "n": 300,
                                                 "candidates": 2}),
                           ("safari", {"kind": "safari_mallows", "n": 300, "d": 4,
                                       "theta": 0.3})):
        cfg = config(protocol=protocol, data=data, params={"epsilon": 1.0})
        res = run_inproc(cfg, LIMITS)
        assert res["refused"] == 0 and res["comm"]["rounds"] >= 2, protocol


# ------------------------------------------------------------------------ real sockets


def _in_thread(fn):
    box: dict = {}

    def target():
        try:
            box["res"] = fn()
        except BaseException as e:  # surfaced by the caller
            box["err"] = e

    t = threading.Thread(target=target)
    t.start()
    return t, box


def test_attack_trickle_of_garbage_cannot_extend_the_round_deadline():
    """A silent pool leaves the round to its 1.5 s timeout; garbage every 20 ms used to keep
    the round open for ever (the deadline was checked only when nothing arrived)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    cfg = config(faults=[{"pool": 1, "round": 0, "action": "silent"}])
    limits = Limits(timeout_s=1.5)
    t0 = time.monotonic()
    parties = local_parties(cfg, cfg["data"]["n"], None, AUTH)
    thread, box = _in_thread(lambda: run_processes(cfg, limits, endpoint=endpoint,
                                                   parties=parties))
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    # past the door (``simulator.backends.door``): as a holder of the registration key
    show(s, AUTH)
    s.connect(endpoint)
    try:
        while thread.is_alive() and time.monotonic() - t0 < 20:
            s.send(b"\xc1 garbage")
            time.sleep(0.02)
    finally:
        s.close()
        ctx.term()
        thread.join(30)
    assert "err" not in box, box.get("err")
    res = box["res"]
    assert time.monotonic() - t0 < 12
    assert res["dropouts"] == 200 and res["rejected"] > 10


#: the slowloris attack, in a fresh interpreter of its own (what earlier tests leave in this
#: process -- its fork server, its children -- must not decide how many connections the
#: curator takes): prints the run's result as JSON, or the error
_SLOWLORIS = """
import json, multiprocessing as mp, resource, socket, sys, threading, time
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import _pool_child, run_processes
from ldpsim.simulator.session.seeding import local_parties
from tests.conftest import free_port
from tests.simulator.session.test_attacks import AUTH, LIMITS, _in_thread, config

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
port = free_port()
endpoint = f"tcp://127.0.0.1:{port}"
cfg = config()
parties = local_parties(cfg, cfg["data"]["n"], None, AUTH)
thread, box = _in_thread(lambda: run_processes(cfg, LIMITS, endpoint=endpoint,
                                               spawn_pools=False, parties=parties))
conns = []
deadline = time.monotonic() + 20
while len(conns) < 1100 and time.monotonic() < deadline:
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port))
        conns.append(c)
    except OSError:
        c.close()
        time.sleep(0.05)  # not bound yet
opened = len(conns)
pools = [mp.get_context("fork").Process(target=_pool_child, args=(
    endpoint, i, 2, AUTH, LIMITS, parties.pools[i])) for i in range(2)]
for p in pools:  # honest pools, after the flood
    p.start()
thread.join(40)
for p in pools:
    p.join(10)
    if p.is_alive():
        p.kill()
        p.join(5)
for c in conns:
    c.close()
if "err" in box:
    print(json.dumps({"opened": opened, "err": repr(box["err"])}))
else:
    res = box["res"]
    print(json.dumps({"opened": opened, "same": res["output"] == run_inproc(cfg, LIMITS)["output"],
                      "pools_registered": res["pools_registered"]}))
"""


def test_attack_slowloris_idle_connections_do_not_lock_out_honest_pools():
    """1100 idle TCP connections used to exhaust the curator's 1024 file descriptors."""
    import json
    import resource
    import subprocess
    import sys

    from tests.conftest import ROOT

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2400:
        pytest.skip(f"this machine allows {hard} file descriptors per process")
    got = subprocess.run([sys.executable, "-c", _SLOWLORIS], cwd=ROOT, capture_output=True,
                         text=True, timeout=180)
    assert got.returncode == 0, got.stderr[-2000:]
    res = json.loads(got.stdout.strip().splitlines()[-1])
    assert res["opened"] == 1100
    assert "err" not in res, res.get("err")
    assert res["same"] and res["pools_registered"] == 2


def test_curator_failure_of_the_protocol_code_is_a_run_failure_with_its_traceback(monkeypatch):
    proto = PROTOCOLS["ldp_kwiksort_rr"]
    inner = type(proto).make_curator

    def broken(bound, agents, key, coins=0):
        c = inner(proto, bound, agents, key, coins)
        c.absorb = lambda *a: 1 / 0
        return c

    monkeypatch.setattr(proto, "make_curator", broken)
    with pytest.raises(RunFailed, match="curator code failed in absorb of round 0"):
        run_inproc(config(), LIMITS)


def test_hosts_backend_without_its_keys_is_refused_before_anything_binds(tmp_path, capsys):
    """Open registration (anyone registering as pool 0 and poisoning the output) is gone: the
    hosts backend needs the deployment's keys (its pools' and its registration token), on
    loopback as on any other interface."""
    from ldpsim.simulator.cli import main

    code = main(["curator", "demo", "--bind", f"tcp://127.0.0.1:{free_port()}",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "[runtime] secret: the hosts backend needs the deployment's keys" in err
    assert not (tmp_path / "out").exists()


def test_attack_bogus_hello_from_a_registered_pools_identity_cannot_evict_it():
    """Found by the fuzz test: a failed registration from a registered peer used to be
    answered with a refusal (the honest pool then left the run), and three of them banned it."""
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    bogus = b"\x96\x01\x00\x00\xff\xff\x91\x00"  # HELLO for run 0 whose payload is [0]
    run.inject(b"pool-1", bogus * 3)
    nd = b"\x96\x01\x00\x00\xff\xff\xc7\x16\x01\x07\x01\x02" + b"\x00" * 19  # ndarray payload
    run.inject(b"pool-1", nd)
    res = run.finish()
    assert res["output"] == clean(cfg)["output"] and res["dropouts"] == 0
    assert res["rejected"] == 4
    assert all(r["reason"] == "this peer is already registered" for r in res["rejections"])
    assert not any(wire.decode_one(f).payload.get("code") for d, f in run.to_others)


def test_attack_rogue_curator_asking_an_agent_twice_in_one_round_gets_one_answer():
    """Duplicates inside one query batch, out of order, and the same batch sent again: each
    agent answers round 0 once, whatever path the pool's odometer takes."""
    cfg = config(n=20, pools=1)
    parties = local_parties(cfg, 20, None, AUTH)
    pool = PoolSession(0, 1, AUTH, LIMITS, parties.pools[0])
    cur = CuratorSession(0, parties.curator, AUTH, LIMITS)
    (_, setup), = cur.on_ready(b"p")
    pool.on_frame(setup)
    queries = [[0]] * 5

    def ask(ids):
        bufs, _ = wire.encode_many(wire.QUERY, 0, 0, ids, queries[:len(ids)])
        out = pool.on_frame(b"".join(bufs))
        answered = [o[4] for f in out for o, _ in wire.iter_frame(f, 1 << 20)
                    if o[1] == wire.REPORT]
        refused = [a for f in out for o, _ in wire.iter_frame(f, 1 << 20) if o[1] == wire.ERROR
                   for a in o[5]["agents"].tolist()]
        return answered, refused

    assert ask([3, 4, 5]) == ([3, 4, 5], [])  # a range: the one-pass path
    assert ask([3, 4, 5]) == ([], [3, 4, 5])  # the same round again
    assert ask([7, 2, 7, 9, 2]) == ([7, 2, 9], [7, 2])  # duplicates, out of order
    assert pool.refusals == 5 and pool.odometer.spent[[2, 3, 7, 9]].tolist() == [1.0] * 4


@pytest.mark.parametrize("unit", [b"\xc0", b"\x01"])
@pytest.mark.parametrize("size", [4 << 20, 16 << 20])
def test_attack_a_registered_pools_frame_of_nils_costs_a_fraction_of_its_size(unit, size):
    """Issue 47: a registered pool's 60 MiB frame of nils decoded to +363 MB at the curator
    (every nil a slot of the list the fast reader builds). A frame whose first object is no
    report of the round leaves the fast reader at once; the reference reader streams it, one
    rejection at a time (kept up to ``max_rejections``), through a read buffer of 1 MiB. At the
    largest size the fast reader takes (4 MiB) and above it, the curator's traced peak is that
    buffer's, whatever the frame's size, and the clean output is released."""
    cfg = config()
    run = Run(cfg)
    run.until(lambda: registered(run))
    frame = unit * size
    tracemalloc.start()
    try:
        run.inject(b"pool-1", frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    res = run.finish()
    assert res["output"] == clean(cfg)["output"]
    assert res["rejected"] >= 1
    assert peak < 5 << 19, f"{peak / size:.2f}x the frame"  # 2.5 MiB
