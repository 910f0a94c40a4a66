"""The answer table of the real data sets: built from (worker, task, answer) triples as the
per-triple loop it replaced did (first answer of a repeated pair kept, the same counts), and
read once per process while its files stay the same."""

from __future__ import annotations

import os

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS
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


def _write_web(d, rows, truth):
    (d / "web_crowd.txt").write_text("".join(f"{t} {w} {a}\n" for t, w, a in rows))
    (d / "web_truth.txt").write_text("".join(f"{t} {a}\n" for t, a in truth))


def test_read_once_per_process_and_again_when_a_file_changes(tmp_path):
    _write_web(tmp_path, [(1, 1, 2), (2, 1, 3), (1, 2, 1)], [(1, 2)])
    kind = DATA_KINDS["crowd_web"]
    a = kind.build({"path": str(tmp_path)}, keys=0)
    b = kind.build({"path": str(tmp_path)}, keys=0)
    assert a is not b and a.table is b.table  # the same read, each build its own object
    assert a.stats == b.stats and a.stats is not b.stats
    with pytest.raises(ValueError):
        a.table[0, 0] = 0.0  # the shared table is read-only
    assert kind.build({"path": str(tmp_path), "levels": 6}, keys=0).levels == 6
    _write_web(tmp_path, [(1, 1, 2), (2, 1, 3), (1, 2, 1), (2, 2, 4), (3, 2, 0)], [(1, 2)])
    st = (tmp_path / "web_crowd.txt").stat()
    os.utime(tmp_path / "web_crowd.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    c = kind.build({"path": str(tmp_path)}, keys=0)
    assert c.table.shape == (2, 3) and c.stats["answers"] == 5
