"""The Backend interface: the runner reaches every backend through build / run / close, never by
its name; a registered backend is what a scenario's [runtime] backend and --backend accept."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from ldpsim.simulator import backends
from ldpsim.simulator.backends import BACKENDS, Backend, InprocBackend, get_backend
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario import tables
from ldpsim.simulator.sweep import execute, runner


def test_the_registry_is_what_scenarios_and_the_cli_accept() -> None:
    assert list(BACKENDS) == ["inproc", "processes", "hosts", "dask"]
    assert tables.RUNTIME["backend"].choices == tuple(BACKENDS)
    assert all(issubclass(b, Backend) and b.name == k for k, b in BACKENDS.items())
    with pytest.raises(ValueError, match="allowed: one of 'inproc', 'processes', 'hosts', "
                                         "'dask'"):
        get_backend("ray")


@pytest.mark.parametrize("module", [runner, execute])
def test_the_runner_never_branches_on_a_backend_name(module) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)} & set(BACKENDS)
    assert names == set()


class _Recording(InprocBackend):
    name = "recording"
    calls: list[str] = []

    @classmethod
    def build(cls, runtime: dict[str, Any], echo: Any = print) -> Backend:
        cls.calls.append("build")
        return cls()

    def run(self, config, limits, record_view, secrets=None, policy=None, n=None):
        self.calls.append("run")
        return super().run(config, limits, record_view, secrets, policy, n)

    def close(self) -> None:
        self.calls.append("close")


def test_a_registered_backend_runs_a_sweep(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "recording", _Recording)
    _Recording.calls = []
    raw = {"protocol": "ldp_kwiksort_rr", "repeats": 2,
           "data": {"kind": "mallows", "n": 50, "m": 4, "theta": 0.5},
           "params": {"epsilon": [1.0, 2.0]},
           # one job: the calls are counted in this process (jobs = "auto" would fork workers);
           # the seed-only secret: the two sweeps below give the same outputs
           "runtime": {"backend": "inproc", "pools": 2, "progress": False, "jobs": 1,
                       "secret": "seed"}}
    s = sc.validate(raw)
    s.runtime["backend"] = "recording"
    quiet = {"show_progress": False, "echo": lambda *a, **k: None}
    records, _ = runner.run_scenario(s, tmp_path, **quiet)
    assert _Recording.calls == ["build"] + ["run"] * 4 + ["close"]
    assert {r["backend"] for r in records} == {"recording"}
    # the same outputs as the inproc backend: only the name differs
    s2 = sc.validate(raw)
    ref, _ = runner.run_scenario(s2, tmp_path / "ref", **quiet)
    assert [r["output"] for r in records] == [r["output"] for r in ref]
    # resuming a finished sweep builds nothing (the hosts backend would bind a port)
    _Recording.calls = []
    runner.run_scenario(s, tmp_path, **quiet)
    assert _Recording.calls == []


def test_a_single_hosts_run_needs_the_sweep_that_binds_it() -> None:
    raw = {"protocol": "kwiksort", "data": {"kind": "mallows", "n": 20, "m": 4, "theta": 0.5},
           "runtime": {"backend": "hosts", "token": "a token of 16+ chars"}}
    spec = sc.validate(raw).runs()[0]
    with pytest.raises(ValueError, match="needs a running HostsCurator"):
        execute.execute(spec)
    assert backends.HostsBackend.name == "hosts"
