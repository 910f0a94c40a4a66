"""The agents' lifetime odometer the orchestrator keeps for the local backends' one-run pools
(``[agents] lifetime_epsilon``): what the agents spent on each data set in a sweep's runs, and
what a run meets before it (``spent_before``).

Its book is filled from records the orchestrator made itself: the runs it executes, and, when
a sweep resumes, its stored runs executed again (``stored_runs``, ``recomputed_spending``). It
never reads a spend from ``results.jsonl``: any reader of the directory could write that file,
and zeroing a stored spend would let the resumed sweep spend past the agents' lifetime budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import InprocBackend
from ldpsim.simulator.results.store import RESULTS_FILE, ResultsCorruptError, is_degraded
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario.scenario import RunSpec, ScenarioError
from ldpsim.simulator.session import RunFailed

#: what the agents' lifetime odometer reads of a run, recomputed for every stored run
SPEND_FIELDS = ("epsilon_spent_max", "epsilon_spent_mean", "epsilon_lifetime_max")


def stored_runs(out_dir: str | Path, numbered: list[tuple[int, dict[str, Any]]],
                todo: list[RunSpec]) -> list[tuple[int, dict[str, Any], RunSpec]]:
    """The stored runs whose spend the runs ``todo`` meet: every line of ``results.jsonl``
    (``numbered``) of a data set a run of ``todo`` uses, in file order (the order they were
    executed), each with its line, its record and its spec (from the sweeps stored in
    ``out_dir``) on the inproc backend (the same results as every other; never a long-lived
    pool's, whose own ledger a re-execution would charge).

    Raises
    ------
    ScenarioError
        A stored run that no stored sweep has (a directory written before they were stored):
        its spend cannot be recomputed.
    """
    specs: dict[str, RunSpec] = {}
    for scen in identity.stored_scenarios(out_dir):
        for spec in scen.runs():
            specs.setdefault(spec.key, spec)
    seeds = {s.seed for s in todo}
    out = []
    for line, rec in numbered:
        spec = specs.get(rec["key"])
        if spec is None:
            raise ScenarioError(f"{Path(out_dir) / RESULTS_FILE}: line {line}: run "
                                f"{rec['key']} is in no stored sweep: what its agents spent "
                                "cannot be recomputed for their lifetime budget")
        if spec.seed in seeds:
            out.append((line, rec, replace(spec, runtime={**spec.runtime,
                                                          "backend": InprocBackend.name})))
    return out


def recomputed_spending(runs: list[tuple[int, dict[str, Any], RunSpec]],
                        fresh: Iterable[tuple[RunSpec, Any]], path: Path
                        ) -> dict[Any, dict[str, float]]:
    """The odometer's book (``note_spending``) of the stored ``runs`` (``stored_runs``) from
    their re-executions ``fresh`` (``runner.rerun(spending=True)`` of their specs, in order),
    never from their records: a stored run's spend is a file any reader of the directory
    could write.

    Raises
    ------
    ResultsCorruptError
        A stored record (its key's latest, not degraded) whose spend is not what its run
        spends, naming the file ``path``, line, key and field.
    RunFailed
        A stored run that fails to run again.
    """
    book: dict[Any, dict[str, float]] = {}
    last = {rec["key"]: line for line, rec, _ in runs}
    for (line, rec, spec), (_, again) in zip(runs, fresh, strict=True):
        if isinstance(again, RunFailed):
            raise again
        note_spending(book, again, spec)
        if last[rec["key"]] == line and not is_degraded(rec):
            _check_spend(rec, again, line, path)
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


def note_spending(book: dict[Any, dict[str, float]], rec: dict[str, Any],
                  spec: RunSpec) -> None:
    """Enter the record ``rec`` of the run ``spec`` in ``book`` (what its agents spent, by
    data set and execution: the runs of one execution, which differ only in their coalition,
    spent once); a redone run replaces its earlier record, as the store does."""
    book.setdefault(rec.get("seed"), {})[spec.execution or spec.key] = float(
        (rec.get("privacy") or {}).get("epsilon_spent_max") or 0.0)


def spent_before(book: dict[Any, dict[str, float]], spec: RunSpec) -> float:
    """What the agents spent on ``spec``'s data set in the runs stored so far (the sum of each
    run's largest spend: the lifetime odometer the orchestrator keeps for the local backends'
    one-run pools), when the scenario gives them a lifetime budget; else 0."""
    if spec.agents.get("lifetime_epsilon") is None:
        return 0.0
    own = spec.execution or spec.key
    return sum(v for key, v in book.get(spec.seed, {}).items() if key != own)
