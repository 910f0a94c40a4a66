"""The floating-point attack on Laplace reports (``simulator.audit.float_attack``).

Against textbook float Laplace (``v + L(u)``, kept here as a test double) the attack rules the
neighbouring input out for most reports: ε = ∞ on that event. Against every Laplace value ldpsim
releases -- the exact discrete mechanism on a grid, local and central -- it rules out nothing,
still reproduces every report from its true input, and rejects a report moved off the grid (so
it models the mechanism exactly and is not vacuous).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, get_data_kind
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.mechanisms.laplace import T
from ldpsim.protocols.truth import mechanisms as tm
from ldpsim.protocols.vote.dpwevote import laplace_mechanisms, laplace_scales
from ldpsim.protocols.words import AgentWords
from ldpsim.simulator.audit.float_attack import float_leak, reproducible

N = 20_000


def textbook_laplace(values: np.ndarray, u: np.ndarray, scale: float) -> np.ndarray:
    """The old form every family but one used: no snapping (the test double)."""
    return np.asarray(values, dtype=np.float64) + rngm.laplace_from_uniform(u, scale)


@pytest.mark.parametrize("scale", [0.5, 2.0, 7.3])
def test_attack_reads_the_input_from_textbook_float_laplace(scale):
    u = rngm.uniform(11, np.arange(N), 0, 1)[:, 0]
    reports = textbook_laplace(np.ones(N), u, scale)
    for other in (0.0, 2.0):
        leak = float_leak(reports, 1.0, other, scale, grid=None)
        assert leak["true_reproduced"] == 1.0
        # measured 0.75-0.87; the event has probability 0 under the other input
        assert leak["other_ruled_out"] > 0.3
    rev = reproducible(textbook_laplace(np.zeros(N), u, scale), 1.0, scale, grid=None)
    assert rev.mean() < 0.7  # and the other way round


@pytest.mark.parametrize("scale", [0.5, 2.0, 7.3])
def test_exact_laplace_rules_nothing_out(scale):
    lap = mech.Laplace(1.0, scale)
    reports = lap.perturb(np.ones(N), AgentWords(12, np.arange(N), 0))
    for other in (0.0, 2.0, 1.0 + 1e-3, 1.0 / 3.0):
        leak = float_leak(reports, 1.0, other, lap.scale, lap.grid)
        assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}
    # not vacuous: a report off the grid is reproduced by no input
    off = reports + lap.grid / 2
    assert not reproducible(off, 1.0, lap.scale, lap.grid).any()


def test_dpwevote_laplace_weights_and_opinions_leak_nothing():
    ds = get_data_kind("weighted_votes").build({"n": N, "candidates": 2}, 3)
    p = PROTOCOLS["dpwevote_laplace"]
    params = p.resolve({"epsilon": 1.0}, ds.public)
    budget = p.budget_of(p.bind(params, ds.public, resolved=True))
    sw, _ = laplace_scales(budget)
    lap_w, lap_phi = laplace_mechanisms(budget)
    rows, agents = ds.rows(0, N), np.arange(N)
    w = p.respond(Block(0, rows, agents, 9, p.bind(params, ds.public, resolved=True),
                        broadcast={"phase": "weights"}))[:,
                                                                                                0]
    leak = float_leak(w, rows[:, 0], rows[:, 0] + 1, lap_w.scale, lap_w.grid)
    assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}
    bc = {"phase": "opinions", "candidate": 0, "released": []}
    phi = p.respond(Block(1, rows, agents, 9, p.bind(params, ds.public, resolved=True),
                          broadcast=bc))[:, 0]
    leak = float_leak(phi, rows[:, 1], 1 - rows[:, 1], lap_phi.scale, lap_phi.grid)
    assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}
    # the old form of the same weight report: the curator read the weight outright
    u = rngm.uniform(9, agents, 0, 1)[:, 0]
    old = textbook_laplace(rows[:, 0], u, sw)
    assert float_leak(old, rows[:, 0], rows[:, 0] + 1, sw, grid=None)["other_ruled_out"] > 0.3


def test_ldp_kwiksort_lap_answers_leak_nothing():
    from ldpsim.protocols.rank.profile import answers

    ds = get_data_kind("mallows").build({"n": N, "m": 6, "theta": 0.5}, 4)
    p = PROTOCOLS["ldp_kwiksort_lap"]
    params = p.resolve({"epsilon": 1.0, "queries": 2}, ds.public)
    rows, agents = ds.rows(0, N), np.arange(N)
    queries = rngm.distinct_indices(rngm.uniform(5, agents, 0, 2), 15)
    rep = p.respond(Block(0, rows, agents, 6, p.bind(params, ds.public, resolved=True),
                          queries=queries))
    o = answers(rows, queries)
    lap = mech.Laplace(0.5)
    leak = float_leak(rep, o, 1 - o, lap.scale, lap.grid)
    assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}


def test_truth_lp_cells_leak_nothing():
    levels, eps = 5, 1.0
    gen = np.random.default_rng(0)
    rows = gen.integers(1, levels + 1, size=(N // 10, 10)).astype(np.float64)
    u_fill = rngm.uniform(1, np.arange(len(rows)), 0, 10)
    rep = tm.lp_perturb(rows, u_fill, AgentWords(2, np.arange(len(rows)), 0), levels, eps)
    lap = tm.lp_mechanism(levels, eps)
    leak = float_leak(rep, rows, np.where(rows > 1, rows - 1, rows + 1), lap.scale, lap.grid)
    assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}


@pytest.mark.parametrize("name", ["ethics_vldp", "ethics_rldp_laplace"])
def test_ethics_local_laplace_releases_leak_nothing(name):
    from ldpsim.protocols.ethics.mle import constrained_mle
    from ldpsim.protocols.ethics.protocols import split_rows

    ds = get_data_kind("ethics_synthetic").build({"n": 400, "d": 4, "records": 13}, 1)
    p = PROTOCOLS[name]
    params = p.resolve({"epsilon": 1.0}, ds.public)
    rows, agents = ds.rows(0, ds.n), np.arange(ds.n)
    block = Block(0, rows, agents, 8, p.bind(params, ds.public, resolved=True))
    noisy, eps = p.release(block)
    eps_col, z = split_rows(rows, ds.public)
    beta = constrained_mle(z, float(ds.public["bound"]))
    lap = p.mechanism_for(block.mechanism.voter_epsilon(eps_col), beta, block)
    leak = float_leak(noisy, beta, beta + 0.125, lap.scale, lap.grid)
    assert leak == {"true_reproduced": 1.0, "other_ruled_out": 0.0}


def test_the_attack_window_covers_the_whole_noise_range():
    """Uniforms at both ends of the grid and the middle: the inversion finds them all; the
    exact mechanism's most extreme releases are grid points too."""
    k = np.array([0, 1, 2, 2**52 - 1, 2**52, 2**52 + 1, 2**53 - 2, 2**53 - 1], dtype=np.float64)
    u = np.minimum((k + 0.5) * 2.0**-53, 1 - 2.0**-53)
    for v, b in ((0.0, 1.0), (3.0, 0.01), (-2.5, 1e4)):
        y = v + rngm.laplace_from_uniform(u, b)
        assert reproducible(y, v, b, grid=None).all()
        lap = mech.Laplace(1.0, b)
        # the largest |Z| the sampler can give (t words-limit), at the largest input allowed
        z = np.array([0, 1, -1, T << 16, -(T << 16)])
        top = (2.0**50 - 1) * lap.grid
        y = lap.from_noise(np.array([v, v, top, top, -top]), z)
        assert reproducible(y, v, lap.scale, lap.grid).all()
    assert math.isfinite(float(rngm.laplace_from_uniform(u, 1.0).max()))
