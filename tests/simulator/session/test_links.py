"""The deployment model's links (``session.links``): each agent's link quality drawn from the
normal distribution itself, and the curator's own link.

What is pinned: at 10^6 agents the largest |z| lies where the normal's extreme-value
distribution puts it (its median is near 4.96) and the draws pass a Kolmogorov-Smirnov test
against N(0, 1); the tails reach 8.29 sigma and are exactly symmetric; a device's factor is
exp(spread z) of its own draw, whoever is drawn along.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols.rng import bits
from ldpsim.simulator.session import links
from ldpsim.simulator.session import network as net
from scipy.special import ndtr

#: 10^6 agents, as the deployment scenarios have
N = 1_000_000
#: the mean and standard deviation of sqrt(n) D_n, the Kolmogorov distribution's:
#: sqrt(pi / 2) ln 2 and sqrt(pi^2 / 12 - mean^2)
KS_MEAN = math.sqrt(math.pi / 2) * math.log(2)
KS_SD = math.sqrt(math.pi ** 2 / 12 - KS_MEAN ** 2)


def _z(key: int = 2024, n: int = N) -> np.ndarray:
    """The link qualities of agents 0 .. n - 1, as ``draw_devices`` draws them."""
    return links.link_z(bits(key, np.arange(n, dtype=np.int64), net.DEVICE_ROUND, 2)[:, 1])


def test_the_largest_of_a_million_links_is_where_the_extreme_value_law_puts_it():
    """max |z| of 10^6 draws: the maximum of 2 10^6 half-normal tails; its median is near 4.9
    and P(max |z| < 4.3) = (1 - 2 Q(4.3))^(10^6) < 10^-7, P(max |z| > 5.6) < 2.2 10^-2 (a
    fixed seed: the test is exact, the bounds say what it should be). A grid cut at 3.5 sigma
    never gets there."""
    z = _z()
    top = float(np.abs(z).max())
    assert 4.3 < top < 5.6, top
    assert (1 - 2 * ndtr(-4.3)) ** N < 1e-7


def test_a_million_links_pass_a_kolmogorov_smirnov_test_against_the_normal():
    """sqrt(n) D_n below its mean plus 6 standard deviations (Kolmogorov's distribution), and
    the mean and variance within 6 standard errors."""
    z = np.sort(_z(key=77))
    cdf = ndtr(z)
    i = np.arange(1, N + 1)
    d = max(float((i / N - cdf).max()), float((cdf - (i - 1) / N).max()))
    assert math.sqrt(N) * d < KS_MEAN + 6 * KS_SD, d
    assert abs(float(z.mean())) < 6 / math.sqrt(N)
    assert abs(float(z.var()) - 1) < 6 * math.sqrt(2 / N)


def test_the_tails_reach_8_sigma_and_are_exactly_symmetric():
    top = np.uint64(1 << 63)
    edge = np.array([0, ((1 << 52) - 1) << 11, 12345 << 11, 2047], dtype=np.uint64)
    lo = links.link_z(edge)
    hi = links.link_z(edge | top)
    assert np.array_equal(hi, -lo)  # the top bit is the side, nothing else changes
    assert lo[0] == lo[-1] < -8.29 and lo[0] > -8.3  # u = 2^-54: the farthest either way
    assert -1e-15 < lo[1] < 0  # u just below 1/2
    assert lo[0] == net.normal_quantile(np.array([2.0 ** -54]))[0]
    # the 11 lowest bits are not read
    assert np.array_equal(links.link_z(edge | np.uint64(1234)), lo)


def test_a_devices_factor_is_exp_spread_z_of_its_own_draw():
    spec = {"classes": {"share": [0.4, 0.6], "latency_ms": [10.0, 40.0], "spread": [0.5, 0.0]}}
    agents = np.arange(3 * net.CHUNK + 5, dtype=np.int64)  # drawn a chunk at a time
    dev = net.draw_devices(spec, 31, agents)
    z = links.link_z(bits(31, agents, net.DEVICE_ROUND, 2)[:, 1])
    want = links.exp(np.array([0.5, 0.0])[dev.cls] * z)
    assert np.array_equal(dev.factors, want)
    assert np.allclose(dev.factors, np.exp(np.array([0.5, 0.0])[dev.cls] * z), rtol=1e-15)
    assert (dev.factors[dev.cls == 1] == 1.0).all()  # no spread: the median exactly
    part = net.draw_devices(spec, 31, agents[5000:])
    assert np.array_equal(part.factors, dev.factors[5000:])  # chunks elsewhere
    # the class is the first draw's, as before the link had a draw of its own
    one = bits(31, agents, net.DEVICE_ROUND, 1)[:, 0]
    assert np.array_equal(dev.cls, (one >= np.uint64(net._draw_threshold(0.4))).astype(np.uint8))


# -- the curator's own link ----------------------------------------------------------------
def _records(deployment: dict, n: int = 100, protocol: str = "safari") -> dict:
    from tests.simulator.session.test_deployment import raw, records

    (rec,) = records(raw(protocol, n=n, deployment=deployment))
    return rec


#: the hand-computed link of ``test_deployment``: every answer lands 0.0232 s after round 0
#: starts, its query's 50 wire bytes taking 0.4 ms on the agent's 1 Mbit/s
LINK = {"latency_ms": 10.0, "down_mbps": 1.0, "up_mbps": 0.5, "speed": 0.5, "compute": 0.001}
#: 50 wire bytes over a 5 Mbit/s curator link
STEP = 8 * 50 / 5e6


def test_the_curators_link_serialises_the_queries_it_sends_in_agent_order():
    """Agent i's query leaves the curator at (i + 1) 80 us and reaches it no earlier: the last
    of 100 lands 8 ms - 0.4 ms later than at an unlimited curator; a deadline of 25 ms then
    drops the agents whose query left after 2.2 ms + 0.4 ms (i >= 27)."""
    r0 = _records({**LINK, "curator_down_mbps": 5.0})["comm"]["per_round"][0]
    assert r0["virtual_s"] == pytest.approx(0.0232 + 100 * STEP - 0.0004, rel=1e-12)
    assert r0["completion_p50_s"] > 0.0232
    late = _records({**LINK, "curator_down_mbps": 5.0, "round_deadline_s": 0.025})
    r0 = late["comm"]["per_round"][0]
    assert (r0["dropouts_late"], r0["reported"], r0["virtual_s"]) == (73, 27, 0.025)


def test_the_curators_link_takes_the_reports_one_after_the_other():
    """Every report would land at 0.0232 s; through a 5 Mbit/s link, one every 80 us."""
    r0 = _records({**LINK, "curator_up_mbps": 5.0})["comm"]["per_round"][0]
    assert r0["virtual_s"] == pytest.approx(0.0232 + 99 * STEP, rel=1e-12)
    both = _records({**LINK, "curator_up_mbps": 5.0, "curator_down_mbps": 5.0})
    assert both["comm"]["per_round"][0]["virtual_s"] == pytest.approx(0.0232 + 99 * STEP,
                                                                      rel=1e-12)


def test_report_landings_follow_the_queue_recursion():
    rng = np.random.default_rng(4)
    a = rng.exponential(0.01, 2000)
    w = rng.integers(1, 3000, 2000)
    c = 8 / 2e8
    got = links.report_landings(a, w, c)
    order = np.argsort(a, kind="stable")
    want, last = np.empty_like(a), 0.0
    for k in order:
        last = max(a[k], last + w[k] * c)
        want[k] = last
    assert np.allclose(got, want, rtol=1e-12, atol=1e-15)
    assert (got >= a).all()
    assert np.array_equal(links.query_departures(w, c), np.cumsum(w) * c)


def test_an_unlimited_curator_link_is_the_model_without_one_bit_for_bit():
    """inf each way (the default) gives the records of a deployment that does not state it,
    and the rounds' times of the agents' links alone."""
    dep = {"trace": "mobile", "round_deadline_s": 0.08}
    plain = _records(dep, n=600)
    stated = _records({**dep, "curator_down_mbps": math.inf, "curator_up_mbps": math.inf},
                      n=600)
    assert plain["deployment"]["curator_down_mbps"] is None
    for k in ("output", "metrics", "virtual", "deployment", "key"):
        assert stated[k] == plain[k], k
    assert _untimed(stated["comm"]["per_round"]) == _untimed(plain["comm"]["per_round"])
    assert plain["virtual"]["dropouts_late"] > 0
    # the network alone: close_round's times are completion_times' when the link is unlimited
    spec = {"classes": {"share": [1.0], "latency_ms": [20.0], "up_mbps": [1.0],
                        "spread": [0.6]}}
    model = net.DeploymentModel.of({**spec, "curator_up_mbps": None}, (3, 4))
    assert (model.curator_down_s, model.curator_up_s) == (0.0, 0.0)
    network = model.network(1000)
    agents = np.arange(1000)
    down, up = network.sizes(1000)
    down[:], up[:] = 30, 40
    network.close_round(net.RoundTraffic(0, agents, 1000, np.ones(1000, bool), None, down,
                                         0, up, 1))
    alone = net.completion_times(network.devices, slice(0, 1000), down, 0, up, 0.0)
    assert np.array_equal(network._times[:1000], alone)


def _untimed(rounds: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("wall_s", "curator_cpu_s")}
            for r in rounds]


@pytest.mark.parametrize("deployment, needle", [
    ({"curator_up_mbps": 0}, "[deployment] curator_up_mbps: got 0"),
    ({"curator_down_mbps": -1.0}, "[deployment] curator_down_mbps: got -1.0"),
    ({"curator_down_mbps": "fast"}, "[deployment] curator_down_mbps: got 'fast'"),
    ({"curator_mbps": 10}, "did you mean"),
])
def test_a_bad_curator_capacity_is_one_line_naming_the_key(deployment, needle):
    from ldpsim.simulator.scenario import scenario as sc

    from tests.simulator.session.test_deployment import raw

    with pytest.raises(sc.ScenarioError) as e:
        sc.load(raw=raw("ldp_kwiksort_rr", deployment=deployment))
    assert needle in str(e.value) and len(str(e.value).splitlines()) == 1
    if "got" in needle:
        assert "or inf (no limit)" in str(e.value)


def _draws_and_edges() -> tuple[np.ndarray, np.ndarray]:
    """10^6 draws and the edges of every region (the farthest tails, the middle, both sides
    of the tails' edge), with classes of spreads 0 .. 3 (3: the largest a table allows)."""
    b = bits(5, np.arange(N, dtype=np.int64), net.DEVICE_ROUND, 1, offset=1)[:, 0]
    edges = [0, 2047, ((1 << 52) - 1) << 11, 1 << 63, 2 ** 64 - 1]
    for p in (0.02425, 0.5 - 0.47575):
        k = int(p * 2.0 ** 53)
        edges += [(k + d) << 11 for d in range(-3, 4)] + [((k + d) << 11) | 1 << 63
                                                         for d in range(-3, 4)]
    b = np.concatenate([b, np.array(edges, dtype=np.uint64)])
    return b, (np.arange(len(b)) % 4).astype(np.uint8)


SPREADS = np.array([0.0, 0.55, 1.0, 3.0])


@pytest.mark.skipif(links.LINKS.built is None, reason="the compiled kernel was not built")
def test_the_compiled_link_factors_are_numpys_bit_for_bit():
    """The compiled pass leaves the tails to numpy and computes the rest in numpy's order of
    operations: the same bits."""
    b, cls = _draws_and_edges()
    got = {}
    before = links.LINKS.name()
    try:
        for mode in ("compiled", "numpy"):
            links.LINKS.use(mode)
            got[mode] = links.link_factors(b.copy(), cls, SPREADS)
    finally:
        links.LINKS.use(before)
    assert np.array_equal(got["compiled"].view(np.uint64), got["numpy"].view(np.uint64))
    assert (got["numpy"][cls == 0] == 1.0).all()
    assert np.isfinite(got["numpy"]).all()


def test_exp_and_log_are_the_maths_librarys_to_1e_15():
    x = np.concatenate([np.linspace(-30, 30, 100_001), [0.0, -0.0, 0.5 * math.log(2)]])
    ref = np.array([math.exp(v) for v in x])
    assert np.max(np.abs(links.exp(x) - ref) / ref) < 1e-15
    p = np.concatenate([np.geomspace(2.0 ** -54, 0.999, 100_001), [0.5, 2 ** -0.5]])
    ref = np.array([math.log(v) for v in p])
    assert np.max(np.abs(links.log(p) - ref) / np.abs(ref)) < 1e-15
    assert links.exp(np.array([0.0]))[0] == 1.0 and links.log(np.array([1.0]))[0] == 0.0


PROBE = """
import hashlib, sys
import numpy as np
from ldpsim.simulator.session import links
from tests.simulator.session.test_links import SPREADS, _draws_and_edges
b, cls = _draws_and_edges()
out = []
for mode in ("compiled", "numpy") if links.LINKS.built is not None else ("numpy",):
    links.LINKS.use(mode)
    f = links.link_factors(b.copy(), cls, SPREADS)
    out.append(hashlib.sha256(f.tobytes()).hexdigest())
print(" ".join(out))
"""


def test_the_link_factors_are_the_same_bits_at_numpys_baseline_simd():
    """numpy's own exp and log round differently at its baseline and with AVX-512: the
    factors use neither (``links.exp``, ``links.log``), so they are the same bits whatever
    numpy dispatches (``tests/test_machines.py``'s environment)."""
    import subprocess
    import sys

    from numpy._core._multiarray_umath import __cpu_dispatch__

    from tests.conftest import ROOT

    runs = []
    for env in ({}, {"NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__)}):
        res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             env={**__import__("os").environ, **env}, cwd=ROOT, check=True)
        runs.append(res.stdout.split())
    assert runs[0] == runs[1] and len(set(runs[0])) == 1
