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
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from collections.abc import Iterator
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols import build_data, get_protocol
from ldpsim.simulator.codec import wire, wire_numpy_read
from ldpsim.simulator.session import agentrows
from ldpsim.simulator.session.accounting import AgentClock
from ldpsim.simulator.session.collusion import colluder_mask
from ldpsim.simulator.session.common import (
    MAX_REASON,
    Limits,
    RunFailed,
    block_of,
    peak_rss_mb,
    span,
)
from ldpsim.simulator.session.odometer import Odometer, refusal_frame
from ldpsim.simulator.session.policy import AgentPolicy, Ledger
from ldpsim.simulator.session.poolstate import PoolState, Reservations
from ldpsim.simulator.session.rounds import AUTO_MAX, continues, report_frames
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.seeding import PoolKeys
from ldpsim.simulator.session.signing import registration_mac, verify

#: The most agents a pool answers in one randomizer call when it joins queued query batches
#: (``PoolSession.answer``): the largest batch "auto" makes. Joining more does not pay:
#: every array of the call grows with it, and memory a process has not used before costs a
#: page fault per 4 KiB on first touch (about 1.3 us each on the 2-core machine of
#: docs/performance.md). Measured at 10^6 agents, 2 pools (batches of 31,250; without the cap up
#: to 8 were joined), medians of seven alternating processes runs: a pool's first-touch page faults
#: in an LDP-KwikSort round 4,600 -> 1,900; rounds LDP-KwikSort RR 55.5 -> 48.5 ms, Lap 56.5
#: -> 49.8, rank_grr 46.1 -> 43.0; DPWeVote unchanged within the noise (136 -> 138 ms).
GROUP_AGENTS = AUTO_MAX


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
        #: what each agent has spent on each data set, for this pool's lifetime
        self.ledger = Ledger(self.policy.spent)
        #: the runs whose queries this pool's agents have answered (their coins are spent)
        self.answered_runs: set[int] = set()
        #: answered run id -> digest of the signed configuration answered (kept in ``state``)
        self.answered_configs: dict[int, bytes] = {}
        self.state = state
        if state is not None:
            self.answered_configs = dict(state.answered)
            self.answered_runs = set(state.answered)
            state.restore(self.ledger)
        self.exit_on_done = exit_on_done
        self.unsettled = False  # the state file holds reservations of a run that has ended
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
        self._reset()

    def _reset(self) -> None:
        """Leave the current run (if any): back to waiting for a set-up."""
        if getattr(self, "reservations", None) is not None and self.reservations.rounds:
            self.unsettled = True  # the state file holds the left run's reservations
        #: the current run's spend the state file holds in advance (``_reserve``)
        self.reservations = Reservations()
        self.run: int | None = None
        self.run_id: int | None = None
        self.config_digest = b""  # sha256 of the run's signed configuration
        self.config: dict[str, Any] | None = None
        self.protocol = None
        self.bound = None
        self.coins: np.ndarray | None = None  # the block's coin keys in this run
        self.rows_built: np.ndarray | None = None  # rows ``prebuild`` made for this run
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
        round for consecutive agents (the curator's send window queues several while the pool
        computes) are answered by one call of the randomizer over all of them, up to
        ``GROUP_AGENTS`` agents: the protocol's per-batch fixed costs are paid once. The reports
        are the same (every agent's coins are its own, whatever the batch), and each query
        batch still gets its own report frame.
        """
        group: list[tuple[int, np.ndarray, np.ndarray | None]] = []
        joined = 0  # agents in ``group``
        for frame in frames:
            fast = wire_numpy_read.parse_consecutive(frame, wire.QUERY)
            if fast is None:
                yield from self._respond_group(group)
                joined = 0
                yield from self._on_envelopes(frame)
                continue
            run, rnd, ids, queries = fast
            if self.silent or run != self.run or self.config is None:
                continue
            if group and (joined + len(ids) > GROUP_AGENTS
                          or not continues(group[-1], rnd, ids, queries)):
                yield from self._respond_group(group)
                joined = 0
            group.append((rnd, ids, queries))
            joined += len(ids)
        yield from self._respond_group(group)

    def _respond_group(self, group: list[tuple[int, np.ndarray, np.ndarray | None]]
                       ) -> list[bytes]:
        """Answer the query batches of ``group`` (one round, consecutive agents) at once, and
        empty it."""
        if not group:
            return []
        rnd, parts = group[0][0], list(group)
        group.clear()
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
        keys = self.keys
        self.run, self.run_id = run, int(cfg["run_id"])
        self.config_digest = hashlib.sha256(blob).digest()
        self.config = cfg
        self.nonce = nonce
        self.protocol = get_protocol(cfg["protocol"])
        built, self.prebuilt = agentrows.take_prebuilt(self.prebuilt, cfg), None
        data_keys = keys.data_keys(int(cfg["data_id"]))
        dataset = build_data(cfg["data"], data_keys)
        self.public = dataset.public
        self.bound = self.protocol.bind(cfg["params"], self.public)
        self.params = self.bound.params
        budget = self.bound.agent_budget()
        why = self.policy.refusal(cfg["protocol"], budget)
        if why is not None:
            self._reset()
            return [self._refuse_setup(run, nonce, why)]
        self.n = dataset.n
        self.start, self.stop = block_of(self.index, self.n_pools, self.n)
        if not keys.agents.covers(self.start, self.stop):
            why = (f"this pool's keys cover agents {keys.agents.ranges()[:4]}, not its block "
                   f"[{self.start}, {self.stop}) of n = {self.n} (write them with `ldpsim keys "
                   f"--agents {self.n}`)")
            self._reset()
            return [self._refuse_setup(run, nonce, why)]
        if built is not None and built[1:3] == (self.start, self.stop):
            self.rows_built, self.coins = built[3], built[4]
        else:
            k = keys.agents.for_range(self.start, self.stop, coin_tag=self.run_id,
                                      data_tag=int(cfg["data_id"]))
            self.coins = k["coins"]
            dataset = dataset.with_keys(data_keys.with_cache(self.start, k["data"]))
        self.dataset = dataset  # rows are generated on first use (``private_rows``)
        # the privacy odometer: what each agent spends in this run, and on this data set over
        # the pool's lifetime (the ledger outlives the run)
        self.odometer = None if budget is None else Odometer(
            self.bound, budget, self.start, self.stop,
            self.ledger.block(int(cfg["data_id"]), self.start, self.stop),
            self.policy.lifetime_epsilon)
        self.clock = AgentClock(run_cfg.exact)
        self.faults = run_cfg.faults_of(self.index)
        if run_cfg.data_first:  # before registering: no round's wall time holds it
            self.private_rows()
        out = [wire.encode(wire.HELLO, run, wire.SETUP_ROUND, wire.NO_AGENT, {
            "pool": self.index, "pools": self.n_pools, "n": self.n,
            "agents": [self.start, self.stop], "public": self.public,
            "mac": registration_mac(self.auth, nonce, run, self.index, self.n_pools)})]
        if run_cfg.curator_colludes:
            mask = colluder_mask(self.n, dict(run_cfg.collusion), int(cfg["collusion_key"]))
            mask = mask[self.start:self.stop]
            ids = np.flatnonzero(mask) + self.start
            if len(ids):
                coins = self.coins[ids - self.start]
                bufs, _ = wire.encode_many(
                    wire.DISCLOSE, run, wire.SETUP_ROUND, ids.tolist(),
                    [{"data": self.private_rows()[a - self.start], "coins": int(c)}
                     for a, c in zip(ids.tolist(), coins.tolist(), strict=True)])
                out.append(b"".join(bufs))
        return out

    def _check_setup(self, blob: Any, sigs: Any) -> tuple[dict[str, Any] | None, str | None]:
        """The configuration of a set-up, or why this pool's agents refuse it: not signed by
        the orchestrator for this pool, or a run whose coins are spent (``_setup`` then checks
        the run against the agents' policy)."""
        if self.keys is None:
            return None, (f"pool {self.index} has no keys (the orchestrator hands them over, or "
                          "`ldpsim agents --keys` reads them)")
        if self.keys.pool != self.index or self.keys.pools != self.n_pools:
            return None, (f"these are the keys of pool {self.keys.pool} of {self.keys.pools}, "
                          f"not of pool {self.index} of {self.n_pools}")
        sig = sigs[self.index] if isinstance(sigs, list) and len(sigs) > self.index else None
        if type(blob) is not bytes or not verify(self.keys.policy, blob, sig):
            return None, ("the configuration is not signed by the orchestrator for this pool "
                          "(altered or forged by the curator, or another deployment's keys)")
        try:  # signed: whatever is wrong here is the orchestrator's own bug
            cfg = msgpack.unpackb(blob, raw=False, strict_map_key=False)
            run_id, _, _ = (int(cfg[k]) for k in ("run_id", "data_id", "collusion_key"))
            pools = int(cfg["pools"])
        except Exception as e:
            return None, f"unreadable configuration: {type(e).__name__}: {e}"
        if run_id in self.answered_runs:
            return None, (f"run {run_id} was answered already: its agents' coins are spent "
                          "(a repeated run would show them under other questions)")
        if pools != self.n_pools:
            return None, f"the configuration is for {pools} pools, not {self.n_pools}"
        return cfg, None

    def _refuse_setup(self, run: int, nonce: bytes, why: str) -> bytes:
        """The ERROR refusing a run's set-up, authenticated like a registration (so the
        curator can tell a pool's refusal from an outsider's noise)."""
        self.refused_reason = why[:MAX_REASON]
        return wire.encode(wire.ERROR, run, wire.SETUP_ROUND, wire.NO_AGENT, {
            "code": "refused", "error": why[:MAX_REASON], "pool": self.index,
            "pools": self.n_pools,
            "mac": registration_mac(self.auth, nonce, run, self.index, self.n_pools)})

    def prebuild(self, config: dict[str, Any]) -> None:
        """Build this pool's agents' rows and coin keys for the run ``config`` (its public
        configuration, ``seeding.public_config``) before any set-up (``agentrows.prebuild``).

        The processes backend's orchestrator knows the run's configuration when it starts the
        pool, and always asks: the pool builds its agents' data before it says it is ready,
        while the curator process starts, so that its agents hold their data before the
        curator says anything, as real agents do, and no round's wall time holds the data
        generation. They are used if the signed set-up that arrives is the same run and gives
        this pool the same block; otherwise they are dropped and built as usual. They are the
        same either way (keyed by agent).
        """
        self.prebuilt = agentrows.prebuild(self.keys, self.index, self.n_pools, config)

    def private_rows(self) -> np.ndarray:
        """This pool's agents' private rows, generated (or read) on first use.

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
        return self.data

    def _agent_keys(self, ids: np.ndarray) -> np.ndarray:
        """The agents' coin keys in this run (a view for consecutive ids); one agent's is
        replaced when the privacy audit gives it another run's coins (``override["key"]``: the
        fixed-coalition trials)."""
        return agentrows.override_keys(self.coins[span(ids - self.start)], ids, self.override)

    def prepare(self) -> None:
        """Generate this pool's data now if a run is set up (the drivers call it after
        sending the registration, so the data are ready by the time the queries arrive)."""
        if self.config is not None and not self.silent:
            self.private_rows()

    def _fault(self, rnd: int) -> None:
        for f in self.faults:
            if int(f.get("round", 0)) == rnd:
                action = f.get("action")
                if action == "kill" and self.can_die:
                    os.kill(os.getpid(), 9)
                elif action == "kill":  # in-process backend: a dead pool is a silent one
                    self.silent = True
                elif action == "silent":
                    self.silent = True
                elif action == "raise":
                    raise RuntimeError(f"injected fault in pool {self.index}, round {rnd}")

    def _respond(self, rnd: int, ids: np.ndarray, queries: np.ndarray | None,
                 batches: list[int] | None = None) -> list[bytes]:
        """The report frames answering the queries of ``ids`` in round ``rnd``: one per query
        batch (``batches``: the first agent of each batch after the first, when ``ids`` joins
        several), split further when a frame would exceed half the frame limit."""
        self._fault(rnd)
        if self.silent:
            return []
        if ((ids < self.start) | (ids >= self.stop)).any():
            raise RunFailed(f"pool {self.index} was queried for agents it does not host")
        # not the round's own questions: refused before any coin is drawn, nothing spent
        # (joined batches were checked one by one: ``_respond_group``)
        why = None if batches else self._query_refusal(rnd, queries)
        if why is not None:
            return [self._refusal(rnd, ids, why)]
        changed = self.run_id not in self.answered_configs
        self.answered_runs.add(self.run_id)  # from now on, this run's coins are spent
        self.answered_configs.setdefault(self.run_id, self.config_digest)
        firsts = batches or []
        refusals: dict[int, bytes] = {}  # by query batch: its agents' refusal
        if self.odometer is not None:
            ok = self.odometer.admit(rnd, ids)
            if self.state is not None:
                changed = self._reserve(rnd, ids if ok is None else ids[ok]) or changed
            if ok is not None and not ok.all():
                cuts = [0, *np.searchsorted(ids, firsts).tolist(), len(ids)]
                for b, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
                    bad = ids[lo:hi][~ok[lo:hi]]
                    if len(bad):
                        refusals[b] = self._refusal(rnd, bad)
                ids = ids[ok]
                if queries is not None:
                    queries = queries[ok]
        if changed:  # the run and the spending are on disk before any report leaves
            self._sync()
        if not len(ids):
            return [refusals[b] for b in sorted(refusals)]
        rows = self.private_rows()[span(ids - self.start)]  # a view for consecutive ids
        bcast = self.broadcasts.get(rnd)
        block = self.bound.block(rnd, rows, ids, self._agent_keys(ids), queries, bcast)
        reports = self.clock.respond(self.protocol.respond, block, len(ids))
        return report_frames(self.run, rnd, ids, reports, firsts, refusals,
                             self.limits.max_frame_bytes)

    def _query_refusal(self, rnd: int, queries: np.ndarray | None) -> str | None:
        """Why the agents refuse ``queries`` in round ``rnd`` under the round's broadcast
        (``Protocol.query_refusal``: not the protocol's questions), or None."""
        return self.protocol.query_refusal(self.bound, rnd, queries, self.broadcasts.get(rnd))

    def _reserve(self, rnd: int, charged: np.ndarray) -> bool:
        """Keep the state file ahead of the agents' spending in round ``rnd``, where the
        odometer has just charged the agents ``charged`` (``poolstate.Reservations``); True:
        the file is to be written (``settle`` writes the exact ledger once the run ends)."""
        odo = self.odometer
        eps = odo.round_eps.get(rnd)
        if eps is None:
            eps = float(self.bound.round_epsilon(rnd))
        if rnd not in odo.answered or not 0 <= eps < np.inf:
            return False  # a round the odometer refuses whole (past its rounds, or no ε)
        return self.reservations.reserve(rnd, eps, charged, self.start, self.stop)

    def _sync(self) -> None:
        """Write the answered runs and the ledger to the pool's state file, if it has one,
        with the current run's reserved spend (``_reserve``) on top of the ledger."""
        if self.state is None:
            return
        ledger = self.ledger
        if self.config is not None:
            ledger = self.reservations.on(ledger, int(self.config["data_id"]), self.start,
                                          self.stop)
        self.state.save(self.answered_configs, ledger)
        self.unsettled = False

    def settle(self) -> None:
        """Once a run with reserved spend has ended (and its last frames are sent: a driver
        calls this when the pool is idle, and before it exits), write the exact ledger: the
        reservations of the agents that did not answer are dropped. A pool killed before
        keeps them, charged: never less than was spent."""
        if self.unsettled and self.idle and self.state is not None:
            self._sync()

    def _refusal(self, rnd: int, bad: np.ndarray, why: str | None = None) -> bytes:
        """The ERROR telling the curator that agents ``bad`` refuse round ``rnd``: their
        odometer's refusal, or ``why`` (the round's queries are not the protocol's:
        ``Protocol.query_refusal``)."""
        self.refusals += len(bad)
        return refusal_frame(self.run, rnd, bad, why,
                             None if why is not None else self.odometer.budget,
                             self.policy.lifetime_epsilon)

    def _stats(self) -> dict[str, Any]:
        out = {"pool": self.index, **self.clock.stats(),
               "pool_cpu_s": time.process_time() - self.cpu0, "peak_rss_mb": peak_rss_mb(),
               "refused": self.refusals, "agents": self.stop - self.start}
        odo = self.odometer
        if odo is not None and len(odo.spent):
            out["epsilon_spent_max"] = float(odo.spent.max())
            out["epsilon_spent_sum"] = float(odo.spent.sum())
            out["epsilon_lifetime_max"] = float(odo.lifetime.max())
        return out

    def error(self, exc: BaseException) -> bytes:
        """An ERROR envelope describing an unhandled exception in this pool."""
        return wire.encode(wire.ERROR, self.run if self.run is not None else wire.ANY_RUN,
                           wire.SETUP_ROUND, wire.NO_AGENT,
                           {"error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()})

