"""A Ctrl-C that a finaliser swallows still stops a sweep (``simulator.sweep.interrupt``)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from ldpsim.simulator.results.results import ResultStore
from ldpsim.simulator.sweep import interrupt
from ldpsim.simulator.sweep.runner import run_scenario

from tests.simulator.sweep.test_jobs import scenario


@pytest.fixture
def sigint_default():
    """SIGINT as in a foreground terminal (a test run in the background has it ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _swallowed_ctrl_c():
    """SIGINT to this process inside code that drops the exception, as a finaliser's
    "Exception ignored" does."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here at the latest
    except KeyboardInterrupt:
        pass


def test_a_swallowed_ctrl_c_is_raised_again(sigint_default):
    with interrupt.remembered():
        interrupt.check()  # nothing yet
        _swallowed_ctrl_c()
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
    interrupt.check()  # outside, forgotten
    _swallowed_ctrl_c()  # without it, the interrupt is simply lost
    interrupt.check()


def test_a_sweep_stops_after_the_run_in_which_a_ctrl_c_was_swallowed(
        sigint_default, tmp_path, monkeypatch):
    from ldpsim.simulator.sweep import execute as run_one

    s = scenario(jobs=1)
    third = s.runs()[2].key
    real = run_one.execute

    def execute(spec, *a, **k):
        rec = real(spec, *a, **k)
        if spec.key == third:
            _swallowed_ctrl_c()
        return rec

    monkeypatch.setattr(run_one, "execute", execute)
    with interrupt.remembered(), pytest.raises(KeyboardInterrupt):
        run_scenario(s, tmp_path / "out", show_progress=False)
    stored = [r["key"] for r in ResultStore(tmp_path / "out").records()]
    assert stored == [x.key for x in s.runs()[:3]]  # the third run is kept, no fourth began
