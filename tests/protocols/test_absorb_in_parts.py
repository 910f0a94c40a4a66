"""``Curator.absorbs_in_parts``: a curator that says so gives the same state and output when a
round's reports come in disjoint, sorted parts in any order (built over an ``AgentRange``,
its plan's queries drawn afresh on every read) as in one call with all of them; which
curators say so is pinned here."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.protocols.local import example_data
from ldpsim.protocols.queries import RowQueries

from tests import drivers

#: the protocols whose curators absorb in parts (a chunked run streams their rounds)
IN_PARTS = ["dp_kwiksort", "kwiksort", "ldp_kwiksort_lap", "ldp_kwiksort_rr", "rank_calm",
            "rank_grr", "rank_olh", "safari"]
#: those of them that plan more than one round (their own tests: SAFARI's in
#: ``tests/protocols/safari/test_in_parts.py``)
ROUNDS = ["safari"]


def _in_parts(name: str) -> bool:
    proto = PROTOCOLS[name]
    data = example_data(name)
    if data is None:
        return False
    kind = DATA_KINDS[data["kind"]]
    public = kind.build({k: v for k, v in data.items() if k != "kind"}, 0).public
    return proto.curator_class(proto.bind({}, public)).absorbs_in_parts


def test_which_curators_absorb_in_parts():
    assert sorted(n for n in PROTOCOLS if _in_parts(n)) == IN_PARTS


@pytest.mark.parametrize("name", [n for n in IN_PARTS if n not in ROUNDS])
def test_parts_in_any_order_give_the_state_of_one_call(name):
    proto = PROTOCOLS[name]
    args = {**example_data(name), "n": 3000}
    data = DATA_KINDS[args.pop("kind")].build(args, 3)
    agent_key = rngm.stream_key(9, "agents")
    outs = []
    for agents, parts in [(np.arange(data.n), 1), (AgentRange(0, data.n), 7),
                          (np.arange(data.n), 4)]:
        resolved, cur = drivers.curator(proto, {}, data, 9, agents=agents)
        assert cur.single_round
        plan = cur.plan(0)
        reports = drivers.respond(proto, resolved, data, plan, agent_key)
        ok, values = plan.schema.validate(reports.tolist())
        assert ok.all()
        answered = np.flatnonzero(np.random.default_rng(1).random(data.n) < 0.9)
        if isinstance(plan.queries, RowQueries) and parts > 1:
            plan.queries.streaming()  # drawn again for each part
        pieces = np.array_split(answered, parts)
        for i in np.random.default_rng(parts).permutation(parts):
            cur.absorb(0, np.asarray(plan.agents)[pieces[i]], values[pieces[i]])
        assert cur.plan(1) is None
        outs.append(pickle.dumps(cur.finish()))
    assert outs[0] == outs[1] == outs[2]
