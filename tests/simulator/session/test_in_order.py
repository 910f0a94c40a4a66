"""A streamed round whose curator sums floats in the reports' order (``Curator.absorbs_in_order``:
Harmony over the d! rankings or in SAFARI, the ethics family's average) gets its reports
in agent order (``session.inorder``). The batches that come early wait; past ``[runtime] chunk``
waiting reports the pools ahead of the frontier get no new batch; a pool that falls silent is
given up at the run's timeout, as a whole round's end would, and the others go on. The record
is the whole round's, field for field (timing aside), on both local backends, with one to three
pools, small batches, a lost pool and a deployment.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import WINDOW, Limits, ingest, inorder, rounds

from tests.simulator.session.test_chunked_runs import LARGE, SMALL, cfg, fields
from tests.simulator.session.test_streamed_deployment import MOBILE, _record, _same

#: (protocol, parameters) of every curator that absorbs in agent order
ORDERED = [("rank_harmony", {}), ("safari", {"oracle": "harmony"}),
           ("safari", {"oracle": "harmony", "split": "users", "rule1": "calm"}),
           ("ethics_nonprivate", {}), ("ethics_vlcp", {"upload": "records"}),
           ("ethics_vldp", {}), ("ethics_rldp_laplace", {}),
           ("ethics_rldp_fm", {"report": "coefficients"})]


def _cfg(protocol: str, params: dict, chunk: int, **kw: Any) -> dict:
    out = cfg(protocol, chunk, **kw)
    out["params"] = dict(params)
    return out


def _pair(run, protocol: str, params: dict, **kw: Any) -> tuple[bytes, bytes]:
    """The fields of a run held whole and streamed (the socket's counts on inproc only)."""
    timeout = kw.pop("timeout_s", 5.0)
    limits = Limits(timeout_s=timeout, done_timeout_s=min(2.0, timeout))
    return tuple(fields(run(_cfg(protocol, params, chunk, **kw), limits), run is run_inproc)
                 for chunk in (LARGE, SMALL))


@pytest.mark.parametrize("pools, batch", [(1, "auto"), (2, 37), (3, 37)])
@pytest.mark.parametrize("protocol, params", ORDERED,
                         ids=[f"{p}-{i}" for i, (p, _) in enumerate(ORDERED)])
def test_a_round_in_agent_order_gives_the_whole_rounds_record_inproc(protocol, params, pools,
                                                                      batch, streamed):
    whole, chunked = _pair(run_inproc, protocol, params, n=2000, pools=pools, batch=batch)
    assert whole == chunked
    assert streamed == [False, True]


@pytest.mark.parametrize("protocol, params", ORDERED[:3] + ORDERED[5:6],
                         ids=["rank_harmony", "safari", "safari-users-calm", "ethics_vldp"])
def test_a_round_in_agent_order_gives_the_whole_rounds_record_on_processes(protocol, params):
    whole, chunked = _pair(run_processes, protocol, params, n=3000, pools=3, batch=50)
    assert whole == chunked
    assert whole == fields(run_inproc(_cfg(protocol, params, SMALL, n=3000, pools=3, batch=50),
                                      Limits(timeout_s=5)), False)


def test_absorbed_as_they_come_the_record_changes(monkeypatch, streamed):
    """The test above has power: without the order (parts absorbed as they are stored, the
    second and third pools' before the first's) the released average is another."""
    whole, chunked = _pair(run_inproc, "ethics_vldp", {}, n=2000, pools=3, batch=37)
    init = rounds.Round.__init__

    def unordered(self, *a, **k):
        init(self, *a, **{**k, "hold": None})

    monkeypatch.setattr(rounds.Round, "__init__", unordered)
    assert _pair(run_inproc, "ethics_vldp", {}, n=2000, pools=3, batch=37)[1] != whole
    assert streamed[1] and streamed[3]


def test_the_reports_waiting_stay_within_the_hold_and_its_window(monkeypatch):
    """The pools ahead are held back once ``chunk`` reports wait: at most the batches each has
    in flight come on top (``WINDOW`` of ``batch``), however many agents the run has."""
    most, held = [0], [0]
    push, next_batch = inorder.InOrder.push, rounds.Round.next_batch

    def spy(self, ids, values):
        push(self, ids, values)
        most[0] = max(most[0], self.waiting)

    def spy_next(self, peer):
        out = next_batch(self, peer)
        held[0] += out is None and self.order is not None and self.order.full
        return out

    monkeypatch.setattr(inorder.InOrder, "push", spy)
    monkeypatch.setattr(rounds.Round, "next_batch", spy_next)
    n, pools, batch = 9000, 3, 37
    whole = fields(run_inproc(_cfg("ethics_vldp", {}, LARGE, n=n, pools=pools, batch=batch),
                              Limits(timeout_s=5)))
    assert most[0] == 0
    chunked = fields(run_inproc(_cfg("ethics_vldp", {}, SMALL, n=n, pools=pools, batch=batch),
                                Limits(timeout_s=5)))
    assert chunked == whole
    assert SMALL <= most[0] <= SMALL + pools * WINDOW * batch < n
    assert held[0] > 0


@pytest.mark.parametrize("pool", [0, 1])
@pytest.mark.parametrize("action", ["silent", "kill"])
def test_a_lost_pool_is_given_up_and_the_others_go_on_inproc(pool, action):
    faults = ({"pool": pool, "round": 0, "action": action},)
    res = run_inproc(_cfg("ethics_vldp", {}, SMALL, n=3000, pools=3, batch=50, faults=faults),
                     Limits(timeout_s=1.0))
    assert res["dropouts"] == 1000
    whole, chunked = _pair(run_inproc, "ethics_vldp", {}, n=3000, pools=3, batch=50,
                           faults=faults, timeout_s=1.0)
    assert whole == chunked == fields(res)


def test_a_silent_first_pool_is_given_up_and_the_others_go_on_on_processes():
    """The first pool holds the frontier and falls silent: the others are held back until the
    timeout gives it up (``Round.abandon``), then answer every agent, as in a whole round."""
    faults = ({"pool": 0, "round": 0, "action": "silent"},)
    whole, chunked = _pair(run_processes, "ethics_vldp", {}, n=3000, pools=3, batch=50,
                           faults=faults, timeout_s=0.5)
    assert whole == chunked


def test_a_deployment_streams_in_agent_order(streamed):
    whole = _record(MOBILE, LARGE, pools=3, protocol="ethics_vldp", batch=37)
    chunked = _record(MOBILE, SMALL, pools=3, protocol="ethics_vldp", batch=37)
    _same(whole, chunked)
    assert streamed == [False, True]
    assert chunked["virtual"]["dropouts_offline"] > 0


@pytest.mark.parametrize("params, d", [({"aggregate": "weighted"}, 3), ({}, 1),
                                       ({"aggregate": "weighted"}, 1)])
def test_a_pairwise_sum_streams_with_its_values_kept(params, d, streamed):
    """The weighted aggregate and d = 1 sum pairwise: the curator keeps those values, a number
    a report (``curators.Kept``), and the record is the whole round's."""
    kw = {"n": 1500, "pools": 3, "batch": 37}
    runs = [_cfg("ethics_vldp", params, chunk, **kw) for chunk in (LARGE, SMALL)]
    for c in runs:
        c["data"]["d"] = d
    whole, chunked = (fields(run_inproc(c, Limits(timeout_s=5))) for c in runs)
    assert whole == chunked
    assert streamed == [False, True]


# -- the reorder buffer ----------------------------------------------------------------------
def _buffer(hold: int = 10) -> tuple[inorder.InOrder, list]:
    got: list = []
    return inorder.InOrder(lambda ids, values: got.append((ids.tolist(), values.tolist())),
                           hold), got


def _part(*ids: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array(ids, dtype=np.int64)
    return a, a[:, None] * 10


def test_early_parts_wait_for_the_frontier_and_come_in_one_sorted_call():
    buf, got = _buffer()
    buf.push(*_part(20, 21, 22))
    buf.push(*_part(10, 11))
    assert not buf.release(10) and got == [] and buf.waiting == 5
    assert buf.release(21)  # the second part's tail waits on
    assert got == [([10, 11, 20], [[100], [110], [200]])]
    assert buf.waiting == 2 and buf.cursor == 21
    buf.push(*_part(30))
    assert buf.flush() and got[-1] == ([21, 22, 30], [[210], [220], [300]])
    assert buf.waiting == 0 and not buf.flush()


def test_interleaving_parts_are_merged_in_agent_order():
    buf, got = _buffer()
    buf.push(*_part(1, 5, 9))
    buf.push(*_part(3, 7))
    buf.push(*_part(4))
    assert buf.release(6)
    assert got == [([1, 3, 4, 5], [[10], [30], [40], [50]])]
    assert buf.release(100) and got[-1][0] == [7, 9]


def test_the_hold_says_when_the_pools_ahead_wait():
    buf, _ = _buffer(hold=3)
    buf.push(*_part(5, 6))
    assert not buf.full
    buf.push(*_part(8))
    assert buf.full
    buf.release(7)
    assert not buf.full and buf.waiting == 1


def test_reports_behind_the_cursor_are_not_stored():
    """A sum in agent order cannot take a report of an agent it has passed (a valid report
    after an invalid one, or one from a pool given up): it is left out before the round
    stores it (``Screened.ahead_of``)."""
    ids = np.array([3, 8, 12], dtype=np.int64)
    s = ingest.Screened(ids, slice(3, 13), np.array([[1.0], [2.0], [3.0]]),
                        np.array([5, 6, 7]), np.zeros(0, dtype=np.int64), [])
    t = s.ahead_of(8)
    assert t.store_ids.tolist() == [8, 12] and t.store_at.tolist() == [8, 12]
    assert t.store_values.tolist() == [[2.0], [3.0]] and t.store_sizes.tolist() == [6, 7]


def test_the_memory_check_counts_a_round_in_agent_order_by_its_hold_and_window(monkeypatch):
    """What a round in agent order holds at once: its hold (the chunk) and the batches in
    flight on top (``rounds.most_waiting``), not the run's agents."""
    from ldpsim.protocols.local import example_data
    from ldpsim.simulator.scenario import scenario as sc

    monkeypatch.setattr(sc, "memory_limit", lambda: 1)  # refused: the message has the estimate
    data = {**example_data("ethics_vldp"), "n": 10**7}
    scen = sc.load(raw={"name": "o", "protocol": "ethics_vldp", "seed": 1, "data": data,
                        "runtime": {"backend": "processes", "chunk": 1000, "batch": 50,
                                    "pools": 3}})
    with pytest.raises(sc.ScenarioError) as e:
        sc.check_runs(scen.runs())
    assert f"{1000 + 3 * WINDOW * 50} agents' reports at a time" in str(e.value)


def test_a_pool_held_back_that_says_hello_hears_its_set_up_again(monkeypatch):
    """A pool that hears nothing says hello after ``timeout_s`` and leaves after its idle
    timeout: held back while the pools before it answer (minutes at scale), it must hear the
    curator. Its hello then gets the run's set-up again (which a set-up pool ignores); a pool
    not held back gets nothing, as before."""
    from ldpsim.simulator.session import curator as cm

    sessions: list = []
    on_frame = cm.CuratorSession.on_frame

    def keep(self, peer, frame):
        sessions.append(self)
        return on_frame(self, peer, frame)

    seen: list = []
    next_batch = rounds.Round.next_batch

    def spy(self, peer):
        out = next_batch(self, peer)
        if out is None and self.holds(peer) and not seen:
            sess = sessions[-1]
            seen.append((list(sess.on_ready(peer)), sess.registration.setup_frame, peer))
            other = next(p for p in sess.pools if p != peer and not self.holds(p))
            seen.append(list(sess.on_ready(other)))
        return out

    monkeypatch.setattr(cm.CuratorSession, "on_frame", keep)
    monkeypatch.setattr(rounds.Round, "next_batch", spy)
    res = run_inproc(_cfg("ethics_vldp", {}, SMALL, n=6000, pools=3, batch=37),
                     Limits(timeout_s=5))
    assert res["dropouts"] == 0
    (sent, setup, peer), other = seen
    assert sent == [(peer, setup)] and other == []


@pytest.mark.parametrize("every", [11, 50])
def test_refused_agents_settle_their_batch_as_reports_do(monkeypatch, every):
    """Agents that refuse (their pool's odometer: an ERROR, no report; here every 11th, or
    every batch's first) settle their batch as a report would: the frontier passes them and
    the record is the whole round's. (Before, such a batch stayed unanswered: the pools after
    it were held back until the timeout gave its pool up, whose later agents became
    dropouts.)"""
    from ldpsim.simulator.session import odometer

    admit = odometer.Odometer.admit

    def some_refuse(self, rnd, ids):
        ok = admit(self, rnd, ids)
        return (np.ones(len(ids), dtype=bool) if ok is None else ok) & (ids % every != 0)

    monkeypatch.setattr(odometer.Odometer, "admit", some_refuse)
    whole, chunked = _pair(run_inproc, "ethics_vldp", {}, n=3000, pools=3, batch=50)
    assert whole == chunked
    most, push = [0], inorder.InOrder.push

    def spy(self, ids, values):
        push(self, ids, values)
        most[0] = max(most[0], self.waiting)

    monkeypatch.setattr(inorder.InOrder, "push", spy)
    monkeypatch.setattr(rounds.Round, "abandon", lambda self: pytest.fail("a pool given up"))
    res = run_inproc(_cfg("ethics_vldp", {}, SMALL, n=3000, pools=3, batch=50),
                     Limits(timeout_s=5))
    rnd = res["comm"]["per_round"][0]
    assert rnd["refused"] == len(range(0, 3000, every)) and res["dropouts"] == 0
    # the frontier passed them as they came (stuck, everything waited: 3000 less refused)
    assert most[0] <= SMALL + 3 * WINDOW * 50
