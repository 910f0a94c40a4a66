"""What the shipped scenarios take: ``scenarios/durations.json`` (measured by
``python -m ldpsim.simulator.bench.durations``), read for ``ldpsim list`` and ``ldpsim
reproduce``, with each paper's total. The standard library only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ldpsim.simulator.scenario.catalogue import paper_of

#: the file, in a scenarios folder, of its scenarios' measured durations
DURATIONS_FILE = "durations.json"
#: the shipped scenarios
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def load_durations(directory: Path = SCENARIOS) -> dict[str, dict[str, Any]]:
    """The durations file of ``directory`` ({} when there is none)."""
    path = directory / DURATIONS_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def paper_totals(directory: Path = SCENARIOS) -> dict[str, tuple[int, int, float]]:
    """Each paper's scenarios measured in ``directory``'s durations file: their number, their
    runs and the sum of their measured seconds (what ``ldpsim reproduce PAPER`` takes, with the
    ``--jobs`` its entries were measured with: ``durations --from``)."""
    out: dict[str, tuple[int, int, float]] = {}
    for name, entry in sorted(load_durations(directory).items()):
        paper = paper_of(name)
        if paper is not None:
            n, runs, seconds = out.get(paper, (0, 0, 0.0))
            out[paper] = (n + 1, runs + int(entry["runs"]), seconds + float(entry["seconds"]))
    return out


def paper_lines(directory: Path = SCENARIOS) -> list[str]:
    """``ldpsim list``'s papers section: each paper's scenarios, runs and measured time."""
    lines = ["papers (ldpsim reproduce PAPER runs all its scenarios; the sum of their times, "
             "as measured above):"]
    for paper, (n, runs, seconds) in paper_totals(directory).items():
        lines.append(f"  {paper}  {n:>2} scenarios  {runs:>7} runs  ~{duration_text(seconds)}")
    return lines


def duration_text(seconds: float) -> str:
    """``"8 s"``, ``"75 s"``, ``"12 min"``, ``"3.5 h"``."""
    if seconds < 1:
        return "< 1 s"
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 100 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
