"""SAFARI's ranking data: SUSHI and Jester subsets (Cheng et al., 2021, §6.1) and Mallows.

Every kind holds full rankings of ``d`` items, one per agent (a row of item ids, best first, the
rank family's row layout). Public facts: ``d`` (also as ``m``, so the rank family's protocols run
on these kinds too) and ``n``. Ground truth (:func:`metrics.truth_of`): the first- and
second-order marginals Q1, Q2, the distributions S2 and S3, and the pairwise count matrix.

* ``sushi_subset``: SUSHI set A (Kamishima), 5000 rankings of 10 sushi, restricted to the items
  0 .. d-1 (each agent's relative ranking of them). The paper builds test sets "with the number
  of items ranging from 3 to 10" without saying which items; the first d item ids is our choice.
* ``jester``: Jester ratings turned into rankings by ordering a user's ratings (Cheng et al., 2021,
  §6.1). The items are the d jokes with the most ratings in the file (ties: smaller joke id first),
  the agents are the users who rated all d of them (in user-id order), and a user's ranking orders
  the jokes by rating, highest first (ties: the more-rated joke first). The paper used 20,000 users;
  the excerpt we have holds 906 users, of whom 557-862 rated the top 3-10 jokes.
* ``safari_mallows``: Mallows rankings (repeated insertion, generated per agent), the built-in
  default that needs no download.
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset, RangeTap, file_stamp, resolve_path
from ldpsim.protocols.keys import DataKeys
from ldpsim.protocols.rank import mallows
from ldpsim.protocols.rank.data import THETA_CONVENTION, read_order, read_soc
from ldpsim.protocols.safari import metrics

D_MAX = 20


@dataclass
class MarginalPart:
    """One pool's share of a SAFARI data set's truth: the ``metrics.marginal_counts`` of its
    agents ``start .. stop - 1`` (``MarginalTap``), with the data set's fingerprint."""

    fingerprint: bytes
    start: int
    stop: int
    counts: tuple


class MarginalTap(RangeTap):
    """A pool's tap of its agents' share of the §6.1 marginals' counts: it hears the rankings
    the pool makes (its whole block, or a chunked pool's chunks: ``first`` says where they
    lie; a chunk made again is heard once) and counts them (``metrics.marginal_counts``). Its
    part is None unless the ranges heard are exactly ``start .. stop - 1``, each once. Counts
    are integers: their sum is the same in any order, so the orchestrator's join gives
    ``truth()`` exactly."""

    def __init__(self, fingerprint: bytes, start: int, stop: int, d: int) -> None:
        super().__init__(fingerprint, start, stop)
        self.d = d
        self.counts = metrics.marginal_counts([], d)

    def add(self, rows: np.ndarray) -> None:
        self.counts = metrics.add_counts(self.counts, metrics.marginal_counts([rows], self.d))

    def share(self) -> MarginalPart:
        return MarginalPart(self.fingerprint, self.start, self.stop, self.counts)


@dataclass
class SafariRankings(Dataset):
    """Full rankings of ``d`` items; subclasses provide ``rows``."""

    d: int = 0

    def truth(self) -> dict:
        step = 1 << 16
        blocks = (self.rows(s, min(self.n, s + step)) for s in range(0, self.n, step))
        return self._truth_of(metrics.marginal_counts(blocks, self.d))

    def _truth_of(self, counts: tuple) -> dict:
        """``truth()`` from its ``metrics.marginal_counts``."""
        return metrics.truth_of_counts(counts, self.d)

    def truth_fingerprint(self) -> bytes:
        """What tells this data set's parts from another's (``truth_join``)."""
        return repr((self.kind, self.n, self.d)).encode()

    def truth_tap(self, start: int, stop: int, protocol: Any) -> MarginalTap | None:
        """A pool's tap of agents ``start .. stop - 1``'s share of the marginals' counts
        (``MarginalTap``), where the pools hand it over (``truth_from_pools``)."""
        if not self.truth_from_pools(protocol) or not 0 <= start < stop <= self.n:
            return None
        return MarginalTap(self.truth_fingerprint(), start, stop, self.d)

    def truth_join(self, parts: list[Any]) -> dict | None:
        """``truth()`` from the pools' parts (``MarginalPart``, one per pool): their counts
        added, when they are this data set's and cover every agent once; else None."""
        if not parts or any(not isinstance(p, MarginalPart) for p in parts):
            return None
        fp, at = self.truth_fingerprint(), 0
        total = metrics.marginal_counts([], self.d)
        for p in sorted(parts, key=lambda p: p.start):
            if (p.fingerprint != fp or p.start != at or len(p.counts) != 4
                    or any(np.shape(a) != np.shape(b) for a, b in zip(p.counts[1:], total[1:],
                                                                      strict=True))):
                return None
            total = metrics.add_counts(total, p.counts)
            at = p.stop
        return self._truth_of(total) if at == self.n else None


@dataclass
class TableRankings(SafariRankings):
    """Rankings read from a file; a pool keeps only its own rows."""

    table: np.ndarray | None = None

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.table[start:stop]


@dataclass
class MallowsRankings(SafariRankings):
    """Mallows(phi) around a random reference ranking, generated per agent."""

    phi: float = 1.0
    keys: DataKeys | None = None

    def rows(self, start: int, stop: int) -> np.ndarray:
        return mallows.sample(self.keys.population, np.arange(start, stop), self.d, self.phi,
                              agent_keys=self.keys.range(start, stop))

    def _truth_of(self, counts: tuple) -> dict:
        t = super()._truth_of(counts)
        t["reference"] = mallows.reference_ranking(self.keys.population, self.d).tolist()
        return t

    def truth_from_pools(self, protocol: Any) -> bool:
        """Generated rankings: the pools make every agent's row anyway, and counting them
        there saves the orchestrator a second pass over all of them (a part that misses an
        agent leaves the truth to the orchestrator)."""
        return True

    def truth_fingerprint(self) -> bytes:
        return repr((self.kind, self.n, self.d, self.phi.hex(),
                     int(self.keys.population))).encode()


def public_of(d: int, n: int, **extra) -> dict:
    return {"d": d, "m": d, "n": n, "data_type": "ranking", **extra}


def subset_items(table: np.ndarray, d: int) -> np.ndarray:
    """Each row's relative ranking of the items 0 .. d-1 (order kept, other items dropped)."""
    table = np.asarray(table)
    if d > table.shape[1]:
        raise ParamError(f"[data] d: got {d}; allowed: 3 .. {table.shape[1]} (the file ranks "
                         f"{table.shape[1]} items)")
    return table[table < d].reshape(len(table), d).astype(np.int16)


def _take(table: np.ndarray, n: int | None) -> np.ndarray:
    if n is not None:
        if n > len(table):
            raise ParamError(f"[data] n: the file has {len(table)} agents, asked for {n}")
        table = table[:n]
    return table


def _sushi_subset(keys: DataKeys, path: str, d: int = 10, n: int | None = None) -> TableRankings:
    full = _read_rankings(path, file_stamp(path))
    table = _take(subset_items(full, d), n)
    return TableRankings(kind="sushi_subset", n=len(table), d=d, table=table,
                         public=public_of(d, len(table)))


@lru_cache(maxsize=4)
def _read_rankings(path: str, stamp: tuple | None) -> np.ndarray:
    """The full rankings of a SUSHI file (``.soc`` or ``.order``), read-only: parsed once per
    process for the same file (its ``data.file_stamp`` keys the cache), as the runs of a sweep
    over d each build their subset from it (``DataKind.build`` keeps a built data set per d)."""
    full = read_soc(path) if path.endswith(".soc") else read_order(path)
    full.setflags(write=False)
    return full


def read_jester(path: str, d: int) -> tuple[np.ndarray, list[int]]:
    """(rankings (n, d) of item indices 0..d-1, the d joke ids) from a Jester ratings CSV.

    Accepts the long ``userId,jokeId,rating`` layout (header optional). A sweep's runs share
    one parse: ``DataKind.build`` keeps the data set built from a file while it is unchanged.
    """
    ratings: dict[int, dict[int, float]] = defaultdict(dict)
    with resolve_path(path).open(newline="") as fh:
        for no, row in enumerate(csv.reader(fh), start=1):
            if not row or (no == 1 and not row[0].strip().lstrip("-").isdigit()):
                continue
            try:
                u, j, r = int(row[0]), int(row[1]), float(row[2])
            except (ValueError, IndexError) as e:
                raise ParamError(f"[data] path: {path}:{no}: expected 'userId,jokeId,rating'"
                                 ) from e
            ratings[u][j] = r
    per_joke = Counter(j for r in ratings.values() for j in r)
    jokes = [j for j, _ in sorted(per_joke.items(), key=lambda kv: (-kv[1], kv[0]))[:d]]
    if len(jokes) < d:
        raise ParamError(f"[data] d: got {d}; the file rates only {len(jokes)} jokes")
    rows = []
    for u in sorted(ratings):
        r = ratings[u]
        if all(j in r for j in jokes):
            rows.append(sorted(range(d), key=lambda i: (-r[jokes[i]], i)))
    if not rows:
        raise ParamError(f"[data] d: no user rated all of the {d} most-rated jokes")
    return np.asarray(rows, dtype=np.int16), jokes


def _jester(keys: DataKeys, path: str, d: int = 10, n: int | None = None) -> TableRankings:
    table, jokes = read_jester(path, d)
    table = _take(table, n)
    return TableRankings(kind="jester", n=len(table), d=d, table=table,
                         public=public_of(d, len(table), items=jokes))


def _mallows(keys: DataKeys, n: int, d: int, theta: float | None = None,
             phi: float | None = None, theta_convention: str = "paper") -> MallowsRankings:
    if theta is None and phi is None:
        theta = 0.5
    try:
        p = mallows.phi_from(theta, phi, theta_convention)
    except ValueError as e:
        raise ParamError(f"[data] theta/phi: {e}; give exactly one of theta (1 - q/p in [0, 1], "
                         "the convention of Yan, Li & Liu, 2020, or PerMallows' -ln(q/p) >= 0 with "
                         'theta_convention = "permallows") or phi (Mallows\' q/p in [0, 1])'
                         ) from e
    return MallowsRankings(kind="safari_mallows", n=n, d=d, phi=p, keys=keys,
                           public=public_of(d, n))


_D = ParamSpec("d", "int", default=10, low=3, high=10, help="number of items (the paper: 3..10)")
_N = ParamSpec("n", "int", low=1, high=MAX_AGENTS, help="keep only the first n agents")

KINDS = {
    "sushi_subset": DataKind(
        "sushi_subset", _sushi_subset,
        {"path": ParamSpec("path", "str", required=True,
                           help="sushi3a.5000.10.order (Kamishima) or the PrefLib .soc copy"),
         "d": _D, "n": _N},
        "ranking",
        "SUSHI set A restricted to items 0..d-1 (Cheng et al., 2021, §6.1: 5000 users, d=3..10)"),
    "jester": DataKind(
        "jester", _jester,
        {"path": ParamSpec("path", "str", required=True,
                           help="Jester ratings CSV (userId,jokeId,rating)"),
         "d": _D, "n": _N},
        "ranking",
        "Jester ratings → rankings of the d most-rated jokes (Cheng et al., 2021, §6.1)"),
    "safari_mallows": DataKind(
        "safari_mallows", _mallows,
        {"n": ParamSpec("n", "int", required=True, low=1, high=MAX_AGENTS, help="number of agents"),
         "d": ParamSpec("d", "int", required=True, low=3, high=D_MAX, help="number of items"),
         "theta": ParamSpec("theta", "float", low=0,
                            help="dispersion (default 0.5): 1 - q/p as Yan, Li & Liu (2020) "
                                 "define it, or -ln(q/p) with theta_convention = \"permallows\""),
         "theta_convention": THETA_CONVENTION,
         "phi": ParamSpec("phi", "float", low=0, high=1, help="Mallows phi = q/p = 1 - theta")},
        "ranking", "Mallows rankings of d items by repeated insertion (no download needed)",
        examples=({"n": 300, "d": 4, "theta": 0.3},)),
}
