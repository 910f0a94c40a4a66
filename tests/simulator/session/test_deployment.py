"""``[deployment]``: devices, links and availability in virtual time (``session.network``).

What is pinned: a deployment that costs nothing changes no output; virtual times are the
hand-computed ones; a deadline before any answer drops everyone, with a record that says so;
availability p drops p of the agents; every backend and pool split gives the same outputs and
virtual times; bad tables and traces are refused with the key named.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from ldpsim.protocols.local import example_data
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.runs import run_key
from ldpsim.simulator.session import network as net

import ldpsim

#: one protocol of each family (and SAFARI's two phases, DPWeVote's three rounds)
FAMILIES = ["ldp_kwiksort_rr", "dpwevote", "safari", "truth_two_layer", "ethics_vldp"]
#: a deployment that costs nothing: no latency, unlimited links, no compute, always online
FREE = {"latency_ms": 0.0, "down_mbps": math.inf, "up_mbps": math.inf, "availability": 1.0,
        "compute": 0.0}
#: what a run's timing holds that is measured live (never compared)
LIVE = ("wall_s", "curator_cpu_s")


def raw(protocol: str, n: int = 300, deployment: dict | None = None, **top) -> dict:
    table = {"protocol": protocol, "data": {**example_data(protocol), "n": n},
             "runtime": {"backend": "inproc"}, "seed": 7, **top}
    if deployment is not None:
        table["deployment"] = deployment
    return table


def records(table: dict, **kw) -> list[dict]:
    """The records of ``ldpsim.run(table)``, with the seed-only secret (the tests compare
    separately launched runs bit for bit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(ldpsim.run(table, **{"secret": "seed", **kw}))


def rounds(rec: dict) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in LIVE} for r in rec["comm"]["per_round"]]


# -- the model's arithmetic ----------------------------------------------------------------
def test_wire_bytes_add_the_zmtp_frame_and_a_tcp_ip_header_per_segment():
    assert net.wire_bytes(0) == 0  # nothing sent
    assert net.wire_bytes(10) == 10 + 2 + 40  # short ZMTP frame, one segment
    assert net.wire_bytes(255) == 255 + 2 + 40
    assert net.wire_bytes(256) == 256 + 9 + 40  # long ZMTP frame
    assert net.wire_bytes(1460 - 9) == 1460 + 40  # exactly one full segment
    assert net.wire_bytes(1460 - 8) == 1461 + 80  # one byte into the second
    assert net.wire_bytes(np.array([0, 10])).tolist() == [0, 52]


def test_a_round_ends_at_the_deadline_the_quota_or_its_last_answer():
    t = np.array([0.3, 0.1, 0.2, 0.4])
    pct, quota = net.order_stats(t, 2)
    assert pct == pytest.approx(np.percentile(t, (50, 95, 99)).tolist(), rel=1e-15)
    assert quota == 0.2  # the 2nd arrival
    assert net.order_stats(t, 5)[1] is None  # a quota of 5 of these 4 is never reached
    assert net.round_end(0.4, None, True, None) == 0.4  # everyone answered
    assert net.round_end(0.4, None, True, 0.25) == 0.25  # the deadline first
    assert net.round_end(0.4, 0.2, True, None) == 0.2  # the quota first
    assert net.round_end(0.4, None, False, 1.0) == 1.0  # one silent: waits for the deadline
    assert net.round_end(None, None, True, None) == 0.0  # nobody online
    assert net.round_end(None, None, False, None) == 0.0  # nobody answered, no deadline


def test_the_normal_quantile_is_the_standard_normals_to_1e_8():
    from statistics import NormalDist

    u = np.concatenate([np.linspace(1e-12, 1 - 1e-12, 20001),
                        [2.0 ** -53, 0.02425, 0.97575, 0.5, 1 - 2.0 ** -53]])
    ref = np.array([NormalDist().inv_cdf(float(x)) for x in u])
    got = net.normal_quantile(u)
    assert np.allclose(got, ref, rtol=1e-8, atol=1e-12)
    assert got[u == 0.5][0] == 0.0


@pytest.mark.skipif(net.ARRIVALS.built is None, reason="the compiled kernel was not built")
def test_the_compiled_arrival_times_are_numpys_bit_for_bit():
    """Sizes across every header case (0, short and long ZMTP frames, several segments, the
    table's edge at 65536), a broadcast, compute, spread links; and wire totals."""
    spec = {"classes": {"share": [0.5, 0.3, 0.2], "latency_ms": [5.0, 40.0, 90.0],
                        "down_mbps": [100.0, 5.0, None], "up_mbps": [20.0, 1.0, 0.3],
                        "spread": [0.5, 0.3, 0.7], "speed": [1.0, 0.4, 0.2]}}
    n = 50_000
    dev = net.draw_devices(spec, 17, np.arange(n))
    rng = np.random.default_rng(3)
    down = rng.choice([0, 1, 254, 255, 256, 1451, 1452, 4000, 65535, 65536, 200_000], n)
    up = rng.integers(0, 3000, n)
    got = {}
    before = net.ARRIVALS.name()
    try:
        for mode in ("compiled", "numpy"):
            net.ARRIVALS.use(mode)
            for d, u in ((down, up), (down % 65536, up)):  # with and without the table
                totals = [0, 0, -math.inf]
                t = net.completion_times(dev, slice(0, n), d.astype(np.int32),
                                         37, u.astype(np.int32), 2e-5, None, totals)
                got.setdefault(mode, []).append((t.view(np.uint64).copy(), totals))
    finally:
        net.ARRIVALS.use(before)
    for (a, ta), (b, tb) in zip(got["compiled"], got["numpy"], strict=True):
        assert np.array_equal(a, b) and ta == tb
    assert got["numpy"][0][1][0] == int(net.wire_bytes(down).sum())
    assert got["numpy"][0][1][2] == float(got["numpy"][0][0].view(np.float64).max())


def test_a_class_is_chosen_by_the_draws_uniform_compared_on_the_draw_itself():
    from ldpsim.protocols.rng import uniform_of

    rng = np.random.default_rng(5)
    b = rng.integers(0, 2**64, 200_000, dtype=np.uint64, endpoint=False)
    u = uniform_of(b)
    for e in (0.15, 0.4, 0.55, 0.6, 1e-9, 1 - 1e-9, 0.5):
        t = np.uint64(net._draw_threshold(e))
        assert np.array_equal(b >= t, u >= e)
        # at the threshold itself and just below it
        edge = np.array([int(t) - 1, int(t)], dtype=np.uint64)
        assert (uniform_of(edge) >= e).tolist() == [False, True]


def test_the_device_draws_are_keyed_by_agent_and_follow_the_shares():
    spec = {"classes": {"share": [0.3, 0.7], "latency_ms": [10.0, 80.0], "spread": [0.5, 0.2]}}
    every = net.draw_devices(spec, 1234, np.arange(1000))
    some = net.draw_devices(spec, 1234, np.arange(500, 1000))
    assert np.array_equal(every.latency_s[500:], some.latency_s)  # whoever is drawn along
    n = 20000
    exact = net.draw_devices({"classes": {**spec["classes"], "spread": [0.0, 0.0]}}, 99,
                             np.arange(n))
    assert set(np.round(exact.latency_s, 9).tolist()) == {0.01, 0.08}
    slow = (exact.latency_s > 0.05).mean()
    assert abs(slow - 0.7) < 5 * math.sqrt(0.7 * 0.3 / n)
    # the spread: a class's log latency has standard deviation sigma (5 standard errors of
    # a sample standard deviation, sigma / sqrt(2 (k - 1)))
    wide = net.draw_devices({"classes": {"share": [1.0], "latency_ms": [10.0],
                                         "spread": [0.5]}}, 7, np.arange(n))
    z = np.log(wide.latency_s / 0.01)
    assert abs(z.std(ddof=1) - 0.5) < 5 * 0.5 / math.sqrt(2 * (n - 1))
    assert abs(z.mean()) < 5 * 0.5 / math.sqrt(n)


# -- runs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", FAMILIES)
def test_a_deployment_that_costs_nothing_gives_todays_outputs_bit_for_bit(protocol):
    plain, = records(raw(protocol))
    free, = records(raw(protocol, deployment=FREE))
    assert json.dumps(free["output"], sort_keys=True) == \
        json.dumps(plain["output"], sort_keys=True)
    assert free["metrics"] == plain["metrics"]
    assert free["comm"]["bytes_up_per_agent_mean"] == plain["comm"]["bytes_up_per_agent_mean"]
    assert free["virtual"] == {"wall_s": 0.0, "dropouts_offline": 0, "dropouts_late": 0,
                               "dropout_rate": 0.0}
    for p, f in zip(rounds(plain), rounds(free), strict=True):
        assert {k: f[k] for k in p} == p  # every round as without a deployment
        assert f["virtual_s"] == 0.0 and f["completion_p99_s"] == 0.0
    assert "virtual" not in plain and "deployment" not in plain  # records as they were
    assert "network_s" not in plain["timing"] and free["timing"]["network_s"] >= 0


def test_a_deterministic_link_gives_the_hand_computed_virtual_times_of_two_rounds():
    """SAFARI: phase 1 asks each agent one attribute; phase 2 broadcasts the learnt chain.

    Each answer lands 2 x 10 ms + query (and broadcast) at 1 Mbit/s + 1 ms of compute on a
    device of speed 0.5 + the report at 0.5 Mbit/s, each message with its 2-byte ZMTP header
    and one 40-byte TCP/IP header. With 100 agents (ids below 128), every query and report
    envelope is 8 bytes: round 0 takes 0.02 + 8*50/1e6 + 0.002 + 8*50/5e5 = 0.0232 s.
    """
    dep = {"latency_ms": 10.0, "down_mbps": 1.0, "up_mbps": 0.5, "speed": 0.5,
           "compute": 0.001}
    rec, = records(raw("safari", n=100, deployment=dep))
    r0, r1 = rec["comm"]["per_round"]
    assert (r0["asked"], r0["bytes_down"], r0["bytes_up"]) == (100, 800, 800)  # 8 B each
    assert r0["virtual_s"] == pytest.approx(0.02 + 8 * 50 / 1e6 + 0.002 + 8 * 50 / 5e5,
                                            rel=1e-12)
    assert r0["virtual_s"] == pytest.approx(0.0232, rel=1e-12)
    # round 1: the same query and report, and the broadcast, a message of its own
    bc = (r1["bytes_down"] - 800) // 100
    assert r1["bytes_down"] == 800 + 100 * bc and r1["bytes_up"] == 800
    t1 = 0.02 + 8 * 50 / 1e6 + 8 * (bc + 2 + 40) / 1e6 + 0.002 + 8 * 50 / 5e5
    assert r1["virtual_s"] == pytest.approx(t1, rel=1e-12)
    assert r1["virtual_start_s"] == pytest.approx(0.0232, rel=1e-12)
    for r in (r0, r1):  # everyone equal: every percentile is the round's end
        assert r["completion_p50_s"] == r["completion_p99_s"] == r["virtual_s"]
        assert r["wire_bytes_up"] == 100 * 50
    assert r1["wire_bytes_down"] == 100 * (50 + bc + 2 + 40)
    assert rec["virtual"]["wall_s"] == pytest.approx(0.0232 + t1, rel=1e-12)


def test_a_deadline_before_any_answer_drops_every_agent_with_a_clear_record():
    rec, = records(raw("safari", deployment={"latency_ms": 50.0, "round_deadline_s": 0.01}))
    assert rec["status"] == "complete"  # the deployment's dropouts are no fault
    for r in rec["comm"]["per_round"]:
        assert r["reported"] == 0 and r["dropouts_late"] == r["asked"] == 300
        assert r["dropouts_offline"] == 0 and r["dropouts"] == 0
        assert r["virtual_s"] == 0.01
        assert r["completion_p50_s"] >= 0.1  # two latencies at least
        assert r["wire_bytes_up"] > 0  # the late reports were sent
    assert rec["virtual"] == {"wall_s": 0.02, "dropouts_offline": 0, "dropouts_late": 600,
                              "dropout_rate": 1.0}


@pytest.mark.parametrize("per", ["round", "run"])
def test_availability_p_drops_p_of_the_agents_within_5_standard_errors(per):
    p, n = 0.7, 4000
    rec, = records(raw("dpwevote", n=n, deployment={"availability": p,
                                                     "availability_per": per}))
    free, = records(raw("dpwevote", n=n, deployment=FREE))
    first, every = rec["comm"]["per_round"][0], free["comm"]["per_round"][0]
    se = math.sqrt(p * (1 - p) / n)
    assert abs(first["dropouts_offline"] / n - (1 - p)) < 5 * se
    assert first["reported"] == n - first["dropouts_offline"]
    # nothing is sent to an offline agent
    assert first["bytes_down"] / every["bytes_down"] < p + 5 * se


def test_per_run_availability_keeps_the_same_agents_offline_in_every_round():
    dep = {"availability": 0.5, "availability_per": "run", "compute": 0.0}
    spec = {**dep, "classes": None}
    network = net.DeploymentModel.of(spec, (11, 12)).network(1000)
    a = network.online(np.arange(1000), 0)
    b = network.online(np.arange(1000), 3)
    assert np.array_equal(a, b)
    other = net.DeploymentModel.of({**spec, "availability_per": "round"}, (11, 12)).network(1000)
    assert not np.array_equal(other.online(np.arange(1000), 0), other.online(np.arange(1000), 3))


def test_a_quota_ends_the_round_when_that_share_has_answered():
    dep = {"latency_ms": 20.0, "spread": 0.5, "quota": 0.5}
    rec, = records(raw("ldp_kwiksort_rr", n=1000, deployment=dep))
    r = rec["comm"]["per_round"][0]
    assert r["reported"] == 500 and r["dropouts_late"] == 500  # continuous times: no ties
    assert r["virtual_s"] == pytest.approx(r["completion_p50_s"], rel=0.05)


def test_every_backend_and_pool_split_gives_the_same_outputs_and_virtual_times():
    dep = {"trace": "mobile", "round_deadline_s": 0.08}
    base = raw("safari", n=600, deployment=dep)
    runs = [records(base)[0],
            records({**base, "runtime": {"backend": "processes", "pools": 3}})[0],
            records({**base, "runtime": {"backend": "inproc", "pools": 1}})[0]]
    first = runs[0]
    assert 0 < first["virtual"]["dropouts_late"] and 0 < first["virtual"]["dropouts_offline"]
    for rec in runs[1:]:
        assert json.dumps(rec["output"], sort_keys=True) == \
            json.dumps(first["output"], sort_keys=True)
        assert rec["metrics"] == first["metrics"]
        assert rec["virtual"] == first["virtual"]
        assert rounds(rec) == rounds(first)


def test_a_deadline_sweep_resumes_and_its_records_prove_their_keys(tmp_path):
    table = raw("ldp_kwiksort_rr", deployment={"trace": "mobile",
                                               "round_deadline_s": [0.03, math.inf]})
    first = records(table, out=tmp_path)
    assert [r["point"]["deployment.round_deadline_s"] for r in first] == [0.03, None]
    assert first[0]["virtual"]["dropouts_late"] > 0 == first[1]["virtual"]["dropouts_late"]
    again = ldpsim.load(tmp_path)  # every record's key recomputed from its settings
    assert sorted(r["key"] for r in again) == sorted(r["key"] for r in first)
    before = (tmp_path / "results.jsonl").read_text()
    records(table, out=tmp_path)  # nothing left to run
    assert (tmp_path / "results.jsonl").read_text() == before
    per_round = (tmp_path / "per_round.csv").read_text().splitlines()
    assert "virtual_s" in per_round[0] and "dropouts_late" in per_round[0]
    summary = (tmp_path / "summary.csv").read_text().splitlines()[0]
    assert "virtual.wall_s" in summary and "virtual.dropout_rate" in summary


def test_runs_without_a_deployment_keep_their_keys():
    plain = sc.load(raw=raw("ldp_kwiksort_rr")).runs()[0]
    assert plain.deployment == {} and "deployment" not in plain.config()
    assert plain.key == run_key(plain.protocol, plain.params, plain.data, 0, 7,
                                plain.collusion, [])


# -- bad tables ----------------------------------------------------------------------------
@pytest.mark.parametrize("deployment, needles", [
    ({"latency": 5}, ["[deployment] latency: unknown key", "did you mean 'latency_ms'"]),
    ({"availability": 1.5}, ["[deployment] availability: got 1.5", "<= 1"]),
    ({"round_deadline_s": 0}, ["[deployment] round_deadline_s: got 0", "or inf"]),
    ({"round_deadline_s": []}, ["[deployment] round_deadline_s: an empty list"]),
    ({"availability_per": "day"}, ["[deployment] availability_per", "'round', 'run'"]),
    ({"trace": "nowhere"}, ["[deployment] trace: no file 'nowhere'", "mobile"]),
    ({"compute": "fast"}, ["[deployment] compute: got 'fast'", "calibrated"]),
])
def test_a_bad_deployment_table_names_the_key_and_what_is_allowed(deployment, needles):
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment=deployment))
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("text, needle", [
    ("class,share,latency_ms\na,0.5,10\nb,0.4,20\n", "the shares sum to 0.9"),
    ("class,share,ping\na,1,10\n", "unknown: ping"),
    ("class,share,latency_ms\na,1,fast\n", "line 2, latency_ms: got 'fast'"),
    ("class,share,availability\na,1,2\n", "availability: got 2.0"),
    ("latency_ms\n10\n", "allowed: class,share or agent"),
])
def test_a_bad_trace_is_refused_with_its_line_and_column(tmp_path, text, needle):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment={"trace": str(tmp_path / "t.csv")}))
    assert needle in str(e.value)


def test_a_per_agent_trace_replays_its_rows_by_agent_id(tmp_path):
    (tmp_path / "t.csv").write_text("agent,latency_ms,availability\n0,10,1\n1,30,1\n2,50,1\n")
    scen = sc.load(raw=raw("ldp_kwiksort_rr", deployment={"trace": str(tmp_path / "t.csv")}))
    spec = scen.runs()[0].deployment
    assert spec["replay"] is True
    dev = net.draw_devices(spec, 5, np.arange(7))
    assert (dev.latency_s * 1e3).round(9).tolist() == [10, 30, 50, 10, 30, 50, 10]


def test_a_shipped_trace_and_the_calibrated_costs_load():
    scen = sc.load(raw=raw("safari", deployment={"trace": "mobile"}))
    spec = scen.runs()[0].deployment
    assert abs(sum(spec["classes"]["share"]) - 1) < 1e-9
    assert len(spec["compute"]["round_s"]) == 2  # SAFARI's two phases, calibrated
    assert all(s > 0 for s in spec["compute"]["round_s"])


def test_late_reports_are_out_of_the_aggregate_but_in_the_coalitions_view(tmp_path):
    """A semi-honest curator keeps what reaches it after a round closed: the saved view holds
    the late reports (and names them), the aggregate does not."""
    from ldpsim.simulator.session.collusion import load_view

    table = raw("ldp_kwiksort_rr", n=2000, deployment={"trace": "mobile",
                                                       "round_deadline_s": 0.03},
                collusion={"save_view": True})
    rec, = records(table, out=tmp_path)
    view = load_view(tmp_path / "views" / f"{rec['key']}.msgpack")
    r, = view["rounds"]
    late = np.asarray(r["late_agents"])
    per = rec["comm"]["per_round"][0]
    assert len(late) == per["dropouts_late"] > 0
    assert len(r["report_agents"]) == per["reported"] + per["dropouts_late"]
    assert np.isin(late, np.asarray(r["report_agents"])).all()


def test_an_audit_under_a_deployment_runs_every_trial_through_the_network():
    """The audit's batch path replays the target's randomizer alone, without the network: under
    a ``[deployment]`` (the target may be offline or late) every trial is a full run."""
    rec, = ldpsim.audit("audit_rank", overrides={
        "protocols": ["ldp_kwiksort_rr"], "deployment.trace": "mobile",
        "deployment.round_deadline_s": 0.05}, trials=200)
    assert rec["path"] == "full" and "[deployment]" in rec["path_note"]
    with pytest.raises(ValueError, match=r"--path batch: ldp_kwiksort_rr cannot run as a batch"):
        ldpsim.audit("audit_rank", overrides={"protocols": ["ldp_kwiksort_rr"],
                                              "deployment.availability": 0.5},
                     trials=50, path="batch")


def test_many_batches_of_offline_agents_in_a_row_are_skipped_without_recursion():
    """One agent per batch and nobody online: 3,000 empty batches one after another are
    skipped in a loop (a recursion through them failed the registering frame)."""
    table = raw("ldp_kwiksort_rr", n=3000, deployment={"availability": 0.0})
    table["runtime"].update(batch=1, pools=1)
    rec, = records(table)
    assert rec["rejected"] == 0, rec["rejections"]
    assert rec["virtual"]["dropouts_offline"] == 3000
    assert rec["comm"]["per_round"][0]["reported"] == 0


# -- every input bounded (issue 47) --------------------------------------------------------
@pytest.mark.parametrize("deployment, needles", [
    ({"latency_ms": 1e308}, ["[deployment] latency_ms: got 1e+308", "<= 600000"]),
    ({"speed": 1e-308}, ["[deployment] speed: got 1e-308", ">= 0.001 and <= 1000"]),
    ({"down_mbps": 1e-308}, ["[deployment] down_mbps: got 1e-308", ">= 0.001", "or inf"]),
    ({"up_mbps": 1e300}, ["[deployment] up_mbps: got 1e+300", "<= 1000000", "or inf"]),
    ({"round_deadline_s": 1e300}, ["[deployment] round_deadline_s: got 1e+300", "<= 86400"]),
    ({"compute": 1e30}, ["[deployment] compute: got 1e+30", "<= 3600"]),
    ({"compute": math.nan}, ["[deployment] compute: got nan"]),
])
def test_attack_an_out_of_range_deployment_number_is_one_line_naming_the_range(deployment,
                                                                              needles):
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment=deployment))
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("text, needle", [
    ("class,share\na,nan\nb,1\n", "line 2, share: got nan; allowed: a number >= 0 and <= 1"),
    ("class,share\na,inf\n", "line 2, share: got inf"),
    ("class,share,latency_ms\na,1,1e308\n", "latency_ms: got 1e+308"),
    ("class,share,speed\na,1,1e-308\n", "speed: got 1e-308"),
])
def test_attack_a_trace_cell_out_of_range_is_refused(tmp_path, text, needle):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment={"trace": str(tmp_path / "t.csv")}))
    assert needle in str(e.value)


@pytest.mark.parametrize("entry, needle", [
    ({"round_s": [math.nan]}, "round_s: got nan; allowed: a number >= 0 and <= 3600"),
    ({"round_s": [-5]}, "round_s: got -5"),
    ({"round_s": [1e-6], "numbers": [1e30]}, "numbers: got 1e+30; allowed: an integer >= 0"),
    ({"round_s": [1e-6], "numbers": [1, 2]}, "numbers: 2 entries; allowed: one per round_s"),
    ({"round_s": ["fast"]}, "round_s: got 'fast'"),
    ({"round_s": []}, "round_s: an empty list"),
])
def test_attack_a_cost_file_value_out_of_range_is_refused(tmp_path, entry, needle):
    """A cost file of NaN seconds gave 0 s, -5 a negative virtual round time, 1e30 numbers a
    traceback: each is one line naming the file, the protocol, the key and its range."""
    doc = {"protocols": {"ldp_kwiksort_rr": entry}}
    (tmp_path / "costs.json").write_text(json.dumps(doc))
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr",
                        deployment={"compute": str(tmp_path / "costs.json")}))
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    assert "[deployment] compute: " in str(e.value) and "ldp_kwiksort_rr" in str(e.value)
    assert needle in str(e.value)


def test_attack_a_huge_trace_is_read_only_up_to_its_cap(tmp_path):
    """A trace of more rows than the cap is refused after reading the cap's rows: what follows
    them (here bytes that are no UTF-8 at all) is never read."""
    from ldpsim.simulator.scenario import deployment as dep

    rows = "".join(f"{i},10\n" for i in range(dep.MAX_TRACE_ROWS + 10_000))
    (tmp_path / "t.csv").write_bytes(b"agent,latency_ms\n" + rows.encode() + b"\xff\xfe" * 99)
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment={"trace": str(tmp_path / "t.csv")}))
    assert f"more than {dep.MAX_TRACE_ROWS} rows" in str(e.value), str(e.value)


def test_attack_a_trace_line_longer_than_the_cap_is_refused_unread(tmp_path):
    from ldpsim.simulator.scenario import deployment as dep

    (tmp_path / "t.csv").write_text("class,share\n" + "a" * (4 * dep.MAX_TRACE_LINE) + ",1\n")
    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment={"trace": str(tmp_path / "t.csv")}))
    assert f"line 2 is longer than {dep.MAX_TRACE_LINE} characters" in str(e.value)


@pytest.mark.parametrize("protocol", ["kwiksort", "dp_kwiksort"])
def test_a_round_without_a_single_report_is_absorbed_by_the_all_pairs_curator(protocol):
    """No report at all (every agent offline): the round's empty reports have the schema's
    integer type, and the all-pairs curator counts nothing (it raised a float64 -> int64
    casting error in ``_AllPairsCurator.absorb``)."""
    table = raw(protocol, n=100, deployment={"availability": 0.0, "compute": 0.0})
    rec, = records(table)
    assert rec["status"] == "complete", rec
    assert rec["comm"]["per_round"][0]["reported"] == 0
    if protocol == "kwiksort":
        assert set(rec["output"]["cmp_hat"]) == {0.0}


def test_collect_of_a_round_without_reports_has_the_schemas_dtype():
    from ldpsim.protocols.base import ReportSchema, RoundPlan
    from ldpsim.simulator.session.rounds import Round

    for dtype, want in (("int", np.int64), ("float", np.float64)):
        plan = RoundPlan(0, np.arange(4), None, None, ReportSchema(dtype, 3, 0, 1))
        agents, reports = Round(0, 0, plan, 4, "toy", 0.0, 0.0).collect()
        assert agents.dtype == np.int64 and reports.dtype == want and reports.shape == (0, 3)


def test_a_trace_at_the_cap_with_blank_lines_keeps_every_row(tmp_path):
    from ldpsim.simulator.scenario import deployment as dep

    rows = "".join(f"{i},{i % 50}\n" + ("\n" if i % 1000 == 0 else "")
                   for i in range(dep.MAX_TRACE_ROWS))
    (tmp_path / "t.csv").write_text("agent,latency_ms\n" + rows + "\n\n")
    cols, replay = dep.read_trace(tmp_path / "t.csv")
    assert replay and len(cols["latency_ms"]) == dep.MAX_TRACE_ROWS
    assert cols["latency_ms"][-1] == (dep.MAX_TRACE_ROWS - 1) % 50


def test_dpwevote_under_dropouts_passes_as_often_as_when_everyone_answers():
    """Issue 49: with availability 0.8 drawn per round, each round's quota and weighted sum
    come from that round's respondents, so DPWeVote releases PASS as often as when everyone
    answers (within 4 standard errors of the difference of two shares over the R·k decisions,
    a conservative bound: the two sweeps share data and coins). Before, the quota of round 0's
    respondents was compared with round l's sums: every candidate was released NOT PASS. The
    weight error compares like with like: the respondents' estimated shares with every
    partner's (before, dropouts added (0.2/3)² = 0.0044 to every game's ``sq_err_w``)."""
    reps, n = 20, 20_000
    top = {"repeats": reps, "params": {"epsilon": 2.0}}
    table = raw("dpwevote", n=n, **top)
    table["data"]["candidates"] = 3
    free = records({**table, "deployment": FREE})
    some = records({**table, "deployment": {**FREE, "availability": 0.8}})
    share = [float(np.mean([r["metrics"]["tp"] + r["metrics"]["fp"] for r in recs]))
             for recs in (free, some)]
    decisions = reps * 3
    se = math.sqrt(2 * share[0] * (1 - share[0]) / decisions)
    print(f"PASS share {share[0]:.3f} everyone, {share[1]:.3f} at availability 0.8 (SE {se:.3f})")
    assert 0.2 < share[0] < 0.8  # the games are close enough for the test to say something
    assert abs(share[1] - share[0]) <= 4 * se
    for r in some:  # round 0: online (0.8); round l: joined and online again (0.64)
        for a, p in zip(r["output"]["reporters"], [0.8] + [0.64] * 3, strict=True):
            assert abs(a - p * n) < 5 * math.sqrt(n * p * (1 - p))
    err = [float(np.mean([r["metrics"]["sq_err_w"] for r in recs])) for recs in (free, some)]
    print(f"sq_err_w {err[0]:.2e} everyone, {err[1]:.2e} at availability 0.8")
    assert err[1] < 3 * err[0] < (0.2 / 3) ** 2 / 4
