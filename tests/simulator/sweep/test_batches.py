"""Tests of tiny runs at the cost of their protocol: ``--jobs`` workers handed batches of runs,
and the keys, sizes and truths a sweep's runs share kept across its points. Every record must
be the one a run made alone, in a fresh process state, gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.keys import Secrets
from ldpsim.simulator.results.results import ResultStore
from ldpsim.simulator.scenario.scenario import load
from ldpsim.simulator.session import RunFailed, seeding
from ldpsim.simulator.sweep import execute as run_one
from ldpsim.simulator.sweep import workers
from ldpsim.simulator.sweep.runner import run_scenario

from tests.simulator.sweep.test_jobs import _toml, stable

#: a sweep of tiny runs: 2 estimators x 3 epsilons x 2 sizes x 6 repetitions = 72 runs
RAW: dict[str, Any] = {
    "name": "tiny", "protocol": "dpwevote", "repeats": 6, "seed": 3,
    "data": {"kind": "weighted_votes", "n": [10, 40], "candidates": 1},
    "params": {"epsilon": [0.5, 1.0, 2.0], "split": 0.5, "estimator": ["faithful", "joint"]},
    "runtime": {"backend": "inproc", "pools": 1, "progress": False},
    "output": {"plots": False}}


def tiny(jobs: int = 1, secret: str | None = "seed", **runtime: Any):
    """The tiny sweep; ``secret`` None: a fresh one, drawn into its directory."""
    rt = {**RAW["runtime"], "jobs": jobs, **runtime}
    if secret is not None:
        rt["secret"] = secret
    return load(raw={**RAW, "runtime": rt})


def _lines(out: Path) -> dict[str, str]:
    """Each stored record's line, by key, its timing fields dropped (at any depth)."""
    return {k: json.dumps(v, sort_keys=True) for k, v in
            stable(ResultStore(out).records()).items()}


def _alone(specs: list, scratch: Path) -> dict[str, str]:
    """Each run's record executed alone: its own truth cache and backend, and none of the
    keys, sizes and device keys a sweep keeps (cleared before each run)."""
    from ldpsim.simulator.results.store import record_line

    out = {}
    for spec in specs:
        seeding._KEPT.__init__()
        seeding._pool_keys.cache_clear()
        seeding._seed_secrets.cache_clear()
        seeding._generated_size.cache_clear()
        seeding.device_keys.cache_clear()
        rec = run_one.execute_record(spec, run_one.TruthCache(), None, scratch, True)
        out[spec.key] = json.loads(record_line(rec))
    return {k: json.dumps(v, sort_keys=True) for k, v in stable(list(out.values())).items()}


@pytest.mark.parametrize("secret", ["seed", "file"])
def test_batched_workers_give_the_records_of_runs_made_alone(tmp_path, monkeypatch, secret):
    """--jobs 2 with batches of several runs, the serial loop, and each run alone: the same
    records, exactly (the seed's secrets, and an experiment's own)."""
    if secret == "file":  # the experiment's own secret: drawn by a first sweep, then given
        run_scenario(tiny(secret=None), tmp_path / "first", show_progress=False)
        secret = str(tmp_path / "first" / "secret.key")
    monkeypatch.setattr(workers, "BATCH_S", 10.0)  # as many runs to a batch as allowed
    sizes: list[int] = []
    real = workers.Workers._size

    def size(self, pending):
        got = real(self, pending)
        sizes.append(got)
        return got

    monkeypatch.setattr(workers.Workers, "_size", size)
    run_scenario(tiny(jobs=2, secret=secret), tmp_path / "two", show_progress=False)
    assert max(sizes) > 1, "no batch held more than one run"
    run_scenario(tiny(jobs=1, secret=secret), tmp_path / "one", show_progress=False)
    two, one = _lines(tmp_path / "two"), _lines(tmp_path / "one")
    assert len(one) == 72 and two == one
    specs = tiny(secret=secret).runs()
    assert _alone(specs[::7], tmp_path / "views") == {s.key: one[s.key] for s in specs[::7]}


def test_a_failure_inside_a_batch_is_that_runs_alone(tmp_path, monkeypatch):
    """One run of a batch fails: it alone is listed in failed.jsonl; the runs before and after
    it in its batch are stored; the same command redoes it."""
    monkeypatch.setattr(workers.Workers, "_size", lambda self, pending: 4)
    s = tiny(jobs=2)
    bad = s.runs()[40].key
    real = run_one.execute
    batches: list[list[str]] = []
    send = workers.Workers._send

    def spy(self, conn, pending, busy):
        before = len(busy.get(conn, ()))
        send(self, conn, pending, busy)
        if len(busy.get(conn, ())) > before:
            batches.append([x.key for x in busy[conn][-1]])

    def execute(spec, *a, **k):
        if spec.key == bad:
            raise RunFailed("injected")
        return real(spec, *a, **k)

    monkeypatch.setattr(workers.Workers, "_send", spy)
    monkeypatch.setattr(run_one, "execute", execute)  # inherited by the forked workers
    with pytest.raises(RunFailed, match=r"1 of 72 runs failed(.|\n)*injected"):
        run_scenario(s, tmp_path / "f", show_progress=False)
    (hers,) = [b for b in batches if bad in b]
    assert len(hers) == 4  # the failed run and three others
    stored = {r["key"] for r in ResultStore(tmp_path / "f").records()}
    assert bad not in stored and set(hers) - {bad} <= stored and len(stored) == 71
    failed = [json.loads(x) for x in (tmp_path / "f" / run_one.FAILED_FILE).read_text()
              .splitlines()]
    assert [f["key"] for f in failed] == [bad]
    monkeypatch.setattr(run_one, "execute", real)
    records, _ = run_scenario(s, tmp_path / "f", show_progress=False)
    assert len(records) == 72 and len(ResultStore(tmp_path / "f").records()) == 72


def test_batch_sizes_follow_the_runs_times_and_spread_the_last_runs():
    class Fake(workers.Workers):
        def __init__(self, jobs: int) -> None:
            self.conns = [object()] * jobs
            self.per_run = 0.0

    w = Fake(2)
    pending = workers.ByData(tiny().runs())
    assert w._size(pending) == 1  # no time known yet
    w.per_run = 0.002
    assert w._size(pending) == min(workers.MAX_BATCH, 72 // 16, int(workers.BATCH_S / 0.002))
    w.per_run = 1.0
    assert w._size(pending) == 1  # long runs: one at a time
    pending.left = 3
    w.per_run = 0.0001
    assert w._size(pending) == 1  # the last runs: one at a time, to every worker


def test_kept_pool_keys_are_the_keys_derived_afresh():
    """The pool keys a sweep keeps (``seeding._KEPT``) are those derived for the run alone:
    the same nodes, device keys, and coin and data keys of a block."""
    for secrets in (None, Secrets(b"k" * 32)):
        for n, pools in ((10, 1), (500, 2), (70_000, 3)):
            config = dict(tiny().runs()[0].config(), seed=12345, pools=pools)
            kept = seeding.local_parties(config, n, secrets).pools
            again = seeding.local_parties(config, n, secrets).pools
            sec = seeding.run_secrets(config, secrets)
            for i, (k, a) in enumerate(zip(kept, again, strict=True)):
                start, stop = seeding.block_of(i, pools, n)
                fresh = sec.agents.restrict([(start, stop)])
                assert k.agents.nodes == fresh.nodes == a.agents.nodes
                assert k.covers(start, stop) and not k.covers(start, stop + 1)
                got = k.agents.for_range(start, stop, coin_tag=7, data_tag=9)
                want = fresh.for_range(start, stop, coin_tag=7, data_tag=9)
                assert np.array_equal(got["coins"], want["coins"])
                assert np.array_equal(got["data"], want["data"])


def test_jobs_2_resumes_after_the_orchestrator_is_killed_mid_batch(tmp_path):
    """SIGKILL `ldpsim run --jobs 2` while its workers run batches of tiny runs; the same
    command finishes the sweep: every run exactly once, records as a serial sweep's."""
    raw = {**RAW, "repeats": 40}
    path = tmp_path / "tiny.toml"
    path.write_text(_toml(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ldpsim", "run", str(path), "--jobs", "2", "--out", str(out),
           "--no-progress", "-q", "--secret", "seed"]
    total = len(load(path).runs())
    assert total == 480
    results = out / "results.jsonl"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 60:
            break
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    written = results.read_text().count("\n")
    assert 60 <= written < total, "the sweep was not interrupted mid-way"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert len(lines) == total and len({r["key"] for r in lines}) == total
    serial, _ = run_scenario(load(path, ["runtime.secret='seed'"]), tmp_path / "serial",
                             show_progress=False)
    assert stable(lines) == stable(serial)
