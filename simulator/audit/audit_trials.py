"""The audit's experiment: the audited setting (its coalition and target) and its trials.

``make_setting`` fixes the coalition once and picks the target; :class:`Trials` runs the
setting again and again on the inproc backend with the target's row overridden, under either
experiment of ``COINS`` (fresh coins for every party in every trial, or the coalition's fixed at
trial 0's), and gives the differencing attack the same view from the round loop in this
process (``Trials.local_view``). ``simulator.audit.audit_harness`` runs the attacks on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols import build_data, get_protocol
from ldpsim.protocols.keys import DataKeys, run_seed, run_seeds, run_tags, seed_run_keys
from ldpsim.protocols.local import local_rounds
from ldpsim.protocols.rng import stream_key
from ldpsim.simulator.audit.audit import coalition_view
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.session import Limits
from ldpsim.simulator.session.collusion import colluder_mask
from ldpsim.simulator.session.runconfig import RunConfig
from ldpsim.simulator.session.seeding import run_keys


@dataclass
class AuditSetting:
    """One audited configuration: a run config (one repetition), the coalition and target."""

    config: dict[str, Any]
    scenario_seed: int
    target: int
    curator_colludes: bool
    colluders: np.ndarray  # ids of the colluding agents (never the target)
    public: dict[str, Any]  # the data set's public facts (the same in every trial)
    n: int = 0  # the data set's agents


def target_coins(setting: AuditSetting, trial: int) -> int:
    """The target's coin key in run ``trial`` of the setting (its seed's secrets, its run
    tag): what it draws in that run (the fixed-coins experiment gives it to run 0)."""
    keys = run_keys(run_seed(setting.scenario_seed, trial))
    return int(keys.coins(setting.config, [setting.target])[0])


def make_setting(config: dict[str, Any], scenario_seed: int,
                 target: int | None = None) -> AuditSetting:
    """Fix the coalition once (so the target stays honest in every trial) and pick the target.

    The target is ``target`` or the lowest-numbered honest agent; if the coalition would
    include it (e.g. n - 1 colluders), the target is swapped out of it for another agent.
    """
    data = config["data"]
    seed0 = run_seed(scenario_seed, 0)
    ds = build_data(data, DataKeys.of_seed(seed0))
    n = ds.n
    run_cfg = RunConfig.of(config)
    curator = run_cfg.curator_colludes
    mask = colluder_mask(n, dict(run_cfg.collusion), stream_key(seed0, "collusion"))
    if target is None:
        honest = np.flatnonzero(~mask)
        target = int(honest[0]) if len(honest) else 0
    if not 0 <= target < n:
        raise ValueError(f"--target: agent {target} does not exist (n = {n})")
    if mask[target]:
        mask[target] = False
        spare = np.flatnonzero(~mask & (np.arange(n) != target))
        if len(spare) and int(mask.sum()) < n - 1:
            mask[spare[0]] = True
    colluders = np.flatnonzero(mask)
    cfg = dict(config, pools=1, agent_mode="batched",
               collusion={"colluders": colluders.tolist(), "curator": curator}, faults=[])
    return AuditSetting(cfg, scenario_seed, int(target), curator, colluders, ds.public, n)


#: the audit's two experiments: fresh coins for every party in every trial (trial t is run t),
#: or the coalition's coins fixed at trial 0's and only the target's fresh (trial t is run 0
#: with the target drawing its coins as in run t)
COINS = ("per-trial", "fixed")


def check_coins(coins: str, auto: bool) -> None:
    """ValueError naming ``--coins`` unless ``coins`` is one of ``COINS`` (or "auto" where
    ``auto``: the choice is still to be made)."""
    allowed = ("auto", *COINS) if auto else COINS
    if coins not in allowed:
        raise ValueError(f"--coins: got {coins!r}; allowed: " + ", ".join(map(repr, allowed)))


class Trials:
    """Runs one setting repeatedly on the inproc backend with the target's row overridden.

    ``coins`` = "per-trial": trial t is run t of the scenario (every party's coins fresh).
    "fixed": trial t is run 0 with the target's coins of run t; the curator and the colluders
    act as in run 0 in every trial, except where the target's reports change what they see.
    Both are sound experiments for a local claim: ε-LDP holds for any fixed coins of the
    others, adaptively chosen queries and broadcasts included (sequential composition).
    """

    def __init__(self, setting: AuditSetting, limits: Limits, coins: str = "per-trial") -> None:
        check_coins(coins, auto=False)
        self.s = setting
        self.limits = limits
        self.coins = coins
        self.protocol = get_protocol(setting.config["protocol"])

    def view(self, trial: int, row: np.ndarray) -> dict[str, Any]:
        override = {"agent": self.s.target, "row": row}
        if self.coins == "fixed":
            override["key"] = target_coins(self.s, trial)
            trial = 0
        seed = run_seed(self.s.scenario_seed, trial)
        cfg = dict(self.s.config, seed=seed)
        res = run_inproc(cfg, self.limits, record_view=True, override=override,
                         n=self.s.n)
        rows = {}
        if not self.s.curator_colludes and len(self.s.colluders):
            ds = build_data(cfg["data"], DataKeys.of_seed(seed))
            for a in self.s.colluders.tolist():
                rows[a] = ds.rows(a, a + 1)[0]
        return coalition_view(res["view"], self.s.curator_colludes, rows)

    def local_keys(self, first: int, count: int) -> LocalKeys:
        """The keys of the runs of trials ``first .. first + count - 1``, computed together."""
        cfg = self.s.config
        seeds = run_seeds(self.s.scenario_seed, first, count)
        tags = run_tags(seeds, cfg["protocol"], cfg["params"], cfg["data"])
        coins, data = seed_run_keys(seeds, self.s.n, tags)
        if self.coins == "fixed":  # run 0's keys but the target's coins, run t's
            seed0 = seeds[:1] if first == 0 else run_seeds(self.s.scenario_seed, 0, 1)
            tag0 = run_tags(seed0, cfg["protocol"], cfg["params"], cfg["data"])
            c0, d0 = seed_run_keys(seed0, self.s.n, tag0)
            own = coins[:, self.s.target]
            coins, data = np.repeat(c0, count, axis=0), np.repeat(d0, count, axis=0)
            coins[:, self.s.target] = own
            seeds, tags = np.repeat(seed0, count), np.repeat(tag0, count)
        return LocalKeys(first, seeds, tags, coins, data)

    def local_view(self, trial: int, row: np.ndarray,
                   keys: LocalKeys | None = None) -> dict[str, Any]:
        """What the differencing attack reads of ``view(trial, row)`` (the output, the
        parameters, the public facts and the colluders' disclosed rows), from the round loop
        in this process (``protocols.local.local_rounds``) instead of a run of the runtime:
        the same parties keyed the same way, without the sessions, the wire and the accounts.
        Only for a coalition with the curator (``audit_setting`` checks it against ``view``).
        ``keys``: ``local_keys`` of trials that include this one, if already computed."""
        if keys is None or not keys.first <= trial < keys.first + len(keys.seeds):
            keys = self.local_keys(trial, 1)
        i = trial - keys.first
        seed, tag = int(keys.seeds[i]), int(keys.tags[i])
        coins, data_keys = keys.coins[i], keys.data[i]
        cfg = dict(self.s.config, seed=seed)
        run = run_keys(seed)
        ds = build_data(cfg["data"], run.data.with_cache(0, data_keys))
        n, target = ds.n, self.s.target
        rows = np.array(ds.rows(0, n), copy=True)
        rows[target] = np.asarray(row).astype(rows.dtype)
        rows.setflags(write=False)
        bound = self.protocol.bind(dict(cfg["params"]), ds.public)
        _, output = local_rounds(bound, ds, seed, coins=coins,
                                 curator_coins=run.secrets.curator_coins(tag), rows=rows)
        return {"output": output, "params": bound.params, "public": ds.public,
                "disclosures": {int(a): {"data": rows[a]} for a in self.s.colluders.tolist()}}


@dataclass
class LocalKeys:
    """The keys of the runs of trials ``first ..`` (``Trials.local_keys``): per trial, its
    run's seed and tag (run 0's in the fixed-coins experiment), and every agent's coin keys
    (the target's as the experiment gives it) and data keys, one row per trial."""

    first: int
    seeds: np.ndarray
    tags: np.ndarray
    coins: np.ndarray
    data: np.ndarray
