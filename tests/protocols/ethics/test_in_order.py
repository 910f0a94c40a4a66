"""The ethics curators in parts (``curators.in_order``): the average over d ≥ 2 sums the
reports' rows one after another (numpy's ``sum(axis=0)`` of an (n, d ≥ 2) array), so its
curator absorbs a round in parts in agent order (``Curator.absorbs_in_order``), carries the sum
on, and gives the whole round's output bit for bit; shuffled parts do not. An (n, 1) array, and
the weighted aggregate's weights, are summed pairwise, a tree that depends on n: those values
are kept, 8 bytes a report (``curators.Kept``), and summed when the round is over."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.protocols.ethics import curators

from tests import drivers

#: (protocol, parameters) of every ethics curator, both uploads and both FM reports
SETTINGS = [("ethics_nonprivate", {}), ("ethics_nonprivate", {"upload": "records"}),
            ("ethics_vlcp", {}), ("ethics_rlcp", {"upload": "records"}), ("ethics_vldp", {}),
            ("ethics_rldp_laplace", {}), ("ethics_rldp_fm", {}),
            ("ethics_rldp_fm", {"report": "coefficients"}),
            ("ethics_vldp", {"aggregate": "weighted"}),
            ("ethics_rldp_laplace", {"aggregate": "weighted"}),
            ("ethics_rldp_fm", {"aggregate": "weighted"}),
            ("ethics_rldp_fm", {"report": "coefficients", "aggregate": "weighted"})]


def _data(n: int, d: int):
    return DATA_KINDS["ethics_synthetic"].build(
        {"n": n, "d": d, "records": 4, "eps_mode": "uniform", "test_instances": 50}, 3)


def _output(name: str, params: dict, data, parts: int, whole: bool, shuffle: bool = False,
            seed: int = 4) -> bytes:
    """The output of a curator whose round's reports (95% of the voters) come in ``parts``
    parts in agent order (``shuffle``: in a shuffled order); ``whole``: the curator over
    whole rounds."""
    proto = PROTOCOLS[name]
    resolved = proto.resolve(params, data.public)
    bound = proto.bind(resolved, data.public, resolved=True)
    cls = proto.whole_curator_class(bound) if whole else proto.curator_class(bound)
    agents = np.arange(data.n) if whole else AgentRange(0, data.n)
    cur = cls(proto, bound, agents, rngm.stream_key(seed, "curator"))
    cur.coins = rngm.stream_key(seed, "coins")
    plan = cur.plan(0)
    reports = drivers.respond(proto, resolved, data, plan, rngm.stream_key(seed, "agents"))
    _, values = plan.schema.validate(reports.tolist())
    answered = np.flatnonzero(np.random.default_rng(1).random(data.n) < 0.95)
    pieces = np.array_split(answered, parts)
    order = np.random.default_rng(2).permutation(parts) if shuffle else range(parts)
    for i in order:
        cur.absorb(0, pieces[i], values[pieces[i]])
    assert cur.plan(1) is None
    return pickle.dumps(cur.finish())


@pytest.mark.parametrize("name, params", SETTINGS)
@pytest.mark.parametrize("d", [1, 2, 5])
def test_parts_in_agent_order_give_the_whole_rounds_output(name, params, d):
    data = _data(1500, d)
    proto = PROTOCOLS[name]
    bound = proto.bind(proto.resolve(params, data.public), data.public, resolved=True)
    assert proto.curator_class(bound).absorbs_in_order
    want = _output(name, params, data, 1, True)
    for parts in (1, 3, 50):
        assert _output(name, params, data, parts, False) == want


def test_shuffled_parts_change_the_average():
    """The reason for the order: the same parts absorbed shuffled add the rows in another
    order, and the released average differs in its last bits."""
    data = _data(1500, 5)
    assert _output("ethics_vldp", {}, data, 50, False, shuffle=True) != \
        _output("ethics_vldp", {}, data, 1, True)


@pytest.mark.parametrize("name, params, d, kept", [
    ("ethics_vldp", {}, 1, {"column"}), ("ethics_vldp", {"aggregate": "weighted"}, 3,
                                         {"weight"}),
    ("ethics_rldp_fm", {"aggregate": "weighted"}, 1, {"weight", "column"}),
    ("ethics_nonprivate", {}, 1, {"column"}), ("ethics_vldp", {}, 2, set())])
def test_a_pairwise_sum_keeps_its_values_and_says_so(name, params, d, kept):
    """d = 1 (numpy sums an (n, 1) array pairwise) and the weighted aggregate (its weights'
    ``w.sum()``): the tree depends on the round's number of reports, so the curator keeps
    those values, one a report, and states their 8 bytes (``Protocol.curator_agent_bytes``)
    for the memory check."""
    data = _data(300, d)
    proto = PROTOCOLS[name]
    bound = proto.bind(proto.resolve(params, data.public), data.public, resolved=True)
    assert proto.curator_agent_bytes(bound) == 8 * len(kept)
    cur = proto.make_curator(bound, AgentRange(0, data.n), rngm.stream_key(1, "curator"))
    plan = cur.plan(0)
    reports = drivers.respond(proto, bound.params, data, plan, rngm.stream_key(1, "agents"))
    _, values = plan.schema.validate(reports.tolist())
    cur.absorb(0, np.arange(100), values[:100])
    cur.absorb(0, np.arange(100, 250), values[100:250])
    assert set(cur.kept) == kept
    assert all(k.n == 250 and len(k.values) == data.n for k in cur.kept.values())


def test_numpy_sums_rows_in_order_and_a_column_pairwise():
    """What ``AverageCurator.add`` relies on: the running sum followed by the next rows is one
    ``sum(axis=0)`` for d ≥ 2, at every size and cut; for d = 1 it is not."""
    g = np.random.default_rng(5)
    for d in (2, 3, 10):
        for n in (2, 9, 8193, 40_001):
            a = g.standard_normal((n, d)) * g.uniform(0.1, 1e3, (n, 1))
            cuts = np.sort(g.choice(np.arange(1, n), size=min(4, n - 1), replace=False))
            run = None
            for p in np.split(a, cuts):
                run = p.sum(axis=0) if run is None else \
                    np.concatenate([run[None, :], p]).sum(axis=0)
            assert np.array_equal(run, a.sum(axis=0)), (d, n)
    a = g.standard_normal((40_001, 2)) * g.uniform(0.1, 1e3, (40_001, 1))
    column = a[:, :1]  # (n, 1), a strided view, as a report's first number is
    run = np.concatenate([column[:20_000].sum(axis=0)[None, :], column[20_000:]]).sum(axis=0)
    assert not np.array_equal(run, column.sum(axis=0))
    kept = curators.Kept(50_000)
    kept.extend(column[:20_000, 0])
    kept.extend(column[20_000:, 0])
    assert kept.sum() == column.sum(axis=0)[0]


def test_the_in_order_curators_are_their_whole_curators():
    for whole, ordered in curators._IN_ORDER.items():
        assert issubclass(ordered, whole) and ordered.absorbs_in_order
        assert not whole.absorbs_in_parts
