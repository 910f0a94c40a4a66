"""SAFARI's chunked runs: with GRR and OLH its curator absorbs in parts and a run of more agents
than ``[runtime] chunk`` streams both rounds; the record is the unchunked run's, field for field
(timing aside), on both local backends, with 1 to 3 pools, with either split of the users, CALM's
OLH round, the "group" estimator and leaves of two items. With Harmony its curator sums floats
in the reports' order: it takes the parts in agent order (``Curator.absorbs_in_order``), and
streams too."""

from __future__ import annotations

import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits

from tests.simulator.session.test_chunked_runs import LARGE, fields

#: a chunk far below the runs' agents that msgpack writes in as many bytes as ``LARGE``
CHUNK = 257
#: SAFARI's settings whose curator counts, and Harmony's (in agent order): all stream
COUNTING = [{}, {"split": "users"}, {"rule1": "calm"},
            {"rule1": "naive", "split": "users", "phase1_fraction": 0.3},
            {"K": 2, "estimator": "group", "diagnostics": True}]
HARMONY = [{"oracle": "harmony"}, {"oracle": "harmony", "rule1": "calm", "split": "users"}]


def cfg(params: dict, chunk: int, n: int = 1500, pools: int = 2, colluders: int = 0) -> dict:
    return {"protocol": "safari", "params": params,
            "data": {**example_data("safari"), "n": n}, "seed": 5, "pools": pools,
            "agent_mode": "batched", "batch": "auto", "chunk": chunk,
            "collusion": {"colluders": colluders, "curator": True}, "faults": []}


def _pair(run, params: dict, **kw) -> tuple[bytes, bytes]:
    physical = run is run_inproc
    limits = Limits(timeout_s=10.0)
    return (fields(run(cfg(params, LARGE, **kw), limits), physical),
            fields(run(cfg(params, CHUNK, **kw), limits), physical))


@pytest.mark.parametrize("pools", [1, 2, 3])
@pytest.mark.parametrize("params", COUNTING + HARMONY, ids=repr)
def test_a_chunked_safari_run_gives_the_same_record_inproc(params, pools, streamed):  # noqa: F811
    whole, chunked = _pair(run_inproc, params, pools=pools)
    assert whole == chunked
    assert streamed == [False, True]


@pytest.mark.parametrize("params", COUNTING[:3] + HARMONY[:1], ids=repr)
def test_a_chunked_safari_run_gives_the_same_record_on_processes(params):
    whole, chunked = _pair(run_processes, params, pools=3)
    assert whole == chunked
    assert whole == fields(run_inproc(cfg(params, CHUNK, pools=3), Limits(timeout_s=10)), False)


def test_colluders_disclose_the_same_in_a_chunked_safari_run(streamed):  # noqa: F811
    whole, chunked = _pair(run_inproc, {"split": "users"}, colluders=40, pools=2)
    assert whole == chunked and streamed == [False, True]


@pytest.mark.slow
def test_at_ten_million_agents_a_chunked_users_split_gives_the_record_held_whole():
    """10^7 agents on the processes backend, half in each round (``split = "users"``) and
    CALM's OLH round first, held in chunks of 2^20 + 7 (both rounds stream, the synthetic
    set is counted in parts) and whole, every field the same but the socket's own counts
    (``protocol = "safari"`` with its defaults is in ``test_chunked_runs``' 10^7 test)."""
    limits, params = Limits(timeout_s=600.0), {"split": "users", "rule1": "calm"}
    whole = fields(run_processes(cfg(params, 2**24 + 43, n=10**7), limits), False)
    chunked = fields(run_processes(cfg(params, 2**20 + 7, n=10**7), limits), False)
    assert whole == chunked
