"""The answer table of the real data sets: built from (worker, task, answer) triples as the
per-triple loop it replaced did (first answer of a repeated pair kept, the same counts)."""

from __future__ import annotations

import numpy as np
from ldpsim.protocols.truth import data as tdata


def _loop_table(triples, gold, worker_key=str, task_key=str):
    """The per-triple loop (the reference)."""
    workers = sorted({w for w, _, _ in triples}, key=worker_key)
    tasks = sorted({t for _, t, _ in triples}, key=task_key)
    wi = {w: i for i, w in enumerate(workers)}
    ti = {t: j for j, t in enumerate(tasks)}
    table = np.full((len(workers), len(tasks)), np.nan)
    repeated = conflicting = 0
    for w, t, a in triples:
        i, j = wi[w], ti[t]
        if np.isnan(table[i, j]):
            table[i, j] = a
        else:
            repeated += 1
            conflicting += int(table[i, j] != a)
    mu = np.array([gold.get(t, np.nan) for t in tasks], dtype=np.float64)
    return table, mu, repeated, conflicting


def test_table_matches_the_loop_on_repeats_and_conflicts():
    rng = np.random.default_rng(2)
    triples = [(str(rng.integers(0, 30)), str(rng.integers(0, 50)), int(rng.integers(0, 4)))
               for _ in range(3000)]
    gold = {str(t): int(rng.integers(0, 4)) for t in range(0, 50, 3)}
    for wk, tk in ((str, str), (int, int)):
        got = tdata._table(triples, gold, 4, "crowd_web", worker_key=wk, task_key=tk)
        table, mu, repeated, conflicting = _loop_table(triples, gold, wk, tk)
        assert repeated > 0 and conflicting > 0
        assert np.array_equal(got.table, table, equal_nan=True)
        assert np.array_equal(got.gold, mu, equal_nan=True)
        assert got.stats["repeated_dropped"] == repeated
        assert got.stats["repeated_conflicting"] == conflicting
        assert got.stats["answers"] == int(np.isfinite(table).sum())
