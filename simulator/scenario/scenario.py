"""Scenario files (TOML): reading, command-line overrides, validation, and the runs' check
against their data.

A scenario names a protocol (or several), a data set or generator, protocol parameters, a number
of repetitions, a seed, a runtime and a coalition. A list in ``[params]`` or ``[data]``, or as
``[collusion] colluders``, is a sweep axis; the runs are the product grid of all axes, times the
protocols, times the repetitions. Keys paired in ``[sweep] paired`` vary together, position by
position: each group is one axis of the grid.
Everything is checked before any process starts, and every error names the key and what is
allowed.

Here: ``load`` (a file and its ``--set`` overrides), ``validate`` (every table at once, with
``[plot]`` and ``[sweep] paired``) and ``check_runs`` (each run against its data, with the bound
on a curator's memory). Every table's schema (``RUNTIME``, ``COLLUSION``, ...) and the check
that enforces it are ``simulator.scenario.tables``; ``Scenario``, its expansion into runs and
their keys are ``simulator.scenario.runs``; how swept lists combine into points (the grid,
``[sweep] paired``) is ``simulator.scenario.axes``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from ldpsim.protocols import ParamError, build_data, get_protocol, is_protocol
from ldpsim.protocols.datasets import MissingData
from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.results.plot_spec import (
    PAPER_FORMATS,
    PlotSpec,
    check_report,
    check_table,
    default_metrics,
    report_spec,
)
from ldpsim.simulator.results.summary import LEAKAGE_METRICS
from ldpsim.simulator.scenario import deployment as dep
from ldpsim.simulator.scenario.axes import check_sweep
from ldpsim.simulator.scenario.catalogue import (  # noqa: F401 - re-exported: sc.find, ...
    SCENARIO_DIRS,
    did_you_mean,
    find,
    scenario_names,
)
from ldpsim.simulator.scenario.runs import RunSpec, Scenario
from ldpsim.simulator.scenario.tables import (
    MAX_REPEATS,
    OUTPUT,
    TOP_KEYS,
    Errors,
    ScenarioError,
    agents_table,
    check_section,
    collusion_table,
    data_table,
    params_table,
    protocols_of,
    published_problems,
    runtime_table,
    table_of,
)
from ldpsim.simulator.session.network import DeploymentModel
from ldpsim.simulator.session.rounds import most_waiting
from ldpsim.simulator.session.runconfig import RunConfig

#: how a value meant as TOML starts (a list, an inline table, a quoted string): one that TOML
#: cannot read is an error; any other value TOML cannot read is a bare word, read as a string
_TOML_STARTS = ("[", "{", '"', "'")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` (value in TOML syntax; bare words are strings; a malformed list,
    table or quoted string is an error saying where TOML stopped reading it)."""
    if "=" not in text:
        raise ScenarioError(f"--set {text!r}: expected KEY=VALUE, e.g. params.epsilon=1.0")
    key, value = text.split("=", 1)
    path = [k.strip() for k in key.strip().split(".")]
    if not all(path):
        raise ScenarioError(f"--set {text!r}: empty key")
    value = value.strip()
    try:
        return path, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError as e:
        if not value.startswith(_TOML_STARTS):
            return path, value
        raise ScenarioError(f"--set {text!r}: {_malformed(value, e)}; allowed: a TOML value, "
                            "e.g. a list [0.5, 1.0] (a sweep), a number, true, \"text\"") from None


def _malformed(value: str, error: tomllib.TOMLDecodeError) -> str:
    """What TOML's reader said of ``value`` (read as ``v = value``), and where it stopped in
    it when it says: ``malformed TOML value at character 6 of [0.5,,1] (invalid value)``."""
    message = str(error)
    what = message.split(" (at ", 1)[0].lower()
    where = re.search(r"\(at line 1, column (\d+)\)", message)
    if where is None:  # at the end of the document: a list or a string left open
        return f"malformed TOML value ({what})"
    return f"malformed TOML value at character {int(where.group(1)) - 4} of {value} ({what})"


#: keys of which a scenario gives one: setting one (``--set``, ``overrides=``) drops the others
ONE_OF = (("protocol", "protocols"),
          ("collusion.colluders", "collusion.agents", "collusion.sweep"))


def set_key(raw: dict[str, Any], path: list[str], value: Any, what: str) -> None:
    """Set ``path`` (``["params", "epsilon"]``) of the raw scenario ``raw`` to ``value`` in
    place, creating tables on the way, and drop the keys it replaces (``ONE_OF``). ``what``
    names the override in an error (``--set 'data.n.x=1'``)."""
    node = raw
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ScenarioError(f"{what}: {part!r} is not a table")
    _drop_replaced(raw, ".".join(path))
    node[path[-1]] = value


def _drop_replaced(raw: dict[str, Any], dotted: str) -> None:
    """Remove from ``raw`` the keys that setting ``dotted`` replaces (its ``ONE_OF`` group)."""
    for other in (o for group in ONE_OF if dotted in group for o in group if o != dotted):
        *tables, key = other.split(".")
        table: Any = raw
        for t in tables:
            table = table.get(t) if isinstance(table, dict) else None
        if isinstance(table, dict):
            table.pop(key, None)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of the raw scenario with ``--set`` overrides applied (one key of
    ``ONE_OF`` replaces the others: ``--set protocol=kwiksort`` on a file of ``protocols``)."""
    raw = copy.deepcopy(raw)
    for text in overrides:
        path, value = parse_override(text)
        set_key(raw, path, value, f"--set {text!r}")
    return raw


def _narrowed(raw: dict[str, Any], overrides: list[str]) -> frozenset[str]:
    """File parameters that the file's own protocols take, not set by an override: an override
    of the protocol list may leave them without a taker, which is not an error."""
    protos = raw.get("protocols", raw.get("protocol"))
    protos = protos if isinstance(protos, list) else [protos]
    params = raw.get("params") if isinstance(raw.get("params"), dict) else {}
    taken = {k for k in params for p in protos
             if isinstance(p, str) and is_protocol(p) and k in get_protocol(p).params}
    overridden = {parse_override(t)[0][-1] for t in overrides
                  if parse_override(t)[0][:1] == ["params"]}
    return frozenset(taken - overridden)


def load(path: str | Path | None = None, overrides: list[str] | None = None,
         raw: dict[str, Any] | None = None) -> Scenario:
    """Read, override and validate a scenario file (or a raw dict)."""
    if raw is None:
        p = Path(path)
        if not p.is_file():
            raise ScenarioError(f"scenario file not found: {path}{did_you_mean(path)}")
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"{path}: not valid TOML: {e}") from None
        except UnicodeDecodeError as e:
            raise ScenarioError(f"{path}: not a UTF-8 text file (TOML is UTF-8): byte "
                                f"{e.start} is {e.object[e.start:e.start + 1]!r}") from None
        except OSError as e:
            raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    narrowed = _narrowed(raw, overrides or [])
    raw = apply_overrides(raw, overrides or [])
    try:
        scen = validate(raw, str(path) if path else None, narrowed)
    except ParamError as e:
        raise ScenarioError(str(e)) from None
    scen.overridden = list(dict.fromkeys(".".join(parse_override(t)[0])
                                         for t in overrides or []))
    return scen


def validate(raw: dict[str, Any], path: str | None = None,
             narrowed: frozenset[str] = frozenset()) -> Scenario:
    """Check every key and value of a raw scenario dict; report every problem at once.

    Every ``[params]`` key must be taken by some protocol of the scenario, except those in
    ``narrowed``: file parameters of protocols an override removed (``--set protocol=kwiksort``
    on a file that also sets ``epsilon``)."""
    errors = Errors()
    for k in sorted(set(raw) - TOP_KEYS):
        errors.add(f"{k}: unknown top-level key; allowed: {', '.join(sorted(TOP_KEYS))}"
                   f"{hint(k, TOP_KEYS)}")
    name = raw.get("name") or (Path(path).stem if path else "scenario")
    if not isinstance(name, str):
        errors.add("name: must be a string")
    protos = errors.attempt(protocols_of, raw)
    repeats = raw.get("repeats", 1)
    if (isinstance(repeats, bool) or not isinstance(repeats, int)
            or not 1 <= repeats <= MAX_REPEATS):
        errors.add(f"repeats: got {repeats!r}; allowed: an integer >= 1 and <= {MAX_REPEATS}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        errors.add(f"seed: got {seed!r}; allowed: an integer >= 0")
    data, data_checked = errors.attempt(data_table, raw, protos, errors) or (None, {})
    params, params_checked = (errors.attempt(params_table, raw, protos, narrowed, errors)
                              or (None, {}))
    runtime = errors.attempt(runtime_table, raw)
    collusion = errors.attempt(collusion_table, raw)
    output = errors.attempt(check_section, table_of(raw, "output"), OUTPUT, "output")
    agents = errors.attempt(agents_table, raw, protos, runtime)
    if "published" in raw:  # a paper's printed numbers, for ``ldpsim report``
        for problem in published_problems(raw["published"], protos):
            errors.add(problem)
    deployment = errors.attempt(dep.check, raw.get("deployment", {}), path)
    if deployment and protos:
        for proto in protos:  # every protocol's compute costs exist
            errors.attempt(dep.compute_costs, deployment["compute"], proto)
    paired = None
    if data is not None and params is not None and collusion is not None:
        paired = errors.attempt(_paired, raw, data, params, collusion, deployment or {},
                                errors)
    errors.raise_if_any()
    scen = Scenario(name, path, raw, protos, repeats, seed, data, params, runtime, collusion,
                    output, agents=agents, paired=paired or [], deployment=deployment or {},
                    data_checked=data_checked, params_checked=params_checked)
    scen.plot, scen.report = _plot(raw, scen)
    return scen


def _plot(raw: dict[str, Any], scen: Scenario) -> tuple[PlotSpec, PlotSpec]:
    """The ``[plot]`` table, checked against the scenario's axes and its protocols' metrics;
    ``y`` defaults to the metrics the protocols' papers plot (``Protocol.figure_metrics``) and
    what the coalition learned when ``[collusion] attacks`` is on; a paper-style figure is
    written as PNG, PDF and SVG unless ``formats`` says otherwise. With it, the figures of the
    report (``[report]``, checked likewise: ``plot_spec.report_spec``)."""
    table = dict(table_of(raw, "plot"))
    report = dict(table_of(raw, "report"))
    protos = [get_protocol(p) for p in scen.protocols]
    declared: list[str] | None = [] if all(p.metrics for p in protos) else None
    if declared is not None:
        for p in protos:
            declared += [m for m in p.metrics if m not in declared]
        if scen.collusion.get("attacks"):
            declared += [f"leakage.{m}" for m in LEAKAGE_METRICS]
    errors = check_table(table, scen.axes(), declared)
    errors += check_report(report, scen.axes(), declared)
    if errors:
        _errors = Errors()
        for e in errors:
            _errors.add(e)
        _errors.raise_if_any()
    spec = PlotSpec.from_table(table)
    if "y" not in table:
        y = default_metrics([p.figure_metrics for p in protos])
        if y and scen.collusion.get("attacks"):
            y += tuple(f"leakage.{m}" for m in LEAKAGE_METRICS)
        spec = dataclasses.replace(spec, y=y)
    if spec.paper and "formats" not in table:
        spec = dataclasses.replace(spec, formats=PAPER_FORMATS)
    return spec, report_spec(spec, table, report, declared, bool(scen.deployment))


def _paired(raw: dict[str, Any], data: dict[str, Any], params: dict[str, Any],
            collusion: dict[str, Any], deployment: dict[str, Any],
            errors: Errors) -> list[list[str]]:
    """``[sweep] paired``: groups of swept settings that vary together (each problem recorded
    in ``errors``; none paired then)."""
    table = table_of(raw, "sweep")
    settings = {f"params.{k}": v for k, v in params.items()}
    settings.update({f"data.{k}": v for k, v in data.items() if k != "kind"})
    settings["collusion.colluders"] = collusion.get("sweep", collusion["colluders"])
    settings.update({f"deployment.{k}": v for k, v in deployment.items() if k in dep.NUMBERS})
    problems = check_sweep(table, settings)
    for p in problems:
        errors.add(p)
    return [] if problems else [list(g) for g in table.get("paired", [])]


def check_runs(specs: list[RunSpec]) -> None:
    """Resolve every run's parameters against its data's public facts (before any process).

    Catches values that are valid in isolation but not for the data, e.g. more queries than
    there are pairs, colluders beyond the number of agents, and missing data files.
    """
    seen = set()
    built: dict[str, Any] = {}
    for s in specs:
        sig = json.dumps([s.protocol, s.params, s.data, s.collusion["colluders"]], sort_keys=True,
                         default=str)
        if sig in seen:
            continue
        seen.add(sig)
        try:
            dsig = json.dumps(s.data, sort_keys=True, default=str)
            if dsig not in built:
                built[dsig] = build_data(s.data, 0)
            ds = built[dsig]
            _check_colluders_against_n(s.collusion["colluders"], ds.n)
            proto = get_protocol(s.protocol)
            params = proto.resolve(s.params, ds.public)
            _check_memory(proto, proto.bind(params, ds.public, resolved=True), ds.n, s)
            if s.runtime["pools"] > ds.n:
                raise ParamError(f"[runtime] pools: got {s.runtime['pools']}; allowed: at most "
                                 f"the number of agents ({ds.n})")
        except MissingData as e:  # one line: the data set, not a protocol's, is at fault
            raise ScenarioError(str(e)) from None
        except ParamError as e:
            raise ScenarioError(f"{e} (protocol {s.protocol}, point {s.point})") from None


#: bytes the curator holds per asked agent besides its report (the round's agent ids, who was
#: asked, who reported, whose report was invalid; the curator's own agent ids)
AGENT_BYTES = 24
#: bytes of one number of a report as the curator holds it (int64 or float64)
NUMBER_BYTES = 8
#: the backends whose pools and curator hold a chunked run a chunk at a time (``inproc``
#: holds every agent at once)
CHUNKED_BACKENDS = ("processes", "hosts", "dask")


def memory_limit() -> int:
    """The most bytes a run's curator may need: this machine's physical memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf: no limit known
        return 1 << 62


def curator_bytes(numbers: int, n: int, extra: int = 0) -> int:
    """What a run's curator holds for a round of ``n`` agents' reports of ``numbers`` numbers.

    Parameters
    ----------
    numbers : int
        Numbers of one report (``Protocol.report_numbers``).
    n : int
        Agents asked in the round (or, for a curator that absorbs in parts, held at once).
    extra : int
        Bytes the protocol's curator keeps per agent for the run
        (``Protocol.curator_agent_bytes``).

    Returns
    -------
    int
        Bytes: the reports (``Round.values``), the per-agent bookkeeping and the protocol's
        own state.
    """
    return n * (numbers * NUMBER_BYTES + AGENT_BYTES + extra)


def streams(proto: Any, bound: Any, run: RunSpec, n: int) -> bool:
    """Whether the run ``run`` (``n`` agents) keeps a chunk of agents at a time in its curator:
    a chunked run (more agents than ``[runtime] chunk``, ``RunConfig.chunked``) on a backend
    that chunks, whose curator takes its reports in parts (``Curator.absorbs_in_parts``), with
    no deployment or one whose reports are late by their own arrival alone
    (``DeploymentModel.streams``) and no adversary view (which keeps every report): what the
    curator's ``RoundLoop.streams`` decides, read from the spec."""
    try:
        parts = bool(getattr(proto.curator_class(bound), "absorbs_in_parts", False))
    except NotImplementedError:
        return False
    deployment = run.deployment and not DeploymentModel.of(run.deployment, (0, 0)).streams
    return (parts and RunConfig.of(run.config()).chunked(n)
            and run.runtime.get("backend") in CHUNKED_BACKENDS and not deployment
            and not run.keeps_view)


def _check_memory(proto: Any, bound: Any, n: int, run: RunSpec | None = None) -> None:
    """Refuse a run whose curator cannot hold what it keeps in this machine's memory
    (ParamError naming ``[data] n``, the estimate and the limit): one round's reports and the
    protocol's per-agent state, or, where it streams (``streams``), a chunk's reports and that
    state."""
    numbers = proto.report_numbers(bound)
    if numbers is None:
        return
    extra = int(proto.curator_agent_bytes(bound))
    held = n
    if run is not None and streams(proto, bound, run, n):
        cfg = RunConfig.of(run.config())
        held = cfg.chunk_agents
        if getattr(proto.curator_class(bound), "absorbs_in_order", False):  # what waits
            held = most_waiting(held, cfg.pools, cfg.batch)
        held = min(n, held)
    need = curator_bytes(numbers, held) + n * extra
    limit = memory_limit()
    if need > limit:
        what = (f"{n} agents x {numbers} numbers of {NUMBER_BYTES} bytes, one round's reports, "
                f"+ {AGENT_BYTES} bytes an agent" if held == n else
                f"{held} agents' reports at a time ([runtime] chunk)")
        state = f" + {extra} bytes an agent of the protocol's own state" if extra else ""
        raise ParamError(f"[data] n: got {n}; its curator would hold about {need / 1e9:.3g} GB "
                         f"({what}{state}); allowed: at most {limit / 1e9:.3g} GB (this "
                         "machine's memory)")


def _check_colluders_against_n(v: Any, n: int) -> None:
    """Colluder counts and ids once the number of agents ``n`` is known.

    A count names at most n - 1 agents (DPWeVote's maximal collusion: one honest agent); a
    fraction is rounded and capped at n - 1 (``colluder_mask``); an id must be in [0, n).
    """
    if isinstance(v, list):
        bad = [x for x in v if x >= n]
        if bad:
            raise ParamError(f"[collusion] agents: got agent id {bad[0]}; allowed: ids in "
                             f"[0, {n}) (n = {n})")
    elif isinstance(v, int) and v > max(n - 1, 0):
        raise ParamError(f"[collusion] colluders: got {v}; allowed: a count of at most n - 1 = "
                         f"{max(n - 1, 0)} (n = {n}) or a fraction in [0, 1)")
