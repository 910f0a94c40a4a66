"""Privacy stated once, derived everywhere, checked for every registered protocol (built in or
from a plugin, without a list to edit).

A protocol states its ε in one place, its binding hook ``rounds`` (and may read it in
``resolve`` to choose other parameters, as LDP-KwikSort's K): the mechanisms it builds there say
what they guarantee (``privacy``), and the claim, the agents' budget, the ε their odometers charge
per round and what the audit tests are composed from them. Statically, no module of a protocol
reads the ``"epsilon"`` parameter, builds a ``PrivacyClaim`` or builds one of
``protocols.mechanisms``' mechanisms (in a protocol's or curator's method) anywhere else, and no
protocol overrides what is derived. At run time, what is derived agrees with the bound rounds.
The checks are tried on deliberately bad protocols, so they can fail.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import pkgutil
import sys
import textwrap
from types import ModuleType

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, get_data_kind
from ldpsim.protocols.base import Curator, Protocol, Round, Rounds
from ldpsim.protocols.local import example_data
from ldpsim.protocols.mechanisms import MechanismPrivacy

NAMES = sorted(PROTOCOLS)
#: the functions that may read the "epsilon" parameter: the binding hook, and ``resolve``
#: (which may derive other parameters from it; it states no privacy)
MAY_READ_EPSILON = ("rounds", "resolve")
#: the only method of a protocol or curator that may build a mechanism
BINDING_HOOK = "rounds"
#: what a protocol derives and must not state by hand
DERIVED = ("claim", "agent_budget", "round_epsilon")
#: the mechanisms of ``protocols.mechanisms``, which state their own privacy
MECHANISMS = ("GRR", "Laplace", "OLH", "Hadamard")


# ----------------------------------------------------------------------------- the checks


def _functions(tree: ast.AST):
    """(function node, names of the enclosing functions, enclosing class or None)."""
    def walk(node, funcs, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, funcs + (child.name,), cls
                yield from walk(child, funcs + (child.name,), cls)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, funcs, child.name)
            else:
                yield from walk(child, funcs, cls)
    yield from walk(tree, (), None)


def _reads_epsilon(node: ast.AST) -> bool:
    """``x["epsilon"]`` or ``x.get("epsilon", ...)``."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "epsilon"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and node.args:
        first = node.args[0]
        return isinstance(first, ast.Constant) and first.value == "epsilon"
    return False


def _builds_mechanism(node: ast.AST) -> bool:
    """A call of ``GRR(...)``, ``mech.Laplace(...)``, ... (a mechanism of the package)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in MECHANISMS


def _own_nodes(func: ast.AST):
    """The nodes of a function's body, not those of the functions or classes nested in it."""
    for child in ast.iter_child_nodes(func):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        yield child
        yield from _own_nodes(child)


def source_violations(source: str, where: str, classes: set[str]) -> list[str]:
    """Where a module's source states privacy by hand.

    ``classes`` are the names of the module's protocol and curator classes, whose methods may
    build a mechanism in the binding hook only.
    """
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "PrivacyClaim" or \
                isinstance(node, ast.alias) and node.name.split(".")[-1] == "PrivacyClaim":
            found.append(f"{where}:{node.lineno}: PrivacyClaim written by hand (the claim is "
                         "derived from the bound rounds)")
    for func, names, cls in _functions(tree):
        for node in _own_nodes(func):
            if _reads_epsilon(node) and not set(names) & set(MAY_READ_EPSILON):
                found.append(f"{where}:{node.lineno}: reads the epsilon parameter in "
                             f"{'.'.join(names)} (state ε in {BINDING_HOOK}() only)")
            if _builds_mechanism(node) and cls in classes and BINDING_HOOK not in names:
                found.append(f"{where}:{node.lineno}: {cls}.{'.'.join(names)} builds a mechanism "
                             f"(bind it once in {BINDING_HOOK}() and read it from the bound "
                             "rounds)")
    # module-level statements (outside any function) reading epsilon
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(stmt):
            if _reads_epsilon(node):
                found.append(f"{where}:{node.lineno}: reads the epsilon parameter at module "
                             "level")
    return found


def _modules_of(proto: Protocol) -> list[ModuleType]:
    """The modules defining a protocol's classes (its own and its ancestors', not the base)."""
    out = []
    for cls in type(proto).__mro__:
        if cls in (Protocol, object) or not issubclass(cls, Protocol):
            continue
        mod = sys.modules[cls.__module__]
        if mod not in out:
            out.append(mod)
    return out


def module_violations(mod: ModuleType) -> list[str]:
    """``source_violations`` of one module, its protocol and curator classes found by import."""
    classes = {name for name, obj in vars(mod).items() if inspect.isclass(obj)
               and obj.__module__ == mod.__name__ and issubclass(obj, Protocol | Curator)}
    return source_violations(inspect.getsource(mod), mod.__name__, classes)


def override_violations(proto: Protocol) -> list[str]:
    """What a protocol's classes state by hand that ``Protocol`` derives."""
    found = []
    for cls in type(proto).__mro__:
        if cls in (Protocol, object):
            continue
        for name in DERIVED:
            if name in vars(cls):
                found.append(f"{cls.__module__}.{cls.__qualname__}.{name} overrides what the "
                             "bound rounds derive")
    return found


def runtime_violations(proto: Protocol, params: dict, public: dict) -> list[str]:
    """Where the claim, budget and per-round ε disagree with the bound rounds."""
    found = []
    bound = proto.bind(params, public)
    rounds = bound.rounds
    if not isinstance(rounds, Rounds):
        return [f"{proto.name}: rounds() returned {type(rounds).__name__}, not Rounds"]
    claim = bound.claim()
    if proto.claim(bound.params, public) != claim or claim != rounds.claim():
        found.append(f"{proto.name}: the claim is not the bound rounds' composition")
    for i, r in enumerate(rounds.rounds):
        if not isinstance(r, Round) or not isinstance(r.privacy, MechanismPrivacy):
            found.append(f"{proto.name}: round {i}'s mechanism states no MechanismPrivacy")
            continue
        if r.epsilon is not None and r.uses * r.privacy.epsilon > r.epsilon * (1 + 1e-12):
            found.append(f"{proto.name}: round {i} spends {r.uses} x {r.privacy.epsilon} > "
                         f"its stated {r.epsilon}")
    if rounds.model == "none":
        if claim.epsilon != math.inf or proto.agent_budget(bound.params, public) is not None:
            found.append(f"{proto.name}: no privacy, yet an ε or a budget")
        return found
    if rounds.composed_epsilon > claim.epsilon * (1 + 1e-12):
        found.append(f"{proto.name}: the rounds compose to {rounds.composed_epsilon}, more "
                     f"than the claimed {claim.epsilon}")
    if claim.per_report_epsilon is not None and claim.per_report_epsilon != max(
            r.privacy.epsilon for r in rounds.rounds):
        found.append(f"{proto.name}: the per-report ε is not the mechanisms' largest")
    budget = proto.agent_budget(bound.params, public)
    if rounds.model == "local":
        if budget != claim.epsilon:
            found.append(f"{proto.name}: agent budget {budget} != claimed ε {claim.epsilon}")
        for rnd in range(len(rounds)):
            want = rounds[rnd].round_epsilon
            if proto.round_epsilon(rnd, bound.params, public) != want:
                found.append(f"{proto.name}: round {rnd}'s ε is not its bound mechanism's")
        if proto.round_epsilon(len(rounds), bound.params, public) != math.inf:
            found.append(f"{proto.name}: a round beyond the bound rounds is not refused")
    elif budget is not None or proto.round_epsilon(0, bound.params, public) != 0.0:
        found.append(f"{proto.name}: a trusted curator's agents are charged ε")
    return found


def _public(name: str) -> dict:
    data = example_data(name)
    args = {k: v for k, v in data.items() if k != "kind"}
    return get_data_kind(data["kind"]).build(args, 0).public


# ----------------------------------------------------------------------- every protocol


@pytest.mark.parametrize("name", NAMES)
def test_epsilon_is_stated_only_in_the_binding_hook(name):
    proto = PROTOCOLS[name]
    found = [v for mod in _modules_of(proto) for v in module_violations(mod)]
    found += override_violations(proto)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", NAMES)
def test_claim_budget_and_round_epsilon_are_the_bound_rounds(name):
    proto = PROTOCOLS[name]
    found = runtime_violations(proto, {}, _public(name))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", NAMES)
def test_every_planned_round_has_its_bound_mechanism(name):
    """A round the curator plans is a round the bound rounds cover (its agents' odometers
    charge it), unless the protocol has no privacy."""
    from ldpsim.protocols import run_locally

    run = run_locally(name, {}, example_data(name), seed=3)
    bound = run.rounds[0].block.bound
    if bound.rounds.model != "local":
        return
    for r in run.rounds:
        assert r.plan.round < len(bound.rounds), r.plan.round
        assert math.isfinite(bound.round_epsilon(r.plan.round))


# ------------------------------------------------------------- the checks can fail

BAD = textwrap.dedent('''
    from ldpsim.protocols import mechanisms as mech
    from ldpsim.protocols.base import PrivacyClaim, Round, Rounds
    from ldpsim.protocols.rank.protocols import LDPKwikSortRR


    class ClaimsByHand(LDPKwikSortRR):
        name = "claims_by_hand"

        def claim(self, params, public):
            return PrivacyClaim("local", params["epsilon"])


    class RebuildsItsMechanism(LDPKwikSortRR):
        name = "rebuilds_its_mechanism"

        def respond(self, block):
            k = block.params["queries"]
            rr = mech.GRR(block.params["epsilon"] / k)
            return rr.perturb(self._queried_answers(block.rows, block.queries),
                              block.uniforms(k))


    class ChargesByHand(LDPKwikSortRR):
        name = "charges_by_hand"

        def round_epsilon(self, rnd, params, public):
            return 0.0


    class SpendsMoreThanItClaims(LDPKwikSortRR):
        name = "spends_more"

        def rounds(self, params, public):
            k = params["queries"]
            return Rounds("local", (Round(mech.GRR(params["epsilon"]), uses=k,
                                          epsilon=params["epsilon"]),))
''')


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> ModuleType:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "bad_privacy_protocols.py").write_text(BAD)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("bad_privacy_protocols")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("bad_privacy_protocols", None)


def test_the_static_check_finds_epsilon_stated_by_hand(bad):
    found = module_violations(bad)
    text = "\n".join(found)
    assert "PrivacyClaim written by hand" in text
    assert "reads the epsilon parameter in claim" in text
    assert "reads the epsilon parameter in respond" in text
    assert "RebuildsItsMechanism.respond builds a mechanism" in text
    # the binding hook may read ε and build mechanisms
    assert not any("parameter in rounds " in v or ".rounds builds" in v for v in found)
    assert override_violations(bad.ClaimsByHand()) and override_violations(bad.ChargesByHand())
    assert not override_violations(bad.RebuildsItsMechanism())


def test_the_runtime_check_finds_a_claim_the_rounds_do_not_compose_to(bad):
    public = {"m": 5}
    assert runtime_violations(PROTOCOLS["ldp_kwiksort_rr"], {"queries": 3}, public) == []
    found = runtime_violations(bad.SpendsMoreThanItClaims(), {"queries": 3}, public)
    assert any("spends 3 x" in v for v in found), found
    found = runtime_violations(bad.ChargesByHand(), {"queries": 3}, public)
    assert any("round 0's ε is not its bound mechanism's" in v for v in found), found


def test_the_built_in_modules_are_the_ones_checked():
    """Every module of a built-in family that defines a protocol class is scanned (a module
    that no registered protocol reaches would escape the check)."""
    scanned = {mod.__name__ for name in NAMES for mod in _modules_of(PROTOCOLS[name])}
    for family in ("rank", "truth", "vote", "safari", "ethics"):
        package = importlib.import_module(f"ldpsim.protocols.{family}")
        for info in pkgutil.iter_modules(package.__path__):
            mod = importlib.import_module(f"{package.__name__}.{info.name}")
            defines = [obj for obj in vars(mod).values() if inspect.isclass(obj)
                       and obj.__module__ == mod.__name__ and issubclass(obj, Protocol)]
            if defines:
                assert mod.__name__ in scanned, mod.__name__


def test_rounds_compose_as_the_papers_state():
    """DPWeVote: ε1 + k·ε2 (Theorem 4.3 over k candidates); LDP-KwikSort: K answers at ε/K
    summing to ε exactly as stated; SAFARI with disjoint users: parallel composition."""
    vote = PROTOCOLS["dpwevote"].bind({"epsilon": 1.0, "split": 0.3, "budget": "candidate"},
                                      {"candidates": 3, "n": 10})
    eps1, eps2 = 0.3, (1.0 - 0.3) * 1.0
    assert vote.rounds[0].privacy.epsilon == eps1 and vote.rounds[3].privacy.epsilon == eps2
    assert vote.claim().epsilon == eps1 + 3 * eps2
    assert [vote.round_epsilon(r) for r in range(5)] == [eps1, eps2, eps2, eps2, math.inf]
    rank = PROTOCOLS["ldp_kwiksort_rr"].bind({"epsilon": 0.7, "queries": 3}, {"m": 6})
    assert rank.claim().epsilon == 0.7 and rank.claim().per_report_epsilon == 0.7 / 3
    assert rank.round_epsilon(0) == 0.7 and rank.rounds[0].mechanism.epsilon == 0.7 / 3
    public = _public("safari")
    users = PROTOCOLS["safari"].bind({"epsilon": 2.0, "split": "users"}, public)
    assert users.rounds.composition == "parallel" and users.claim().epsilon == 2.0
    assert [users.round_epsilon(r) for r in range(3)] == [2.0, 2.0, math.inf]
    assert np.isclose(users.rounds.composed_epsilon, 2.0)
