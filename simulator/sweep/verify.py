"""``ldpsim verify``: prove a results directory, and say what it cannot prove.

Every run is deterministic: its output, metrics, privacy spend, leakage and exact byte counts
follow from its settings and its keys alone (the seed's, or the master secret's of ``[runtime]
secret``), on every backend. So a results directory and the code version that wrote it
(``versions.ldpsim`` of every record) reproduce bit for bit, and a record that does not is
wrong: edited, written by other code, or damaged. ``verify`` checks, against the sweeps stored
beside the results (``identity.stored_scenarios``):

* every record is one of the directory's runs (``identity.check_records``: its key, recomputed
  from its settings) and says what its run is: its ``point``, ``seed`` and privacy claim are
  recomputed from the run's spec (``spec_fields``), for every record, sampled or not;
* every run of the stored sweeps has a record (``missing``);
* the stored runs (all, or a ``sample`` drawn afresh each time: ``sample_of``) are re-executed
  and compared field by field (``compared``): status, output, metrics, the privacy claim and
  the agents' spend, leakage, exact bytes. A degraded run is re-executed too: a fault the sweep
  injected is part of its settings and replays; a loss outside them cannot be reproduced, and
  such a record is reported ``unverifiable``. With a lifetime budget (``[agents]
  lifetime_epsilon``) the runs are re-executed in the order they were executed, each with what
  the re-executed runs before it spent (``runner.rerun(spending=True)``);
* ``summary.csv``, ``per_round.csv`` and ``report.html`` are derived again from the records
  and compared (``table_problems``, ``report_problems``; the report without its figures).

Not checked: what a run measures of the machine that ran it (timings, memory, the pools'
physical frames and bytes: ``NOT_CHECKED``); the figures, which ``ldpsim summary --plots``
and ``ldpsim report`` draw again from the records; and, of a run on the hosts backend, what
its pools' lifetime ledger read (it spans other runs than the directory's).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ldpsim.simulator.backends import get_backend
from ldpsim.simulator.results.progress import progress
from ldpsim.simulator.results.report import REPORT_FILE, comparable
from ldpsim.simulator.results.store import (
    PER_ROUND_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    ResultStore,
    is_degraded,
    jsonable,
    latest,
    usable,
)
from ldpsim.simulator.results.summary import csv_text, per_round, summarize
from ldpsim.simulator.scenario import identity
from ldpsim.simulator.scenario.scenario import RunSpec, ScenarioError
from ldpsim.simulator.session import RunFailed
from ldpsim.simulator.session.keyfiles import SEED_ONLY, read_host_keys
from ldpsim.simulator.sweep.execute import claimed, public_facts
from ldpsim.simulator.sweep.reporting import page
from ldpsim.simulator.sweep.runner import in_run_order, rerun

#: the backends a re-execution may use (the others need machines or a cluster of their own;
#: their runs are re-executed on ``processes``, whose results are the same bit for bit)
LOCAL = ("inproc", "processes")
#: what a run determines, compared between the stored record and its re-execution
COMPARED = ("status", "lost_agents", "n_agents", "params", "output", "metrics", "leakage",
            "comm", "privacy", "refused", "refusal")
#: what a record says of its run that its spec alone gives, checked for every record
IDENTITY = ("point", "seed")
#: what varies with the machine or the sweep, left out of the comparison
_COMM_LEFT_OUT = ("physical_bytes_up", "physical_bytes_down", "physical_frames")
_ROUND_LEFT_OUT = ("wall_s", "curator_cpu_s", "batch")
#: what ``verify`` does not check, as its output says
NOT_CHECKED = ("timings and memory (measurements of the machine that ran them), the pools' "
               "physical frames and bytes (their batching follows the machine), the figures "
               "(drawn again from the records by ldpsim summary --plots and ldpsim report), "
               "and on the hosts backend the pools' lifetime reading "
               "(privacy.epsilon_lifetime_max: their ledger outlives the sweep)")
#: what a run on a backend whose pools outlive it (hosts) reads of their lifetime ledger:
#: what the agents spent over the pools' lifetime, not the run's alone
_LONG_LIVED = ("privacy.epsilon_lifetime_max",)
#: the fields a loss of agents changes in a record beside its metrics
_LOSS = ("status", "lost_agents")


@dataclass
class Difference:
    """A stored run whose re-execution, or spec, differs: its key, line, and the differing
    fields."""

    key: str
    line: int
    protocol: str
    fields: list[str]

    def __str__(self) -> str:
        shown = ", ".join(self.fields[:8]) + (", ..." if len(self.fields) > 8 else "")
        return f"run {self.key} ({RESULTS_FILE} line {self.line}, {self.protocol}): {shown}"


@dataclass
class Report:
    """What ``verify`` found: runs re-executed, of how many stored, and every problem."""

    checked: int
    total: int
    #: records whose re-execution or spec differs
    differing: list[Difference] = field(default_factory=list)
    #: (run key, why) of runs that failed to run again, or that no stored sweep has
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: degraded records re-executed (every one is)
    degraded: int = 0
    #: runs of the stored sweeps without a record
    missing: list[str] = field(default_factory=list)
    #: (run key, why) of degraded runs whose loss is outside their settings (no fault the
    #: sweep injected) and does not reproduce: their records cannot be verified
    unverifiable: list[tuple[str, str]] = field(default_factory=list)
    #: (file name, why) of the tables that the records do not give
    files: list[tuple[str, str]] = field(default_factory=list)
    #: the run keys re-executed and compared, in the directory's order
    sampled: list[str] = field(default_factory=list)
    #: the seed of the sample's draw (``sample_of``); None when every run was re-executed
    sample_seed: int | None = None
    #: runs re-executed only to replay the agents' lifetime odometer for the sample
    replayed: int = 0

    @property
    def ok(self) -> bool:
        """Every record is proven: re-executed runs reproduced, spec fields match, no run is
        missing, no degraded record is unverifiable, and the tables are the records'."""
        return not (self.differing or self.failed or self.missing or self.unverifiable
                    or self.files)


def _json(value: Any) -> Any:
    """``value`` as stored in a JSON line (nan -> null, tuples -> lists)."""
    return json.loads(json.dumps(jsonable(value)))


def compared(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``record`` a re-execution must reproduce, flattened to dotted names
    (``output.ranking``, ``comm.per_round.0.bytes_up``), as JSON values."""
    rec = _json(record)
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


def spec_fields(record: dict[str, Any], spec: RunSpec,
                claim: dict[str, Any] | None = None) -> list[str]:
    """The dotted fields of ``record`` that differ from what its run's ``spec`` gives: its
    ``IDENTITY`` (its parameter point, its data set's seed: a record relabelled into another
    row of the summary) and, given the run's privacy ``claim`` (``execute.claimed``), the
    claim its ``privacy`` states (ε, mechanism, model, ...; the agents' spend is what a
    re-execution checks)."""
    mine: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    for name in IDENTITY:
        _flatten(name, _json(record.get(name)), mine)
        _flatten(name, _json(getattr(spec, name)), theirs)
    if claim is not None:
        stated = record.get("privacy") if isinstance(record.get("privacy"), dict) else {}
        _flatten("privacy", _json({k: stated.get(k) for k in claim}), mine)
        _flatten("privacy", _json(claim), theirs)
    return sorted(k for k in set(mine) | set(theirs)
                  if mine.get(k, _MISSING) != theirs.get(k, _MISSING))


def _claims(specs: list[RunSpec]) -> dict[str, dict[str, Any] | None]:
    """Each spec's privacy claim (``execute.claimed``), by run key, each data set's public
    facts built once; None where it cannot be computed here (a data file missing: the
    re-execution then fails and says so)."""
    out: dict[str, dict[str, Any] | None] = {}
    facts: dict[str, dict[str, Any] | None] = {}
    for spec in specs:
        sig = json.dumps([spec.data, spec.seed, spec.runtime.get("secret")], sort_keys=True,
                         default=str)
        if sig not in facts:
            try:
                facts[sig] = public_facts(spec)
            except Exception:  # noqa: BLE001 - any failure: left to the re-execution
                facts[sig] = None
        public = facts[sig]
        try:
            out[spec.key] = None if public is None else claimed(spec, public)
        except Exception:  # noqa: BLE001 - likewise
            out[spec.key] = None
    return out


def sample_of(keys: list[str], fraction: float, seed: int) -> list[str]:
    """A sample of ``ceil(fraction * len(keys))`` keys, in their given order: those with the
    smallest SHA-256 of ``seed`` and the key. Drawn with a fresh ``seed`` (``new_seed``) nobody
    knows the sample in advance; the same ``seed`` draws the same sample again."""
    if fraction >= 1:
        return list(keys)
    k = math.ceil(fraction * len(keys))

    def rank(key: str) -> bytes:
        return hashlib.sha256(f"{seed}:{key}".encode()).digest()

    chosen = set(sorted(keys, key=rank)[:k])
    return [s for s in keys if s in chosen]


def new_seed() -> int:
    """A fresh seed for ``sample_of``, from the operating system's randomness."""
    return secrets.randbits(63)


def missing_runs(records: dict[str, Any], order: list[str]) -> list[str]:
    """The run keys of ``order`` (every run of the stored sweeps) without a record."""
    return [k for k in order if k not in records]


def table_texts(records: list[dict[str, Any]], orders: list[list[str]]
                ) -> dict[str, set[str]]:
    """What ``summary.csv`` and ``per_round.csv`` may hold, derived from ``records``: their
    text in each of ``orders`` (the run orders the directory's sweeps wrote them in), with
    degraded runs left out or included (``--include-degraded``); "" for a per-round table
    the records give no rows of (not written)."""
    out: dict[str, set[str]] = {SUMMARY_FILE: set(), PER_ROUND_FILE: set()}
    distinct = [o for i, o in enumerate(orders) if o not in orders[:i]]
    for order in distinct:
        ordered = in_run_order(records, order)
        for degraded in (False, True):
            shown = usable(ordered, degraded)
            out[SUMMARY_FILE].add(csv_text(*summarize(shown)))
            columns, rows = per_round(shown)
            out[PER_ROUND_FILE].add(csv_text(columns, rows) if rows else "")
    return out


def table_problems(directory: Path, records: list[dict[str, Any]], orders: list[list[str]]
                   ) -> list[tuple[str, str]]:
    """(file name, why) of each table in ``directory`` that ``records`` do not give
    (``table_texts``); a table not written is not checked."""
    problems = []
    for name, texts in table_texts(records, orders).items():
        path = directory / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            problems.append((name, f"unreadable ({e})"))
            continue
        if text not in texts:
            why = ("the records give no rows of it" if texts == {""} else
                   f"not what the records in {RESULTS_FILE} give (edited, or written from "
                   "other records); ldpsim summary writes it again")
            problems.append((name, why))
    return problems


def report_problems(directory: Path) -> list[tuple[str, str]]:
    """(``report.html``, why) when ``directory``'s report is not the page its records and
    stored sweeps give (``report.page``), its figures left out of the comparison
    (``report.comparable``); a report not written is not checked."""
    path = directory / REPORT_FILE
    if not path.is_file():
        return []
    try:
        stored = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return [(REPORT_FILE, f"unreadable ({e})")]
    if comparable(stored) != comparable(page(directory, figures=False)):
        return [(REPORT_FILE, "not the page the records and the stored sweeps give (edited, or "
                              "written from other records); ldpsim report writes it again")]
    return []


def _loss(record: dict[str, Any], fresh: dict[str, Any], diff: list[str]) -> str:
    """Why a degraded ``record`` whose sweep injected no fault cannot be verified, its
    re-execution ``fresh`` having lost no agent (``diff``: the fields that differ)."""
    other = [f for f in diff if f not in _LOSS]
    return (f"marked degraded ({record.get('lost_agents')} agents lost) in a sweep that "
            "injected no fault: its loss is not part of its settings and its re-execution "
            "loses none, so its record cannot be verified (ldpsim run redoes it)"
            + (f"; beside the loss it differs in {', '.join(other[:8])}" if other else
               "; beside the loss its fields reproduce"))


def _lifetime(specs: dict[str, RunSpec]) -> bool:
    return any(s.agents.get("lifetime_epsilon") is not None for s in specs.values())


def _to_execute(numbered: list[tuple[int, dict[str, Any]]], specs: dict[str, RunSpec],
                keys: list[str], lifetime: bool) -> list[RunSpec]:
    """The specs to re-execute for the sample ``keys``: those, in the directory's order; with
    a lifetime budget every line of ``results.jsonl`` in file order (the order the runs were
    executed, a redone run's earlier record included) up to the last sampled run of its data
    set, so each sampled run meets the odometer it met."""
    if not lifetime:
        return [specs[k] for k in keys]
    wanted = set(keys)
    last: dict[Any, int] = {}
    for i, (_, rec) in enumerate(numbered):
        if rec["key"] in wanted and rec["key"] in specs:
            last[specs[rec["key"]].seed] = i
    return [specs[rec["key"]] for i, (_, rec) in enumerate(numbered)
            if rec["key"] in specs and i <= last.get(specs[rec["key"]].seed, -1)]


def _on(spec: RunSpec, backend: str | None) -> RunSpec:
    """``spec`` on ``backend``, or on its own when that is a local one, else ``processes``."""
    name = backend or (spec.runtime["backend"] if spec.runtime["backend"] in LOCAL
                       else "processes")
    return replace(spec, runtime={**spec.runtime, "backend": name})


def _reexecute(todo: list[RunSpec], backend: str | None, jobs: int, lifetime: bool,
               show_progress: bool) -> dict[str, dict[str, Any] | RunFailed]:
    """Each run of ``todo`` executed again (``runner.rerun``), by run key (a key executed
    twice, a redone run's earlier record replayed: the later). Each backend's runs go
    together; with a ``lifetime`` budget all on the first run's backend, one after the other
    in their given order, with the odometer of the runs before."""
    shared = backend
    if lifetime and todo and backend is None:  # one odometer: one sequence, one backend
        shared = _on(todo[0], None).runtime["backend"]
    groups: dict[str, list[RunSpec]] = {}
    for spec in todo:
        on = _on(spec, shared)
        groups.setdefault(on.runtime["backend"], []).append(on)
    fresh_of: dict[str, dict[str, Any] | RunFailed] = {}
    with tempfile.TemporaryDirectory(prefix="ldpsim-verify-") as scratch, \
            progress(len(todo), "verify", enabled=show_progress) as bar:
        for group in groups.values():
            for spec, fresh in rerun(group, Path(scratch), jobs, spending=lifetime):
                bar.update(1)
                fresh_of[spec.key] = fresh
    return fresh_of


def _check_options(sample: Any, backend: str | None) -> None:
    """Check ``verify``'s ``sample`` and ``backend``.

    Parameters
    ----------
    sample : Any
        The fraction of stored runs to re-execute.
    backend : str | None
        The backend to re-execute on, if any.

    Raises
    ------
    ScenarioError
        ``sample`` not a fraction in (0, 1], or ``backend`` not a local one.
    """
    if not isinstance(sample, int | float) or not 0 < sample <= 1:
        raise ScenarioError(f"--sample: got {sample!r}; allowed: a fraction in (0, 1]")
    if backend is not None and backend not in LOCAL:
        raise ScenarioError(f"--backend: got {backend!r}; allowed: {', '.join(LOCAL)}")


def _stored_specs(directory: Path, secret: str | None
                  ) -> tuple[dict[str, RunSpec], list[list[str]]]:
    """The runs of the directory's stored sweeps, after reading the secret to re-execute with.

    Parameters
    ----------
    directory : Path
        The results directory.
    secret : str | None
        The experiment's secret (``verify``).

    Returns
    -------
    tuple[dict[str, RunSpec], list[list[str]]]
        The runs by key (the first sweep's of a key shared), and the run orders: the
        directory's stored order, then each sweep's.

    Raises
    ------
    ScenarioError
        No stored sweep (a directory written before they were stored).
    """
    sweeps = identity.stored_scenarios(directory, secret)
    for scen in sweeps:  # the secret to re-execute with, before any run
        if scen.runtime["secret"] != SEED_ONLY:
            read_host_keys(scen.runtime["secret"])
    specs: dict[str, RunSpec] = {}
    orders = [identity.stored_order(directory)]
    for scen in sweeps:
        runs = scen.runs()
        orders.append([s.key for s in runs])
        for spec in runs:
            specs.setdefault(spec.key, spec)
    if not specs:
        raise ScenarioError(f"{directory / identity.FINGERPRINT_FILE}: no stored sweep to "
                            "re-execute (a directory written before they were stored)")
    return specs, orders


def _check_stored(report: Report, directory: Path, records: dict[str, dict[str, Any]],
                  line_of: dict[str, int], specs: dict[str, RunSpec],
                  orders: list[list[str]]) -> None:
    """Enter in ``report`` what the records show without running anything: runs no stored
    sweep has, missing runs, spec fields that differ, and tables the records do not give.

    Parameters
    ----------
    report : Report
        The report to fill in.
    directory : Path
        The results directory.
    records : dict[str, dict[str, Any]]
        The latest record of each run key.
    line_of : dict[str, int]
        The latest line of each run key.
    specs : dict[str, RunSpec]
        The stored sweeps' runs by key.
    orders : list[list[str]]
        The directory's stored run order, then each sweep's.
    """
    report.failed = [(k, "no stored sweep has this run") for k in records if k not in specs]
    report.missing = missing_runs(records, list(dict.fromkeys(
        [*orders[0], *(k for o in orders[1:] for k in o)])))
    claims = _claims([specs[k] for k in records if k in specs])
    for k, rec in records.items():
        if k in specs and (diff := spec_fields(rec, specs[k], claims[k])):
            report.differing.append(Difference(k, line_of[k], specs[k].protocol, diff))
    report.files = [*table_problems(directory, list(records.values()), orders),
                    *report_problems(directory)]


def verify(out_dir: str | Path, sample: float = 1.0, jobs: int = 1,
           backend: str | None = None, show_progress: bool = False,
           sample_seed: int | None = None, secret: str | None = None) -> Report:
    """Prove the results directory ``out_dir`` (module docstring).

    Parameters
    ----------
    out_dir : str or Path
        A results directory written by ``ldpsim run`` (or ``ldpsim.run(out=...)``).
    sample : float, default 1.0
        The fraction of stored runs to re-execute, in (0, 1]; the spec fields, completeness and
        tables are checked for every run.
    jobs : int, default 1
        Worker processes re-executing runs at once (one with a lifetime budget: its runs
        replay in order).
    backend : str, optional
        ``inproc`` or ``processes``; default each sweep's own when it is one of them, else
        ``processes``.
    show_progress : bool
        A progress bar on stderr.
    sample_seed : int, optional
        The seed of the sample's draw (``sample_of``): default a fresh one (``new_seed``),
        which the report holds so the same draw can be repeated.
    secret : str, optional
        The experiment's secret the runs were executed with: the path of a key file
        ``secret.key``, or ``"seed"``. Default: the one each stored sweep names, and for a
        sweep that was given none, the directory's own ``secret.key``, where the sweep kept
        the fresh secret it drew (``identity.stored_secret``).

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
    KeyFileError
        The secret to re-execute with is missing or no key file (``secret.key`` not in the
        directory, and no ``secret`` given).
    """
    _check_options(sample, backend)
    directory = Path(out_dir)
    if not (directory / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"no results in {out_dir}: not a results directory (no "
                                f"{RESULTS_FILE})")
    numbered = ResultStore(directory).numbered()
    identity.check_records(directory, numbered)
    line_of = {rec["key"]: line for line, rec in numbered}  # the latest line of each key
    records = {r["key"]: r for r in latest([rec for _, rec in numbered])}
    specs, orders = _stored_specs(directory, secret)
    report = Report(checked=0, total=len(records),
                    degraded=sum(is_degraded(r) for r in records.values()))
    _check_stored(report, directory, records, line_of, specs, orders)
    if sample < 1:
        report.sample_seed = new_seed() if sample_seed is None else int(sample_seed)
    report.sampled = sample_of([k for k in records if k in specs], sample,
                               report.sample_seed or 0)
    lifetime = _lifetime(specs)
    todo = _to_execute(numbered, specs, report.sampled, lifetime)
    fresh_of = _reexecute(todo, backend, jobs, lifetime, show_progress)
    for k in report.sampled:
        report.checked += 1
        judge(report, records[k], specs[k], line_of[k], fresh_of[k])
    report.replayed = len(todo) - len(report.sampled)
    order = {k: i for i, k in enumerate(records)}
    report.differing.sort(key=lambda d: order[d.key])
    return report


def judge(report: Report, record: dict[str, Any], spec: RunSpec, line: int,
          fresh: dict[str, Any] | RunFailed) -> None:
    """Enter in ``report`` what the re-execution ``fresh`` of ``record`` shows."""
    if isinstance(fresh, RunFailed):
        report.failed.append((spec.key, str(fresh).splitlines()[0]))
        return
    diff = differing_fields(record, fresh)
    if not get_backend(spec.runtime["backend"]).one_run_pools:  # their ledger outlives it
        diff = [f for f in diff if f not in _LONG_LIVED]
    if is_degraded(record) and not is_degraded(fresh) and not spec.runtime.get("faults"):
        report.unverifiable.append((spec.key, _loss(record, fresh, diff)))
        return
    if diff:
        known = next((d for d in report.differing if d.key == spec.key), None)
        if known is None:
            report.differing.append(Difference(spec.key, line, spec.protocol, diff))
        else:
            known.fields = sorted({*known.fields, *diff})
