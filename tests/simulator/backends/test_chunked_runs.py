"""A run held in chunks (``[runtime] chunk`` below the agents: ``agentrows.Chunks``) gives the
records of the run held whole, field for field (measurements of the machine and the run key,
which the setting is part of, aside): every protocol on the inproc backend, a few on the
processes backend, with 1 to 3 pools, chunks that do not divide a pool's block, a colluding
coalition (its disclosures), the seed's secret, a key file's and a fresh one, the privacy
audit's full path (its overrides of one agent's row and coins) and a pool with a state file.
The orchestrator never derives a chunked run's device keys over all its agents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, build_data
from ldpsim.protocols.keys import Secrets
from ldpsim.protocols.local import example_data
from ldpsim.simulator.session import CuratorSession, PoolSession, agentrows, seeding
from ldpsim.simulator.session.common import block_of
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.poolstate import PoolState
from ldpsim.simulator.session.seeding import local_parties, public_config

import ldpsim
from tests.simulator.session.test_agent_policy import (
    AUTH,
    LIMITS,
    SECRETS,
    config,
    drive,
    setup_frame,
    setup_of,
)
from tests.test_snapshot import MEASURED

BUILTIN = sorted(n for n, p in PROTOCOLS.items() if p.__module__.startswith("ldpsim.protocols"))
#: one protocol of each family, and both LDP-KwikSort variants
FAMILIES = ["ldp_kwiksort_rr", "ldp_kwiksort_lap", "kwiksort", "dp_kwiksort", "dpwevote",
            "safari", "rank_harmony", "truth_lp", "truth_two_layer", "ethics_vldp"]


def _strip(value, top: bool = False):
    """A record without what the machine measured, nor its key (the chunk setting is in it)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if k not in MEASURED and not (top and k == "key")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _scenario(name: str, pools: int, backend: str = "inproc", chunk: int | None = None,
              data: dict | None = None, colluders: float = 0.3) -> dict:
    runtime = {"backend": backend, "pools": pools, "timeout_s": 30, "jobs": 1}
    if chunk is not None:
        runtime["chunk"] = chunk
    return {"name": "chunked", "protocols": [name], "repeats": 1, "seed": 3,
            "data": data or example_data(name), "runtime": runtime,
            "collusion": {"colluders": colluders, "curator": True, "attacks": True,
                          "attack_targets": 20}}


def _records(scen: dict, secret: str | Path = "seed") -> list[dict]:
    return [_strip(r, True) for r in ldpsim.run(scen, secret=secret).records]


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks the pools of this process make (spied on ``Chunks.chunk``)."""
    out: list[int] = []
    real = agentrows.Chunks.chunk

    def chunk(self, j):
        before = self.made
        got = real(self, j)
        if self.made > before:
            out.append(j)
        assert len(self.kept) <= self.KEEP
        return got

    monkeypatch.setattr(agentrows.Chunks, "chunk", chunk)
    return out


@pytest.mark.parametrize("name", BUILTIN)
def test_every_protocols_records_are_the_same_in_chunks(name: str, made: list[int]) -> None:
    whole = _records(_scenario(name, 2))
    assert not made
    assert _records(_scenario(name, 2, chunk=37)) == whole
    assert len(made) >= 4  # blocks of 60 to 150 agents, chunks of 37


@pytest.mark.parametrize("pools", [1, 3])
@pytest.mark.parametrize("name", FAMILIES)
def test_one_to_three_pools_in_chunks(name: str, pools: int, made: list[int]) -> None:
    assert _records(_scenario(name, pools, chunk=23)) == _records(_scenario(name, pools))
    assert made


@pytest.mark.parametrize("name, pools", [("ldp_kwiksort_rr", 1), ("ldp_kwiksort_lap", 3),
                                         ("dp_kwiksort", 2), ("dpwevote", 3), ("safari", 2),
                                         ("truth_rr", 3), ("ethics_rldp_laplace", 2)])
def test_the_processes_backend_in_chunks(name: str, pools: int) -> None:
    whole = _records(_scenario(name, pools, "processes"))
    assert _records(_scenario(name, pools, "processes", chunk=29)) == whole
    inproc = _records(_scenario(name, pools))  # and the inproc backend's
    assert [dict(r, backend="") for r in whole] == [dict(r, backend="") for r in inproc]


MALLOWS = {"kind": "mallows", "n": 5003, "m": 6, "theta": 0.4}


@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_a_key_files_and_a_fresh_secret_in_chunks(tmp_path: Path, backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The secret of a key file, and a fresh one (drawn by the chunked sweep, then given
    to the whole one): the same records. A chunked run never derives the device keys of all
    its agents at once (which a whole run does with a secret of its own, and with a seed's
    for a small run)."""
    seeding.device_keys.cache_clear()
    seeding._KEPT.__init__()
    scen = _scenario("ldp_kwiksort_rr", 2, backend, data=MALLOWS, colluders=0.01)
    chunked = _scenario("ldp_kwiksort_rr", 2, backend, chunk=1000, data=MALLOWS,
                        colluders=0.01)
    key = tmp_path / "secret.key"
    fresh = ldpsim.run(chunked)
    fresh.write_secret(key)
    assert seeding.device_keys.cache_info().currsize == 0
    whole = _records(scen, key)
    assert [_strip(r, True) for r in fresh.records] == whole
    assert seeding.device_keys.cache_info().currsize == 1  # the whole run's
    small = dict(MALLOWS, n=3001)
    whole_small = _records(_scenario("ldp_kwiksort_rr", 3, backend, data=small))

    def never(*args, **kwargs):
        raise AssertionError("device keys of all the agents of a chunked run")

    monkeypatch.setattr(seeding, "device_keys", never)
    monkeypatch.setattr(seeding, "_seed_device_keys", never)
    seeding._KEPT.__init__()
    assert _records(chunked, key) == whole
    assert _records(_scenario("ldp_kwiksort_rr", 3, backend, chunk=700, data=small)) == \
        whole_small


def test_the_audits_full_path_in_chunks(made: list[int]) -> None:
    """One agent's row and coins overridden in the pool that holds it, a chunk at a time."""
    def audit(chunk: int | None) -> list[dict]:
        over = {"runtime.chunk": chunk} if chunk else {}
        return [_strip(r, True) for r in ldpsim.audit("audit_rank", over, trials=40,
                                                      path="full")]
    whole = audit(None)
    assert not made
    assert audit(3) == whole
    assert len(made) >= 4 * 40  # chunks of 3 of 10 agents, in every trial


def test_chunks_give_the_blocks_rows_and_keys() -> None:
    """``Chunks.rows_keys`` of ranges across chunks' ends and of any agents (out of order,
    repeated) against the block's rows and keys made whole; a prebuilt first chunk is used."""
    config = {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0},
              "data": dict(MALLOWS, n=1000), "seed": 5, "pools": 2}
    keys = local_parties(config, 1000, Secrets(b"c" * 32)).pools[1]
    cfg = public_config(config)
    data_keys = keys.data_keys(int(cfg["data_id"]))
    dataset = build_data(cfg["data"], data_keys)
    start, stop = block_of(1, 2, 1000)
    k = keys.agents.for_range(start, stop, coin_tag=int(cfg["run_id"]),
                              data_tag=int(cfg["data_id"]))
    rows = dataset.with_keys(data_keys.with_cache(start, k["data"])).rows(start, stop)
    built = agentrows.prebuild(keys, 1, 2, dict(cfg, chunk=64))
    assert built[1:3] == (start, start + 64)
    chunks = agentrows.Chunks(keys, cfg, dataset, data_keys, start, stop, 64, None, built)
    rng = np.random.default_rng(0)
    for ids in (np.arange(start, stop), np.arange(start + 60, start + 70),
                np.arange(stop - 3, stop), rng.integers(start, stop, 50),
                np.sort(rng.choice(np.arange(start, stop), 100, replace=False))):
        got_rows, got_coins = chunks.rows_keys(ids)
        assert np.array_equal(got_rows, rows[ids - start])
        assert np.array_equal(got_coins, k["coins"][ids - start])
        assert len(chunks.kept) <= chunks.KEEP
    assert chunks.made >= (stop - start) // 64  # the prebuilt chunk 0 was not made again
    pinned = agentrows.Chunks(keys, cfg, dataset, data_keys, start, stop, 64, pin=130)
    for _ in range(3):  # three rounds over the block: the first two chunks are made once
        for lo in range(start, stop, 32):
            got_rows, got_coins = pinned.rows_keys(np.arange(lo, min(stop, lo + 32)))
            assert np.array_equal(got_rows, rows[lo - start:lo - start + 32])
            assert np.array_equal(got_coins, k["coins"][lo - start:lo - start + 32])
    units = -(-(stop - start) // 64)
    assert sorted(pinned.pinned) == [0, 1] and pinned.made == 3 * units - 2 * 2
    over = {"agent": start + 70, "row": rows[0]}
    chunks = agentrows.Chunks(keys, cfg, dataset, data_keys, start, stop, 64, over)
    got_rows, _ = chunks.rows_keys(np.arange(start + 65, start + 75))
    assert np.array_equal(got_rows[5], rows[0]) and np.array_equal(got_rows[4], rows[69])


@pytest.mark.parametrize("protocol, data", [
    ("ldp_kwiksort_rr", {"kind": "mallows", "n": 200, "m": 6, "theta": 0.5}),
    ("dpwevote", {"kind": "weighted_votes", "n": 200, "candidates": 3})])
def test_a_pool_with_a_state_file_in_chunks(tmp_path: Path, protocol: str, data: dict) -> None:
    """A pool that keeps its state file (``ldpsim agents``), in chunks of 45 and whole, runs
    twice over one data set under a lifetime budget: the same results, the same refusals, the
    same state files (the runs answered and the ledger; the digests of the configurations
    answered differ: the chunk setting is signed with the rest)."""
    def runs(chunk: int | None, where: Path) -> list[dict]:
        where.mkdir()
        path = where / "pool-0.state"
        out = []
        for eps in (1.0, 0.75):
            over = {"chunk": chunk} if chunk else {}
            cfg = config(protocol=protocol, data=data, batch=32, **over,
                         params={"epsilon": 2.0 * eps} if protocol == "dpwevote" else
                         {"epsilon": eps, "queries": 1})
            parties = local_parties(cfg, 200, SECRETS, AUTH)
            if not path.exists():
                PoolState.create(path, 0, 1, parties.pools[0].policy)
            state = PoolState.read(path, 0, 1, parties.pools[0].policy)
            cur = CuratorSession(0, parties.curator, AUTH, LIMITS)
            pool = PoolSession(0, 1, AUTH, LIMITS, parties.pools[0],
                               AgentPolicy(lifetime_epsilon=1.5), state)
            held: list[bool] = []

            def look(_: list[bytes], pool: PoolSession = pool, held: list[bool] = held) -> None:
                held.append(pool.chunks is not None)

            res = drive(cur, pool, pool.on_frame(setup_frame(setup_of(cur))), on_pool=look)
            pool.settle()
            assert any(held) == (chunk is not None)
            out.append(_strip(res, True))
        st = PoolState.read(path, 0, 1, parties.pools[0].policy)
        return out, (sorted(st.answered), {d: [a.tolist() for a in led.runs()]
                                           for d, led in st.ledger.items()})

    whole, whole_state = runs(None, tmp_path / "whole")
    got, got_state = runs(45, tmp_path / "chunked")
    assert got == whole and got_state == whole_state and len(whole_state[0]) == 2
    assert whole[1]["refused"] > 0  # the second run went past the lifetime budget
