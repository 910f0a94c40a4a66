"""The pool's session: one process hosting a block of logical agents.

A pool waits for a run's set-up, checks it against its agents' own policy (``policy``: the
orchestrator's signature, a run id never answered before, its own limits), registers its block
(``registration``), generates its agents' private rows (only its own, each from the agent's own
data key: the same data whatever the pool count), answers each query batch with one frame of
reports from the protocol's randomizer, each agent drawing from its own coin key for the run,
under each agent's privacy odometer (``odometer``; the lifetime ``policy.Ledger`` per data set
outlives the run), and reports its statistics when the run's output is released. A batch whose
queries (or round broadcast) are not questions the protocol asks in that round is refused
before any coin is drawn (``Protocol.query_refusal``): the coins of a round answer only the
round's own questions. Colluding
agents disclose their rows and coin keys to the curator at registration.

An independent pool (``ldpsim agents``) keeps the runs it answered and its ledger in its state
file (``poolstate``), written before any report that spends leaves it: restarted, it refuses
what it answered and charges what it spent. The curator's DONE ends a sweep; whether the pool
then exits is the pool's own setting (``exit_on_done``), and exiting erases nothing.

``PoolSession`` is about 420 lines, over the house's ~250: it holds every step of a pool's run
(the set-up, each kind of envelope, the answer to a query batch) so the pool's side reads in
one place; the work lives in the modules it calls (poolsetup (the set-up's checks and
answers), poolmemory (the runs answered, the ledger, the state file), querybatches (queued
batches answered at once), agentrows, odometer, faults, truthshare (its share of the ground
truth, for the orchestrator), rounds.report_frames).
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Iterator
from typing import Any

import numpy as np
from ldpsim.protocols import build_data, get_protocol
from ldpsim.simulator.codec import wire
from ldpsim.simulator.session import agentrows, faults, poolsetup, querybatches
from ldpsim.simulator.session.accounting import AgentClock, pool_stats
from ldpsim.simulator.session.common import MAX_REASON, Limits, RunFailed, block_of, span
from ldpsim.simulator.session.odometer import Odometer, refusal_frame, refused_batches
from ldpsim.simulator.session.policy import AgentPolicy, Ledger
from ldpsim.simulator.session.poolmemory import PoolMemory
from ldpsim.simulator.session.poolstate import PoolState
from ldpsim.simulator.session.rounds import report_frames
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.seeding import PoolKeys
from ldpsim.simulator.session.truthshare import TruthShare

#: the most agents a pool answers in one randomizer call (``querybatches.GROUP_AGENTS``: why)
GROUP_AGENTS = querybatches.GROUP_AGENTS


class PoolSession:
    """One agent pool: hosts a block of logical agents, their private data and randomizers.

    Parameters
    ----------
    index, n_pools : int
        This is pool ``index`` of ``n_pools``.
    auth : bytes
        The registration key (``signing.auth_key`` on the local backends,
        ``keyfiles.registration_key`` of the token on the hosts backend): answers the curator's
        registration challenge.
    limits : Limits
    keys : PoolKeys
        This pool's keys (``seeding.PoolKeys``): its agents' device keys only, the population
        secret and its policy key; from the orchestrator, or a key file on the hosts backend.
        Without them the pool refuses every set-up.
    policy : AgentPolicy, optional
        The agents' own limits (default: none beyond each run's own budget).
    state : PoolState, optional
        The pool's state file (``poolstate``; the hosts backend's): the runs answered and the
        ledger start from it, and it is rewritten before any report that spends leaves the
        pool. None: the pool's memory lasts as long as the object (the local backends, whose
        orchestrator keeps the lifetime odometer across a sweep).
    exit_on_done : bool
        Whether the curator's end-of-sweep DONE ends the pool (``exit``); otherwise it leaves
        the current run, if any, and waits for the next set-up.
    """

    def __init__(self, index: int, n_pools: int, auth: bytes, limits: Limits | None = None,
                 keys: PoolKeys | None = None, policy: AgentPolicy | None = None,
                 state: PoolState | None = None, exit_on_done: bool = True):
        self.index = index
        self.n_pools = n_pools
        if not isinstance(auth, bytes):
            raise TypeError("auth: the registration key (bytes), see simulator.session.signing")
        self.auth = auth
        self.keys = keys
        self.policy = policy or AgentPolicy()
        #: the runs answered and the lifetime ledger, and the state file (``poolmemory``)
        self.memory = PoolMemory(self.policy.spent, state)
        self.exit_on_done = exit_on_done
        self.limits = limits or Limits()
        self.nonce: bytes | None = None
        self.exit = False
        self.silent = False
        self.refused_reason: str | None = None  # why the last registration was refused
        self.can_die = True
        self.override: dict[str, Any] | None = None  # set by the audit harness, never by peers
        #: what was built before the set-up arrived (``prebuild``): the configuration it was built
        #: for, the block, the rows and the coin keys
        self.prebuilt: agentrows.Prebuilt | None = None
        #: this pool's share of its runs' ground truth, for the orchestrator alone (None: not
        #: asked for; ``truthshare``)
        self.share: TruthShare | None = None
        self._reset()

    def _reset(self) -> None:
        """Leave the current run (if any): back to waiting for a set-up."""
        self.memory.leave()
        if self.share is not None:
            self.share.drop()
        self.run: int | None = None
        self.run_id: int | None = None
        self.config_digest = b""  # sha256 of the run's signed configuration
        self.config: dict[str, Any] | None = None
        self.protocol = None
        self.bound = None
        self.coins: np.ndarray | None = None  # the block's coin keys in this run
        self.rows_built: np.ndarray | None = None  # rows ``prebuild`` made for this run
        #: a chunked run's rows and coin keys, a chunk at a time (``agentrows.Chunks``); None:
        #: the block's are held whole (``data``, ``coins``)
        self.chunks: agentrows.Chunks | None = None
        self.public: Any = None
        self.params: dict[str, Any] | None = None
        self.n = 0
        self.data = None
        self.dataset = None
        self.start = self.stop = 0
        self.broadcasts: dict[int, Any] = {}
        self.clock = AgentClock()  # the agents' randomizer time in this run
        self.refusals = 0
        self.silent = False
        self.odometer: Odometer | None = None
        self.faults: list = []
        self.cpu0 = time.process_time()

    @property
    def ledger(self) -> Ledger:
        """What each agent has spent on each data set, for this pool's lifetime."""
        return self.memory.ledger

    @property
    def answered_runs(self) -> set[int]:
        """The runs whose queries this pool's agents have answered (their coins are spent)."""
        return self.memory.answered_runs

    def hello(self) -> bytes:
        """The "ready" message, sent (and repeated) while the pool waits for a set-up."""
        return wire.encode(wire.HELLO, wire.ANY_RUN, wire.SETUP_ROUND, wire.NO_AGENT,
                           {"pool": self.index, "pools": self.n_pools})

    @property
    def idle(self) -> bool:
        return self.config is None

    def on_frames(self, frames: list[bytes]) -> list[bytes]:
        """Handle frames that arrived together, in order; return the frames to send back
        (``answer`` as a list)."""
        return list(self.answer(frames))

    def answer(self, frames: list[bytes]) -> Iterator[bytes]:
        """Handle frames that arrived together, in order; yield each frame to send back as soon
        as it is made (a driver sends it before the next batch is computed).

        The same as ``on_frame`` on each in turn, except that canonical query batches of one
        round for consecutive agents are answered by one call of the randomizer over all of
        them (``querybatches``: the reports are the same, each batch gets its own frame).
        """
        def takes(run: int) -> bool:
            return not (self.silent or run != self.run or self.config is None)

        for group, frame in querybatches.joined(frames, takes, GROUP_AGENTS):
            yield from self._respond_group(group)
            if frame is not None:
                yield from self._on_envelopes(frame)

    def _respond_group(self, parts: list[querybatches.Batch]) -> list[bytes]:
        """Answer the query batches ``parts`` (one round, consecutive agents) at once."""
        if not parts:
            return []
        rnd = parts[0][0]
        if (len(parts) == 1 or parts[0][1][0] < self.start or parts[-1][1][-1] >= self.stop
                or any(self._query_refusal(rnd, q) is not None for _, _, q in parts)):
            # one batch, agents this pool does not host (such a batch fails the run) or a
            # batch of other questions than the round's (refused): batch by batch
            return [f for _, ids, queries in parts for f in self._respond(rnd, ids, queries)]
        ids = np.concatenate([p[1] for p in parts])
        queries = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
        return self._respond(rnd, ids, queries, batches=[int(p[1][0]) for p in parts[1:]])

    def on_frame(self, frame: bytes) -> list[bytes]:
        """Handle one frame from the curator; return the frames to send back."""
        return self.on_frames([frame])

    def _on_envelopes(self, frame: bytes) -> list[bytes]:
        """A frame that is not a canonical query batch, decoded envelope by envelope: set-ups,
        broadcasts, refusals, the end of a run, or queries in any other layout."""
        out: list[bytes] = []
        query_agents: list[int] = []
        query_payloads: list[Any] = []
        qround = None
        for obj in wire.unpack_all(frame, self.limits.max_frame_bytes):
            if (type(obj) is list and len(obj) == 6 and obj[1] == wire.QUERY
                    and obj[0] == wire.VERSION and type(obj[4]) is int):
                if self.silent or obj[2] != self.run:
                    continue
                query_agents.append(obj[4])
                query_payloads.append(obj[5])
                qround = obj[3]
                continue
            env = wire.check_envelope(obj, 0)
            if env.kind == wire.BCAST and env.round == wire.SETUP_ROUND:
                p = env.payload if isinstance(env.payload, dict) else {}
                nonce = p.get("nonce")
                if self.config is not None and nonce == self.nonce:
                    continue  # this run's set-up again
                if self.config is not None:
                    self._reset()  # a new curator (the old one died) or a new run
                out.extend(self._setup(env.run, p.get("config"), p.get("sigs"), nonce))
            elif env.kind == wire.ERROR:
                # refused (slot taken, too late, ...): wait for the next run's set-up
                p = env.payload
                if (isinstance(p, dict) and p.get("code") == "refused" and env.run == self.run
                        and self.config is not None):
                    self.refused_reason = str(p.get("error", ""))[:MAX_REASON]
                    self._reset()
            elif env.kind == wire.BCAST:
                self.broadcasts[env.round] = env.payload
            elif env.kind == wire.DONE:
                if env.run == wire.ANY_RUN:  # the curator's sweep is over
                    if self.exit_on_done:
                        self.exit = True
                    elif self.config is not None:
                        self._reset()  # its run too; the pool's record stays
                elif env.run == self.run and self.config is not None:
                    if not self.silent:
                        out.append(wire.encode(wire.DONE, self.run, wire.SETUP_ROUND,
                                               wire.NO_AGENT, self._stats()))
                    if self.share is not None:  # sent after the reports (``take_truth``)
                        self.share.finish(not self.silent and not self.refusals)
                    self._reset()
        if query_agents:
            queries = None if query_payloads[0] is None else np.asarray(query_payloads)
            out.extend(self._respond(qround, np.asarray(query_agents, dtype=np.int64), queries))
        return out

    def _setup(self, run: int, blob: Any, sigs: Any, nonce: Any) -> list[bytes]:
        """Take a run's set-up (the signed configuration ``blob``, the signatures, the
        curator's challenge ``nonce``): register, or refuse it with a reason."""
        if type(nonce) is not bytes or not 8 <= len(nonce) <= 64:
            return []  # not a set-up anyone could answer
        cfg, why = self._check_setup(blob, sigs)
        if why is not None:
            return [self._refuse_setup(run, nonce, why)]
        run_cfg = RunConfig.of(cfg)
        self.run, self.run_id = run, int(cfg["run_id"])
        self.config_digest = hashlib.sha256(blob).digest()
        self.config = cfg
        self.nonce = nonce
        self.protocol = get_protocol(cfg["protocol"])
        built, self.prebuilt = agentrows.take_prebuilt(self.prebuilt, cfg), None
        data_keys = self.keys.data_keys(int(cfg["data_id"]))
        dataset = build_data(cfg["data"], data_keys)
        self.public = dataset.public
        self.bound = self.protocol.bind(cfg["params"], self.public)
        self.params = self.bound.params
        budget = self.bound.agent_budget()
        why = self.policy.refusal(cfg["protocol"], budget)
        if why is None:
            self.n = dataset.n
            self.start, self.stop = block_of(self.index, self.n_pools, self.n)
            why = poolsetup.uncovered(self.keys, self.start, self.stop, self.n)
        if why is not None:
            self._reset()
            return [self._refuse_setup(run, nonce, why)]
        if run_cfg.chunked(self.n):  # rows and keys a chunk at a time, as queries reach them
            self.dataset = dataset
            share = None
            if self.share is not None:  # a tap that hears chunks, or the orchestrator's truth
                self.share.open(dataset, self.start, self.stop, cfg)
                if self.share.hears_chunks:
                    share = self.share
                else:
                    self.share.skip(cfg)
            self.chunks = agentrows.Chunks(
                self.keys, cfg, dataset, data_keys, self.start, self.stop,
                agentrows.chunk_size(run_cfg), self.override, built,
                run_cfg.chunk_agents if agentrows.asks_again(self.bound) else 0, share)
        else:  # rows generated on first use (``private_rows``), unless ``prebuild`` made them
            self.dataset, self.rows_built, self.coins = agentrows.block_rows(
                self.keys, built, cfg, dataset, data_keys, self.start, self.stop, self.share)
        # the privacy odometer: what each agent spends in this run, and on this data set over
        # the pool's lifetime (the ledger outlives the run)
        self.odometer = None if budget is None else Odometer(
            self.bound, budget, self.start, self.stop,
            self.ledger.block(int(cfg["data_id"]), self.start, self.stop),
            self.policy.lifetime_epsilon)
        self.clock = AgentClock(run_cfg.exact)
        self.faults = run_cfg.faults_of(self.index)
        if run_cfg.data_first:  # before registering: no round's wall time holds it
            self.prepare()
        out = [poolsetup.registration(self.auth, run, nonce, self.index, self.n_pools, self.n,
                                      self.start, self.stop, self.public)]
        if run_cfg.curator_colludes:
            frame = poolsetup.disclosures(run, self.n, dict(run_cfg.collusion),
                                          int(cfg["collusion_key"]), self.start, self.stop,
                                          self._disclosed)
            if frame is not None:
                out.append(frame)
        return out

    def _check_setup(self, blob: Any, sigs: Any) -> tuple[dict[str, Any] | None, str | None]:
        """The configuration of a set-up, or why this pool's agents refuse it
        (``poolsetup.check_setup``; ``_setup`` then checks the run against their policy)."""
        return poolsetup.check_setup(self.keys, self.index, self.n_pools, self.answered_runs,
                                     blob, sigs)

    def _refuse_setup(self, run: int, nonce: bytes, why: str) -> bytes:
        """The authenticated ERROR refusing a run's set-up (``poolsetup.setup_refusal``)."""
        self.refused_reason = why[:MAX_REASON]
        return poolsetup.setup_refusal(self.auth, run, nonce, self.index, self.n_pools, why)

    def prebuild(self, config: dict[str, Any]) -> None:
        """Build this pool's agents' rows and coin keys for the run ``config`` (its public
        configuration, ``seeding.public_config``) before any set-up (``agentrows.prebuild``).

        The processes backend's orchestrator knows the run's configuration when it starts the
        pool, and always asks: its agents hold their data before the curator says anything, as
        real agents do. They are used if the signed set-up is the same run and gives this pool
        the same block; otherwise dropped and built as usual (the same, keyed by agent).
        """
        self.prebuilt = agentrows.prebuild(self.keys, self.index, self.n_pools, config,
                                           self.share)

    def private_rows(self) -> np.ndarray:
        """This pool's agents' private rows, generated (or read) on first use (a run held
        whole; a chunked run's are ``chunks``').

        The registration goes out before they exist, so the curator plans and sends the
        first queries while the pool generates its data: on few cores the two overlap instead
        of queueing. A data set is the same whenever it is generated (keyed by agent).
        """
        if self.data is None:
            data, self.rows_built = self.rows_built, None
            if data is None:
                data = self.dataset.rows(self.start, self.stop)  # only this pool's agents
            # the privacy audit may set one agent's row (neighbouring sets)
            self.data = agentrows.override_rows(data, self.start, self.stop, self.override)
            if self.share is not None:
                self.share.watch(self.data, self.override)
        return self.data

    def take_truth(self) -> list[tuple[int, Any]]:
        """The parts of the ground truth this pool made since the last call, to go to the
        orchestrator alone (``truthshare``; a driver sends them after the run's reports)."""
        return [] if self.share is None else self.share.take()

    def _rows_keys(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The agents' private rows and coin keys in this run (views for consecutive ids, in
        one chunk of a chunked run); one agent's key is replaced when the privacy audit gives
        it another run's coins (``override["key"]``: the fixed-coalition trials)."""
        if self.chunks is not None:
            rows, coins = self.chunks.rows_keys(ids)
        else:
            at = span(ids - self.start)
            rows, coins = self.private_rows()[at], self.coins[at]
        return rows, agentrows.override_keys(coins, ids, self.override)

    def _disclosed(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows and coin keys (the run's own, whatever the audit's override) of the
        colluders ``ids`` of the block, for the curator (``poolsetup.disclosures``)."""
        if self.chunks is not None:
            return self.chunks.rows_keys(ids)
        return self.private_rows()[ids - self.start], self.coins[ids - self.start]

    def prepare(self) -> None:
        """Generate this pool's data now if a run is set up (the drivers call it after
        sending the registration, so the data are ready by the time the queries arrive): the
        first chunk's, in a chunked run."""
        if self.config is not None and not self.silent:
            if self.chunks is not None:
                self.chunks.chunk(0)
            else:
                self.private_rows()

    def _respond(self, rnd: int, ids: np.ndarray, queries: np.ndarray | None,
                 batches: list[int] | None = None) -> list[bytes]:
        """The report frames answering the queries of ``ids`` in round ``rnd``: one per query
        batch (``batches``: the first agent of each batch after the first, when ``ids`` joins
        several), split further when a frame would exceed half the frame limit."""
        if faults.inject(self.faults, rnd, self.index, self.can_die):
            self.silent = True
        if self.silent:
            return []
        if ((ids < self.start) | (ids >= self.stop)).any():
            raise RunFailed(f"pool {self.index} was queried for agents it does not host")
        # not the round's own questions: refused before any coin is drawn, nothing spent
        # (joined batches were checked one by one: ``_respond_group``)
        why = None if batches else self._query_refusal(rnd, queries)
        if why is not None:
            return [self._refusal(rnd, ids, why)]
        changed = self.memory.answer(self.run_id, self.config_digest)  # its coins are spent
        firsts = batches or []
        refusals: dict[int, bytes] = {}  # by query batch: its agents' refusal
        if self.odometer is not None:
            ok = self.odometer.admit(rnd, ids)
            if self.memory.state is not None:
                changed = self.memory.reserve(self.odometer, self.bound, rnd,
                                              ids if ok is None else ids[ok], self.start,
                                              self.stop) or changed
            if ok is not None and not ok.all():
                for b, bad in refused_batches(ids, ok, firsts):
                    refusals[b] = self._refusal(rnd, bad)
                ids = ids[ok]
                if queries is not None:
                    queries = queries[ok]
        if changed:  # the run and the spending are on disk before any report leaves
            self._sync()
        if not len(ids):
            return [refusals[b] for b in sorted(refusals)]
        rows, keys = self._rows_keys(ids)  # views for consecutive ids
        bcast = self.broadcasts.get(rnd)
        block = self.bound.block(rnd, rows, ids, keys, queries, bcast)
        reports = self.clock.respond(self.protocol.respond, block, len(ids), rnd)
        return report_frames(self.run, rnd, ids, reports, firsts, refusals,
                             self.limits.max_frame_bytes)

    def _query_refusal(self, rnd: int, queries: np.ndarray | None) -> str | None:
        """Why the agents refuse ``queries`` in round ``rnd`` under the round's broadcast
        (``Protocol.query_refusal``: not the protocol's questions), or None."""
        return self.protocol.query_refusal(self.bound, rnd, queries, self.broadcasts.get(rnd))

    def _sync(self) -> None:
        """Write the answered runs and the ledger to the pool's state file, if it has one,
        with the current run's reserved spend on top (``PoolMemory.sync``)."""
        data_id = None if self.config is None else int(self.config["data_id"])
        self.memory.sync(data_id, self.start, self.stop)

    def settle(self) -> None:
        """Once a run with reserved spend has ended (and its last frames are sent: a driver
        calls this when the pool is idle, and before it exits), write the exact ledger: the
        reservations of the agents that did not answer are dropped. A pool killed before
        keeps them, charged: never less than was spent."""
        self.memory.settle(self.idle)

    def _refusal(self, rnd: int, bad: np.ndarray, why: str | None = None) -> bytes:
        """The ERROR telling the curator that agents ``bad`` refuse round ``rnd``: their
        odometer's refusal, or ``why`` (the round's queries are not the protocol's:
        ``Protocol.query_refusal``)."""
        self.refusals += len(bad)
        return refusal_frame(self.run, rnd, bad, why,
                             None if why is not None else self.odometer.budget,
                             self.policy.lifetime_epsilon)

    def _stats(self) -> dict[str, Any]:
        """This pool's DONE statistics (``accounting.pool_stats``)."""
        return pool_stats(self.index, self.clock, self.cpu0, self.refusals,
                          self.stop - self.start, self.odometer)

    def error(self, exc: BaseException) -> bytes:
        """An ERROR envelope describing an unhandled exception in this pool."""
        return wire.encode(wire.ERROR, self.run if self.run is not None else wire.ANY_RUN,
                           wire.SETUP_ROUND, wire.NO_AGENT,
                           {"error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()})

