"""``ldpsim verify``: re-execute stored runs and report each whose results differ.

Every run is deterministic: its output, metrics, leakage and exact byte counts follow from its
settings and its keys alone (the seed's, or the master secret's of ``[runtime] secret``), on
every backend. So a results directory and the code version that wrote it (``versions.ldpsim``
of every record) reproduce bit for bit, and a record that does not is wrong: edited, written
by other code, or damaged. ``verify`` re-executes the stored runs (all, or a ``sample``) from
the sweeps stored beside them (``identity.stored_scenarios``) and compares, field by field,
what a run determines (``compared``): not its timings, the pools' physical frames (their
batching follows the machine), nor the privacy odometer's reading (the sweep's order). A
degraded run (it lost agents) is re-executed only where the sweep injected its faults: other
losses are not part of a run's settings.

Records are first checked as every reader checks them (``identity.check_records``): a record
that is not one of the directory's runs is refused before anything is re-executed.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.sweep import identity
from ldpsim.simulator.sweep.progress import progress
from ldpsim.simulator.sweep.results import RESULTS_FILE, ResultStore, is_degraded, jsonable, latest
from ldpsim.simulator.sweep.runner import rerun
from ldpsim.simulator.sweep.scenario import ScenarioError

#: the backends a re-execution may use (the others need machines or a cluster of their own;
#: their runs are re-executed on ``processes``, whose results are the same bit for bit)
LOCAL = ("inproc", "processes")
#: what a run determines, compared between the stored record and its re-execution
COMPARED = ("status", "lost_agents", "n_agents", "params", "output", "metrics", "leakage",
            "comm")
#: what varies with the machine or the sweep, left out of the comparison
_COMM_LEFT_OUT = ("physical_bytes_up", "physical_bytes_down", "physical_frames")
_ROUND_LEFT_OUT = ("wall_s", "curator_cpu_s", "batch")


@dataclass
class Difference:
    """A stored run whose re-execution differs: its key, line, and the differing fields."""

    key: str
    line: int
    protocol: str
    fields: list[str]

    def __str__(self) -> str:
        shown = ", ".join(self.fields[:8]) + (", ..." if len(self.fields) > 8 else "")
        return f"run {self.key} ({RESULTS_FILE} line {self.line}, {self.protocol}): {shown}"


@dataclass
class Report:
    """What ``verify`` found: runs re-executed, of how many stored, and those that differ or
    failed to run again."""

    checked: int
    total: int
    differing: list[Difference] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: degraded runs of sweeps without injected faults: their losses (a pool that died, a
    #: network that failed) are not part of their settings, so they are not re-executed
    degraded: int = 0

    @property
    def ok(self) -> bool:
        """Every re-executed run reproduced its record."""
        return not self.differing and not self.failed


def compared(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``record`` a re-execution must reproduce, flattened to dotted names
    (``output.ranking``, ``comm.per_round.0.bytes_up``), as JSON values."""
    rec = json.loads(json.dumps(jsonable(record)))  # as stored: nan -> null, tuples -> lists
    out: dict[str, Any] = {}
    for name in COMPARED:
        value = rec.get(name)
        if name == "leakage" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "seconds"}
        if name == "comm" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _COMM_LEFT_OUT}
            if isinstance(value.get("per_round"), list):
                value["per_round"] = [
                    {k: v for k, v in r.items() if k not in _ROUND_LEFT_OUT}
                    if isinstance(r, dict) else r for r in value["per_round"]]
        _flatten(name, value, out)
    return out


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}.{i}", v, out)
    else:
        out[prefix] = value


def differing_fields(stored: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """The dotted fields in which two records differ (``compared``); a field one of them lacks
    counts, except ``comm.per_round`` when the stored one was written without it."""
    a, b = compared(stored), compared(fresh)
    if not any(k.startswith("comm.per_round") for k in a):  # ``[output] per_round = false``
        b = {k: v for k, v in b.items() if not k.startswith("comm.per_round")}
    return sorted(k for k in set(a) | set(b) if a.get(k, _MISSING) != b.get(k, _MISSING))


_MISSING = object()


def sample_of(keys: list[str], fraction: float) -> list[str]:
    """A reproducible sample of ``ceil(fraction * len(keys))`` keys (the same every time: the
    keys with the smallest SHA-256), in their given order."""
    if fraction >= 1:
        return list(keys)
    k = math.ceil(fraction * len(keys))
    chosen = set(sorted(keys, key=lambda s: hashlib.sha256(s.encode()).digest())[:k])
    return [s for s in keys if s in chosen]


def verify(out_dir: str | Path, sample: float = 1.0, jobs: int = 1,
           backend: str | None = None, show_progress: bool = False) -> Report:
    """Re-execute the runs stored in ``out_dir`` and compare them with their records.

    Parameters
    ----------
    out_dir : str or Path
        A results directory written by ``ldpsim run`` (or ``ldpsim.run(out=...)``).
    sample : float, default 1.0
        The fraction of stored runs to re-execute, in (0, 1]; the sample is the same every
        time (``sample_of``).
    jobs : int, default 1
        Worker processes re-executing runs at once.
    backend : str, optional
        ``inproc`` or ``processes``; default each sweep's own when it is one of them, else
        ``processes``.
    show_progress : bool
        A progress bar on stderr.

    Returns
    -------
    Report

    Raises
    ------
    FileNotFoundError
        ``out_dir`` holds no results.
    ResultsCorruptError
        A stored record is not one of the directory's runs (``identity.check_records``).
    ScenarioError
        Bad ``sample`` or ``backend``, or a directory written before its sweeps were stored.
    """
    if not isinstance(sample, int | float) or not 0 < sample <= 1:
        raise ScenarioError(f"--sample: got {sample!r}; allowed: a fraction in (0, 1]")
    if backend is not None and backend not in LOCAL:
        raise ScenarioError(f"--backend: got {backend!r}; allowed: {', '.join(LOCAL)}")
    directory = Path(out_dir)
    if not (directory / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"no results in {out_dir}: not a results directory (no "
                                f"{RESULTS_FILE})")
    store = ResultStore(directory)
    numbered = store.numbered()
    identity.check_records(directory, numbered)
    line_of = {rec["key"]: line for line, rec in numbered}  # the latest line of each key
    records = {r["key"]: r for r in latest([rec for _, rec in numbered])}
    specs = {}
    for scen in identity.stored_scenarios(directory):
        for spec in scen.runs():
            specs.setdefault(spec.key, spec)
    if not specs:
        raise ScenarioError(f"{directory / identity.FINGERPRINT_FILE}: no stored sweep to "
                            "re-execute (a directory written before they were stored)")
    lost = {k for k, r in records.items()
            if is_degraded(r) and k in specs and not specs[k].runtime.get("faults")}
    keys = sample_of([k for k in records if k in specs and k not in lost], sample)
    report = Report(checked=0, total=len(records), degraded=len(lost))
    report.failed = [(k, "no stored sweep has this run") for k in records if k not in specs]
    by_backend: dict[str, list[Any]] = {}
    for k in keys:
        spec = specs[k]
        name = backend or (spec.runtime["backend"] if spec.runtime["backend"] in LOCAL
                           else "processes")
        by_backend.setdefault(name, []).append(
            replace(spec, runtime={**spec.runtime, "backend": name}))
    with tempfile.TemporaryDirectory(prefix="ldpsim-verify-") as scratch, \
            progress(len(keys), "verify", enabled=show_progress) as bar:
        for group in by_backend.values():
            for spec, fresh in rerun(group, Path(scratch), jobs):
                report.checked += 1
                bar.update(1)
                if isinstance(fresh, RunFailed):
                    report.failed.append((spec.key, str(fresh).splitlines()[0]))
                    continue
                diff = differing_fields(records[spec.key], fresh)
                if diff:
                    report.differing.append(
                        Difference(spec.key, line_of[spec.key], spec.protocol, diff))
    order = {k: i for i, k in enumerate(records)}
    report.differing.sort(key=lambda d: order[d.key])
    return report
