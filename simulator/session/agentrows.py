"""A pool's agents' private rows and coin keys, as the pool session uses them.

Built before any set-up when the orchestrator knows the run (``prebuild``: the processes
backend's pools hold their data before the curator says anything, as real agents do) and taken
if the signed set-up is that run (``take_prebuilt``), else built at the set-up (``block_rows``);
and the privacy audit's overrides: one
agent's row (neighbouring data sets, ``override_rows``) or its coin key (another run's coins,
``override_keys``), which a peer can never set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols import build_data
from ldpsim.simulator.session.common import block_of
from ldpsim.simulator.session.truthshare import TruthShare

#: what ``prebuild`` makes: the configuration it was built for, the block [start, stop), its
#: rows and coin keys
Prebuilt = tuple[dict[str, Any], int, int, np.ndarray, np.ndarray]


def prebuild(keys: Any, index: int, n_pools: int, config: dict[str, Any],
             share: TruthShare | None = None) -> Prebuilt | None:
    """The rows and coin keys of pool ``index`` of ``n_pools`` (its ``keys``,
    ``seeding.PoolKeys``; None: nothing is built) for the run ``config`` (its public
    configuration), built before any set-up. They are the same as those the set-up builds
    (keyed by agent). ``share``: the pool's share of the truth, which hears the rows made."""
    if keys is None:
        return None
    data_id = int(config["data_id"])
    data_keys = keys.data_keys(data_id)
    dataset = build_data(config["data"], data_keys)
    start, stop = block_of(index, n_pools, dataset.n)
    k = keys.agents.for_range(start, stop, coin_tag=int(config["run_id"]), data_tag=data_id)
    dataset = dataset.with_keys(data_keys.with_cache(start, k["data"]))
    if share is not None:
        share.open(dataset, start, stop, config)
    rows = np.asarray(dataset.rows(start, stop))
    if rows.flags.writeable:
        rows.setflags(write=False)
    return ({"data": config["data"], "run_id": int(config["run_id"]), "data_id": data_id},
            start, stop, rows, k["coins"])


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
