"""A results directory's figures, drawn once and then reused.

``plots.plot`` writes beside the figures ``FIGURES_FILE``: a key of what they were drawn from
(``figures_key``: every number and label the figures show, the ``[plot]`` spec and the code and
matplotlib version that drew them) and each file with its SHA-256. Whoever needs the same
figures again (``ldpsim report``, ``ldpsim summary --plots``, a resumed ``ldpsim reproduce``)
takes the files (``kept``) when the key is theirs and every file is intact, and draws them
anew otherwise: a figure is never reused for other numbers, nor after its file was changed.

The report shows only what a directory's proven records say, and ``figures.json`` proves
nothing (whoever can write the directory can swap a figure and its digest): it embeds only the
files this process drew itself (``kept(..., drawn_here=True)``), as ``ldpsim reproduce`` writes
each scenario's report right after its runs and figures. ``ldpsim report DIR`` draws anew.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from ldpsim.simulator.results.metrics import registry
from ldpsim.simulator.results.plot_layout import Sweep, axis_label
from ldpsim.simulator.results.plot_spec import PlotSpec

#: what ``plots.plot`` writes beside its figures
FIGURES_FILE = "figures.json"
#: the modules whose code draws the figures: a change to any draws them anew
SOURCES = ("plots.py", "plot_layout.py", "plot_spec.py", "plot_cache.py", "plot_draw.py",
           "plot_style.py", "plot_rounds.py", "table.py")


@cache
def _code_version() -> str:
    """The figures' code: its modules' text and matplotlib's version."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in SOURCES:
        h.update((here / name).read_bytes())
    try:
        h.update(version("matplotlib").encode())
    except PackageNotFoundError:
        h.update(b"no matplotlib")
    return h.hexdigest()


def figures_key(sweep: Sweep, spec: PlotSpec) -> str:
    """What a sweep's figures are drawn from, as one hash: the points' means, spreads,
    intervals and costs, the per-round rows, the choices of ``plot_layout.sweep_of``, the
    labels and ranges of the settings and metrics drawn, the spec (but its file formats) and
    the code that draws them (``SOURCES``, matplotlib's version).

    Parameters
    ----------
    sweep : Sweep
        What the figures draw (``plot_layout.sweep_of``).
    spec : PlotSpec
        The ``[plot]`` table they follow.

    Returns
    -------
    str
        A hex SHA-256: equal keys draw equal figures.
    """
    names = list(dict.fromkeys([*sweep.axes, *sweep.varying, *sweep.chosen, spec.hue]))
    declared = registry()
    labels = [[n, axis_label(n)] + ([] if declared.get(n) is None else [
        declared[n].low, declared[n].high, declared[n].better]) for n in names]
    points = [[p.protocol, p.point, p.metrics, p.costs, p.cost_stats, p.intervals]
              for p in sweep.points]
    drawn = [_code_version(), replace(spec, formats=()).as_table(), sweep.axes, sweep.chosen,
             sweep.costs, sweep.varying, sweep.bounded, sweep.rounds, labels, points]
    text = json.dumps(drawn, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: the figures this process drew (``remember``): file -> its SHA-256
_DRAWN: dict[str, str] = {}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kept(out_dir: str | Path, key: str, formats: tuple[str, ...], drawn_here: bool = False
         ) -> list[Path] | None:
    """The figures in ``formats`` that ``plots.plot`` wrote into ``out_dir`` from what
    ``key`` stands for, in the order it wrote them; None when it wrote none for that key or
    not in every one of the formats, or when a file is missing or was changed since. With
    ``drawn_here``, only files this process drew, unchanged since, count."""
    out = Path(out_dir)
    try:
        stored = json.loads((out / FIGURES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key or \
            not set(formats) <= set(stored.get("formats") or ()):
        return None
    paths = []
    for name, digest in stored.get("files") or ():
        path = out / name
        if path.suffix.removeprefix(".") not in formats:
            continue
        if not path.is_file() or _digest(path) != digest:
            return None
        if drawn_here and _DRAWN.get(str(path.resolve())) != digest:
            return None
        paths.append(path)
    return paths


def forget(out_dir: str | Path) -> None:
    """Drop ``out_dir``'s record of its figures (before they are drawn anew)."""
    (Path(out_dir) / FIGURES_FILE).unlink(missing_ok=True)


def remember(out_dir: str | Path, key: str, formats: tuple[str, ...], paths: list[Path]
             ) -> None:
    """Record that ``paths`` (in ``out_dir``) are the figures of ``key`` in ``formats``."""
    files: list[Any] = [[p.name, _digest(p)] for p in paths]
    for p, (_, digest) in zip(paths, files, strict=True):
        _DRAWN[str(p.resolve())] = digest
    record = {"key": key, "formats": list(formats), "files": files}
    (Path(out_dir) / FIGURES_FILE).write_text(json.dumps(record, indent=1) + "\n",
                                              encoding="utf-8")
