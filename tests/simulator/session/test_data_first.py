"""``[runtime] data_first``: the pools build their agents' data before they register, so no
round's wall time holds data generation; every output and byte count stays the same. The
processes backend's pools, whose keys and data section come from the orchestrator, always
build it as they start, before they say ready."""

from __future__ import annotations

import pytest
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.session import Limits, PoolSession
from ldpsim.simulator.session.seeding import public_config

from tests import drivers
from tests.conftest import ROOT

NONCE = b"data-first nonce"

LIMITS = Limits(timeout_s=20)
QUIET = {"colluders": 0, "curator": True}  # colluders' disclosures would need the data


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

    def spy(self, run, blob, sigs, nonce):
        out = setup(self, run, blob, sigs, nonce)
        seen.append(self.data is not None)  # the registration is in ``out``, not yet sent
        return out

    monkeypatch.setattr(PoolSession, "_setup", spy)
    run_inproc(_config(data_first=True, collusion=QUIET), LIMITS)
    assert seen == [True, True]
    seen.clear()
    run_inproc(_config(collusion=QUIET), LIMITS)
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


def _keyed_pool(index):
    """A data_first run's configuration, its set-up as the curator relays it (the signed
    configuration and the signatures), and pool ``index`` of 2 holding its keys (as the
    processes backend starts it)."""
    cfg = _config(data_first=True, collusion=QUIET)
    parties = drivers.parties(cfg)
    setup = (parties.curator["signed"], parties.curator["sigs"])
    return cfg, setup, PoolSession(index, 2, drivers.AUTH, LIMITS, parties.pools[index])


def test_a_pool_with_its_keys_builds_its_rows_before_the_set_up_and_uses_them():
    cfg, setup, early = _keyed_pool(1)
    early.prebuild(public_config(cfg))
    rows, coins = early.prebuilt[3], early.prebuilt[4]
    early._setup(7, *setup, NONCE)
    assert early.data is rows and early.coins is coins  # used, not built again
    assert early.prebuilt is None
    _, _, late = _keyed_pool(1)  # the same rows and coins when built at set-up
    late._setup(7, *setup, NONCE)
    assert late.data.tolist() == rows.tolist() and (late.start, late.stop) == (150, 300)
    assert late.coins.tolist() == coins.tolist()


def test_pre_built_rows_of_another_data_section_or_without_keys_are_not_used():
    cfg, setup, sess = _keyed_pool(0)
    sess.prebuild(public_config(dict(cfg, data=dict(cfg["data"], n=200))))  # set-up: n = 300
    stale = sess.prebuilt[3]
    sess._setup(7, *setup, NONCE)
    assert sess.prebuilt is None and len(stale) == 100 and len(sess.data) == 150
    _, _, fresh = _keyed_pool(0)
    fresh._setup(7, *setup, NONCE)
    assert sess.data.tolist() == fresh.data.tolist()
    keyless = PoolSession(0, 2, drivers.AUTH, LIMITS)  # no keys: nothing to build with
    keyless.prebuild(public_config(cfg))
    assert keyless.prebuilt is None


def test_pre_built_rows_still_take_the_audits_neighbouring_row():
    cfg, setup, sess = _keyed_pool(0)
    sess.prebuild(public_config(cfg))
    rows = sess.prebuilt[3]
    other = rows[1]  # agent 3 gets agent 1's row
    sess.override = {"agent": 3, "row": other}
    sess._setup(7, *setup, NONCE)
    assert sess.data[3].tolist() == other.tolist() and rows[3].tolist() != other.tolist()
    assert not rows.flags.writeable and not sess.data.flags.writeable


def test_processes_pools_build_their_rows_before_they_say_ready(tmp_path, monkeypatch):
    # the pools are forked from this process: the spy goes with them and leaves a file each
    prebuild, hello = PoolSession.prebuild, PoolSession.hello

    def spy_prebuild(self, data):
        (tmp_path / f"pool{self.index}").write_text("built")
        prebuild(self, data)

    def spy_hello(self):
        mark = tmp_path / f"pool{self.index}"
        if not (tmp_path / f"hello{self.index}").exists():
            (tmp_path / f"hello{self.index}").write_text(mark.read_text() if mark.exists()
                                                         else "no rows")
        return hello(self)

    monkeypatch.setattr(PoolSession, "prebuild", spy_prebuild)
    monkeypatch.setattr(PoolSession, "hello", spy_hello)
    run_processes(_config(data_first=True, collusion=QUIET), LIMITS)
    assert [(tmp_path / f"hello{i}").read_text() for i in range(2)] == ["built", "built"]
    for f in tmp_path.iterdir():
        f.unlink()
    run_processes(_config(collusion=QUIET), LIMITS)  # without data_first too: always
    assert [(tmp_path / f"hello{i}").read_text() for i in range(2)] == ["built", "built"]
