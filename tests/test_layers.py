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
in a function body to dodge one; those that remain defer a cost: an optional library, a command's
own modules); and no module reaches for another module's private name (``_name``).
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
            environment.TUNE_MALLOC, environment.DASK_ADVERTISE,
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
