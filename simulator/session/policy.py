"""The agents' own privacy policy: what a pool's agents agree to, whatever the curator asks.

A pool checks every run's set-up before its agents answer anything:

* the configuration must carry the orchestrator's signature under this pool's policy key
  (``signing.sign``): the curator relays it and cannot alter a single byte (another protocol, a
  larger ε, other agents) without the pool refusing;
* a run whose id this pool has already answered queries of is refused: its agents' coins are
  spent (the same coins under other questions would tell more than ε);
* the pool's own limits (``AgentPolicy``): the protocols it runs, the largest ε per run, and a
  lifetime budget per data set.

Refusals are ERRORs with the code "refused" that the curator records and that end the run.
The ``Ledger`` keeps what each agent has spent on each data set for the pool's whole lifetime:
no new nonce, repeated run id or new run over the same data resets it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import registry
from ldpsim.simulator.session.piecewise import Piecewise, Span


@dataclass(frozen=True)
class AgentPolicy:
    """A pool's limits (``ldpsim agents --max-epsilon --protocols --lifetime-epsilon``, or the
    scenario's ``[agents]`` table on the local backends).

    Parameters
    ----------
    max_epsilon : float, optional
        The largest ε an agent spends in one run (the protocol's local claim). A protocol whose
        claim is not local (the agents send raw or centrally noised answers: a non-private
        baseline, central DP) spends ε = ∞ at the agents and is refused under any limit.
    protocols : tuple of str, optional
        The protocols the agents take part in (None: any); each must be a registered one.
    lifetime_epsilon : float, optional
        The most an agent spends on one data set over the pool's lifetime; rounds beyond it are
        refused like rounds beyond a run's budget.
    spent : float
        What every agent has spent on a data set before the pool's first run over it: the
        local backends' pools live for one run, so the orchestrator keeps their lifetime
        odometer across a sweep and hands it over here (0 on the hosts backend).
    """

    max_epsilon: float | None = None
    protocols: tuple[str, ...] | None = None
    lifetime_epsilon: float | None = None
    spent: float = 0.0

    def __post_init__(self) -> None:
        for name in ("max_epsilon", "lifetime_epsilon"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{name}: got {v!r}; allowed: a number > 0")
        if self.protocols is not None:
            known = registry.protocols()  # every family: imported on first use
            object.__setattr__(self, "protocols", tuple(self.protocols))
            unknown = [p for p in self.protocols if p not in known]
            if unknown:
                raise ValueError(f"protocols: unknown protocol {unknown[0]!r}; allowed: "
                                 f"{', '.join(sorted(known))}")

    @classmethod
    def of(cls, table: dict[str, Any] | None, spent: float = 0.0) -> AgentPolicy:
        """The policy a scenario's ``[agents]`` table states (None or {}: no limits), with
        what the agents have ``spent`` before (see ``spent``)."""
        t = dict(table or {})
        protos = t.get("protocols")
        return cls(t.get("max_epsilon"), None if protos is None else tuple(protos),
                   t.get("lifetime_epsilon"), spent)

    def as_table(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_epsilon is not None:
            out["max_epsilon"] = self.max_epsilon
        if self.protocols is not None:
            out["protocols"] = list(self.protocols)
        if self.lifetime_epsilon is not None:
            out["lifetime_epsilon"] = self.lifetime_epsilon
        return out

    def refusal(self, protocol: str, budget: float | None) -> str | None:
        """Why a run of ``protocol`` whose agents spend ``budget`` (``agent_budget``: None
        when the claim is not local) breaks this policy, or None."""
        if self.protocols is not None and protocol not in self.protocols:
            return (f"protocol {protocol!r} is not one this pool's agents take part in "
                    f"(allowed: {', '.join(self.protocols) or 'none'})")
        if self.max_epsilon is not None:
            if budget is None:
                return (f"protocol {protocol!r} makes no local privacy claim (its agents' "
                        f"answers reach the curator without local noise): beyond this pool's "
                        f"max_epsilon = {self.max_epsilon:g}")
            if budget > self.max_epsilon * (1 + 1e-12):
                return (f"epsilon = {budget:g} per agent is beyond this pool's max_epsilon = "
                        f"{self.max_epsilon:g}")
        return None


class Ledger:
    """What each agent has spent on each data set, for the pool's lifetime.

    Each data set's spending is a store of the agents seen (``piecewise.Piecewise``: runs of
    agents alike, as runs charge them); ``block(data_id, start, stop)`` is the writable window
    of agents ``[start, stop)`` (the store grown as needed, the agents added at ``start_at``).
    """

    def __init__(self, start_at: float = 0.0) -> None:
        self._spent: dict[int, Piecewise] = {}
        #: what every agent has spent on a data set before it is first seen (``AgentPolicy``)
        self.start_at = float(start_at)

    def block(self, data_id: int, start: int, stop: int) -> Span:
        have = self._spent.get(data_id)
        first = 0.0 + self.start_at  # an agent's spending before its first run, as an array's
        if have is None:
            have = self._spent[data_id] = Piecewise(start, stop, first)
        elif start < have.lo or stop > have.hi:
            have = self._spent[data_id] = have.grown(start, stop, first)
        return Span(have, start, stop)

    def most(self, data_id: int) -> float:
        """The most any agent has spent on the data set ``data_id`` (0 if none)."""
        have = self._spent.get(data_id)
        return float(have.max_in(have.lo, have.hi)) if have is not None and len(have) else 0.0

    def data_sets(self) -> Iterable[int]:
        return self._spent.keys()

    def stores(self) -> dict[int, Piecewise]:
        """Each data set's spending: the live stores, for writing them out (``poolstate``)."""
        return dict(self._spent)

    def arrays(self) -> dict[int, tuple[int, np.ndarray]]:
        """Each data set's (first agent, spending of the agents from it on), as arrays
        (8 bytes per agent: for tests and small pools; ``stores`` holds the runs)."""
        return {d: (s.lo, s.dense(s.lo, s.hi)) for d, s in self._spent.items()}

    def load(self, arrays: dict[int, tuple[int, np.ndarray]]) -> None:
        """Take the spending ``arrays`` holds (as ``arrays`` gives it) in place of this
        ledger's."""
        self._spent = {int(d): Piecewise.of_array(int(first), np.asarray(arr, dtype=np.float64))
                       for d, (first, arr) in arrays.items()}

    def load_stores(self, stores: dict[int, Piecewise]) -> None:
        """Take the spending ``stores`` holds (as ``stores`` gives it; read back from a
        pool's state file) in place of this ledger's (copies)."""
        self._spent = {int(d): s.copy() for d, s in stores.items()}
