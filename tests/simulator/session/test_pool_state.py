"""A pool's state file (``session.poolstate``): what it keeps, what it refuses to read, and a
pool session restarted from it.

The end-to-end attacks (real ``ldpsim agents`` processes restarted over loopback) are in
``tests/simulator/backends/test_pool_memory.py``; these are the same rules on the session, in
milliseconds, and the file's format against every corruption of one byte.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import CuratorSession, PoolSession
from ldpsim.simulator.session.policy import AgentPolicy, Ledger
from ldpsim.simulator.session.poolstate import PoolState, StateFileError, state_path
from ldpsim.simulator.session.seeding import local_parties

from tests.simulator.session.test_agent_policy import (
    AUTH,
    LIMITS,
    SECRETS,
    config,
    drive,
    refusal,
    setup_frame,
    setup_of,
)

POLICY = b"pool-state test policy key, 32 B"


def _ledger() -> Ledger:
    """Two data sets' spending, piecewise constant and not."""
    led = Ledger()
    a = led.block(7, 100, 600)
    a[:200] += 1.0
    a[350:] += 0.25
    b = led.block(-3, 0, 50)
    b[:] = np.linspace(0.0, 2.0, 50)
    led.block(7, 0, 700)  # grown on both sides
    return led


def test_the_state_file_keeps_the_answered_runs_and_the_ledger(tmp_path: Path) -> None:
    assert state_path(tmp_path / "pool-3.keys") == tmp_path / "pool-3.state"
    path = tmp_path / "pool-0.state"
    st = PoolState.create(path, 0, 2, POLICY)
    assert path.stat().st_mode & 0o077 == 0
    led = _ledger()
    st.save({5: b"a" * 32, -(2**63): b"b" * 32}, led)
    back = PoolState.read(path, 0, 2, POLICY)
    assert back.answered == {5: b"a" * 32, -(2**63): b"b" * 32}
    got = Ledger()
    back.restore(got)
    for data_id, (first, arr) in led.arrays().items():
        f2, a2 = got.arrays()[data_id]
        assert f2 == first and np.array_equal(a2, arr)
    assert not list(tmp_path.glob("*.tmp"))


def test_a_state_file_is_refused_when_missing_altered_or_another_pools(tmp_path: Path) -> None:
    path = tmp_path / "pool-0.state"
    with pytest.raises(StateFileError, match="not found.*--new-lifetime"):
        PoolState.read(path, 0, 2, POLICY)
    PoolState.create(path, 0, 2, POLICY).save({9: b"c" * 32}, _ledger())
    with pytest.raises(StateFileError, match="exists already"):
        PoolState.create(path, 0, 2, POLICY)
    good = path.read_bytes()
    for i in range(len(good)):  # every byte changed, one at a time
        path.write_bytes(good[:i] + bytes([good[i] ^ 0x40]) + good[i + 1:])
        with pytest.raises(StateFileError, match="refusing to start"):
            PoolState.read(path, 0, 2, POLICY)
    for cut in (0, 5, len(good) // 2, len(good) - 1):
        path.write_bytes(good[:cut])
        with pytest.raises(StateFileError, match="refusing to start"):
            PoolState.read(path, 0, 2, POLICY)
    path.write_bytes(good)
    with pytest.raises(StateFileError, match="MAC"):  # another deployment's keys
        PoolState.read(path, 0, 2, b"another deployment's policy key")
    other = tmp_path / "pool-1.state"
    PoolState.create(other, 1, 2, POLICY)
    with pytest.raises(StateFileError, match="pool 1 of 2's"):  # another pool's file
        PoolState.read(other, 0, 2, POLICY)
    assert PoolState.read(path, 0, 2, POLICY).answered == {9: b"c" * 32}


def _pool(cfg: dict, path: Path, policy: AgentPolicy | None = None
          ) -> tuple[CuratorSession, PoolSession]:
    """A curator session and a pool session started from the state file at ``path``."""
    parties = local_parties(cfg, cfg["data"]["n"], SECRETS, AUTH)
    state = PoolState.read(path, 0, 1, parties.pools[0].policy)
    return (CuratorSession(0, parties.curator, AUTH, LIMITS),
            PoolSession(0, 1, AUTH, LIMITS, parties.pools[0], policy, state))


def test_a_pool_session_restarted_from_its_state_refuses_and_charges(tmp_path: Path) -> None:
    """A pool session answers a run at ε = 1 with lifetime_epsilon = 1.5 and is dropped (the
    process ends); one started from its state file refuses the same run and every round of
    another run over the same data set, and answers a run over another data set."""
    path = tmp_path / "pool-0.state"
    first = config()
    PoolState.create(path, 0, 1, local_parties(first, 200, SECRETS, AUTH).pools[0].policy)
    pol = AgentPolicy(lifetime_epsilon=1.5)
    cur, pool = _pool(first, path, pol)
    assert drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))["refused"] == 0
    cur, pool = _pool(first, path, pol)  # restarted: the same run
    assert "answered already" in refusal(pool.on_frame(setup_frame(setup_of(cur))))
    second = config(params={"epsilon": 1.0, "queries": 2})  # the same data set
    cur, pool = _pool(second, path, pol)
    res = drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))
    assert res["refused"] == 200 and "lifetime" in res["refusal"]
    cur, pool = _pool(config(seed=4), path, pol)  # another data set
    assert drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))))["refused"] == 0
    st = PoolState.read(path, 0, 1, local_parties(first, 200, SECRETS, AUTH).pools[0].policy)
    # three runs recorded: the second's rounds were all refused, but it was queried, and a
    # queried run counts as answered (as on a pool that never restarts)
    assert len(st.answered) == 3


def test_done_leaves_a_keep_serving_pool_waiting(tmp_path: Path) -> None:
    """The curator's end of sweep (DONE for any run) ends a pool only if it exits on DONE."""
    bye = wire.encode(wire.DONE, wire.ANY_RUN, wire.SETUP_ROUND, wire.NO_AGENT, None)
    cfg = config()
    parties = local_parties(cfg, 200, SECRETS, AUTH)
    stays = PoolSession(0, 1, AUTH, LIMITS, parties.pools[0], exit_on_done=False)
    cur = CuratorSession(0, parties.curator, AUTH, LIMITS)
    stays.on_frame(setup_frame(setup_of(cur)))
    assert not stays.idle
    stays.on_frame(bye)
    assert not stays.exit and stays.idle  # it left the run and waits for the next set-up
    leaves = PoolSession(0, 1, AUTH, LIMITS, parties.pools[0])
    leaves.on_frame(bye)
    assert leaves.exit


@pytest.mark.parametrize("protocol, data", [
    ("ldp_kwiksort_rr", {"kind": "mallows", "n": 200, "m": 6, "theta": 0.5}),
    ("dpwevote", {"kind": "weighted_votes", "n": 200, "candidates": 3})])
def test_the_state_file_is_ahead_of_every_report_with_one_write_per_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, data: dict) -> None:
    """Batches of 32 agents: whenever a report leaves the pool, the ledger in the state file
    holds at least each agent's exact spending (the round's ε is reserved for the block at the
    round's first batch); the file is written once per round, and once more after the run
    (``settle``, when the pool is idle), when it holds the exact ledger."""
    cfg = config(protocol=protocol, data=data, batch=32,
                 params={"epsilon": 2.0} if protocol == "dpwevote" else
                 {"epsilon": 1.0, "queries": 1})
    parties = local_parties(cfg, 200, SECRETS, AUTH)
    path = tmp_path / "pool-0.state"
    PoolState.create(path, 0, 1, parties.pools[0].policy)
    saved: list[dict[int, tuple[int, np.ndarray]]] = []
    real = PoolState.save

    def spy(self: PoolState, answered: dict | None = None, ledger: Ledger | None = None) -> None:
        real(self, answered, ledger)
        saved.append({d: (f, a.copy()) for d, (f, a) in ledger.arrays().items()})

    monkeypatch.setattr(PoolState, "save", spy)
    cur, pool = _pool(cfg, path)
    reports = 0

    def check(out: list[bytes]) -> None:
        nonlocal reports
        if any(next(iter(wire.unpack_all(f, 1 << 26)))[1] == wire.REPORT for f in out):
            reports += 1
            for d, (first, exact) in pool.ledger.arrays().items():
                f2, disk = saved[-1][d]
                assert f2 == first and np.all(disk >= exact - 1e-12)

    res = drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))), on_pool=check)
    assert res["dropouts"] == 0 and reports >= 7 * res["comm"]["rounds"]
    assert len(saved) == res["comm"]["rounds"]  # the run's end is not held by a write
    pool.settle()  # what a driver does once the pool is idle (its statistics sent)
    assert len(saved) == res["comm"]["rounds"] + 1
    back = Ledger()
    PoolState.read(path, 0, 1, parties.pools[0].policy).restore(back)
    [(d, (_, exact))] = pool.ledger.arrays().items()
    assert np.array_equal(back.arrays()[d][1], exact)  # exact once the run ended
    assert float(exact.max()) == pytest.approx(res["spent"]["epsilon_lifetime_max"])
