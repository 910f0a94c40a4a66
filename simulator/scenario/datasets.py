"""What ``ldpsim data`` and ``ldpsim list`` say of the real data sets: the catalogue
(``protocols.datasets``), whether the data folder holds each, and the scenarios that read it."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from ldpsim.protocols import datasets
from ldpsim.simulator.scenario.catalogue import SCENARIO_DIRS

from ldpsim import environment


def readers() -> dict[str, list[str]]:
    """The scenarios of ``SCENARIO_DIRS`` that read each data set (``data:NAME/...``)."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for d in SCENARIO_DIRS:
        for f in sorted(d.glob("*.toml")) if d.is_dir() else ():
            if f.name in seen:
                continue
            seen.add(f.name)
            try:
                path = tomllib.loads(f.read_text(encoding="utf-8")).get("data", {}).get("path")
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, AttributeError):
                continue
            ds = datasets.dataset_of(path) if isinstance(path, str) else None
            if ds is not None:
                out.setdefault(ds.name, []).append(f.stem)
    return out


def folder_line(folder: Path) -> str:
    """Which data folder is read, and what chose it."""
    how = (environment.DATA if os.environ.get(environment.DATA) else
           f"the default, shared/data beside the checkout; {environment.DATA} or --data-dir "
           "chooses another")
    return f"data folder: {folder} ({how})"


def catalogue_lines() -> list[str]:
    """``ldpsim data``: every data set with its state, files, source, licence, how to get it
    and the scenarios that read it."""
    folder = datasets.data_dir()
    lines = [folder_line(folder)]
    by = readers()
    for ds in datasets.DATASETS.values():
        state = "present" if datasets.present(ds, folder) else "MISSING"
        lines += ["", f"{ds.name} [{state}]: {ds.title}"]
        for label, text in (("files", ", ".join(ds.files)), ("source", ds.source),
                            ("cite", ds.citation), ("licence", ds.licence),
                            ("get it", ds.obtain),
                            ("scenarios", ", ".join(by.get(ds.name, [])) or "-")):
            lines.append(f"  {label + ':':10s} {text}")
    return lines


def presence_lines() -> list[str]:
    """``ldpsim list``'s last section: each data set, present or missing."""
    folder = datasets.data_dir()
    lines = [f"real data sets (in {folder}; where to get each: ldpsim data):"]
    for ds in datasets.DATASETS.values():
        state = "present" if datasets.present(ds, folder) else "missing"
        lines.append(f"  {ds.name:18s} {state:8s} {ds.title}")
    return lines
