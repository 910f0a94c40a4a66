"""Ranking data: the Mallows generator and loaders for SUSHI ``.order`` and PrefLib ``.soc``.

Each agent's private row holds its ranking as *positions*: ``row[item]`` is the item's place,
0 = best (the inverse of the best-first list; ``profile.rankings`` converts). That is the form
every use needs: a pairwise answer is two lookups, the count matrix one comparison per pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset, RangeTap, resolve_path
from ldpsim.protocols.keys import DataKeys
from ldpsim.protocols.rank import mallows, profile

#: rankings counted at a time (the count matrix's temporaries stay small)
COUNT_ROWS = 1 << 16


def counts_of(rows: np.ndarray, m: int) -> np.ndarray:
    """The count matrix C (int64, m x m) of ``rows`` (positions), ``COUNT_ROWS`` at a time."""
    c = np.zeros((m, m), dtype=np.int64)
    for s in range(0, len(rows), COUNT_ROWS):
        c += profile.count_matrix(rows[s:s + COUNT_ROWS])
    return c


@dataclass
class CountPart:
    """One pool's share of a ranking data set's truth: the count matrix of its agents
    ``start .. stop - 1`` (``CountTap``), with the data set's fingerprint."""

    fingerprint: bytes
    start: int
    stop: int
    counts: np.ndarray


class CountTap(RangeTap):
    """A pool's tap of its agents' share of the count matrix C: it hears the rows the pool
    makes (its whole block, or a chunked pool's chunks: ``first`` says where they lie; a chunk
    made again is heard once) and counts them. Its part is None unless the ranges heard are
    exactly ``start .. stop - 1``, each once. Counts are integers: their sum is the same in any
    order, so the orchestrator's join gives ``truth()``'s matrix exactly."""

    def __init__(self, fingerprint: bytes, start: int, stop: int, m: int) -> None:
        super().__init__(fingerprint, start, stop)
        self.m = m
        self.counts = np.zeros((m, m), dtype=np.int64)

    def add(self, rows: np.ndarray) -> None:
        self.counts += counts_of(rows, self.m)

    def share(self) -> CountPart:
        return CountPart(self.fingerprint, self.start, self.stop, self.counts)


@dataclass
class RankingData(Dataset):
    """Full rankings of ``m`` items, one per agent, as positions. Truth: the count matrix C."""

    m: int = 0

    def truth(self) -> dict:
        c = np.zeros((self.m, self.m), dtype=np.int64)
        step = COUNT_ROWS
        for s in range(0, self.n, step):
            c += profile.count_matrix(self.rows(s, min(self.n, s + step)))
        return {"counts": c, "n": self.n}

    def _truth_of(self, counts: np.ndarray) -> dict:
        """``truth()`` from its count matrix."""
        return {"counts": counts, "n": self.n}

    def truth_fingerprint(self) -> bytes:
        """What tells this data set's parts from another's (``truth_join``)."""
        return repr((self.kind, self.n, self.m)).encode()

    def truth_tap(self, start: int, stop: int, protocol: Any) -> CountTap | None:
        """A pool's tap of agents ``start .. stop - 1``'s share of the count matrix (``CountTap``),
        where the pools hand it over (``truth_from_pools``)."""
        if not self.truth_from_pools(protocol) or not 0 <= start < stop <= self.n:
            return None
        return CountTap(self.truth_fingerprint(), start, stop, self.m)

    def truth_join(self, parts: list[Any]) -> dict | None:
        """``truth()`` from the pools' parts (``CountPart``, one per pool): their count
        matrices added, when they are this data set's and cover every agent once; else None."""
        if not parts or any(not isinstance(p, CountPart) for p in parts):
            return None
        fp, at = self.truth_fingerprint(), 0
        c = np.zeros((self.m, self.m), dtype=np.int64)
        for p in sorted(parts, key=lambda p: p.start):
            if p.fingerprint != fp or p.start != at or p.counts.shape != c.shape:
                return None
            c += p.counts
            at = p.stop
        return self._truth_of(c) if at == self.n else None


@dataclass
class MallowsData(RankingData):
    """Mallows(phi) rankings around a random reference ranking, generated per agent."""

    phi: float = 1.0
    keys: DataKeys | None = None

    def rows(self, start: int, stop: int) -> np.ndarray:
        return mallows.sample_positions(self.keys.population, np.arange(start, stop), self.m,
                                        self.phi, agent_keys=self.keys.range(start, stop))

    def _truth_of(self, counts: np.ndarray) -> dict:
        t = super()._truth_of(counts)
        t["reference"] = mallows.reference_ranking(self.keys.population, self.m).tolist()
        return t

    def truth(self) -> dict:
        return self._truth_of(super().truth()["counts"])

    def truth_from_pools(self, protocol: Any) -> bool:
        """Generated rankings: the pools make every asked agent's row anyway, and counting
        them there saves the orchestrator a second pass over all of them (a part that misses
        an agent, as when a protocol asks only some, leaves the truth to the orchestrator)."""
        return True

    def truth_fingerprint(self) -> bytes:
        return repr((self.kind, self.n, self.m, self.phi.hex(),
                     int(self.keys.population))).encode()


@dataclass
class FileRankings(RankingData):
    """Rankings read from a file; a pool keeps only its own rows. ``table`` holds positions."""

    table: np.ndarray | None = None

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.table[start:stop]


def _mallows(keys: DataKeys, n: int, m: int, theta: float | None = None,
             phi: float | None = None, theta_convention: str = "paper") -> MallowsData:
    if theta is None and phi is None:
        theta = 0.5
    try:
        p = mallows.phi_from(theta, phi, theta_convention)
    except ValueError as e:
        raise ParamError(f"[data] theta/phi: {e}; give exactly one of theta (the paper's "
                         "1 - q/p in [0, 1], or PerMallows' -ln(q/p) >= 0 with theta_convention "
                         '= "permallows") or phi (Mallows\' q/p in [0, 1])') from e
    return MallowsData(kind="mallows", n=n, m=m, phi=p, keys=keys,
                       public={"m": m, "data_type": "ranking"})


def read_order(path: str) -> np.ndarray:
    """Kamishima's SUSHI ``.order`` file: header ``m 1``, then ``0 m i1 .. im`` per agent.

    Item ids are 0-based, listed best first.
    """
    lines = resolve_path(path).read_text().split("\n")
    m = int(lines[0].split()[0])
    rows = []
    for no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        f = [int(x) for x in line.split()]
        r = f[2:]
        if f[1] != m or len(r) != m or sorted(r) != list(range(m)):
            raise ParamError(f"[data] path: {path}:{no}: not a full ranking of {m} items")
        rows.append(r)
    return np.asarray(rows, dtype=np.int16)


def read_soc(path: str) -> np.ndarray:
    """PrefLib ``.soc`` (strict complete orders): ``count: a1,...,am`` best first, 1-based."""
    rows = []
    m = None
    for no, line in enumerate(resolve_path(path).read_text().splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.upper().startswith("# NUMBER ALTERNATIVES:"):
                m = int(line.split(":")[1])
            continue
        try:
            count, order = line.split(":", 1)
            r = [int(x) - 1 for x in order.split(",")]
            count = int(count)
        except ValueError as e:
            raise ParamError(f"[data] path: {path}:{no}: expected 'count: a1,a2,...'") from e
        m = m or len(r)
        if sorted(r) != list(range(m)):
            raise ParamError(f"[data] path: {path}:{no}: not a complete order of {m} items "
                             "(only .soc files are supported)")
        rows.extend([r] * count)
    if not rows:
        raise ParamError(f"[data] path: {path}: no rankings found")
    return np.asarray(rows, dtype=np.int16)


def _from_table(kind: str, table: np.ndarray, n: int | None) -> FileRankings:
    if n is not None:
        if n > len(table):
            raise ParamError(f"[data] n: the file has {len(table)} agents, asked for {n}")
        table = table[:n]
    m = table.shape[1]
    return FileRankings(kind=kind, n=len(table), m=m, table=profile.positions(table),
                        public={"m": m, "data_type": "ranking"})


def _sushi(keys: DataKeys, path: str, n: int | None = None) -> FileRankings:
    table = read_soc(path) if path.endswith(".soc") else read_order(path)
    return _from_table("sushi", table, n)


def _preflib(keys: DataKeys, path: str, n: int | None = None) -> FileRankings:
    return _from_table("preflib", read_soc(path), n)


#: How theta maps to phi (``mallows.THETA_CONVENTIONS``); shared with SAFARI's Mallows kind.
THETA_CONVENTION = ParamSpec(
    "theta_convention", "str", default="paper", choices=mallows.THETA_CONVENTIONS,
    help='"paper": phi = 1 - theta (Yan, Li & Liu, 2020, §5.2.1); "permallows": '
         "phi = exp(-theta), the generator the paper's synthetic data came from")

KINDS = {
    "mallows": DataKind(
        "mallows", _mallows,
        {"n": ParamSpec("n", "int", required=True, low=1, high=MAX_AGENTS, help="number of agents"),
         "m": ParamSpec("m", "int", required=True, low=2, high=200, help="number of items"),
         "theta": ParamSpec("theta", "float", low=0,
                            help="dispersion (default 0.5): 1 - q/p as Yan, Li & Liu (2020) "
                                 "define it, or -ln(q/p) with theta_convention = \"permallows\""),
         "theta_convention": THETA_CONVENTION,
         "phi": ParamSpec("phi", "float", low=0, high=1, help="Mallows phi = q/p = 1 - theta")},
        "ranking", "Mallows rankings by repeated insertion (Yan, Li & Liu, 2020, §5.2.1)",
        examples=({"n": 300, "m": 6, "theta": 0.4},)),
    "sushi": DataKind(
        "sushi", _sushi,
        {"path": ParamSpec("path", "str", required=True,
                           help="sushi3a.5000.10.order (Kamishima) or the PrefLib .soc copy"),
         "n": ParamSpec("n", "int", low=1, high=MAX_AGENTS, help="keep only the first n agents")},
        "ranking", "SUSHI set A: 5000 full rankings of 10 sushi (Kamishima 2003)"),
    "preflib": DataKind(
        "preflib", _preflib,
        {"path": ParamSpec("path", "str", required=True, help="a PrefLib .soc file"),
         "n": ParamSpec("n", "int", low=1, high=MAX_AGENTS, help="keep only the first n agents")},
        "ranking", "PrefLib strict complete orders (.soc), e.g. TurkDots 00024, TurkPuzzle 00025"),
}
