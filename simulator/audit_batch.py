"""The privacy audit's trials as one batch: copies of the target through the vectorised
randomizer instead of one protocol run per trial.

When the curator is in the coalition, a trial's statistic is a function of what the target
sent and was sent: per round, its query, the broadcast and its report (the colluders disclose
everything else). So trial t needs only the target's coins in run t and its queries; the
counter-based generator gives both as a block: ``protocols.rng`` takes one stream key per row,
so a block of T rows, all agent ``target``, each with run t's agent key, draws exactly the coins
the target has in runs ``first .. first + T - 1`` (and a curator built over T copies of the
target, each with run t's curator key, plans exactly its queries). One ``respond`` per round
answers all of them, one ``log_likelihood`` scores all of them.

The broadcasts are taken from a reference run (trial 0): right for every protocol whose
randomizer reads only what is the same in every run (DPWeVote's phase and candidate, not the
released decisions). ``BatchTrials.build`` checks the whole construction against full runs:
on the first ``CHECK_TRIALS`` trials, with both neighbouring rows, every report of the target
and the resulting statistic must be identical to the full run's, else the audit keeps the full
path (and says why). Protocols whose target's rounds depend on the data (SAFARI's second
phase, which reads the chain the first phase learned) fail that check and keep the full path;
so does any setting without the curator in the coalition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.base import AuditSpec, Protocol
from ldpsim.protocols.rng import stream_key
from ldpsim.simulator.float_attack import reproducible
from ldpsim.simulator.seeding import run_seed

#: trials checked against full runs before a setting uses the batch path
CHECK_TRIALS = 32
#: trials per block, at most (bounds memory: a block's reports, likelihoods and float checks)
BLOCK = 1 << 13
#: row values (trials x candidates x a row's size) per likelihood call: bounds a block's
#: memory whatever the row size (a truth-inference row holds an answer per task)
BLOCK_VALUES = 1 << 21


def block_size(row: np.ndarray, candidates: int = 2) -> int:
    """Trials per block for rows like ``row`` scored against ``candidates`` rows."""
    return int(max(64, min(BLOCK, BLOCK_VALUES // max(1, candidates * np.asarray(row).size))))


def trial_keys(scenario_seed: int, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The curator's and the agents' stream keys of runs ``first .. first + count - 1`` (run
    t's seed is ``run_seed(scenario_seed, t)``, as in the full path)."""
    cur = np.empty(count, dtype=np.uint64)
    agents = np.empty(count, dtype=np.uint64)
    for i in range(count):
        seed = run_seed(scenario_seed, first + i)
        cur[i] = stream_key(seed, "curator")
        agents[i] = stream_key(seed, "agents")
    return cur, agents


@dataclass
class Round:
    """One round of the target in the reference run."""

    rnd: int
    broadcast: Any
    queried: bool  # whether the target gets a query in this round


@dataclass
class Batch:
    """The target's view in a block of trials: per round, (round, queries, broadcast,
    reports), each array with one row per trial."""

    rounds: list[tuple[int, np.ndarray | None, Any, np.ndarray]]

    def features(self) -> np.ndarray:
        """The learned test's features: every report, one row per trial (``audit.features``)."""
        return np.concatenate([np.asarray(r[3], dtype=float).reshape(len(r[3]), -1)
                               for r in self.rounds], axis=1)


class BatchTrials:
    """The target of one audit setting, many trials at a time (see the module docstring)."""

    def __init__(self, protocol: Protocol, bound: Any, target: int, scenario_seed: int,
                 rounds: list[Round]) -> None:
        self.protocol = protocol
        self.bound = bound
        self.target = target
        self.scenario_seed = scenario_seed
        self.rounds = rounds

    @classmethod
    def build(cls, protocol: Protocol, bound: Any, target: int, scenario_seed: int,
              reference_view: dict[str, Any]) -> BatchTrials:
        """From the reference run's view (trial 0): the target's rounds. Raises ValueError
        when the construction cannot apply (queries after the first round)."""
        from ldpsim.simulator.audit import target_reports

        rounds = []
        for rnd, q, bcast, _ in target_reports(reference_view, target):
            if q is not None and rnd != 0:
                raise ValueError(f"the target is queried in round {rnd} (only round 0's "
                                 "queries are planned in a batch)")
            rounds.append(Round(rnd, bcast, q is not None))
        if not rounds:
            raise ValueError("the target reports nothing the coalition sees")
        return cls(protocol, bound, target, scenario_seed, rounds)

    def view(self, first: int, rows: np.ndarray) -> Batch:
        """The target's view in trials ``first .. first + len(rows) - 1``, trial i holding
        ``rows[i]``."""
        count = len(rows)
        cur_keys, agent_keys = trial_keys(self.scenario_seed, first, count)
        agents = np.full(count, self.target, dtype=np.int64)
        queries = None
        if any(r.queried for r in self.rounds):
            plan = self.bound.curator(agents, cur_keys).plan(0)
            queries = np.asarray(plan.queries)
            if len(queries) != count:
                raise ValueError("the curator's plan does not ask every copy of the target")
        out = []
        for r in self.rounds:
            q = queries if r.queried else None
            block = self.bound.block(r.rnd, rows, agents=agents, key=agent_keys, queries=q,
                                     broadcast=r.broadcast)
            out.append((r.rnd, q, r.broadcast, np.asarray(self.protocol.respond(block))))
        return Batch(out)

    def log_likelihoods(self, batch: Batch, candidates: np.ndarray) -> np.ndarray | None:
        """Σ over the rounds of log P(report | candidate row), shape (trials, candidates); None
        without a closed-form likelihood."""
        c = len(candidates)
        total = None
        for rnd, q, bcast, rep in batch.rounds:
            t = len(rep)
            rows = np.tile(candidates, (t,) + (1,) * (candidates.ndim - 1))
            block = self.bound.block(rnd, rows, queries=None if q is None else np.repeat(
                q, c, axis=0), broadcast=bcast)
            ll = self.protocol.log_likelihood(block, np.repeat(rep, c, axis=0))
            if ll is None:
                return None
            ll = np.asarray(ll, dtype=float).reshape(t, c)
            total = ll if total is None else total + ll
        return total

    def float_checks(self, batch: Batch, pair: np.ndarray) -> np.ndarray | None:
        """Per trial and neighbouring row: do all the target's reports reproduce exactly from
        it (``audit.float_check``)? None when the reports are not Laplace releases."""
        ok = None
        for rnd, q, bcast, rep in batch.rounds:
            t = len(rep)
            rows = np.tile(pair, (t,) + (1,) * (pair.ndim - 1))
            rel = self.protocol.laplace_release(self.bound.block(
                rnd, rows, queries=None if q is None else np.repeat(q, 2, axis=0),
                broadcast=bcast))
            if rel is None:
                return None
            values, scales, snapped = rel
            same = reproducible(np.repeat(rep, 2, axis=0), values, scales, snapped)
            same = same.reshape(t, 2, -1).all(axis=2)
            ok = same if ok is None else ok & same
        return ok


def llr(ll: np.ndarray) -> np.ndarray:
    """The likelihood-ratio statistic per trial from (trials, 2) log-likelihoods of the pair
    (``audit.llr_statistic``: NaN, from -inf - -inf, is 0)."""
    with np.errstate(invalid="ignore"):
        s = ll[:, 1] - ll[:, 0]
    return np.where(np.isnan(s), 0.0, s)


def bayes_hits(trials: BatchTrials, spec: AuditSpec, first: int, truth: np.ndarray
               ) -> tuple[int, int]:
    """(correct MAP guesses, trials) of the single-report inference over the trials
    ``first ..``, trial i's target holding ``spec.values[truth[i]]``."""
    with np.errstate(divide="ignore"):
        log_prior = np.log(spec.prior)
    step = block_size(spec.values[0], len(spec.values))
    hits = 0
    for s in range(0, len(truth), step):
        tr = truth[s:s + step]
        batch = trials.view(first + s, spec.values[tr])
        ll = trials.log_likelihoods(batch, spec.values)
        if ll is None:
            return 0, 0
        guess = np.argmax(log_prior + ll, axis=1)
        same = (spec.values[guess] == spec.values[tr]) | (
            np.isnan(spec.values[guess]) & np.isnan(spec.values[tr])
            if spec.values.dtype.kind == "f" else False)
        hits += int(same.reshape(len(tr), -1).all(axis=1).sum())
    return hits, len(truth)
