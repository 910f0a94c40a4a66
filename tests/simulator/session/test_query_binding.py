"""A run's coins answer only the run's own questions: a rogue curator that asks an agent
anything else, within a run, is refused.

An agent's coins in a run are a pure function of its coin key, the run, the round and the draw
index (``protocols.rng``): the protocol decides how many draws a round's answer takes. A query
of another shape or a round broadcast of another phase makes the same draws answer other
questions. Measured on a pool session driven by hand as a rogue curator (the session under every
backend; its frames as a real curator's), before the pool checked queries against the round:

* LDP-KwikSort RR (ε = 1, K = 1, m = 6, 400 agents): a query of two pairs instead of one was
  answered with one coin for both, so the XOR of the two reported answers was the XOR of the two
  true answers for 100% of the agents (two answers with independent coins at ε/2 each, as in a
  K = 2 run: 53% in theory, 52% measured over five data sets); a query of all 15 pairs gave
  each agent's whole ranking up to its reversal, for 100% of the agents, at a charge of ε = 1.
* DPWeVote (ε = 2, budget "game", 3 candidates: ε1 = 1 for the weight, ε2 = 1/3 per opinion):
  the broadcast of rounds 1-3 saying ``{"phase": "weights"}`` had every agent report its weight
  four times through the weight's mechanism (ε1 = 1 each: 4 spent), while the odometer charged
  1 + 3 × 1/3 = 2; the majority of the four reports gave the weight of 73% of the agents (one
  report: 57%; five data sets of 400 agents).

* SAFARI (and rank_calm): an attribute index outside the round's rule, or a round 1 without a
  K-thin chain of the data's items, raised in the randomizer and ended the pool (a hosts pool
  exits on it); a row of two indices answered its first.

Now the pool asks the protocol (``Protocol.query_refusal``) whether a batch's queries and the
round's broadcast are the round's own before any coin is drawn: a batch that is not is refused
with an ERROR (code "budget") naming why, nothing is charged, and the agents still answer the
round's real question. Two deviations the pools refused already are kept here as regressions:
asking an agent twice in one round (with other pairs), and a round the protocol does not have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.rank import profile
from ldpsim.simulator.codec import wire, wire_numpy
from ldpsim.simulator.session import PoolSession

from tests.simulator.session.test_agent_policy import (
    config,
    drive,
    honest,
    refusal,
    setup_frame,
    setup_of,
)

N = 400
#: a SAFARI run of the pools below (two rounds, one attribute index asked per user)
SAFARI = {"protocol": "safari", "params": {"epsilon": 1.0},
          "data": {"kind": "safari_mallows", "n": N, "d": 4, "theta": 0.3}}


def _pool(**over: Any) -> PoolSession:
    """A pool of one run (``config(**over)``) set up by its honest curator: what a rogue curator
    holding the signed set-up gets."""
    cur, pool = honest(config(n=N, **over))
    assert refusal(pool.on_frame(setup_frame(setup_of(cur)))) is None
    return pool


def _frames(out: list[bytes]) -> tuple[dict[int, np.ndarray], list[str]]:
    """The pool's reports by agent, and its ERRORs' messages."""
    reports: dict[int, np.ndarray] = {}
    errors: list[str] = []
    for f in out:
        for obj in wire.unpack_all(f, 1 << 30):
            env = wire.check_envelope(obj, 0)
            if env.kind == wire.REPORT:
                reports[env.agent] = np.asarray(env.payload)
            elif env.kind == wire.ERROR:
                errors.append(env.payload["error"])
    return reports, errors


def _ask(pool: PoolSession, rnd: int, queries: np.ndarray | None,
         agents: np.ndarray | None = None) -> tuple[dict[int, np.ndarray], list[str]]:
    """Ask ``agents`` (default: all) round ``rnd`` with one query row each, as one canonical
    batch (the frame a curator's round sends)."""
    ids = np.arange(N) if agents is None else agents
    frame, _ = wire_numpy.encode_batch(wire.QUERY, 0, rnd, ids, queries)
    return _frames(pool.on_frame(frame))


def _bcast(pool: PoolSession, rnd: int, payload: Any) -> None:
    assert pool.on_frame(wire.encode(wire.BCAST, 0, rnd, wire.NO_AGENT, payload)) == []


def _spent(pool: PoolSession) -> float:
    return float(pool.odometer.spent.max())


def test_attack_a_wider_query_than_the_round_asks_is_refused() -> None:
    """K = 1: a query of two pairs, then one of all 15, would each be answered with the one
    coin of the round (the XOR of the two true answers for 100% of the agents; every ranking up
    to its reversal). Refused, uncharged; the agents then answer the round's own query."""
    pool = _pool()
    rows = pool.private_rows()
    m = rows.shape[1]
    pairs = m * (m - 1) // 2
    for width in (2, pairs):
        q = np.broadcast_to(np.arange(width), (N, width))
        reports, errors = _ask(pool, 0, q)
        leaked = 0.0
        if reports:  # what the rogue curator learns when they are answered
            r = np.stack([reports[a] for a in range(N)]).astype(np.int64)
            t = profile.answers(rows, q)
            leaked = float(np.mean((r[:, 0] ^ r[:, 1]) == (t[:, 0] ^ t[:, 1])))
        assert not reports, f"{width} pairs answered: XOR of true answers for {leaked:.0%}"
        assert errors and "queries" in errors[0] and "1 pair" in errors[0], errors
        assert _spent(pool) == 0.0
    reports, errors = _ask(pool, 0, np.zeros((N, 1), dtype=np.int64))
    assert len(reports) == N and not errors and _spent(pool) == 1.0


@pytest.mark.parametrize("bad", [[[-1]], [[15]], [[2**40]]])
def test_a_pair_outside_the_data_is_refused(bad: list) -> None:
    pool = _pool()
    reports, errors = _ask(pool, 0, np.repeat(np.asarray(bad), N, axis=0))
    assert not reports and errors and "pair" in errors[0]
    assert _spent(pool) == 0.0


def test_attack_a_round_broadcast_of_another_phase_is_refused() -> None:
    """DPWeVote: rounds 1-3 announced as the weights round had each agent report its weight
    four times at ε1 = 1 (4 spent, 2 charged; the weight of 73% of the agents from the majority
    of four reports, 57% from one). Refused; so is an opinion round naming another round's
    candidate, or none."""
    pool = _pool(protocol="dpwevote", params={"epsilon": 2.0},
                 data={"kind": "weighted_votes", "n": N, "candidates": 3})
    rows = pool.private_rows()
    _bcast(pool, 0, {"phase": "weights"})
    first, errors = _ask(pool, 0, None)
    assert len(first) == N and not errors
    charged = _spent(pool)
    got = [np.array([first[a][0] for a in range(N)])]
    for rnd in (1, 2, 3):
        _bcast(pool, rnd, {"phase": "weights"})
        reports, errors = _ask(pool, rnd, None)
        if reports:
            got.append(np.array([reports[a][0] for a in range(N)]))
        assert not reports, f"the weight reported again in round {rnd}"
        assert errors and "round 0" in errors[0], errors
    votes = np.stack(got)
    guess = np.array([np.bincount(v, minlength=4).argmax() for v in votes.T])
    assert len(got) == 1 and np.mean(guess == rows[:, 0]) < 0.7
    assert _spent(pool) == charged
    for payload in ({"phase": "opinions", "candidate": 0}, {"phase": "opinions"},
                    {"phase": "opinions", "candidate": 3}, {"phase": "opinions",
                                                            "candidate": -1}):
        _bcast(pool, 2, payload)
        reports, errors = _ask(pool, 2, None)
        assert not reports and errors and "candidate 1" in errors[0], (payload, errors)
    _bcast(pool, 2, {"phase": "opinions", "candidate": 1, "released": []})
    reports, errors = _ask(pool, 2, None)
    assert len(reports) == N and not errors


def test_held_already_an_agent_asked_twice_in_a_round_answers_once() -> None:
    """Other pairs the second time in the same round: refused by the odometer (one answer per
    agent and round), today as before; no second report, nothing charged twice."""
    pool = _pool()
    first, _ = _ask(pool, 0, np.zeros((N, 1), dtype=np.int64))
    again, errors = _ask(pool, 0, np.ones((N, 1), dtype=np.int64))
    assert len(first) == N and not again and "answered it already" in errors[0]
    assert _spent(pool) == 1.0


@pytest.mark.parametrize("rnd", [1, 2**32, 2**32 + 1])
def test_held_already_a_round_the_protocol_does_not_have_is_refused(rnd: int) -> None:
    """Round 2^32 would draw round 0's coins (the round is the high half of a draw's counter):
    the odometer refuses any round past the protocol's last, today as before."""
    pool = _pool()
    assert _ask(pool, 0, np.zeros((N, 1), dtype=np.int64))[0]
    reports, errors = _ask(pool, rnd, np.ones((N, 1), dtype=np.int64))
    assert not reports and errors
    assert _spent(pool) == 1.0


def test_honest_runs_are_answered_as_before() -> None:
    """The check never refuses a run's own queries: the runs of every protocol that queries or
    broadcasts per round complete without a refusal."""
    for over in ({}, {"params": {"epsilon": 2.0, "queries": 3}},
                 {"protocol": "ldp_kwiksort_lap"},
                 {"protocol": "dpwevote", "params": {"epsilon": 2.0},
                  "data": {"kind": "weighted_votes", "n": N, "candidates": 3}},
                 {"protocol": "dpwevote_laplace", "params": {"epsilon": 2.0},
                  "data": {"kind": "weighted_votes", "n": N, "candidates": 2}},
                 SAFARI, {**SAFARI, "params": {"epsilon": 1.0, "oracle": "harmony",
                                               "rule1": "calm", "split": "users"}},
                 {**SAFARI, "protocol": "rank_calm"}):
        cur, pool = honest(config(n=N, **over))
        res = drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))
        assert res["refused"] == 0 and res["dropouts"] == 0, over


def test_a_rogue_batch_queued_among_honest_ones_is_refused_alone() -> None:
    """Queued batches are answered by one randomizer call (``PoolSession.answer``); one of
    other questions among them is refused on its own, and every frame is the one answering
    them one by one sends."""
    import copy

    pool = _pool()
    sent = []
    for lo, width in ((0, 1), (10, 2), (20, 1)):
        ids = np.arange(lo, lo + 10)
        sent.append(wire_numpy.encode_batch(wire.QUERY, 0, 0, ids,
                                            np.zeros((10, width), dtype=np.int64))[0])
    alone = copy.deepcopy(pool)
    expected = [out for f in sent for out in alone.on_frame(f)]
    got = pool.on_frames(sent)
    assert got == expected
    reports, errors = _frames(got)
    assert sorted(reports) == [*range(10), *range(20, 30)] and len(errors) == 1



@pytest.mark.parametrize("bad", [np.full((N, 1), 4), np.full((N, 1), -1), np.zeros((N, 2)),
                                 np.zeros((N, 1)) + 0.5])
def test_a_safari_attribute_outside_the_rule_is_refused_not_a_crash(bad: np.ndarray) -> None:
    """SAFARI asks one attribute index of the round's rule per user (Algorithm 1, line 3): an
    index outside it raised in the randomizer, which ended the pool (a hosts pool exits on
    it); a wider row answered its first column. Refused now, uncharged."""
    pool = _pool(**SAFARI)
    reports, errors = _ask(pool, 0, bad)
    assert not reports and errors and "attribute" in errors[0], errors
    assert _spent(pool) == 0.0
    reports, errors = _ask(pool, 0, np.zeros((N, 1), dtype=np.int64))
    assert len(reports) == N and not errors


def test_a_safari_round_without_its_chain_is_refused_not_a_crash() -> None:
    pool = _pool(**SAFARI)
    assert len(_ask(pool, 0, np.zeros((N, 1), dtype=np.int64))[0]) == N
    for payload in (None, {"chain": "nonsense"}, {"chain": [[0, 1, 2]]}):
        _bcast(pool, 1, payload)
        reports, errors = _ask(pool, 1, np.zeros((N, 1), dtype=np.int64))
        assert not reports and errors and "chain" in errors[0], (payload, errors)
