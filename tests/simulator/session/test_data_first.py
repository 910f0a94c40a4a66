"""``[runtime] data_first``: the pools build their agents' data before they register, so no
round's wall time holds data generation; every output and byte count stays the same."""

from __future__ import annotations

import pytest
from ldpsim.simulator import identity
from ldpsim.simulator import scenario as sc
from ldpsim.simulator.inproc import run_inproc
from ldpsim.simulator.session import Limits, PoolSession
from ldpsim.simulator.transport import run_processes

from tests.conftest import ROOT

LIMITS = Limits(timeout_s=20)


def _config(**over):
    cfg = {"protocol": "dpwevote", "params": {"epsilon": 1.0},
           "data": {"kind": "weighted_votes", "n": 300, "candidates": 3}, "seed": 5,
           "pools": 2, "agent_mode": "batched", "batch": 64,
           "collusion": {"colluders": 2, "curator": True}, "faults": []}
    cfg.update(over)
    return cfg


def _same_record(a, b):
    drop = ("timing",)
    a = {k: v for k, v in a.items() if k not in drop}
    b = {k: v for k, v in b.items() if k not in drop}
    for r in (a, b):
        r["comm"] = {k: v for k, v in r["comm"].items() if not k.startswith("physical")}
        r["comm"]["per_round"] = [{k: v for k, v in x.items()
                                   if k not in ("wall_s", "curator_cpu_s")}
                                  for x in r["comm"]["per_round"]]
        r.pop("pools", None)
    return a == b


def test_the_pools_build_their_data_before_registering(monkeypatch):
    seen = []
    setup = PoolSession._setup

    def spy(self, run, cfg, nonce):
        out = setup(self, run, cfg, nonce)
        seen.append(self.data is not None)  # the registration is in ``out``, not yet sent
        return out

    monkeypatch.setattr(PoolSession, "_setup", spy)
    quiet = {"colluders": 0, "curator": True}  # colluders' disclosures would need the data
    run_inproc(_config(data_first=True, collusion=quiet), LIMITS)
    assert seen == [True, True]
    seen.clear()
    run_inproc(_config(collusion=quiet), LIMITS)
    assert seen == [False, False]  # by default the data follow the registration


@pytest.mark.parametrize("run", [run_inproc, run_processes], ids=["inproc", "processes"])
def test_data_first_changes_no_output_and_no_byte(run):
    assert _same_record(run(_config(data_first=True), LIMITS), run(_config(), LIMITS))


def test_the_scenario_key_is_checked_and_enters_the_identity_only_when_on():
    raw = sc.load(ROOT / "scenarios" / "demo.toml").raw
    on = sc.load(raw={**raw, "runtime": {**raw["runtime"], "data_first": True}})
    assert on.runtime["data_first"] is True and on.runs()[0].config()["data_first"] is True
    off = sc.load(raw=raw)
    assert "data_first" not in off.runs()[0].config()
    assert "runtime.data_first" not in identity.fingerprint(off)
    assert identity.fingerprint(on)["runtime.data_first"] == [True]
    with pytest.raises(sc.ScenarioError, match="data_first"):
        sc.load(raw={**raw, "runtime": {**raw["runtime"], "data_first": "yes"}})
