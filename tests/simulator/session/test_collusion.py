"""Collusion mechanics: who colludes, what colluders disclose, and the saved adversary view."""

from __future__ import annotations

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.rank import profile
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.collusion import colluder_mask, load_view
from ldpsim.simulator.session.seeding import run_keys
from ldpsim.simulator.sweep.execute import execute


def test_colluder_mask_fraction_count_ids_and_cap():
    assert colluder_mask(1000, {"colluders": 0.25}, 7).sum() == 250
    assert colluder_mask(1000, {"colluders": 17}, 7).sum() == 17
    assert colluder_mask(10, {"colluders": 50}, 7).sum() == 9  # at most n - 1
    assert np.flatnonzero(colluder_mask(10, {"colluders": [2, 5]}, 7)).tolist() == [2, 5]
    a = colluder_mask(1000, {"colluders": 30}, 7)
    assert (a == colluder_mask(1000, {"colluders": 30}, 7)).all()
    assert not (a == colluder_mask(1000, {"colluders": 30}, 8)).all()


def cfg(colluders, curator=True, pools=2):
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 2},
            "data": {"kind": "mallows", "n": 400, "m": 6, "theta": 0.5}, "seed": 4,
            "pools": pools, "agent_mode": "batched", "batch": 64,
            "collusion": {"colluders": colluders, "curator": curator}, "faults": []}


def test_disclosures_reveal_data_and_coins_that_reproduce_reports():
    res = run_processes(cfg(0.1), Limits(timeout_s=5), record_view=True)
    view = res["view"]
    disc = view["disclosures"]
    assert len(disc) == res["colluders"] == 40
    keys = run_keys(4)
    from ldpsim.protocols.rank.data import KINDS

    truth_rows = KINDS["mallows"].build({"n": 400, "m": 6, "theta": 0.5}, keys.data).rows(0, 400)
    rnd = view["rounds"][0]
    for agent, d in disc.items():
        assert np.array_equal(d["data"], truth_rows[agent])
        assert d["coins"] == int(keys.coins(cfg(0.1), [agent])[0])
        # with the coins, the curator recomputes the colluder's report exactly
        i = int(np.searchsorted(rnd["agents"], agent))
        q = np.asarray(rnd["queries"][i])[None, :]
        o = profile.answers(np.asarray(d["data"])[None, :], q)
        u = rngm.uniform(np.array([d["coins"]], dtype=np.uint64), np.array([agent]), 0, 2)
        j = int(np.searchsorted(rnd["report_agents"], agent))
        assert np.array_equal(mech.GRR(0.5).perturb(o, u)[0], rnd["reports"][j])
    # disclosure does not change the honest output: the same run without a colluding curator
    # (the same coins: nothing is disclosed) releases the same
    quiet = run_inproc(cfg(0.1, curator=False), Limits(timeout_s=5))
    assert quiet["comm"]["disclose_bytes_total"] == 0
    assert res["output"] == quiet["output"]
    assert res["comm"]["disclose_bytes_total"] > 0


def test_no_disclosure_when_curator_is_not_in_the_coalition():
    res = run_inproc(cfg(0.1, curator=False), Limits(timeout_s=5), record_view=True)
    assert res["view"]["disclosures"] == {} and res["rejected"] == 0


def test_saved_view_reloads(tmp_path):
    raw = {"name": "v", "protocol": "ldp_kwiksort_rr", "repeats": 1, "seed": 2,
           "data": {"kind": "mallows", "n": 300, "m": 5},
           "params": {"epsilon": 1.0},
           "runtime": {"backend": "inproc", "pools": 2},
           "collusion": {"colluders": 5, "curator": True, "save_view": True}}
    spec = sc.load(raw=raw).runs()[0]
    rec = execute(spec, view_dir=tmp_path)
    view = load_view(rec["view_path"])
    assert len(view["disclosures"]) == 5
    assert view["output"]["ranking"] == rec["output"]["ranking"]
    assert len(view["rounds"][0]["report_agents"]) == 300
