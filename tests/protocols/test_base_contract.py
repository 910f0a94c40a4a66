"""The protocol contract, checked for every registered protocol (a new one, built in or from a
plugin, is checked without editing this file): the local reference loop and both backends give
the same output for 1-3 pools; one agent at a time gives the same reports as one batch; the
stated likelihood is a distribution that matches the randomizer and respects the claimed ε of
each round; the claim, the odometer's budget and the audit spec agree; reports fit their schema.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, get_data_kind, run_locally
from ldpsim.protocols.base import Curator, Protocol, ReportSchema, RoundPlan
from ldpsim.protocols.local import example_data
from ldpsim.protocols.metrics import Metric, describe
from ldpsim.protocols.rng import stream_key
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits

LIMITS = Limits(timeout_s=20)
NAMES = sorted(PROTOCOLS)
SEED = 5
Z = 5.0


def _data(name: str) -> dict:
    data = example_data(name)
    assert data is not None, f"{name}: no registered data kind example it accepts"
    return data


def _config(name: str, pools: int) -> dict:
    return {"protocol": name, "params": {}, "data": _data(name), "seed": SEED, "pools": pools,
            "agent_mode": "batched", "batch": 64,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def _same(a, b) -> bool:
    """Equal outputs (NaN equal to NaN: the outputs are compared as their JSON text)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True,
                                                                     default=repr)


_LOCAL: dict[str, object] = {}


def _local(name: str):
    if name not in _LOCAL:
        _LOCAL[name] = run_locally(name, {}, _data(name), seed=SEED)
    return _LOCAL[name]


@pytest.mark.parametrize("name", NAMES)
def test_local_loop_equals_inproc_for_any_pool_count(name):
    ref = _local(name)
    assert ref.rounds, "a protocol has at least one round"
    for pools in (1, 2, 3):
        res = run_inproc(_config(name, pools), LIMITS)
        assert _same(res["output"], ref.output), pools
        assert res["rejected"] == 0 and res["dropouts"] == 0


@pytest.mark.parametrize("pools", [3, pytest.param(1, marks=pytest.mark.slow),
                                   pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", NAMES)
def test_processes_equal_the_local_loop(name, pools):
    """Separate processes, real sockets and msgpack bytes: the same output (3 pools in the
    default suite, 1 and 2 in the slow one; inproc checks 1-3 above)."""
    res = run_processes(_config(name, pools), LIMITS)
    assert _same(res["output"], _local(name).output)
    assert res["rejected"] == 0 and res["dropouts"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_one_agent_at_a_time_equals_one_batch(name):
    proto = PROTOCOLS[name]
    for rnd in _local(name).rounds:
        block = rnd.block
        for i in range(min(len(block), 25)):
            one = np.asarray(proto.respond(block.take(slice(i, i + 1))))
            assert np.array_equal(one[0], rnd.reports[i].astype(one.dtype)), (rnd.plan.round, i)


@pytest.mark.parametrize("name", NAMES)
def test_a_block_with_one_key_per_agent_splits_like_one_with_one_key(name):
    """One key per agent (every agent's own coins; the audit's copies of one agent from many
    runs): each agent's report is its report alone under its own key, and ``take`` keeps each
    agent's key."""
    proto = PROTOCOLS[name]
    rnd = _local(name).rounds[0]
    block = rnd.block.take(slice(0, min(len(rnd.block), 12)))
    keys = np.array([stream_key(i, "per-agent") for i in range(len(block))], dtype=np.uint64)
    mixed = np.asarray(proto.respond(replace(block, key=keys)))
    for i in (0, len(block) // 2, len(block) - 1):
        alone = np.asarray(proto.respond(replace(block.take(slice(i, i + 1)),
                                                 key=keys[i:i + 1])))
        assert np.array_equal(mixed[i], alone[0]), i
        part = np.asarray(proto.respond(replace(block, key=keys).take(slice(i, i + 1))))
        assert np.array_equal(part[0], alone[0]), i


def _candidate_block(rnd, rows: np.ndarray, n: int):
    """Round ``rnd``'s block for ``n`` copies of each candidate row, asked agent 0's query."""
    q = rnd.block.queries
    queries = None if q is None else np.repeat(np.asarray(q)[:1], len(rows) * n, axis=0)
    return rnd.block.__class__(rnd.block.rnd, np.repeat(rows, n, axis=0),
                               np.arange(len(rows) * n, dtype=np.int64), stream_key(9, "cand"),
                               rnd.block.bound, queries, rnd.block.broadcast)


def _report_domain(schema: ReportSchema, high: np.ndarray | None) -> np.ndarray | None:
    """Every possible report of a small integer schema (None when too many)."""
    if schema.dtype != "int" or not math.isfinite(schema.low) or not math.isfinite(schema.high):
        return None
    hi = np.full(schema.length, schema.high) if high is None else np.broadcast_to(
        np.asarray(high), (schema.length,))
    sizes = (hi - schema.low + 1).astype(np.int64)
    if np.prod(sizes.astype(float)) > 20_000:
        return None
    grid = np.indices(tuple(sizes)).reshape(schema.length, -1).T
    return grid + int(schema.low)


@pytest.mark.parametrize("name", NAMES)
def test_likelihood_is_the_randomizers_law_within_the_claimed_epsilon(name):
    proto = PROTOCOLS[name]
    run = _local(name)
    bound = run.rounds[0].block.bound
    spec = proto.audit_spec(bound)
    claim = bound.claim()
    if spec is None:
        pytest.skip(f"{name} states no audit candidates")
    a, b = spec.pair
    checked = 0
    for rnd in run.rounds:
        n = 3000
        cand = _candidate_block(rnd, spec.values[[a, b]], n)
        reports = np.asarray(proto.respond(cand))
        ll_a = proto.log_likelihood(cand, np.concatenate([reports[:n], reports[:n]]))
        if ll_a is None:
            continue
        checked += 1
        ll_a = np.asarray(ll_a, dtype=float)
        own, cross = ll_a[:n], ll_a[n:]  # reports of row a under row a, and under row b
        assert np.isfinite(own).all(), "a report the randomizer made has probability 0"
        # exact normalisation over a small discrete report domain
        i = int(np.searchsorted(rnd.plan.agents, rnd.block.agents[0]))
        high = None if rnd.plan.report_high is None else np.asarray(rnd.plan.report_high)[i]
        domain = _report_domain(rnd.plan.schema, high)
        if domain is not None:
            one = _candidate_block(rnd, spec.values[[a]], len(domain))
            total = np.exp(np.asarray(proto.log_likelihood(one, domain), dtype=float)).sum()
            assert total == pytest.approx(1.0, abs=1e-9), rnd.plan.round
        if claim.model == "local" and math.isfinite(claim.epsilon):
            if claim.proven:
                eps = bound.round_epsilon(rnd.plan.round)
                ratio = own - cross
                assert np.abs(ratio).max() <= eps * (1 + 1e-9) + 1e-9, (rnd.plan.round, eps)
            # importance identity: E_a[p_b / p_a] = P_b(p_a > 0) when the stated law is the
            # sampled one (1 when row b's reports are all possible under row a)
            w = np.exp(cross - own)
            ll_b = proto.log_likelihood(cand, np.concatenate([reports[n:], reports[n:]]))
            inside = float(np.isfinite(np.asarray(ll_b, dtype=float)[:n]).mean())
            se = math.sqrt(w.var(ddof=1) / n + inside * (1 - inside) / n)
            assert abs(w.mean() - inside) <= Z * se + 1e-12
    if not checked:
        pytest.skip(f"{name} has no closed-form likelihood (the audit learns a linear test)")


@pytest.mark.parametrize("name", NAMES)
def test_claim_budget_and_audit_spec_agree(name):
    proto = PROTOCOLS[name]
    run = _local(name)
    params, public = run.rounds[0].block.params, run.rounds[0].block.public
    claim = proto.claim(params, public)
    assert claim.model in ("local", "central", "none")
    if claim.model == "none":
        assert claim.epsilon == math.inf and proto.agent_budget(params, public) is None
    if claim.model == "central":
        assert proto.agent_budget(params, public) is None
    if claim.model == "local":
        budget = proto.agent_budget(params, public)
        assert budget == pytest.approx(claim.epsilon)
        spent = sum(proto.round_epsilon(r.plan.round, params, public) for r in run.rounds)
        assert spent <= budget * (1 + 1e-9)
        if claim.per_report_epsilon is not None:
            assert claim.per_report_epsilon <= claim.epsilon * (1 + 1e-12)
    spec = proto.audit_spec(proto.bind(params, public, resolved=True))
    if spec is not None:
        data = _data(name)
        args = {k: v for k, v in data.items() if k != "kind"}
        rows = np.asarray(get_data_kind(data["kind"]).build(args, 0).rows(0, 2))
        assert np.asarray(spec.values).shape[1:] == rows.shape[1:]
        assert np.all(np.asarray(spec.prior) >= 0)
        assert float(np.sum(spec.prior)) == pytest.approx(1.0)
        assert len(spec.prior) == len(spec.values)
        a, b = spec.pair
        assert a != b and 0 <= a < len(spec.values) and 0 <= b < len(spec.values)


def test_every_registered_protocol_states_its_contract():
    for name, proto in PROTOCOLS.items():
        assert isinstance(proto, Protocol) and proto.name == name
        assert proto.family and proto.data_type and proto.summary, name
        run = _local(name)
        assert isinstance(run.rounds and run.rounds[0].plan, RoundPlan)


@pytest.mark.parametrize("name", NAMES)
def test_declared_metrics_are_what_evaluate_returns(name):
    """``metrics`` (when declared) names everything ``evaluate`` returns, and the metrics a
    scenario plots by default (``figure_metrics``) are among them."""
    proto = PROTOCOLS[name]
    got = set(_local(name).metrics)
    if proto.metrics:
        assert got <= set(proto.metrics), name
        for pname, spec in proto.params.items():  # a switch may add metrics (diagnostics)
            if spec.kind == "bool":
                flipped = run_locally(name, {pname: not spec.default}, _data(name), seed=SEED)
                assert set(flipped.metrics) <= set(proto.metrics), (name, pname)
        assert len(proto.metrics) == len(set(proto.metrics))
    assert set(proto.figure_metrics) <= (set(proto.metrics) or got), name


@pytest.mark.parametrize("name", NAMES)
def test_every_metric_says_what_it_means_and_stays_in_its_range(name):
    """Each declared metric is a ``Metric`` with a label and a direction (or none), and what
    ``evaluate`` returns lies in the range it declares (a range the plots clip bands to)."""
    proto = PROTOCOLS[name]
    for m in proto.metrics:
        assert isinstance(m, Metric) and m.label and m.label != str(m), (name, m)
        assert m.better in ("lower", "higher", None), (name, m)
    runs = [_local(name)] + [run_locally(name, {p: not s.default}, _data(name), seed=SEED)
                             for p, s in proto.params.items() if s.kind == "bool"]
    for run in runs:
        for key, value in run.metrics.items():
            m = describe(proto.metrics, key)
            if value is None or not math.isfinite(value):
                continue
            assert m.low is None or value >= m.low - 1e-12, (name, key, value, m.range_text)
            assert m.high is None or value <= m.high + 1e-12, (name, key, value, m.range_text)


def test_a_metric_name_means_one_thing_across_protocols():
    meaning: dict[str, tuple] = {}
    for name, proto in PROTOCOLS.items():
        for m in proto.metrics:
            said = (m.label, m.unit, m.low, m.high, m.better)
            assert meaning.setdefault(str(m), said) == said, (name, str(m))


def test_the_contract_is_enforced():
    """An incomplete protocol cannot be instantiated, and the reference loop rejects reports
    that break their schema (the contract tests above would see both)."""

    class Incomplete(Protocol):
        name = "incomplete"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()

    class _Cur(Curator):
        def plan(self, rnd):
            return None if rnd else RoundPlan(0, self.agents, None, None,
                                              ReportSchema("int", 1, 0, 1))

        def absorb(self, rnd, agents, reports):
            pass

        def finish(self):
            return {}

    class OutOfDomain(Protocol):
        name, family, data_type, summary = "ood", "test", "ranking", "reports 2 in {0, 1}"
        curator_cls = _Cur

        def rounds(self, params, public):
            raise AssertionError

        def respond(self, block):
            return np.full((len(block), 1), 2)

        def evaluate(self, output, truth):
            return {}

    with pytest.raises(ValueError, match="outside the schema"):
        run_locally(OutOfDomain(), {}, {"kind": "mallows", "n": 5, "m": 3})
