"""What a run imports before its first round: the families of its own protocols only (in the
command line and in the curator's fork server), no plugin entry points, and no figure or Dask
module unless it draws figures or runs on Dask. Each test measures, in a fresh interpreter,
the time the modules left out would have added."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

#: the modules of the built-in families, of the plugins' entry points, of the figures and of
#: the Dask executor
FAMILIES = ("ldpsim.protocols.rank", "ldpsim.protocols.truth", "ldpsim.protocols.vote",
            "ldpsim.protocols.safari", "ldpsim.protocols.ethics")
FIGURES = ("ldpsim.simulator.results.plots", "ldpsim.simulator.results.plot_cache",
           "ldpsim.simulator.results.plot_layout")
DASK = ("ldpsim.simulator.sweep.engine_dask", "ldpsim.simulator.backends.dask_client")

SCENARIO = ('name = "one"\nprotocol = "dpwevote"\nrepeats = 1\nseed = 1\n'
            '[data]\nkind = "weighted_votes"\nn = 20\ncandidates = 1\n'
            '[runtime]\nbackend = "BACKEND"\npools = 2\n[output]\nplots = false\n')


def python_c(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -c CODE`` in a fresh interpreter, from the repository's root."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _loaded(prefixes: tuple[str, ...]) -> str:
    """Code that prints which modules of ``prefixes`` are loaded, as JSON."""
    return (f"import json, sys; print(json.dumps(sorted(m for m in sys.modules if "
            f"m.startswith({prefixes!r}) or m == 'importlib.metadata')))")


def test_a_run_imports_its_own_family_and_no_figure_or_dask_module(tmp_path):
    """``ldpsim run`` of a one-family scenario without figures, through the command line:
    DPWeVote's family alone, no ``importlib.metadata`` (the plugins' entry points), none of
    the figures' modules and none of the Dask executor's. Then the time they would add."""
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO.replace("BACKEND", "inproc"))
    argv = ["run", str(scen), "--out", str(tmp_path / "out"), "--no-progress", "-q"]
    left_out = (*FAMILIES, *FIGURES, *DASK)
    code = (f"from ldpsim.simulator import cli; rc = cli.main({argv!r}); print(rc); "
            + _loaded(left_out) + "; import importlib, time; t = time.perf_counter(); "
            f"[importlib.import_module(m) for m in {left_out!r}]; "
            "importlib.import_module('importlib.metadata').entry_points(group='x'); "
            "print(f'{time.perf_counter() - t:.3f}')")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    rc, loaded, seconds = res.stdout.splitlines()[-3:]
    assert rc == "0"
    assert json.loads(loaded) == ["ldpsim.protocols.vote"] + sorted(
        m for m in json.loads(loaded) if m.startswith("ldpsim.protocols.vote.")), loaded
    print(f"the other families, the entry points, the figures and Dask: {seconds} s more")


def test_a_lookup_of_a_builtin_name_imports_its_family_alone():
    """``get_protocol``, ``get_data_kind``, ``is_protocol`` and ``is_data_kind`` of built-in
    names import the family that defines them and build no registry (which imports every
    family and the entry points); the registry built after holds the same objects."""
    code = ("import json, sys\nfrom ldpsim.protocols import registry as r\n"
            "p = r.get_protocol('dpwevote'); k = r.get_data_kind('weighted_votes')\n"
            "assert r.is_protocol('dpwevote_laplace') and r.is_data_kind('weighted_votes')\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m in {FAMILIES!r} "
            "or m == 'importlib.metadata')))\n"
            "assert r.protocols()['dpwevote'] is p and r.data_kinds()['weighted_votes'] is k\n")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == ["ldpsim.protocols.vote"], res.stdout


def test_the_families_found_alone_are_the_registrys():
    """Every built-in name found through its family alone is the object the whole registry
    holds under it, and an unknown name still gets the registry's error."""
    code = ("from ldpsim.protocols import registry as r, families as f\n"
            "alone = {n: r.get_protocol(n) for _, (ps, _) in f.BUILTIN_NAMES.items() "
            "for n in ps}\n"
            "kinds = {n: r.get_data_kind(n) for _, (_, ks) in f.BUILTIN_NAMES.items() "
            "for n in ks}\n"
            "assert all(r.protocols()[n] is p for n, p in alone.items())\n"
            "assert all(r.data_kinds()[n] is k for n, k in kinds.items())\n"
            "try:\n    r.get_protocol('no_such')\nexcept r.ParamError as e:\n"
            "    print('allowed:' in str(e) and 'rank_grr' in str(e))\n")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True"], res.stdout


def test_a_protocol_handed_over_is_found_without_the_registry():
    """``registry.use`` (how a curator process takes its orchestrator's protocol object):
    ``get_protocol`` gives that object, ahead of a built-in one of its name, before and after
    the registry is built, and the registry is not built for it."""
    code = ("import sys\nfrom ldpsim.protocols import registry as r\n"
            "base = r.get_protocol('ldp_kwiksort_rr')\n"
            "class Toy(type(base)):\n    name = 'toy_rr'\n"
            "toy, again = Toy(), type(base)()\n"
            "r.use(toy); r.use(again)\n"
            "assert r.get_protocol('toy_rr') is toy and r.is_protocol('toy_rr')\n"
            "assert r.get_protocol('ldp_kwiksort_rr') is again\n"
            "print('ldpsim.protocols.vote' in sys.modules, 'importlib.metadata' in sys.modules)\n"
            "assert r.protocols()['toy_rr'] is toy\n"
            "assert r.get_protocol('ldp_kwiksort_rr') is again\n")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "False"], res.stdout


def test_the_fork_server_preloads_the_runs_families(tmp_path):
    """``ldpsim run`` on the processes backend has the fork server preload the families of
    its scenario's protocols (after ``--set``) and no ``importlib.metadata``; a plugin's name
    or no name keeps every family. The run itself is whole."""
    from ldpsim.simulator.backends.launch import PRELOAD, preload_for
    from ldpsim.simulator.start import run_protocols

    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO.replace("BACKEND", "processes"))
    assert run_protocols(["run", str(scen)]) == ["dpwevote"]
    assert run_protocols(["run", str(scen), "--set", 'protocols=["safari", "truth_rr"]']) == [
        "safari", "truth_rr"]
    assert run_protocols(["run", str(scen), "--set", "protocol=rank_grr"]) == ["rank_grr"]
    assert run_protocols(["run", str(tmp_path / "missing.toml")]) is None
    core = ["ldpsim.simulator.backends.transport", "numpy.random"]
    assert preload_for(["dpwevote"]) == [core[0], "ldpsim.protocols.vote", core[1]]
    assert preload_for(["rank_grr", "safari", "kwiksort"]) == [
        core[0], "ldpsim.protocols.safari", "ldpsim.protocols.rank", core[1]]
    assert preload_for(["a_plugins_protocol"]) == preload_for(None) == list(PRELOAD)
    argv = ["run", str(scen), "--out", str(tmp_path / "out"), "--no-progress", "-q"]
    code = ("import sys; from ldpsim.simulator.backends import launch; seen = []; "
            "orig = launch.preload_for; "
            "launch.preload_for = lambda names: seen.append(orig(names)); "
            f"from ldpsim.simulator import start; rc = start.main({argv!r}); print(rc, seen)")
    res = python_c(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == f"0 {[[core[0], 'ldpsim.protocols.vote', core[1]]]}"
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 1


def test_a_curator_of_a_family_not_preloaded_still_runs(tmp_path):
    """A fork server that preloads the rank family only serves a DPWeVote curator: it imports
    its family as it starts, and the run's output is the one of a fork server that preloads
    every family."""
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO.replace("BACKEND", "processes") .replace(
        "[output]", 'secret = "seed"\n[output]'))
    out = set()
    for names in (["ldp_kwiksort_rr"], None):
        code = ("import json\nfrom ldpsim.simulator.backends import launch\n"
                f"launch.preload_for({names!r}); launch.start_fork_server()\n"
                "from ldpsim.simulator.scenario.scenario import load\n"
                "from ldpsim.simulator.sweep.execute import execute\n"
                f"rec = execute(load({str(scen)!r}).runs()[0])\n"
                "print(json.dumps([rec['output'], rec['metrics']], sort_keys=True))\n")
        res = python_c(code)
        assert res.returncode == 0, res.stderr
        out.add(res.stdout.splitlines()[-1])
    assert len(out) == 1, out


def test_the_builtin_names_are_the_families():
    """``protocols.families.BUILTIN_NAMES`` (read before numpy, to import one family for a
    look-up and to preload a run's families) names exactly what each family defines."""
    import importlib

    from ldpsim.protocols.families import BUILTIN, BUILTIN_NAMES

    assert tuple(BUILTIN_NAMES) == BUILTIN
    for family, (protocols, kinds) in BUILTIN_NAMES.items():
        module = importlib.import_module(family)
        assert sorted(p.name for p in module.PROTOCOLS) == sorted(protocols), family
        assert sorted(module.KINDS) == sorted(kinds), family


def test_the_names_are_read_before_numpy():
    """``protocols.families`` and the package ``protocols`` import no numpy: the command line
    reads them before it begins the fork server."""
    res = python_c("import sys, ldpsim.protocols.families as f; "
                   "f.family_of_protocol('safari'); print('numpy' in sys.modules)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False"], res.stdout

