"""Scenario files (TOML): validation, command-line overrides and expansion into runs.

A scenario names a protocol (or several), a data set or generator, protocol parameters, a number
of repetitions, a seed, a runtime and a coalition. A list in ``[params]`` or ``[data]``, or as
``[collusion] colluders``, is a sweep axis; the runs are the product grid of all axes, times the
protocols, times the repetitions. Keys paired in ``[sweep] paired`` vary together, position by
position: each group is one axis of the grid.
Everything is checked before any process starts, and every error names the key and what is
allowed.

About 880 lines, over the house's ~500: every table's schema (``RUNTIME``, ``COLLUSION``, ...)
stands beside the check that enforces it and the expansion that reads it, so an allowed value
is declared in exactly one place; how swept lists combine into points (the grid, ``[sweep]
paired``) is ``simulator.scenario.axes``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpsim.protocols import (
    DATA_KINDS,
    PROTOCOLS,
    ParamError,
    build_data,
    get_data_kind,
    get_protocol,
)
from ldpsim.protocols.base import MAX_AGENTS, ParamSpec
from ldpsim.protocols.keys import run_seed
from ldpsim.simulator.backends import BACKENDS
from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.results.plots import PlotSpec, check_table, default_metrics
from ldpsim.simulator.results.published import check_published
from ldpsim.simulator.results.results import LEAKAGE_METRICS
from ldpsim.simulator.scenario import deployment as dep
from ldpsim.simulator.scenario.axes import check_sweep, points
from ldpsim.simulator.scenario.catalogue import (  # noqa: F401 - re-exported: sc.find, ...
    SCENARIO_DIRS,
    did_you_mean,
    find,
    scenario_names,
)
from ldpsim.simulator.session.keyfiles import (
    MIN_TOKEN_CHARS,
    SEED_ONLY,
    KeyFileError,
    read_host_keys,
)
from ldpsim.simulator.session.runconfig import DEFAULTS, EXECUTORS


class ScenarioWarning(UserWarning):
    """A scenario setting that is read under a new name, or that the run does not use."""


class ScenarioError(ValueError):
    """A scenario file or override is invalid; the message names the key and allowed values."""


#: Upper bounds, checked before any process starts (beyond them a run would exhaust memory, hang
#: or overflow a wire field). The number of agents is bounded by ``protocols.base.MAX_AGENTS``.
MAX_REPEATS = 10**6
MAX_TIMEOUT_S = 86400  # one day without progress
MAX_FRAME_BYTES = 1 << 31
MAX_ENVELOPE_BYTES = 1 << 30
MAX_BATCH = 1 << 20
MAX_JOBS = 256
TOP_KEYS = {"name", "description", "protocol", "protocols", "repeats", "seed", "data", "params",
            "runtime", "dask", "agents", "collusion", "output", "plot", "sweep", "published",
            "deployment"}

#: settings by scope: ``[runtime] backend`` says where one run's agents live, ``[runtime]
#: executor`` where a sweep's runs execute, and ``[dask]`` the one cluster either may use.
#: The names they replaced, still read (with a warning naming the new one).
RENAMED = {"engine": "[runtime] executor", "dask_address": "[dask] address"}

RUNTIME = {
    "backend": ParamSpec("backend", "str", DEFAULTS.backend, choices=tuple(BACKENDS)),
    "pools": ParamSpec("pools", "int", DEFAULTS.pools, low=1, high=256),
    "timeout_s": ParamSpec("timeout_s", "float", DEFAULTS.timeout_s, low=0, low_open=True,
                           high=MAX_TIMEOUT_S),
    "agent_mode": ParamSpec("agent_mode", "str", DEFAULTS.agent_mode,
                            choices=("batched", "exact")),
    "batch": ParamSpec("batch", "int_or_auto", DEFAULTS.batch, low=1, high=MAX_BATCH,
                       help="agents per query batch (one ZeroMQ frame each way); auto: sized "
                            "per round and pool from the agents it asks"),
    "endpoint": ParamSpec("endpoint", "str", DEFAULTS.endpoint),
    "token": ParamSpec("token", "str", DEFAULTS.token,
                       help="hosts: the pools' registration token (default: the token file "
                            "beside the secret's key file)"),
    "secret": ParamSpec("secret", "str", DEFAULTS.secret,
                        help="the experiment's master secret, from which every agent's data "
                             "and coins derive: the path of a key file secret.key (of `ldpsim "
                             "keys`, or of a results directory), or \"seed\" (each run's seed, "
                             "reproducible from the scenario alone and no secret from the "
                             "curator or the pools); default: a fresh one per sweep, kept in "
                             "the results directory as secret.key"),
    "curve": ParamSpec("curve", "str", DEFAULTS.curve,
                       help="hosts: CURVE key directory (ldpsim keys)"),
    "max_frame_bytes": ParamSpec("max_frame_bytes", "int", DEFAULTS.max_frame_bytes, low=1024,
                                 high=MAX_FRAME_BYTES),
    "max_envelope_bytes": ParamSpec("max_envelope_bytes", "int", DEFAULTS.max_envelope_bytes,
                                    low=64, high=MAX_ENVELOPE_BYTES),
    "progress": ParamSpec("progress", "bool", DEFAULTS.progress),
    "jobs": ParamSpec("jobs", "int_or_auto", DEFAULTS.jobs, low=1, high=MAX_JOBS,
                      help="runs executed at once, each in a worker process (not hosts); "
                           "auto: as many as the cores hold"),
    "executor": ParamSpec("executor", "str", DEFAULTS.executor, choices=EXECUTORS,
                          help="where the sweep's runs execute: this machine or the Dask "
                               "cluster of [dask] address"),
    "data_first": ParamSpec("data_first", "bool", DEFAULTS.data_first,
                            help="pools build their agents' data before registering, so no "
                                 "round's wall time holds data generation (the processes "
                                 "backend's pools always do, before they say ready)"),
}
#: ``[dask]``: the Dask cluster that ``executor = "dask"`` runs a sweep's runs on and that
#: ``backend = "dask"`` runs one run's pools on
DASK = {"address": ParamSpec("address", "str", DEFAULTS.dask_address,
                             help='the scheduler: "tcp://HOST:PORT", "local" or "local:N" (a '
                                  'LocalCluster of N worker processes here; "" = "local")')}
#: the agents' own limits on the local backends (``[agents]``, ``session.policy.AgentPolicy``);
#: on the hosts backend each ``ldpsim agents`` takes them as options
AGENTS = {"max_epsilon": ParamSpec("max_epsilon", "float", None, low=0, low_open=True,
                                   help="the largest epsilon an agent spends in one run; "
                                        "protocols without a local claim are refused"),
          "lifetime_epsilon": ParamSpec("lifetime_epsilon", "float", None, low=0, low_open=True,
                                        help="the most an agent spends on one data set over "
                                             "the sweep"),
          "protocols": ParamSpec("protocols", "str", None,
                                 help="the protocols the agents take part in (a list)")}
FAULT_KEYS = {"pool": ParamSpec("pool", "int", required=True, low=0),
              "round": ParamSpec("round", "int", 0, low=0),
              "action": ParamSpec("action", "str", required=True,
                                  choices=("kill", "silent", "raise"))}
COLLUSION = {"curator": ParamSpec("curator", "bool", DEFAULTS.curator_colludes),
             "save_view": ParamSpec("save_view", "bool", False),
             "attacks": ParamSpec("attacks", "bool", False,
                                  help="run the coalition's attacks on each run's own view and "
                                       "record what it learned (record['leakage'])"),
             "attack_targets": ParamSpec("attack_targets", "int", 200, low=1, high=10**6,
                                         help="honest agents each run's attacks target")}
OUTPUT = {"dir": ParamSpec("dir", "str", ""), "plots": ParamSpec("plots", "bool", True),
          "per_round": ParamSpec("per_round", "bool", True,
                                 help="keep comm.per_round in every record (false: smaller "
                                      "results.jsonl for sweeps of many runs)")}


@dataclass
class RunSpec:
    """One run of a scenario: everything needed to execute and record it."""

    scenario: str
    protocol: str
    params: dict[str, Any]
    data: dict[str, Any]
    repeat: int
    scenario_seed: int
    seed: int
    runtime: dict[str, Any]
    collusion: dict[str, Any]
    point: dict[str, Any]
    key: str
    #: the agents' own limits (``[agents]``)
    agents: dict[str, Any] = field(default_factory=dict)
    #: the run's devices and network (``[deployment]``, ``scenario.deployment``): empty without
    deployment: dict[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """The public run configuration the curator sends to every pool."""
        return {"protocol": self.protocol, "params": self.params, "data": self.data,
                "seed": self.seed, "pools": self.runtime["pools"],
                "agent_mode": self.runtime["agent_mode"], "batch": self.runtime["batch"],
                "collusion": {k: self.collusion[k] for k in ("colluders", "curator")},
                "faults": self.runtime.get("faults", []),
                **({"data_first": True} if self.runtime.get("data_first") else {}),
                **({"deployment": self.deployment} if self.deployment else {})}


@dataclass
class Scenario:
    """A validated scenario."""

    name: str
    path: str | None
    raw: dict[str, Any]
    protocols: list[str]
    repeats: int
    seed: int
    data: dict[str, Any]
    params: dict[str, Any]
    runtime: dict[str, Any]
    collusion: dict[str, Any]
    output: dict[str, Any]
    #: the figures to draw (``[plot]``, defaults filled from the protocols' papers)
    plot: PlotSpec = PlotSpec()
    #: the agents' own limits (``[agents]``: max_epsilon, protocols, lifetime_epsilon)
    agents: dict[str, Any] = field(default_factory=dict)
    #: groups of swept settings that vary together (``[sweep] paired``), each one axis
    paired: list[list[str]] = field(default_factory=list)
    #: devices and network in virtual time (``[deployment]``, checked: ``scenario.deployment``)
    deployment: dict[str, Any] = field(default_factory=dict)

    def axes(self) -> list[str]:
        """The swept settings: list-valued ``params.*`` and ``data.*``, and
        ``collusion.colluders`` when it is a list (held as ``collusion["sweep"]``)."""
        out = [f"params.{k}" for k, v in self.params.items() if isinstance(v, list)]
        out += [f"data.{k}" for k, v in self.data.items() if isinstance(v, list)]
        if self.collusion.get("sweep"):
            out.append("collusion.colluders")
        return out + list(dep.axes(self.deployment))

    def runs(self) -> list[RunSpec]:
        """Expand the sweep: protocols × the grid of the axes (a paired group is one axis) ×
        repetitions. A run whose key an earlier one has (a repeated value) is left out."""
        dk = get_data_kind(self.data["kind"])
        norm_data = {k: (v if k == "kind" else _norm(dk.params[k], v))
                     for k, v in self.data.items()}
        specs: list[RunSpec] = []
        seen: set[str] = set()
        costs: dict[tuple[str, str], Any] = {}  # the compute costs, read once per protocol
        for proto in self.protocols:
            accepted = PROTOCOLS[proto].params
            params = {k: _norm(accepted[k], v) for k, v in self.params.items()
                      if k in accepted}
            # the loop order: data, then params, then the colluders (the last varies fastest)
            axes = {f"data.{k}": v for k, v in norm_data.items() if isinstance(v, list)}
            axes.update({f"params.{k}": v for k, v in params.items() if isinstance(v, list)})
            if self.collusion.get("sweep"):
                axes["collusion.colluders"] = self.collusion["sweep"]
            axes.update(dep.axes(self.deployment))
            for values in points(axes, self.paired):
                pvals = {k: values[f"params.{k}"] for k in params if f"params.{k}" in values}
                dvals = {k: values[f"data.{k}"] for k in norm_data if f"data.{k}" in values}
                p, data = {**params, **pvals}, {**norm_data, **dvals}
                point: dict[str, Any] = {"protocol": proto}
                point.update({f"params.{k}": v for k, v in pvals.items()})
                point.update({f"data.{k}": v for k, v in dvals.items()})
                colluders = values.get("collusion.colluders", self.collusion["colluders"])
                if "collusion.colluders" in values:
                    point["collusion.colluders"] = colluders
                collusion = {**self.collusion, "colluders": colluders}
                point.update({k: v for k, v in values.items() if k.startswith("deployment.")})
                deploy = dep.run_deployment(self.deployment, proto, values, costs)
                for r in range(self.repeats):
                    key = run_key(proto, p, data, r, self.seed, collusion,
                                  self.runtime.get("faults", []), deploy)
                    if key in seen:
                        continue
                    seen.add(key)
                    specs.append(RunSpec(self.name, proto, p, data, r, self.seed,
                                         run_seed(self.seed, r), dict(self.runtime),
                                         collusion, point, key, dict(self.agents), deploy))
        return specs


def _norm(spec: ParamSpec, value: Any) -> Any:
    """Coerce a value (or each value of a sweep list) to its kind: 1 and 1.0 are one epsilon."""
    if isinstance(value, list):
        return [spec.check(v, spec.name) for v in value]
    return spec.check(value, spec.name)


def run_key(proto, params, data, repeat, seed, collusion, faults, deployment=None) -> str:
    """A run's key: a hash of what identifies its output (``RunSpec.key``); a deployment
    only when there is one (the keys of runs without stay as they were)."""
    blob = json.dumps([proto, params, data, repeat, seed,
                       {k: collusion[k] for k in ("colluders", "curator")}, faults,
                       *([deployment] if deployment else [])],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


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
             if isinstance(p, str) and p in PROTOCOLS and k in PROTOCOLS[p].params}
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
        return validate(raw, str(path) if path else None, narrowed)
    except ParamError as e:
        raise ScenarioError(str(e)) from None


def _table(raw: dict[str, Any], name: str) -> dict[str, Any]:
    t = raw.get(name, {})
    if not isinstance(t, dict):
        raise ScenarioError(f"[{name}]: must be a table")
    return t


class _Errors:
    """Collects every validation error of a scenario, so one run of ``ldpsim`` shows them all."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.extend(m for m in message.splitlines() if m)

    def attempt(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, or None with its error recorded."""
        try:
            return fn(*args)
        except (ScenarioError, ParamError) as e:
            self.add(str(e))
            return None

    def raise_if_any(self) -> None:
        if len(self.messages) == 1:
            raise ScenarioError(self.messages[0])
        if self.messages:
            raise ScenarioError(f"{len(self.messages)} problems in the scenario:\n  "
                                + "\n  ".join(self.messages))


def _check_table(table: dict[str, Any], specs: dict[str, ParamSpec], section: str,
                 also: tuple[str, ...] = ()) -> dict:
    """``table`` checked against ``specs``, defaults filled in; ``also``: keys of the section
    its caller has taken out and checks itself (named among the allowed ones)."""
    errors = _Errors()
    out = {}
    for k, v in table.items():
        if k not in specs:
            allowed = [*specs, *also]
            errors.add(f"[{section}] {k}: unknown key; allowed: {', '.join(allowed)}"
                       f"{hint(k, allowed)}")
            continue
        checked = errors.attempt(specs[k].check, v, f"[{section}] {k}")
        if checked is not None or v is None:
            out[k] = checked
    for k, spec in specs.items():
        if k not in out and k not in table:
            if spec.required:
                errors.add(f"[{section}] {k}: required; allowed: {spec.describe()}")
            out[k] = spec.default
    errors.raise_if_any()
    return out


def validate(raw: dict[str, Any], path: str | None = None,
             narrowed: frozenset[str] = frozenset()) -> Scenario:
    """Check every key and value of a raw scenario dict; report every problem at once.

    Every ``[params]`` key must be taken by some protocol of the scenario, except those in
    ``narrowed``: file parameters of protocols an override removed (``--set protocol=kwiksort``
    on a file that also sets ``epsilon``)."""
    errors = _Errors()
    for k in sorted(set(raw) - TOP_KEYS):
        errors.add(f"{k}: unknown top-level key; allowed: {', '.join(sorted(TOP_KEYS))}"
                   f"{hint(k, TOP_KEYS)}")
    name = raw.get("name") or (Path(path).stem if path else "scenario")
    if not isinstance(name, str):
        errors.add("name: must be a string")
    protos = errors.attempt(_protocols, raw)
    repeats = raw.get("repeats", 1)
    if (isinstance(repeats, bool) or not isinstance(repeats, int)
            or not 1 <= repeats <= MAX_REPEATS):
        errors.add(f"repeats: got {repeats!r}; allowed: an integer >= 1 and <= {MAX_REPEATS}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        errors.add(f"seed: got {seed!r}; allowed: an integer >= 0")
    data = errors.attempt(_data, raw, protos, errors)
    params = errors.attempt(_params, raw, protos, narrowed, errors)
    runtime = errors.attempt(_runtime, raw)
    collusion = errors.attempt(_collusion, raw)
    output = errors.attempt(_check_table, _table(raw, "output"), OUTPUT, "output")
    agents = errors.attempt(_agents, raw, protos, runtime)
    if "published" in raw:  # a paper's printed numbers, for ``ldpsim report``
        for problem in _published(raw["published"], protos):
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
                    output, agents=agents, paired=paired or [], deployment=deployment or {})
    scen.plot = _plot(raw, scen)
    return scen


def _plot(raw: dict[str, Any], scen: Scenario) -> PlotSpec:
    """The ``[plot]`` table, checked against the scenario's axes and its protocols' metrics;
    ``y`` defaults to the metrics the protocols' papers plot (``Protocol.figure_metrics``) and
    what the coalition learned when ``[collusion] attacks`` is on."""
    table = dict(_table(raw, "plot"))
    protos = [PROTOCOLS[p] for p in scen.protocols]
    declared: list[str] | None = [] if all(p.metrics for p in protos) else None
    if declared is not None:
        for p in protos:
            declared += [m for m in p.metrics if m not in declared]
        if scen.collusion.get("attacks"):
            declared += [f"leakage.{m}" for m in LEAKAGE_METRICS]
    errors = check_table(table, scen.axes(), declared)
    if errors:
        _errors = _Errors()
        for e in errors:
            _errors.add(e)
        _errors.raise_if_any()
    spec = PlotSpec.from_table(table)
    if "y" not in table:
        y = default_metrics([p.figure_metrics for p in protos])
        if y and scen.collusion.get("attacks"):
            y += tuple(f"leakage.{m}" for m in LEAKAGE_METRICS)
        spec = dataclasses.replace(spec, y=y)
    return spec


def _paired(raw: dict[str, Any], data: dict[str, Any], params: dict[str, Any],
            collusion: dict[str, Any], deployment: dict[str, Any],
            errors: _Errors) -> list[list[str]]:
    """``[sweep] paired``: groups of swept settings that vary together (each problem recorded
    in ``errors``; none paired then)."""
    table = _table(raw, "sweep")
    settings = {f"params.{k}": v for k, v in params.items()}
    settings.update({f"data.{k}": v for k, v in data.items() if k != "kind"})
    settings["collusion.colluders"] = collusion.get("sweep", collusion["colluders"])
    settings.update({f"deployment.{k}": v for k, v in deployment.items() if k in dep.NUMBERS})
    problems = check_sweep(table, settings)
    for p in problems:
        errors.add(p)
    return [] if problems else [list(g) for g in table.get("paired", [])]


def _protocols(raw: dict[str, Any]) -> list[str]:
    if "protocol" in raw and "protocols" in raw:
        raise ScenarioError("protocol/protocols: give one of them, not both")
    protos = raw.get("protocols", raw.get("protocol"))
    if protos is None:
        raise ScenarioError(f"protocol: required; allowed: {', '.join(sorted(PROTOCOLS))}")
    protos = protos if isinstance(protos, list) else [protos]
    if not protos:
        raise ScenarioError("protocols: must not be empty")
    for p in protos:
        if not isinstance(p, str):
            raise ScenarioError(f"protocol: {p!r} is not a name; allowed: "
                                f"{', '.join(sorted(PROTOCOLS))}")
        if p not in PROTOCOLS:
            raise ScenarioError(f"protocol: unknown protocol {p!r}; allowed: "
                                f"{', '.join(sorted(PROTOCOLS))}{hint(p, PROTOCOLS)}")
    return protos


def _data(raw: dict[str, Any], protos: list[str] | None, errors: _Errors) -> dict[str, Any]:
    data = dict(_table(raw, "data"))
    kind = data.get("kind")
    if kind is None:
        raise ScenarioError(f"[data] kind: required; allowed: {', '.join(sorted(DATA_KINDS))}")
    if not isinstance(kind, str):
        raise ScenarioError(f"[data] kind: got {kind!r}; allowed: one of "
                            f"{', '.join(sorted(DATA_KINDS))} (a data kind cannot be swept)")
    if kind not in DATA_KINDS:
        raise ScenarioError(f"[data] kind: unknown data kind {kind!r}; allowed: "
                            f"{', '.join(sorted(DATA_KINDS))}{hint(kind, DATA_KINDS)}")
    dk = get_data_kind(kind)
    if protos is not None:
        data_types = {PROTOCOLS[p].data_type for p in protos}
        if data_types != {dk.data_type}:
            errors.add(f"[data] kind: {kind!r} holds {dk.data_type} data, but protocol(s) "
                       f"{', '.join(protos)} need {', '.join(sorted(data_types))}")
    for k, v in data.items():
        if k == "kind":
            continue
        if k not in dk.params:
            errors.add(f"[data] {k}: unknown argument for kind {kind!r}; allowed: "
                       f"{', '.join(sorted(dk.params))}{hint(k, dk.params)}")
            continue
        if isinstance(v, list) and not v:
            errors.add(f"[data] {k}: an empty list sweeps nothing")
        for item in (v if isinstance(v, list) else [v]):
            if errors.attempt(dk.params[k].check, item, f"[data] {k}") is None and \
                    item is not None:
                break
    return data


def _params(raw: dict[str, Any], protos: list[str] | None, narrowed: frozenset[str],
            errors: _Errors) -> dict[str, Any]:
    params = dict(_table(raw, "params"))
    if protos is None:
        return params
    for k, v in params.items():
        specs = [PROTOCOLS[p].params[k] for p in protos if k in PROTOCOLS[p].params]
        if not specs and k not in narrowed:  # ignoring it would run something else than asked
            allowed = sorted({n for p in protos for n in PROTOCOLS[p].params})
            errors.add(f"[params] {k}: not a parameter of any protocol of this scenario; "
                       f"allowed for {', '.join(protos)}: {', '.join(allowed) or '(none)'}"
                       f"{hint(k, allowed)}")
            continue
        # a parameter of some of the protocols (e.g. epsilon next to plain "kwiksort") is not
        # applied to those that do not take it
        if isinstance(v, list) and not v:
            errors.add(f"[params] {k}: an empty list sweeps nothing")
        bad = False
        for item in (v if isinstance(v, list) else [v]):
            for spec in specs:
                if errors.attempt(spec.check, item, f"[params] {k}") is None and \
                        item is not None:
                    bad = True
                    break
            if bad:
                break
    return params


def check_dask_address(address: str) -> str:
    """``address`` if it is a valid ``[dask] address``, else ScenarioError naming the key and
    the allowed forms."""
    import re

    if address == "" or re.fullmatch(r"local(:[1-9][0-9]{0,3})?", address) or re.fullmatch(
            r"(tcp|tls|ucx|inproc)://[^\s/]+(:[0-9]{1,5})?/?", address):
        return address
    raise ScenarioError(f"[dask] address: got {address!r}; allowed: \"tcp://HOST:PORT\" "
                        "(a running Dask scheduler), \"local\" or \"local:N\" (a LocalCluster of "
                        "N worker processes on this machine), or \"\" (local)")


def _renamed(rt_raw: dict[str, Any], dask_raw: dict[str, Any]) -> None:
    """Read the runtime keys of an older scenario under their new names, with a warning."""
    for old, new in RENAMED.items():
        if old not in rt_raw:
            continue
        table, key = (rt_raw, "executor") if old == "engine" else (dask_raw, "address")
        if key in table:
            raise ScenarioError(f"[runtime] {old}: renamed {new}, which is set too; remove "
                                f"[runtime] {old}")
        warnings.warn(f"[runtime] {old}: renamed {new}; read as {new} = {rt_raw[old]!r}",
                      ScenarioWarning, stacklevel=4)
        table[key] = rt_raw.pop(old)


_HOSTS_ONLY = {"endpoint": "only the hosts backend binds an endpoint",
               "token": "only the hosts backend's pools register with a token",
               "curve": "only the hosts backend encrypts with CURVE"}
#: the runtime keys a backend does not read, and why (a scenario that sets one is told, never
#: silently ignored)
IGNORED_BY = {
    "inproc": _HOSTS_ONLY,
    "processes": {**_HOSTS_ONLY,
                  "data_first": "its pools always build their data as they start, before "
                                "they say ready"},
    "dask": _HOSTS_ONLY,
    "hosts": {},
}


def _ignored(rt_raw: dict[str, Any], runtime: dict[str, Any]) -> None:
    """Warn about each key ``rt_raw`` sets to other than its default that the run's backend
    does not read."""
    for key, why in IGNORED_BY.get(runtime["backend"], {}).items():
        if key in rt_raw and runtime[key] != RUNTIME[key].default:
            warnings.warn(f"[runtime] {key}: not read by the {runtime['backend']} backend "
                          f"({why}); the runs go on without it", ScenarioWarning,
                          stacklevel=4)


def _runtime(raw: dict[str, Any]) -> dict[str, Any]:
    rt_raw = dict(_table(raw, "runtime"))
    dask_raw = dict(_table(raw, "dask"))
    faults = rt_raw.pop("faults", [])
    _renamed(rt_raw, dask_raw)
    runtime = _check_table(rt_raw, RUNTIME, "runtime")
    runtime["dask_address"] = check_dask_address(
        _check_table(dask_raw, DASK, "dask")["address"])
    _ignored(rt_raw, runtime)
    envelope, frame = runtime["max_envelope_bytes"], runtime["max_frame_bytes"]
    if envelope > frame:
        raise ScenarioError(f"[runtime] max_envelope_bytes: got {envelope}; allowed: at most "
                            f"max_frame_bytes ({frame}), a frame must hold one envelope")
    if runtime["secret"] and runtime["secret"] != SEED_ONLY:
        try:
            read_host_keys(runtime["secret"])
        except KeyFileError as e:
            raise ScenarioError(f"[runtime] secret: {e}; allowed: the path of a key file "
                                f"secret.key, {SEED_ONLY!r} (the seed-only secret), or none "
                                "(a fresh secret kept in the results directory)") from None
    if runtime["token"] and len(runtime["token"]) < MIN_TOKEN_CHARS:
        raise ScenarioError(
            f"[runtime] token: got {len(runtime['token'])} characters; allowed: at least "
            f"{MIN_TOKEN_CHARS} (a typed token is stretched with scrypt, a short one is still "
            "guessable: `ldpsim keys` writes one of 128 random bits)")
    if runtime["backend"] == "hosts" and runtime["jobs"] not in (1, "auto"):
        raise ScenarioError(
            f"[runtime] jobs: got {runtime['jobs']}; allowed: 1 or \"auto\" with the hosts "
            "backend (its pools serve one run at a time)")
    if runtime["executor"] == "dask" and runtime["backend"] == "hosts":
        raise ScenarioError(
            "[runtime] executor: got 'dask'; allowed: 'local' with the hosts backend (its pools "
            "serve one curator, in this process)")
    if runtime["executor"] == "dask" and runtime["backend"] == "dask":
        raise ScenarioError(
            "[runtime] executor: got 'dask' with backend 'dask'; allowed: 'local' with the dask "
            "backend (its pools take the cluster's workers; the runs go one after another)")
    if "address" in dask_raw and runtime["dask_address"] and "dask" not in (
            runtime["executor"], runtime["backend"]):
        raise ScenarioError(
            f"[dask] address: got {runtime['dask_address']!r}, but nothing runs on Dask; "
            "allowed with [runtime] executor = \"dask\" (the sweep's runs on the cluster: "
            "--executor dask) or backend = \"dask\" (one run's pools on it: --backend dask)")
    if not isinstance(faults, list):
        raise ScenarioError("[runtime] faults: must be a list of tables {pool, round, action}")
    runtime["faults"] = [_check_table(f if isinstance(f, dict) else {"?": f}, FAULT_KEYS,
                                      "runtime.faults") for f in faults]
    for f in runtime["faults"]:
        if f["pool"] >= runtime["pools"]:
            raise ScenarioError(f"[runtime.faults] pool: got {f['pool']}; allowed: 0 .. "
                                f"{runtime['pools'] - 1} (pools = {runtime['pools']})")
    return runtime


def _agents(raw: dict[str, Any], protos: list[str] | None,
            runtime: dict[str, Any] | None) -> dict[str, Any]:
    """The ``[agents]`` table: the agents' own limits (only the keys given)."""
    table = dict(_table(raw, "agents"))
    if not table:
        return {}
    if runtime is not None and runtime.get("backend") == "hosts":
        raise ScenarioError("[agents]: on the hosts backend each pool states its own limits "
                            "(`ldpsim agents --max-epsilon E --protocols P,Q --lifetime-epsilon "
                            "L`); remove the table")
    protocols = table.pop("protocols", None)
    out = {k: v for k, v in _check_table(table, AGENTS, "agents").items()
           if v is not None and k != "protocols"}
    if "lifetime_epsilon" in out and runtime is not None and runtime.get("executor") == "dask":
        raise ScenarioError("[agents] lifetime_epsilon: the agents' lifetime budget spans the "
                            "sweep's runs in order; allowed with executor = \"local\" (the "
                            "runs then go one at a time), not with the Dask executor")
    if protocols is not None:
        if not isinstance(protocols, list) or not all(isinstance(p, str) for p in protocols):
            raise ScenarioError(f"[agents] protocols: got {protocols!r}; allowed: a list of "
                                f"protocol names")
        from ldpsim.simulator.session.policy import AgentPolicy

        try:  # the agents' policy names its protocols' rule once
            AgentPolicy(protocols=tuple(protocols))
        except ValueError as e:
            raise ScenarioError(f"[agents] {e}") from None
        out["protocols"] = list(protocols)
    return out


#: ``[collusion]``: who colludes, given by one of these keys: ``colluders`` (a fraction or a
#: count, or a list of them: a sweep axis), ``agents`` (a list of agent ids) or ``sweep`` (the
#: former name of a list of colluders, read with a warning)
COALITION = ("colluders", "agents", "sweep")
_COLLUDERS = "a fraction in [0, 1), a count (integer >= 0), or a list of them (a sweep)"
_AGENTS = f"a list of agent ids (integers >= 0 and < {MAX_AGENTS}, below the number of agents n)"


def _published(entries: Any, protos: list[str] | None) -> list[str]:
    """Every problem of ``[[published]]`` (``simulator.results.published``), and each metric
    that none of the scenario's protocols declares."""
    problems = check_published(entries)
    if problems or not protos:
        return problems
    declared = {str(m) for p in protos for m in get_protocol(p).metrics}
    if not declared:
        return []
    return [f"[[published]] #{i + 1}: metric {e['metric']!r} is not a metric of "
            f"{', '.join(protos)}; allowed: {', '.join(sorted(declared))}"
            f"{hint(e['metric'], declared)}"
            for i, e in enumerate(entries) if e["metric"] not in declared]


def _collusion(raw: dict[str, Any]) -> dict[str, Any]:
    """The ``[collusion]`` table, checked. Its coalition is held as the runs have always read
    it: ``colluders`` one value (a fraction, a count, or the sorted ids of ``agents``) and,
    when ``colluders`` is a list, ``sweep`` that list (``colluders`` then its first value)."""
    col_raw = dict(_table(raw, "collusion"))
    given = [k for k in COALITION if k in col_raw]
    if len(given) > 1:
        raise ScenarioError(
            f"[collusion] {'/'.join(given)}: give one of them; allowed: colluders = "
            f"{_COLLUDERS}, or agents = a list of agent ids"
            + ("; sweep is the former name of a colluders list" if "sweep" in given else ""))
    if "sweep" in col_raw:
        warnings.warn(f"[collusion] sweep: renamed [collusion] colluders (a list of values is a "
                      f"sweep); read as colluders = {col_raw['sweep']!r}", ScenarioWarning,
                      stacklevel=4)
        col_raw["colluders"] = col_raw.pop("sweep")
    colluders = col_raw.pop("colluders", DEFAULTS.colluders)
    agents = col_raw.pop("agents", None)
    collusion = _check_table(col_raw, COLLUSION, "collusion", also=COALITION[:2])
    if agents is not None:
        collusion["colluders"] = _check_agents(agents)
    elif isinstance(colluders, list):
        collusion["colluders"] = _check_colluders_axis(colluders)[0]
        collusion["sweep"] = colluders
    else:
        collusion["colluders"] = _check_colluders(colluders)
    return collusion


def _colluders_error(v: Any) -> ScenarioError:
    return ScenarioError(f"[collusion] colluders: got {v!r}; allowed: {_COLLUDERS}; a list of "
                         f"agent ids goes in [collusion] agents; counts < {MAX_AGENTS} and below "
                         "the number of agents n")


def _check_colluders(v: Any) -> float | int:
    """One colluders value: a fraction in [0, 1) or a count (n may be a sweep or known only
    once a file is read: see check_runs)."""
    if isinstance(v, float) and 0 <= v < 1:
        return v
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_AGENTS:
        return v
    raise _colluders_error(v)


def _check_colluders_axis(values: list[Any]) -> list[float | int]:
    """A list of colluders values: a sweep axis, each value a fraction or a count."""
    if not values:
        raise ScenarioError("[collusion] colluders: an empty list sweeps nothing; allowed: a "
                            "fraction in [0, 1), a count (integer >= 0), or a non-empty list of "
                            "them (a sweep)")
    try:
        return [_check_colluders(v) for v in values]
    except ScenarioError:
        raise _colluders_error(values) from None


def _check_agents(v: Any) -> list[int]:
    """``[collusion] agents``: the colluding agents' ids, sorted and once each (checked against
    the number of agents in check_runs)."""
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                   and 0 <= x < MAX_AGENTS for x in v):
        return sorted(set(v))
    raise ScenarioError(f"[collusion] agents: got {v!r}; allowed: {_AGENTS}; a fraction or a "
                        "count goes in [collusion] colluders")


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
            _check_memory(proto, proto.bind(params, ds.public, resolved=True), ds.n)
            if s.runtime["pools"] > ds.n:
                raise ParamError(f"[runtime] pools: got {s.runtime['pools']}; allowed: at most "
                                 f"the number of agents ({ds.n})")
        except ParamError as e:
            raise ScenarioError(f"{e} (protocol {s.protocol}, point {s.point})") from None


#: bytes the curator holds per asked agent besides its report (the round's agent ids, who was
#: asked, who reported, whose report was invalid; the curator's own agent ids)
AGENT_BYTES = 24
#: bytes of one number of a report as the curator holds it (int64 or float64)
NUMBER_BYTES = 8


def memory_limit() -> int:
    """The most bytes a run's curator may need: this machine's physical memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf: no limit known
        return 1 << 62


def curator_bytes(numbers: int, n: int) -> int:
    """What a run's curator holds for a round of ``n`` agents' reports of ``numbers`` numbers.

    Parameters
    ----------
    numbers : int
        Numbers of one report (``Protocol.report_numbers``).
    n : int
        Agents asked in the round.

    Returns
    -------
    int
        Bytes: the reports (``Round.values``) and the per-agent bookkeeping.
    """
    return n * (numbers * NUMBER_BYTES + AGENT_BYTES)


def _check_memory(proto: Any, bound: Any, n: int) -> None:
    """Refuse a run whose curator cannot hold its round's reports in this machine's memory
    (ParamError naming ``[data] n``, the estimate and the limit)."""
    numbers = proto.report_numbers(bound)
    if numbers is None:
        return
    need, limit = curator_bytes(numbers, n), memory_limit()
    if need > limit:
        raise ParamError(f"[data] n: got {n}; its curator would hold about {need / 1e9:.3g} GB "
                         f"({n} agents x {numbers} numbers of {NUMBER_BYTES} bytes, one round's "
                         f"reports, + {AGENT_BYTES} bytes an agent); allowed: at most "
                         f"{limit / 1e9:.3g} GB (this machine's memory)")


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
