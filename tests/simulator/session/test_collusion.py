"""Collusion mechanics: who colludes, what colluders disclose, and the saved adversary view."""

from __future__ import annotations

import numpy as np
import pytest
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

from tests.conftest import each_chunking


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


#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "cfg")


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


#: what a record measures of its machine (never compared)
MEASURED = ("timing", "versions", "view_path")
#: what a coalition's analysis of the execution gives it of its own
OWN = ("key", "point", "collusion", "leakage")


def _sweep(tmp_path, colluders, backend="inproc", repeats=2, **top):
    raw = {"name": "c", "protocol": "dpwevote", "repeats": repeats, "seed": 3,
           "data": {"kind": "weighted_votes", "n": 300, "candidates": 2},
           "params": {"epsilon": 1.0},
           "runtime": {"backend": backend, "pools": 2, "jobs": 1, "progress": False},
           "collusion": {"colluders": colluders, "curator": True, "attacks": True,
                         "attack_targets": 50}, **top}
    return raw


def _strip(rec, drop=()):
    out = {k: v for k, v in rec.items() if k not in MEASURED + tuple(drop)}
    out["comm"] = {k: v for k, v in rec["comm"].items()
                   if not k.startswith("physical_") and k not in ("per_round", *drop)}
    if "leakage" in out:
        out["leakage"] = {k: v for k, v in out["leakage"].items() if k != "seconds"}
    return out


def test_every_coalition_of_a_sweep_point_analyses_one_execution(tmp_path, monkeypatch):
    """Issue 49: a semi-honest coalition cannot change the transcript, so every coalition of a
    sweep point analyses one execution (the same keys and coins): outputs, metrics and costs are
    identical across coalition sizes by construction, the execution runs once per repetition,
    and each record is the one its run gives alone (what ``ldpsim verify`` re-executes)."""
    from ldpsim.simulator.backends import InprocBackend

    import ldpsim

    calls = []
    real = InprocBackend.run

    def counting(self, config, *a, **k):
        calls.append(config["collusion"]["colluders"])
        return real(self, config, *a, **k)

    monkeypatch.setattr(InprocBackend, "run", counting)
    sizes = [0, 0.1, 30, 0.5, 299]
    recs = list(ldpsim.run(_sweep(tmp_path, sizes), out=tmp_path / "sweep", secret="seed"))
    assert len(recs) == 2 * len(sizes)
    assert calls == [299, 299]  # one execution per repetition, for the largest coalition
    for rep in (0, 1):
        mine = [r for r in recs if r["repeat"] == rep]
        base = _strip(mine[0], OWN + ("disclose_bytes_total",))
        for r in mine[1:]:
            assert _strip(r, OWN + ("disclose_bytes_total",)) == base
        assert [r["collusion"]["colluders"] for r in mine] == [0, 30, 30, 150, 299]
        disclosed = [r["comm"]["disclose_bytes_total"] for r in mine]
        assert disclosed[0] == 0 and disclosed[1] == disclosed[2] < disclosed[3] < disclosed[4]
        assert [r["leakage"]["colluders"] for r in mine] == [0, 30, 30, 150, 299]
    # each record is the record of its run alone (its own, smaller, execution)
    calls.clear()
    for k, want in zip(sizes, [r for r in recs if r["repeat"] == 1], strict=True):
        alone, = (r for r in ldpsim.run(_sweep(tmp_path, k), out=tmp_path / f"alone{k}",
                                        secret="seed") if r["repeat"] == 1)
        assert _strip(alone, ("key", "point")) == _strip(want, ("key", "point"))
    assert calls == [k for k in sizes for _ in (0, 1)]


def test_a_sweep_point_shares_its_execution_across_processes(tmp_path):
    """The same on the processes backend: pools in processes, the largest coalition's
    disclosures over the socket, each coalition's share of them in its record."""
    import ldpsim

    recs = list(ldpsim.run(_sweep(tmp_path, [0, 5, 20], backend="processes", repeats=1),
                           out=tmp_path / "p", secret="seed"))
    assert len({str(r["output"]) for r in recs}) == 1
    assert [r["collusion"]["colluders"] for r in recs] == [0, 5, 20]
    inproc = list(ldpsim.run(_sweep(tmp_path, [0, 5, 20], repeats=1), out=tmp_path / "i",
                             secret="seed"))
    for a, b in zip(recs, inproc, strict=True):
        assert a["output"] == b["output"]
        assert a["comm"]["disclose_bytes_total"] == b["comm"]["disclose_bytes_total"]


def test_records_of_coalitions_keyed_coins_are_not_mixed_in(tmp_path):
    """A directory written when a coalition keyed the coins holds other coins than its runs
    give now: a resumed sweep refuses it, naming the keys' derivation; sweeps without colluders
    keep their fingerprint (their coins never changed)."""
    import json

    from ldpsim.simulator.results.store import FINGERPRINT_FILE
    from ldpsim.simulator.scenario.tables import ScenarioError

    import ldpsim

    out = tmp_path / "old"
    list(ldpsim.run(_sweep(tmp_path, [0, 5], repeats=1), out=out, secret="seed"))
    doc = json.loads((out / FINGERPRINT_FILE).read_text())
    assert doc["fingerprint"]["keys"] == ["prf-1+shared-coins"]
    quiet = tmp_path / "quiet"
    list(ldpsim.run(_sweep(tmp_path, 0, repeats=1), out=quiet, secret="seed"))
    assert json.loads((quiet / FINGERPRINT_FILE).read_text())["fingerprint"]["keys"] == ["prf-1"]
    text = (out / FINGERPRINT_FILE).read_text().replace("prf-1+shared-coins", "prf-1")
    (out / FINGERPRINT_FILE).write_text(text)
    with pytest.raises(ScenarioError, match="keys"):
        list(ldpsim.run(_sweep(tmp_path, [0, 5], repeats=2), out=out, secret="seed"))


def test_verify_reexecutes_a_coalition_sweep_and_finds_it_whole(tmp_path):
    """``ldpsim verify`` re-executes each coalition's run (on the processes backend here: its
    pools disclose over the socket) and finds every record of the sweep, whose coalitions
    shared one execution, as its run gives it; a record edited afterwards is caught."""
    import json

    from ldpsim.simulator.results.store import RESULTS_FILE

    import ldpsim

    out = tmp_path / "v"
    list(ldpsim.run(_sweep(tmp_path, [0, 5, 20], backend="processes", repeats=2), out=out))
    report = ldpsim.verify(out)
    assert report.ok and report.checked == 6, report
    lines = (out / RESULTS_FILE).read_text().splitlines()
    rec = json.loads(lines[4])
    rec["comm"]["disclose_bytes_total"] += 1  # another coalition's share of the disclosures
    lines[4] = json.dumps(rec)
    (out / RESULTS_FILE).write_text("\n".join(lines) + "\n")
    assert not ldpsim.verify(out).ok


def test_a_worker_keeps_few_executions_and_a_missed_one_runs_again(tmp_path):
    """A ``--jobs`` worker may get some of a point's coalitions only: it keeps at most
    ``Executions.KEPT`` executions, and a run whose execution was dropped executes it again,
    with the same record."""
    from ldpsim.simulator.sweep.execute import Executions

    raw = _sweep(tmp_path, [0, 5], repeats=6)
    raw["runtime"]["secret"] = "seed"  # the two executions below: the same keys
    specs = sc.validate(raw).runs()
    kept = Executions()
    firsts = [s for s in specs if s.collusion["colluders"] == 0]
    for s in firsts:
        kept.keep(s, {"run": s.key})
    assert len(kept._kept) == Executions.KEPT  # the oldest two dropped
    seconds = [s for s in specs if s.collusion["colluders"] == 5]
    assert [kept.take(s) is not None for s in seconds] == [False, False] + [True] * 4
    assert kept._kept == {}
    alone = execute(seconds[0])
    shared = execute(seconds[0], executions=Executions())
    for rec in (alone, shared):
        rec.pop("timing"), rec["leakage"].pop("seconds")
        rec["comm"] = {k: v for k, v in rec["comm"].items()
                       if not k.startswith("physical_") and k != "per_round"}
    assert alone == shared
