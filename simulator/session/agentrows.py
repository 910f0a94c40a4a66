"""A pool's agents' private rows and coin keys, as the pool session uses them.

Built before any set-up when the orchestrator knows the run (``prebuild``: the processes
backend's pools hold their data before the curator says anything, as real agents do) and taken
if the signed set-up is that run (``take_prebuilt``), else built at the set-up (``block_rows``);
and the privacy audit's overrides: one
agent's row (neighbouring data sets, ``override_rows``) or its coin key (another run's coins,
``override_keys``), which a peer can never set.

A run with more agents than ``[runtime] chunk`` (``RunConfig.chunked``) never holds its block's
rows and keys at once: ``Chunks`` makes them a chunk of agents at a time, as the queries reach
them, and keeps the last two. Every agent's row and keys derive from its own keys
(``Dataset.rows`` is split-independent, ``AgentKeys.for_range`` keys each agent alone), so a
chunk's are the block's, bit for bit. A pool's chunk is at most ``GROUP_AGENTS`` agents
(``chunk_size``), the most it answers in one randomizer call.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from ldpsim.protocols import build_data
from ldpsim.simulator.session.common import block_of, span
from ldpsim.simulator.session.querybatches import GROUP_AGENTS
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.truthshare import TruthShare

#: what ``prebuild`` makes: the configuration it was built for, the block [start, stop), its
#: rows and coin keys
Prebuilt = tuple[dict[str, Any], int, int, np.ndarray, np.ndarray]


def chunk_size(run: RunConfig) -> int:
    """The agents of a chunk of a pool of the chunked run ``run`` (``Chunks``): its ``chunk``,
    at most ``GROUP_AGENTS`` (the most a pool answers in one randomizer call).

    Chunks of a group's size hold a pool's memory to what one call needs, at no cost in time:
    measured at 10^7 LDP-KwikSort:RR agents on 2 pools (processes backend, medians of five
    interleaved runs), a pool's peak was 56 MB with chunks of 32,768 agents, 133 MB with
    chunks of 2^20 and 251 MB holding its block whole, for the same CPU time (1.95, 2.01 and
    1.99 s). A protocol of several rounds asks its agents again round after round, so no
    cache short of the block would keep them between rounds, whatever its size.
    """
    return min(run.chunk_agents, GROUP_AGENTS)


def prebuild(keys: Any, index: int, n_pools: int, config: dict[str, Any],
             share: TruthShare | None = None) -> Prebuilt | None:
    """The rows and coin keys of pool ``index`` of ``n_pools`` (its ``keys``,
    ``seeding.PoolKeys``; None: nothing is built) for the run ``config`` (its public
    configuration), built before any set-up: its block's, or the first chunk's of a chunked
    run (``RunConfig.chunked``). They are the same as those the set-up builds (keyed by
    agent). ``share``: the pool's share of the truth, which hears a whole block's rows made
    (a chunked run's truth is the orchestrator's to compute)."""
    if keys is None:
        return None
    data_id = int(config["data_id"])
    data_keys = keys.data_keys(data_id)
    dataset = build_data(config["data"], data_keys)
    start, stop = block_of(index, n_pools, dataset.n)
    run = RunConfig.of(config)
    if run.chunked(dataset.n):
        stop = min(stop, start + chunk_size(run))
    k = keys.agents.for_range(start, stop, coin_tag=int(config["run_id"]), data_tag=data_id)
    dataset = dataset.with_keys(data_keys.with_cache(start, k["data"]))
    if share is not None and not run.chunked(dataset.n):
        share.open(dataset, start, stop, config)
    rows = np.asarray(dataset.rows(start, stop))
    if rows.flags.writeable:
        rows.setflags(write=False)
    return ({"data": config["data"], "run_id": int(config["run_id"]), "data_id": data_id},
            start, stop, rows, k["coins"])


def asks_again(bound: Any) -> bool:
    """Whether a run of ``bound`` (``protocols.base.Bound``) may ask its agents in more than
    one round: its mechanisms compose over several rounds (sequential), or it states none (a
    baseline without privacy, whose rounds are its own). A chunked pool then keeps its first
    chunks for the run (``Chunks``'s ``pin``)."""
    rounds = bound.rounds
    return rounds.model == "none" or (rounds.composition == "sequential" and len(rounds) > 1)


def take_prebuilt(built: Prebuilt | None, cfg: dict[str, Any]) -> Prebuilt | None:
    """``built`` if it is the run ``cfg``'s (the same data, run and data set), else None."""
    if built is None:
        return None
    want = {"data": cfg["data"], "run_id": int(cfg["run_id"]), "data_id": int(cfg["data_id"])}
    return built if built[0] == want else None


def block_rows(keys: Any, built: Prebuilt | None, cfg: dict[str, Any], dataset: Any,
               data_keys: Any, start: int, stop: int, share: TruthShare | None = None
               ) -> tuple[Any, np.ndarray | None, np.ndarray]:
    """The block ``[start, stop)``'s data set, rows and coin keys in the run ``cfg``, with the
    pool's ``keys`` (``seeding.PoolKeys``): what ``built`` holds if it is that block (the
    rows then taken as they are; ``share`` heard them made), else the coin keys and the data
    set keyed for the block (``data_keys``; the rows generated on first use, None here, and
    heard by ``share``)."""
    if built is not None and built[1:3] == (start, stop):
        return dataset, built[3], built[4]
    k = keys.agents.for_range(start, stop, coin_tag=int(cfg["run_id"]),
                              data_tag=int(cfg["data_id"]))
    dataset = dataset.with_keys(data_keys.with_cache(start, k["data"]))
    if share is not None:
        share.open(dataset, start, stop, cfg)
    return dataset, None, k["coins"]


def override_rows(data: Any, start: int, stop: int, over: dict[str, Any] | None) -> np.ndarray:
    """The block ``[start, stop)``'s rows ``data`` with the audit's override (``over``: one
    agent's ``row``; None: none), read-only: randomizers get views of them."""
    if over is not None and start <= int(over["agent"]) < stop:
        data = np.array(data, copy=True)
        data[int(over["agent"]) - start] = np.asarray(over["row"]).astype(data.dtype)
    data = np.asarray(data)
    if data.flags.writeable:
        data.setflags(write=False)
    return data


def override_keys(keys: np.ndarray, ids: np.ndarray, over: dict[str, Any] | None
                  ) -> np.ndarray:
    """The coin keys ``keys`` of the agents ``ids``, with one agent's replaced when the audit
    gives it another run's coins (``over["key"]``: the fixed-coalition trials)."""
    if over is None or over.get("key") is None:
        return keys
    hit = ids == int(over["agent"])
    if not hit.any():
        return keys
    keys = np.array(keys, copy=True)
    keys[hit] = np.uint64(int(over["key"]))
    return keys


class Chunks:
    """The rows and coin keys of a chunked run's block ``[start, stop)``, made a chunk of
    ``size`` agents at a time (chunk ``j``: agents ``[start + j size, start + (j + 1) size)``)
    as they are asked for, the last ``KEEP`` kept, and the first made up to ``pin`` agents
    for the whole run (a protocol that asks its agents again, round after round, then makes
    only the others again).

    Parameters
    ----------
    keys : seeding.PoolKeys
        The pool's keys.
    cfg : dict
        The run's configuration (its run and data set ids tag the keys).
    dataset
        The run's data set (``build_data`` with ``data_keys``).
    data_keys : DataKeys
        The data set's keys this pool holds.
    start, stop, size : int
        The block and the chunk size.
    override : dict, optional
        The privacy audit's override of one agent's row (``override_rows``).
    built : Prebuilt, optional
        What ``prebuild`` made: the first chunk, if it is that.
    pin : int
        Agents whose chunks are kept for the run (``asks_again``: the run's ``chunk``, else 0).
    share : TruthShare, optional
        The pool's share of the truth, when its tap hears chunks (``truthshare``): told each
        chunk's data set before its rows are made (``adopt``), each chunk's rows as they are
        made (``watch``; a chunk made again is heard again), and the rows of agents put
        together from two chunks for a query batch across a chunk's end (``look``).
    """

    #: chunks kept: the last two, so that a query batch across a chunk's end (and the next
    #: batches) find both
    KEEP = 2

    def __init__(self, keys: Any, cfg: dict[str, Any], dataset: Any, data_keys: Any,
                 start: int, stop: int, size: int, override: dict[str, Any] | None = None,
                 built: Prebuilt | None = None, pin: int = 0,
                 share: TruthShare | None = None) -> None:
        self.keys, self.dataset, self.data_keys = keys, dataset, data_keys
        self.run_id, self.data_id = int(cfg["run_id"]), int(cfg["data_id"])
        self.start, self.stop, self.size = start, stop, max(1, int(size))
        self.override = override
        self.kept: OrderedDict[int, tuple[int, np.ndarray, np.ndarray]] = OrderedDict()
        #: chunks kept for the run, at most ``pin`` agents' (whole chunks): the first made
        self.pinned: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
        self.pin_chunks = max(0, int(pin)) // self.size
        self.made = 0  # chunks made (a chunk asked again after it was dropped counts again)
        self.share = share
        if built is not None and built[1:3] == self._bounds(0):
            self.kept[0] = (start, override_rows(built[3], start, built[2], override), built[4])
            if share is not None:
                share.watch(self.kept[0][1], override, start)

    def _bounds(self, j: int) -> tuple[int, int]:
        lo = self.start + j * self.size
        return lo, min(self.stop, lo + self.size)

    def chunk(self, j: int) -> tuple[int, np.ndarray, np.ndarray]:
        """Chunk ``j``'s first agent, rows (read-only) and coin keys."""
        got = self.pinned.get(j)
        if got is not None:
            return got
        got = self.kept.get(j)
        if got is not None:
            self.kept.move_to_end(j)
            return got
        while len(self.kept) >= self.KEEP:  # dropped first: at most KEEP chunks at once
            self.kept.popitem(last=False)
        lo, hi = self._bounds(j)
        k = self.keys.agents.for_range(lo, hi, coin_tag=self.run_id, data_tag=self.data_id)
        data = self.dataset.with_keys(self.data_keys.with_cache(lo, k["data"]))
        if self.share is not None:
            self.share.adopt(data)
        got = (lo, override_rows(data.rows(lo, hi), lo, hi, self.override), k["coins"])
        if self.share is not None:
            self.share.watch(got[1], self.override, lo)
        # the next chunk's data set is made from this one: what it drew of the population
        # once (a data set may keep its population's draws, e.g. every worker's quality) is
        # not drawn again (its data keys are replaced)
        self.dataset = data
        del k
        self.made += 1
        if len(self.pinned) < self.pin_chunks:
            self.pinned[j] = got
        else:
            self.kept[j] = got
        return got

    def rows_keys(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows and coin keys of the block's agents ``ids`` (any order: views of one
        chunk for consecutive agents inside it)."""
        ids = np.asarray(ids, dtype=np.int64)
        at = span(ids)
        if isinstance(at, slice):
            j0 = (at.start - self.start) // self.size
            j1 = (at.stop - 1 - self.start) // self.size
            parts = []
            for j in range(j0, j1 + 1):
                lo, rows, coins = self.chunk(j)
                a, b = max(at.start, lo) - lo, min(at.stop, lo + len(coins)) - lo
                parts.append((rows[a:b], coins[a:b]))
            if len(parts) == 1:
                return parts[0]
            rows = np.concatenate([p[0] for p in parts])
            if self.share is not None:
                self.share.look(at.start, rows)
            return rows, np.concatenate([p[1] for p in parts])
        js = (ids - self.start) // self.size
        rows_out = coins_out = None
        for j in np.unique(js).tolist():
            sel = js == j
            lo, rows, coins = self.chunk(j)
            if rows_out is None:
                rows_out = np.empty((len(ids), *rows.shape[1:]), dtype=rows.dtype)
                coins_out = np.empty(len(ids), dtype=coins.dtype)
            rows_out[sel] = rows[ids[sel] - lo]
            coins_out[sel] = coins[ids[sel] - lo]
        if rows_out is None:  # no agent
            lo, rows, coins = self.chunk(0)
            return rows[:0], coins[:0]
        return rows_out, coins_out
