"""Run configuration: every runtime default in one frozen object, and one run's configuration.

``DEFAULTS`` (a ``RuntimeDefaults``) is the single place a runtime default is declared: the
scenario's ``[runtime]`` and ``[collusion]`` tables (``simulator.scenario.tables``) take their
defaults from it, ``Limits`` its limits, and the sessions read a run's settings through
``RunConfig``, which fills anything a configuration leaves out from it. Nothing else spells a
default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuntimeDefaults:
    """The default of every runtime setting (``[runtime]``, and the collusion flag)."""

    backend: str = "processes"
    pools: int = 2
    timeout_s: float = 30.0
    agent_mode: str = "batched"
    #: agents per query batch (one frame of queries, answered by one frame of reports), or
    #: "auto": sized per round and pool from how many agents it asks (``rounds.batch_size``)
    batch: int | str = "auto"
    #: agents a party holds at once (``[runtime] chunk``): a pool generates, keys, answers
    #: and forgets its agents this many at a time, and a curator whose protocol's estimator
    #: takes its reports in parts (``Curator.absorbs_in_parts``) absorbs them as they come
    #: (``roundloop.RoundLoop.streams``), when the run has more agents than this; "auto":
    #: ``CHUNK_AUTO``. The records are the same whatever it is: only the memory and the time
    #: move
    chunk: int | str = "auto"
    endpoint: str = "tcp://*:5555"
    token: str = ""
    #: the key file of the experiment's master secret (``ldpsim keys``); "" = each run's seed
    secret: str = ""
    curve: str = ""
    max_frame_bytes: int = 64 << 20
    max_envelope_bytes: int = 1 << 20
    progress: bool = True
    #: runs of a sweep executed at once, each in a worker process of its own; "auto": as
    #: many as the machine's cores hold (``runner.auto_jobs``)
    jobs: int | str = "auto"
    #: where a sweep's runs execute (``[runtime] executor``): "local" (this machine, ``jobs``
    #: at once) or "dask" (one task per run on a Dask cluster, ``simulator.sweep.engine_dask``)
    executor: str = "local"
    #: the Dask cluster (``[dask] address``) of ``executor = "dask"`` and of ``backend =
    #: "dask"``: "tcp://HOST:PORT", or "local" / "local:N" (a LocalCluster of N worker processes
    #: here; "" = "local"); a run's validated runtime table holds it as ``dask_address``
    dask_address: str = ""
    #: whether the pools build their agents' data before they register (then no round's wall
    #: time holds data generation; by default it overlaps the curator's set-up and round 0).
    #: The processes backend's pools always build it before they even say ready, as they start
    #: (``PoolSession.prebuild``), whatever this says
    data_first: bool = False
    #: whether the curator belongs to the coalition (``[collusion] curator``)
    curator_colludes: bool = True
    #: colluding agents: a fraction or a count (``[collusion] colluders``), or a list of ids
    #: (``[collusion] agents``)
    colluders: float | int = 0


#: agents per chunk of ``chunk = "auto"``: a pool's rows and keys of a chunk of LDP-KwikSort
#: agents of 10 items take about 36 MB
CHUNK_AUTO = 1 << 20

#: ``[runtime] executor``: where a sweep's runs execute
EXECUTORS = ("local", "dask")

#: the one instance every default is read from
DEFAULTS = RuntimeDefaults()


@dataclass(frozen=True)
class RunConfig:
    """One run's public configuration as the curator and the pools read it.

    Built once from the configuration dict that travels to the pools (``RunSpec.config()``,
    ``seeding.curator_config``), with ``DEFAULTS`` for any key it leaves out; every session
    reads its settings here, never with a fallback of its own.
    """

    protocol: str
    params: Mapping[str, Any]
    data: Mapping[str, Any]
    pools: int = DEFAULTS.pools
    agent_mode: str = DEFAULTS.agent_mode
    batch: int | str = DEFAULTS.batch
    chunk: int | str = DEFAULTS.chunk
    collusion: Mapping[str, Any] = field(default_factory=lambda: {
        "colluders": DEFAULTS.colluders, "curator": DEFAULTS.curator_colludes})
    faults: tuple[Mapping[str, Any], ...] = ()
    run_id: int | None = None
    data_first: bool = DEFAULTS.data_first
    #: the run's ``[deployment]`` (``RunSpec.deployment``): empty without one
    deployment: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> RunConfig:
        """The configuration ``config`` states, with the defaults for what it leaves out."""
        coll = config.get("collusion") or {}
        return cls(protocol=config["protocol"], params=config["params"], data=config["data"],
                   pools=int(config.get("pools", DEFAULTS.pools)),
                   agent_mode=config.get("agent_mode", DEFAULTS.agent_mode),
                   batch=_batch(config.get("batch", DEFAULTS.batch)),
                   chunk=_batch(config.get("chunk", DEFAULTS.chunk)),
                   collusion={"colluders": coll.get("colluders", DEFAULTS.colluders),
                              "curator": bool(coll.get("curator", DEFAULTS.curator_colludes))},
                   faults=tuple(config.get("faults") or ()),
                   run_id=config.get("run_id"),
                   data_first=bool(config.get("data_first", DEFAULTS.data_first)),
                   deployment=config.get("deployment") or {})

    @property
    def curator_colludes(self) -> bool:
        """Whether the curator is in the coalition (then colluders disclose to it)."""
        return bool(self.collusion["curator"])

    @property
    def exact(self) -> bool:
        """Agents answer one at a time (``agent_mode = "exact"``), each timed on its own."""
        return self.agent_mode == "exact"

    @property
    def chunk_agents(self) -> int:
        """Agents a party holds at once (``chunk``, "auto" resolved to ``CHUNK_AUTO``)."""
        return CHUNK_AUTO if self.chunk == "auto" else int(self.chunk)

    def chunked(self, n: int) -> bool:
        """Whether a run of ``n`` agents is held in chunks (more agents than ``chunk``)."""
        return n > self.chunk_agents

    def faults_of(self, pool: int) -> list[Mapping[str, Any]]:
        """The injected faults of pool ``pool``."""
        return [f for f in self.faults if int(f.get("pool", -1)) == pool]


def _batch(value: Any) -> int | str:
    """A configuration's batch (or chunk) setting: "auto", or a whole number of agents (at
    least 1)."""
    return "auto" if value == "auto" else max(1, int(value))
