"""Sweeps and pools on Dask (``[runtime] executor = "dask"``, ``backend = "dask"``): on a real
LocalCluster of two single-threaded worker processes, started once for the module."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from ldpsim.simulator.results.results import ResultStore  # noqa: E402
from ldpsim.simulator.scenario.scenario import ScenarioError, load  # noqa: E402
from ldpsim.simulator.session import RunFailed  # noqa: E402
from ldpsim.simulator.sweep import engine_dask  # noqa: E402
from ldpsim.simulator.sweep.runner import run_scenario  # noqa: E402

from tests.simulator.sweep.test_jobs import scenario, stable, summary_rows  # noqa: E402

COMM_KEYS = ("bytes_up_per_agent_mean", "bytes_down_per_agent_mean", "bytes_total",
             "messages_total", "rounds", "report_bits_per_agent", "bytes_up_per_agent_max")


@pytest.fixture(scope="module")
def dask_conn():
    """A LocalCluster of 2 worker processes (1 thread each), for the whole module."""
    from ldpsim.simulator.backends.dask_client import DaskConnection

    with DaskConnection("local:2") as conn:
        yield conn


def test_a_local_cluster_listens_on_loopback_only(dask_conn):
    """``--dask local`` opened its dashboard on every interface; the scheduler, its workers
    and the dashboard are this machine's alone."""
    from urllib.parse import urlparse

    info = dask_conn.client.scheduler_info(n_workers=-1)
    assert urlparse(dask_conn.client.scheduler.address).hostname == "127.0.0.1"
    assert {urlparse(w).hostname for w in info["workers"]} == {"127.0.0.1"}
    assert urlparse(dask_conn.cluster.dashboard_link).hostname in ("127.0.0.1", "localhost")
    port = info["services"]["dashboard"]

    bound = [c for c in __import__("psutil").net_connections("tcp")
             if c.status == "LISTEN" and c.laddr.port == port]
    assert bound and all(c.laddr.ip == "127.0.0.1" for c in bound)


@pytest.fixture
def cluster(dask_conn):
    """The module's LocalCluster's scheduler address (as a remote cluster is named)."""
    return dask_conn.client.scheduler.address


@pytest.fixture(autouse=True)
def no_orphans(dask_conn):
    """conftest's check, but the module's cluster (its worker processes, children of this
    process, restarted by their nannies when a test kills one) is no leak."""
    yield
    import time

    from tests.conftest import child_pids

    dask_conn.client.wait_for_workers(2, timeout=60)
    deadline = time.monotonic() + 3.0
    while True:
        workers = set(dask_conn.client.run(os.getpid).values())
        left = [p for p in child_pids() if p not in workers]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert left == [], "a test left child processes running"


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_a_dask_sweep_gives_the_records_of_a_serial_sweep(cluster, tmp_path):
    serial, _ = run_scenario(scenario(jobs=1), tmp_path / "one", show_progress=False)
    on_dask, _ = run_scenario(scenario(executor="dask", dask=cluster),
                              tmp_path / "dask", show_progress=False)
    assert len(serial) == len(on_dask) == 9
    assert stable(serial) == stable(on_dask)
    assert summary_rows(tmp_path / "one") == summary_rows(tmp_path / "dask")
    assert [r["key"] for r in on_dask] == [s.key for s in scenario().runs()]


def test_a_dask_sweep_resumes_and_extends(cluster, tmp_path):
    out = tmp_path / "r"
    first, _ = run_scenario(scenario(repeats=1, executor="dask", dask=cluster), out,
                            show_progress=False)
    assert len(first) == 3
    records, _ = run_scenario(scenario(repeats=3, executor="dask", dask=cluster), out,
                              show_progress=False)
    lines = _lines(out)
    assert len(lines) == 9 and len({r["key"] for r in lines}) == 9
    before = {r["key"]: r["timing"] for r in first}
    assert all(r["timing"] == before[r["key"]] for r in records if r["key"] in before)


# -- a worker lost mid-run: the task runs again once, then the run is recorded as failed

def _kill_target(view_dir: Path, name: str) -> str | None:
    path = view_dir.parent / name
    return path.read_text().strip() if path.is_file() else None


def kill_once_task(specs, runtime, view_dir, per_round):
    """``run_task``, but the worker process running the run named in OUT/kill-once dies the
    first time it starts it (SIGKILL: no clean-up, as a machine lost mid-run)."""
    victim = _kill_target(view_dir, "kill-once")
    if victim in {s.key for s in specs}:
        marker = view_dir.parent / f"killed-{victim}"
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    return engine_dask.run_task(specs, runtime, view_dir, per_round)  # the worker's: real


def kill_always_task(specs, runtime, view_dir, per_round):
    """The worker running the run named in OUT/kill-always dies every time."""
    if _kill_target(view_dir, "kill-always") in {s.key for s in specs}:
        with open(view_dir.parent / "kills", "a") as f:
            f.write(f"{os.getpid()}\n")
        os.kill(os.getpid(), signal.SIGKILL)
    return engine_dask.run_task(specs, runtime, view_dir, per_round)


@pytest.fixture
def task_hook(monkeypatch):
    """Replace the task the orchestrator submits (the workers import this module to run it,
    and call their own, real ``run_task`` from it)."""
    return lambda fn: monkeypatch.setattr(engine_dask, "run_task", fn)


def _with_victim(cluster, tmp_path, task_hook, task, order, run):
    """A Dask sweep whose ``run``-th run ``task`` kills its worker for (named in the file
    OUT/``order``): (scenario, out dir, the victim's key)."""
    out = tmp_path / order
    s = scenario(executor="dask", dask=cluster)
    victim = s.runs()[run].key
    out.mkdir()
    (out / order).write_text(victim)
    task_hook(task)
    return s, out, victim


def test_a_worker_killed_mid_run_reruns_it_and_every_run_is_recorded_once(
        cluster, tmp_path, task_hook):
    s, out, victim = _with_victim(cluster, tmp_path, task_hook, kill_once_task, "kill-once", 4)
    records, _ = run_scenario(s, out, show_progress=False)
    assert (out / f"killed-{victim}").is_file()  # the worker did die running it
    lines = _lines(out)
    assert sorted(r["key"] for r in lines) == sorted(sp.key for sp in s.runs())
    serial, _ = run_scenario(scenario(jobs=1), tmp_path / "serial", show_progress=False)
    assert stable(records) == stable(serial)


def test_a_run_whose_worker_dies_twice_is_recorded_failed_and_redone_later(
        cluster, tmp_path, task_hook):
    s, out, victim = _with_victim(cluster, tmp_path, task_hook, kill_always_task,
                                  "kill-always", 2)
    lost = next(b for b in engine_dask.batches(s.runs(), 2) if victim in {x.key for x in b})
    assert 1 <= len(lost) < 9  # its task's runs fail with it
    with pytest.raises(RunFailed, match=r"[1-8] of 9 runs failed on the Dask cluster") as err:
        run_scenario(s, out, show_progress=False)
    kills = (out / "kills").read_text().split()
    assert len(kills) == 2 and kills[0] != kills[1]  # two worker processes died running it
    lines = _lines(out)
    failed = [json.loads(x) for x in (out / "failed.jsonl").read_text().splitlines()]
    # every run exactly once: in the results or in failed.jsonl. The victim's task fails; a
    # task the scheduler had queued on a worker that died twice can fail with it (Dask counts
    # it as suspect too), and is listed and redone the same way
    done, gone = [r["key"] for r in lines], [f["key"] for f in failed]
    assert sorted(done + gone) == sorted(x.key for x in s.runs())
    assert {x.key for x in lost} <= set(gone) and victim not in done
    assert f"{len(gone)} of 9 runs failed" in str(err.value)
    assert all("KilledWorker" in f["error"] for f in failed)
    (out / "kill-always").unlink()
    records, _ = run_scenario(s, out, show_progress=False)  # resumes: the failed run alone
    assert len(_lines(out)) == 9 and len(records) == 9


def test_tasks_group_runs_by_data_set_and_cover_every_run_once():
    specs = scenario(repeats=20).runs()  # 60 runs, 3 per data set (repetition)
    tasks = engine_dask.batches(specs, threads=2)  # about 16 tasks of 4 runs
    assert sorted(s.key for b in tasks for s in b) == sorted(s.key for s in specs)
    assert 12 <= len(tasks) <= 20 and max(len(b) for b in tasks) <= 4
    builders = {}
    for i, b in enumerate(tasks):
        for s in b:
            builders.setdefault(s.repeat, set()).add(i)
    assert sum(len(v) for v in builders.values()) <= 30  # most data sets built once
    one_each = engine_dask.batches(specs[:5], threads=64)
    assert [len(b) for b in one_each] == [1] * 5  # few runs, many threads: a task each


def test_a_data_file_a_worker_cannot_read_is_named_with_the_workers(cluster, tmp_path):
    sweep = engine_dask.DaskSweep(scenario(executor="dask", dask=cluster).runtime,
                                  tmp_path / "views", True, tmp_path)
    try:
        spec = scenario().runs()[0]
        spec.data = {**spec.data, "path": str(tmp_path / "nowhere.soc")}
        with pytest.raises(RunFailed) as e:
            sweep.check_data([spec])
        msg = str(e.value)
        assert "nowhere.soc" in msg and "2 of 2 Dask workers" in msg
        assert msg.count("worker tcp://") == 2 and "no such file" in msg
        there = tmp_path / "there.soc"
        there.write_text("x")
        spec.data["path"] = str(there)
        sweep.check_data([spec])  # readable everywhere: no error
    finally:
        sweep.close()


# -- backend = "dask": the pools are tasks on the workers, the curator here

def _vote(backend: str, dask: str | None = None, **runtime: Any):
    return load(raw={
        **({"dask": {"address": dask}} if dask is not None else {}),
        "name": "vote", "protocol": "dpwevote", "repeats": 2, "seed": 11,
        "data": {"kind": "weighted_votes", "n": 400, "candidates": 3},
        "params": {"epsilon": [0.5, 2.0]},
        "runtime": {"backend": backend, "pools": 2, "jobs": 1, "progress": False,
                    "timeout_s": 20, "secret": "seed", **runtime},
        "output": {"plots": False}})


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["output"] == b["output"]
    assert a["metrics"] == b["metrics"]
    assert {k: a["comm"][k] for k in COMM_KEYS} == {k: b["comm"][k] for k in COMM_KEYS}
    assert a["status"] == b["status"] == "complete" and a["dropouts"] == b["dropouts"] == 0


def test_the_dask_backend_gives_the_inproc_output_on_a_multi_round_protocol(cluster, tmp_path):
    ref, _ = run_scenario(_vote("inproc"), tmp_path / "i", show_progress=False)
    got, _ = run_scenario(_vote("dask", dask=cluster), tmp_path / "d",
                          show_progress=False)
    assert len(got) == 4 and all(r["backend"] == "dask" for r in got)
    assert all(r["comm"]["rounds"] >= 3 for r in got)
    for a, b in zip(ref, got, strict=True):
        _same_run(a, b)


def test_the_dask_backends_pools_hold_a_chunked_run_a_chunk_at_a_time(cluster, tmp_path):
    """Issue 52 on a cluster: pools that are Dask tasks hold a run of more agents than its
    ``chunk`` a chunk at a time (and a streaming curator absorbs in parts), with the inproc
    backend's records: a streaming protocol, and DPWeVote over several rounds."""
    raw = {"name": "rank", "protocol": "ldp_kwiksort_rr", "repeats": 1, "seed": 12,
           "data": {"kind": "mallows", "n": 700, "m": 6}, "params": {"epsilon": 1.0},
           "runtime": {"pools": 2, "jobs": 1, "progress": False, "timeout_s": 20,
                       "secret": "seed", "chunk": 97}, "output": {"plots": False}}
    for name, make in (("rank", lambda b, **k: load(raw={
            **raw, **({"dask": {"address": k["dask"]}} if "dask" in k else {}),
            "runtime": {**raw["runtime"], "backend": b}})),
                       ("vote", lambda b, **k: _vote(b, chunk=97, **k))):
        ref, _ = run_scenario(make("inproc"), tmp_path / f"{name}-i", show_progress=False)
        got, _ = run_scenario(make("dask", dask=cluster), tmp_path / f"{name}-d",
                              show_progress=False)
        assert got and all(r["backend"] == "dask" for r in got)
        for a, b in zip(ref, got, strict=True):
            _same_run(a, b)


def test_the_dask_backend_gives_the_inproc_virtual_times_of_a_deployment(cluster, tmp_path):
    """A ``[deployment]`` (the mobile trace, a deadline that makes some answers late): the
    dask backend's outputs, dropouts and virtual times are the inproc backend's."""
    deploy = {"trace": "mobile", "round_deadline_s": 0.06}
    ref, _ = run_scenario(load(raw={**_vote("inproc").raw, "deployment": deploy}),
                          tmp_path / "i", show_progress=False)
    got, _ = run_scenario(load(raw={**_vote("dask", dask=cluster).raw, "deployment": deploy}),
                          tmp_path / "d", show_progress=False)
    assert all(r["virtual"]["dropouts_late"] > 0 for r in ref)
    for a, b in zip(ref, got, strict=True):
        assert a["output"] == b["output"] and a["metrics"] == b["metrics"]
        assert a["virtual"] == b["virtual"]
        live = ("wall_s", "curator_cpu_s")
        assert [{k: v for k, v in r.items() if k not in live} for r in a["comm"]["per_round"]] \
            == [{k: v for k, v in r.items() if k not in live} for r in b["comm"]["per_round"]]


def test_the_dask_backend_with_a_secret_is_every_backends_run(cluster, tmp_path):
    from ldpsim.simulator.session.keyfiles import write_host_keys

    secret = str(write_host_keys(tmp_path / "keys", 2, [[(0, 150)], [(150, 300)]])["secret"])
    raw = {"name": "saf", "protocol": "safari", "repeats": 1, "seed": 2,
           "data": {"kind": "safari_mallows", "n": 300, "d": 5, "theta": 0.5},
           "params": {"epsilon": 1.0, "K": 1},
           "output": {"plots": False}}
    rt = {"pools": 2, "jobs": 1, "progress": False, "timeout_s": 20, "secret": secret}
    ref, _ = run_scenario(load(raw={**raw, "runtime": {**rt, "backend": "inproc"}}),
                          tmp_path / "i", show_progress=False)
    got, _ = run_scenario(load(raw={**raw, "runtime": {**rt, "backend": "dask"},
                                    "dask": {"address": cluster}}),
                          tmp_path / "d", show_progress=False)
    _same_run(ref[0], got[0])
    seeded, _ = run_scenario(load(raw={**raw, "runtime": {
        **rt, "secret": "seed", "backend": "inproc"}}), tmp_path / "u", show_progress=False)
    assert seeded[0]["output"] != got[0]["output"]  # the secret is the agents' secret


def test_a_killed_pool_worker_makes_dropouts_not_a_lost_run(cluster, tmp_path):
    s = load(raw={
        "name": "vk", "protocol": "dpwevote", "repeats": 1, "seed": 5,
        "data": {"kind": "weighted_votes", "n": 400, "candidates": 3},
        "params": {"epsilon": 1.0},
        "dask": {"address": cluster},
        "runtime": {"backend": "dask", "pools": 2, "jobs": 1,
                    "progress": False, "timeout_s": 2,
                    "faults": [{"pool": 1, "round": 1, "action": "kill"}]},
        "output": {"plots": False}})
    records, _ = run_scenario(s, tmp_path / "k", show_progress=False)
    assert records[0]["status"] == "degraded" and records[0]["lost_agents"] > 0


def test_more_pools_than_workers_is_refused(cluster, tmp_path):
    s = _vote("dask", dask=cluster, pools=3)
    with pytest.raises(RunFailed, match=r"\[runtime\] pools: got 3; allowed: at most the "
                                        r"Dask cluster's 2 workers"):
        run_scenario(s, tmp_path / "p", show_progress=False)


# -- bad values

@pytest.mark.parametrize("runtime, match", [
    ({"executor": "spark"},
     r"\[runtime\] executor: got 'spark'; allowed: one of 'local', 'dask'"),
    ({"executor": "dask", "dask": "somewhere"},
     r"\[dask\] address: got 'somewhere'; allowed: \"tcp://HOST"),
    ({"dask": "local:0"}, r"\[dask\] address"),
    ({"executor": "dask", "backend": "hosts", "token": "a token of 16+ chars"},
     r"\[runtime\] executor.*hosts"),
    ({"executor": "dask", "backend": "dask"}, r"\[runtime\] executor.*dask backend"),
    ({"dask": "local:2"}, r"\[dask\] address: got 'local:2', but nothing runs on Dask; "
                          r"allowed with \[runtime\] executor = \"dask\""),
    ({"jobs": "many"}, r"\[runtime\] jobs: got 'many'; allowed: \"auto\" or an integer"),
])
def test_bad_executor_values_name_the_key_and_the_allowed_values(runtime, match):
    with pytest.raises(ScenarioError, match=match):
        scenario(**runtime)


def test_the_names_settings_had_are_read_under_their_new_ones_with_a_warning():
    """``[runtime] engine`` and ``dask_address`` (before settings were split by scope) still
    load, each named with its new key; both old and new at once is refused."""
    with pytest.warns(UserWarning) as caught:
        s = scenario(engine="dask", dask_address="local:1")
    said = " | ".join(str(w.message) for w in caught)
    assert "[runtime] engine: renamed [runtime] executor" in said
    assert "[runtime] dask_address: renamed [dask] address" in said
    assert s.runtime["executor"] == "dask" and s.runtime["dask_address"] == "local:1"
    with pytest.raises(ScenarioError, match=r"\[runtime\] engine: renamed \[runtime\] "
                                            r"executor, which is set too"):
        scenario(engine="dask", executor="local")


def test_no_scheduler_at_the_address_is_a_clear_error(tmp_path):
    from ldpsim.simulator.backends.on_dask import free_port

    cmd = [sys.executable, "-m", "ldpsim", "run", "demo", "--set", "data.n=50", "--backend",
           "inproc", "--no-progress", "--out", str(tmp_path / "x"), "--executor", "dask",
           "--dask", f"tcp://127.0.0.1:{free_port()}"]
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "[dask] address: no Dask scheduler answered at 'tcp://127.0.0.1:" \
        in done.stderr


def test_ldpsim_run_dask_on_the_command_line(cluster, tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "ldpsim", "run", "demo", "--set", "data.n=60", "--set",
           "data.m=4", "--set", "repeats=1", "--backend", "inproc", "--no-progress", "--out",
           str(out), "--executor", "dask", "--dask", cluster]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "on Dask at tcp://" in done.stderr
    # a running cluster is reused, and the time to reach it is told apart from the sweep's
    assert re.search(r"dask: \d+ workers?, \d+ threads? at tcp://\S+ \(connected in "
                     r"\d+\.\d s, before the first run\)", done.stderr), done.stderr
    n = len(_lines(out))
    assert n >= 2 and n == len({r["key"] for r in ResultStore(out).records()})


def test_a_cluster_that_nothing_runs_on_is_refused_on_the_command_line(tmp_path):
    """``--dask ADDRESS`` names the cluster only; without ``--executor dask`` or ``--backend
    dask`` nothing would run on it, and the run says so instead of running here."""
    cmd = [sys.executable, "-m", "ldpsim", "run", "demo", "--backend", "inproc",
           "--no-progress", "--out", str(tmp_path / "x"), "--dask", "local:2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "[dask] address: got 'local:2', but nothing runs on Dask" in done.stderr
    assert not (tmp_path / "x").exists()


def test_importing_the_cli_does_not_import_dask():
    code = ("import sys; import ldpsim.simulator.cli, ldpsim.simulator.sweep.runner, "
            "ldpsim.simulator.backends; print('distributed' in sys.modules or 'dask' in "
            "sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


# -- ldpsim audit --dask: the settings as tasks

def test_an_audit_on_dask_gives_the_local_records_and_resumes(cluster, tmp_path):
    from ldpsim.simulator.audit.audit_dask import audit_on_dask
    from ldpsim.simulator.audit.audit_harness import audit_scenario
    from ldpsim.simulator.scenario.scenario import find

    scen = load(find("audit_vote"))
    kw = {"trials": 200, "path": "auto"}
    local = audit_scenario(scen, tmp_path / "local", show_progress=False, **kw)
    remote = audit_on_dask(scen, tmp_path / "dask", cluster, echo=lambda *a, **k: None, **kw)
    assert len(local) == len(remote) == 4

    def timeless(recs):
        return [{k: v for k, v in json.loads(json.dumps(r, default=str)).items()
                 if k not in ("seconds", "trials_per_second")} for r in recs]

    assert timeless(remote) == timeless(local)
    lines = (tmp_path / "dask" / "audit.jsonl").read_text().splitlines()
    assert len(lines) == 4
    again = audit_on_dask(scen, tmp_path / "dask", cluster, echo=lambda *a, **k: None, **kw)
    assert (tmp_path / "dask" / "audit.jsonl").read_text().splitlines() == lines
    assert timeless(again) == timeless(local)


@pytest.mark.parametrize(("path", "trials", "job"), [
    ("batch", 3 * 8192 + 5, "_batch_pair_stats_job"),  # three whole blocks and a bit
    ("full", 600, "_full_pair_stats_job")])  # two ranges of full runs
def test_one_setting_spreads_its_trials_over_the_cluster(dask_conn, cluster, tmp_path, path,
                                                          trials, job):
    """Fewer settings than worker threads: the settings run here, each one's trials as tasks
    on the workers (both of them), and the record is the local one."""
    from distributed import get_task_stream
    from ldpsim.simulator.audit.audit_dask import audit_on_dask
    from ldpsim.simulator.audit.audit_harness import audit_scenario
    from ldpsim.simulator.scenario.scenario import find

    scen = load(find("audit_rank"), ["protocols=['ldp_kwiksort_rr']"])
    kw = {"trials": trials, "path": path}
    said = []
    with get_task_stream(dask_conn.client) as tasks:
        remote = audit_on_dask(scen, tmp_path / "dask", cluster, echo=said.append, **kw)
    local = audit_scenario(scen, tmp_path / "local", show_progress=False, **kw)
    assert "in blocks" in said[0]
    ran = [t for t in tasks.data if str(t["key"]).startswith(job)]
    assert len({t["worker"] for t in ran}) == 2 and len(ran) >= 2

    def timeless(recs):
        return [{k: v for k, v in json.loads(json.dumps(r, default=str)).items()
                 if k not in ("seconds", "trials_per_second")} for r in recs]

    assert timeless(remote) == timeless(local)
    assert remote[0]["path"] == path and remote[0]["trials"] == trials


def test_ctrl_c_under_a_local_cluster_is_one_clean_line(tmp_path):
    """A Ctrl-C in the terminal reaches the whole foreground process group, the LocalCluster's
    worker processes too: they ignore it (the orchestrator stops them), and the cluster is
    closed without a word from Dask's loggers, so the interrupt is the clean message alone."""
    import time

    out = tmp_path / "int"
    # SIGINT as in a foreground terminal (a test run in the background has it ignored)
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from ldpsim.simulator.cli import main; sys.exit(main(sys.argv[1:]))")
    cmd = [sys.executable, "-c", code, "run", "demo", "--set", "data.n=2000", "--set",
           "repeats=40", "--set", "output.plots=false", "--backend", "inproc",
           "--no-progress", "--out", str(out), "--executor", "dask", "--dask", "local:2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, as a terminal's job
    try:
        deadline = time.monotonic() + 120
        while not ((out / "results.jsonl").is_file() and (out / "results.jsonl").stat().st_size):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: every process of the job
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted: finished runs are saved" in err.splitlines()[-1]
    assert "Traceback" not in err and len(err.splitlines()) < 10, err
    deadline = time.monotonic() + 10  # and the workers are gone with it
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "worker processes outlived the interrupted run"
        time.sleep(0.1)
