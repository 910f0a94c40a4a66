"""The privacy audit's trials as one batch: copies of the target through the vectorised
randomizer instead of one protocol run per trial.

When the curator is in the coalition, a trial's statistic is a function of what the target
sent and was sent: per round, its query, the broadcast and its report (the colluders disclose
everything else). So trial t needs only the target's coins in run t and its queries; the
counter-based generator gives both as a block: ``protocols.rng`` takes one key per row, so a
block of T rows, all agent ``target``, each with the target's coin key of run t
(``trial_keys``: every trial's key at once, with the vectorised PRF of ``protocols.keys``),
draws exactly the coins the target has in runs ``first .. first + T - 1`` (and a curator built
over T copies of the target, each with run t's curator key, plans exactly its queries). One
``respond`` per round answers all of them, one ``log_likelihood`` scores all of them.

The broadcasts are taken from a reference run (trial 0): right for every protocol whose
randomizer reads only what is the same in every run (DPWeVote's phase and candidate, not the
released decisions). ``BatchTrials.build`` checks the whole construction against full runs:
on the first ``CHECK_TRIALS`` trials, with both neighbouring rows, every report of the target
and the resulting statistic must be identical to the full run's, else the audit tries the
other experiment or keeps the full path (and says why).

Some protocols' later rounds read broadcasts that change from run to run: SAFARI's second
round reads the chain the first round learned from everyone's reports, MF's curator draws V
afresh in every run. They run as a batch in the fixed-coins experiment
(``audit_trials.Trials``): every trial is the reference run with the target's coins of run
t, so the coalition's own reports, the curator's coins and everything before the target's
first report are the reference run's, and each later round's query and broadcast is what the
reference run's curator sends after the target's earlier reports (``Replay``: re-run on the
reference reports with the target's row replaced, cached by the target's history; trials
with the same history form one segment of the round). The same check against full runs of
that experiment applies. Without the curator in the coalition a setting keeps the full path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.base import AuditSpec, Protocol
from ldpsim.protocols.keys import (
    device_rows,
    master_words_of_seeds,
    root_words,
    run_seed,
    run_seeds,
    run_tags,
)
from ldpsim.protocols.prf import prf
from ldpsim.protocols.rng import StreamKeys, stream_key
from ldpsim.simulator.audit.audit import target_reports
from ldpsim.simulator.audit.float_attack import reproducible

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


def trial_keys(scenario_seed: int, first: int, count: int, target: int,
               config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The curator's stream keys and the target's coin keys of runs ``first .. first + count -
    1`` of the run ``config`` (run t's seed is ``run_seed(scenario_seed, t)``, and its secrets
    the seed's, as in the full path): the coin keys of all of them at once."""
    seeds = run_seeds(scenario_seed, first, count)
    cur = stream_key(StreamKeys(seeds), "curator")
    d0, d1 = device_rows(*root_words(*master_words_of_seeds(seeds)),
                         np.full(count, target, dtype=np.int64))
    tags = run_tags(seeds, config["protocol"], config["params"], config["data"])
    return cur, prf(d0, d1, tags)


@dataclass
class Round:
    """One round of the target in the reference run."""

    rnd: int
    broadcast: Any
    queried: bool  # whether the target gets a query in this round
    query: np.ndarray | None = None  # the target's query row in the reference run


#: one group of a round's trials that share a query plan: (trial indices in the block, or None
#: for all of them; queries, one row per trial or None; broadcast; reports, one row per trial)
Segment = tuple[np.ndarray | None, np.ndarray | None, Any, np.ndarray]


@dataclass
class Batch:
    """The target's view in a block of ``count`` trials: per round, (round, segments), each
    segment the trials that got one broadcast (``Segment``)."""

    count: int
    rounds: list[tuple[int, list[Segment]]]

    def reports(self, i: int) -> np.ndarray:
        """Round ``i``'s reports, one row per trial of the block."""
        segs = self.rounds[i][1]
        if len(segs) == 1 and segs[0][0] is None:
            return np.asarray(segs[0][3])
        first = np.asarray(segs[0][3])
        out = np.empty((self.count,) + first.shape[1:], dtype=first.dtype)
        for idx, _, _, rep in segs:
            out[idx] = rep
        return out

    def features(self) -> np.ndarray:
        """The learned test's features: every report, one row per trial (``audit.features``)."""
        return np.concatenate([self.reports(i).astype(float).reshape(self.count, -1)
                               for i in range(len(self.rounds))], axis=1)


class Replay:
    """The reference run's curator, replayed with the target's earlier reports changed: the
    query and broadcast the target gets in a later round when the coalition's coins are the
    reference run's (the fixed-coins experiment). The curator is a function of what it
    received, so re-running its plan and absorb on the reference run's reports with the
    target's row replaced gives exactly what it sends in that trial; results are cached by
    the target's history (a round's distinct histories are few: the earlier reports' domain)."""

    #: histories remembered at most (the cache is cleared when full)
    CACHE = 1 << 14

    def __init__(self, bound: Any, view: dict[str, Any], target: int, key: int) -> None:
        if "agents" not in view:
            raise ValueError("the reference view does not name the curator's agents")
        self.bound = bound
        self.agents = np.asarray(view["agents"])
        self.ref = view["rounds"]
        self.target = target
        self.key = key
        self.cache: dict[bytes, tuple[np.ndarray | None, Any]] = {}

    def plan(self, rnd: int, history: list[np.ndarray]) -> tuple[np.ndarray | None, Any]:
        """(the target's query row or None, the broadcast) of round ``rnd`` after the target
        sent ``history`` (its report row in each earlier round it reported in, in order)."""
        k = str(rnd).encode() + b"|" + b"|".join(np.ascontiguousarray(h).tobytes()
                                                for h in history)
        got = self.cache.get(k)
        if got is not None:
            return got
        cur = self.bound.curator(self.agents, self.key)
        hist = iter(history)
        for ref in self.ref:
            j = int(ref["round"])
            if j >= rnd:
                break
            cur.plan(j)
            ra, reports = ref["report_agents"], ref["reports"]
            if ra is not None and len(ra):
                ra = np.asarray(ra)
                i = int(np.searchsorted(ra, self.target))
                if i < len(ra) and ra[i] == self.target:
                    reports = np.array(reports, copy=True)
                    reports[i] = np.asarray(next(hist)).reshape(reports[i].shape)
            cur.absorb(j, ra, reports)
        plan = cur.plan(rnd)
        asked = None if plan is None else np.asarray(plan.agents)
        i = -1 if asked is None else int(np.searchsorted(asked, self.target))
        if asked is None or i >= len(asked) or asked[i] != self.target:
            raise ValueError(f"whether the target is asked in round {rnd} depends on its "
                             "earlier reports")
        q = None if plan.queries is None else np.asarray(plan.queries)[i:i + 1]
        if len(self.cache) >= self.CACHE:
            self.cache.clear()
        self.cache[k] = (q, plan.broadcast)
        return q, plan.broadcast


def _groups(history: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(index of one trial per distinct history, each trial's group) of the trials' earlier
    reports (each array one row per trial)."""
    flat = np.concatenate([np.ascontiguousarray(h).reshape(len(h), -1).view(np.uint8)
                           for h in history], axis=1)
    _, first, inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


class BatchTrials:
    """The target of one audit setting, many trials at a time (see the module docstring).

    ``fixed``: the fixed-coins experiment (``audit_trials.Trials``): every trial is the
    reference run with the target's coins of run t; the target's queries and broadcasts after
    its first report come from ``Replay``.
    """

    def __init__(self, protocol: Protocol, bound: Any, target: int, scenario_seed: int,
                 rounds: list[Round], replay: Replay | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.protocol = protocol
        self.bound = bound
        self.target = target
        self.scenario_seed = scenario_seed
        self.rounds = rounds
        self.replay = replay
        #: the run's configuration (its tag keys the target's coins in every trial)
        self.config = config or {}
        #: the last block's keys, ((first, count), trial_keys): both rows of a block share them
        self.keys: tuple[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None

    @classmethod
    def build(cls, protocol: Protocol, bound: Any, target: int, scenario_seed: int,
              reference_view: dict[str, Any], fixed: bool = False,
              config: dict[str, Any] | None = None) -> BatchTrials:
        """From the reference run's view (trial 0): the target's rounds. Raises ValueError
        when the construction cannot apply (fresh coins: queries after the first round)."""
        rounds = []
        for rnd, q, bcast, _ in target_reports(reference_view, target):
            if q is not None and rnd != 0 and not fixed:
                raise ValueError(f"the target is queried in round {rnd} (only round 0's "
                                 "queries are planned in a batch)")
            rounds.append(Round(rnd, bcast, q is not None, q))
        if not rounds:
            raise ValueError("the target reports nothing the coalition sees")
        replay = None
        if fixed:
            key = stream_key(run_seed(scenario_seed, 0), "curator")
            replay = Replay(bound, reference_view, target, key)
        return cls(protocol, bound, target, scenario_seed, rounds, replay, config)

    def block_keys(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``trial_keys`` of trials ``first .. first + count - 1``, computed once for the
        block's two rows (the last block's are kept)."""
        if self.keys is None or self.keys[0] != (first, count):
            keys = trial_keys(self.scenario_seed, first, count, self.target, self.config)
            for k in keys:  # shared by the rows: nothing may change them in place
                k.flags.writeable = False
            self.keys = ((first, count), keys)
        return self.keys[1]

    def view(self, first: int, rows: np.ndarray) -> Batch:
        """The target's view in trials ``first .. first + len(rows) - 1``, trial i holding
        ``rows[i]``."""
        count = len(rows)
        cur_keys, agent_keys = self.block_keys(first, count)
        agents = np.full(count, self.target, dtype=np.int64)
        if self.replay is not None:
            return self._fixed_view(rows, agents, agent_keys)
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
            out.append((r.rnd, [(None, q, r.broadcast, np.asarray(self.protocol.respond(block)))]))
        return Batch(count, out)

    def _fixed_view(self, rows: np.ndarray, agents: np.ndarray,
                    agent_keys: np.ndarray) -> Batch:
        """The fixed-coins experiment: the first round as in the reference run, every later
        one per group of trials whose earlier reports agree (``Replay``)."""
        count = len(rows)
        out: list[tuple[int, list[Segment]]] = []
        history: list[np.ndarray] = []
        for r in self.rounds:
            if not history:  # before the target's first report all is the reference run's
                q = None if r.query is None else np.repeat(r.query, count, axis=0)
                block = self.bound.block(r.rnd, rows, agents=agents, key=agent_keys,
                                         queries=q, broadcast=r.broadcast)
                segs = [(None, q, r.broadcast, np.asarray(self.protocol.respond(block)))]
            else:
                segs = []
                first, group = _groups(history)
                for g, t in enumerate(first):
                    idx = np.flatnonzero(group == g)
                    qg, bcast = self.replay.plan(r.rnd, [h[t] for h in history])
                    q = None if qg is None else np.repeat(qg, len(idx), axis=0)
                    block = self.bound.block(r.rnd, rows[idx], agents=agents[idx],
                                             key=agent_keys[idx], queries=q, broadcast=bcast)
                    rep = np.asarray(self.protocol.respond(block))
                    segs.append((idx, q, bcast, rep))
            out.append((r.rnd, segs))
            history.append(Batch(count, out).reports(len(out) - 1))
        return Batch(count, out)

    def log_likelihoods(self, batch: Batch, candidates: np.ndarray) -> np.ndarray | None:
        """Σ over the rounds of log P(report | candidate row), shape (trials, candidates); None
        without a closed-form likelihood."""
        c = len(candidates)
        total = None
        for rnd, segs in batch.rounds:
            for idx, q, bcast, rep in segs:
                t = len(rep)
                rows = np.tile(candidates, (t,) + (1,) * (candidates.ndim - 1))
                block = self.bound.block(rnd, rows, queries=None if q is None else np.repeat(
                    q, c, axis=0), broadcast=bcast)
                ll = self.protocol.log_likelihood(block, np.repeat(rep, c, axis=0))
                if ll is None:
                    return None
                ll = np.asarray(ll, dtype=float).reshape(t, c)
                if idx is None:
                    total = ll if total is None else total + ll
                else:
                    if total is None:
                        total = np.zeros((batch.count, c))
                    total[idx] = total[idx] + ll
        return total

    def float_checks(self, batch: Batch, pair: np.ndarray) -> np.ndarray | None:
        """Per trial and neighbouring row: do all the target's reports reproduce exactly from
        it (``audit.float_check``)? None when the reports are not Laplace releases."""
        ok = np.ones((batch.count, 2), dtype=bool)
        for rnd, segs in batch.rounds:
            for idx, q, bcast, rep in segs:
                t = len(rep)
                rows = np.tile(pair, (t,) + (1,) * (pair.ndim - 1))
                rel = self.protocol.laplace_release(self.bound.block(
                    rnd, rows, queries=None if q is None else np.repeat(q, 2, axis=0),
                    broadcast=bcast))
                if rel is None:
                    return None
                values, scales, grids = rel
                same = reproducible(np.repeat(rep, 2, axis=0), values, scales, grids)
                same = same.reshape(t, 2, -1).all(axis=2)
                if idx is None:
                    ok &= same
                else:
                    ok[idx] &= same
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
