"""Preference-ranking collection under LDP (Cheng, Yang, Wang, Su, Chen & Li, 2021, "Collecting
Preference Rankings under Local Differential Privacy"): SAFARI, its non-private version and the
four full-domain baselines.

This module is longer than the project's ~500-line guideline and stays one module: it wires the
paper's comparison set (SAFARI, NoPriv, GRR, OLH, Harmony, CALM) to the runtime, and the six share
one evaluation over the §6.1 marginals, the synthetic release and its public output, the private
ones' ε = ln 3 default and the audit candidates. The algorithms themselves already live in their own
modules (``safa``, ``lade``, ``anchors``, ``riffle``, ``rules``, ``calm``); splitting the protocols
too would scatter what makes them comparable.

SAFARI runs two rounds (§5.1):

* round 0 (Phases 1-2): the curator samples one Rule I attribute per user and sends its index;
  the user answers with SAFA's local randomizer (GRR over that attribute's domain) at ε/2. The
  curator estimates S1, derives S2 and S3 by LADE (or NAIVE / CALM with Rules I^N / I^C), computes
  the tripletwise MI and builds a K-thin chain by the Anchors method;
* round 1 (Phases 3-4): the chain is broadcast, the curator samples one Rule II attribute per
  user; the user answers GRR at ε/2; the curator estimates the relative-ranking and
  interleaving distributions;
* finish (Phase 5): n synthetic rankings are drawn from the RI model; the public output holds
  the chain, the model and the synthetic set's first- and second-order marginals.

Budget (Theorem 6): every user answers both rounds with ε/2 each, so sequential composition gives
ε-LDP (``split = "budget"``, the paper). ``split = "users"`` is an alternative the paper does not
use: a fraction of the users answers round 0 and the others round 1, each with the whole ε
(parallel composition, also ε-LDP).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
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
from ldpsim.protocols.mechanisms import hadamard, olh
from ldpsim.protocols.metrics import Metric, fraction
from ldpsim.protocols.safari import anchors, calm, lade, metrics, perm, riffle, rules, safa
from ldpsim.protocols.safari.riffle import Chain, RIModel

LN3 = math.log(3.0)
MAX_DOMAIN = math.factorial(10)
DIGITS = 7  # significant digits of the floats in the public output

RULE1 = {"lade": "I", "naive": "IN", "calm": "IC"}

EPSILON = ParamSpec("epsilon", "float", default=LN3, low=0, low_open=True, high=1000,
                    help="total privacy budget per user (the paper's default: ln 3)")
MAX_DOMAIN_SPEC = ParamSpec("max_domain", "int", default=MAX_DOMAIN, low=2,
                            help="largest attribute domain the curator will hold in memory "
                                 "(default 10! = 3628800)")
OUTPUT_RANKINGS = ParamSpec("output_rankings", "bool", default=False,
                            help="include the synthetic rankings in the output (large)")


def round_budgets(epsilon: float, split: str) -> tuple[float, float]:
    """ε of the SAFA report in round 0 and in round 1 (Theorem 6).

    ``"budget"``: both rounds are answered by every user with ε/2, sequential composition
    (Theorem 1) gives ε. ``"users"``: disjoint user groups, each answers one round with ε
    (parallel composition). GRR's guarantee is its likelihood ratio p/q = e^ε per report
    (Theorem 2); no sensitivity is involved.
    """
    return (epsilon / 2, epsilon / 2) if split == "budget" else (epsilon, epsilon)


def max_rule2_domain(d: int, K: int) -> int:
    """The largest Rule II domain of a K-thin chain with leaves of K items (§5.3: at most
    max(K!, C(d, K))); K >= d gives a single leaf, the d! full rankings."""
    size, dom = d, 1
    while size > K:
        dom = max(dom, math.comb(size, K), math.factorial(K))
        size -= K
    return max(dom, math.factorial(size))


def _need_marginal_truth(name: str, public: dict[str, Any]) -> int:
    if "d" not in public:
        raise ParamError(f"[data] kind: protocol {name!r} needs full rankings with marginal "
                         "ground truth; allowed: jester, safari_mallows, sushi_subset")
    return int(public["d"])


@lru_cache(maxsize=64)
def rule_of(name: str, d: int, chain: Chain | None = None) -> rules.Rule:
    return rules.Rule(name, d, chain)


def _chain_from(broadcast: Any, d: int) -> Chain:
    if not isinstance(broadcast, dict) or "chain" not in broadcast:
        raise ValueError("round 1 needs the K-thin chain broadcast")
    chain = Chain.of(broadcast["chain"])
    if chain.d != d:
        raise ValueError(f"the broadcast chain covers {chain.d} items, the data {d}")
    return chain


def _schema(oracle: str, domains: np.ndarray, epsilon: float) -> tuple[ReportSchema, float]:
    """(schema, information-theoretic report size in bits averaged over the attributes)."""
    dom = np.asarray(domains)
    if oracle == "safa":
        return ReportSchema("int", 1, 0, int(dom.max()) - 1), float(np.log2(dom).mean())
    if oracle == "harmony":
        kp = np.array([hadamard.order(int(k)) for k in dom])
        return ReportSchema("int", 2, 0, int(kp.max()) - 1), float(np.log2(kp).mean() + 1)
    return (ReportSchema("int", 2, 0, 2**olh.SEED_BITS - 1),
            olh.SEED_BITS + math.log2(olh.hash_range(epsilon)))


def _report_high(oracle: str, domains: np.ndarray, epsilon: float) -> np.ndarray:
    """Per-agent upper bounds of each report value, given the asked attribute's domain and the
    round's ε (OLH's hash range g depends on it).

    The runtime rejects reports above them (out of the sampled attribute's domain) before the
    estimator; the curator's own check (``safa.valid_reports``) stays as a second line.
    """
    dom = np.asarray(domains, dtype=np.int64)
    if oracle == "safa":
        return dom - 1
    if oracle == "harmony":
        kp = hadamard.orders(dom, dom.shape)
        return np.stack([kp - 1, np.ones_like(kp)], axis=1)
    g = olh.hash_range(epsilon)
    return np.stack([np.full(len(dom), 2**olh.SEED_BITS - 1, dtype=np.int64),
                     np.full(len(dom), g - 1, dtype=np.int64)], axis=1)


def _round_list(x: np.ndarray) -> Any:
    a = np.asarray(x, dtype=float)
    return np.vectorize(lambda v: float(f"{v:.{DIGITS}g}"), otypes=[float])(a).tolist() \
        if a.size else a.tolist()


def synthetic_output(syn: np.ndarray, include_rankings: bool) -> dict[str, Any]:
    """The public summary of a synthetic set: its size, how many rows are permutations, and
    the counts of its first- and second-order marginals (valid rows only)."""
    syn = np.asarray(syn, dtype=np.int64)
    ok = perm.is_permutation(syn)
    pos = perm.positions(syn[ok])
    out: dict[str, Any] = {
        "n_synthetic": int(len(syn)), "synthetic_valid": int(ok.sum()),
        "marginals": {"source": "synthetic", "n": int(ok.sum()),
                      "q1": metrics.q1_counts(pos).tolist(),
                      "q2": metrics.q2_counts(pos).tolist()}}
    if include_rankings:
        out["rankings"] = syn.tolist()
    return out


def audit_candidates(d: int) -> AuditSpec:
    """Candidate rankings of one agent: all d! for d <= 6, else the identity, its reverse and
    254 fixed random rankings; uniform prior. The pair is (identity, reverse): every relative
    order differs, so every Rule I^N / I^C / II value and, for even d, every rank differs —
    the inputs the randomizers find hardest to hide."""
    ident = np.arange(d)
    if d <= 6:
        vals = perm.all_permutations(d).astype(np.int64)
        i0 = 0
        i1 = int(perm.lex_rank(ident[::-1][None, :])[0])
    else:
        gen = rngm.party_generator(rngm.stream_key(0, "safari-audit", d))
        rest = np.stack([gen.permutation(d) for _ in range(254)])
        vals = np.vstack([ident, ident[::-1], rest])
        i0, i1 = 0, 1
    prior = np.full(len(vals), 1.0 / len(vals))
    return AuditSpec(vals.astype(np.int16), prior, (i0, i1),
                     notes="rows are rankings (item ids, best first)")


class _RankingProtocol(Protocol):
    family = "ranking collection (Cheng et al., 2021)"
    data_type = "ranking"
    metrics = (
        fraction("avd_q1", "AVD of the first-order marginals", "lower",
                 "§6.1: the mean total variation distance between the released and the true "
                 "item-position marginals"),
        fraction("avd_q2", "AVD of the second-order marginals", "lower",
                 "§6.1: the same over the pairwise (item pair before/after) marginals"),
        Metric("sse_q1", "SSE of the first-order marginals", low=0.0, better="lower",
               about="§6.1: the mean over marginals of the sum of squared errors"),
        Metric("sse_q2", "SSE of the second-order marginals", low=0.0, better="lower",
               about="§6.1: the same over the pairwise marginals"),
        fraction("valid_fraction", "valid synthetic rankings", "higher",
                 "the share of the synthetic rankings that are permutations"),
        fraction("avd_s1", "AVD of round 1's item estimates", "lower",
                 "Figs. 5-7 (with diagnostics): the first round's first-order estimates"),
        fraction("avd_s2", "AVD of round 1's pair estimates", "lower",
                 "Figs. 5-7 (with diagnostics): the first round's pairwise estimates"),
        fraction("avd_s3", "AVD of round 1's triple estimates", "lower",
                 "Figs. 5-7 (with diagnostics): the first round's third-order estimates"))
    #: Figs. 2-4 and 6-7 show the AVD and SSE over the first- and second-order marginals
    figure_metrics = ("avd_q1", "avd_q2", "sse_q1", "sse_q2")

    def evaluate(self, output: dict[str, Any], truth: dict[str, Any]) -> dict[str, float]:
        """avd_q1, avd_q2, sse_q1, sse_q2 (§6.1) of the released marginals; valid_fraction of
        the synthetic rankings; with ``diagnostics``, avd_s1/avd_s2/avd_s3 of the first round's
        estimates (Figs. 5-7)."""
        if "q1" not in truth:
            raise ValueError("evaluation needs a SAFARI data kind (jester, safari_mallows, "
                             "sushi_subset) whose truth holds the marginals")
        mg = output["marginals"]
        scale = max(1.0, float(mg["n"])) if mg.get("source") == "synthetic" else 1.0
        q1 = np.asarray(mg["q1"], dtype=float) / scale
        q2 = np.asarray(mg["q2"], dtype=float) / scale
        m = metrics.marginal_metrics(q1, q2, truth)
        if "n_synthetic" in output:
            m["valid_fraction"] = output["synthetic_valid"] / max(1, output["n_synthetic"])
        ph = output.get("phase1")
        if ph is not None:
            s2 = np.asarray(ph["s2"], dtype=float)
            t2 = np.asarray(truth["s2"], dtype=float)
            m["avd_s1"] = metrics.avd(ph["s1"], truth["q1"])
            m["avd_s2"] = metrics.avd(np.stack([s2, 1 - s2], 1), np.stack([t2, 1 - t2], 1))
            if truth.get("s3") is not None:
                m["avd_s3"] = metrics.avd(ph["s3"], truth["s3"])
        return m

    def audit_spec(self, bound: Bound) -> AuditSpec | None:
        return audit_candidates(int(bound.public["d"]))


# ----------------------------------------------------------------------------------- SAFARI


def phase1_distributions(rule1: str, z: list[np.ndarray], d: int, regression: str,
                         alpha: float, solver: str = "nnls"
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S1, S2, S3) from the first round's frequency estimates (§5.2): LADE from Rule I,
    NAIVE from Rule I^N, CALM from Rule I^C."""
    if rule1 == "lade":
        s1 = lade.project_simplex(np.stack(z))
        s2, s3, _ = lade.lade(s1, regression, alpha, solver)
        return s1, s2, s3
    if rule1 == "naive":
        s3 = lade.project_simplex(np.stack(z))
        s1, s2 = lade.naive(s3, d)
        return s1, s2, s3
    return calm.from_pair_frequencies(z, d)


def model_from_rule2(chain: Chain, z: list[np.ndarray]) -> RIModel:
    """Phase 4: the RI model's distributions from the Rule II estimates, each projected onto
    the simplex (leaves of one item have the single relative ranking, probability 1)."""
    rule = rule_of("II", chain.d, chain)
    by_leaf = dict(zip(rule.leaf_attrs, range(len(rule.leaf_attrs)), strict=True))
    leaf = [lade.project_simplex(z[by_leaf[j]]) if j in by_leaf else np.ones(1)
            for j in range(len(chain.leaves))]
    n_leaf = len(rule.leaf_attrs)
    inter = [lade.project_simplex(z[n_leaf + t]) for t in range(chain.n_internal)]
    return RIModel(chain, leaf, inter)


class _SafariCurator(Curator):
    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        params, public = bound.params, bound.public
        self.d = int(public["d"])
        self.rules: dict[int, rules.Rule] = {0: rule_of(RULE1[params["rule1"]], self.d)}
        # the rounds' bound oracles (``Safari.rounds``)
        self.oracles = (bound.rounds[0].mechanism, bound.rounds[1].mechanism)
        self.eps = tuple(o.epsilon for o in self.oracles)
        self.asked = self._assign()
        self.attrs: dict[int, np.ndarray] = {}
        self.chain: Chain | None = None
        self.model: RIModel | None = None
        self.phase1: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.stats.update(out_of_domain=[0, 0], reports=[0, 0])

    def _assign(self) -> list[np.ndarray]:
        if self.params["split"] == "budget":
            return [self.agents, self.agents]
        u = rngm.uniform(rngm.stream_key(self.key, "safari-split"), self.agents, 0, 1)[:, 0]
        first = u < self.params["phase1_fraction"]
        return [self.agents[first], self.agents[~first]]

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 1:
            return None
        rule = self.rules[rnd]
        agents = self.asked[rnd]
        u = rngm.uniform(rngm.stream_key(self.key, "safa-attributes"), agents, rnd, 1)[:, 0]
        attrs = safa.sample_attributes(u, rule.n_attrs)
        self.attrs[rnd] = attrs
        oracle = self.oracles[rnd].kind
        schema, bits = _schema(oracle, rule.domains, self.eps[rnd])
        bc = None if rnd == 0 else {"chain": self.chain.to_wire()}
        high = _report_high(oracle, rule.domains[attrs], self.eps[rnd])
        return RoundPlan(rnd, agents, attrs[:, None], bc, schema, report_bits=bits,
                         report_high=high)

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        rule = self.rules[rnd]
        oracle = self.oracles[rnd]
        attrs = self.attrs[rnd][np.searchsorted(self.asked[rnd], agents)]
        reports = _rows(reports, len(agents))
        ok = oracle.valid_reports(reports, rule.domains[attrs])
        self.stats["out_of_domain"][rnd] += int((~ok).sum())
        self.stats["reports"][rnd] += int(ok.sum())
        z = oracle.estimate(attrs[ok], reports[ok], rule.domains, self.params["estimator"])
        if rnd == 0:
            p = self.params
            alpha = p["lasso_alpha"] if p["regression"] == "lasso" else p["ridge_alpha"]
            self.phase1 = phase1_distributions(p["rule1"], z, self.d, p["regression"], alpha,
                                               p["lasso_solver"])
            mi = anchors.tripletwise_mi(self.phase1[2], self.d)
            self.chain = anchors.learn_chain(mi, p["K"], p["leaf_size"])
            self.rules[1] = rule_of("II", self.d, self.chain)
        else:
            self.model = model_from_rule2(self.chain, z)

    def finish(self) -> dict[str, Any]:
        gen = rngm.party_generator(rngm.stream_key(self.key, "safari-synthesis"))
        syn = self.model.sample(len(self.agents), gen)
        out = {"chain": self.chain.to_wire(), "model": self.model.to_wire(DIGITS),
               **synthetic_output(syn, self.params["output_rankings"]),
               "stats": {k: list(v) for k, v in self.stats.items()}}
        if self.params["diagnostics"]:
            s1, s2, s3 = self.phase1
            out["phase1"] = {"s1": _round_list(s1), "s2": _round_list(s2),
                             "s3": _round_list(s3)}
        return out


class Safari(_RankingProtocol):
    """SAFARI (Cheng et al., 2021, §5): Rule I → SAFA (ε/2) → LADE → K-thin chain by Anchors →
    broadcast → Rule II → SAFA (ε/2) → RI parameters → n synthetic rankings."""

    name = "safari"
    summary = "LDP: SAFA on Rule I (ε/2), LADE + Anchors chain, SAFA on Rule II (ε/2), synthesis"
    params = {
        "epsilon": EPSILON,
        "K": ParamSpec("K", "int", default=1, low=1,
                       help="maximum leaf size of the K-thin chain (the paper's default: 1; "
                            "K >= d is one leaf: GRR over the d! rankings at ε/2)"),
        "rule1": ParamSpec("rule1", "str", default="lade", choices=tuple(RULE1),
                           help="first-round method: LADE (Rule I), NAIVE (Rule I^N) or CALM "
                                "(Rule I^C, OLH) — Fig. 6"),
        "regression": ParamSpec("regression", "str", default="lasso",
                                choices=lade.REGRESSIONS,
                                help="LADE's regression (Fig. 7)"),
        "lasso_alpha": ParamSpec("lasso_alpha", "float", default=1e-4, low=0,
                                 help="Lasso penalty (1/(2m))||y-Mp||² + α||p||₁; 0 = end of "
                                      "the LARS path"),
        "lasso_solver": ParamSpec("lasso_solver", "str", default="nnls",
                                  choices=lade.LASSO_SOLVERS,
                                  help="which Lasso optimum: NNLS's sparse vertex or the "
                                       "coordinate-descent limit (the optimum is not unique)"),
        "ridge_alpha": ParamSpec("ridge_alpha", "float", default=1e-3, low=0, low_open=True,
                                 help="ridge penalty ||y-Mp||² + α||p||²"),
        "oracle": ParamSpec("oracle", "str", default="safa", choices=("safa", "harmony"),
                            help="frequency oracle of both collections: SAFA's GRR or "
                                 "Harmony (Fig. 5); Rule I^C always uses OLH in round 0"),
        "estimator": ParamSpec("estimator", "str", default="paper", choices=safa.ESTIMATORS,
                               help='"paper": Algorithm 1 line 11 (n/|A|); "group": n_j'),
        "split": ParamSpec("split", "str", default="budget", choices=("budget", "users"),
                           help='"budget": every user answers both rounds at ε/2 (Theorem 6); '
                                '"users": disjoint user groups at ε each'),
        "phase1_fraction": ParamSpec("phase1_fraction", "float", default=0.5, low=0,
                                     low_open=True, high=1,
                                     help='share of users in round 0 with split = "users"'),
        "leaf_size": ParamSpec("leaf_size", "str", default="K", choices=anchors.LEAF_SIZES,
                               help='"K": leaves of exactly K items; "upto_K": 1..K'),
        "diagnostics": ParamSpec("diagnostics", "bool", default=False,
                                 help="publish the round-0 estimates S1, S2, S3 (Figs. 5-7)"),
        "output_rankings": OUTPUT_RANKINGS,
        "max_domain": MAX_DOMAIN_SPEC,
    }

    @staticmethod
    def oracle_for(params: dict[str, Any], rnd: int) -> str:
        """The frequency oracle of a round: OLH for Rule I^C (CALM's), else the parameter."""
        if rnd == 0 and params["rule1"] == "calm":
            return "olh"
        return params["oracle"]

    def resolve(self, params, public):
        d = _need_marginal_truth(self.name, public)
        out = super().resolve(params, public)
        K = out["K"]
        dom = max_rule2_domain(d, K)
        if dom > out["max_domain"]:
            raise ParamError(f"[params] K: Rule II domains reach {dom} values for K = {K}, "
                             f"d = {d} (K! per leaf, C(|g|, K) per interleaving), above "
                             f"max_domain = {out['max_domain']}; allowed: a smaller K or a "
                             "larger max_domain")
        if out["split"] == "users" and out["phase1_fraction"] >= 1:
            raise ParamError(f"[params] phase1_fraction: got {out['phase1_fraction']}; "
                             "allowed: a number in (0, 1) with split = \"users\"")
        return out

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """Two rounds, each a SAFA oracle (OLH for Rule I^C in round 0): ε/2 each with
        ``split = "budget"`` (sequential composition, Theorem 6); ε each with ``split =
        "users"``, where a user answers one round only (parallel composition; a user asked in
        both would pass its budget, and its pool refuses)."""
        budgets = round_budgets(params["epsilon"], params["split"])
        sequential = params["split"] == "budget"
        comp = ("sequential composition of two ε/2 rounds (Theorem 6)" if sequential
                else "parallel composition (disjoint users)")
        return Rounds("local", tuple(Round(safa.Oracle(self.oracle_for(params, r), eps))
                                     for r, eps in enumerate(budgets)),
                      composition="sequential" if sequential else "parallel",
                      epsilon=params["epsilon"],
                      notes=f"SAFA: attribute sampled independently of the data; {comp}")

    curator_cls = _SafariCurator

    def report_numbers(self, bound: Bound) -> int | None:
        """Numbers of one report in the longer round: SAFA's GRR sends the value (1), Harmony
        (row, bit) and OLH (seed, hashed value) two (``safa.report_length``)."""
        return max(safa.report_length(self.oracle_for(bound.params, r)) for r in (0, 1))

    def query_refusal(self, bound: Bound, rnd: int, queries: np.ndarray | None,
                      broadcast: Any) -> str | None:
        """Each user is asked one attribute index of the round's rule (Algorithm 1, line 3:
        Rule I in round 0, Rule II of the broadcast K-thin chain in round 1). A round past the
        second is the odometer's to refuse (its ε is ∞)."""
        if rnd not in (0, 1):
            return None
        try:
            rule = self._round_rule(rnd, broadcast, bound.params, int(bound.public["d"]))
        except Exception as e:  # noqa: BLE001 - any malformed chain is refused, with why
            return f"round {rnd}'s K-thin chain is not one of these items: {e}"[:200]
        return _attribute_refusal(queries, rule.n_attrs)

    def _round_rule(self, rnd: int, broadcast: Any, params: dict[str, Any], d: int) -> rules.Rule:
        if rnd == 0:
            return rule_of(RULE1[params["rule1"]], d)
        if rnd == 1:
            return rule_of("II", d, _chain_from(broadcast, d))
        raise ValueError(f"SAFARI has rounds 0 and 1, not {rnd}")

    def respond(self, block: Block) -> np.ndarray:
        """Algorithm 2 (LR): the user's value of the queried attribute, through GRR (or the
        chosen oracle) at the round's ε. Draws: two uniforms and 64 bits, keyed by agent."""
        d = int(block.public["d"])
        rule = self._round_rule(block.rnd, block.broadcast, block.params, d)
        attrs = np.asarray(block.queries, dtype=np.int64).reshape(len(block.rows), -1)[:, 0]
        if len(attrs) and (attrs.min() < 0 or attrs.max() >= rule.n_attrs):
            raise ValueError(f"attribute index outside [0, {rule.n_attrs})")
        values = rule.values(perm.positions(block.rows), attrs)
        u = block.uniforms(2)
        seed_bits = block.bits(1, offset=2)[:, 0]
        return block.mechanism.perturb(values, rule.domains[attrs], u, seed_bits)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        """Exact: GRR (or Harmony / OLH) probability of the report given the queried value."""
        d = int(block.public["d"])
        rule = self._round_rule(block.rnd, block.broadcast, block.params, d)
        attrs = np.asarray(block.queries, dtype=np.int64).reshape(len(block.rows), -1)[:, 0]
        values = rule.values(perm.positions(block.rows), attrs)
        return block.mechanism.log_likelihood(np.asarray(reports).reshape(len(block.rows), -1),
                                              values, rule.domains[attrs])



# ---------------------------------------------------------------------------------- NoPriv


class _NoPrivCurator(Curator):
    def plan(self, rnd):
        if rnd > 0:
            return None
        d = int(self.public["d"])
        return RoundPlan(rnd, self.agents, None, None, ReportSchema("int", d, 0, d - 1),
                         report_bits=math.log2(math.factorial(d)))

    def absorb(self, rnd, agents, reports):
        r = np.asarray(reports, dtype=np.int64)
        ok = perm.is_permutation(r)
        self.stats["invalid_rankings"] = int((~ok).sum())
        self.rankings = r[ok]

    def finish(self):
        d = int(self.public["d"])
        p = self.params
        pos = perm.positions(self.rankings)
        n = max(1, len(pos))
        method = p["rule1"]
        if method == "lade":
            s1 = metrics.q1_counts(pos) / n
            s2, s3, _ = lade.lade(s1, p["regression"],
                                  p["lasso_alpha"] if p["regression"] == "lasso"
                                  else p["ridge_alpha"], p["lasso_solver"])
        elif method == "calm":
            joints = metrics.q2_counts(pos) / n
            s1 = metrics.q1_counts(pos) / n
            s2 = lade.s2_from_joint(joints)
            s3 = calm.s3_from_joints(joints)
        else:  # exact, naive: S3 exactly, S1 and S2 integrate exactly
            s3 = metrics.s3_counts(pos) / n
            s1 = metrics.q1_counts(pos) / n
            s2 = lade.s2_from_joint(metrics.q2_counts(pos) / n)
        chain = anchors.learn_chain(anchors.tripletwise_mi(s3, d), p["K"], p["leaf_size"])
        model = riffle.fit_exact(self.rankings, chain)
        gen = rngm.party_generator(rngm.stream_key(self.key, "safari-synthesis"))
        syn = model.sample(len(self.agents), gen)
        out = {"chain": chain.to_wire(), "model": model.to_wire(DIGITS),
               **synthetic_output(syn, p["output_rankings"]), "stats": dict(self.stats)}
        if p["diagnostics"]:
            out["phase1"] = {"s1": _round_list(s1), "s2": _round_list(s2),
                             "s3": _round_list(s3)}
        return out


class SafariNoPriv(_RankingProtocol):
    """NoPriv (§6.2, Fig. 4): SAFARI without privacy. Every user sends the true ranking; the
    curator builds the chain from the exact tripletwise MI (or from LADE*/NAIVE*/CALM* estimates
    computed from exact inputs, Fig. 6's starred lines) and fits the RI model exactly."""

    name = "safari_nopriv"
    summary = "non-private SAFARI: exact MI, Anchors chain, exact RI parameters, synthesis"
    params = {
        "K": Safari.params["K"],
        "rule1": ParamSpec("rule1", "str", default="exact",
                           choices=("exact", "lade", "naive", "calm"),
                           help="structure from the exact S3, or LADE*/NAIVE*/CALM* (Fig. 6)"),
        "regression": Safari.params["regression"],
        "lasso_alpha": Safari.params["lasso_alpha"],
        "lasso_solver": Safari.params["lasso_solver"],
        "ridge_alpha": Safari.params["ridge_alpha"],
        "leaf_size": Safari.params["leaf_size"],
        "diagnostics": Safari.params["diagnostics"],
        "output_rankings": OUTPUT_RANKINGS,
    }

    def resolve(self, params, public):
        _need_marginal_truth(self.name, public)
        return super().resolve(params, public)

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        return Rounds.none(notes="every user sends the true ranking")

    def report_numbers(self, bound: Bound) -> int | None:
        """d numbers per report: the user's whole ranking."""
        return int(bound.public["d"])

    curator_cls = _NoPrivCurator

    def respond(self, block: Block) -> np.ndarray:
        return np.asarray(block.rows, dtype=np.int64)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        same = (np.asarray(reports) == np.asarray(block.rows)).all(axis=1)
        return np.where(same, 0.0, -np.inf)


# ------------------------------------------------------------------- full-domain baselines


def _full_domain_check(name: str, d: int, max_domain: int) -> int:
    size = math.factorial(d)
    if d > 12 or size > max_domain:
        raise ParamError(f"[params] max_domain: protocol {name!r} works on all d! = {size} "
                         f"rankings of d = {d} items (about {16 * size / 2**20:.0f} MiB), above "
                         f"max_domain = {max_domain}; allowed: d with d! <= max_domain (raise "
                         "max_domain if memory allows; d <= 12 at most)")
    return size


def release(f: np.ndarray, d: int, how: str, n: int, key: int,
            include_rankings: bool) -> dict[str, Any]:
    """Public output of a full-domain estimate f over the d! rankings (lexicographic order).

    ``"synthetic"``: project f onto the simplex and draw n synthetic rankings from it (the
    paper's problem statement, §3.4); ``"estimate"``: the marginals of f itself, negative cells
    included (what the paper's Fig. 3 evidently plots: "AVD ... larger than 1").
    """
    if how == "estimate":
        q1, q2 = metrics.distribution_marginals(f, perm.all_positions(d))
        return {"marginals": {"source": "estimate", "n": 1, "q1": _round_list(q1),
                              "q2": _round_list(q2)}}
    p = lade.project_simplex(f)
    gen = rngm.party_generator(rngm.stream_key(key, "safari-synthesis"))
    idx = riffle.draw_indices(p, n, gen)
    return synthetic_output(perm.lex_unrank(idx, d), include_rankings)


RELEASE = ParamSpec("release", "str", default="synthetic", choices=("synthetic", "estimate"),
                    help='"synthetic": n rankings drawn from the simplex-projected estimate; '
                         '"estimate": marginals of the raw unbiased estimate (AVD may exceed 1)')


class _FullDomainCurator(Curator):
    @property
    def oracle(self) -> str:
        """The protocol's frequency oracle over the d! rankings."""
        return self.protocol.oracle

    def plan(self, rnd):
        if rnd > 0:
            return None
        d = int(self.public["d"])
        size = math.factorial(d)
        eps = self.bound.rounds[0].mechanism.epsilon
        if self.oracle == "grr":
            schema, bits = ReportSchema("int", 1, 0, size - 1), math.log2(size)
        elif self.oracle == "harmony":
            kp = hadamard.order(size)
            schema, bits = ReportSchema("int", 2, 0, kp - 1), math.log2(kp) + 1
        else:
            schema, bits = _schema("olh", np.array([size]), eps)
        return RoundPlan(rnd, self.agents, None, None, schema, report_bits=bits)

    def absorb(self, rnd, agents, reports):
        d = int(self.public["d"])
        size = math.factorial(d)
        r = _rows(reports, len(agents))
        oracle = self.bound.rounds[0].mechanism
        ok = oracle.valid_reports(r, size)
        self.stats["out_of_domain"] = int((~ok).sum())
        r = r[ok]
        n = len(r)
        m = oracle.mechanism(size)
        if self.oracle == "grr":
            self.f = m.estimate(np.bincount(r[:, 0], minlength=size), n)
        elif self.oracle == "harmony":
            self.f = m.estimate(r[:, 0], r[:, 1], size, n)
        else:
            self.f = m.estimate(m.support_counts(r[:, 0], r[:, 1], size), n)

    def finish(self):
        d = int(self.public["d"])
        out = release(self.f, d, self.params["release"], len(self.agents), self.key,
                      self.params["output_rankings"])
        out["stats"] = dict(self.stats)
        return out


class _FullDomain(_RankingProtocol):
    """A frequency oracle over all d! rankings (§4): each ranking is one categorical value,
    its lexicographic index."""

    oracle = "grr"
    params = {"epsilon": EPSILON, "release": RELEASE, "max_domain": MAX_DOMAIN_SPEC,
              "output_rankings": OUTPUT_RANKINGS}

    def resolve(self, params, public):
        d = _need_marginal_truth(self.name, public)
        out = super().resolve(params, public)
        _full_domain_check(self.name, d, out["max_domain"])
        return out

    #: the claim's note on what one report covers
    report_notes = "one report per user over the d! rankings"

    def rounds(self, params: dict[str, Any], public: dict[str, Any]) -> Rounds:
        """One round: one report per user through the protocol's oracle at ε."""
        kind = {"grr": "safa", "harmony": "harmony", "olh": "olh"}[self.oracle]
        return Rounds("local", (Round(safa.Oracle(kind, params["epsilon"])),),
                      mechanism=self.oracle, notes=self.report_notes)

    curator_cls = _FullDomainCurator

    def report_numbers(self, bound: Bound) -> int | None:
        """Numbers of one report: GRR sends the ranking's index (1), Harmony (row, bit) and
        OLH (seed, hashed value) two."""
        return 1 if self.oracle == "grr" else 2

    def respond(self, block: Block) -> np.ndarray:
        v = perm.lex_rank(np.asarray(block.rows, dtype=np.int64))
        size = math.factorial(int(block.public["d"]))
        u = block.uniforms(2)
        oracle = block.mechanism
        seed_bits = (block.bits(1, offset=2)[:, 0] if oracle.kind == "olh"
                     else None)
        return oracle.perturb(v, size, u, seed_bits)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        v = perm.lex_rank(np.asarray(block.rows, dtype=np.int64))
        size = math.factorial(int(block.public["d"]))
        return block.mechanism.log_likelihood(np.asarray(reports).reshape(len(block.rows), -1),
                                              v, np.full(len(v), size))


class RankGRR(_FullDomain):
    """GRR over the d! rankings (§4.1): keep the true ranking with e^ε/(e^ε + d! - 1)."""

    name = "rank_grr"
    summary = "LDP baseline: GRR over all d! rankings"
    oracle = "grr"


class RankHarmony(_FullDomain):
    """Harmony over the d! rankings (§4.2). The paper describes a random ±1/√m projection
    (m = O(n)); we use the orthogonal (Sylvester–Hadamard) projection of Harmony's categorical
    oracle: the user reports one RR'd coefficient (row s, bit), the curator inverts with a fast
    Walsh–Hadamard transform (same O(1) report, no m × d! matrix to hold)."""

    name = "rank_harmony"
    summary = "LDP baseline: Harmony (Hadamard coefficient + binary RR) over all d! rankings"
    oracle = "harmony"


class RankOLH(_FullDomain):
    """OLH over the d! rankings (§4.3): the user sends a 32-bit hash seed and the GRR'd hash of
    its ranking in [g], g = round(e^ε) + 1. Decoding costs n · d! hash evaluations, capped by
    ``max_work``."""

    name = "rank_olh"
    summary = "LDP baseline: OLH over all d! rankings (hash seed + perturbed hash)"
    oracle = "olh"
    params = {**_FullDomain.params,
              "max_work": ParamSpec("max_work", "float", default=2e9, low=1,
                                    help="largest n · d! decoding work (hash evaluations)")}

    def resolve(self, params, public):
        out = super().resolve(params, public)
        d, n = int(public["d"]), int(public["n"])
        work = n * math.factorial(d)
        if work > out["max_work"]:
            raise ParamError(f"[params] max_work: OLH decoding needs n · d! = {n} · "
                             f"{math.factorial(d)} = {work:.3g} hash evaluations, above "
                             f"max_work = {out['max_work']:.3g} (about 10 s per 1e9); allowed: "
                             "fewer agents or items, or a larger max_work")
        return out


class _CalmCurator(Curator):
    def plan(self, rnd):
        if rnd > 0:
            return None
        d = int(self.public["d"])
        self.rule = rule_of("IC", d)
        u = rngm.uniform(rngm.stream_key(self.key, "safa-attributes"), self.agents, rnd, 1)
        self.attrs = safa.sample_attributes(u[:, 0], self.rule.n_attrs)
        eps = self.bound.rounds[0].mechanism.epsilon
        schema, bits = _schema("olh", self.rule.domains, eps)
        return RoundPlan(rnd, self.agents, self.attrs[:, None], None, schema, report_bits=bits,
                         report_high=_report_high("olh", self.rule.domains[self.attrs], eps))

    def absorb(self, rnd, agents, reports):
        oracle = self.bound.rounds[0].mechanism
        attrs = self.attrs[np.searchsorted(self.agents, agents)]
        r = _rows(reports, len(agents))
        ok = oracle.valid_reports(r, self.rule.domains[attrs])
        self.stats["out_of_domain"] = int((~ok).sum())
        self.z = oracle.estimate(attrs[ok], r[ok], self.rule.domains, "group")

    def finish(self):
        d = int(self.public["d"])
        joints = calm.make_consistent(lade.joint_to_square(np.asarray(self.z), d))
        f, collapsed = calm.maxent_rankings(joints, perm.all_positions(d),
                                            self.params["ipf_iters"])
        self.stats["maxent_collapsed"] = collapsed
        out = release(f, d, self.params["release"], len(self.agents), self.key,
                      self.params["output_rankings"])
        out["stats"] = dict(self.stats)
        return out


class RankCALM(_FullDomain):
    """CALM-based baseline (§4.4): users split uniformly between the C(d,2) pairs of items, each
    reports the pair's absolute ranks with OLH (full ε); the curator makes the 2-D marginals
    consistent and reconstructs the distribution over the d! rankings by maximum entropy (IPF).
    Simplified from CALM as described in :mod:`protocols.safari.calm`."""

    name = "rank_calm"
    summary = "LDP baseline: CALM-style 2-D rank marginals (OLH) + max-entropy over d! rankings"
    oracle = "olh"
    params = {**_FullDomain.params,
              "ipf_iters": ParamSpec("ipf_iters", "int", default=20, low=1,
                                     help="IPF sweeps over the C(d,2) pair constraints")}

    report_notes = "each user reports one pair marginal (CALM's partition)"

    curator_cls = _CalmCurator

    def query_refusal(self, bound: Bound, rnd: int, queries: np.ndarray | None,
                      broadcast: Any) -> str | None:
        """Each user is asked one pair of items, an attribute index of Rule I^C (CALM's
        partition)."""
        if rnd != 0:
            return None
        return _attribute_refusal(queries, rule_of("IC", int(bound.public["d"])).n_attrs)

    def respond(self, block: Block) -> np.ndarray:
        d = int(block.public["d"])
        rule = rule_of("IC", d)
        attrs = np.asarray(block.queries, dtype=np.int64).reshape(len(block.rows), -1)[:, 0]
        if len(attrs) and (attrs.min() < 0 or attrs.max() >= rule.n_attrs):
            raise ValueError(f"pair index outside [0, {rule.n_attrs})")
        values = rule.values(perm.positions(block.rows), attrs)
        u = block.uniforms(2)
        seed_bits = block.bits(1, offset=2)[:, 0]
        return block.mechanism.perturb(values, rule.domains[attrs], u, seed_bits)

    def log_likelihood(self, block: Block, reports: np.ndarray) -> np.ndarray | None:
        d = int(block.public["d"])
        rule = rule_of("IC", d)
        attrs = np.asarray(block.queries, dtype=np.int64).reshape(len(block.rows), -1)[:, 0]
        values = rule.values(perm.positions(block.rows), attrs)
        return block.mechanism.log_likelihood(np.asarray(reports).reshape(len(block.rows), -1),
                                              values, rule.domains[attrs])


def _attribute_refusal(queries: np.ndarray | None, n_attrs: int) -> str | None:
    """Why ``queries`` are not one attribute index in [0, ``n_attrs``) per user, or None."""
    q = None if queries is None else np.asarray(queries)
    if q is None or q.ndim != 2 or q.shape[1] != 1 or q.dtype.kind not in "iu":
        got = "none" if q is None else f"an array of {q.dtype} of shape {q.shape}"
        return f"each user is asked one attribute index in [0, {n_attrs}), got {got}"
    if q.size and (int(q.min()) < 0 or int(q.max()) >= n_attrs):
        return (f"each user is asked one attribute index in [0, {n_attrs}), got indices from "
                f"{int(q.min())} to {int(q.max())}")
    return None


def _rows(reports: Any, n: int) -> np.ndarray:
    """The reports of ``n`` agents as int64 rows (n = 0, every agent a dropout: no rows, of
    the width the array has)."""
    r = np.asarray(reports, dtype=np.int64)
    return r.reshape(n, -1) if n else r.reshape(0, r.shape[-1] if r.ndim == 2 else 0)
