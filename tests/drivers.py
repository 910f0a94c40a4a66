"""One in-process driver of a protocol's rounds, shared by the tests (``from tests.drivers import
drive``).

``drive`` runs a protocol the way the runtime does, in one process: resolve the parameters, let
the curator plan a round, let the asked agents respond, validate the reports against the round's
schema, absorb them; repeat until the curator plans no more rounds, then finish. The curator is
keyed by the *curator* stream key of the seed (as the runtime keys it) and the agents by the
*agents* stream key of the seed, a stand-in for their coin keys that does not depend on the
parameters (the runtime draws each run's coins from its run tag: ``run_locally`` does), unless a
test passes its own keys.

``ldpsim.protocols.run_locally`` runs the same loop for a whole run (it builds the data set and
scores the output); use it when a test needs no more. This driver keeps what tests inspect: the
curator itself, every round's plan and the reports as ``respond`` returned them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Curator, Protocol, RoundPlan
from ldpsim.protocols.data import Dataset

#: the registration key of the tests' hand-driven sessions (the local backends draw one per run)
AUTH = b"ldpsim tests: registration key.."


def parties(config: dict[str, Any], n: int | None = None, secrets: Any = None) -> Any:
    """What the orchestrator hands out for ``config`` (``seeding.local_parties``) with the
    tests' fixed registration key ``AUTH``: the same every call, so a test may build the
    curator's session and each pool's from separate calls."""
    from ldpsim.simulator.session.seeding import agents_of, local_parties

    return local_parties(config, agents_of(config) if n is None else n, secrets, AUTH)


@dataclass
class Drive:
    """A driven run: resolved parameters, the curator after ``finish``, every round's plan and
    reports (as ``respond`` returned them, before validation), and the public output."""

    resolved: dict[str, Any]
    curator: Curator
    plans: list[RoundPlan]
    reports: list[np.ndarray]
    output: dict[str, Any]


def curator(proto: Protocol, params: dict[str, Any], data: Dataset, seed: int, *,
            agents: np.ndarray | None = None, key: int | None = None,
            coins: int | None = None) -> tuple[dict[str, Any], Curator]:
    """The resolved parameters and a fresh curator of ``agents`` (default: every agent of
    ``data``) keyed by ``key`` (default: the curator stream key of ``seed``), its private coins
    (central noise) by ``coins`` (default: a stand-in keyed by ``seed``; the runtime draws
    them per run from the master, ``Secrets.curator_coins``)."""
    resolved = proto.resolve(params, data.public)
    agents = np.arange(data.n) if agents is None else agents
    key = rngm.stream_key(seed, "curator") if key is None else key
    coins = rngm.stream_key(seed, "curator-coins") if coins is None else coins
    return resolved, proto.make_curator(proto.bind(resolved, data.public, resolved=True), agents,
                                        key, coins)


def respond(proto: Protocol, resolved: dict[str, Any], data: Dataset, plan: RoundPlan, key: int,
            rnd: int = 0, rows: np.ndarray | None = None) -> np.ndarray:
    """The reports of the agents ``plan`` asks in round ``rnd``, from their rows of ``data``
    (or of ``rows``, every agent's row), with the plan's queries and broadcast."""
    rows = data.rows(0, data.n) if rows is None else rows
    bound = proto.bind(resolved, data.public, resolved=True)
    return proto.respond(bound.block(rnd, rows[plan.agents], plan.agents, key,
                                     queries=plan.queries, broadcast=plan.broadcast))


def drive(proto: Protocol, params: dict[str, Any], data: Dataset, seed: int, *,
          curator_key: int | None = None, agent_key: int | None = None) -> Drive:
    """Every round of one run of ``proto`` on ``data``: plan, respond, validate (every honest
    report must fit the round's schema), absorb; then finish. ``curator_key`` and ``agent_key``
    replace the stream keys of ``seed``."""
    resolved, cur = curator(proto, params, data, seed, key=curator_key)
    agent_key = rngm.stream_key(seed, "agents") if agent_key is None else agent_key
    rows = data.rows(0, data.n)
    plans, reports = [], []
    rnd = 0
    while (plan := cur.plan(rnd)) is not None:
        rep = respond(proto, resolved, data, plan, agent_key, rnd, rows)
        ok, arr = plan.schema.validate(rep.tolist())
        assert ok.all(), f"round {rnd}: {int((~ok).sum())} honest reports outside the schema"
        cur.absorb(rnd, plan.agents, arr)
        plans.append(plan)
        reports.append(rep)
        rnd += 1
    return Drive(resolved, cur, plans, reports, cur.finish())
