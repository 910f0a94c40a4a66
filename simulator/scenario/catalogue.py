"""Where scenario files are: a name (``demo``) or a path to a file, and the names closest to
one that is not found. The standard library only: the ``ldpsim`` entry point
(``simulator.start``) reads a scenario with it before anything heavy is imported."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

#: where a scenario given by name is looked up: ./scenarios, then the repository's scenarios
SCENARIO_DIRS = [Path("scenarios"), Path(__file__).resolve().parents[2] / "scenarios"]


def scenario_names() -> list[str]:
    """The names ``find`` resolves: the stems of the ``.toml`` files in ``SCENARIO_DIRS``."""
    return sorted({f.stem for d in SCENARIO_DIRS if d.is_dir() for f in d.glob("*.toml")})


#: a paper's scenarios are named ``paperNNN_...``
PAPER_NAME = re.compile(r"(paper\d{3})_")


def paper_of(name: str) -> str | None:
    """The paper (``paper002``) whose figures the scenario ``name`` reproduces, or None."""
    m = PAPER_NAME.match(name)
    return m.group(1) if m else None


def papers() -> dict[str, list[str]]:
    """Each paper (``paper000``, ...) and its scenarios' names, in name order."""
    out: dict[str, list[str]] = {}
    for name in scenario_names():
        paper = paper_of(name)
        if paper is not None:
            out.setdefault(paper, []).append(name)
    return dict(sorted(out.items()))


def paper_id(text: str) -> str | None:
    """``"002"``, ``"paper002"`` or ``"2"``: the paper ``paper002``, if it has scenarios; else
    None."""
    m = re.fullmatch(r"(?:paper)?(\d{1,3})", text.strip().lower())
    paper = f"paper{int(m.group(1)):03d}" if m else None
    return paper if paper in papers() else None


def did_you_mean(name: str | Path) -> str:
    """``; did you mean 'demo'?``, with up to three scenario names closest to ``name`` (a
    name or a path: its stem is compared), or nothing."""
    close = [repr(c) for c in difflib.get_close_matches(Path(str(name)).stem,
                                                        scenario_names(), n=3)]
    if not close:
        return ""
    return "; did you mean " + (" or ".join(close) if len(close) < 3 else
                                f"{close[0]}, {close[1]} or {close[2]}") + "?"


def find(name_or_path: str | Path) -> str:
    """A scenario file: the path itself if it exists, else ``NAME`` or ``NAME.toml`` in
    ``SCENARIO_DIRS`` (unchanged when not found: ``load`` then says so, with the closest
    names)."""
    path = Path(name_or_path)
    if path.is_file():
        return str(path)
    for d in SCENARIO_DIRS:
        for c in (d / path, (d / path).with_suffix(".toml")):
            if c.is_file():
                return str(c)
    return str(path)
