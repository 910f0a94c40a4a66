"""Run records, their store and their summary: the one import path of what runs leave.

The pieces live in modules named for what they hold: ``store`` (``results.jsonl`` and the
:class:`ResultStore`, JSON conversion, atomic writes, the results directory's file names),
``summary`` (the parameter points, :func:`summarize` and ``summary.csv``, :func:`per_round` and
``per_round.csv``, :func:`privacy_spent`) and ``table`` (:func:`format_table`, the terminal's
table); ``simulator.results.plots`` draws the figures. This module gathers their public names,
for the Python API (``ldpsim.api``) and whoever reads results without minding which piece holds
what.
"""

from __future__ import annotations

from ldpsim.simulator.results.store import (  # noqa: F401 - re-exported
    DEGRADED,
    FINGERPRINT_FILE,
    PER_ROUND_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    SYNC_INTERVAL_S,
    SYNC_RECORDS,
    ResultsCorruptError,
    ResultStore,
    atomic_write_bytes,
    is_degraded,
    jsonable,
    latest,
    record_line,
    usable,
)
from ldpsim.simulator.results.summary import (  # noqa: F401 - re-exported
    COST_COLUMNS,
    COST_STD_COLUMNS,
    LEAKAGE_METRICS,
    ROUND_COLUMNS,
    VIRTUAL_ROUND_COLUMNS,
    Point,
    cost_names,
    csv_text,
    finite_number,
    group_points,
    in_value_order,
    is_number,
    mean_std,
    metric_names,
    per_round,
    point_id,
    privacy_spent,
    record_metrics,
    record_points,
    summarize,
    value_rank,
    write_per_round,
    write_summary,
)
from ldpsim.simulator.results.table import cell_text, format_table  # noqa: F401 - re-exported
