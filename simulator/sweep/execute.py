"""One run of a sweep, start to record: its backend runs it, the orchestrator scores its output
against the ground truth (which only it sees; ``TruthCache`` computes a large data set's truth
in a process of its own while the run runs) and builds its record. The serial loop, the
``--jobs`` workers and the Dask tasks all run a spec through ``execute_record``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing as mp
import pickle
import platform
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import zmq
from ldpsim.protocols import build_data, get_protocol
from ldpsim.protocols.keys import Secrets
from ldpsim.simulator.backends import Backend, get_backend
from ldpsim.simulator.backends.machine import cores as _cores
from ldpsim.simulator.backends.transport import die_with_parent, start_child
from ldpsim.simulator.results.store import DEGRADED
from ldpsim.simulator.scenario.scenario import RunSpec
from ldpsim.simulator.session import Limits, RunFailed
from ldpsim.simulator.session.collusion import Coalition, n_colluders, save_view
from ldpsim.simulator.session.common import counted
from ldpsim.simulator.session.keyfiles import secrets_of
from ldpsim.simulator.session.policy import AgentPolicy
from ldpsim.simulator.session.record import run_record
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.seeding import public_config, run_secrets

from ldpsim import __version__


def versions() -> dict[str, str]:
    """Versions of ldpsim and everything that can change a result (a fresh dict each call)."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    import scipy  # its version only: the protocols import its submodules where they use them

    return {"ldpsim": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "pyzmq": zmq.__version__, "libzmq": zmq.zmq_version(),
            "msgpack": ".".join(map(str, msgpack.version))}


#: Data sets of at least this many agents have their truth computed beside the run, in a
#: process of its own (``TruthCache.start``); below it, forking costs more than it saves.
TRUTH_BESIDE_N = 100_000


def data_signature(data: dict[str, Any], seed: int, secret: Secrets | None = None) -> str:
    """Which data set a run builds: runs with equal signatures build the same data and share
    its ground truth (``TruthCache``; the workers of a parallel sweep are handed them
    together)."""
    tag = "" if secret is None else hashlib.blake2b(secret.master, digest_size=8).hexdigest()
    return _SIGNATURE_JSON.encode([data, seed, tag])


#: ``json.dumps(..., sort_keys=True, default=str)``, its encoder made once
_SIGNATURE_JSON = json.JSONEncoder(sort_keys=True, default=str)


def keyed_seed(seed: int, secret: Secrets | None) -> int:
    """The seed a run of seed ``seed`` is executed with under the experiment's ``secret``
    (``Secrets.run_seed``: the seed itself in the seed-only mode, None)."""
    return int(seed) if secret is None else secret.run_seed(seed)


def _dataset(data: dict[str, Any], seed: int, secret: Secrets | None) -> Any:
    """The data set of a run executed with seed ``seed`` (``keyed_seed`` of its spec's), built
    with the same keys the pools use (all of them: the orchestrator is the referee)."""
    return build_data(data, run_secrets({"seed": seed}, secret).data_keys(seed))


def public_facts(spec: RunSpec) -> dict[str, Any]:
    """The public facts of a run's data set (``Dataset.public``: what its curator is told)."""
    secret = secrets_of(spec.runtime)
    return _dataset(spec.data, keyed_seed(spec.seed, secret), secret).public


def claimed(spec: RunSpec, public: dict[str, Any] | None = None) -> dict[str, Any]:
    """The privacy claim a run's record holds (``privacy`` without the agents' spend), from
    its spec alone: its protocol bound to its parameters and its data set's ``public`` facts
    (default ``public_facts(spec)``), as its pools bind it."""
    proto = get_protocol(spec.protocol)
    public = public_facts(spec) if public is None else public
    return proto.claim(proto.bind(spec.params, public).params, public).as_dict()


def _truth(data: dict[str, Any], seed: int, secret: Secrets | None) -> dict[str, Any]:
    return _dataset(data, seed, secret).truth()


def _truth_child(data: dict[str, Any], seed: int, secret: Secrets | None, conn) -> None:
    die_with_parent()  # no Ctrl-C traceback; gone with the orchestrator
    try:
        conn.send(("ok", _truth(data, seed, secret)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class TruthCache:
    """Ground truth per (data, seed): every protocol of one repetition shares its data.

    ``start`` computes a large data set's truth in a forked process while the run runs (numpy
    work of seconds at 10^7 agents, on a core the run leaves idle much of the time); ``get``
    then collects it. The child is forked before the run starts any process, from this
    single-threaded process: the same code on the same data, so the same truth as computed here
    (which ``get`` falls back to should the child fail in any way). Call ``close`` to stop
    computations nobody collected (a failed or interrupted run).

    A run whose pools compute the truth's costly part anyway hands their shares over
    (``offer``: ``Backend.take_truth_parts``); ``get`` joins them (``Dataset.truth_join``: the
    same truth, bit for bit) and computes the truth itself only when they do not make it.
    """

    #: data sets of fewer agents than this are kept apart, up to ``SMALL_KEPT`` of them: a
    #: sweep of many repetitions of small data sets meets each again at its next point
    SMALL_N = 10_000
    SMALL_KEPT = 8192

    def __init__(self, size: int = 64, beside: bool = True) -> None:
        self.size = size
        #: whether ``start`` may compute a truth beside the run (not in a ``--jobs`` worker:
        #: the other workers hold the cores it would use)
        self.beside = beside
        self._cache: dict[str, dict[str, Any]] = {}
        self._small: dict[str, dict[str, Any]] = {}  # the truths of small data sets
        self._pending: dict[str, tuple[Any, Any]] = {}  # sig -> (process, receiving end)
        self._parts: dict[str, list] = {}  # sig -> the pools' shares of it (``offer``)

    def start(self, data: dict[str, Any], seed: int, secret: Secrets | None = None,
              run_here: Any = None, in_pools: Any = None) -> bool:
        """Begin computing the truth of a data set of at least ``TRUTH_BESIDE_N`` agents in a
        process of its own, unless it is known or under way, or ``run_here`` (the protocol of
        a run whose agents compute in this process) leaves it here (``truth_from_run``: then
        ``get`` computes it after the run, from what the run kept), or the pools of a run of
        ``in_pools`` (a protocol) compute its parts (``truth_from_pools``: they hand them
        over, ``offer``); whether one was started."""
        n = data.get("n")
        if not self.beside or not isinstance(n, int) or n < TRUTH_BESIDE_N:
            return False
        sig = data_signature(data, seed, secret)
        if sig in self._cache or sig in self._small or sig in self._pending:
            return False
        if run_here is not None and _dataset(data, seed, secret).truth_from_run(run_here):
            return False
        if in_pools is not None and _dataset(data, seed, secret).truth_from_pools(in_pools):
            return False

        ctx = mp.get_context("fork")
        rx, tx = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_truth_child, name="ldpsim-truth",
                           args=(data, seed, secret, tx), daemon=True)
        try:
            start_child(proc)  # SIGINT blocked across the fork
        finally:
            tx.close()
        self._pending[sig] = (proc, rx)
        return True

    def get(self, data: dict[str, Any], seed: int, secret: Secrets | None = None
            ) -> dict[str, Any]:
        sig = data_signature(data, seed, secret)
        n = data.get("n")
        small = isinstance(n, int) and n < self.SMALL_N
        cache, size = (self._small, self.SMALL_KEPT) if small else (self._cache, self.size)
        if sig in cache:
            cache[sig] = cache.pop(sig)  # most recently used last
        else:
            truth = self._collect(sig)
            parts = self._parts.pop(sig, None)
            if truth is None and parts:
                truth = _dataset(data, seed, secret).truth_join(parts)
            if truth is None:
                truth = _truth(data, seed, secret)
            if len(cache) >= size:
                cache.pop(next(iter(cache)))  # least recently used
            cache[sig] = truth
        return cache[sig]

    def wants_parts(self, data: dict[str, Any], seed: int, secret: Secrets | None = None
                    ) -> bool:
        """Whether the pools' shares of the data set's truth would serve (``offer``): the truth
        is neither known nor under way beside a run."""
        sig = data_signature(data, seed, secret)
        return sig not in self._cache and sig not in self._small and sig not in self._pending

    def offer(self, data: dict[str, Any], seed: int, secret: Secrets | None,
              parts: list | None) -> None:
        """The shares of the data set's truth a run's pools sent (``Backend.take_truth_parts``;
        None or empty: none), kept for ``get`` unless the truth is known already."""
        sig = data_signature(data, seed, secret)
        if parts and sig not in self._cache and sig not in self._small:
            self._parts[sig] = parts

    def _collect(self, sig: str) -> dict[str, Any] | None:
        """The truth a ``start`` process computed (None: none started, or it failed)."""
        if sig not in self._pending:
            return None
        proc, rx = self._pending.pop(sig)
        status, payload = "error", None
        try:
            status, payload = rx.recv()
        except (EOFError, OSError):  # it died: compute here (and raise what it would raise)
            pass
        finally:  # it exits once it has sent; else (Ctrl-C, it died) it is stopped now
            rx.close()
            if status != "ok":
                proc.kill()
            proc.join()
        return payload if status == "ok" else None

    def close(self) -> None:
        """Stop the computations ``start`` began and nobody collected."""
        for proc, rx in self._pending.values():
            if proc.is_alive():
                proc.kill()
            proc.join()
            rx.close()
        self._pending.clear()
        self._parts.clear()


class Executions:
    """Executions the runs of a sweep share (``RunSpec.execution``): the runs of a sweep point
    that differ only in their coalition analyse one execution, run once for the largest of
    their coalitions (``largest_coalition``); each is recorded as its own run (``execute``).
    An execution is kept until every run sharing it has had it, and at most ``KEPT`` at once
    (a ``--jobs`` worker that gets some of a point's coalitions only, the others going to
    another worker, drops the oldest; a run that misses it executes it again, the same)."""

    #: the most executions kept at once
    KEPT = 4

    def __init__(self) -> None:
        self._kept: dict[str, list[Any]] = {}  # execution key -> [execution, runs left]

    def take(self, spec: RunSpec) -> dict[str, Any] | None:
        """The execution ``spec`` shares, if one of its runs has executed it."""
        got = self._kept.get(spec.execution)
        if got is None:
            return None
        got[1] -= 1
        if got[1] <= 0:
            del self._kept[spec.execution]
        return got[0]

    def keep(self, spec: RunSpec, execution: dict[str, Any]) -> None:
        """Keep ``spec``'s ``execution`` for the other runs that share it."""
        if len(spec.coalitions) > 1:
            self._kept[spec.execution] = [execution, len(spec.coalitions) - 1]
            while len(self._kept) > self.KEPT:  # the oldest first (dicts keep their order)
                del self._kept[next(iter(self._kept))]


def largest_coalition(spec: RunSpec) -> RunSpec:
    """The run whose execution ``spec`` analyses: ``spec`` with the largest coalition of the
    runs sharing its execution (``RunSpec.coalitions``: fractions or counts of colluders, whose
    coalitions hold one another), so the execution's disclosures cover each of them."""
    if len(spec.coalitions) < 2:
        return spec
    some = [c for c in spec.coalitions if c]  # 0 and 0.0: nobody, the smallest coalition
    if not some:
        return spec
    if len({isinstance(c, float) for c in some}) == 1:
        biggest = max(some)
    else:  # fractions and counts: compared as counts of this data set's agents
        n = spec.data.get("n")
        n = int(n) if isinstance(n, int) else int(public_facts(spec)["n"])
        biggest = max(some, key=lambda c: n_colluders(n, c) or 0)
    return replace(spec, collusion={**spec.collusion, "colluders": biggest})


def execute(spec: RunSpec, truth: TruthCache | None = None, backend: Backend | None = None,
            view_dir: Path | None = None, spent_before: float = 0.0,
            executions: Executions | None = None) -> dict[str, Any]:
    """Run one RunSpec on ``backend`` (default: a standalone one of the spec's kind) and
    return its result record. ``spent_before``: what the agents spent on the run's data set in
    the sweep's earlier runs (their lifetime odometer, which the local backends' one-run pools
    get from here). ``executions``: the executions runs share (``Executions``): a run whose
    execution another run of its sweep point has made is recorded from it, analysed for its
    own coalition (``coalition_result``), and is the same record as if it had run alone."""
    if truth is None:
        truth = TruthCache()
        try:
            return execute(spec, truth, backend, view_dir, spent_before, executions)
        finally:
            truth.close()
    # the experiment's master secret (``[runtime] secret``): with the same one every backend
    # gives the same output for the same seed (``simulator.session.keyfiles``); in the
    # seed-only mode, None: the seed's own. With a secret the run's seed is keyed by it
    # first (``keyed_seed``): nothing a party receives is then a function of the seed
    secret = secrets_of(spec.runtime)
    done = executions.take(spec) if executions is not None else None
    if done is None:
        done = _execute(largest_coalition(spec), truth, backend, spent_before, secret)
        if executions is not None:
            executions.keep(spec, done)
    return _record(spec, done, truth, view_dir, secret)


def _execute(spec: RunSpec, truth: TruthCache, backend: Backend | None, spent_before: float,
             secret: Secrets | None) -> dict[str, Any]:
    """Execute ``spec`` on ``backend``: the curator's result, the run's wall time and the
    backend's name."""
    config = spec.config()
    config["seed"] = keyed_seed(spec.seed, secret)
    limits = Limits.of_runtime(spec.runtime)
    if backend is None:
        backend = get_backend(spec.runtime["backend"]).standalone()
    record_view = spec.keeps_view
    policy = AgentPolicy.of(spec.agents, spent=spent_before)
    if _cores() > backend.busy_cores(spec.runtime):
        # a large data set's truth beside the run, on a core the run leaves free: where none is
        # left it would slow the run down, and the run's timings with it
        proto = get_protocol(spec.protocol)
        truth.start(spec.data, config["seed"], secret, proto if backend.agents_here else None,
                    proto if backend.pools_share_truth else None)
    if backend.pools_share_truth:
        backend.share_truth = truth.wants_parts(spec.data, config["seed"], secret)
    t0 = time.perf_counter()
    res = backend.run(config, limits, record_view, secret, policy)
    wall = time.perf_counter() - t0
    truth.offer(spec.data, config["seed"], secret, backend.take_truth_parts())
    return {"res": res, "wall": wall, "backend": backend.name}


def coalition_result(res: dict[str, Any], spec: RunSpec, secret: Secrets | None
                     ) -> dict[str, Any]:
    """The curator's result ``res`` of the execution ``spec`` shares, as ``spec``'s coalition
    saw it: its colluders' count, the bytes they disclosed and, in the view, their disclosures
    only. Everything else (output, costs, times) is the execution's. ``res`` itself when
    ``spec`` shares its execution with no other run."""
    if len(spec.coalitions) < 2:
        return res
    config = dict(spec.config(), seed=keyed_seed(spec.seed, secret))
    coalition = Coalition(int(res["n_agents"]), spec.collusion,
                          public_config(config)["collusion_key"],
                          RunConfig.of(config).chunk_agents)
    out = dict(res, colluders=len(coalition))
    disclosed = res.get("disclosed_bytes") or {}
    out["comm"] = {**res["comm"], "disclose_bytes_total": int(sum(
        b for a, b in disclosed.items() if _member(coalition, a)))}
    if res.get("view") is not None:
        view = dict(res["view"])
        view["disclosures"] = {a: d for a, d in view.get("disclosures", {}).items()
                               if _member(coalition, a)}
        out["view"] = view
    return out


def _member(coalition: Coalition, agent: Any) -> bool:
    """Whether the disclosing ``agent`` (an id the curator took) is in ``coalition``."""
    return int(agent) in coalition


def _record(spec: RunSpec, done: dict[str, Any], truth: TruthCache, view_dir: Path | None,
            secret: Secrets | None) -> dict[str, Any]:
    """The record of ``spec`` from the execution ``done`` it analyses."""
    res = coalition_result(done["res"], spec, secret)
    seed = keyed_seed(spec.seed, secret)
    proto = get_protocol(spec.protocol)
    record = run_record(
        spec=spec, res=res, backend=done["backend"],
        metrics=proto.evaluate(res["output"], truth.get(spec.data, seed, secret)),
        privacy=_claim(spec.protocol, res["params"], res["public"]), run_wall_s=done["wall"],
        versions=versions(), degraded=DEGRADED)
    if spec.collusion.get("attacks"):
        t1 = time.perf_counter()
        record["leakage"] = _leakage(spec, res, secret)
        record["leakage"]["seconds"] = time.perf_counter() - t1
    if spec.collusion.get("save_view") and view_dir is not None:
        path = save_view(view_dir / f"{spec.key}.msgpack", res["view"])
        record["view_path"] = str(path)
    return record


#: the privacy claims of the parameters and public facts met last (``_claim``)
_CLAIMS: dict[tuple[str, bytes], dict[str, Any]] = {}
CLAIMS_KEPT = 1024
_CLAIMS_LOCK = threading.Lock()


def _claim(protocol: str, params: dict[str, Any], public: dict[str, Any]) -> dict[str, Any]:
    """``get_protocol(protocol).claim(params, public).as_dict()``: a claim is a function of
    the bound parameters and the public facts alone, so the runs of a sweep point (which
    share them) have it made once; a copy each call."""
    try:
        key = (protocol, pickle.dumps((params, public), protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # something that does not pickle: made afresh
        return get_protocol(protocol).claim(params, public).as_dict()
    got = _CLAIMS.get(key)
    if got is None:
        got = get_protocol(protocol).claim(params, public).as_dict()
        with _CLAIMS_LOCK:  # runs may be made in threads (a Dask worker's)
            while len(_CLAIMS) >= CLAIMS_KEPT:
                _CLAIMS.pop(next(iter(_CLAIMS)))  # the oldest
            _CLAIMS[key] = got
    return dict(got)


def _leakage(spec: RunSpec, res: dict[str, Any], secret: Secrets | None) -> dict[str, Any]:
    """``simulator.audit.leakage`` on the run's own view, with the run's data and coalition."""
    from ldpsim.simulator.audit.leakage import run_leakage

    config = dict(spec.config(), seed=keyed_seed(spec.seed, secret))
    ds = _dataset(spec.data, config["seed"], secret)
    mask = Coalition(ds.n, spec.collusion, public_config(config)["collusion_key"],
                     RunConfig.of(config).chunk_agents).mask()
    return run_leakage(get_protocol(spec.protocol), res["view"], ds, mask,
                       RunConfig.of(config).curator_colludes, config["seed"],
                       int(spec.collusion.get("attack_targets", 200)))


#: the runs of a parallel sweep that failed (``--jobs`` N > 1, the Dask engine): one JSON line
#: each, beside ``results.jsonl``; they are not results, and the same command redoes them
FAILED_FILE = "failed.jsonl"


def record_failure(out_dir: Path, spec: RunSpec, message: str) -> None:
    """Append a failed run (key, point, repeat, time, error) to ``OUT/failed.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / FAILED_FILE, "a") as f:
        f.write(json.dumps({"key": spec.key, "protocol": spec.protocol, "point": spec.point,
                            "repeat": spec.repeat, "time": time.time(), "error": message},
                           default=str) + "\n")


def failed_runs(failed: list[tuple[RunSpec, str]], total: int, out_dir: Path,
                where: str) -> RunFailed:
    """The error that ends a parallel sweep in which ``failed`` runs failed (each recorded in
    ``failed.jsonl``), naming them."""
    lines = "\n".join(f"  {msg.splitlines()[0] if msg else s.key}" for s, msg in failed)
    return RunFailed(f"{len(failed)} of {counted(total, 'run')} failed {where} (listed in "
                     f"{out_dir / FAILED_FILE}; not in the results: the same command redoes "
                     f"them):\n{lines}\n{failed[0][1]}")


def execute_record(spec: RunSpec, truth: TruthCache, backend: Backend | None, view_dir: Path,
                   per_round: bool, spent_before: float = 0.0,
                   executions: Executions | None = None) -> dict[str, Any]:
    """``execute``, without the per-round entries of the record's ``comm`` unless
    ``per_round`` (``[output] per_round = false`` keeps big sweeps' records small)."""
    rec = execute(spec, truth, backend, view_dir, spent_before, executions)
    if not per_round:
        rec["comm"].pop("per_round", None)
    return rec


