"""What a pool's agents have answered and spent, in memory and in the pool's state file.

``PoolMemory`` is the pool session's record across runs: the runs whose coins are spent (each
with the digest of the signed configuration it answered), the lifetime ledger
(``policy.Ledger``) and, for an independent pool, its state file (``poolstate.PoolState``),
which it keeps ahead of the agents' spending (``poolstate.Reservations``): written before any
report that spends leaves the pool, and once more, exact, when the run has ended (``settle``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.simulator.session.policy import Ledger
from ldpsim.simulator.session.poolstate import PoolState, Reservations


class PoolMemory:
    """A pool's answered runs and ledger, and its state file if it has one.

    Parameters
    ----------
    spent : float
        What every agent has spent on a data set before it is first seen
        (``policy.AgentPolicy.spent``: the ledger's start).
    state : PoolState, optional
        The pool's state file: the answered runs and the ledger start from it, and it is
        rewritten before any report that spends leaves the pool. None: the memory lasts as
        long as the object.
    """

    def __init__(self, spent: float = 0.0, state: PoolState | None = None) -> None:
        #: what each agent has spent on each data set, for this pool's lifetime
        self.ledger = Ledger(spent)
        #: the runs whose queries this pool's agents have answered (their coins are spent)
        self.answered_runs: set[int] = set()
        #: answered run id -> digest of the signed configuration answered (kept in ``state``)
        self.answered_configs: dict[int, bytes] = {}
        self.state = state
        if state is not None:
            self.answered_configs = dict(state.answered)
            self.answered_runs = set(state.answered)
            state.restore(self.ledger)
        self.unsettled = False  # the state file holds reservations of a run that has ended
        #: the current run's spend the state file holds in advance (``reserve``)
        self.reservations = Reservations()

    def leave(self) -> None:
        """The current run (if any) is left: its reservations are to be settled."""
        if self.reservations.rounds:
            self.unsettled = True  # the state file holds the left run's reservations
        self.reservations = Reservations()

    def answer(self, run_id: int, digest: bytes) -> bool:
        """The agents answer the run ``run_id`` (its signed configuration's ``digest``): from
        now on its coins are spent. True: the run is new to the state file."""
        changed = run_id not in self.answered_configs
        self.answered_runs.add(run_id)
        self.answered_configs.setdefault(run_id, digest)
        return changed

    def reserve(self, odometer: Any, bound: Any, rnd: int, charged: np.ndarray, start: int,
                stop: int) -> bool:
        """Keep the state file ahead of the agents' spending in round ``rnd``, where the
        ``odometer`` has just charged the agents ``charged`` of the block ``[start, stop)``
        (``bound``: the run's bound protocol); True: the file is to be written (``settle``
        writes the exact ledger once the run ends)."""
        eps = odometer.round_eps.get(rnd)
        if eps is None:
            eps = float(bound.round_epsilon(rnd))
        if rnd not in odometer.answered or not 0 <= eps < np.inf:
            return False  # a round the odometer refuses whole (past its rounds, or no ε)
        return self.reservations.reserve(rnd, eps, charged, start, stop)

    def sync(self, data_id: int | None, start: int, stop: int) -> None:
        """Write the answered runs and the ledger to the state file, if there is one, with the
        current run's reserved spend (``reserve``: on the data set ``data_id`` of the block
        ``[start, stop)``; None: no run) on top of the ledger."""
        if self.state is None:
            return
        ledger = self.ledger
        if data_id is not None:
            ledger = self.reservations.on(ledger, data_id, start, stop)
        self.state.save(self.answered_configs, ledger)
        self.unsettled = False

    def settle(self, idle: bool) -> None:
        """Once a run with reserved spend has ended (``idle``: the pool is out of it), write
        the exact ledger: the reservations of the agents that did not answer are dropped."""
        if self.unsettled and idle and self.state is not None:
            self.sync(None, 0, 0)
