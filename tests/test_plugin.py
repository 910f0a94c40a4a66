"""Your own protocol without a fork: the example plugin in ``examples/plugin-yes-no`` is made
visible the way ``pip install`` makes it (a dist-info with its ``ldpsim.families`` entry point
on the path, nothing edited in ldpsim), then listed, run on the processes backend, audited and
put through every contract test, each in a fresh interpreter as a user would."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from ldpsim.protocols import ParamError
from ldpsim.protocols.mechanisms import GRR

from ldpsim import protocols

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugin-yes-no"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """An environment whose Python sees the plugin as installed."""
    site = tmp_path_factory.mktemp("site")
    info = site / "ldpsim_yes_no-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ldpsim-yes-no\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[ldpsim.families]\nyes_no = ldpsim_yes_no\n")
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(site), str(EXAMPLE), str(ROOT),
                                         out.get("PYTHONPATH", "")])
    return out


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldpsim", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_plugin_is_listed(env):
    res = _cli(env, "list")
    assert res.returncode == 0, res.stderr
    assert "yes_no_rr" in res.stdout and "yes_no_survey" in res.stdout


def test_the_plugin_runs_on_the_processes_backend(env, tmp_path):
    res = _cli(env, "run", str(EXAMPLE / "scenarios" / "yes_no.toml"), "--out",
               str(tmp_path / "res"), "--no-progress")
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (tmp_path / "res" / "results.jsonl").open()]
    assert len(records) == 9 and {r["backend"] for r in records} == {"processes"}
    for r in records:  # the estimate is within 5 standard errors of the truth
        eps, n = r["params"]["epsilon"], r["n_agents"]
        se = math.sqrt(float(GRR(eps, 2).variance(0.3, n)))
        assert r["metrics"]["abs_error"] < 5 * se + 0.03, r["metrics"]  # + truth's own spread


def test_the_plugin_is_audited(env, tmp_path):
    res = _cli(env, "audit", str(EXAMPLE / "scenarios" / "audit_yes_no.toml"), "--trials",
               "400", "--out", str(tmp_path / "aud"), "--no-progress", timeout=300)
    assert res.returncode == 0, res.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "aud" / "audit.jsonl").open()]
    assert rec["protocol"] == "yes_no_rr" and not rec["flagged"]
    assert 0 < rec["epsilon_lower"] <= 1.0


def _on_the_plugin(module: str, env: dict, at_least: int) -> None:
    """Run the registry-driven tests of ``tests/protocols/MODULE`` on the installed plugin's
    protocol: they pass, ``at_least`` of them (one per test)."""
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "protocols" / module), "-k", "yes_no_rr"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    passed = re.search(r"(\d+) passed", res.stdout)
    assert passed and int(passed.group(1)) >= at_least, res.stdout[-500:]


def test_the_contract_tests_cover_the_plugin(env):
    """The registry-driven contract tests pick the plugin up without any list to edit."""
    _on_the_plugin("test_base_contract.py", env, 5)


def test_the_privacy_checks_cover_the_plugin(env):
    """The plugin states ε once, in its binding hook, like the built-in protocols: the same
    registry-driven checks run on it."""
    _on_the_plugin("test_privacy_once.py", env, 3)


def test_a_broken_or_clashing_family_is_refused_clearly():
    class Clash:
        PROTOCOLS = (protocols.get_protocol("kwiksort"),)
        KINDS = {}

    with pytest.raises(ParamError, match="'kwiksort' is registered already"):
        protocols.register_family(Clash(), "clash")

    class Malformed:
        PROTOCOLS = ("not a protocol",)
        KINDS = {}

    with pytest.raises(ParamError, match="not a protocols.base.Protocol"):
        protocols.register_family(Malformed(), "malformed")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        protocols.registry._add("plugin 'x'", object(), {}, {}, builtin=False)
    assert "must expose PROTOCOLS" in str(caught[0].message)


def test_a_plugin_that_fails_to_load_does_not_break_ldpsim(env, tmp_path):
    info = tmp_path / "ldpsim_broken-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ldpsim-broken\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[ldpsim.families]\nbroken = no_such_module_xyz\n")
    broken = dict(env, PYTHONPATH=os.pathsep.join([str(tmp_path), env["PYTHONPATH"]]))
    res = _cli(broken, "list")
    assert res.returncode == 0, res.stderr
    assert "yes_no_rr" in res.stdout and "kwiksort" in res.stdout
    assert "plugin 'broken' (no_such_module_xyz) skipped: it failed to load" in res.stderr
