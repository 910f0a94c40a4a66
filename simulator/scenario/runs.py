"""A validated scenario (``Scenario``) and its expansion into runs (``RunSpec``), each with its
key (``run_key``): a hash of what identifies the run's output.

The runs are the product grid of the scenario's axes (``simulator.scenario.axes``), times the
protocols, times the repetitions; a run whose key an earlier one has is left out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ldpsim.protocols import get_data_kind, get_protocol
from ldpsim.protocols.base import ParamSpec
from ldpsim.protocols.datasets import key_form
from ldpsim.protocols.keys import run_seed
from ldpsim.simulator.results.plot_spec import PlotSpec
from ldpsim.simulator.scenario import deployment as dep
from ldpsim.simulator.scenario.axes import points


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
    #: the key of the execution it analyses (``execution_key``): the runs of a sweep point that
    #: differ only in their coalition share it ("" : its own key)
    execution: str = ""
    #: the colluders of every run sharing its execution, itself included (empty: none other)
    coalitions: tuple[Any, ...] = ()

    @property
    def keeps_view(self) -> bool:
        """Whether the run's curator keeps the adversary's view (every report it received):
        saved (``[collusion] save_view``) or attacked (``[collusion] attacks``)."""
        return bool(self.collusion.get("save_view")) or bool(self.collusion.get("attacks"))

    def config(self) -> dict[str, Any]:
        """The public run configuration the curator sends to every pool."""
        return {"protocol": self.protocol, "params": self.params, "data": self.data,
                "seed": self.seed, "pools": self.runtime["pools"],
                "agent_mode": self.runtime["agent_mode"], "batch": self.runtime["batch"],
                "collusion": {k: self.collusion[k] for k in ("colluders", "curator")},
                "faults": self.runtime.get("faults", []),
                **({"data_first": True} if self.runtime.get("data_first") else {}),
                **({"chunk": self.runtime["chunk"]}
                   if self.runtime.get("chunk", "auto") != "auto" else {}),
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
    #: the figures of its report (``[report]`` and ``[plot]``: ``plot_spec.report_spec``)
    report: PlotSpec | None = None
    #: the keys the command line set (``--set``, and options such as ``--backend``)
    overridden: list[str] = field(default_factory=list)
    #: the agents' own limits (``[agents]``: max_epsilon, protocols, lifetime_epsilon)
    agents: dict[str, Any] = field(default_factory=dict)
    #: groups of swept settings that vary together (``[sweep] paired``), each one axis
    paired: list[list[str]] = field(default_factory=list)
    #: devices and network in virtual time (``[deployment]``, checked: ``scenario.deployment``)
    deployment: dict[str, Any] = field(default_factory=dict)
    #: ``data`` with each value checked and coerced to its kind (``checked_data``), as
    #: validation left it; empty: checked when the runs are expanded (a stored sweep's)
    data_checked: dict[str, Any] = field(default_factory=dict)
    #: per protocol, the ``params`` it takes, checked (``checked_params``), likewise
    params_checked: dict[str, dict[str, Any]] = field(default_factory=dict)

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
        norm_data = self.data_checked or checked_data(self.data)
        specs: list[RunSpec] = []
        seen: set[str] = set()
        costs: dict[tuple[str, str], Any] = {}  # the compute costs, read once per protocol
        seeds = [run_seed(self.seed, r) for r in range(self.repeats)]  # the same at each point
        faults = self.runtime.get("faults", [])
        for proto in self.protocols:
            params = (self.params_checked[proto] if proto in self.params_checked
                      else checked_params(proto, self.params))
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
                # the keys of the point's repetitions: what they share hashed as text once
                keys = key_parts(proto, p, data, self.seed, collusion, faults, deploy)
                executions = key_parts(proto, p, data, self.seed, _execution_of(collusion),
                                       faults, deploy)
                for r in range(self.repeats):
                    key = key_of(keys, r)
                    if key in seen:
                        continue
                    seen.add(key)
                    specs.append(RunSpec(self.name, proto, p, data, r, self.seed, seeds[r],
                                         dict(self.runtime), collusion, point, key,
                                         dict(self.agents), deploy, key_of(executions, r)))
        return shared_executions(specs)


def as_kind(spec: ParamSpec, value: Any, where: str) -> Any:
    """``value`` (or each value of a sweep list) checked against ``spec`` and coerced to its
    kind: 1 and 1.0 are one ε. The one check a scenario's value gets (``checked_params``,
    ``checked_data``); ParamError naming ``where``."""
    if isinstance(value, list):
        return [spec.check(v, where) for v in value]
    return spec.check(value, where)


def checked_params(proto: str, params: dict[str, Any]) -> dict[str, Any]:
    """The scenario's ``[params]`` that protocol ``proto`` takes, each checked (``as_kind``);
    the keys it does not take are left out."""
    accepted = get_protocol(proto).params
    return {k: as_kind(accepted[k], v, f"[params] {k}") for k, v in params.items()
            if k in accepted}


def checked_data(data: dict[str, Any]) -> dict[str, Any]:
    """The ``[data]`` table with each argument checked against its data kind (``as_kind``)."""
    dk = get_data_kind(data["kind"])
    return {k: (v if k == "kind" else as_kind(dk.params[k], v, f"[data] {k}"))
            for k, v in data.items()}


def execution_key(proto, params, data, repeat, seed, collusion, faults, deployment=None
                  ) -> str:
    """The key of the execution a run analyses: its ``run_key`` without its coalition (a
    fraction or count of colluders; an explicit list of agents stays, as its coalition need not
    hold a smaller one). Semi-honest colluders change neither the coins (``protocols.keys.
    run_tag``) nor the transcript, so the runs of one sweep point that differ only in their
    coalition are analyses of one execution (``sweep.execute``)."""
    return run_key(proto, params, data, repeat, seed, _execution_of(collusion), faults,
                   deployment)


def _execution_of(collusion: dict[str, Any]) -> dict[str, Any]:
    """The ``collusion`` table of a run's execution (``execution_key``): no coalition but an
    explicit list of agents."""
    colluders = collusion["colluders"]
    return {**collusion, "colluders": colluders if isinstance(colluders, list) else 0}


def shared_executions(specs: list[RunSpec]) -> list[RunSpec]:
    """``specs`` with each one's ``coalitions``: the colluders of every run of the list that
    shares its execution (``execution_key``), where there is more than one."""
    groups: dict[str, list[Any]] = {}
    for s in specs:
        groups.setdefault(s.execution, []).append(s.collusion["colluders"])
    for s in specs:
        if len(groups[s.execution]) > 1:
            s.coalitions = tuple(groups[s.execution])
    return specs


def run_key(proto, params, data, repeat, seed, collusion, faults, deployment=None) -> str:
    """A run's key: a hash of what identifies its output (``RunSpec.key``); a deployment
    only when there is one (the keys of runs without stay as they were). A named data file
    (``data:NAME/FILE``) is hashed as the scenarios spelled it before (``datasets.key_form``):
    their runs' keys stay as they were, whichever folder holds the data."""
    return key_of(key_parts(proto, params, data, seed, collusion, faults, deployment), repeat)


def key_parts(proto, params, data, seed, collusion, faults, deployment=None
              ) -> tuple[str, str]:
    """The text ``run_key`` hashes, but the repetition: the JSON list ``[proto, params, data,
    repeat, seed, collusion, faults(, deployment)]`` before and after ``repeat`` (a list's
    JSON is its items' joined by ", "), which every repetition of a sweep point shares."""
    data = {k: key_form(v) for k, v in data.items()}
    head = json.dumps([proto, params, data], sort_keys=True, default=str)
    tail = json.dumps([seed, {k: collusion[k] for k in ("colluders", "curator")}, faults,
                       *([deployment] if deployment else [])], sort_keys=True, default=str)
    return head[:-1] + ", ", ", " + tail[1:]


def key_of(parts: tuple[str, str], repeat: Any) -> str:
    """``run_key`` of repetition ``repeat`` from its point's ``key_parts``."""
    text = repr(repeat) if type(repeat) is int else json.dumps(repeat, sort_keys=True,
                                                                default=str)
    return hashlib.sha256((parts[0] + text + parts[1]).encode()).hexdigest()[:20]
