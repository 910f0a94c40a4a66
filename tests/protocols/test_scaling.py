"""No per-report Python on a protocol's hot paths, checked for every registered protocol.

The curator's ``plan``, ``absorb`` and ``finish`` and the agents' ``respond`` are run on the
protocol's example data at two sizes, n and 10 n agents, with a line tracer counting how often
every line of Python (the protocol's, numpy's, anyone's) executes. A loop over reports makes
some line run at least once per report, so its count grows by about 9 n; vectorised code runs
a line a fixed number of times, or once per cache-sized chunk of rows (``protocols.rng`` draws
at least 64 rows a pass), or once per iteration of an estimator whose iteration count does not
follow the number of reports. A line is flagged when its count grows in proportion to the
reports (at least 5x for 10x the reports) *and* by at least one per ``PER`` added reports.

Counting is deterministic, unlike timing: the same code on the same data executes the same
lines on any machine, under any load. Each protocol is checked with its defaults and with every
other choice of each parameter that has choices (oracles, report formats and estimators run
different code).
"""

from __future__ import annotations

import linecache
import sys
from collections import Counter
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols import PROTOCOLS, ParamError, get_data_kind, get_protocol
from ldpsim.protocols.local import example_data, local_rounds
from ldpsim.protocols.rng import stream_key

NAMES = sorted(PROTOCOLS)
#: An estimator's iteration count is a maximum over its agents, so it grows with n (the slowest
#: of 20,000 voters takes more Newton iterations than the slowest of 2,000) but stays under the
#: estimator's cap: the ethics MLE's loop lines run at most about 4 x 100 times however many
#: voters there are. The sizes make (n2 - n1) / PER = 562 exceed that, while a loop over reports
#: grows by about 18,000 and a chunk loop of fewer than PER rows by more than 562: both flagged.
SIZES = (2000, 20000)
#: a line flagged grows by at least one execution per PER added reports
PER = 32
PHASES = ("plan", "respond", "absorb", "finish")


class LineCounter:
    """``with LineCounter() as c:`` counts every executed line of Python, by (file, line)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int]] = Counter()

    def _local(self, frame, event, arg):
        if event == "line":
            self.counts[(frame.f_code.co_filename, frame.f_lineno)] += 1
        return self._local

    def _global(self, frame, event, arg):
        return self._local

    def __enter__(self) -> LineCounter:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._previous)


def phase_counts(name: str, n: int, params: dict[str, Any]) -> dict[str, Counter]:
    """Executed lines per phase of one run of ``name`` over n agents (the loop of
    ``protocols.local.run_locally``, the data built outside the count)."""
    proto = get_protocol(name)
    table = dict(example_data(name))
    table["n"] = n
    args = {k: v for k, v in table.items() if k != "kind"}
    data = get_data_kind(table["kind"]).build(args, stream_key(0, "data"))
    counts = {p: Counter() for p in PHASES}

    def counted(phase: str, fn, *a):
        with LineCounter() as c:
            out = fn(*a)
        counts[phase].update(c.counts)
        return out

    local_rounds(proto.bind(params, data.public), data, 0, counted)
    return counts


def per_report_lines(name: str, params: dict[str, Any]) -> list[str]:
    """The lines whose executions grow with the number of reports (see the module docstring),
    as readable strings."""
    n1, n2 = SIZES
    small, large = phase_counts(name, n1, params), phase_counts(name, n2, params)
    out = []
    for phase in PHASES:
        a, b = small[phase], large[phase]
        for (path, line), count in sorted(b.items()):
            if count - a[(path, line)] >= (n2 - n1) / PER and count >= 5 * a[(path, line)]:
                code = linecache.getline(path, line).strip()
                out.append(f"{phase}: {path}:{line} ran {a[(path, line)]} times for {n1} "
                           f"agents, {count} for {n2}: {code}")
    return out


def test_line_counter_sees_a_loop_over_reports():
    def per_report(x):
        total = 0
        for v in x:
            total += v
        return total

    with LineCounter() as c:
        per_report(np.arange(300))
        (np.arange(300) * 2).sum()
    assert max(c.counts.values()) >= 300


def _settings() -> list[tuple[str, dict[str, Any]]]:
    """Every protocol with its defaults, and with each other choice of each parameter that
    has choices (one at a time): oracles, report formats and estimators run different code."""
    out = []
    for name in NAMES:
        out.append((name, {}))
        for pname, spec in PROTOCOLS[name].params.items():
            values = list(spec.choices or ()) + ([True, False] if spec.kind == "bool" else [])
            out += [(name, {pname: v}) for v in values if v != spec.default]
    return out


SETTINGS = _settings()


@pytest.mark.parametrize(("name", "params"), SETTINGS,
                         ids=[f"{n}-{p}" if p else n for n, p in SETTINGS])
def test_no_per_report_python(name, params):
    try:
        bad = per_report_lines(name, params)
    except ParamError as exc:
        pytest.skip(f"not a valid setting on the example data: {exc}")
    assert not bad, f"{name} {params}: Python that runs per report:\n" + "\n".join(bad)
