"""The scenario tables' schemas and their checks: ``[runtime]``, ``[dask]``, ``[agents]``,
``[collusion]``, ``[output]``, ``[data]``, ``[params]``, the protocol list and
``[[published]]``, and the errors and warnings the scenario language raises.

Every table's schema (``RUNTIME``, ``COLLUSION``, ...) stands beside the check that enforces it,
so an allowed value is declared in exactly one place; ``scenario.validate`` calls the checks and
reports every problem at once (``Errors``). Every error names the key and what is allowed.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from ldpsim.protocols import (
    ParamError,
    data_kinds,
    get_data_kind,
    get_protocol,
    is_data_kind,
    is_protocol,
    registry,
)
from ldpsim.protocols.base import MAX_AGENTS, ParamSpec
from ldpsim.simulator.backends import BACKENDS
from ldpsim.simulator.results.hint import hint
from ldpsim.simulator.results.published import check_published
from ldpsim.simulator.scenario.runs import as_kind
from ldpsim.simulator.session.keyfiles import (
    MIN_TOKEN_CHARS,
    SEED_ONLY,
    KeyFileError,
    read_host_keys,
)
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.runconfig import DEFAULTS, EXECUTORS


class ScenarioWarning(UserWarning):
    """A scenario setting that is read under a new name, or that the run does not use."""


class ScenarioError(ValueError):
    """A scenario file or override is invalid; the message names the key and allowed values."""


#: Upper bounds, checked before any process starts (beyond them a run would exhaust memory, hang
#: or overflow a wire field). The number of agents is bounded by ``protocols.params.MAX_AGENTS``.
MAX_REPEATS = 10**6
MAX_TIMEOUT_S = 86400  # one day without progress
MAX_FRAME_BYTES = 1 << 31
MAX_ENVELOPE_BYTES = 1 << 30
MAX_BATCH = 1 << 20
MAX_JOBS = 256
#: the largest ``[runtime] chunk`` (agents held at once)
MAX_CHUNK = 1 << 40
TOP_KEYS = {"name", "description", "protocol", "protocols", "repeats", "seed", "data", "params",
            "runtime", "dask", "agents", "collusion", "output", "plot", "sweep", "published",
            "deployment", "report"}

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
    "chunk": ParamSpec("chunk", "int_or_auto", DEFAULTS.chunk, low=1, high=MAX_CHUNK,
                       help="agents a pool or curator holds at once: a run with more agents is "
                            "generated, answered and counted this many at a time (the records "
                            "are the same); auto: 1048576"),
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


def table_of(raw: dict[str, Any], name: str) -> dict[str, Any]:
    t = raw.get(name, {})
    if not isinstance(t, dict):
        raise ScenarioError(f"[{name}]: must be a table")
    return t


class Errors:
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


def check_section(table: dict[str, Any], specs: dict[str, ParamSpec], section: str,
                 also: tuple[str, ...] = ()) -> dict:
    """``table`` checked against ``specs``, defaults filled in; ``also``: keys of the section
    its caller has taken out and checks itself (named among the allowed ones)."""
    errors = Errors()
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


def protocols_of(raw: dict[str, Any]) -> list[str]:
    if "protocol" in raw and "protocols" in raw:
        raise ScenarioError("protocol/protocols: give one of them, not both")
    protos = raw.get("protocols", raw.get("protocol"))
    every = registry.protocols  # every family: only to list the names in an error
    if protos is None:
        raise ScenarioError(f"protocol: required; allowed: {', '.join(sorted(every()))}")
    protos = protos if isinstance(protos, list) else [protos]
    if not protos:
        raise ScenarioError("protocols: must not be empty")
    for p in protos:
        if not isinstance(p, str):
            raise ScenarioError(f"protocol: {p!r} is not a name; allowed: "
                                f"{', '.join(sorted(every()))}")
        if not is_protocol(p):
            raise ScenarioError(f"protocol: unknown protocol {p!r}; allowed: "
                                f"{', '.join(sorted(every()))}{hint(p, every())}")
    return protos


def data_table(raw: dict[str, Any], protos: list[str] | None, errors: Errors
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``[data]`` table as given, and with each value checked once (``runs.as_kind``:
    what the runs are expanded from); each problem recorded in ``errors``."""
    data = dict(table_of(raw, "data"))
    kind = data.get("kind")
    if kind is None:
        raise ScenarioError(f"[data] kind: required; allowed: {', '.join(sorted(data_kinds()))}")
    if not isinstance(kind, str):
        raise ScenarioError(f"[data] kind: got {kind!r}; allowed: one of "
                            f"{', '.join(sorted(data_kinds()))} (a data kind cannot be swept)")
    if not is_data_kind(kind):
        raise ScenarioError(f"[data] kind: unknown data kind {kind!r}; allowed: "
                            f"{', '.join(sorted(data_kinds()))}{hint(kind, data_kinds())}")
    dk = get_data_kind(kind)
    checked: dict[str, Any] = {"kind": kind}
    if protos is not None:
        data_types = {get_protocol(p).data_type for p in protos}
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
        checked[k] = errors.attempt(as_kind, dk.params[k], v, f"[data] {k}")
    return data, checked


def params_table(raw: dict[str, Any], protos: list[str] | None, narrowed: frozenset[str],
                 errors: Errors) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The ``[params]`` table as given, and per protocol the values it takes, each checked
    once (``runs.as_kind``: what the runs are expanded from); every problem recorded in
    ``errors``, one per key."""
    params = dict(table_of(raw, "params"))
    if protos is None:
        return params, {}
    checked: dict[str, dict[str, Any]] = {p: {} for p in protos}
    for k, v in params.items():
        takers = [p for p in protos if k in get_protocol(p).params]
        if not takers and k not in narrowed:  # ignoring it would run something else than asked
            allowed = sorted({n for p in protos for n in get_protocol(p).params})
            errors.add(f"[params] {k}: not a parameter of any protocol of this scenario; "
                       f"allowed for {', '.join(protos)}: {', '.join(allowed) or '(none)'}"
                       f"{hint(k, allowed)}")
            continue
        # a parameter of some of the protocols (e.g. epsilon next to plain "kwiksort") is not
        # applied to those that do not take it
        if isinstance(v, list) and not v:
            errors.add(f"[params] {k}: an empty list sweeps nothing")
        for p in takers:
            before = len(errors.messages)
            value = errors.attempt(as_kind, get_protocol(p).params[k], v, f"[params] {k}")
            if len(errors.messages) > before:
                break
            checked[p][k] = value
    return params, checked


def check_dask_address(address: str) -> str:
    """``address`` if it is a valid ``[dask] address``, else ScenarioError naming the key and
    the allowed forms."""
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


def runtime_table(raw: dict[str, Any]) -> dict[str, Any]:
    rt_raw = dict(table_of(raw, "runtime"))
    dask_raw = dict(table_of(raw, "dask"))
    faults = rt_raw.pop("faults", [])
    _renamed(rt_raw, dask_raw)
    runtime = check_section(rt_raw, RUNTIME, "runtime")
    runtime["dask_address"] = check_dask_address(
        check_section(dask_raw, DASK, "dask")["address"])
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
    runtime["faults"] = [check_section(f if isinstance(f, dict) else {"?": f}, FAULT_KEYS,
                                      "runtime.faults") for f in faults]
    for f in runtime["faults"]:
        if f["pool"] >= runtime["pools"]:
            raise ScenarioError(f"[runtime.faults] pool: got {f['pool']}; allowed: 0 .. "
                                f"{runtime['pools'] - 1} (pools = {runtime['pools']})")
    return runtime


def agents_table(raw: dict[str, Any], protos: list[str] | None,
                 runtime: dict[str, Any] | None) -> dict[str, Any]:
    """The ``[agents]`` table: the agents' own limits (only the keys given)."""
    table = dict(table_of(raw, "agents"))
    if not table:
        return {}
    if runtime is not None and runtime.get("backend") == "hosts":
        raise ScenarioError("[agents]: on the hosts backend each pool states its own limits "
                            "(`ldpsim agents --max-epsilon E --protocols P,Q --lifetime-epsilon "
                            "L`); remove the table")
    protocols = table.pop("protocols", None)
    out = {k: v for k, v in check_section(table, AGENTS, "agents").items()
           if v is not None and k != "protocols"}
    if "lifetime_epsilon" in out and runtime is not None and runtime.get("executor") == "dask":
        raise ScenarioError("[agents] lifetime_epsilon: the agents' lifetime budget spans the "
                            "sweep's runs in order; allowed with executor = \"local\" (the "
                            "runs then go one at a time), not with the Dask executor")
    if protocols is not None:
        if not isinstance(protocols, list) or not all(isinstance(p, str) for p in protocols):
            raise ScenarioError(f"[agents] protocols: got {protocols!r}; allowed: a list of "
                                f"protocol names")
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


def published_problems(entries: Any, protos: list[str] | None) -> list[str]:
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


def collusion_table(raw: dict[str, Any]) -> dict[str, Any]:
    """The ``[collusion]`` table, checked. Its coalition is held as the runs have always read
    it: ``colluders`` one value (a fraction, a count, or the sorted ids of ``agents``) and,
    when ``colluders`` is a list, ``sweep`` that list (``colluders`` then its first value)."""
    col_raw = dict(table_of(raw, "collusion"))
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
    collusion = check_section(col_raw, COLLUSION, "collusion", also=COALITION[:2])
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
