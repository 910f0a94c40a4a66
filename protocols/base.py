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
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
    payload per asked agent (an array with one row per agent is fine). ``broadcast`` is sent once
    and is the same for every asked agent. ``schema`` validates the reports, together with the
    optional per-agent bounds ``report_high``.
    """

    round: int
    agents: np.ndarray
    queries: np.ndarray | list | None
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

    @property
    def trusts_curator(self) -> bool:
        return self.model != "local"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "epsilon": self.epsilon,
                "per_report_epsilon": self.per_report_epsilon, "sensitivity": self.sensitivity,
                "mechanism": self.mechanism, "trusts_curator": self.trusts_curator,
                "notes": self.notes}


@dataclass
class Curator:
    """Base class for a protocol's curator state. Subclasses implement plan/absorb/finish."""

    params: dict[str, Any]
    public: dict[str, Any]
    agents: np.ndarray
    key: int
    stats: dict[str, Any] = field(default_factory=dict)

    def plan(self, rnd: int) -> RoundPlan | None:  # pragma: no cover - interface
        raise NotImplementedError

    def absorb(self, rnd: int, agents: np.ndarray,
               reports: np.ndarray) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError


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


class Protocol:
    """A protocol: parameters, privacy claim, curator factory, local randomizer, evaluation."""

    name: str = ""
    family: str = ""
    data_type: str = ""  # what agents hold, e.g. "ranking"
    summary: str = ""
    params: dict[str, ParamSpec] = {}

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

    def claim(self, params: dict[str, Any], public: dict[str, Any]) -> PrivacyClaim:
        raise NotImplementedError

    def make_curator(self, params: dict[str, Any], public: dict[str, Any], agents: np.ndarray,
                     key: int) -> Curator:
        raise NotImplementedError

    def respond(self, rnd: int, queries: np.ndarray | None, broadcast: Any, data: np.ndarray,
                agents: np.ndarray, key: int, params: dict[str, Any],
                public: dict[str, Any]) -> np.ndarray:
        """The local randomizer for a block of agents (one row each). Pure function.

        ``key`` is the agents' stream key; draws come from ``protocols.rng`` keyed by agent id, so
        calling this with one agent at a time gives exactly the same rows as one batched call.
        """
        raise NotImplementedError

    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        raise NotImplementedError

    def agent_budget(self, params: dict[str, Any], public: dict[str, Any]) -> float | None:
        """One agent's total ε over a run, which its pool's privacy odometer enforces; None
        when the claim is not local (the curator is trusted: nothing to enforce at the agent).
        """
        claim = self.claim(params, public)
        return float(claim.epsilon) if claim.model == "local" else None

    def round_epsilon(self, rnd: int, params: dict[str, Any], public: dict[str, Any]) -> float:
        """The ε one asked agent spends answering round ``rnd`` (local model).

        The agents' pools refuse a query that would take an agent past ``agent_budget`` and
        never answer one agent twice in a round, so a curator that deviates from the protocol
        (re-asking a pair in hundreds of rounds to average the noise away) learns no more than
        the claim allows. Default: a one-round protocol, whose round 0 spends the whole ε; any
        other round is refused (``inf``). Multi-round protocols state their split.
        """
        budget = self.agent_budget(params, public)
        if budget is None:
            return 0.0
        return budget if rnd == 0 else math.inf

    def audit_spec(self, params: dict[str, Any], public: dict[str, Any]) -> AuditSpec | None:
        """Candidate rows, prior and neighbouring pair for the privacy audit (None: no audit)."""
        return None

    def log_likelihood(self, rnd: int, queries: np.ndarray | None, broadcast: Any,
                       reports: np.ndarray, rows: np.ndarray, params: dict[str, Any],
                       public: dict[str, Any]) -> np.ndarray | None:
        """log P(report_i | row_i, query_i) of round ``rnd`` for each i, or None if unknown.

        The exact likelihood of the local randomizer (``-inf`` where a report is impossible,
        as for truthful answers that differ). The audit's likelihood-ratio test (the
        Neyman-Pearson optimal test) and the Bayes attack use it; protocols whose randomizer has
        no closed-form density return None and the audit falls back to a learned linear test.
        """
        return None

    def laplace_release(self, rnd: int, queries: np.ndarray | None, broadcast: Any,
                        rows: np.ndarray, params: dict[str, Any], public: dict[str, Any]
                        ) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """What a Laplace report of round ``rnd`` is made of, for the audit's floating-point
        attack (``simulator.float_attack``): ``(values, scales, snapped)`` with ``values`` and
        ``scales`` of the reports' shape (NaN values where a column is not ``value + noise``)
        such that ``report = snap(values + Lap(scales))`` (``snapped``) or ``values + Lap``.
        None when the protocol's reports are not Laplace releases.
        """
        return None

    def released_aggregate(self, output: dict[str, Any], params: dict[str, Any],
                           public: dict[str, Any]) -> np.ndarray | None:
        """The additive aggregate the public output releases (NaN where not released), or None.

        With ``true_aggregate`` this drives the differencing attack: the coalition subtracts
        the known agents' contribution from the released aggregate to isolate the target's.
        """
        return None

    def true_aggregate(self, rows: np.ndarray, params: dict[str, Any],
                       public: dict[str, Any]) -> np.ndarray | None:
        """What ``released_aggregate`` estimates, computed from raw rows (a sum over rows)."""
        return None
