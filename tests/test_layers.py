"""The runtime's rooms and their order, held by reading the source (nothing is imported).

``simulator/`` is grouped by concern, each room a package that may use the rooms below it and
never one above: ``codec`` (the wire format) < ``results`` (records, the summary, figures, the
report: nothing else of the runtime) < ``session`` (a run's two sessions, its configuration,
keys and coalition) < ``backends`` (where a run's agents live) < ``scenario`` (the scenario
language: files, validation, expansion, run keys, a results directory's identity) < ``audit``
(what a coalition learns, the audit command's harness) < ``sweep`` (a scenario's runs:
execution, resume, executors, report, verify) < ``bench`` < the command line at the top.
``protocols/`` (the science) imports none of them.

Three rules, for imports at a module's top and in its function bodies alike: a room imports
only from itself and the rooms below; the modules' import graph has no circle (so no import sits
in a function body to dodge one); and no module reaches for another module's private name
(``_name``).

A fourth for the imports in function bodies: each defers a cost that a test measures, or it
sits at the top of its module. It is either of a library in ``LAZY_LIBRARIES`` (an optional
extra, or a heavy library a start-up test keeps out: ``HEAVY`` in tests/test_cli.py), or of a
project module that ``LAZY`` lists for the module importing it, with the test that asserts the
start-up it saves (the modules a start-up imports, as
``test_the_command_line_imports_a_commands_rooms_only_when_it_runs`` does). An import of a
module that is loaded anyway, of the standard library or of a project module whose deferral no
test measures belongs at the top: the rule names its file, line and module.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the rooms from the bottom up; "" is the package's root (its command line)
ROOMS = ("codec", "results", "session", "backends", "scenario", "audit", "sweep", "bench", "")
#: the repository's directories and the package names they install as
TREES = {"simulator": "ldpsim.simulator", "protocols": "ldpsim.protocols", "ldpsim": "ldpsim"}


def _modules() -> dict[str, Path]:
    out = {}
    for tree, package in TREES.items():
        for path in sorted((ROOT / tree).rglob("*.py")):
            parts = path.relative_to(ROOT / tree).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


MODULES = _modules()


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a source file, parsed once for all the rules."""
    return tuple(ast.walk(ast.parse(path.read_text(), str(path))))


def _imports(name: str) -> list[tuple[str, str | None, int]]:
    """(module, imported name or None, line) of every import of a project module in ``name``,
    ``from package import submodule`` counted as an import of the submodule."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base not in MODULES:
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, None, node.lineno) if sub in MODULES else
                             (base, a.name, node.lineno))
    return found


def _room(name: str) -> int | None:
    if not name.startswith("ldpsim.simulator"):
        return None
    parts = name.split(".")[2:]
    room = parts[0] if len(parts) > 1 or (parts and parts[0] in ROOMS) else ""
    return ROOMS.index(room)


def test_every_runtime_module_lives_in_a_room():
    loose = [n for n in MODULES if n.startswith("ldpsim.simulator.")
             and n.split(".")[2] not in ROOMS and n not in ("ldpsim.simulator.cli",
                                                           "ldpsim.simulator.options",
                                                           "ldpsim.simulator.start",
                                                           "ldpsim.simulator.__main__")]
    assert not loose, f"modules outside the rooms {ROOMS[:-1]}: {loose}"


def test_a_room_imports_only_from_itself_and_the_rooms_below():
    upward = []
    for name in MODULES:
        mine = _room(name)
        if mine is None:
            continue
        for target, _, line in _imports(name):
            theirs = _room(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_the_science_imports_no_runtime():
    found = [f"{MODULES[n].relative_to(ROOT)}:{line} imports {t}" for n in MODULES
             if n.startswith("ldpsim.protocols") for t, _, line in _imports(n)
             if t.startswith("ldpsim.simulator")]
    assert not found, "\n".join(found)


def test_the_results_import_nothing_of_the_runtime_but_the_codec():
    """What runs leave is read and drawn without a session, a backend or a scenario."""
    found = [f"{MODULES[n].relative_to(ROOT)}:{line} imports {t}" for n in MODULES
             if n.startswith("ldpsim.simulator.results") for t, _, line in _imports(n)
             if t.startswith("ldpsim.simulator.") and t.split(".")[2] not in ("results",
                                                                            "codec")]
    assert not found, "\n".join(found)


def _circle() -> list[str] | None:
    """One circle of the import graph (top-level and function-body imports), or None."""
    graph = {n: sorted({t for t, _, _ in _imports(n)} - {n}) for n in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for t in graph[n]:
            if state.get(t) == 1:
                return [*stack[stack.index(t):], t]
            if t not in state and (found := visit(t)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in graph:
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_circle():
    circle = _circle()
    assert circle is None, " -> ".join(circle)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_reaches_for_another_modules_private_names():
    reached = []
    for name, path in MODULES.items():
        imports = _imports(name)
        reached += [f"{path.relative_to(ROOT)}:{line} imports {t}.{n}" for t, n, line in imports
                    if n and _private(n) and t != name]
        # module.attribute through an imported project module's local name
        local = {}
        for node in _nodes(path):
            if isinstance(node, ast.ImportFrom | ast.Import):
                for a in node.names:
                    for t, n, _ in imports:
                        if n is None and t.rpartition(".")[2] == a.name.rpartition(".")[2]:
                            local[a.asname or a.name] = t
        for node in _nodes(path):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in local and _private(node.attr)
                    and local[node.value.id] != name):
                reached.append(f"{path.relative_to(ROOT)}:{node.lineno} reads "
                               f"{local[node.value.id]}.{node.attr}")
    assert not reached, "\n".join(sorted(set(reached)))


def test_every_environment_variable_is_named_in_one_place():
    """A module that reads an environment variable of ldpsim's takes its name from
    ``ldpsim.environment`` (which documents each), never spells it itself."""
    from ldpsim import environment

    declared = {v.name for v in environment.VARIABLES}
    assert {environment.CODEC, environment.RNG, environment.NETWORK, environment.ORDERED,
            environment.TUNE_MALLOC, environment.DASK_ADVERTISE, environment.DATA,
            environment.MALLOC_TRIM_THRESHOLD} == declared
    spelled = []
    for name, path in MODULES.items():
        if name == "ldpsim.environment":
            continue
        for node in _nodes(path):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    node.value in declared or node.value.startswith("LDPSIM_")
                    and node.value.isupper() and " " not in node.value):
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert not spelled, "\n".join(spelled)
    documented = (ROOT / "docs" / "scenarios.md").read_text()
    for v in environment.VARIABLES:
        assert f"| `{v.name}` |" in documented, f"docs/scenarios.md: {v.name} not in the table"


#: the most lines a module of the package holds (issue 48), and the exceptions, with why
MAX_MODULE_LINES = 600
LONG_MODULES: dict[str, str] = {}
#: the most lines one function or method spans, its docstring included, and the exceptions
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS: dict[str, str] = {}


def _too_long() -> tuple[list[str], list[str]]:
    """The modules over ``MAX_MODULE_LINES`` and the functions over ``MAX_FUNCTION_LINES``
    that are not listed as exceptions."""
    modules, functions = [], []
    for name, path in MODULES.items():
        lines = path.read_text().count("\n")
        if lines > MAX_MODULE_LINES and name not in LONG_MODULES:
            modules.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in _nodes(path):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                span = node.end_lineno - node.lineno + 1
                where = f"{name}.{node.name}"
                if span > MAX_FUNCTION_LINES and where not in LONG_FUNCTIONS:
                    functions.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: "
                                     f"{span} lines")
    return modules, functions


def test_no_module_over_600_lines_and_no_function_over_80():
    """A module that outgrows 600 lines holds more than one thing, a function of more than 80
    lines does more than one step: split them, or list them above with the reason."""
    modules, functions = _too_long()
    assert not modules and not functions, "\n".join(modules + functions)


def test_the_length_rule_can_fail(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "MAX_MODULE_LINES", 10)
    monkeypatch.setattr(sys.modules[__name__], "MAX_FUNCTION_LINES", 5)
    modules, functions = _too_long()
    assert modules and functions


@pytest.mark.parametrize("rule", [test_no_import_circle,
                                  test_a_room_imports_only_from_itself_and_the_rooms_below])
def test_the_rules_can_fail(rule, monkeypatch):
    """Each rule on a made-up module that breaks it (a codec module importing the sweep, which
    imports it back): the rule must fail."""
    bad = "ldpsim.simulator.codec.bad"
    path = ROOT / "simulator" / "codec" / "wire.py"
    monkeypatch.setitem(MODULES, bad, path)
    real = _imports

    def imports(name):
        if name == bad:
            return [("ldpsim.simulator.sweep.runner", None, 1)]
        if name == "ldpsim.simulator.sweep.runner":
            return [*real(name), (bad, None, 1)]
        return real(name)

    monkeypatch.setitem(globals(), "_imports", imports)
    with pytest.raises(AssertionError):
        rule()


#: the libraries a function body may import, and why: optional extras (pyproject.toml) and
#: libraries that a measured start-up leaves out, each imported where it is used
LAZY_LIBRARIES: dict[str, str] = {
    "matplotlib": "the plot extra; a run with no figure to draw imports none "
                  "(tests/test_cli.py::test_run_imports_only_what_it_uses)",
    "pandas": "the pandas extra (Results.to_pandas); test_run_imports_only_what_it_uses",
    "tqdm": "the progress extra",
    "dask": "the dask extra (tests/simulator/sweep/test_dask.py::"
            "test_importing_the_cli_does_not_import_dask)",
    "distributed": "the dask extra, as dask",
    "multi_freq_ldpy": "the bench extra: ldpsim bench's peers",
    "pure_ldp": "the bench extra: ldpsim bench's peers",
    "scipy": "its stats, special and optimize take 0.1-0.3 s to import; a protocol imports "
             "them where it uses them (test_run_imports_only_what_it_uses, "
             "test_version_and_help_import_no_family, "
             "test_the_fork_servers_preload_imports_no_heavy_library)",
    "zmq.auth": "ZeroMQ's authenticator thread, about 30 ms, for a CurveZMQ hosts run only "
                "(test_the_fork_servers_preload_imports_no_heavy_library)",
    "importlib.metadata": "about 13 ms, for the plugin families' entry points when the "
                          "registry is built (test_version_and_help_import_no_family)",
}

_CLI = "tests/test_cli.py::"
#: the project modules a function body may import: the module importing them -> (the test that
#: measures the start-up the deferral saves, the modules or packages it defers)
LAZY: dict[str, tuple[str, tuple[str, ...]]] = {
    # the rooms of each command, imported when the command runs
    "ldpsim.simulator.cli": (
        _CLI + "test_the_command_line_imports_a_commands_rooms_only_when_it_runs",
        ("ldpsim.simulator.scenario", "ldpsim.simulator.results", "ldpsim.simulator.sweep",
         "ldpsim.simulator.audit", "ldpsim.simulator.bench")),
    # the fork server begins, then the command line imports numpy
    "ldpsim.simulator.start": (
        _CLI + "test_start_reads_the_command_lines_own_options_before_numpy",
        ("ldpsim.simulator.backends.launch", "ldpsim.simulator.cli")),
    # the package of launch: the standard library only, each backend's modules when used
    "ldpsim.simulator.backends": (
        _CLI + "test_start_begins_the_fork_server_before_numpy",
        ("ldpsim.simulator.backends.inproc", "ldpsim.simulator.backends.transport",
         "ldpsim.simulator.backends.curve", "ldpsim.simulator.backends.on_dask",
         "ldpsim.simulator.session")),
    # ldpsim list reads the durations from the bench package: none of the bench's parts
    "ldpsim.simulator.bench": (
        _CLI + "test_list_imports_no_part_of_the_bench_and_no_sweep",
        tuple(f"ldpsim.simulator.bench.{m}" for m in (
            "headline", "calibrate", "deployment", "audit", "hardening", "keys", "kernels",
            "peers", "cluster"))),
    "ldpsim.simulator.bench.durations": (
        _CLI + "test_list_imports_no_part_of_the_bench_and_no_sweep",
        ("ldpsim.simulator.sweep",)),
    # the leakage attacks (the audit room, scipy.special) only for a run that asks for them
    "ldpsim.simulator.sweep.execute": (
        _CLI + "test_run_imports_only_what_it_uses", ("ldpsim.simulator.audit.leakage",)),
    # a sweep's figures' modules when it draws figures, the Dask executor's on Dask only
    "ldpsim.simulator.sweep.runner": (
        "tests/test_startup.py::test_a_run_imports_its_own_family_and_no_figure_or_dask_module",
        ("ldpsim.simulator.results.plots", "ldpsim.simulator.sweep.engine_dask")),
    # the audit room (scipy.special) only for ldpsim.audit
    "ldpsim.api": ("tests/test_api.py::test_the_api_imports_no_audit_and_no_heavy_library",
                   ("ldpsim.simulator.audit",)),
}


def _within(name: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _function_imports(name: str) -> list[tuple[str, int]]:
    """(module, line) of every import inside a function body of ``name``, a project module's
    ``from package import submodule`` counted as an import of the submodule."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for func in _nodes(path):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                found += [(a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found += [(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base,
                           node.lineno) for a in node.names]
    return sorted(set(found), key=lambda f: (f[1], f[0]))  # a nested function's, once


def _unmeasured_lazy_imports() -> list[str]:
    """The imports inside function bodies that neither ``LAZY_LIBRARIES`` nor ``LAZY``
    allows."""
    found = []
    for name, path in MODULES.items():
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        deferred = LAZY.get(name, ("", ()))[1]
        for target, line in _function_imports(name):
            if _within(target, ("ldpsim",)):
                if not _within(target, deferred):
                    found.append(f"{where}:{line} imports {target} inside a function, a "
                                 "deferral no test measures (LAZY)")
            elif not _within(target, list(LAZY_LIBRARIES)):
                found.append(f"{where}:{line} imports {target} inside a function: not an "
                             "optional or heavy library (LAZY_LIBRARIES)")
    return found


def test_an_import_sits_in_a_function_only_to_defer_a_measured_cost():
    found = _unmeasured_lazy_imports()
    assert not found, "\n".join(found)


def test_each_lazy_import_names_a_test_that_measures_it_and_is_used():
    for importer, (test, deferred) in LAZY.items():
        file, _, function = test.partition("::")
        assert f"def {function}(" in (ROOT / file).read_text(), f"{importer}: no test {test}"
        targets = [t for t, _ in _function_imports(importer)]
        unused = [d for d in deferred if not any(_within(t, (d,)) for t in targets)]
        assert not unused, f"{importer} imports none of {unused} inside a function: drop them"


def test_the_lazy_import_rule_can_fail(monkeypatch, tmp_path):
    """A made-up module importing, inside functions, a standard-library module and a project
    module that no test measures; and the tables without the command line's entry and scipy:
    the rule names each."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import json\n\n\ndef g():\n"
                   "    from ldpsim.simulator.sweep import runner\n    import scipy.stats\n")
    monkeypatch.setitem(MODULES, "ldpsim.simulator.codec.bad", bad)
    found = [f for f in _unmeasured_lazy_imports() if "bad.py" in f]
    assert len(found) == 2 and "bad.py:2 imports json" in found[0]
    assert "imports ldpsim.simulator.sweep.runner" in found[1]
    monkeypatch.delitem(MODULES, "ldpsim.simulator.codec.bad")
    monkeypatch.delitem(LAZY, "ldpsim.simulator.cli")
    monkeypatch.delitem(LAZY_LIBRARIES, "scipy")
    found = _unmeasured_lazy_imports()
    assert any(f.startswith("simulator/cli.py:") for f in found)
    assert any(" imports scipy" in f for f in found)
