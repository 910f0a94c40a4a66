"""What the coalition learned in one run: the audit's attacks on the run's own adversary view.

``ldpsim audit`` measures a protocol's worst case on a tiny population; a sweep with
``[collusion] attacks = true`` records, for every run, what its actual coalition (the curator,
if it colludes, plus the colluding agents) learned about the run's honest agents, so "utility
and leakage against the colluding fraction" is one scenario and one plot.

The game, per target: ``attack_targets`` honest agents are drawn (keyed by the run's seed); each
gets a decoy, the private row of another agent drawn uniformly from the whole population (the
data's own prior). The coalition must tell the target's true row from the decoy, with equal
prior, from its view only. The harness, which knows the truth, scores the guesses:

* ``report_accuracy`` (the single-report attack, ``audit.bayes_guess`` restricted to the two
  candidates): compare Σ_rounds log P(target's report | row) under both rows (the protocol's
  closed-form ``log_likelihood``); a tie (the rows answer alike, or the reports cannot tell)
  scores ½. Needs the curator in the coalition. Under ε-LDP with total budget ε per agent, no
  test does better than e^ε / (1 + e^ε) (``report_bound``) for any pair of rows; a claim that
  protects a part of a row (``PrivacyClaim.unit``: one cell, one record) bounds nothing here.
* ``differencing_accuracy`` (``audit.differencing_guess``): the released aggregate minus the
  coalition's own rows' contribution, compared with each candidate's contribution; exact on a
  non-private aggregate when every other agent colludes, about ½ when many agents are honest.

Accuracies are means over the targets the attack could score (None when it applies to none:
no closed-form likelihood, no reports in the view, no additive aggregate). ½ is guessing. Each
comes with what it rests on: ``*_trials`` (the targets scored) and ``*_wins`` (their summed
scores, a tie counting ½), from which the record's exact 95% interval (``*_interval``,
Clopper–Pearson, ``exact_interval``) and a summary's pooled one over repetitions follow. At
n − 1 colluders a run has one honest agent: one target, one trial.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ldpsim.protocols.base import Protocol
from ldpsim.protocols.data import Dataset
from ldpsim.protocols.rng import party_generator, stream_key
from ldpsim.simulator.audit.audit import contributions, log_likelihoods, residual
from ldpsim.simulator.results.intervals import exact_interval


def _pick(seed: int, honest: np.ndarray, n: int, targets: int) -> tuple[np.ndarray, np.ndarray]:
    """(targets, decoy agents): up to ``targets`` honest agents, each with another agent."""
    g = party_generator(stream_key(seed, "leakage"))
    chosen = np.sort(g.choice(honest, size=min(targets, len(honest)), replace=False))
    decoys = g.integers(0, n - 1, size=len(chosen)) if n > 1 else np.zeros(len(chosen), int)
    decoys = decoys + (decoys >= chosen)  # uniform over the other agents
    return chosen, decoys


def _scored(out: dict[str, Any], name: str, scores: np.ndarray) -> None:
    """Enter an attack's ``scores`` (one per target it scored) in ``out``: its accuracy, trials,
    wins and exact interval."""
    wins, trials = float(scores.sum()), int(len(scores))
    out[f"{name}_accuracy"] = float(scores.mean())
    out[f"{name}_trials"], out[f"{name}_wins"] = trials, wins
    out[f"{name}_interval"] = exact_interval(wins, trials)


def _score(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 where ``a`` (the truth's score) wins, ½ on a tie (NaN counts as a tie), 0 where not."""
    with np.errstate(invalid="ignore"):
        return np.where(a > b, 1.0, np.where(a < b, 0.0, 0.5))


def run_leakage(protocol: Protocol, view: dict[str, Any], ds: Dataset, colluders: np.ndarray,
                curator_colludes: bool, seed: int, targets: int = 200) -> dict[str, Any]:
    """What the coalition of one run learned about its honest agents (module docstring).

    Parameters
    ----------
    protocol : Protocol
        The run's protocol.
    view : dict
        The curator's recorded view of the run (``record_view``).
    ds : Dataset
        The run's data set (the harness's ground truth: rows of targets, decoys, colluders).
    colluders : ndarray of bool
        The colluding agents (mask over all n agents).
    curator_colludes : bool
        Whether the curator is in the coalition (else its view holds no reports).
    seed : int
        The run's seed (keys the choice of targets and decoys).
    targets : int
        How many honest agents to attack.

    Returns
    -------
    dict
        ``targets``, ``report_accuracy``, ``differencing_accuracy`` (each with its
        ``_trials``, ``_wins`` and exact ``_interval`` where scored), ``report_bound`` (the LDP
        ceiling e^ε/(1+e^ε) of the report attack, None unless the claim is local and finite),
        ``colluders`` (count) and ``curator``.
    """
    n = ds.n
    honest = np.flatnonzero(~colluders)
    out: dict[str, Any] = {"targets": 0, "report_accuracy": None,
                           "differencing_accuracy": None, "report_bound": None,
                           "colluders": int(colluders.sum()), "curator": bool(curator_colludes)}
    params, public = view["params"], view["public"]
    claim = protocol.claim(params, public)
    if claim.model == "local" and claim.unit == "row" and math.isfinite(claim.epsilon):
        out["report_bound"] = 1.0 / (1.0 + math.exp(-claim.epsilon))
    if len(honest) == 0:
        return out
    chosen, decoys = _pick(seed, honest, n, targets)
    every = ds.rows(0, n)
    truth, decoy = every[chosen], every[decoys]
    out["targets"] = int(len(chosen))
    if curator_colludes:
        got = log_likelihoods(protocol, view, chosen, np.stack([truth, decoy], axis=1))
        if got is not None and got[1].any():
            ll, seen = got
            _scored(out, "report", _score(ll[seen, 0], ll[seen, 1]))
    resid = residual(protocol, view, every[colluders])
    if resid is not None:
        ok = np.isfinite(resid)
        c_truth = contributions(protocol, view, truth)
        c_decoy = contributions(protocol, view, decoy)
        if ok.any() and c_truth is not None and c_decoy is not None:
            def dist(contrib: np.ndarray) -> np.ndarray:
                return ((resid[ok] - contrib[:, ok]) ** 2).sum(axis=1)

            # the closer candidate wins: score the truth's negated distance
            _scored(out, "differencing", _score(-dist(c_truth), -dist(c_decoy)))
    return out
