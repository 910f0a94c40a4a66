"""The orchestrator's ground truth computed beside the run (``execute.TruthCache.start``): the same
truth for every data kind, the same record on every backend, a failed computation falls back to
computing it here, and no process is left behind."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.keys import Secrets
from ldpsim.protocols.rank.data import MallowsData
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.sweep import execute


def _strip(obj: Any) -> Any:
    """A record without its timings (wall and CPU seconds differ from run to run)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items()
                if k != "timing" and not k.endswith(("wall_s", "cpu_s"))}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


@pytest.mark.parametrize("name", ["audit_rank", "audit_truth", "audit_vote", "audit_safari",
                                  "audit_ethics"])
def test_every_kind_gets_the_same_truth_beside(monkeypatch: pytest.MonkeyPatch,
                                               name: str) -> None:
    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    spec = sc.load(sc.find(name), ["data.n=300"]).runs()[0]
    cache = execute.TruthCache()
    secret = Secrets(b"truth-beside test: a master key!")
    assert cache.start(spec.data, spec.seed, secret)
    assert not cache.start(spec.data, spec.seed, secret)  # under way already
    got = cache.get(spec.data, spec.seed, secret)
    assert not cache._pending
    np.testing.assert_equal(got, execute._truth(spec.data, spec.seed, secret))
    assert not cache.start(spec.data, spec.seed, secret)  # known now


def test_small_data_is_computed_here() -> None:
    spec = sc.load(sc.find("audit_rank")).runs()[0]
    assert spec.data["n"] < execute.TRUTH_BESIDE_N
    assert not execute.TruthCache().start(spec.data, spec.seed)


@pytest.mark.parametrize("backend", ["inproc", "processes"])
def test_the_record_is_the_same(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    # the seed-only secret: two executions of the spec, compared
    spec = sc.load(sc.find("audit_rank"), ["data.n=400", f"runtime.backend={backend!r}",
                                           "runtime.secret='seed'"]).runs()[0]
    after = execute.execute(spec)  # processes: the truth counted in the pools (issue 52)
    # the pools hand no truth over: computed here after the run, then beside it
    monkeypatch.setattr(MallowsData, "truth_from_pools", lambda self, protocol: False)
    assert _strip(execute.execute(spec)) == _strip(after)
    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    monkeypatch.setattr(execute, "_cores", lambda: 64)
    started = []
    start = execute.TruthCache.start
    monkeypatch.setattr(execute.TruthCache, "start",
                        lambda self, *a: started.append(start(self, *a)) or started[-1])
    beside = execute.execute(spec)
    assert started == [True]
    assert _strip(beside) == _strip(after)


@pytest.mark.parametrize("backend, cores, beside", [
    ("inproc", 2, True), ("processes", 3, False), ("processes", 4, True),
    ("hosts", 3, False)])
def test_only_on_a_core_the_run_leaves_free(monkeypatch: pytest.MonkeyPatch, backend: str,
                                            cores: int, beside: bool) -> None:
    """The truth is computed beside a run only where the machine has a core beyond those the
    run keeps busy (the processes backend's curator and pools): else it would slow the run
    and its timings."""
    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    monkeypatch.setattr(execute, "_cores", lambda: cores)
    spec = sc.load(sc.find("audit_rank"), ["runtime.pools=2"]).runs()[0]
    started = []
    monkeypatch.setattr(execute.TruthCache, "start", lambda self, *a: started.append(a))

    class Stop(Exception):
        pass

    def run(*a):
        raise Stop

    impl = execute.get_backend(backend)
    monkeypatch.setattr(impl, "run", lambda self, *a: run())
    b = impl.__new__(impl)  # no curator bound: only the decision is under test
    with pytest.raises(Stop):
        execute.execute(spec, execute.TruthCache(), b)
    assert bool(started) == beside


def _dies(data, seed, secret, conn) -> None:
    os._exit(3)  # before it says anything


def _fails(data, seed, secret, conn) -> None:
    conn.send(("error", "Traceback: boom"))


@pytest.mark.parametrize("child", [_dies, _fails])
def test_a_failed_child_falls_back_to_computing_here(monkeypatch: pytest.MonkeyPatch,
                                                     child) -> None:
    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    monkeypatch.setattr(execute, "_truth_child", child)
    spec = sc.load(sc.find("audit_rank")).runs()[0]
    cache = execute.TruthCache()
    assert cache.start(spec.data, spec.seed)
    np.testing.assert_equal(cache.get(spec.data, spec.seed),
                            execute._truth(spec.data, spec.seed, None))


def test_close_stops_what_nobody_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    spec = sc.load(sc.find("audit_rank"), ["data.n=10000000"]).runs()[0]
    cache = execute.TruthCache()
    assert cache.start(spec.data, spec.seed)
    (proc, _), = cache._pending.values()
    cache.close()
    assert not cache._pending and not proc.is_alive()


#: ethics voters whose Eq. (3) estimates the memory keeps (d = 3, 4 records: 128 bytes each)
FITS = {"kind": "ethics_synthetic", "n": 200_000, "d": 3, "records": 4}
#: ... and voters too many for it (d = 10, 50 records: 4 KB each, 0.8 GB)
TOO_MANY = {"kind": "ethics_synthetic", "n": 200_000, "d": 10, "records": 50}


@pytest.mark.parametrize("data, protocol, here, started", [
    (FITS, "ethics_vldp", True, False),       # the run leaves every estimate here
    (FITS, "ethics_vlcp", True, False),
    (FITS, "ethics_rldp_fm", True, True),     # its voters never solve Eq. (3)
    (FITS, "ethics_vldp", False, True),       # its agents compute elsewhere (processes)
    (TOO_MANY, "ethics_vldp", True, True),    # more estimates than the memory keeps
    ({"kind": "mallows", "n": 200_000, "m": 5}, "ldp_kwiksort_rr", True, True)])
def test_a_truth_the_run_leaves_here_is_not_computed_beside(data, protocol, here, started):
    """A run whose agents compute in this process (inproc) and solve what the truth solves
    (``Dataset.truth_from_run``: every voter's Eq. (3) estimate, kept in ``ethics.memo``)
    leaves the truth to be computed here after it: beside, it would solve them all again."""
    from ldpsim.protocols import get_protocol

    cache = execute.TruthCache()
    try:
        assert cache.start(data, 1, None, get_protocol(protocol) if here else None) is started
    finally:
        cache.close()


def test_an_inproc_run_leaves_its_ethics_truth_here(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path) -> None:
    """On inproc with a core to spare, an ethics run of a large data set solves each voter's
    Eq. (3) once, in its pools, and the truth computed after the run reads the estimates: no
    process beside it, no voter solved twice, and the record of a truth computed beside."""
    from ldpsim.protocols.ethics import data as ethics_data
    from ldpsim.protocols.ethics import estimates, memo

    monkeypatch.setattr(execute, "TRUTH_BESIDE_N", 1)
    monkeypatch.setattr(execute, "_cores", lambda: 64)
    scen = tmp_path / "e.toml"
    scen.write_text('name = "e"\nprotocol = "ethics_vldp"\nseed = 3\n[data]\n'
                    'kind = "ethics_synthetic"\nn = 3000\nd = 3\nrecords = 4\n'
                    '[runtime]\nbackend = "inproc"\nsecret = "seed"\n')
    spec = sc.load(str(scen)).runs()[0]
    solved, started = [], []
    solve = estimates.constrained_mle
    monkeypatch.setattr(estimates, "constrained_mle",
                        lambda z, *a: solved.append(len(z)) or solve(z, *a))
    start = execute.TruthCache.start
    monkeypatch.setattr(execute.TruthCache, "start",
                        lambda self, *a: started.append(start(self, *a)) or started[-1])
    records = []
    for leaves_it_here in (True, False):
        if not leaves_it_here:  # the truth beside the run, as before
            monkeypatch.setattr(ethics_data.PairwiseChoices, "truth_from_run",
                                lambda self, protocol: False)
        for m in (memo.MLE, memo.FM, memo.ROWS):
            m.clear()
        solved.clear()
        records.append(execute.execute(spec))
        if leaves_it_here:
            assert sum(solved) == 3000  # by the pools; the truth read them
    assert started == [False, True]
    assert _strip(records[0]) == _strip(records[1])
    for m in (memo.MLE, memo.FM, memo.ROWS):
        m.clear()
