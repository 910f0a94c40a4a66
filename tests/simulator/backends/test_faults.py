"""Faults: a dying or silent pool becomes dropouts after the timeout; an exception anywhere fails
the run loudly; Ctrl-C stops every process; nothing is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits, RunFailed, block_of

from tests.conftest import ROOT, child_pids, each_chunking


def cfg(faults, n=900, pools=3):
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 2.0, "queries": 1},
            "data": {"kind": "mallows", "n": n, "m": 6, "theta": 0.5}, "seed": 3,
            "pools": pools, "agent_mode": "batched", "batch": 128,
            "collusion": {"colluders": 0, "curator": True}, "faults": faults}


#: every test here also runs chunked (``[runtime] chunk``: the curator streams its rounds)
chunking = each_chunking(__name__, "cfg")


@pytest.mark.parametrize("action", ["kill", "silent"])
def test_lost_pool_becomes_dropouts(action):
    t = time.monotonic()
    res = run_processes(cfg([{"pool": 1, "round": 0, "action": action}]), Limits(timeout_s=1.0))
    elapsed = time.monotonic() - t
    start, stop = block_of(1, 3, 900)
    assert res["dropouts"] == stop - start
    assert res["comm"]["per_round"][0]["reported"] == 900 - (stop - start)
    assert res["rejected"] == 0
    assert len(res["output"]["ranking"]) == 6
    assert elapsed < 10


def test_inproc_lost_pool_matches_processes():
    faults = [{"pool": 2, "round": 0, "action": "kill"}]
    a = run_inproc(cfg(faults), Limits(timeout_s=1.0))
    b = run_processes(cfg(faults), Limits(timeout_s=1.0))
    assert a["output"] == b["output"] and a["dropouts"] == b["dropouts"]


def test_exception_in_pool_fails_loudly():
    t = time.monotonic()
    with pytest.raises(RunFailed, match="injected fault in pool 0"):
        run_processes(cfg([{"pool": 0, "round": 0, "action": "raise"}]), Limits(timeout_s=20))
    assert time.monotonic() - t < 10  # well before the 20 s timeout: no hang


def test_exception_inproc_propagates():
    with pytest.raises(RuntimeError, match="injected fault"):
        run_inproc(cfg([{"pool": 0, "round": 0, "action": "raise"}]), Limits(timeout_s=1))


def test_no_pool_registers_fails():
    with pytest.raises(RunFailed, match="no pool registered"):
        run_processes(cfg([]), Limits(timeout_s=0.5), spawn_pools=False)


def _as_foreground() -> None:
    """In the child: SIGINT as a foreground command has it. A test run started in the
    background of a non-interactive shell (``cmd &``, ``nohup``) has SIGINT ignored, the CLI
    would inherit that through exec (Python then installs no KeyboardInterrupt handler), and
    Ctrl-C could never reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_every_process(tmp_path):
    """SIGINT to the CLI mid-sweep: exits, keeps finished runs, leaves no process behind."""
    scen = tmp_path / "s.toml"
    scen.write_text(
        'name = "slow"\nprotocol = "ldp_kwiksort_rr"\nrepeats = 200\nseed = 1\n'
        '[data]\nkind = "mallows"\nn = 20000\nm = 10\n'
        '[params]\nepsilon = 1.0\n[runtime]\nbackend = "processes"\npools = 2\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "ldpsim", "run", str(scen), "--out",
                             str(tmp_path / "out"), "--no-progress"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_as_foreground)
    results = tmp_path / "out" / "results.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (results.exists() and results.stat().st_size):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # like Ctrl-C in a terminal: the whole group
    _, err = proc.communicate(timeout=60)  # generous: a loaded 2-core machine exits slowly
    assert proc.returncode == 130, err.decode()
    assert b"resume" in err
    lines = results.read_text().splitlines()
    assert 1 <= len(lines) < 200
    time.sleep(0.5)
    assert child_pids() == []
    # resuming finishes the rest without duplicates
