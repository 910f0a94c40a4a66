"""The adversary view: what a colluding curator saw in one run, for the audit to replay.

Everything the curator received and sent that an attack may use: the agents it was built over,
each round's queries, broadcast and reports (late reports too: they reached the curator), the
coalition's disclosures, the released output, the public data and the resolved parameters. The
curator session (``curator.CuratorSession``) records into it as the run goes; the result keeps
it when the run is asked for it (``record_view``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols.queries import full as full_queries


class AdversaryView:
    """The view of one run (``doc``), kept whole when ``record`` is set; the coalition's
    disclosures are kept either way."""

    def __init__(self, record: bool) -> None:
        self.record = record
        self.doc: dict[str, Any] = {"rounds": [], "disclosures": {}, "broadcasts": []}

    def built(self, agents: np.ndarray) -> None:
        """The protocol's curator is built over ``agents`` (the audit replays it)."""
        if self.record:
            self.doc["agents"] = np.asarray(agents)

    def opened(self, number: int, agents: np.ndarray, plan: Any) -> None:
        """Round ``number`` asks ``agents`` the queries of ``plan`` (its ``RoundPlan``)."""
        if self.record:
            self.doc["rounds"].append({"round": number, "agents": np.asarray(agents),
                                       "queries": plan.queries, "broadcast": plan.broadcast,
                                       "report_agents": None, "reports": None})

    def closed(self, rnd: Any, agents: np.ndarray, reports: np.ndarray) -> None:
        """The round ``rnd`` (``rounds.Round``) ends with the ``reports`` of ``agents`` absorbed;
        its queries drawn batch by batch are read whole by now."""
        if not self.record:
            return
        if rnd.late is not None:  # late reports reached the curator too: it keeps them
            agents, reports = rnd.collect(late=True)
            self.doc["rounds"][-1]["late_agents"] = rnd.agents[rnd.late]
        self.doc["rounds"][-1].update(report_agents=agents, reports=reports,
                                      queries=full_queries(rnd.plan.queries))

    def disclosed(self, agent: int, payload: Any) -> None:
        """A colluder ``agent`` disclosed its row and coins (``payload``)."""
        self.doc["disclosures"][agent] = payload

    def released(self, output: Any, public: Any, params: Any) -> dict[str, Any] | None:
        """The run's output is released: the whole view, or None when it is not kept."""
        if not self.record:
            return None
        self.doc["output"] = output
        self.doc["public"] = public
        self.doc["params"] = params
        return self.doc
