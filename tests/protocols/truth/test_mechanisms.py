"""LP (Eq. 6-7), RR with NULL (Eq. 8) and the 2-Layer baseline: the reports the protocols send
are checked statistically against each mechanism's theory (fixed seeds, 5-SE tolerances), their
exact likelihoods against independent formulas, and every neighbouring-cell likelihood ratio
against the claimed ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import Block
from ldpsim.protocols.truth import mechanisms as tm
from scipy import integrate, stats

Z = 5.0
KEY = rngm.stream_key(11, "agents")
LP, RR, TL = PROTOCOLS["truth_lp"], PROTOCOLS["truth_rr"], PROTOCOLS["truth_two_layer"]


def _public(tasks: int, levels: int) -> dict:
    return {"tasks": tasks, "levels": levels, "data_type": "answers"}


def _reports(proto, params: dict, rows: np.ndarray, levels: int) -> np.ndarray:
    public = _public(rows.shape[1], levels)
    resolved = proto.resolve(params, public)
    bound = proto.bind(resolved, public, resolved=True)
    return proto.respond(Block(0, rows, np.arange(len(rows)), KEY, bound))


def test_codes_roundtrip():
    rows = np.array([[0.0, np.nan, 3.0], [np.nan, np.nan, 1.0]])
    codes = tm.to_codes(rows, 4)
    assert codes.tolist() == [[0, 4, 3], [4, 4, 1]]
    assert np.array_equal(tm.from_codes(codes, 4), rows, equal_nan=True)


# --------------------------------------------------------------------------- LP


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_lp_noise_scale_matches_the_budget(eps):
    """Answered cells: report - answer ~ Lap(|Γ|/ε) (the exact mechanism's scale tΛ, within
    2 10^-6 of it). E|X| = b and sd|X| = b (5-SE band)."""
    levels, n_agents, tasks = 10, 200, 100
    rows = np.full((n_agents, tasks), 3.0)
    noise = (_reports(LP, {"epsilon": eps}, rows, levels) - 3.0).ravel()
    b = tm.lp_mechanism(levels, eps).scale
    assert b == pytest.approx(levels / eps, rel=2e-6)
    assert abs(np.abs(noise).mean() - b) < Z * b / math.sqrt(noise.size)
    assert abs(noise.mean()) < Z * math.sqrt(2) * b / math.sqrt(noise.size)
    assert stats.kstest(noise / b, "laplace").pvalue > 1e-4


def test_lp_null_cells_are_perturbed_uniform_fill():
    """NULL cells come out as finite numbers: v ~ U{0..L-1} plus Laplace noise."""
    levels, eps = 10, 1.0
    rows = np.full((300, 100), np.nan)
    out = _reports(LP, {"epsilon": eps}, rows, levels).ravel()
    assert np.isfinite(out).all()
    b = levels / eps
    var = (levels**2 - 1) / 12 + 2 * b * b
    assert abs(out.mean() - (levels - 1) / 2) < Z * math.sqrt(var / out.size)
    assert abs(out.var() - var) < Z * var * math.sqrt(5.0 / out.size)  # Laplace kurtosis 6


def test_lp_null_cells_constant_fill():
    rows = np.full((300, 100), np.nan)
    out = _reports(LP, {"epsilon": 1.0, "null_fill": "constant", "fill_value": 2.0},
                   rows, 10).ravel()
    b = 10.0
    assert abs(out.mean() - 2.0) < Z * math.sqrt(2) * b / math.sqrt(out.size)


def test_lp_log_likelihood_is_the_exact_pmf():
    """Reports on the grid: the discrete Laplace log-pmf of each answered cell, the average pmf
    over the L fills for a uniform-filled NULL (its value for a constant fill); about the
    Laplace density times the grid step. A report off the grid is impossible."""
    levels, eps = 5, 2.0
    lap = tm.lp_mechanism(levels, eps)
    lam, t = lap.grid, lap.t
    assert lam == levels / (math.floor(eps * t) + 0.5 - 1.25)
    rows = np.array([[1.0, np.nan, 4.0]])
    y = np.rint(np.array([[0.3, 2.5, 9.0]]) / lam) * lam

    def logpmf(y, v):
        return math.log(math.tanh(0.5 / t)) - abs(round(y / lam) - round(v / lam)) / t

    ans = logpmf(y[0, 0], 1.0) + logpmf(y[0, 2], 4.0)
    mix = math.log(np.mean([math.exp(logpmf(y[0, 1], v)) for v in range(levels)]))
    got = tm.lp_log_likelihood(y, rows, levels, eps)
    assert got[0] == pytest.approx(ans + mix, rel=1e-12)
    const = tm.lp_log_likelihood(y, rows, levels, eps, "constant", 1.5)
    assert const[0] == pytest.approx(ans + logpmf(y[0, 1], 1.5), rel=1e-12)
    b = levels / eps
    dens = stats.laplace.logpdf([y[0, 0] - 1.0, y[0, 2] - 4.0], scale=b).sum() + \
        math.log(np.mean(stats.laplace.pdf(y[0, 1] - np.arange(levels), scale=b))) + 3 * \
        math.log(lam)
    assert got[0] == pytest.approx(dens, abs=1e-4)
    off = y.copy()
    off[0, 2] = np.nextafter(off[0, 2], np.inf)
    for mode in ("uniform", "constant"):
        assert tm.lp_log_likelihood(off, rows, levels, eps, mode, 1.5)[0] == -np.inf
    off = y.copy()
    off[0, 1] += lam / 2  # the NULL cell off the grid: impossible for every fill
    assert tm.lp_log_likelihood(off, rows, levels, eps)[0] == -np.inf


def test_lp_neighbouring_cells_ratio_within_epsilon():
    """Rows differing in one cell (0 vs L-1, or NULL vs a value): |log-ratio| <= ε(L-1)/L, up
    to the grid's rounding of L-1 (at most 1/(2t)), for every report; scan task 0's report
    over grid points, the other cells fixed."""
    levels, eps = 10, 1.0
    lap = tm.lp_mechanism(levels, eps)
    base = np.full(6, np.nan)
    base[1:] = 4.0
    cells = [np.nan, 0.0, 9.0]
    ys = np.rint(np.linspace(-30, 40, 701) / lap.grid) * lap.grid
    grid = np.tile(np.rint(np.array([0.0, 3.1, 4.2, -1.0, 7.5, 4.0]) / lap.grid) * lap.grid,
                   (len(ys), 1))
    grid[:, 0] = ys
    worst = 0.0
    for a in cells:
        for b in cells:
            ra, rb = base.copy(), base.copy()
            ra[0], rb[0] = a, b
            diff = tm.lp_log_likelihood(grid, np.tile(ra, (len(ys), 1)), levels, eps) - \
                tm.lp_log_likelihood(grid, np.tile(rb, (len(ys), 1)), levels, eps)
            worst = max(worst, np.abs(diff).max())
    assert worst == pytest.approx(np.rint(9.0 / lap.grid) / lap.t, abs=1e-12)
    assert worst <= eps * (levels - 1) / levels + 0.5 / lap.t
    assert worst > 0.99 * eps * (levels - 1) / levels  # attained by 0 vs 9 in the tails


# --------------------------------------------------------------------------- RR


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_rr_transition_frequencies_match_eq8(eps):
    """Every input code, NULL included: P(same) = e^ε/(L+e^ε), others 1/(L+e^ε) each."""
    levels, n_agents, tasks = 4, 400, 100
    p = tm.rr_keep_probability(levels, eps)
    for code in range(levels + 1):
        value = np.nan if code == levels else float(code)
        out = _reports(RR, {"epsilon": eps}, np.full((n_agents, tasks), value), levels).ravel()
        counts = np.bincount(out, minlength=levels + 1)
        probs = np.full(levels + 1, (1 - p) / levels)
        probs[code] = p
        assert stats.chisquare(counts, probs * out.size).pvalue > 1e-5
        assert abs(counts[code] / out.size - p) < Z * math.sqrt(p * (1 - p) / out.size)


def test_rr_null_is_perturbed_into_answers():
    levels, eps = 10, 1.0
    out = _reports(RR, {"epsilon": eps}, np.full((300, 200), np.nan), levels)
    frac = (out != levels).mean()
    want = levels / (levels + math.e)
    assert abs(frac - want) < Z * math.sqrt(want * (1 - want) / out.size)
    assert out.min() >= 0 and out.max() <= levels


def test_rr_likelihood_and_exact_ratio():
    levels, eps = 5, 1.2
    mat = tm.rr_transition_matrix(levels, eps)
    assert mat.sum(axis=1) == pytest.approx(np.ones(levels + 1))
    ratio = np.log(mat[:, None, :] / mat[None, :, :])
    assert np.abs(ratio).max() == pytest.approx(eps, rel=1e-12)  # ε-cell LDP, tight
    codes = np.array([[0, 5, 2]])
    y = np.array([[0, 1, 5]])
    want = math.log(mat[0, 0]) + math.log(mat[5, 1]) + math.log(mat[2, 5])
    assert tm.rr_log_likelihood(y, codes, levels, eps)[0] == pytest.approx(want, rel=1e-12)


# --------------------------------------------------------------------------- 2-Layer


def test_two_layer_budgets_and_per_worker_keep_rates():
    """Layer 1: ε_i ~ U[ε(1-s), ε(1+s)]; layer 2: each worker keeps with p(ε_i)."""
    levels, eps, spread = 4, 2.0, 0.5
    n_agents, tasks = 400, 400
    agents = np.arange(n_agents)
    eps_i = tm.two_layer_epsilons(rngm.uniform(KEY, agents, 0, 1, 0)[:, 0], eps, spread)
    assert eps_i.min() >= eps * (1 - spread) and eps_i.max() <= eps * (1 + spread)
    sd = 2 * eps * spread / math.sqrt(12)
    assert abs(eps_i.mean() - eps) < Z * sd / math.sqrt(n_agents)
    rows = np.full((n_agents, tasks), 1.0)
    out = _reports(TL, {"epsilon": eps, "spread": spread}, rows, levels)
    keep = (out == 1).mean(axis=1)
    p = tm.rr_keep_probability(levels, eps_i)
    se = np.sqrt(p * (1 - p) / tasks)
    assert np.all(np.abs(keep - p) < Z * se)
    assert np.corrcoef(keep, eps_i)[0, 1] > 0.5  # workers differ, and the curator cannot see ε_i


def test_two_layer_likelihood_is_the_average_over_budgets():
    levels, eps, spread = 3, 1.0, 0.8
    codes = np.array([[0, 1, 3, 2, 2]])
    y = np.array([[0, 2, 3, 3, 2]])
    same, n = 3, 5

    def f(e):
        p = tm.rr_keep_probability(levels, e)
        return p**same * ((1 - p) / levels) ** (n - same)

    lo, hi = eps * (1 - spread), eps * (1 + spread)
    want = math.log(integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13)[0] / (hi - lo))
    got = tm.two_layer_log_likelihood(y, codes, levels, eps, spread)[0]
    assert got == pytest.approx(want, rel=1e-10)
    assert tm.two_layer_log_likelihood(y, codes, levels, eps, 0.0)[0] == pytest.approx(
        tm.rr_log_likelihood(y, codes, levels, eps)[0])


def test_two_layer_worst_case_ratio_within_claim():
    """Neighbouring rows (one cell NULL vs 0): |log-ratio| <= ε(1 + spread) for any report."""
    levels, eps, spread, tasks = 3, 1.0, 1.0, 6
    claim = TL.claim(TL.resolve({"epsilon": eps, "spread": spread}, _public(tasks, levels)),
                     _public(tasks, levels))
    assert claim.epsilon == pytest.approx(2.0)
    a = np.array([[3, 1, 1, 1, 1, 1]])
    b = np.array([[0, 1, 1, 1, 1, 1]])
    rng = rngm.party_generator(5)
    y = rng.integers(0, levels + 1, size=(3000, tasks))
    y[:1000, 1:] = 1  # reports that reveal a large ε_i
    diff = tm.two_layer_log_likelihood(y, a, levels, eps, spread) - tm.two_layer_log_likelihood(
        y, b, levels, eps, spread)
    assert np.abs(diff).max() <= claim.epsilon + 1e-9
    assert np.abs(diff).max() > eps  # above the nominal (mean) ε: the worst case is real
