"""Sparse crowdsourcing answers: the synthetic generator of Sun et al., 2018, §VI-A, and loaders for
the Web and AdultContent answer files.

A row is one worker's answer vector over all tasks (float64; NaN = NULL), answers are integers
in Γ = {0, ..., L-1}. ``public`` tells the curator the number of tasks and L. ``truth()`` gives
the orchestrator the ground truth per task (NaN where a real data set has none) and the result
of Algorithm 1 on the original answers (MAE_O), so that ``mae_change`` = MAE_P - MAE_O.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import MAX_AGENTS, ParamError, ParamSpec
from ldpsim.protocols.data import DataKind, Dataset
from ldpsim.protocols.datasets import resolve
from ldpsim.protocols.keys import DataKeys
from ldpsim.protocols.truth.inference import infer_truth, mae

DATA_TYPE = "answers"


@dataclass
class AnswerData(Dataset):
    """Answer vectors of ``n`` workers over ``tasks`` tasks with answers in {0..levels-1}."""

    tasks: int = 0
    levels: int = 0

    def ground_truth(self) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def truth(self) -> dict:
        """Ground truth per task, and Algorithm 1 on the original answers (MAE_O)."""
        mu = self.ground_truth()
        orig = infer_truth(self.rows(0, self.n))
        return {"mu": mu, "mu_hat_original": orig.mu, "mae_original": mae(orig.mu, mu),
                "iterations_original": orig.iterations}


def _public(tasks: int, levels: int) -> dict:
    return {"tasks": int(tasks), "levels": int(levels), "data_type": DATA_TYPE}


# --------------------------------------------------------------------------- synthetic


@dataclass
class SyntheticAnswers(AnswerData):
    """Sun et al., 2018, §VI-A: truths ~ N(0, 1); worker i answers μ_j + N(0, σ_i²) with σ_i = 1 for
    a random half of the workers ("high quality") and 5 for the rest, on a random subset of
    round((1 - sparsity)·tasks) tasks (at least one).

    Γ is the integers 0..L-1 (L = 10 in the paper), so each answer is rounded to the nearest
    integer and clipped to Γ. The paper does not say how real-valued answers are mapped into
    Γ; rounding and clipping is our reading (Theorem 3 picks "the answer x from Γ" by the
    normal density, and §VI-C calls 0 "the center of answers").
    """

    sparsity: float = 0.9
    sigma_good: float = 1.0
    sigma_bad: float = 5.0
    good_fraction: float = 0.5
    keys: DataKeys | None = None
    _mu: np.ndarray | None = field(default=None, repr=False)
    _sigma: np.ndarray | None = field(default=None, repr=False)

    def ground_truth(self) -> np.ndarray:
        if self._mu is None:
            g = rngm.party_generator(rngm.stream_key(self.keys.population, "truth"))
            self._mu = g.standard_normal(self.tasks)
        return self._mu

    def sigmas(self) -> np.ndarray:
        """σ_i of every worker: exactly round(good_fraction·n) workers, chosen at random, get
        ``sigma_good``."""
        if self._sigma is None:
            g = rngm.party_generator(rngm.stream_key(self.keys.population, "quality"))
            good = g.permutation(self.n)[: int(round(self.good_fraction * self.n))]
            s = np.full(self.n, self.sigma_bad)
            s[good] = self.sigma_good
            self._sigma = s
        return self._sigma

    def answered(self) -> int:
        """Tasks each worker answers: round((1 - sparsity)·tasks), at least 1."""
        return max(1, int(round((1.0 - self.sparsity) * self.tasks)))

    def rows(self, start: int, stop: int) -> np.ndarray:
        ids = np.arange(start, stop)
        mu = self.ground_truth()
        sigma = self.sigmas()[start:stop]
        own = self.keys.range(start, stop)  # each worker's own data key
        k = self.answered()
        out = np.full((len(ids), self.tasks), np.nan)
        from scipy import special  # on first use: the registry imports every family

        step = 2048
        for s in range(0, len(ids), step):
            blk = ids[s:s + step]
            # per-worker draws: which tasks (the k smallest of n uniforms), and the noise
            mine = own[s:s + step]
            pick = rngm.uniform(mine, blk, 0, self.tasks)
            u = rngm.uniform(mine, blk, 1, self.tasks)
            chosen = np.argpartition(pick, k - 1, axis=1)[:, :k] if k < self.tasks else None
            # the answer model on the answered cells only (elementwise: the same values)
            z = special.ndtri(u if chosen is None else np.take_along_axis(u, chosen, axis=1))
            m = mu[None, :] if chosen is None else mu[chosen]
            vals = np.clip(np.rint(m + sigma[s:s + len(blk), None] * z), 0, self.levels - 1)
            if chosen is None:
                out[s:s + len(blk)] = vals
            else:
                r = np.arange(len(blk))[:, None]
                out[s + r, chosen] = vals
        return out


def _synthetic(keys: DataKeys, n: int = 2000, tasks: int = 200, sparsity: float = 0.9,
               levels: int = 10, sigma_good: float = 1.0, sigma_bad: float = 5.0,
               good_fraction: float = 0.5) -> SyntheticAnswers:
    if sparsity >= 1:
        raise ParamError(f"[data] sparsity: got {sparsity}; allowed: a number >= 0 and < 1 "
                         "(every worker answers at least one task)")
    return SyntheticAnswers(kind="crowd_synthetic", n=n, tasks=tasks, levels=levels,
                            public=_public(tasks, levels), sparsity=sparsity,
                            sigma_good=sigma_good, sigma_bad=sigma_bad,
                            good_fraction=good_fraction, keys=keys)


# --------------------------------------------------------------------------- real data


@dataclass
class TableAnswers(AnswerData):
    """Answers read from a file into a dense (workers × tasks) table; a pool keeps its rows."""

    table: np.ndarray | None = None
    gold: np.ndarray | None = None
    stats: dict = field(default_factory=dict)

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.table[start:stop]

    def ground_truth(self) -> np.ndarray:
        return self.gold


def _dir(path: str, names: tuple[str, ...]) -> Path:
    p = resolve(path, directory=True)
    if not p.is_dir() or not all((p / f).is_file() for f in names):
        raise ParamError(f"[data] path: got {path!r}; allowed: a directory holding "
                         f"{', '.join(names)}")
    return p


def _table(triples: list[tuple[str, str, int]], gold: dict[str, int], levels: int,
           kind: str, worker_key=str, task_key=str) -> TableAnswers:
    """Dense table from (worker, task, answer) triples; the first answer of a repeated
    (worker, task) pair is kept."""
    workers = sorted({w for w, _, _ in triples}, key=worker_key)
    tasks = sorted({t for _, t, _ in triples}, key=task_key)
    wi = {w: i for i, w in enumerate(workers)}
    ti = {t: j for j, t in enumerate(tasks)}
    i = np.fromiter((wi[w] for w, _, _ in triples), np.int64, len(triples))
    j = np.fromiter((ti[t] for _, t, _ in triples), np.int64, len(triples))
    a = np.fromiter((x for _, _, x in triples), np.float64, len(triples))
    # the first answer of each (worker, task) pair, in file order
    _, first, pair = np.unique(i * len(tasks) + j, return_index=True, return_inverse=True)
    table = np.full((len(workers), len(tasks)), np.nan)
    table[i[first], j[first]] = a[first]
    repeated = len(triples) - len(first)
    conflicting = int(np.count_nonzero(a != a[first][pair]))
    mu = np.array([gold.get(t, np.nan) for t in tasks], dtype=np.float64)
    answered = np.isfinite(table).sum(axis=1)
    sparsity = 1.0 - answered / len(tasks)
    stats = {"workers": len(workers), "tasks": len(tasks), "answers": int(answered.sum()),
             "rows_in_file": len(triples), "repeated_dropped": repeated,
             "repeated_conflicting": conflicting, "tasks_with_truth": int(np.isfinite(mu).sum()),
             "sparsity_min": float(sparsity.min()), "sparsity_max": float(sparsity.max()),
             "sparsity_mean": float(sparsity.mean())}
    return TableAnswers(kind=kind, n=len(workers), tasks=len(tasks), levels=levels,
                        public=_public(len(tasks), levels), table=table, gold=mu, stats=stats)


def _check_levels(levels: int | None, found: int, what: str) -> int:
    if levels is None:
        return found
    if levels < found:
        raise ParamError(f"[data] levels: got {levels}; allowed: an integer >= {found} "
                         f"({what} holds answers 0..{found - 1})")
    return levels


def load_web(path: str) -> tuple[list[tuple[str, str, int]], dict[str, int]]:
    """Web relevance data (Zhou et al. 2012): ``web_crowd.txt`` lines ``task worker label`` and
    ``web_truth.txt`` lines ``task label``, labels 1..5, mapped to 0..4."""
    d = _dir(path, ("web_crowd.txt", "web_truth.txt"))
    triples = []
    for line in (d / "web_crowd.txt").read_text().split("\n"):
        f = line.split()
        if len(f) == 3:
            triples.append((f[1], f[0], int(f[2]) - 1))
    gold = {}
    for line in (d / "web_truth.txt").read_text().split("\n"):
        f = line.split()
        if len(f) == 2:
            gold[f[0]] = int(f[1]) - 1
    return triples, gold


_ADULT = {"G": 0, "P": 1, "R": 2, "X": 3}


def load_adultcontent(path: str) -> tuple[list[tuple[str, str, int]], dict[str, int]]:
    """AdultContent (Ipeirotis et al. 2010): either the Zheng et al. 2017 CSV form
    (``answer.csv``: question, worker, answer in 0..3; ``truth.csv``) or the Get-Another-Label
    form (``labels.txt``: worker, url, G/P/R/X; ``gold.txt``). Both hold the same data.

    ``path`` is a directory holding one of the two forms, or a parent directory with a
    ``zheng2017`` or ``ipeirotis_gal`` subdirectory.
    """
    p = resolve(path, directory=True)
    for d in (p, p / "zheng2017", p / "ipeirotis_gal"):
        if (d / "answer.csv").is_file() and (d / "truth.csv").is_file():
            with open(d / "answer.csv", newline="") as fh:
                rows = list(csv.reader(fh))[1:]
            triples = [(r[1], r[0], int(r[2])) for r in rows if len(r) == 3]
            with open(d / "truth.csv", newline="") as fh:
                gold = {r[0]: int(r[1]) for r in list(csv.reader(fh))[1:] if len(r) == 2}
            return triples, gold
        if (d / "labels.txt").is_file() and (d / "gold.txt").is_file():
            triples = []
            for line in (d / "labels.txt").read_text().split("\n"):
                f = line.rstrip("\r").split("\t")
                if len(f) == 3:
                    triples.append((f[0], f[1], _ADULT[f[2]]))
            gold = {}
            for line in (d / "gold.txt").read_text().split("\n"):
                f = line.rstrip("\r").split("\t")
                if len(f) == 2:
                    gold[f[0]] = _ADULT[f[1]]
            return triples, gold
    raise ParamError(f"[data] path: got {path!r}; allowed: a directory holding answer.csv and "
                     "truth.csv, or labels.txt and gold.txt (or a parent of zheng2017/ or "
                     "ipeirotis_gal/)")


def _web(keys: DataKeys, path: str, levels: int | None = None) -> TableAnswers:
    triples, gold = load_web(path)
    found = max(a for _, _, a in triples) + 1
    return _table(triples, gold, _check_levels(levels, found, "web"), "crowd_web",
                  worker_key=int, task_key=int)


def _adult(keys: DataKeys, path: str, levels: int | None = None) -> TableAnswers:
    triples, gold = load_adultcontent(path)
    found = max(a for _, _, a in triples) + 1
    return _table(triples, gold, _check_levels(levels, found, "AdultContent"),
                  "crowd_adultcontent")


LEVELS_REAL = ParamSpec("levels", "int", low=2, high=1000,
                        help="|Γ| (default: what the file holds; the paper assumes 5)")

KINDS = {
    "crowd_synthetic": DataKind(
        "crowd_synthetic", _synthetic,
        {"n": ParamSpec("n", "int", default=2000, low=1, high=MAX_AGENTS, help="number of workers"),
         "tasks": ParamSpec("tasks", "int", default=200, low=1, help="number of tasks"),
         "sparsity": ParamSpec("sparsity", "float", default=0.9, low=0, high=1,
                               help="fraction of NULL cells per worker (< 1)"),
         "levels": ParamSpec("levels", "int", default=10, low=2, high=1000,
                             help="|Γ|: answers are 0..levels-1"),
         "sigma_good": ParamSpec("sigma_good", "float", default=1.0, low=0,
                                 help="answer noise σ of high-quality workers"),
         "sigma_bad": ParamSpec("sigma_bad", "float", default=5.0, low=0,
                                help="answer noise σ of low-quality workers"),
         "good_fraction": ParamSpec("good_fraction", "float", default=0.5, low=0, high=1,
                                    help="fraction of high-quality workers")},
        DATA_TYPE, "Sun et al., 2018, §VI-A: truth ~ N(0,1), σ 1 or 5, Γ = 0..9, sparse answers",
        examples=({"n": 200, "tasks": 20, "sparsity": 0.7},)),
    "crowd_web": DataKind(
        "crowd_web", _web,
        {"path": ParamSpec("path", "str", required=True,
                           help="directory with web_crowd.txt and web_truth.txt"),
         "levels": LEVELS_REAL},
        DATA_TYPE, "Web relevance (Zhou et al. 2012): 177 workers, 2665 tasks, labels 0..4"),
    "crowd_adultcontent": DataKind(
        "crowd_adultcontent", _adult,
        {"path": ParamSpec("path", "str", required=True,
                           help="directory with answer.csv/truth.csv or labels.txt/gold.txt"),
         "levels": LEVELS_REAL},
        DATA_TYPE, "AdultContent (Ipeirotis 2010): 825 workers, 11040 tasks, labels 0..3"),
}
