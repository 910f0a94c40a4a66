"""``Curator.absorbs_in_parts``: a curator that says so gives the same state and output when a
round's reports come in disjoint, sorted parts in any order (built over an ``AgentRange``,
its plan's queries drawn afresh on every read) as in one call with all of them, or, if it
also says ``absorbs_in_order``, in parts in agent order; which curators say so is pinned
here."""

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
IN_PARTS = ["dp_kwiksort", "ethics_nonprivate", "ethics_rlcp", "ethics_rldp_fm",
            "ethics_rldp_laplace", "ethics_vlcp", "ethics_vldp", "kwiksort", "ldp_kwiksort_lap",
            "ldp_kwiksort_rr", "rank_calm", "rank_grr", "rank_harmony", "rank_olh", "safari"]
#: those of them whose parts must come in agent order (float sums in the reports' order; the
#: ethics family's on its example data, d = 3: ``tests/protocols/ethics/test_in_order.py``)
IN_ORDER = ["ethics_nonprivate", "ethics_rlcp", "ethics_rldp_fm", "ethics_rldp_laplace",
            "ethics_vlcp", "ethics_vldp", "rank_harmony"]
#: those of them that plan more than one round (their own tests: SAFARI's in
#: ``tests/protocols/safari/test_in_parts.py``)
ROUNDS = ["safari"]


def _in_parts(name: str, flag: str = "absorbs_in_parts") -> bool:
    proto = PROTOCOLS[name]
    data = example_data(name)
    if data is None:
        return False
    kind = DATA_KINDS[data["kind"]]
    public = kind.build({k: v for k, v in data.items() if k != "kind"}, 0).public
    return getattr(proto.curator_class(proto.bind({}, public)), flag)


def test_which_curators_absorb_in_parts():
    assert sorted(n for n in PROTOCOLS if _in_parts(n)) == IN_PARTS
    assert sorted(n for n in PROTOCOLS if _in_parts(n, "absorbs_in_order")) == IN_ORDER


@pytest.mark.parametrize("name, in_order", [(n, o) for n in IN_PARTS if n not in ROUNDS
                                             for o in (False, True)
                                             if o or n not in IN_ORDER])
def test_parts_in_any_order_give_the_state_of_one_call(name, in_order):
    """(in agent order too; only so for those that say ``absorbs_in_order``)"""
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
        order = range(parts) if in_order else np.random.default_rng(parts).permutation(parts)
        for i in order:
            cur.absorb(0, np.asarray(plan.agents)[pieces[i]], values[pieces[i]])
        assert cur.plan(1) is None
        outs.append(pickle.dumps(cur.finish()))
    assert outs[0] == outs[1] == outs[2]
