"""Preference-ranking collection under LDP (Cheng, Yang, Wang, Su, Chen & Li, 2021, "Collecting
Preference Rankings under Local Differential Privacy"): SAFARI and its non-private version.

The four full-domain baselines of the paper's comparison are in ``baselines``; what the six share
(the evaluation over the §6.1 marginals, the synthetic release, the ε = ln 3 default, the audit
candidates) in ``ranking``. The algorithms themselves live in their own modules (``safa``,
``lade``, ``anchors``, ``riffle``, ``rules``, ``calm``).

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
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import (
    Block,
    Bound,
    Curator,
    ParamError,
    ParamSpec,
    ReportSchema,
    Round,
    RoundPlan,
    Rounds,
)
from ldpsim.protocols.queries import RowQueries, rows_of
from ldpsim.protocols.safari import anchors, calm, lade, metrics, perm, riffle, rules, safa
from ldpsim.protocols.safari.ranking import (
    DIGITS,
    EPSILON,
    MAX_DOMAIN_SPEC,
    OUTPUT_RANKINGS,
    RankingProtocol,
    attribute_refusal,
    need_marginal_truth,
    report_high,
    report_rows,
    report_schema,
    round_list,
    rule_of,
    synthesis,
)
from ldpsim.protocols.safari.riffle import Chain, RIModel

RULE1 = {"lade": "I", "naive": "IN", "calm": "IC"}


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


def _chain_from(broadcast: Any, d: int) -> Chain:
    if not isinstance(broadcast, dict) or "chain" not in broadcast:
        raise ValueError("round 1 needs the K-thin chain broadcast")
    chain = Chain.of(broadcast["chain"])
    if chain.d != d:
        raise ValueError(f"the broadcast chain covers {chain.d} items, the data {d}")
    return chain


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


#: agents whose round assignment (``split = "users"``) is drawn at a time
SPLIT_ROWS = 1 << 16


class _SafariCurator(Curator):
    """SAFARI's curator over whole rounds (the reference the curators that take the rounds in
    parts match: ``_SafariPartsCurator``, ``_SafariOrderedCurator``)."""

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
        """The agents asked in each round: all of them twice (``split = "budget"``), else
        each in round 0 with probability ``phase1_fraction`` and in round 1 otherwise, from
        one uniform keyed by the agent (drawn ``SPLIT_ROWS`` agents at a time)."""
        if self.params["split"] == "budget":
            return [self.agents, self.agents]
        key, frac = rngm.stream_key(self.key, "safari-split"), self.params["phase1_fraction"]
        parts: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        for lo in range(0, len(self.agents), SPLIT_ROWS):
            agents = np.asarray(self.agents[lo:lo + SPLIT_ROWS], dtype=np.int64)
            first = rngm.uniform(key, agents, 0, 1)[:, 0] < frac
            parts[0].append(agents[first])
            parts[1].append(agents[~first])
        empty = np.zeros(0, dtype=np.int64)
        return [np.concatenate(p) if p else empty for p in parts]

    def draw_attributes(self, rnd: int, lo: int, hi: int) -> np.ndarray:
        """Algorithm 1 line 3: the attribute index asked of each of round ``rnd``'s agents
        ``lo .. hi - 1`` (in the order of ``asked``), from a uniform keyed by the agent."""
        u = rngm.uniform(rngm.stream_key(self.key, "safa-attributes"),
                         self.asked[rnd][lo:hi], rnd, 1)[:, 0]
        return safa.sample_attributes(u, self.rules[rnd].n_attrs)

    def plan(self, rnd: int) -> RoundPlan | None:
        if rnd > 1:
            return None
        rule = self.rules[rnd]
        agents = self.asked[rnd]
        attrs = self.draw_attributes(rnd, 0, len(agents))
        self.attrs[rnd] = attrs
        oracle = self.oracles[rnd].kind
        schema, bits = report_schema(oracle, rule.domains, self.eps[rnd])
        bc = None if rnd == 0 else {"chain": self.chain.to_wire()}
        high = report_high(oracle, rule.domains[attrs], self.eps[rnd])
        return RoundPlan(rnd, agents, attrs[:, None], bc, schema, report_bits=bits,
                         report_high=high)

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        rule = self.rules[rnd]
        oracle = self.oracles[rnd]
        attrs = self.attrs[rnd][np.searchsorted(self.asked[rnd], agents)]
        reports = report_rows(reports, len(agents))
        ok = oracle.valid_reports(reports, rule.domains[attrs])
        self.stats["out_of_domain"][rnd] += int((~ok).sum())
        self.stats["reports"][rnd] += int(ok.sum())
        self.estimated(rnd, oracle.estimate(attrs[ok], reports[ok], rule.domains,
                                            self.params["estimator"]))

    def estimated(self, rnd: int, z: list[np.ndarray]) -> None:
        """Round ``rnd``'s frequency estimates ``z`` taken: round 0's give S1, S2, S3, the
        tripletwise MI and the K-thin chain (Phases 1-2), round 1's the RI model (Phase 4)."""
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
        out = {"chain": self.chain.to_wire(), "model": self.model.to_wire(DIGITS),
               **synthesis(self.model, len(self.agents), self.key,
                           self.params["output_rankings"]),
               "stats": {k: list(v) for k, v in self.stats.items()}}
        if self.params["diagnostics"]:
            s1, s2, s3 = self.phase1
            out["phase1"] = {"s1": round_list(s1), "s2": round_list(s2),
                             "s3": round_list(s3)}
        return out


class _AgentBounds(RowQueries):
    """One report bound per asked agent, drawn a range at a time like the queries (the
    runtime reads the rows of each batch it screens, ``RowQueries.take``); read whole it is
    the (N,) array ``report_high`` gives."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return super().__array__(dtype, copy)[:, 0]


class _SafariPartsCurator(_SafariCurator):
    """SAFARI's curator when both rounds' oracles count (GRR, OLH): each round's attributes
    are drawn as its queries go out (keyed by agent, drawn again for the reports absorbed),
    and its reports are kept as ``safa.tally``'s integer counts, absorbed in parts; a round's
    estimate is made from them once it is over (the next plan, or ``finish``)."""

    absorbs_in_parts = True

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.plans: dict[int, RoundPlan] = {}
        #: per open round: (reports per attribute, counts per attribute value)
        self.counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def plan(self, rnd: int) -> RoundPlan | None:
        self._close(rnd - 1)
        if rnd > 1:
            return None
        rule, agents, eps = self.rules[rnd], self.asked[rnd], self.eps[rnd]
        oracle = self.oracles[rnd].kind
        schema, bits = report_schema(oracle, rule.domains, eps)
        bc = None if rnd == 0 else {"chain": self.chain.to_wire()}

        def draw(lo: int, hi: int) -> np.ndarray:  # keyed by agent: any range, the same
            return self.draw_attributes(rnd, lo, hi)[:, None]

        dom = rule.domains
        if oracle == "olh" or (dom == dom[0]).all():  # one bound for every agent
            one = report_high(oracle, dom[:1], eps)
            high = np.broadcast_to(one, (len(agents),) + one.shape[1:])
        elif oracle == "harmony":  # its row's bound is the asked attribute's order k'
            high = RowQueries(lambda lo, hi: report_high(oracle, dom[draw(lo, hi)[:, 0]], eps),
                              len(agents), 2, np.int64)
        else:  # GRR's bound is the asked attribute's domain
            high = _AgentBounds(lambda lo, hi: dom[draw(lo, hi)] - 1, len(agents), 1, np.int64)
        self.plans[rnd] = plan = RoundPlan(rnd, agents, RowQueries(draw, len(agents), 1,
                                                                   np.int64),
                                           bc, schema, report_bits=bits, report_high=high)
        self.counts[rnd] = (np.zeros(rule.n_attrs, dtype=np.int64),
                            np.zeros(int(safa.harmony_offsets(dom)[-1]), dtype=np.float64)
                            if oracle == "harmony" else np.zeros(int(dom.sum()), dtype=np.int64))
        return plan

    def absorb(self, rnd: int, agents: np.ndarray, reports: np.ndarray) -> None:
        rule, oracle = self.rules[rnd], self.oracles[rnd]
        plan = self.plans[rnd]
        attrs = rows_of(plan.queries, np.searchsorted(plan.agents, agents))[:, 0]
        reports = report_rows(reports, len(agents))
        ok = oracle.valid_reports(reports, rule.domains[attrs])
        self.stats["out_of_domain"][rnd] += int((~ok).sum())
        self.stats["reports"][rnd] += int(ok.sum())
        held_group, held_counts = self.counts[rnd]
        if oracle.kind == "harmony":  # float sums, carried on in agent order
            held_group += safa.harmony_sums(attrs[ok], reports[ok], rule.domains,
                                            oracle.epsilon, held_counts)
            return
        group, counts = safa.tally(oracle.kind, attrs[ok], reports[ok], rule.domains,
                                   oracle.epsilon)
        held_group += group
        held_counts += counts

    def _close(self, rnd: int) -> None:
        """Round ``rnd``'s estimate from its counts (``safa.estimate_from``, as
        ``safa.estimate`` makes it), once."""
        if rnd not in self.counts:
            return
        group, counts = self.counts.pop(rnd)
        oracle = self.oracles[rnd]
        self.plans.pop(rnd, None)
        self.estimated(rnd, safa.estimate_from(oracle.kind, group, counts,
                                               self.rules[rnd].domains, oracle.epsilon,
                                               self.params["estimator"]))

    def finish(self) -> dict[str, Any]:
        self._close(1)
        return super().finish()


class _SafariOrderedCurator(_SafariPartsCurator):
    """``_SafariPartsCurator`` when a round's oracle is Harmony, whose estimate sums float
    terms in the reports' order (``safa.harmony_sums``): it takes its parts in agent order."""

    absorbs_in_order = True


class Safari(RankingProtocol):
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
        d = need_marginal_truth(self.name, public)
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

    def curator_class(self, bound: Bound) -> type[Curator]:
        """``_SafariPartsCurator`` (absorbs in parts) when both rounds' oracles keep integer
        counts (GRR, OLH), else ``_SafariOrderedCurator`` (Harmony sums its floats in the
        reports' order: in parts in agent order)."""
        kinds = {r.mechanism.kind for r in bound.rounds}
        return _SafariOrderedCurator if "harmony" in kinds else _SafariPartsCurator

    def curator_agent_bytes(self, bound: Bound) -> int:
        """With ``split = "users"`` the curator keeps the ids of each round's agents (8 bytes
        an agent); with ``"budget"`` every agent is asked both rounds, and nothing per agent
        is kept beyond the reports."""
        return 8 if bound.params["split"] == "users" else 0

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
        return attribute_refusal(queries, rule.n_attrs)

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
        out = {"chain": chain.to_wire(), "model": model.to_wire(DIGITS),
               **synthesis(model, len(self.agents), self.key, p["output_rankings"]),
               "stats": dict(self.stats)}
        if p["diagnostics"]:
            out["phase1"] = {"s1": round_list(s1), "s2": round_list(s2),
                             "s3": round_list(s3)}
        return out


class SafariNoPriv(RankingProtocol):
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
        need_marginal_truth(self.name, public)
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
