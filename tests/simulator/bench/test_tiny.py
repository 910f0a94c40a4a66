"""The tiny-run benchmark: a sweep's runs, wall and CPU seconds, the orchestrator's part."""

from __future__ import annotations

from ldpsim.simulator.bench import tiny


def test_the_sweep_reports_its_runs_and_the_orchestrators_share_of_the_cpu():
    runs, wall, cpu, own = tiny.sweep(1, 1)
    assert runs == 108
    assert wall > 0 and 0 < own <= cpu
