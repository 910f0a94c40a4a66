"""The interface between a protocol (pure science) and the runtime that drives it.

A protocol is a sequence of rounds. In each round the curator *plans* (which agents it asks, a
broadcast payload that is the same for everyone, and a per-agent query), each asked agent
*responds* through its local randomizer, and the curator *absorbs* the validated reports. After the
last round the curator *finishes* with the public output, which the orchestrator *evaluates*
against ground truth that the curator never sees.

Nothing here knows about processes, sockets or files. ``simulator`` moves the same objects over
msgpack/ZeroMQ, or directly in one process (the ``inproc`` backend).
"""


from __future__ import annotations

import contextlib
import importlib
import pickle
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.agentrange import whole
from ldpsim.protocols.params import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.queries import RowQueries
from ldpsim.protocols.reports import ReportSchema, RoundPlan
from ldpsim.protocols.rounds import PrivacyClaim, Round, Rounds
from ldpsim.protocols.words import AgentWords

#: the contract's names, with those its neighbours hold (``params``, ``reports``, ``rounds``)
__all__ = ["AuditSpec", "Block", "Bound", "Curator", "MAX_AGENTS", "ParamError", "ParamSpec",
           "PrivacyClaim", "Protocol", "ReportSchema", "Round", "RoundPlan", "Rounds"]


class Curator(ABC):
    """A protocol's curator state for one run: it plans rounds, absorbs reports, finishes.

    Built only by ``Protocol.make_curator(bound, agents, key, coins)``, which calls the
    protocol's ``curator_class(bound)`` with ``(protocol, bound, agents, key)`` and sets
    ``coins``; a curator reads anything protocol-specific (its oracle, whether it adds central
    noise, ...) from ``self.protocol``.

    Two keys, two purposes: ``key`` keys the curator's public draws (which agents it asks,
    their queries, random pivots), the same in every run of a repetition so that the runs of a
    sweep compare on common draws; ``coins`` keys its private coins (a central mechanism's
    noise), fresh per run and secret (``keys.Secrets.curator_coins``).
    """

    #: the private coin key of this run (central noise); set by ``Protocol.make_curator``
    coins: int = 0
    #: ``absorb`` takes a round's reports in parts: the runtime may call it several times per
    #: round, each time with a disjoint, sorted subset of the agents that reported (in any
    #: order of the parts; a round in which nobody reported gets one call with none), and the
    #: curator's state must then equal what one call with all of them gives. True for an
    #: estimator that keeps integer sufficient statistics (counts, integer sums), or one that
    #: sums floats in the reports' order and says so (``absorbs_in_order``); never for one
    #: that keeps per-agent state. A run with more agents than ``[runtime] chunk`` then
    #: absorbs each stored batch as it comes and holds no round's reports; such a curator is
    #: built over its agents as given (an ``agentrange.AgentRange`` when they are one range),
    #: every other one over an array
    absorbs_in_parts: bool = False
    #: with ``absorbs_in_parts``: the parts must come in increasing agent order (each part's
    #: agents above every earlier part's), as a float sum carried on from part to part has the
    #: bits of one sum over the round only in the order the round's reports have whole
    #: (Harmony's ``bincount`` of ±c, the ethics average's ``sum(axis=0)``). The runtime then
    #: keeps the batches that come early until their turn and holds the pools ahead back
    absorbs_in_order: bool = False
    #: the curator plans round 0 only (then the runtime need not count each agent's bytes
    #: across rounds: one round's per-agent largest is its largest envelope)
    single_round: bool = False

    def __init__(self, protocol: Protocol, bound: Bound, agents: np.ndarray, key: int) -> None:
        self.protocol = protocol
        self.bound = bound
        self.params: dict[str, Any] = bound.params
        self.public: dict[str, Any] = bound.public
        self.agents = agents
        self.key = key
        self.stats: dict[str, Any] = {}

    @abstractmethod
    def plan(self, rnd: int) -> RoundPlan | None:
        """Round ``rnd``'s plan, or None when the protocol has no more rounds."""

    @abstractmethod
    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        """Take round ``rnd``'s validated reports (one row per agent of ``agents``)."""

    @abstractmethod
    def finish(self) -> dict[str, Any]:
        """The public output after the last round."""


@dataclass(frozen=True, eq=False)
class Bound:
    """A protocol with its parameters resolved once (``Protocol.bind``): what every randomizer
    call, likelihood and curator of a run shares. ``params`` are the resolved parameters,
    ``public`` the data set's public facts, ``rounds`` the run's bound mechanisms (the
    protocol's binding hook ``Protocol.rounds``, called once), from which its privacy claim,
    agent budget and per-round ε derive."""

    protocol: Protocol
    params: dict[str, Any]
    public: dict[str, Any]
    #: what the binds of equal parameters and public facts share (``Protocol.bind``)
    shared: Binding | None = field(default=None, repr=False)

    @cached_property
    def rounds(self) -> Rounds:
        """The run's mechanisms, round by round (``Protocol.rounds``, built on first use, once
        for all the binds that share them)."""
        shared = self.shared
        if shared is None:
            return self.protocol.rounds(self.params, self.public)
        if shared.rounds is None:
            shared.rounds = self.protocol.rounds(self.params, self.public)
        return shared.rounds

    def block(self, rnd: int, rows: np.ndarray, agents: np.ndarray | None = None,
              key: int = 0, queries: np.ndarray | list | None = None,
              broadcast: Any = None) -> Block:
        """A block of agents for round ``rnd`` (agents default to 0..len(rows)-1)."""
        return Block(rnd, rows, agents, key, self, queries, broadcast)

    def curator(self, agents: np.ndarray, key: int, coins: int = 0) -> Curator:
        """The run's curator (``Protocol.make_curator``)."""
        return self.protocol.make_curator(self, agents, key, coins)

    def claim(self) -> PrivacyClaim:
        """The protocol's privacy claim at these parameters (composed from ``rounds``)."""
        return self.rounds.claim()

    def agent_budget(self) -> float | None:
        """One agent's total ε over the run (``Rounds.agent_budget``)."""
        return self.rounds.agent_budget()

    def round_epsilon(self, rnd: int) -> float:
        """The ε one asked agent spends in round ``rnd`` (``Rounds.round_epsilon``)."""
        return self.rounds.round_epsilon(rnd)

    def audit_spec(self) -> AuditSpec | None:
        """The protocol's audit candidates at these parameters (``Protocol.audit_spec``)."""
        return self.protocol.audit_spec(self)

    def released_aggregate(self, output: dict[str, Any]) -> np.ndarray | None:
        """The additive aggregate ``output`` releases (``Protocol.released_aggregate``)."""
        return self.protocol.released_aggregate(self, output)

    def true_aggregate(self, rows: np.ndarray) -> np.ndarray | None:
        """What ``released_aggregate`` estimates, from raw rows (``Protocol.true_aggregate``)."""
        return self.protocol.true_aggregate(self, rows)


class Binding:
    """What every bind of one protocol to equal parameters and public facts gives
    (``Protocol.bind``): the resolved parameters (each ``Bound`` gets a copy) and the bound
    rounds, made by the first that needs them; both are pure functions of the parameters
    and the facts."""

    __slots__ = ("params", "rounds")

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.rounds: Rounds | None = None


#: the bindings met last (``Protocol.bind``): the runs of a sweep point bind the same
#: parameters to the same public facts, each in its pools and in its curator
_BINDINGS: dict[tuple[Any, ...], Binding] = {}
BINDINGS_KEPT = 256
_BINDINGS_LOCK = threading.Lock()


def _binding(protocol: Protocol, params: dict[str, Any], public: dict[str, Any],
             resolved: bool) -> Binding | None:
    """The binding of ``params`` to ``public`` that ``protocol`` made before, made now if
    none was; None when they do not pickle (they are then bound afresh). Equal pickles are
    equal values of equal types, so the binding is the one they would make."""
    try:
        key = (protocol, resolved, pickle.dumps((params, public), pickle.HIGHEST_PROTOCOL))
    except Exception:
        return None
    got = _BINDINGS.get(key)
    if got is None:
        got = Binding(dict(params) if resolved else protocol.resolve(params, public))
        with _BINDINGS_LOCK:  # binds may be made in threads (a Dask worker's)
            while len(_BINDINGS) >= BINDINGS_KEPT:
                _BINDINGS.pop(next(iter(_BINDINGS)))  # the oldest
            _BINDINGS[key] = got
    return got


@dataclass(frozen=True)
class Block:
    """One round's input for a block of agents: what ``respond``, ``log_likelihood`` and
    ``laplace_release`` take instead of eight positional arguments. ``bound`` is the run's
    ``Bound`` (its parameters, public facts and bound mechanisms: ``block.mechanism``).

    ``rows`` are the agents' private rows (one per agent; the audit passes candidate rows),
    ``agents`` their ids, ``key`` the agents' stream key, or one per agent (draws are keyed by
    agent id, so a
    block of one agent gives exactly that agent's row of a larger block), ``queries`` one query
    per agent or None, ``broadcast`` the round's payload for everyone.
    """

    rnd: int
    rows: np.ndarray
    agents: np.ndarray = None  # type: ignore[assignment]  # default 0..len(rows)-1
    key: int = 0
    bound: Bound = None  # type: ignore[assignment]  # the run's Bound (``Bound.block``)
    queries: np.ndarray | list | None = None
    broadcast: Any = None

    def __post_init__(self) -> None:
        if self.agents is None:
            object.__setattr__(self, "agents", np.arange(len(self.rows), dtype=np.int64))
        if isinstance(self.queries, RowQueries):  # a plan's queries, read whole
            object.__setattr__(self, "queries", self.queries.full())

    @property
    def params(self) -> dict[str, Any]:
        """The run's resolved parameters (``bound.params``)."""
        return {} if self.bound is None else self.bound.params

    @property
    def public(self) -> dict[str, Any]:
        """The data set's public facts (``bound.public``)."""
        return {} if self.bound is None else self.bound.public

    @property
    def round(self) -> Round:
        """This round's bound ``Round`` (``bound.rounds.answering(rnd)``)."""
        return self.bound.rounds.answering(self.rnd)

    @property
    def mechanism(self) -> Any:
        """This round's bound mechanism (``round.mechanism``)."""
        return self.round.mechanism

    def __len__(self) -> int:
        return len(self.rows)

    def uniforms(self, width: int, offset: int = 0) -> np.ndarray:
        """The agents' uniforms of this round, shape (agents, width), draw indices
        ``offset ..`` (``protocols.rng.uniform`` keyed by ``key``, agent and round)."""
        return rngm.uniform(self.key, self.agents, self.rnd, width, offset)

    def bits(self, width: int, offset: int = 0) -> np.ndarray:
        """The agents' raw 64-bit draws of this round (``protocols.rng.bits``)."""
        return rngm.bits(self.key, self.agents, self.rnd, width, offset)

    def words(self, column: int = 0) -> AgentWords:
        """The agents' word source of this round for Laplace noise (``protocols.words``):
        value column j of a release reads the region of ``column + j``, far from the draw
        indices ``uniforms`` and ``bits`` use. Made from the block's key and agents, so a
        sub-block (``take``) reads each of its agents' own words."""
        return AgentWords(self.key, self.agents, self.rnd, column)

    def take(self, index: Any) -> Block:
        """The sub-block of the agents selected by ``index`` (a slice or index array); a
        per-agent ``key`` array is selected with them."""
        q = None if self.queries is None else self.queries[index]
        key = self.key[index] if isinstance(self.key, np.ndarray) and self.key.ndim else \
            self.key
        return replace(self, rows=self.rows[index], agents=self.agents[index], queries=q,
                       key=key)

    def with_rows(self, rows: np.ndarray, agents: np.ndarray | None = None) -> Block:
        """The same round and queries for other rows (e.g. the audit's candidates)."""
        return replace(self, rows=rows, agents=self.agents if agents is None else agents)


@dataclass(frozen=True)
class AuditSpec:
    """What the privacy audit (``ldpsim audit``) needs to attack one target agent.

    ``values`` are candidate private rows of one agent (shape ``(V, *row_shape)``, the same
    row layout as ``Dataset.rows``) with a ``prior`` over them (sums to 1): the single-report
    inference attack guesses the target's row among them. ``pair`` indexes the two neighbouring
    rows the ε audit tries to tell apart; pick the pair the mechanism finds hardest to hide
    (e.g. opposite answers everywhere). ``secret`` optionally maps a row to the value an attack
    should recover (default: the row index in ``values``).
    """

    values: np.ndarray
    prior: np.ndarray
    pair: tuple[int, int] = (0, 1)
    notes: str = ""


class Protocol(ABC):
    """A protocol: parameters, privacy claim, curator, local randomizer, evaluation.

    A subclass states ``name``, ``family``, ``data_type``, ``params`` and its curator
    (``curator_cls``, or ``curator_class`` when it depends on the parameters), and implements
    the binding hook ``rounds`` (its mechanisms, once per run: the only place it states ε),
    ``respond`` and ``evaluate``; the audit hooks (``audit_spec``, ``log_likelihood``,
    ``laplace_release``, ...) are optional. Its privacy claim, agent budget and per-round ε
    are derived from ``rounds`` (``Bound.claim``, ``Bound.agent_budget``,
    ``Bound.round_epsilon``), never written by hand. ``protocols.local.run_locally``
    shows the round model these methods play in.
    """

    name: str = ""
    family: str = ""
    data_type: str = ""  # what agents hold, e.g. "ranking"
    summary: str = ""
    params: dict[str, ParamSpec] = {}
    #: the curator class ``make_curator`` builds (``curator_class`` may choose per run)
    curator_cls: type[Curator] | None = None
    #: every utility metric ``evaluate`` may return (some only with some parameters), each a
    #: ``protocols.metrics.Metric``: its name with a label, unit, range and which direction is
    #: better, which the summary, the plots and the docs read (empty: undeclared, and a
    #: scenario's ``[plot] y`` is not checked)
    metrics: tuple[str, ...] = ()
    #: the metrics the paper's figures show, which ``ldpsim run`` plots by default (empty: all)
    figure_metrics: tuple[str, ...] = ()
    #: modules the curator imports on first use (kept out of start-up, e.g. scipy's): the
    #: runtime imports them once the pools have their set-up, so no round's time holds them
    curator_imports: tuple[str, ...] = ()

    def import_curator_modules(self) -> None:
        """Import ``curator_imports`` now (set-up time, not round time); a module that is
        missing is left to the round that uses it to raise."""
        for name in self.curator_imports:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

    def resolve(self, params: dict[str, Any], public: dict[str, Any]) -> dict[str, Any]:
        """Fill defaults and derived values (e.g. queries="auto"); ParamError on bad values."""
        out = {}
        for name, spec in self.params.items():
            if name in params:
                out[name] = spec.check(params[name], f"[params] {name}")
            elif spec.required:
                raise ParamError(f"[params] {name}: required by protocol {self.name!r}; "
                                 f"allowed: {spec.describe()}")
            else:
                out[name] = spec.default
        return out

    def bind(self, params: dict[str, Any], public: dict[str, Any],
             resolved: bool = False) -> Bound:
        """Resolve ``params`` (unless already ``resolved``) and bind them with ``public``:
        resolved, and their rounds built, once for every bind of equal parameters and facts
        (``Binding``), each ``Bound`` with its own copy of the resolved parameters."""
        shared = _binding(self, params, public, resolved)
        if shared is None:
            return Bound(self, dict(params) if resolved else self.resolve(params, public), public)
        return Bound(self, dict(shared.params), public, shared)

    @abstractmethod
    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """The binding hook: the run's mechanisms, round by round (``Rounds``), built once per
        run from the resolved ``params`` and the ``public`` facts and held by its ``Bound``.

        This is the one place a protocol states its ε: the claim, the agents' budget, the ε
        each round costs an agent and what the audit tests are derived from it, and every
        other hook reads the bound mechanisms (``block.mechanism``,
        ``bound.rounds[rnd].mechanism``) instead of building them again.
        """

    def claim(self, params: dict[str, Any], public: dict[str, Any]) -> PrivacyClaim:
        """The privacy this protocol claims at these parameters (checked by the audit),
        composed from its bound mechanisms (``Rounds.claim``); not a hook."""
        return self.bind(params, public, resolved=True).claim()

    def report_numbers(self, bound: Bound) -> int | None:
        """Numbers in one agent's report in the run's longest round, for the memory a run's
        curator needs (its round's reports: agents x numbers, ``Round.values``), checked
        before any process starts; None when not stated (no check).

        The default reads ``report_length(params, public)`` where a protocol has one.
        """
        length = getattr(self, "report_length", None)
        return None if length is None else int(length(bound.params, bound.public))

    def curator_agent_bytes(self, bound: Bound) -> int:
        """Bytes the curator keeps per agent for the whole run besides one round's reports
        (a weight, a row of an answer matrix): the state its estimator needs per agent, for
        the memory check before a run starts. 0 (the default): its estimator keeps counts or
        sums only, so a curator whose ``absorb`` takes the reports in parts
        (``Curator.absorbs_in_parts``) holds a chunk of agents at a time, whatever their
        number."""
        return 0

    def query_refusal(self, bound: Bound, rnd: int, queries: np.ndarray | None,
                      broadcast: Any) -> str | None:
        """Why an agent refuses round ``rnd``'s ``queries`` (one row per asked agent, as they
        arrived) under its ``broadcast``, or None when they are questions the protocol asks in
        that round; the agent's pool asks before any coin is drawn.

        An agent's draws in a round are a pure function of its coin key, the run, the round and
        the draw index (``protocols.rng``), and ``respond`` decides how many a round's answer
        takes from the round's question. A protocol whose questions a curator chooses (pairs,
        the phase a round's broadcast names) states here which are the round's own, so that no
        curator makes the same draws answer other questions (e.g. one coin for two pairs: the
        XOR of two true answers, whatever ε). The default takes every query: the protocol's
        answers do not depend on them, or ``respond`` refuses what it cannot answer.
        """
        return None

    def curator_class(self, bound: Bound) -> type[Curator]:
        """The curator class of a run (default ``curator_cls``)."""
        if self.curator_cls is None:
            raise NotImplementedError(f"protocol {self.name!r} states no curator_cls")
        return self.curator_cls

    def make_curator(self, bound: Bound, agents: np.ndarray, key: int, coins: int = 0
                     ) -> Curator:
        """The one way a run's curator is built: ``curator_class(bound)(self, bound, agents,
        key)``, with its private coin key ``coins`` (``Curator``)."""
        cls = self.curator_class(bound)
        if not cls.absorbs_in_parts:  # reads its agents as an array
            agents = whole(agents)
        cur = cls(self, bound, agents, key)
        cur.coins = int(coins)
        return cur

    @abstractmethod
    def respond(self, block: Block) -> np.ndarray:
        """The local randomizer for a block of agents (one report row each). Pure function.

        Draws come from ``protocols.rng`` keyed by ``block.key`` and agent id, so calling this
        with one agent at a time gives exactly the same rows as one batched call.
        """

    @abstractmethod
    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        """Utility metrics of a public output against the ground truth."""

    def agent_budget(self, params: dict[str, Any], public: dict[str, Any]) -> float | None:
        """One agent's total ε over a run, which its pool's privacy odometer enforces; None
        when the claim is not local (the curator is trusted: nothing to enforce at the agent).
        Derived from the bound rounds (``Rounds.agent_budget``); not a hook."""
        return self.bind(params, public, resolved=True).agent_budget()

    def round_epsilon(self, rnd: int, params: dict[str, Any], public: dict[str, Any]) -> float:
        """The ε one asked agent spends answering round ``rnd`` (local model), derived from the
        bound rounds (``Rounds.round_epsilon``); not a hook.

        The agents' pools refuse a query that would take an agent past ``agent_budget`` and
        never answer one agent twice in a round, so a curator that deviates from the protocol
        (re-asking a pair in hundreds of rounds to average the noise away) learns no more than
        the claim allows. A round the protocol's ``rounds`` do not cover is refused (``inf``).
        """
        return self.bind(params, public, resolved=True).round_epsilon(rnd)

    def audit_spec(self, bound: Bound) -> AuditSpec | None:
        """Candidate rows, prior and neighbouring pair for the privacy audit of a run bound as
        ``bound`` (None: no audit). The audit tests the claim ``bound.claim()``."""
        return None

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """log P(report_i | row_i, query_i) of round ``block.rnd`` for each row of the block,
        or None if unknown.

        The exact likelihood of the local randomizer (``-inf`` where a report is impossible,
        as for truthful answers that differ). The audit's likelihood-ratio test (the
        Neyman-Pearson optimal test) and the Bayes attack use it; protocols whose randomizer has
        no closed-form density return None and the audit falls back to a learned linear test.
        """
        return None

    def laplace_release(self, block: Block
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """What a Laplace report of round ``block.rnd`` for the block's rows is made of, for
        the audit's floating-point attack (``simulator.audit.float_attack``): ``(values, scales,
        grids)`` of the reports' shape (NaN values where a column is not a Laplace release):
        ``report = Λ (rint(value / Λ) + Z)`` on the grid Λ = ``grids`` of
        ``mechanisms.Laplace`` (whose noise scale is ``scales``), or, with ``grids`` None,
        textbook float ``value + Lap(scale)`` (test doubles of the old form). None when the
        reports are not Laplace releases.
        """
        return None

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> np.ndarray | None:
        """The additive aggregate the public output releases (NaN where not released), or None.

        With ``true_aggregate`` this drives the differencing attack: the coalition subtracts
        the known agents' contribution from the released aggregate to isolate the target's.
        """
        return None

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray | None:
        """What ``released_aggregate`` estimates, computed from raw rows (a sum over rows)."""
        return None
