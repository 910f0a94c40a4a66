"""The agents' lifetime odometer the orchestrator keeps for the local backends' one-run pools
(``[agents] lifetime_epsilon``): what the agents spent on each data set in a sweep's runs, and
what a run meets before it (``spent_before``).

Its book is filled from records the orchestrator made itself: the runs it executes, and, when
a sweep resumes, its stored runs executed again (``recomputed_spending``). It never reads a
spend from ``results.jsonl``: any reader of the directory could write that file, and zeroing a
stored spend would let the resumed sweep spend past the agents' lifetime budget.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import InprocBackend
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.sweep import identity
from ldpsim.simulator.sweep.results import RESULTS_FILE, ResultsCorruptError, is_degraded
from ldpsim.simulator.sweep.scenario import RunSpec, ScenarioError

#: what the agents' lifetime odometer reads of a run, recomputed for every stored run
SPEND_FIELDS = ("epsilon_spent_max", "epsilon_spent_mean", "epsilon_lifetime_max")


def recomputed_spending(out_dir: str | Path, numbered: list[tuple[int, dict[str, Any]]],
                         todo: list[RunSpec], echo=print) -> dict[Any, dict[str, float]]:
    """What the agents spent in the stored runs on the data sets of the runs ``todo``, by data
    set and run key (``note_spending``), recomputed from each run's spec: the stored runs of
    those data sets re-executed in the order they were executed (``results.jsonl``'s order),
    each with the odometer of the runs before it (``rerun(spending=True)``), on the inproc
    backend (the same results as every other). A record is never the odometer's source: a
    stored run's spend is a file any reader of the directory could write.

    Raises
    ------
    ResultsCorruptError
        A stored record (not degraded) whose spend is not what its run spends, naming the
        line, key and field.
    ScenarioError
        A stored run that no stored sweep has (a directory written before they were stored):
        its spend cannot be recomputed.
    """
    from ldpsim.simulator.sweep.runner import rerun  # the runner keeps this odometer

    specs: dict[str, RunSpec] = {}
    for scen in identity.stored_scenarios(out_dir):
        for spec in scen.runs():
            specs.setdefault(spec.key, spec)
    seeds = {s.seed for s in todo}
    lines = []
    for line, rec in numbered:
        spec = specs.get(rec["key"])
        if spec is None:
            raise ScenarioError(f"{Path(out_dir) / RESULTS_FILE}: line {line}: run "
                                f"{rec['key']} is in no stored sweep: what its agents spent "
                                "cannot be recomputed for their lifetime budget")
        if spec.seed in seeds:
            lines.append((line, rec, replace(spec, runtime={**spec.runtime,
                                                            "backend": InprocBackend.name})))
    if not lines:
        return {}
    echo(f"lifetime budget: recomputing what the agents spent in "
         f"{counted(len(lines), 'stored run')}", file=sys.stderr)
    book: dict[Any, dict[str, float]] = {}
    last = {rec["key"]: line for line, rec, _ in lines}
    with tempfile.TemporaryDirectory(prefix="ldpsim-spend-") as scratch:
        fresh_runs = rerun([spec for _, _, spec in lines], Path(scratch), spending=True)
        for (line, rec, _), (_, fresh) in zip(lines, fresh_runs, strict=True):
            if isinstance(fresh, RunFailed):
                raise fresh
            note_spending(book, fresh)
            if last[rec["key"]] == line and not is_degraded(rec):
                _check_spend(rec, fresh, line, Path(out_dir) / RESULTS_FILE)
    return book


def _check_spend(rec: dict[str, Any], fresh: dict[str, Any], line: int, path: Path) -> None:
    """Raise ResultsCorruptError when the stored ``rec`` says its agents spent other than its
    re-execution ``fresh`` does (``SPEND_FIELDS``)."""
    mine, theirs = rec.get("privacy") or {}, fresh.get("privacy") or {}
    for k in SPEND_FIELDS:
        if mine.get(k) != theirs.get(k):
            raise ResultsCorruptError(
                f"{path}: line {line}: run {rec['key']} says its agents spent privacy.{k} = "
                f"{mine.get(k)!r}, its run spends {theirs.get(k)!r}: the record was edited or "
                "written by other code; the agents' lifetime budget is not resumed from it "
                "(ldpsim verify names what else differs)")


def note_spending(book: dict[Any, dict[str, float]], rec: dict[str, Any]) -> None:
    """Enter a run's record in ``book`` (what its agents spent, by data set and run key); a
    redone run replaces its earlier record, as the store does."""
    book.setdefault(rec.get("seed"), {})[rec["key"]] = float(
        (rec.get("privacy") or {}).get("epsilon_spent_max") or 0.0)


def spent_before(book: dict[Any, dict[str, float]], spec: RunSpec) -> float:
    """What the agents spent on ``spec``'s data set in the runs stored so far (the sum of each
    run's largest spend: the lifetime odometer the orchestrator keeps for the local backends'
    one-run pools), when the scenario gives them a lifetime budget; else 0."""
    if spec.agents.get("lifetime_epsilon") is None:
        return 0.0
    return sum(v for key, v in book.get(spec.seed, {}).items() if key != spec.key)
