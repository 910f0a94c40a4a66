"""``ldpsim reproduce PAPER ...``: every scenario of a paper, at the paper's settings.

Each scenario of each chosen paper (``scenarios/paperNNN_*.toml``, ``catalogue.papers``) runs
into ``OUT/paperNNN/NAME/`` with ``runner.run_scenario``, so a second call resumes: it runs only
what the first left undone. One progress bar spans all the runs of all the chosen scenarios;
its estimate of the time left weighs each run by its scenario's measured time
(``scenarios/durations.json``), scaled by how fast the runs have gone so far. A scenario whose
real data are not in the data folder is skipped with the one line that says which
(``protocols.datasets.missing_line``); one that fails does not stop the others. Each scenario
gets its report (``reporting.write_report``), each paper a page linking them
(``OUT/paperNNN/index.html``, ``reproduce_pages``) and ``OUT/index.html`` links the papers.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ldpsim.protocols.datasets import MissingData, check_present, named
from ldpsim.simulator.results.progress import ProgressBar, progress
from ldpsim.simulator.results.published import compare
from ldpsim.simulator.results.store import RESULTS_FILE, usable
from ldpsim.simulator.scenario import scenario as sc
from ldpsim.simulator.scenario.catalogue import paper_id, papers
from ldpsim.simulator.scenario.measured import duration_text, load_durations, paper_totals
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.sweep import reproduce_pages
from ldpsim.simulator.sweep.interrupt import remembered
from ldpsim.simulator.sweep.reporting import write_report
from ldpsim.simulator.sweep.runner import run_scenario

#: where ``ldpsim reproduce`` writes when not told (``--out``)
DEFAULT_OUT = "results/reproduce"
#: each paper's record of its scenarios' outcomes, beside its index page
STATUS_FILE = "reproduce.json"
#: a run's seconds when its scenario was never measured
UNMEASURED_RUN_S = 0.05


@dataclass
class Outcome:
    """What became of one scenario in ``reproduce``.

    Attributes
    ----------
    name, paper, description : str
        The scenario, its paper and its description.
    status : str
        ``"done"``, ``"skipped"`` (its real data are missing) or ``"failed"``.
    reason : str
        Why it was skipped or failed ("" when done).
    runs : int
        Its runs, with the call's overrides.
    seconds : float
        The time its sweeps took, summed over the calls that ran it.
    measured : float | None
        Its measured time at the shipped settings (``scenarios/durations.json``).
    published : list[int] | None
        With ``[[published]]``: the printed numbers, those we have a mean and a standard error
        for, and those within 2 standard errors of ours.
    report : str | None
        Its report, relative to the paper's folder.
    """

    name: str
    paper: str
    description: str
    status: str
    reason: str = ""
    runs: int = 0
    seconds: float = 0.0
    measured: float | None = None
    published: list[int] | None = None
    report: str | None = None


def chosen_papers(names: list[str], every: bool) -> list[str]:
    """The papers ``names`` give (``002`` or ``paper002``), or all of them with ``every``.

    Raises
    ------
    ValueError
        No paper given, or one that has no scenarios: the message names the allowed values.
    """
    known = list(papers())
    allowed = ("allowed: " + ", ".join(p[5:] for p in known) + " (or paper000 ...), or --all")
    if every:
        return known
    if not names:
        raise ValueError(f"no paper given; {allowed}")
    out = []
    for text in names:
        paper = paper_id(text)
        if paper is None:
            raise ValueError(f"paper {text!r}: no such paper; {allowed}")
        if paper not in out:
            out.append(paper)
    return out


def missing_data(specs: list[sc.RunSpec]) -> str | None:
    """The one line saying which real data set the runs ``specs`` read is missing from the data
    folder, or None when every one is there (or they read none)."""
    seen: set[str] = set()
    for spec in specs:
        for value in spec.data.values():
            if not isinstance(value, str) or named(value) is None or value in seen:
                continue
            seen.add(value)
            try:
                check_present(value)
            except MissingData as e:
                try:  # a folder of files (check_present's directory form)
                    check_present(value, directory=True)
                except MissingData:
                    return str(e)
    return None


class _Overall(ProgressBar):
    """One bar over every run of the chosen scenarios, run by run, with an estimate of the
    time left: each run weighs its scenario's measured seconds per run, scaled by the time the
    runs of this call took against their weight."""

    def __init__(self, bar: ProgressBar, left_s: float) -> None:
        self._bar = bar
        self._left = left_s  # the weight of the runs not done yet
        self._done = 0.0  # the weight of the runs done in this call
        self._start = time.monotonic()
        self._name, self._per_run, self._first, self._count, self._runs = "", 0.0, True, 0, 0

    def begin(self, name: str, runs: int, per_run_s: float) -> None:
        """A scenario of ``runs`` runs of ``per_run_s`` seconds each begins: its first update
        counts the runs it had already done (``run_scenario``'s), not timed here."""
        self._name, self._per_run, self._first = name, per_run_s, True
        self._count, self._runs = 0, runs

    def end(self) -> None:
        """The scenario ended: runs it left (it failed) are counted as not to be done."""
        left = max(0, self._runs - self._count)
        if left:
            self._bar.update(left)
            self._left -= left * self._per_run
        self._runs = self._count = 0

    def eta(self) -> str:
        """``ETA ~12 min``: the weight left, scaled by this call's pace once runs are done."""
        pace = (time.monotonic() - self._start) / self._done if self._done > 0 else 1.0
        return f"ETA ~{duration_text(max(0.0, self._left) * pace)}"

    def update(self, n: int = 1) -> None:
        self._bar.update(n)
        self._count += n
        self._left -= n * self._per_run
        if self._first:
            self._first = False
        else:
            self._done += n * self._per_run

    def set_postfix_str(self, s: str) -> None:
        self._bar.set_postfix_str(f"{self.eta()}; {self._name} {s}")

    def close(self) -> None:
        self._bar.close()


def _per_run(name: str, durations: dict[str, dict[str, Any]]) -> float:
    entry = durations.get(name)
    if entry and int(entry.get("runs") or 0) > 0:
        return float(entry["seconds"]) / int(entry["runs"])
    return UNMEASURED_RUN_S


def _published(scenario: sc.Scenario, records: list[dict[str, Any]]) -> list[int] | None:
    """[printed, compared, within 2 SE] of the scenario's ``[[published]]``, None without."""
    entries = scenario.raw.get("published") or []
    if not entries:
        return None
    rows = compare(entries, usable(records))
    z = [r["z"] for r in rows if r["z"] is not None]
    return [len(rows), len(z), sum(abs(v) <= 2 for v in z)]


def _previous(paper_dir: Path) -> dict[str, dict[str, Any]]:
    path = paper_dir / STATUS_FILE
    try:
        return {o["name"]: o for o in json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def _load(names: list[str], overrides: list[str], durations: dict[str, dict[str, Any]]
          ) -> tuple[list[tuple[Outcome, Any]], list[str]]:
    """Each scenario loaded with ``overrides``, as an outcome and its scenario (None when it
    is skipped or failed already), and the lines to tell the user."""
    loaded, notes = [], []
    for name in names:
        out = Outcome(name, name.split("_", 1)[0], "", "done",
                      measured=(durations.get(name) or {}).get("seconds"))
        scenario = None
        try:
            scenario = sc.load(sc.find(name), overrides)
            out.description = str(scenario.raw.get("description", ""))
            specs = scenario.runs()
            out.runs = len(specs)
            reason = missing_data(specs)
            if reason is not None:
                out.status, out.reason, scenario = "skipped", reason, None
                notes.append(f"warning: skipped {name}: {reason}")
        except Exception as e:  # noqa: BLE001 - one scenario's error stops no other
            out.status, out.reason, scenario = "failed", f"{type(e).__name__}: {e}", None
            notes.append(f"error: {name} failed: {out.reason}")
        loaded.append((out, scenario))
    return loaded, notes


def _run_one(out: Outcome, scenario: Any, paper_dir: Path, bar: _Overall,
             durations: dict[str, dict[str, Any]], echo: Any) -> None:
    """Run (or resume) one scenario into ``paper_dir/NAME`` and write its report."""
    target = paper_dir / out.name
    bar.begin(out.name, out.runs, _per_run(out.name, durations))
    echo(f"{out.name}: {counted(out.runs, 'run')} -> {target}; {bar.eta()} for the whole set")
    start, records = time.monotonic(), None
    try:
        with remembered():
            records, _ = run_scenario(scenario, target, show_progress=False, echo=echo,
                                      bar=bar)
        out.published = _published(scenario, records)
    except Exception as e:  # noqa: BLE001 - one scenario's failure stops no other
        out.status, out.reason = "failed", f"{type(e).__name__}: {e}"
    finally:
        out.seconds += time.monotonic() - start
        bar.end()
    if (target / RESULTS_FILE).is_file():
        try:
            out.report = str(write_report(target, records=records)
                             .relative_to(paper_dir).as_posix())
        except Exception as e:  # noqa: BLE001 - the runs are kept; the page says why
            out.reason = (out.reason + "; " if out.reason else "") + f"no report: {e}"


def reproduce(chosen: list[str], out_dir: str | Path, overrides: list[str] | None = None,
              show_progress: bool = True, echo: Any = print, err: Any = print
              ) -> dict[str, list[Outcome]]:
    """Run every scenario of the papers ``chosen`` into ``out_dir/paperNNN/NAME`` and write
    the reports, each paper's index page and ``out_dir/index.html``.

    Parameters
    ----------
    chosen : list[str]
        The papers (``paper002``; ``chosen_papers`` reads them from the command line).
    out_dir : str | Path
        Where to write.
    overrides : list[str] | None
        ``KEY=VALUE`` settings laid over every scenario (``--set``).
    show_progress : bool
        Whether to show the progress bar (on a terminal).
    echo, err : Any
        Where progress lines go, and the lines the user must see (skipped, failed).

    Returns
    -------
    dict[str, list[Outcome]]
        Each paper's scenarios and what became of them.
    """
    out_dir, overrides = Path(out_dir), list(overrides or [])
    durations, catalogue = load_durations(), papers()
    loaded: dict[str, list[tuple[Outcome, Any]]] = {}
    for paper in chosen:
        loaded[paper], notes = _load(catalogue[paper], overrides, durations)
        for line in notes:
            err(line)
    todo = [(p, o, s) for p in chosen for o, s in loaded[p] if s is not None]
    total = sum(o.runs for _, o, _ in todo)
    weight = sum(o.runs * _per_run(o.name, durations) for _, o, _ in todo)
    echo(f"reproduce {', '.join(chosen)}: {counted(len(todo), 'scenario')} to run, "
         f"{counted(total, 'run')} -> {out_dir}")
    results: dict[str, list[Outcome]] = {}
    with _Overall(progress(total, "reproduce", enabled=show_progress), weight) as bar:
        for paper in chosen:
            paper_dir = out_dir / paper
            paper_dir.mkdir(parents=True, exist_ok=True)
            before = _previous(paper_dir)
            for out, scenario in loaded[paper]:
                if scenario is not None:
                    out.seconds = float((before.get(out.name) or {}).get("seconds") or 0.0)
                    _run_one(out, scenario, paper_dir, bar, durations, echo)
                    if out.status == "failed":
                        err(f"error: {out.name} failed: {out.reason}")
            results[paper] = [o for o, _ in loaded[paper]]
            _write_paper(paper_dir, paper, results[paper])
    _write_index(out_dir)
    return results


def _write_paper(paper_dir: Path, paper: str, outcomes: list[Outcome]) -> None:
    (paper_dir / STATUS_FILE).write_text(
        json.dumps([asdict(o) for o in outcomes], indent=1), encoding="utf-8")
    measured = paper_totals().get(paper, (0, 0, 0.0))[2]
    (paper_dir / reproduce_pages.INDEX).write_text(
        reproduce_pages.paper_page(paper, outcomes, measured), encoding="utf-8")


def _write_index(out_dir: Path) -> None:
    """``out_dir/index.html``: every paper reproduced into ``out_dir`` (this call's or an
    earlier one's), from its status file."""
    found = {}
    for status in sorted(out_dir.glob(f"paper*/{STATUS_FILE}")):
        try:
            found[status.parent.name] = [Outcome(**o) for o in
                                         json.loads(status.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError):
            continue
    (out_dir / reproduce_pages.INDEX).write_text(reproduce_pages.index_page(found),
                                                 encoding="utf-8")


def main(args: argparse.Namespace, echo: Any = print, err: Any = print) -> int:
    """``ldpsim reproduce``: 0 when every chosen scenario ran (or was skipped for want of its
    data), 1 when one failed, 2 for an unknown paper, 130 interrupted."""
    try:
        chosen = chosen_papers(args.papers, args.all)
    except ValueError as e:
        err(f"error: {e}")
        return 2
    overrides = [f"plot.style={args.style!r}"] + list(args.set or [])
    if args.run_jobs is not None:
        job = args.run_jobs
        overrides.append(f"runtime.jobs={job!r}" if isinstance(job, str) else
                         f"runtime.jobs={job}")
    try:
        results = reproduce(chosen, args.out, overrides, not args.no_progress, echo, err)
    except KeyboardInterrupt:
        err("interrupted: finished runs are saved; run the same command again to resume")
        return 130
    every = [o for outcomes in results.values() for o in outcomes]
    for status in ("done", "skipped", "failed"):
        n = sum(o.status == status for o in every)
        if n:
            echo(f"{counted(n, 'scenario')} {status}")
    for paper in results:
        print(Path(args.out) / paper / reproduce_pages.INDEX)
    print(Path(args.out) / reproduce_pages.INDEX)
    return 1 if any(o.status == "failed" for o in every) else 0
