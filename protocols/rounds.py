"""A run's privacy: the mechanism of each round (``Round``), how the rounds compose for one
agent (``Rounds``) and the claim they make (``PrivacyClaim``), which the audit checks.

A protocol states each ε once, in its binding hook (``Protocol.rounds``); the claim, the agents'
budget and the ε each round costs an agent are derived here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the mechanisms import this module's neighbours; a run imports them anyway
    from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy


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
