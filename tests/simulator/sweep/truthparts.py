"""What the tests of the pools' shares of a data set's truth share (``test_*truth_parts.py``):
the run's parts, the truth computed, a run scored both ways, and a tap's range bookkeeping
(``protocols.data.RangeTap``) on any generated data set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ldpsim.simulator.backends.transport import run_processes
from ldpsim.simulator.session import Limits
from ldpsim.simulator.sweep import execute


def parts_of(s) -> list:
    """The parts the pools of the run ``s`` sent (processes backend)."""
    parts: list = []
    run_processes(dict(s.config(), seed=s.seed), Limits.of_runtime(s.runtime),
                  truth_parts=parts)
    return parts


def truth_of(s) -> tuple[Any, dict]:
    """The data set of the run ``s`` and its truth, computed whole."""
    ds = execute._dataset(s.data, s.seed, None)
    return ds, ds.truth()


def scored_both_ways(monkeypatch, s, generated: type, base: type) -> tuple[dict, dict]:
    """The run ``s`` executed with the truth joined from its parts (``generated.truth``
    raising: never computed) and with it computed (``base.truth_join`` joining nothing)."""
    def never(self):
        raise AssertionError("the orchestrator computed the truth")

    with monkeypatch.context() as m:
        m.setattr(generated, "truth", never)
        joined = execute.execute(s)
    monkeypatch.setattr(base, "truth_join", lambda self, parts: None)
    return joined, execute.execute(s)


def check_a_tap_that_misses_or_repeats_agents(ds, want: dict,
                                              same: Callable[[Any, dict], None]) -> None:
    """A tap of 1,000 agents gives no part until every agent was heard once (a chunk made
    again heard once), and none once a range inside what it heard comes again."""
    rows = ds.rows(0, 1000)
    tap = ds.truth_tap(0, 1000, None)
    tap.watch(rows[:400], 0)
    assert tap.part() is None  # 400 .. 999 unheard
    tap.watch(rows[400:], 400)
    tap.watch(rows[400:], 400)  # a chunk made again: heard once
    same(ds.truth_join([tap.part()]), want)
    tap.watch(rows[:10], 200)  # inside what was heard, not a chunk made again
    assert tap.part() is None


def check_parts_of_another_data_set_or_short_are_refused(ds, other) -> None:
    """The parts of ``ds`` (1,000 agents) join into no truth of ``other``, nor do a half, none
    or a half twice into its own."""
    whole = ds.truth_tap(0, 1000, None)
    whole.watch(ds.rows(0, 1000))
    assert other.truth_join([whole.part()]) is None
    half = ds.truth_tap(0, 500, None)
    half.watch(ds.rows(0, 500))
    assert ds.truth_join([half.part()]) is None and ds.truth_join([]) is None
    assert ds.truth_join([half.part(), half.part()]) is None
