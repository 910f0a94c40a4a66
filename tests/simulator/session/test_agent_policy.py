"""The agents' own policy against a rogue curator: the configuration the orchestrator signed, a
run's coins used once, the pool's limits and its lifetime odometer (``session.policy``).

Each attack is one a curator that wants more than ε could mount with the pools of a run:
announce another protocol or a larger ε, send the set-up again with a fresh nonce to reset the
odometer, replay an earlier run's (signed) configuration, or ask the same data again in a new
run. Every one is refused, every time, with an ERROR the curator records (the run fails with the
pool's reason); the honest run beside it is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import msgpack
import pytest
from ldpsim.protocols.keys import Secrets
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import CuratorSession, Limits, PoolSession, RunFailed
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.seeding import local_parties

from tests.conftest import each_chunking
from tests.simulator.session.test_attacks import config as attack_config

LIMITS = Limits(timeout_s=10.0)
AUTH = b"policy-test registration key 32B"
SECRETS = Secrets(b"policy-test deployment master 32")


def config(n: int = 200, seed: int = 3, **over) -> dict:
    """The attack tests' configuration on one pool."""
    return attack_config(n, seed, **{"pools": 1, **over})


#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "config")


def setup_of(cur: CuratorSession) -> dict:
    """The set-up payload the curator sends (what a rogue curator may rewrite)."""
    (_, frame), = cur.on_ready(b"pool")
    return wire.decode_one(frame).payload


def setup_frame(payload: dict, run: int = 0) -> bytes:
    return wire.encode(wire.BCAST, run, wire.SETUP_ROUND, wire.NO_AGENT, payload)


def refusal(out: list[bytes]) -> str | None:
    """The reason of the pool's refusal among its answers, or None if it registered."""
    for f in out:
        env = wire.decode_one(f)
        if env.kind == wire.ERROR and env.payload.get("code") == "refused":
            return env.payload["error"]
    return None


def drive(cur: CuratorSession, pool: PoolSession, first: list[bytes],
          on_pool: Callable[[list[bytes]], None] | None = None) -> dict:
    """Pass frames between one curator session and one pool until the run ends; ``on_pool``
    sees each answer of the pool (its frames) before the curator does."""
    queue = [(True, f) for f in first]
    while not cur.finished:
        if not queue:
            queue += [(False, f) for _, f in cur.on_timeout()]
            continue
        to_cur, frame = queue.pop(0)
        if to_cur:
            queue += [(False, f) for _, f in cur.on_frame(b"pool", frame)]
        else:
            out = pool.on_frame(frame)
            if on_pool is not None:
                on_pool(out)
            queue += [(True, f) for f in out]
    return cur.result


def honest(cfg: dict, policy: AgentPolicy | None = None, secrets: Secrets | None = None
           ) -> tuple[CuratorSession, PoolSession]:
    parties = local_parties(cfg, cfg["data"]["n"], secrets, AUTH)
    return (CuratorSession(0, parties.curator, AUTH, LIMITS),
            PoolSession(0, 1, AUTH, LIMITS, parties.pools[0], policy))


@pytest.mark.parametrize("change", [{"protocol": "kwiksort"}, {"params": {"epsilon": 1000.0,
                                                                          "queries": 1}},
                                    {"data": {"kind": "mallows", "n": 100, "m": 6,
                                              "theta": 0.5}},
                                    {"run_id": 12345}])
def test_attack_rogue_curator_announcing_another_configuration_is_refused(change):
    """The curator rewrites the signed configuration (another protocol, ε = 1000, other
    agents, another run id): the signature no longer verifies, the pool refuses, answers
    nothing, and the run fails naming the pool's reason."""
    cur, pool = honest(config())
    payload = setup_of(cur)
    forged = msgpack.unpackb(payload["config"], strict_map_key=False)
    forged.update(change)
    payload["config"] = msgpack.packb(forged, use_bin_type=True)
    out = pool.on_frame(setup_frame(payload))
    assert "not signed by the orchestrator" in refusal(out)
    assert pool.idle and pool.clock.calls == 0
    with pytest.raises(RunFailed, match="pool 0 refused the run: the configuration is not signed"):
        for f in out:
            list(cur.on_frame(b"pool", f))


def test_attack_rogue_curator_with_another_pools_signature_is_refused():
    cfg = config(pools=2)
    parties = local_parties(cfg, 200, None, AUTH)
    cur = CuratorSession(0, parties.curator, AUTH, LIMITS)
    pool = PoolSession(1, 2, AUTH, LIMITS, parties.pools[1])
    payload = setup_of(cur)
    payload["sigs"] = [payload["sigs"][0], payload["sigs"][0]]  # pool 0's for pool 1
    assert "not signed" in refusal(pool.on_frame(setup_frame(payload)))


def test_attack_fresh_nonces_and_repeated_runs_never_reset_the_odometer():
    """45 set-ups of the same run with fresh nonces after the pool answered: every one is
    refused (the run's coins are spent), so every agent answers round 0 exactly once; the
    same set-up replayed to a new curator session (a repeated run id) likewise."""
    cfg = config()
    cur, pool = honest(cfg)
    payload = setup_of(cur)
    res = drive(cur, pool, pool.on_frame(setup_frame(payload)))
    assert res["dropouts"] == 0 and pool.clock.calls == 0  # stats reset with the run
    answered = pool.answered_runs.copy()
    assert len(answered) == 1
    for i in range(45):
        again = dict(payload, nonce=bytes([i + 1]) * 16)
        why = refusal(pool.on_frame(setup_frame(again)))
        assert why is not None and "answered already" in why, i
    # a new curator process serving the same run (same signed configuration, new nonce)
    cur2, _ = honest(cfg)
    with pytest.raises(RunFailed, match="answered already"):
        for f in pool.on_frame(setup_frame(setup_of(cur2))):
            list(cur2.on_frame(b"pool", f))
    assert pool.answered_runs == answered


def test_a_pool_not_yet_answering_may_take_the_same_run_from_a_new_curator():
    """Before any query is answered the coins are unspent: a set-up for the same run from a
    restarted curator (a new nonce) is taken, and that run completes as the clean one."""
    cfg = config()
    dead, pool = honest(cfg)
    pool.on_frame(setup_frame(setup_of(dead)))  # registered with the dead curator
    alive, _ = honest(cfg)
    res = drive(alive, pool, pool.on_frame(setup_frame(setup_of(alive))))
    assert res["output"] == run_inproc(cfg, LIMITS)["output"]


def test_the_pools_own_limits_refuse_runs_beyond_them():
    """``max_epsilon`` and ``protocols``: a larger ε, a protocol without a local claim (the
    non-private baseline) or one not listed is refused with the pool's reason."""
    pol = AgentPolicy(max_epsilon=2.0, protocols=("ldp_kwiksort_rr", "kwiksort"))
    for cfg, why in ((config(params={"epsilon": 4.0, "queries": 1}), "beyond this pool's "
                      "max_epsilon = 2"),
                     (config(protocol="kwiksort", params={}), "makes no local privacy claim"),
                     (config(protocol="ldp_kwiksort_lap"), "not one this pool's agents take "
                      "part in")):
        cur, pool = honest(cfg, pol)
        assert why in refusal(pool.on_frame(setup_frame(setup_of(cur))))
    cur, pool = honest(config(), pol)  # within the limits: answered
    assert drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))["dropouts"] == 0


def test_the_lifetime_odometer_spans_the_runs_over_one_data_set():
    """A long-lived pool (the hosts backend's: one key file's secret) with lifetime_epsilon
    = 1.5 serves ε = 1 runs over one data set: the first is answered, the second (another
    parameter point, the same data) is refused round by round, and a run over another data set
    is answered again."""
    pol = AgentPolicy(lifetime_epsilon=1.5)
    first = config()
    cur, pool = honest(first, pol, SECRETS)
    r1 = drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))
    assert r1["refused"] == 0 and r1["spent"]["epsilon_lifetime_max"] == 1.0
    second = config(params={"epsilon": 1.0, "queries": 2})  # same seed: same data set
    parties = local_parties(second, 200, SECRETS, AUTH)
    cur2 = CuratorSession(0, parties.curator, AUTH, LIMITS)
    r2 = drive(cur2, pool, pool.on_frame(setup_frame(setup_of(cur2))))
    assert r2["refused"] == 200 and "lifetime" in r2["refusal"]
    other = config(seed=4)  # another repetition: another data set
    parties = local_parties(other, 200, SECRETS, AUTH)
    cur3 = CuratorSession(0, parties.curator, AUTH, LIMITS)
    r3 = drive(cur3, pool, pool.on_frame(setup_frame(setup_of(cur3))))
    assert r3["refused"] == 0


def test_a_rogue_curator_reasking_through_new_set_ups_learns_nothing_more():
    """The attack of the issue: set up the same run again with fresh nonces and ask the same
    pair each time, to average the noise away. Only the first set-up is answered: after the
    run, 40 re-asks get no report at all, and each agent's ledger holds the run's ε once."""
    cfg = config(n=400)
    cur, pool = honest(cfg)
    payload = setup_of(cur)
    res = drive(cur, pool, pool.on_frame(setup_frame(payload)))
    assert res["dropouts"] == 0
    got = []
    for i in range(40):  # the rogue curator's re-asks: new nonces, then the same query batch
        out = pool.on_frame(setup_frame(dict(payload, nonce=bytes([i + 1]) * 16)))
        assert "answered already" in refusal(out)
        bufs, _ = wire.encode_many(wire.QUERY, 0, 0, list(range(cfg["data"]["n"])),
                                   [[0]] * cfg["data"]["n"])
        for f in pool.on_frame(b"".join(bufs)):
            if wire.decode_one(f).kind == wire.REPORT:
                got.append(f)
    assert not got
    data_id = int(msgpack.unpackb(payload["config"], strict_map_key=False)["data_id"])
    assert pool.ledger.most(data_id) == 1.0
