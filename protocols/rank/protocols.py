"""Rank aggregation protocols of Yan, Li & Liu, 2020 ("Private Rank Aggregation under Local
Differential Privacy"): KwikSort, DP-KwikSort (central), LDP-KwikSort:RR and LDP-KwikSort:Lap.

All four run one round. ``kwiksort`` and ``dp_kwiksort`` ask every agent all C(m,2) pairs and get
true answers (the curator is trusted with raw pairwise preferences); the LDP protocols send each
agent K distinct random pairs and receive randomized answers with ε/K each.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.agentrange import AgentRange
from ldpsim.protocols.base import (
    AuditSpec,
    Block,
    Bound,
    Curator,
    ParamError,
    ParamSpec,
    Protocol,
    ReportSchema,
    Round,
    RoundPlan,
    Rounds,
)
from ldpsim.protocols.metrics import fraction
from ldpsim.protocols.queries import RowQueries, rows_of
from ldpsim.protocols.rank import profile
from ldpsim.protocols.rank.kwiksort import kwiksort

#: what ``evaluate`` returns (the paper's Eq. 4 and its average Kendall tau distance)
ERROR_RATE = fraction(
    "error_rate", "error rate (pairs against the majority)", "lower",
    "Eq. 4: the share of the C(m, 2) item pairs whose estimated comparison points against the "
    "agents' true majority")
KENDALL_TAU = fraction(
    "kendall_tau", "Kendall tau distance (normalised)", "lower",
    "the average Kendall tau distance from the output ranking to each agent's ranking, over "
    "C(m, 2) pairs (a distance: 0 = every agent's ranking)")
CAP_HIT = fraction(
    "cap_hit", "runs past DP-KwikSort's comparison cap", "lower",
    "DP-KwikSort: 1 when KwikSort needed more noisy comparisons than the privacy analysis "
    "allows (the rest were ordered at random), else 0; its mean is the share of such runs")

EPSILON = ParamSpec("epsilon", "float", default=1.0, low=0, low_open=True, high=1000,
                    help="total privacy budget per agent (LDP) or of the release (central)")
QUERIES = ParamSpec("queries", "int_or_auto", default="auto", low=1,
                    help='K pairs per agent; "auto" maximises g(K) '
                         "(Yan, Li & Liu, 2020, §5.2, §6.2)")


def g_rr(k: int, epsilon: float) -> float:
    """Yan, Li & Liu, 2020, Theorem 2: the error exponent g(K) = ε²K / (ε + 2K)² of
    LDP-KwikSort:RR."""
    return epsilon**2 * k / (epsilon + 2 * k) ** 2


def g_lap(k: int, epsilon: float) -> float:
    """Yan, Li & Liu, 2020, Theorem 3: g(K) = (1 - e^{-ε/(2K)})² K of LDP-KwikSort:Lap."""
    return (1.0 - math.exp(-epsilon / (2 * k))) ** 2 * k


def auto_queries(epsilon: float, n_pairs: int, g=g_rr) -> int:
    """The integer K in [1, C(m,2)] maximising g(K); for RR the real maximiser is K = ε/2."""
    hi = max(1, min(n_pairs, int(math.ceil(epsilon)) + 2))
    ks = range(1, hi + 1)
    return max(ks, key=lambda k: (g(k, epsilon), -k))


def mu_bound(n: int, m: int, epsilon: float, k: int, theta: float, mechanism: str = "rr") -> float:
    """μ of Theorems 2/3: the expected number of wrongly signed pairs is bounded via 6μ."""
    theta_star = theta / (2 - theta)
    g = g_rr(k, epsilon) if mechanism == "rr" else g_lap(k, epsilon)
    return 2 * math.comb(m, 2) * math.exp(-g * theta_star**2 * n / (m * (m - 1)))


class _RankCurator(Curator):
    """Shared state: the number of items and the per-pair report counters (integer counts:
    absorbed in parts, in any order, they are the same)."""

    absorbs_in_parts = True
    single_round = True

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.m = int(self.public["m"])
        self.n_pairs = self.m * (self.m - 1) // 2
        self.plan0: RoundPlan | None = None
        self.ones = np.zeros(self.n_pairs, dtype=np.int64)  # reports "a_j preferred to a_l"
        self.zeros = np.zeros(self.n_pairs, dtype=np.int64)
        self.done = False

    def rng(self) -> np.random.Generator:
        return rngm.party_generator(rngm.stream_key(self.key, "kwiksort"))

    def cmp_hat(self) -> np.ndarray:
        """(m, m) antisymmetric estimate of cmp from the counters (overridden for RR)."""
        return self._square(self.ones - self.zeros)

    def _square(self, upper: np.ndarray) -> np.ndarray:
        j, l = profile.pairs(self.m)
        c = np.zeros((self.m, self.m), dtype=np.float64)
        c[j, l] = upper
        c[l, j] = -upper
        return c

    def finish(self) -> dict[str, Any]:
        c = self.cmp_hat()
        res = kwiksort(c, self.rng())
        j, l = profile.pairs(self.m)
        return {"ranking": res.ranking, "cmp_hat": c[j, l].tolist(),
                "comparisons": res.comparisons}


class _AllPairsCurator(_RankCurator):
    """Asks every agent all pairs, answered truthfully (the non-private and central baselines)."""

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 0:
            return None
        return RoundPlan(rnd, self.agents, None, None,
                         ReportSchema("int", self.n_pairs, 0, 1), report_bits=self.n_pairs)

    def absorb(self, rnd, agents, reports):
        # counted in integers whatever the array's type (reports are 0/1 by the schema)
        ones = reports.sum(axis=0, dtype=np.int64)
        self.ones += ones
        self.zeros += len(agents) - ones


class _DPCurator(_AllPairsCurator):
    """DP-KwikSort (Hay, Elagina & Miklau, SDM 2017): Laplace noise on every comparison used."""

    def finish(self) -> dict[str, Any]:
        # the bound release: Laplace(ε', Δ) on each of at most ``uses`` comparisons
        release = self.bound.rounds[0]
        cap, noise = release.uses, release.mechanism
        exact = self.cmp_hat()
        g = self.rng()
        # private coins, fresh per run (``Curator.coins``); the pivots stay on the public key
        noise_rng = rngm.party_generator(rngm.stream_key(self.coins, "dp-kwiksort-noise"))
        noisy = np.full((self.m, self.m), np.nan)

        def compare(a: int, p: int) -> float:
            v = float(noise.perturb_from(noise_rng, exact[a, p]))
            noisy[a, p], noisy[p, a] = v, -v
            return v

        res = kwiksort(None, g, compare=compare, max_comparisons=cap, m=self.m)
        j, l = profile.pairs(self.m)
        hat = [None if math.isnan(v) else float(v) for v in noisy[j, l]]
        return {"ranking": res.ranking, "cmp_hat": hat, "comparisons": res.comparisons,
                "capped": res.capped, "max_comparisons": cap}


#: reports LDP-KwikSort's curator counts at a time: a block's temporaries stay in cache, and
#: a fresh curator process does not page-fault a round-sized array for them
ABSORB_ROWS = 1 << 16


class _LDPCurator(_RankCurator):
    """LDP-KwikSort: K distinct random pairs per agent (Algorithms 1-4 of Yan, Li & Liu, 2020)."""

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 0:
            return None
        k = self.bound.rounds[0].uses
        agents, key, pairs = self.agents, self.key, self.n_pairs
        # the narrowest integers that hold a pair index (int16 up to m = 256 items)
        dtype = np.int16 if pairs <= 1 << 15 else np.int32

        def draw(lo: int, hi: int) -> np.ndarray:
            # keyed by agent: the same pairs whatever the range, the split or the pools
            return rngm.distinct_indices(rngm.uniform(key, agents[lo:hi], rnd, k), pairs, dtype)

        # drawn batch by batch as the queries go out (``protocols.queries``)
        q = RowQueries(draw, len(agents), k, dtype)
        bits = k if self.float_reports is False else 64 * k
        self.plan0 = RoundPlan(rnd, self.agents, q, None, self.schema(k), report_bits=bits)
        return self.plan0

    float_reports = False

    def schema(self, k: int) -> ReportSchema:
        return ReportSchema("int", k, 0, 1)

    def classify(self, reports: np.ndarray) -> np.ndarray:
        return reports.astype(bool)

    def absorb(self, rnd, agents, reports):
        # the queries of the agents that answered (kept, or drawn again: a pure function of
        # each agent)
        asked, q = self.plan0.agents, self.plan0.queries
        if not _every(asked, agents):  # by their rows of the plan
            q = rows_of(q, np.searchsorted(asked, agents))
        counts = np.zeros(2 * self.n_pairs, dtype=np.int64)
        for s in range(0, len(agents), ABSORB_ROWS):  # in cache-sized blocks of reports
            # 2 * pair + answer, counted in one pass (int64: twice a pair index may not fit
            # the queries' own dtype)
            code = np.multiply(q[s:s + ABSORB_ROWS].reshape(-1), 2, dtype=np.int64)
            code += self.classify(reports[s:s + ABSORB_ROWS]).reshape(-1)
            counts += np.bincount(code, minlength=2 * self.n_pairs)
        self.zeros += counts[0::2]
        self.ones += counts[1::2]


def _every(asked: Any, agents: np.ndarray) -> bool:
    """Whether ``agents`` (sorted, distinct, asked) are every asked agent: of a range, its
    length and ends tell."""
    if len(agents) != len(asked):
        return False
    if isinstance(asked, AgentRange):
        return not len(agents) or (agents[0] == asked.start and agents[-1] == asked.stop - 1)
    return np.array_equal(agents, asked)


class _RRCurator(_LDPCurator):
    def cmp_hat(self) -> np.ndarray:
        """Eq. (1)-(2): cmp_hat = (C~_jl - C~_lj) / (2 p_rr - 1)."""
        p = self.bound.rounds[0].mechanism.p
        return self._square((self.ones - self.zeros) / (2 * p - 1))


class _LapCurator(_LDPCurator):
    float_reports = True

    def schema(self, k: int) -> ReportSchema:
        return ReportSchema("float", k)

    def classify(self, reports: np.ndarray) -> np.ndarray:
        """Algorithm 4: a report counts for a_j over a_l when o~ >= 0.5."""
        return reports >= 0.5


class _RankProtocol(Protocol):
    family = "rank aggregation (Yan, Li & Liu, 2020)"
    data_type = "ranking"
    curator_cls: type = _AllPairsCurator
    metrics = (ERROR_RATE, KENDALL_TAU)
    #: Figs. 3-6 show the error rate and the average Kendall tau distance
    figure_metrics = ("error_rate", "kendall_tau")

    def report_numbers(self, bound: Bound) -> int | None:
        """Numbers of one report: every pair (m(m - 1)/2) or LDP-KwikSort's K queries."""
        if issubclass(self.curator_class(bound), _LDPCurator):
            return int(bound.rounds[0].uses)
        m = int(bound.public["m"])
        return m * (m - 1) // 2

    def respond(self, block: Block) -> np.ndarray:
        """Truthful answers to all pairs (overridden by the LDP randomizers)."""
        m = block.rows.shape[1]
        allp = np.broadcast_to(np.arange(m * (m - 1) // 2), (len(block.rows), m * (m - 1) // 2))
        return profile.answers(block.rows, allp)

    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        """error_rate (Eq. 4) and kendall_tau (average, normalised by C(m,2)).

        Pairs the protocol did not estimate (DP-KwikSort compares only the pairs KwikSort
        needs) take the sign implied by the output ranking.
        """
        c = np.asarray(truth["counts"])
        m = c.shape[0]
        ranking = np.asarray(output["ranking"])
        pos = np.empty(m, dtype=np.int64)
        pos[ranking] = np.arange(m)
        j, l = profile.pairs(m)
        implied = np.where(pos[j] < pos[l], 1.0, -1.0)
        hat = np.array([np.nan if v is None else v for v in output["cmp_hat"]], dtype=float)
        hat = np.where(np.isnan(hat), implied, hat)
        sq = np.zeros((m, m))
        sq[j, l], sq[l, j] = hat, -hat
        metrics = {"error_rate": profile.error_rate(profile.cmp_from_counts(c), sq),
                   "kendall_tau": profile.kendall_tau(ranking, c)}
        if "capped" in output:
            metrics["cap_hit"] = float(output["capped"])
        return metrics

    # -- what the privacy audit needs ----------------------------------------------------------
    def audit_spec(self, bound: Bound) -> AuditSpec:
        """Candidate rankings of one agent (as positions rows, like the data): all m! when
        m <= 6 (uniform prior), else the identity and its reverse. The audited pair is a
        ranking and its reverse: they disagree on every pair, so whichever pairs are queried,
        every answer differs. (The set of all permutations, the identity and the reverse are
        each their own inverses, so the candidates read the same as rankings.)"""
        m = int(bound.public["m"])
        if m <= 6:
            values = np.array(list(itertools.permutations(range(m))), dtype=np.int16)
            rev = int(np.flatnonzero((values == np.arange(m)[::-1]).all(axis=1))[0])
            pair, notes = (0, rev), "all m! rankings, uniform prior"
        else:
            values = np.array([np.arange(m), np.arange(m)[::-1]], dtype=np.int16)
            pair, notes = (0, 1), "identity and reverse only (m! too large to enumerate)"
        return AuditSpec(values, np.full(len(values), 1.0 / len(values)), pair, notes)

    def _all_pairs(self, m: int, n: int) -> np.ndarray:
        return np.broadcast_to(np.arange(m * (m - 1) // 2), (n, m * (m - 1) // 2))

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Truthful answers to all pairs: probability 1 for the true answers, 0 otherwise."""
        m = block.rows.shape[1]
        truth = profile.answers(block.rows, self._all_pairs(m, len(block.rows)))
        return np.where((np.asarray(reports) == truth).all(axis=1), 0.0, -np.inf)

    def released_aggregate(self, bound: Bound, output: dict[str, Any]) -> np.ndarray:
        """cmp_hat: the released estimate of C_jl - C_lj per pair (NaN where not released)."""
        return np.array([np.nan if v is None else v for v in output["cmp_hat"]], dtype=float)

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray:
        """C_jl - C_lj per pair, summed over the given agents' rankings (positions rows)."""
        m = rows.shape[1]
        ans = profile.answers(rows, self._all_pairs(m, len(rows)))
        return (2.0 * ans - 1.0).sum(axis=0) * self._aggregate_scale(bound)

    def _aggregate_scale(self, bound: Bound) -> float:
        return 1.0


class KwikSortPlain(_RankProtocol):
    """Non-private KwikSort: every agent answers all C(m,2) pairs truthfully (Yan, Li & Liu,
    2020, §6.1.1)."""

    name = "kwiksort"
    summary = "non-private KwikSort on true pairwise answers (error lower bound)"
    params = {}

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        return Rounds.none()


class DPKwikSort(_RankProtocol):
    """DP-KwikSort, central model: the curator holds true counts and noises each comparison.

    Each comparison KwikSort makes reads ``cmp[a, pivot] + Lap(Δ/ε')`` with fresh noise (the
    exact discrete Laplace of ``mechanisms.Laplace``, words from the curator's generator), where
    ε' = ε / ((m-1) log2 m) (§6.1.1 of Yan, Li & Liu, 2020, writes ``log m``; base 2 is the reading
    under which the budget is "comparisons per level × levels"). Δ = 2: replacing one agent's
    ranking moves C_ab - C_ba by 2 (the paper writes Lap(1/ε'), the add/remove-one sensitivity).
    Random-pivot KwikSort exceeds (m-1) log2 m comparisons in 10-40% of runs, so the
    comparisons are capped at ⌊(m-1) log2 m⌋ and the still-unsorted sub-lists are ordered at
    random (no data): ε then holds in every run. ``cap_hit`` records when the cap bit.
    **Trusts the curator**: a colluding curator sees every agent's true answers.
    """

    name = "dp_kwiksort"
    summary = "central DP (trusts the curator): Laplace on every KwikSort comparison, capped"
    params = {"epsilon": EPSILON}
    curator_cls = _DPCurator
    metrics = (ERROR_RATE, KENDALL_TAU, CAP_HIT)
    SENSITIVITY = 2.0

    @staticmethod
    def budget(m: int, epsilon: float) -> tuple[int, float]:
        """(comparison cap, ε per comparison)."""
        cap = max(1, int(math.floor((m - 1) * math.log2(m))))
        return cap, epsilon / ((m - 1) * math.log2(m))

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One release: at most ``cap`` comparisons, each with Laplace(ε', Δ = 2), within the
        budget ε (cap·ε' <= ε)."""
        eps = params["epsilon"]
        cap, eps_cmp = self.budget(int(public["m"]), eps)
        return Rounds("central", (Round(mech.Laplace(eps_cmp, self.SENSITIVITY), uses=cap,
                                        epsilon=eps),),
                      notes=f"at most {cap} noisy comparisons")


class _LDPRank(_RankProtocol):
    """LDP-KwikSort: K random pairs per agent, each answer through ``mechanism`` at ε/K (the
    RR and Laplace variants differ by this attribute, their curator and g(K))."""

    params = {"epsilon": EPSILON, "queries": QUERIES}
    g = staticmethod(g_rr)
    #: the local randomizer of one answer, built at ε/K by ``rounds``
    mechanism: Any = mech.GRR

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: K answers through ``mechanism(ε/K)`` each, sequentially composed to ε;
        an answer is a bit (sensitivity 1)."""
        return Rounds("local", (Round.split(params["epsilon"], params["queries"],
                                            self.mechanism),), sensitivity=1.0)

    def respond(self, block: Block) -> np.ndarray:
        """Algorithm 1 / 3: each queried answer o through the bound mechanism at ε/K."""
        o = self._queried_answers(block.rows, block.queries)
        return block.mechanism.perturb(o, self.coins(block, block.round.uses))

    def query_refusal(self, bound: Bound, rnd: int, queries: np.ndarray | None,
                      broadcast: Any) -> str | None:
        """Each agent is asked K pair indices in [0, C(m,2)) (Algorithm 1): a row of another
        width would have the round's K coins answer other pairs (one coin for two pairs gives
        the curator the XOR of their true answers). A round past the protocol's one is the
        odometer's to refuse (its ε is ∞)."""
        k = int(bound.rounds[0].uses)
        n_pairs = int(bound.public["m"]) * (int(bound.public["m"]) - 1) // 2
        want = (f"each agent answers {k} pair{'' if k == 1 else 's'} (indices in "
                f"[0, {n_pairs}))")
        q = None if queries is None else np.asarray(queries)
        if q is None or q.ndim != 2 or q.shape[1] != k or q.dtype.kind not in "iu":
            got = ("none" if q is None else f"{q.shape[1]} per agent" if q.ndim == 2
                   and q.dtype.kind in "iu" else f"an array of {q.dtype} of shape {q.shape}")
            return f"the queries are not LDP-KwikSort's: {want}, got {got}"
        if q.size and (int(q.min()) < 0 or int(q.max()) >= n_pairs):
            return (f"the queries are not LDP-KwikSort's: {want}, got pair indices from "
                    f"{int(q.min())} to {int(q.max())}")
        return None

    def coins(self, block: Block, k: int) -> Any:
        """The agents' randomness for ``mechanism.perturb``: K uniforms (RR)."""
        return block.uniforms(k)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Σ_k the exact log-probability of each report given the true answer (ε/K each):
        log p or log(1 - p) for RR, the discrete Laplace's log-pmf for Laplace."""
        answers = self._queried_answers(block.rows, block.queries)
        return block.mechanism.log_likelihood(reports, answers).sum(axis=1)

    def resolve(self, params, public):
        out = super().resolve(params, public)
        n_pairs = int(public["m"]) * (int(public["m"]) - 1) // 2
        if out["queries"] == "auto":
            out["queries"] = auto_queries(out["epsilon"], n_pairs, self.g)
        elif out["queries"] > n_pairs:
            raise ParamError(f"[params] queries: got {out['queries']}; allowed: \"auto\" or an "
                             f"integer in [1, {n_pairs}] (C(m,2) pairs for m={public['m']})")
        return out

    def _queried_answers(self, data, queries):
        return profile.answers(data, np.asarray(queries, dtype=np.int64))

    def _aggregate_scale(self, bound: Bound) -> float:
        # each pair is asked of a fraction K / C(m,2) of the agents
        m = int(bound.public["m"])
        return bound.params["queries"] / (m * (m - 1) // 2)


class LDPKwikSortRR(_LDPRank):
    """LDP-KwikSort:RR — Algorithm 1 (randomized response with ε/K per answer) and Algorithm 2."""

    name = "ldp_kwiksort_rr"
    summary = "LDP: K random pairs per agent, randomized response with ε/K each"
    curator_cls = _RRCurator
    mechanism = mech.GRR


class LDPKwikSortLap(_LDPRank):
    """LDP-KwikSort:Lap — Algorithm 3 (o + Lap(1/ε_k)) and Algorithm 4 (threshold at 0.5).

    Yan, Li & Liu (2020) prove ε-LiDP with the local sensitivity 1; since o ∈ {0, 1} the global
    sensitivity is also 1, so each report is in fact ε/K-LDP.
    """

    name = "ldp_kwiksort_lap"
    summary = "LDP: K random pairs per agent, answer + Laplace(K/ε), thresholded at 0.5"
    curator_cls = _LapCurator
    g = staticmethod(g_lap)
    mechanism = mech.Laplace

    def coins(self, block: Block, k: int) -> Any:
        """The agents' words for the discrete Laplace noise."""
        return block.words()

    def laplace_release(self, block: Block):
        """Each answer o plus Lap(K/ε) (Algorithm 3), on the exact mechanism's grid."""
        o = self._queried_answers(block.rows, block.queries).astype(np.float64)
        return block.mechanism.release_spec(o)

    def true_aggregate(self, bound: Bound, rows: np.ndarray) -> np.ndarray:
        """E[ones - zeros] per pair over the given agents, exactly: an agent asked the pair
        adds 2 q1 - 1 when its answer is 1 and 1 - 2 q0 when it is 0 (q0, q1 the exact keep
        probabilities of the threshold at 0.5), and is asked it with probability K / C(m, 2)."""
        m = rows.shape[1]
        ans = profile.answers(rows, self._all_pairs(m, len(rows)))
        q0, q1 = bound.rounds[0].mechanism.threshold_keep_probabilities()
        per = np.where(ans == 1, 2 * q1 - 1, 1 - 2 * q0).sum(axis=0)
        return per * self._aggregate_scale(bound)
