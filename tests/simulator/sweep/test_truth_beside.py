"""The orchestrator's ground truth computed beside the run (``execute.TruthCache.start``): the same
truth for every data kind, the same record on every backend, a failed computation falls back to
computing it here, and no process is left behind."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.keys import Secrets
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
    after = execute.execute(spec)
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
