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
    agents = np.arange(10_000, dtype=np.int64)
    dev = net.draw_devices(spec, 31, agents)
    z = links.link_z(bits(31, agents, net.DEVICE_ROUND, 2)[:, 1])
    want = np.exp(np.array([0.5, 0.0])[dev.cls] * z)
    assert np.array_equal(dev.factors, want)
    assert (dev.factors[dev.cls == 1] == 1.0).all()  # no spread: the median exactly
    part = net.draw_devices(spec, 31, agents[5000:])
    assert np.array_equal(part.factors, dev.factors[5000:])
    # the class is the first draw's, as before the link had a draw of its own
    one = bits(31, agents, net.DEVICE_ROUND, 1)[:, 0]
    assert np.array_equal(dev.cls, (one >= np.uint64(net._draw_threshold(0.4))).astype(np.uint8))
