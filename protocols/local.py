"""The round model in one function: ``run_locally`` runs a protocol in this process, no runtime.

A run is a loop: the curator *plans* a round (which agents, one query each, a broadcast), every
asked agent *responds* through its local randomizer, the curator *absorbs* the reports; after
the last round it *finishes* with the public output, which is scored against the ground truth
that only the orchestrator sees. ``simulator`` runs exactly this loop with the agents in pool
processes and every message as msgpack bytes over ZeroMQ; with the same seed it gives the same
output (``tests/protocols/test_base_contract.py`` checks it for every registered protocol).

Use it to try a protocol in a notebook or a test::

    from ldpsim.protocols import run_locally
    run = run_locally("ldp_kwiksort_rr", {"epsilon": 2.0},
                      {"kind": "mallows", "n": 2000, "m": 8, "theta": 0.5}, seed=1)
    run.output["ranking"], run.metrics
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ldpsim.protocols.base import Block, Bound, ParamError, Protocol, RoundPlan
from ldpsim.protocols.data import Dataset
from ldpsim.protocols.keys import Secrets, run_tag, tag_of
from ldpsim.protocols.queries import full as full_queries
from ldpsim.protocols.registry import build_data, data_kinds, get_protocol
from ldpsim.protocols.rng import stream_key


@dataclass(frozen=True)
class LocalRound:
    """One round of a local run: the curator's plan, the asked agents' block, their reports."""

    plan: RoundPlan
    block: Block
    reports: np.ndarray


@dataclass
class LocalRun:
    """What ``run_locally`` returns: the public output, its utility metrics, and every round
    (the view of a curator with no colluders, plus the agents' blocks)."""

    output: dict[str, Any]
    metrics: dict[str, float]
    rounds: list[LocalRound] = field(default_factory=list)


def run_locally(protocol: Protocol | str, params: dict[str, Any],
                data: Dataset | dict[str, Any], seed: int = 0,
                secrets: Secrets | None = None) -> LocalRun:
    """Run ``protocol`` with ``params`` on ``data`` (a Dataset, or a ``[data]`` table such as
    ``{"kind": "mallows", "n": 1000, "m": 6, "theta": 0.5}``) with every party keyed by ``seed``
    (and ``secrets``, default those of the seed alone) as the runtime keys them: the agents'
    data keys from the run's data tag, their coin keys from its run tag (``protocols.keys``);
    raises ValueError if a report breaks its round's schema (a protocol bug: honest reports
    always fit)."""
    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    secrets = secrets or Secrets.of_seed(seed)
    spec = data if isinstance(data, dict) else {"kind": data.kind, "n": data.n}
    if not isinstance(data, Dataset):
        data = build_data(data, secrets.data_keys(seed))
    tag = run_tag(seed, proto.name, params, spec)
    coins = secrets.agents.for_range(0, data.n, coin_tag=tag)["coins"]
    rounds, output = local_rounds(proto.bind(params, data.public), data, seed, coins=coins,
                                  curator_coins=secrets.curator_coins(tag))
    return LocalRun(output, proto.evaluate(output, data.truth()), rounds)


def _call(phase: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def local_rounds(bound: Bound, data: Dataset, seed: int = 0,
                 phase: Callable[..., Any] = _call, coins: np.ndarray | None = None,
                 curator_coins: int | None = None, rows: np.ndarray | None = None
                 ) -> tuple[list[LocalRound], dict[str, Any]]:
    """The round loop of ``run_locally`` on a built data set: every round and the output.

    ``coins``: every agent's coin key (``AgentKeys.coins``), default those of a run tagged by
    the seed and the protocol alone; ``curator_coins`` the curator's private coin key
    (``Secrets.curator_coins``), default that run's; ``rows`` every agent's private row,
    default the data set's (the privacy audit changes one). ``phase(name, fn, *args)`` makes each
    protocol step, ``fn(*args)``, with ``name`` "plan" (the curator and each plan), "respond",
    "absorb" or "finish"; wrapping it measures the steps alone (``simulator.bench.kernels``
    times them, ``tests/protocols/test_scaling.py`` counts their lines).
    """
    proto = bound.protocol
    if coins is None or curator_coins is None:
        tag = tag_of("run", seed, proto.name)
        own = Secrets.of_seed(seed)
        coins = own.agents.for_range(0, data.n, coin_tag=tag)["coins"] if coins is None else coins
        curator_coins = own.curator_coins(tag) if curator_coins is None else curator_coins
    curator = phase("plan", bound.curator, np.arange(data.n, dtype=np.int64),
                    stream_key(seed, "curator"), curator_coins)
    rows = data.rows(0, data.n) if rows is None else rows
    rounds: list[LocalRound] = []
    rnd = 0
    while (plan := phase("plan", _plan, curator, rnd)) is not None:
        agents = np.asarray(plan.agents, dtype=np.int64)
        queries = None if plan.queries is None else np.asarray(plan.queries)
        block = bound.block(rnd, rows[agents], agents, coins[agents], queries, plan.broadcast)
        reports = _checked(plan, phase("respond", proto.respond, block))
        phase("absorb", curator.absorb, rnd, agents, reports)
        rounds.append(LocalRound(plan, block, reports))
        rnd += 1
    return rounds, phase("finish", curator.finish)


def _plan(curator: Any, rnd: int) -> RoundPlan | None:
    """The curator's plan of round ``rnd``, its queries drawn whole: queries drawn on demand
    (``protocols.queries``) are the plan's work, wherever the runtime does it."""
    plan = curator.plan(rnd)
    if plan is not None:
        full_queries(plan.queries)
    return plan


def _checked(plan: RoundPlan, reports: Any) -> np.ndarray:
    """The reports as the curator receives them (the schema's dtype), or ValueError."""
    schema = plan.schema
    dtype = np.int64 if schema.dtype == "int" else np.float64
    out = np.asarray(reports)
    if out.shape != (len(plan.agents), schema.length):
        raise ValueError(f"round {plan.round}: reports of shape {out.shape}, the schema wants "
                         f"({len(plan.agents)}, {schema.length})")
    if dtype is np.int64 and out.dtype.kind not in "iub":
        raise ValueError(f"round {plan.round}: integer reports expected, got {out.dtype}")
    out = out.astype(dtype)
    ok = schema.inside(out)
    if plan.report_high is not None:
        high = np.asarray(plan.report_high)
        ok &= (out <= (high if high.ndim == 2 else high[:, None])).all(axis=1)
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"round {plan.round}: agent {int(plan.agents[bad])}'s report is outside "
                         f"the schema: {schema.reason(out[bad].tolist())}")
    return out


def example_data(protocol: Protocol | str) -> dict[str, Any] | None:
    """The first example ``[data]`` table (``DataKind.examples``) of the protocol's data type
    that it accepts with default parameters, or None: what tests and docs run it on."""
    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    for name, kind in sorted(data_kinds().items()):
        if kind.data_type != proto.data_type:
            continue
        for args in kind.examples:
            try:
                proto.bind({}, kind.build(dict(args), 0).public)
            except ParamError:
                continue
            return {"kind": name, **args}
    return None
