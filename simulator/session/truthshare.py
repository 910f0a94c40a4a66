"""A pool's share of its run's ground truth, for the orchestrator alone.

The orchestrator scores a run against its data set's ground truth (``Dataset.truth``). Where
the pools compute the truth's costly part anyway (the ethics family: every voter's Eq. (3)
estimate, which Algorithms 1-2 solve), a pool hears it as its run makes it
(``Dataset.truth_tap``) and hands its part to the orchestrator over a channel of their own
(the processes backend's pipe, ``transport.run_processes``), never through the curator, which
must never learn the truth. The orchestrator joins the parts (``Dataset.truth_join``) into the
truth ``truth()`` gives, bit for bit, or computes it itself when any part is missing.

A part is made only from a run the pool answered whole and as set up: an audit's override of a
row or a coin key, a pool that fell silent, or refused agents leave it None.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols import get_protocol


class TruthShare:
    """The tap of one pool's current run (``open`` .. ``finish``), and the parts made, to send
    (``take``): ``(run_id, part or None)`` per run."""

    def __init__(self) -> None:
        self.tap: Any = None
        self.run_id: int | None = None
        self.out: list[tuple[int, Any]] = []

    def open(self, dataset: Any, start: int, stop: int, config: dict[str, Any]) -> None:
        """Hear agents ``start .. stop - 1`` of ``dataset`` in the run ``config`` (its public
        configuration), instead of any run heard before."""
        self.drop()
        self.run_id = int(config["run_id"])
        self.tap = dataset.truth_tap(start, stop, get_protocol(config["protocol"]))

    @property
    def hears_chunks(self) -> bool:
        """Whether the open tap hears a chunked pool's rows chunk by chunk (``watch`` with
        ``first``); a tap that does not needs the block's rows at once."""
        return bool(getattr(self.tap, "chunked", False))

    def watch(self, rows: Any, override: dict[str, Any] | None, first: int | None = None
              ) -> None:
        """The run's rows are ``rows`` (the block's, or those of agents ``first ..`` of a
        chunked pool): heard unless the audit overrides any agent's row or coins (then this
        run's truth is the orchestrator's to compute)."""
        if self.tap is None:
            return
        if override is not None:
            self.finish(False)
        elif first is None:
            self.tap.watch(rows)
        else:
            self.tap.watch(rows, first)

    def adopt(self, source: Any) -> None:
        """A chunked pool makes its next chunk from ``source`` (its data set keyed for the
        chunk): a tap that hears what its data set generates (``TruthTap.adopt``) hears it."""
        if self.tap is not None and hasattr(self.tap, "adopt"):
            self.tap.adopt(source)

    def look(self, first: int, rows: np.ndarray) -> None:
        """A chunked pool's rows of agents ``first ..`` put together from two chunks (a copy,
        for a query batch across a chunk's end): a tap that finds the solves it hears by where
        their records lie looks there too (``TruthTap.look``); one that counts rows does not
        count them again."""
        if self.tap is not None and hasattr(self.tap, "look"):
            self.tap.look(rows, first)

    def finish(self, whole: bool) -> None:
        """The run ``open`` heard is over: its part (None unless ``whole``, the pool having
        answered as set up, and every agent heard) is the next to send."""
        if self.run_id is None:
            return
        part = self.tap.part() if whole and self.tap is not None else None
        self.out.append((self.run_id, part))
        self.drop()

    def skip(self, config: dict[str, Any]) -> None:
        """The run ``config`` (its public configuration) has no part from this pool (a chunked
        run's rows are never held at once): a None part goes to the orchestrator, which then
        computes the truth itself without waiting for one."""
        self.drop()
        self.out.append((int(config["run_id"]), None))

    def drop(self) -> None:
        """Hear nothing more of the current run (no part for it)."""
        if self.tap is not None:
            self.tap.close()
        self.tap = None
        self.run_id = None

    def take(self) -> list[tuple[int, Any]]:
        """The parts made since the last call, in order."""
        out, self.out = self.out, []
        return out
