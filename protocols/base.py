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

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.queries import RowQueries
from ldpsim.protocols.words import AgentWords

if TYPE_CHECKING:  # the mechanisms import this module's neighbours; a run imports them anyway
    from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy


class ParamError(ValueError):
    """A protocol or data parameter has a value outside what is allowed."""


#: Most agents a scenario may have (the ``n`` of every data kind, colluder counts and ids): more
#: would make every process allocate per-agent arrays beyond any machine's memory.
MAX_AGENTS = 10**8


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its type, default and allowed values, used to validate scenarios."""

    name: str
    kind: str  # "float", "int", "str", "bool", "int_or_auto"
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    low_open: bool = False
    help: str = ""
    required: bool = False

    def describe(self) -> str:
        """Human description of the allowed values."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        parts = {"float": "a number", "int": "an integer", "str": "a string", "bool": "true/false",
                 "int_or_auto": '"auto" or an integer'}[self.kind]
        if self.low is not None:
            parts += f" {'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            parts += f" and <= {_number(self.high)}"
        return parts

    def check(self, value: Any, where: str) -> Any:
        """Return the value coerced to its kind, or raise ParamError naming ``where``."""
        bad = ParamError(f"{where}: got {value!r}; allowed: {self.describe()}")
        if self.kind == "int_or_auto" and value == "auto":
            return value
        if self.choices is not None:
            if value not in self.choices:
                raise bad
            return value
        if self.kind in ("float", "int", "int_or_auto"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise bad
            if self.kind in ("int", "int_or_auto"):
                if isinstance(value, float):
                    if not value.is_integer():  # also rejects inf and nan
                        raise bad
                    value = int(value)
            else:
                try:
                    value = float(value)
                except OverflowError:  # an integer beyond any float
                    raise bad from None
                if not math.isfinite(value):
                    raise bad
            if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
                raise bad
            if self.high is not None and value > self.high:
                raise bad
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise bad
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                raise bad
            return value
        raise AssertionError(self.kind)


def _number(x: float) -> str:
    """A bound as the error messages show it: whole numbers exactly (1073741824, not 1.07e+09)."""
    if isinstance(x, int) or (math.isfinite(x) and x.is_integer() and abs(x) < 1e18):
        return str(int(x))
    return f"{x:g}"


@dataclass(frozen=True)
class ReportSchema:
    """What a valid report payload looks like: a flat list of ``length`` numbers.

    ``dtype`` is "int" (whole numbers in [low, high]) or "float" (finite reals in [low, high]).
    Anything else is rejected by the runtime before the estimator sees it.
    """

    dtype: str
    length: int
    low: float = -math.inf
    high: float = math.inf

    def validate(self, payloads: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised validation. Returns (ok mask, array of the valid rows' values).

        The array has one row per payload (rows of invalid payloads are zero) and the
        schema's dtype (int64 or float64).
        """
        n = len(payloads)
        dt = np.int64 if self.dtype == "int" else np.float64
        ok = np.ones(n, dtype=bool)
        try:
            with np.errstate(invalid="ignore"):  # a peer's NaN cast to int: rejected below
                arr = np.array(payloads, dtype=dt)
            if arr.shape != (n, self.length) or (dt is np.int64 and not _all_ints(payloads)):
                raise ValueError
        except (ValueError, TypeError, OverflowError):
            arr = np.zeros((n, self.length), dtype=dt)
            for i, p in enumerate(payloads):
                try:
                    if not isinstance(p, list | tuple) or len(p) != self.length:
                        raise ValueError
                    if dt is np.int64 and not all(type(v) is int for v in p):
                        raise ValueError
                    if dt is np.float64 and not all(type(v) in (int, float) for v in p):
                        raise ValueError
                    arr[i] = p
                except (ValueError, TypeError, OverflowError):
                    ok[i] = False
        ok &= self.inside(arr)
        arr[~ok] = 0
        return ok, arr

    def all_inside(self, values: np.ndarray) -> bool:
        """Whether every value of ``values`` is finite and in [low, high] (one check for a
        whole batch; ``inside`` says which rows fail)."""
        if not values.size:
            return True
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            return False
        return bool(values.min() >= self.low and values.max() <= self.high)

    def inside(self, values: np.ndarray) -> np.ndarray:
        """Per row of numeric ``values``: every value finite and in [low, high]."""
        with np.errstate(invalid="ignore"):
            return np.isfinite(values).all(axis=1) & (values >= self.low).all(axis=1) & (
                values <= self.high).all(axis=1)

    def reason(self, payload: Any) -> str:
        """Explain why one payload is invalid (for the ERROR record)."""
        if not isinstance(payload, list | tuple):
            return (f"payload must be a list of {self.length} {self.dtype}s, "
                    f"got {type(payload).__name__}")
        if len(payload) != self.length:
            return f"payload must have {self.length} values, got {len(payload)}"
        shown = ", ".join(_short(v) for v in payload[:8])
        return (f"payload values must be {self.dtype}s in [{self.low:g}, {self.high:g}], "
                f"got [{shown}{', ...' if len(payload) > 8 else ''}]")


def _short(value: Any) -> str:
    """A short repr of one value of an untrusted payload (never formats a large object)."""
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 24 else text[:24] + "..."


def _all_ints(payloads: list[Any]) -> bool:
    # np.array(dtype=int64) silently truncates floats; reports must be exact integers.
    for p in payloads:
        for v in p:
            if type(v) is not int:
                return False
    return True


@dataclass
class RoundPlan:
    """What the curator sends in one round.

    ``agents`` are the asked agents' ids (sorted int64). ``queries`` is None or one msgpack-able
    payload per asked agent (an array with one row per agent is fine, or a
    ``protocols.queries.RowQueries``, drawn batch by batch as the queries go out).
    ``broadcast`` is sent once and is the same for every asked agent. ``schema`` validates the
    reports, together with the optional per-agent bounds ``report_high``.
    """

    round: int
    agents: np.ndarray
    queries: np.ndarray | list | RowQueries | None
    broadcast: Any
    schema: ReportSchema
    report_bits: float = 0.0  # information-theoretic size of one report, for the comm tables
    #: optional per-agent upper bounds, aligned with ``agents``: shape (N,) for every value of a
    #: report or (N, length) per value (e.g. the domain of the attribute this agent was asked
    #: about). The runtime rejects reports above them like any other out-of-domain report.
    report_high: np.ndarray | None = None


@dataclass(frozen=True)
class PrivacyClaim:
    """The privacy a protocol claims, in one place per mechanism (checked by the audit).

    ``model`` is "local" (each report is ε-LDP, the curator may collude), "central" (the curator is
    trusted with raw data; ε protects the published output only) or "none".
    """

    model: str
    epsilon: float
    per_report_epsilon: float | None = None
    sensitivity: float | None = None
    mechanism: str = ""
    notes: str = ""
    #: False when the claimed ε is known not to hold for every pair of neighbouring rows (the
    #: paper's proof has a gap; ``notes`` say which pairs): the contract tests then do not
    #: hold the likelihood ratio to ε, and the audit is expected to refute the claim
    proven: bool = True
    #: what ε protects: "row" (any two rows of one agent are neighbours), or a part of a row:
    #: "cell" (rows that differ in one answer; the cells of a row compose) or "record" (one of
    #: an agent's records). Bounds on telling two whole rows apart hold for "row" only.
    unit: str = "row"

    @property
    def trusts_curator(self) -> bool:
        return self.model != "local"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "epsilon": self.epsilon,
                "per_report_epsilon": self.per_report_epsilon, "sensitivity": self.sensitivity,
                "mechanism": self.mechanism, "trusts_curator": self.trusts_curator,
                "proven": self.proven, "unit": self.unit, "notes": self.notes}


MODELS = ("local", "central", "none")
COMPOSITIONS = ("sequential", "parallel")


@dataclass(frozen=True)
class Round:
    """The mechanism one asked agent's report of a round goes through, bound for one run.

    Parameters
    ----------
    mechanism
        The bound mechanism (``mechanisms.GRR``, ``mechanisms.Laplace``, ... or a family's own):
        anything with a ``privacy`` property (``mechanisms.MechanismPrivacy``). Hooks read it
        (``bound.rounds[rnd].mechanism``) instead of building it again.
    uses : int
        How many times one report applies the mechanism (e.g. K answers at ε/K each), composed
        sequentially.
    epsilon : float or None
        The round's ε when the mechanism's is a share of it (``Round.split``): the total is then
        the number the protocol states, not ``uses`` times the share (which may differ from it in
        the last bit). None: ``uses`` × the mechanism's ε.
    repeat : int
        How many consecutive rounds of the protocol are this round (e.g. one opinion round per
        candidate).
    """

    mechanism: Any
    uses: int = 1
    epsilon: float | None = None
    repeat: int = 1

    @classmethod
    def split(cls, epsilon: float, uses: int, mechanism: Callable[[float], Any],
              repeat: int = 1) -> Round:
        """A round spending ``epsilon`` over ``uses`` applications of ``mechanism(ε / uses)``
        (sequential composition: the shares sum to ``epsilon``)."""
        return cls(mechanism(epsilon / uses), uses, epsilon, repeat)

    @property
    def privacy(self) -> MechanismPrivacy:
        """The bound mechanism's privacy (one use)."""
        return self.mechanism.privacy

    @property
    def round_epsilon(self) -> float:
        """The ε one asked agent spends answering one of these rounds."""
        if self.epsilon is not None:
            return self.epsilon
        eps = self.privacy.epsilon
        return eps if self.uses == 1 else self.uses * eps


@dataclass(frozen=True)
class Rounds:
    """A run's bound mechanisms, round by round, and how they compose into its privacy.

    Built once per run by the protocol's binding hook (``Protocol.rounds``) and held by its
    ``Bound``. The privacy claim (``claim``), the agents' budget (``agent_budget``) and the ε each
    round costs an agent (``round_epsilon``, what the agents' odometers charge) are derived from
    it, so a protocol states each ε once, where it builds its mechanisms.

    Parameters
    ----------
    model : {"local", "central", "none"}
        Who is trusted (``PrivacyClaim.model``).
    rounds : tuple of Round
        The rounds in order (a ``Round`` with ``repeat`` r covers r consecutive rounds). In the
        central model they are the curator's releases, in the local model the agents' reports.
    composition : {"sequential", "parallel"}
        How the rounds compose for one agent: every agent answers every round (the ε add up,
        e.g. Theorem 2.6 of Yan, Liu & Liu, 2018), or each answers one round only (disjoint
        agents; the largest ε).
    epsilon : float or None
        The total when the protocol splits a stated budget over its rounds: the claim shows this
        number (the composed rounds may spend less, never more). None: the composition itself.
    notes, unit, proven
        As ``PrivacyClaim``'s.
    mechanism : str
        The claim's mechanism name; empty: the rounds' mechanisms' names.
    sensitivity : float or None
        The claim's sensitivity when it is not the mechanisms' (e.g. randomized response on a
        bit: Δ = 1); None: the largest of the mechanisms' (None if none has one).
    per_report : bool
        Whether the claim states a per-report ε (the largest ε of one use of a mechanism);
        False for a central release that is one report of the whole data.
    """

    model: str
    rounds: tuple[Round, ...] = ()
    composition: str = "sequential"
    epsilon: float | None = None
    notes: str = ""
    unit: str = "row"
    proven: bool = True
    mechanism: str = ""
    sensitivity: float | None = None
    per_report: bool = True

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"privacy model must be one of {MODELS}, got {self.model!r}")
        if self.composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}, "
                             f"got {self.composition!r}")
        if self.model != "none" and not self.rounds:
            raise ValueError(f"a {self.model} privacy needs the mechanisms of its rounds")
        object.__setattr__(self, "rounds", tuple(self.rounds))

    @classmethod
    def none(cls, notes: str = "") -> Rounds:
        """No privacy: the reports are the data."""
        return cls("none", notes=notes)

    def __len__(self) -> int:
        """The number of rounds of the protocol these cover (``repeat`` counted)."""
        return sum(r.repeat for r in self.rounds)

    def __getitem__(self, rnd: int) -> Round:
        """The ``Round`` of protocol round ``rnd`` (IndexError beyond the last)."""
        if rnd >= 0:
            at = 0
            for r in self.rounds:
                if rnd < at + r.repeat:
                    return r
                at += r.repeat
        raise IndexError(f"no round {rnd}: the protocol has {len(self)}")

    def answering(self, rnd: int) -> Round:
        """The ``Round`` whose mechanism an agent asked in round ``rnd`` answers with: that
        round's, or for a round beyond the protocol's last (a curator deviating from the
        protocol, which the agents' odometers refuse when they enforce the budget) the last
        round's: an agent's randomizer does not change with the round it is asked in."""
        return self[min(rnd, len(self) - 1)]

    @property
    def composed_epsilon(self) -> float:
        """The rounds' composition for one agent: Σ repeat·ε (sequential) or max ε
        (parallel); ∞ without privacy."""
        if self.model == "none":
            return math.inf
        parts = [r.round_epsilon if r.repeat == 1 else r.repeat * r.round_epsilon
                 for r in self.rounds]
        if self.composition == "parallel":
            return max(parts)
        total = parts[0]
        for x in parts[1:]:
            total = total + x
        return total

    @property
    def total_epsilon(self) -> float:
        """The claimed total: the stated budget (``epsilon``) or the composition."""
        return self.composed_epsilon if self.epsilon is None else self.epsilon

    def claim(self) -> PrivacyClaim:
        """The privacy claim these rounds make (what the record's ``privacy`` shows)."""
        if self.model == "none":
            return PrivacyClaim("none", math.inf, mechanism=self.mechanism or "none",
                                notes=self.notes, proven=self.proven, unit=self.unit)
        privs = [r.privacy for r in self.rounds]
        per = max(p.epsilon for p in privs) if self.per_report else None
        sens = self.sensitivity
        if sens is None:
            given = [p.sensitivity for p in privs if p.sensitivity is not None]
            sens = max(given) if given else None
        return PrivacyClaim(self.model, self.total_epsilon, per_report_epsilon=per,
                            sensitivity=sens, mechanism=self.mechanism or self.mechanism_names(),
                            notes=self.notes, proven=self.proven, unit=self.unit)

    def mechanism_names(self) -> str:
        """The mechanisms' names: one name, or each with its first round
        (``"olh (round 0), grr (round 1)"``)."""
        names, at = [], 0
        for r in self.rounds:
            names.append((r.privacy.name, at))
            at += r.repeat
        if len({n for n, _ in names}) == 1:
            return names[0][0]
        return ", ".join(f"{n} (round {i})" for n, i in names)

    def agent_budget(self) -> float | None:
        """One agent's total ε over a run (local model), which its pool's odometer enforces;
        None when the curator is trusted (nothing to enforce at the agent)."""
        return float(self.total_epsilon) if self.model == "local" else None

    def round_epsilon(self, rnd: int) -> float:
        """The ε one asked agent spends answering round ``rnd``: the round's (local model),
        ∞ for a round the protocol does not have (its pools refuse it), 0 when the curator is
        trusted."""
        if self.model != "local":
            return 0.0
        try:
            return self[rnd].round_epsilon
        except IndexError:
            return math.inf


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

    @cached_property
    def rounds(self) -> Rounds:
        """The run's mechanisms, round by round (``Protocol.rounds``, built on first use)."""
        return self.protocol.rounds(self.params, self.public)

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
        import contextlib
        import importlib

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
        """Resolve ``params`` (unless already ``resolved``) and bind them with ``public``."""
        return Bound(self, dict(params) if resolved else self.resolve(params, public), public)

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
        cur = self.curator_class(bound)(self, bound, agents, key)
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
