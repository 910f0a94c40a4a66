"""Tests of what binds share (``Protocol.bind``: a ``Binding`` per protocol, parameters and
public facts), of the mechanisms' laws found once (``GRR.p``, ``GRR.q``) and of parameter
checks that describe the allowed values only for a value that fails."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import base, build_data, get_protocol
from ldpsim.protocols.mechanisms import grr
from ldpsim.protocols.params import ParamError, ParamSpec


def _public(n: int = 10, candidates: int = 2) -> dict:
    return build_data({"kind": "weighted_votes", "n": n, "candidates": candidates}, 3).public


def _fresh(proto, params: dict, public: dict) -> base.Bound:
    """A bind made without the shared bindings (as every bind was before them)."""
    return base.Bound(proto, proto.resolve(params, public), public)


def test_equal_binds_share_their_rounds_not_their_parameters() -> None:
    proto = get_protocol("dpwevote")
    params = {"epsilon": 1.0, "split": 0.5, "estimator": "faithful"}
    a, b = proto.bind(params, _public()), proto.bind(dict(params), _public())
    assert a.rounds is b.rounds
    assert a.params == b.params == _fresh(proto, params, _public()).params
    assert a.params is not b.params
    a.params["epsilon"] = 99.0  # one run's copy: the next bind does not see it
    assert proto.bind(params, _public()).params["epsilon"] == 1.0
    assert a.public is not b.public  # each its caller's facts


@pytest.mark.parametrize("other", [
    ({"epsilon": 2.0}, {}), ({"split": 0.25}, {}), ({"estimator": "joint"}, {}),
    ({}, {"n": 11}), ({}, {"candidates": 3}), ({"budget": "candidate"}, {})])
def test_binds_that_differ_anywhere_do_not_share(other) -> None:
    """A different parameter or public fact: its own binding, the one a fresh bind makes."""
    proto = get_protocol("dpwevote")
    params = {"epsilon": 1.0, "split": 0.5, "estimator": "faithful"}
    first = proto.bind(params, _public())
    p2 = {**params, **other[0]}
    pub = _public(**other[1])
    second = proto.bind(p2, pub)
    assert second.rounds is not first.rounds
    fresh = _fresh(proto, p2, pub)
    assert second.params == fresh.params
    assert second.claim().as_dict() == fresh.claim().as_dict()
    assert second.agent_budget() == fresh.agent_budget()
    assert [second.round_epsilon(r) for r in range(4)] == \
        [fresh.round_epsilon(r) for r in range(4)]


def test_an_integer_and_a_float_epsilon_bind_alike() -> None:
    proto = get_protocol("dpwevote")
    a = proto.bind({"epsilon": 1, "split": 0.5}, _public())
    b = proto.bind({"epsilon": 1.0, "split": 0.5}, _public())
    assert a.params == b.params and type(a.params["epsilon"]) is float
    assert a.claim().as_dict() == b.claim().as_dict()


def test_resolved_and_unresolved_binds_are_apart() -> None:
    proto = get_protocol("dpwevote")
    params = {"epsilon": 1.0, "split": 0.5}
    resolved = proto.bind(params, _public()).params
    assert proto.bind(params, _public(), resolved=True).params == params  # taken as they are
    assert proto.bind(resolved, _public(), resolved=True).params == resolved


def test_a_bad_parameter_fails_every_time() -> None:
    proto = get_protocol("dpwevote")
    for _ in range(2):
        with pytest.raises(ParamError, match="split"):
            proto.bind({"epsilon": 1.0, "split": 1.0}, _public())


def test_what_does_not_pickle_is_bound_afresh() -> None:
    proto = get_protocol("dpwevote")
    public = {**_public(), "unpicklable": lambda: None}
    a, b = proto.bind({"epsilon": 1.0}, public), proto.bind({"epsilon": 1.0}, public)
    assert a.shared is None and b.shared is None
    assert a.rounds is not b.rounds
    assert a.claim().as_dict() == b.claim().as_dict()


def test_the_bindings_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_BINDINGS", {})
    monkeypatch.setattr(base, "BINDINGS_KEPT", 4)
    proto = get_protocol("dpwevote")
    for i in range(10):
        proto.bind({"epsilon": 0.1 * (i + 1)}, _public())
    assert len(base._BINDINGS) == 4


# --- GRR's law, once per (ε, k) ------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.0, 1e-300, 0.05, 0.5, 1.0, 5.0, 50.0, 800.0, math.inf])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 2.0])
def test_grr_law_is_the_formula(eps: float, k) -> None:
    g = grr.GRR(eps, k)
    for _ in range(2):  # computed, then found
        assert (g.p, g.q) == (grr._p(eps, k), grr._q(eps, k))
        assert type(g.p) is float and type(g.q) is float


def test_grr_laws_of_different_budgets_do_not_mix() -> None:
    a, b = grr.GRR(0.5, 3), grr.GRR(0.5, 2)
    c = grr.GRR(0.25, 3)
    assert len({a.p, b.p, c.p}) == 3 and len({a.q, b.q, c.q}) == 3
    assert grr.GRR(0.5, 3).p == a.p


def test_grr_of_arrays_and_numpy_scalars_is_computed_each_time() -> None:
    eps = np.array([0.5, 1.0])
    g = grr.GRR(eps, 3)
    assert np.array_equal(g.p, grr._p(eps, 3))
    eps[0] = 2.0  # an array may change: nothing of it was kept
    assert np.array_equal(g.p, grr._p(np.array([2.0, 1.0]), 3))
    h = grr.GRR(np.float64(0.5), np.int64(3))
    assert h.p == grr._p(0.5, 3) and h.q == grr._q(0.5, 3)


# --- parameter checks ------------------------------------------------------------------------

def test_a_value_that_passes_is_not_described(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ParamSpec("e", "float", low=0.0, low_open=True, high=10.0)
    monkeypatch.setattr(ParamSpec, "describe", lambda self: pytest.fail("described"))
    assert spec.check(1, "[params] e") == 1.0


@pytest.mark.parametrize("spec,value,message", [
    (ParamSpec("e", "float", low=0.0, low_open=True, high=10.0), 0,
     "[params] e: got 0; allowed: a number > 0 and <= 10"),
    (ParamSpec("e", "float", low=0.0), float("nan"), "[params] e: got nan; allowed: a number >= 0"),
    (ParamSpec("e", "float"), 10**400, None),
    (ParamSpec("n", "int", low=1), 2.5, "[params] n: got 2.5; allowed: an integer >= 1"),
    (ParamSpec("n", "int_or_auto", low=1), "x", None),
    (ParamSpec("b", "bool"), 1, "[params] b: got 1; allowed: true/false"),
    (ParamSpec("s", "str"), 1, "[params] s: got 1; allowed: a string"),
    (ParamSpec("c", "str", choices=("a", "b")), "z",
     "[params] c: got 'z'; allowed: one of 'a', 'b'"),
    (ParamSpec("e", "float"), True, "[params] e: got True; allowed: a number"),
])
def test_a_value_that_fails_is_described_as_before(spec, value, message) -> None:
    with pytest.raises(ParamError) as err:
        spec.check(value, f"[params] {spec.name}")
    want = message or f"[params] {spec.name}: got {value!r}; allowed: {spec.describe()}"
    assert str(err.value) == want


def test_values_that_pass_are_coerced_as_before() -> None:
    assert ParamSpec("n", "int").check(3.0, "n") == 3 and \
        type(ParamSpec("n", "int").check(3.0, "n")) is int
    assert ParamSpec("n", "int_or_auto").check("auto", "n") == "auto"
    assert type(ParamSpec("e", "float").check(2, "e")) is float
    assert ParamSpec("c", "str", choices=("a",)).check("a", "c") == "a"


def test_grr_privacy_is_the_claim_of_its_epsilon() -> None:
    from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy

    for eps in (0.5, 1, 2.0):
        got = grr.GRR(eps, 3).privacy
        assert got == MechanismPrivacy(float(eps), None, "randomized_response")
        assert type(got.epsilon) is float
    assert grr.GRR(0.5, 2).privacy is grr.GRR(0.5, 3).privacy  # the same claim, kept once
    assert grr.GRR(np.array([0.5, 2.0]), 3).privacy.epsilon == 2.0
