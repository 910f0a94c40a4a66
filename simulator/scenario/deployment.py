"""A scenario's ``[deployment]`` table: real devices and networks, in virtual time.

The table gives each agent a link, a device speed and an availability (``session.network``
models what they do to a round)::

    [deployment]
    trace = "mobile"            # device classes: traces/mobile.csv (or a CSV path)
    availability = 0.95         # a number replaces that column in every class
    round_deadline_s = [0.2, 0.5, 1, 2]   # a list is a sweep axis
    quota = 1.0                 # a round also ends once this share of its agents answered
    curator_down_mbps = 1000    # the curator's own link, what it sends and what it receives
    curator_up_mbps = 1000      #   (default inf: no limit)

Without a trace the numbers make one class (defaults: no latency, unlimited bandwidth, speed
1, always online, no limit on the curator's link). ``inf`` is allowed for a bandwidth and
the deadline: no limit. The compute cost of each protocol's rounds comes from
``compute_costs.json`` beside the shipped scenarios (written by ``ldpsim bench --calibrate
--write``), or ``compute`` (seconds per agent and round on a speed-1 device, or a JSON file of
that form). Everything a run reads is resolved here,
into its ``RunSpec.deployment``: the trace's rows and the protocol's costs travel with the run
(a curator on another machine reads no file) and are part of the run's key.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from ldpsim.protocols import ParamError
from ldpsim.protocols.base import ParamSpec
from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.scenario.catalogue import SCENARIO_DIRS
from ldpsim.simulator.session.network import COLUMNS, DEFAULTS

#: where ``trace = "NAME"`` is looked up (beside the scenario file first)
TRACE_DIR = "traces"
#: the calibrated compute costs (``ldpsim bench --calibrate --write``)
COSTS_FILE = "compute_costs.json"
#: the most rows of a trace (its rows travel with every run's configuration): reading stops
#: after them
MAX_TRACE_ROWS = 10_000
#: the longest line of a trace, in characters (a line is never read further)
MAX_TRACE_LINE = 4096
#: the most seconds of compute per agent and round (``compute``, a cost file's ``round_s``)
MAX_ROUND_S = 3600.0
#: the most numbers of a round's report at calibration (a cost file's ``numbers``)
MAX_NUMBERS = 10**9


def _float(key: str, **bounds: Any) -> ParamSpec:
    """A number of the table, with its default (``session.network.DEFAULTS``)."""
    return ParamSpec(key, "float", DEFAULTS[key], **bounds)


#: the keys of ``[deployment]`` that take a number (a list of them is a sweep axis)
NUMBERS = {
    "latency_ms": _float("latency_ms", low=0, high=600_000,
                         help="one-way link latency (median of a class), up to 10 minutes"),
    "down_mbps": _float("down_mbps", low=0.001, high=1e6,
                        help="download bandwidth, 1 kbit/s to 1 Tbit/s; inf: no limit"),
    "up_mbps": _float("up_mbps", low=0.001, high=1e6,
                      help="upload bandwidth, 1 kbit/s to 1 Tbit/s; inf: no limit"),
    "spread": _float("spread", low=0, high=3,
                     help="log-normal sigma of each agent's latency and bandwidth around its "
                          "class's median"),
    "speed": _float("speed", low=0.001, high=1000,
                    help="device speed: compute takes the calibrated cost / speed"),
    "availability": _float("availability", low=0, high=1,
                           help="chance an agent is online in a round"),
    "round_deadline_s": _float("round_deadline_s", low=0, low_open=True, high=86_400,
                               help="a round ends this long after it starts (up to a day); "
                                    "inf: none"),
    "quota": _float("quota", low=0, low_open=True, high=1,
                    help="a round ends once this share of its asked agents answered"),
    "curator_down_mbps": _float("curator_down_mbps", low=0.001, high=1e7,
                                help="the curator's link for what it sends (every query and "
                                     "broadcast of a round, one after the other), 1 kbit/s to "
                                     "10 Tbit/s; inf: no limit"),
    "curator_up_mbps": _float("curator_up_mbps", low=0.001, high=1e7,
                              help="the curator's link for what it receives (every report of "
                                   "a round), 1 kbit/s to 10 Tbit/s; inf: no limit"),
}
#: the curator's link: in every checked table (None: no limit), so that the runs of a
#: deployment never share a key with those of the model before it had one (whose agents'
#: links were drawn from a grid cut at 3.5 sigma)
CURATOR = ("curator_down_mbps", "curator_up_mbps")
#: a class's share of the agents (a trace's ``share`` column)
SHARE = ParamSpec("share", "float", 1.0, low=0, high=1)
#: seconds of compute per agent and round on a speed-1 device (``compute``, ``round_s``)
ROUND_S = ParamSpec("round_s", "float", 0.0, low=0, high=MAX_ROUND_S)
#: a round's report numbers at calibration (a cost file's ``numbers``)
CAL_NUMBERS = ParamSpec("numbers", "int", 0, low=0, high=MAX_NUMBERS)
#: numbers that may be infinite (stored as None: no limit)
UNBOUNDED = ("down_mbps", "up_mbps", "round_deadline_s", *CURATOR)
OTHER = {
    "trace": ParamSpec("trace", "str", "",
                       help="device classes: a CSV (class,share,<columns>) or a per-agent "
                            "trace (agent,<columns>); a name looks in traces/"),
    "availability_per": ParamSpec("availability_per", "str", DEFAULTS["availability_per"],
                                  choices=("round", "run"),
                                  help="draw who is online each round, or once per run"),
}
KEYS = (*NUMBERS, *OTHER, "compute")


class DeploymentError(ParamError):
    """A ``[deployment]`` table, trace or cost file that cannot be used (names the key)."""


def check(table: Any, scenario_path: str | None) -> dict[str, Any]:
    """The ``[deployment]`` table checked: numbers (or lists of them, a sweep), ``inf`` as
    None; ``classes`` the trace's columns (None: no trace) and ``replay`` whether it is a
    per-agent trace; ``compute`` the cost source. Empty for an empty table."""
    if not isinstance(table, dict):
        raise DeploymentError("[deployment]: must be a table")
    if not table:
        return {}
    problems = [f"[deployment] {k}: unknown key; allowed: {', '.join(KEYS)}{hint(k, KEYS)}"
                for k in table if k not in KEYS]
    if problems:
        raise DeploymentError("\n".join(problems))
    out: dict[str, Any] = {}
    for k, spec in NUMBERS.items():
        if k in table:
            v = table[k]
            out[k] = ([_number(spec, x) for x in _nonempty(k, v)] if isinstance(v, list)
                      else _number(spec, v))
        elif k in CURATOR:
            out[k] = None
    for k, spec in OTHER.items():
        if k in table:
            spec.check(table[k], f"[deployment] {k}")
    out["availability_per"] = table.get("availability_per", DEFAULTS["availability_per"])
    out["classes"], out["replay"], out["trace"] = None, False, ""
    if table.get("trace"):
        out["trace"] = table["trace"]
        out["classes"], out["replay"] = read_trace(find_trace(table["trace"], scenario_path))
    out["compute"] = _compute_source(table.get("compute", "calibrated"), scenario_path)
    return out


def _nonempty(k: str, v: list[Any]) -> list[Any]:
    if not v:
        raise DeploymentError(f"[deployment] {k}: an empty list sweeps nothing; allowed: "
                              f"{NUMBERS[k].describe()}, or a non-empty list of them")
    return v


def _number(spec: ParamSpec, v: Any) -> float | None:
    """One number of the table: ``inf`` is None (no limit) where allowed."""
    if spec.name in UNBOUNDED and isinstance(v, float) and v == math.inf:
        return None
    where = f"[deployment] {spec.name}"
    if spec.name in UNBOUNDED:
        try:
            return spec.check(v, where)
        except ParamError as e:
            raise DeploymentError(f"{e}, or inf (no limit)") from None
    return spec.check(v, where)


def axes(table: dict[str, Any]) -> dict[str, list[Any]]:
    """The swept settings of a checked table: ``deployment.KEY`` -> its values."""
    return {f"deployment.{k}": v for k, v in table.items() if k in NUMBERS and
            isinstance(v, list)}


def find_trace(name: str, scenario_path: str | None) -> Path:
    """The trace file ``name``: a path (absolute, or relative to the scenario's directory or
    here), or ``traces/NAME.csv`` beside the scenario or among the shipped scenarios."""
    here = Path(scenario_path).parent if scenario_path else Path(".")
    given = Path(name)
    tries = [given, here / given]
    for d in (here, *SCENARIO_DIRS):
        tries += [d / TRACE_DIR / given, d / TRACE_DIR / given.with_suffix(".csv")]
    for p in tries:
        if p.is_file():
            return p
    shipped = sorted({f.stem for d in SCENARIO_DIRS if (d / TRACE_DIR).is_dir()
                      for f in (d / TRACE_DIR).glob("*.csv")})
    raise DeploymentError(f"[deployment] trace: no file {name!r}; allowed: a CSV path, or a "
                          f"shipped trace: {', '.join(shipped) or '(none)'}")


def read_trace(path: Path) -> tuple[dict[str, list[Any]], bool]:
    """A trace's columns and whether it is per agent (an ``agent`` column: agent i replays row
    i modulo the rows) rather than per class (``class`` and ``share``, shares summing to 1).
    A column a trace lacks takes the default of every class."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = []
            for row in csv.DictReader(_lines(f, path)):
                if len(rows) == MAX_TRACE_ROWS:  # the row after the cap: read no further
                    raise DeploymentError(
                        f"[deployment] trace: {path} has more than {MAX_TRACE_ROWS} rows; "
                        f"allowed: at most {MAX_TRACE_ROWS} (group devices into classes)")
                rows.append(row)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DeploymentError(f"[deployment] trace: cannot read {path}: {e}") from None
    head = list(rows[0]) if rows else []
    replay = "agent" in head
    need = ("agent",) if replay else ("class", "share")
    allowed = (*need, *COLUMNS)
    bad = [c for c in head if c not in allowed]
    if not rows or any(c not in head for c in need) or bad:
        raise DeploymentError(
            f"[deployment] trace: {path}: columns {', '.join(head) or '(none)'}; allowed: "
            f"class,share or agent, then any of {', '.join(COLUMNS)}"
            + (f" (unknown: {', '.join(bad)})" if bad else ""))
    cols: dict[str, list[Any]] = {}
    for c in COLUMNS:
        if c in head:
            cols[c] = [_cell(path, i, c, r[c]) for i, r in enumerate(rows, 2)]
    if replay:
        cols["share"] = [1.0 / len(rows)] * len(rows)
    else:
        cols["class"] = [r["class"] for r in rows]
        cols["share"] = [_cell(path, i, "share", r["share"]) for i, r in enumerate(rows, 2)]
        if abs(sum(cols["share"]) - 1.0) > 1e-6:
            raise DeploymentError(f"[deployment] trace: {path}: the shares sum to "
                                  f"{sum(s or 0 for s in cols['share']):g}; allowed: shares "
                                  ">= 0 that sum to 1")
    return cols, replay


def _lines(f, path: Path):
    """The lines of the open trace ``f``, each read at most ``MAX_TRACE_LINE`` characters
    far: a longer one is refused before the rest of it is read. The reader stops asking for
    lines after the row past ``MAX_TRACE_ROWS`` (``read_trace``); blank lines, which hold no
    row, are read one at a time."""
    number = 0
    while True:
        number += 1
        line = f.readline(MAX_TRACE_LINE + 1)
        if not line:
            return
        if len(line) > MAX_TRACE_LINE:
            raise DeploymentError(f"[deployment] trace: {path} line {number} is longer than "
                                  f"{MAX_TRACE_LINE} characters; allowed: at most "
                                  f"{MAX_TRACE_LINE}")
        yield line


def _cell(path: Path, line: int, col: str, text: str) -> float | None:
    """One cell: a number within the column's range (``inf``: None where allowed)."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise DeploymentError(f"[deployment] trace: {path} line {line}, {col}: got {text!r}; "
                              "allowed: a number") from None
    try:
        return _number(SHARE if col == "share" else NUMBERS[col], v)
    except ParamError as e:
        what = str(e).removeprefix(f"[deployment] {col}: ")
        raise DeploymentError(f"[deployment] trace: {path} line {line}, {col}: {what}") from None


def _compute_source(value: Any, scenario_path: str | None) -> Any:
    """``compute``: "calibrated" (the shipped costs), a number of seconds per agent and round,
    or a JSON file of costs (a path relative to the scenario)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(ROUND_S.check(value, "[deployment] compute"))
        except ParamError as e:
            raise DeploymentError(f"{e} seconds per agent and round, \"calibrated\" or a "
                                  "JSON file of costs") from None
    if value == "calibrated":
        return value
    if isinstance(value, str):
        p = Path(value)
        if not p.is_absolute() and scenario_path:
            p = Path(scenario_path).parent / p
        if p.is_file():
            return str(p)
    raise DeploymentError(f"[deployment] compute: got {value!r}; allowed: \"calibrated\" (the "
                          f"costs `ldpsim bench --calibrate` measured), a number of seconds per "
                          f"agent and round >= 0 and <= {MAX_ROUND_S:g}, or a JSON file of "
                          "costs")


def costs_file() -> Path | None:
    """The shipped calibrated costs (``COSTS_FILE`` among the scenarios), if any."""
    for d in SCENARIO_DIRS:
        if (d / COSTS_FILE).is_file():
            return d / COSTS_FILE
    return None


def compute_costs(source: Any, protocol: str) -> dict[str, list[float]]:
    """What a run of ``protocol`` computes per round, from ``source`` (``check``'s
    ``compute``): ``round_s`` seconds per agent of each round on a speed-1 device and
    ``numbers`` each round's report length at calibration."""
    if isinstance(source, float):
        return {"round_s": [source], "numbers": [0]}
    path = costs_file() if source == "calibrated" else Path(source)
    try:
        doc = json.loads(path.read_text(encoding="utf-8")) if path else {}
        entry = doc.get("protocols", {}).get(protocol)
    except (OSError, ValueError, AttributeError) as e:
        raise DeploymentError(f"[deployment] compute: cannot read {path}: {e}") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("round_s"), list):
        raise DeploymentError(
            f"[deployment] compute: no calibrated cost for protocol {protocol!r}"
            f"{f' in {path}' if path else ''}; allowed: run `ldpsim bench --calibrate "
            "--write`, or give compute = seconds per agent and round")
    return _checked_costs(entry, f"[deployment] compute: {path}, protocol {protocol!r}")


def _checked_costs(entry: dict[str, Any], where: str) -> dict[str, list[Any]]:
    """A cost file's entry for one protocol, every value within its range.

    Parameters
    ----------
    entry : dict
        ``round_s`` (seconds per agent of each round, a non-empty list) and optionally
        ``numbers`` (each round's report length at calibration, one per ``round_s``).
    where : str
        The file and protocol, for the error.

    Returns
    -------
    dict
        ``round_s`` as floats, ``numbers`` as integers (zeros when the entry has none).

    Raises
    ------
    DeploymentError
        One line naming the file, the protocol, the key and its allowed range.
    """
    seconds = entry["round_s"]
    numbers = entry.get("numbers", [0] * len(seconds))
    if not seconds:
        raise DeploymentError(f"{where}: round_s: an empty list; allowed: one cost per round")
    if not isinstance(numbers, list) or len(numbers) != len(seconds):
        raise DeploymentError(f"{where}: numbers: "
                              f"{len(numbers) if isinstance(numbers, list) else repr(numbers)} "
                              f"entries; allowed: one per round_s ({len(seconds)})")
    try:
        return {"round_s": [float(ROUND_S.check(x, "round_s")) for x in seconds],
                "numbers": [int(CAL_NUMBERS.check(x, "numbers")) for x in numbers]}
    except ParamError as e:
        raise DeploymentError(f"{where}: {e}") from None


def run_deployment(table: dict[str, Any], protocol: str, values: dict[str, Any],
                   costs: dict[str, Any]) -> dict[str, Any]:
    """One run's deployment (``RunSpec.deployment``): the checked ``table`` at the sweep
    point ``values`` (``deployment.KEY`` -> value), with ``protocol``'s compute costs (from
    ``costs``, a cache by source and protocol)."""
    if not table:
        return {}
    out = {k: values.get(f"deployment.{k}", v) for k, v in table.items() if k != "compute"}
    source = table["compute"]
    memo = (str(source), protocol)
    if memo not in costs:
        costs[memo] = compute_costs(source, protocol)
    out["compute"] = costs[memo]
    return out
