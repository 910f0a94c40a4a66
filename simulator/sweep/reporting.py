"""``ldpsim report DIR``: the report page of a results directory, drawn by
``simulator.results.report`` from what this module reads of the directory: its records, each
proven to be one of its runs (``identity.proven_records``) and put in run order, and the sweeps
stored beside them (their name, tables and ``[plot]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ldpsim.simulator.results import report
from ldpsim.simulator.results.plot_spec import styled
from ldpsim.simulator.results.report import REPORT_FILE
from ldpsim.simulator.results.store import RESULTS_FILE, latest
from ldpsim.simulator.scenario.identity import (
    check_records,
    proven_records,
    stored_order,
    stored_plot,
    stored_scenarios,
    stored_tables,
    stored_written,
)
from ldpsim.simulator.sweep.runner import in_run_order


def write_report(out_dir: str | Path, path: str | Path | None = None,
                 records: list[dict[str, Any]] | None = None, style: str | None = None
                 ) -> Path:
    """Write the report of the results directory ``out_dir`` (``results.report``) to ``path``
    (default ``out_dir/report.html``) and return its path. ``records``: the directory's
    records as the sweep that just wrote them holds them (``run_scenario``'s), checked here as
    those read from the file would be, so that a sweep of 10^5 runs is not read back.
    ``style``: the figures' (``notebook`` or ``paper``; None: the stored ``[plot]`` style).

    Raises
    ------
    FileNotFoundError
        ``out_dir`` holds no ``results.jsonl``.
    """
    out = Path(out_dir)
    target = Path(path) if path is not None else out / REPORT_FILE
    target.write_text(page(out, records=records, style=style), encoding="utf-8")
    return target


def page(out_dir: str | Path, figures: bool = True,
         records: list[dict[str, Any]] | None = None, style: str | None = None) -> str:
    """The report page of the results directory ``out_dir`` (``write_report``), its figures
    (those stored for the report: ``Scenario.report``) drawn or, without ``figures``, left
    out (``report.NO_FIGURES``); ``records`` and ``style`` as in ``write_report``.

    Raises
    ------
    FileNotFoundError
        ``out_dir`` holds no ``results.jsonl``.
    """
    out = Path(out_dir)
    if not (out / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"{out_dir}: no {RESULTS_FILE} (not a results directory)")
    if records is None:
        proven = proven_records(out)
    else:  # the same check as proven_records', on the records the sweep holds
        check_records(out, list(enumerate(records, start=1)))
        proven = latest(list(records))
    every = in_run_order(proven, stored_order(out))
    stored = stored_scenarios(out)
    name = stored[0].name if stored else out.name
    return report.page(out, every, name, stored_tables(out),
                       styled(stored_plot(out, "report"), style), figures,
                       run_spec=stored_plot(out), written=stored_written(out))
