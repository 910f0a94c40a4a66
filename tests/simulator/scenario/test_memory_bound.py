"""Runs that cannot fit in memory are refused before any process starts (issue 47).

``data.n = 10^8`` on the demo passed validation, then every report frame's curator-side
allocation (the round's reports: 10^8 agents x 45 pairs x 8 bytes = 33.5 GiB) failed as a
MemoryError that was reported as the peer's bad frame, 64 times. Now ``check_runs`` refuses the
run with the estimate and the limit, and a curator's own MemoryError is one failure of the run.
"""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols.local import example_data
from ldpsim.simulator.scenario import scenario as sc

GIB = 1 << 30


def demo_at(n: int, protocols: list[str]) -> dict:
    return {"name": "demo", "protocols": protocols, "seed": 1,
            "data": {"kind": "mallows", "n": n, "m": 10, "theta": 0.5},
            "runtime": {"backend": "inproc"}}


def test_attack_a_run_beyond_memory_is_refused_with_the_estimate_and_the_limit(monkeypatch):
    monkeypatch.setattr(sc, "memory_limit", lambda: 8 * GIB)
    scen = sc.load(raw=demo_at(10**8, ["kwiksort"]))
    with pytest.raises(sc.ScenarioError) as e:
        sc.check_runs(scen.runs())
    text = str(e.value)
    assert len(text.splitlines()) == 1, text
    assert text.startswith("[data] n: got 100000000; "), text
    assert "kwiksort" in text and "45 numbers" in text and "38.4 GB" in text, text
    assert "allowed: at most 8.59 GB" in text, text


def test_a_run_that_fits_passes_the_memory_check(monkeypatch):
    monkeypatch.setattr(sc, "memory_limit", lambda: 8 * GIB)
    scen = sc.load(raw=demo_at(10**6, ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr"]))
    sc.check_runs(scen.runs())


@pytest.mark.parametrize("protocol", ["kwiksort", "dp_kwiksort", "ldp_kwiksort_rr",
                                      "ethics_vldp", "truth_two_layer", "truth_mf"])
def test_the_estimate_counts_the_numbers_of_a_report(protocol):
    """All pairs for the all-pairs rank curators, K queries for LDP-KwikSort, the report
    length for the ethics protocols."""
    ds = sc.build_data(example_data(protocol), 0)
    proto = PROTOCOLS[protocol]
    bound = proto.bind(proto.resolve({}, ds.public), ds.public, resolved=True)
    got = proto.report_numbers(bound)
    if protocol in ("kwiksort", "dp_kwiksort"):
        m = ds.public["m"]
        assert got == m * (m - 1) // 2
    elif protocol == "ldp_kwiksort_rr":
        assert got == bound.rounds[0].uses
    elif protocol.startswith("truth"):
        assert got == proto.schema(bound.params, bound.public)[0].length
    else:
        assert got == proto.report_length(bound.params, bound.public)
    assert sc.curator_bytes(got, 1000) >= 1000 * got * np.dtype(np.int64).itemsize


def test_the_machines_memory_is_the_default_limit():
    assert sc.memory_limit() > 0


def test_attack_the_curators_own_memory_error_is_its_failure_not_a_peers_bad_frame(
        monkeypatch, caplog):
    """The curator failing to allocate a round's reports ends the run with one clear error;
    it was logged as 'frame from <pool>: MemoryError' and counted against the pool, once per
    frame."""
    from ldpsim.simulator.session import RunFailed, rounds

    import ldpsim

    def store(self, *a, **k):
        raise MemoryError("Unable to allocate 33.5 GiB for an array")

    monkeypatch.setattr(rounds.Round, "store", store)
    table = {"protocol": "kwiksort", "data": {**example_data("kwiksort"), "n": 200},
             "runtime": {"backend": "inproc"}, "seed": 7}
    with pytest.raises(RunFailed) as e:
        list(ldpsim.run(table))
    text = str(e.value)
    assert "the curator ran out of memory" in text and "33.5 GiB" in text, text
    assert len(text.splitlines()) == 1, text
    assert not [r for r in caplog.records if "frame from" in r.getMessage()]


@pytest.mark.parametrize("protocol, numbers", [
    ("dpwevote", 1), ("dpwevote_laplace", 1), ("safari", 1), ("safari_nopriv", 3),
    ("rank_grr", 1), ("rank_harmony", 2), ("rank_olh", 2), ("rank_calm", 2)])
def test_attack_a_vote_or_safari_run_beyond_memory_is_refused(monkeypatch, protocol, numbers):
    """The voting and SAFARI families stated no report size, so nothing checked them: 10^8
    agents (3.2 GB of reports at one number each) passed a 1 GiB limit. Now refused in one
    line with the estimate and the limit."""
    monkeypatch.setattr(sc, "memory_limit", lambda: GIB)
    data = {**example_data(protocol), "n": 10**8}
    if "d" in data:  # OLH's decoding work (n · d!) stays within its limit
        data["d"] = 3
    scen = sc.load(raw={"name": "huge", "protocol": protocol, "seed": 1, "data": data,
                        "runtime": {"backend": "inproc"}})
    with pytest.raises(sc.ScenarioError) as e:
        sc.check_runs(scen.runs())
    text = str(e.value)
    proto = PROTOCOLS[protocol]
    ds = sc.build_data(data, 0)
    extra = proto.curator_agent_bytes(proto.bind(proto.resolve({}, ds.public), ds.public,
                                                 resolved=True))
    need = sc.curator_bytes(numbers, 10**8, extra) / 1e9
    assert len(text.splitlines()) == 1, text
    assert text.startswith("[data] n: got 100000000; "), text
    assert f"{numbers} numbers" in text and f"{need:.3g} GB" in text, text
    assert "allowed: at most 1.07 GB" in text and protocol in text, text


@pytest.mark.parametrize("protocol", ["dpwevote", "safari", "safari_nopriv", "rank_olh"])
def test_a_vote_or_safari_run_that_fits_passes_the_memory_check(monkeypatch, protocol):
    monkeypatch.setattr(sc, "memory_limit", lambda: GIB)
    data = {**example_data(protocol), "n": 10**6}
    sc.check_runs(sc.load(raw={"name": "fits", "protocol": protocol, "seed": 1, "data": data,
                               "runtime": {"backend": "inproc"}}).runs())


@pytest.mark.parametrize("protocol, params", [
    ("dpwevote", {}), ("dpwevote_laplace", {}), ("safari", {}),
    ("safari", {"oracle": "harmony"}), ("safari", {"rule1": "calm"}), ("safari_nopriv", {}),
    ("rank_grr", {}), ("rank_harmony", {}), ("rank_olh", {}), ("rank_calm", {})])
def test_the_stated_numbers_are_the_longest_rounds_reports(protocol, params):
    """What the voting and SAFARI protocols state is the length of the longest report their
    curators' plans ask for (``ReportSchema.length``), on their example data."""
    from ldpsim.protocols.local import local_rounds

    ds = sc.build_data({**example_data(protocol), "n": 60}, 0)
    proto = PROTOCOLS[protocol]
    bound = proto.bind(proto.resolve(params, ds.public), ds.public, resolved=True)
    rounds, _ = local_rounds(bound, ds, seed=3)
    assert proto.report_numbers(bound) == max(r.plan.schema.length for r in rounds)


def test_a_protocols_own_state_per_agent_is_in_the_estimate(monkeypatch):
    """DPWeVote keeps its partners' round-0 weights for the later rounds: 16 bytes an agent the
    estimate names beside the reports (issue 52: protocols that need per-agent state say so)."""
    monkeypatch.setattr(sc, "memory_limit", lambda: GIB)
    data = {**example_data("dpwevote"), "n": 10**8}
    scen = sc.load(raw={"name": "huge", "protocol": "dpwevote", "seed": 1, "data": data,
                        "runtime": {"backend": "processes"}})
    with pytest.raises(sc.ScenarioError) as e:
        sc.check_runs(scen.runs())
    assert "+ 16 bytes an agent of the protocol's own state" in str(e.value)
    assert f"{sc.curator_bytes(1, 10**8, 16) / 1e9:.3g} GB" in str(e.value)


def test_truth_inference_states_a_row_of_the_answer_matrix_per_worker():
    ds = sc.build_data(example_data("truth_two_layer"), 0)
    proto = PROTOCOLS["truth_two_layer"]
    bound = proto.bind(proto.resolve({}, ds.public), ds.public, resolved=True)
    assert proto.curator_agent_bytes(bound) == 8 * ds.public["tasks"]
    assert PROTOCOLS["ldp_kwiksort_rr"].curator_agent_bytes(bound) == 0


def test_a_curator_that_absorbs_in_parts_is_estimated_a_chunk_at_a_time(monkeypatch):
    """10^9 LDP-KwikSort:RR agents fit 1 GiB where the curator streams (a chunked run on the
    processes backend); held whole (inproc, a chunk above n, or an adversary view) they do
    not, and the estimate says so."""
    monkeypatch.setattr(sc, "memory_limit", lambda: GIB)

    def check(**runtime):
        raw = demo_at(10**9, ["ldp_kwiksort_rr"])
        raw["runtime"] = {"backend": "processes", **runtime}
        sc.check_runs(sc.load(raw=raw).runs())

    check()
    check(chunk=4096)
    for whole in ({"backend": "inproc"}, {"chunk": 2 * 10**9}):
        with pytest.raises(sc.ScenarioError, match=r"1000000000 agents x 1 numbers"):
            check(**whole)
