"""The full-domain baselines of Cheng et al. (2021, §4): a frequency oracle over all d!
rankings, each ranking one categorical value (its lexicographic index): ``rank_grr``,
``rank_harmony``, ``rank_olh``, and ``rank_calm`` (CALM's 2-D rank marginals and maximum
entropy). They share SAFARI's evaluation and audit (``ranking.RankingProtocol``).
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
from ldpsim.protocols.mechanisms import hadamard
from ldpsim.protocols.queries import RowQueries, rows_of
from ldpsim.protocols.safari import calm, lade, metrics, perm, riffle, safa
from ldpsim.protocols.safari.ranking import (
    EPSILON,
    MAX_DOMAIN_SPEC,
    OUTPUT_RANKINGS,
    SYNTH_ROWS,
    RankingProtocol,
    attribute_refusal,
    need_marginal_truth,
    report_high,
    report_rows,
    report_schema,
    round_list,
    rule_of,
    synthetic_output,
    synthetic_summary,
)


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
        q1, q2 = metrics.distribution_marginals(f, perm.all_positions_shared(d))
        return {"marginals": {"source": "estimate", "n": 1, "q1": round_list(q1),
                              "q2": round_list(q2)}}
    p = lade.project_simplex(f)
    stream = rngm.stream_key(key, "safari-synthesis")
    if include_rankings or n <= SYNTH_ROWS:
        idx = riffle.draw_indices(p, n, rngm.party_generator(stream))
        return synthetic_output(perm.lex_unrank(idx, d), include_rankings)
    # drawn and counted SYNTH_ROWS at a time (each part's uniforms from the generator's place
    # for it, ``rng.party_generator_at``): the same rankings, so the same counts
    return synthetic_summary(
        perm.lex_unrank(riffle.indices_of(
            p, rngm.party_generator_at(stream, lo).random(min(n, lo + SYNTH_ROWS) - lo)), d)
        for lo in range(0, n, SYNTH_ROWS))


RELEASE = ParamSpec("release", "str", default="synthetic", choices=("synthetic", "estimate"),
                    help='"synthetic": n rankings drawn from the simplex-projected estimate; '
                         '"estimate": marginals of the raw unbiased estimate (AVD may exceed 1)')


class _FullDomainCurator(Curator):
    """A frequency oracle's curator over the d! rankings, whole rounds (the reference the
    curators that take the round in parts match: ``_CountingCurator``,
    ``_HarmonyCurator``)."""

    single_round = True

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
            schema, bits = report_schema("olh", np.array([size]), eps)
        return RoundPlan(rnd, self.agents, None, None, schema, report_bits=bits)

    def _valid(self, agents: np.ndarray, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        """The reports in the oracle's domain (the others counted out of it), and the
        oracle's mechanism over the d! rankings."""
        size = math.factorial(int(self.public["d"]))
        r = report_rows(reports, len(agents))
        oracle = self.bound.rounds[0].mechanism
        ok = oracle.valid_reports(r, size)
        self.stats["out_of_domain"] = self.stats.get("out_of_domain", 0) + int((~ok).sum())
        return r[ok], oracle.mechanism(size)

    def absorb(self, rnd, agents, reports):
        r, m = self._valid(agents, reports)
        self.f = m.estimate(r[:, 0], r[:, 1], math.factorial(int(self.public["d"])), len(r))

    def estimate(self) -> np.ndarray:
        """The frequency estimate over the d! rankings."""
        return self.f

    def finish(self):
        d = int(self.public["d"])
        out = release(self.estimate(), d, self.params["release"], len(self.agents), self.key,
                      self.params["output_rankings"])
        out["stats"] = dict(self.stats)
        return out


class _CountingCurator(_FullDomainCurator):
    """GRR's and OLH's curator over the d! rankings: it keeps the reports' integer counts (GRR)
    or support (OLH), and takes them in parts."""

    absorbs_in_parts = True

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.counts = np.zeros(math.factorial(int(self.public["d"])), dtype=np.int64)
        self.reports = 0  # in the domain

    def absorb(self, rnd, agents, reports):
        r, m = self._valid(agents, reports)
        size = len(self.counts)
        self.counts += (np.bincount(r[:, 0], minlength=size) if self.oracle == "grr"
                        else m.support_counts(r[:, 0], r[:, 1], size))
        self.reports += len(r)

    def estimate(self) -> np.ndarray:
        m = self.bound.rounds[0].mechanism.mechanism(len(self.counts))
        return m.estimate(self.counts, self.reports)


class _HarmonyCurator(_FullDomainCurator):
    """Harmony's curator over the d! rankings: its estimate sums c_ε (2 bit - 1) on each
    Hadamard row in the reports' order (``Hadamard.accumulate``), so it takes the round in
    parts in agent order and carries the sums on."""

    absorbs_in_parts = True
    absorbs_in_order = True

    def __init__(self, protocol, bound, agents, key):
        super().__init__(protocol, bound, agents, key)
        self.size = math.factorial(int(self.public["d"]))
        self.sums = np.zeros(hadamard.order(self.size))
        self.reports = 0  # in the domain

    def absorb(self, rnd, agents, reports):
        r, m = self._valid(agents, reports)
        m.accumulate(r[:, 0], r[:, 1], len(self.sums), self.sums)
        self.reports += len(r)

    def estimate(self) -> np.ndarray:
        m = self.bound.rounds[0].mechanism.mechanism(self.size)
        return m.estimate_from(self.sums, self.size, self.reports)


class _FullDomain(RankingProtocol):
    """A frequency oracle over all d! rankings (§4): each ranking is one categorical value,
    its lexicographic index."""

    oracle = "grr"
    params = {"epsilon": EPSILON, "release": RELEASE, "max_domain": MAX_DOMAIN_SPEC,
              "output_rankings": OUTPUT_RANKINGS}

    def resolve(self, params, public):
        d = need_marginal_truth(self.name, public)
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
    curator_cls = _CountingCurator


class RankHarmony(_FullDomain):
    """Harmony over the d! rankings (§4.2). The paper describes a random ±1/√m projection
    (m = O(n)); we use the orthogonal (Sylvester–Hadamard) projection of Harmony's categorical
    oracle: the user reports one RR'd coefficient (row s, bit), the curator inverts with a fast
    Walsh–Hadamard transform (same O(1) report, no m × d! matrix to hold)."""

    name = "rank_harmony"
    summary = "LDP baseline: Harmony (Hadamard coefficient + binary RR) over all d! rankings"
    oracle = "harmony"
    curator_cls = _HarmonyCurator


class RankOLH(_FullDomain):
    """OLH over the d! rankings (§4.3): the user sends a 32-bit hash seed and the GRR'd hash of
    its ranking in [g], g = round(e^ε) + 1. Decoding costs n · d! hash evaluations, capped by
    ``max_work``."""

    name = "rank_olh"
    summary = "LDP baseline: OLH over all d! rankings (hash seed + perturbed hash)"
    oracle = "olh"
    curator_cls = _CountingCurator
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
                             f"max_work = {out['max_work']:.3g} (about 0.2 s per 1e9 compiled, "
                             "5 s with numpy); allowed: fewer agents or items, or a larger "
                             "max_work")
        return out


class _CalmCurator(Curator):
    """CALM's curator: each user's pair is drawn from its id (the queries are drawn as they go
    out, and again when its report is absorbed), and OLH's integer support per pair is kept,
    so the reports are taken in parts."""

    absorbs_in_parts = True
    single_round = True

    def plan(self, rnd):
        if rnd > 0:
            return None
        d = int(self.public["d"])
        self.rule = rule_of("IC", d)
        key, agents, n_attrs = rngm.stream_key(self.key, "safa-attributes"), self.agents, \
            self.rule.n_attrs

        def draw(lo: int, hi: int) -> np.ndarray:  # keyed by agent: any range, the same
            return safa.sample_attributes(rngm.uniform(key, agents[lo:hi], rnd, 1)[:, 0],
                                          n_attrs)[:, None]

        eps = self.bound.rounds[0].mechanism.epsilon
        schema, bits = report_schema("olh", self.rule.domains, eps)
        # OLH's bounds are the same for every pair: one row, read as one per agent
        high = np.broadcast_to(report_high("olh", self.rule.domains[:1], eps),
                               (len(agents), 2))
        self.plan0 = RoundPlan(rnd, agents, RowQueries(draw, len(agents), 1, np.int64), None,
                               schema, report_bits=bits, report_high=high)
        self.group = np.zeros(n_attrs, dtype=np.int64)
        self.support = np.zeros(int(self.rule.domains.sum()), dtype=np.int64)
        return self.plan0

    def absorb(self, rnd, agents, reports):
        oracle = self.bound.rounds[0].mechanism
        attrs = rows_of(self.plan0.queries, np.searchsorted(self.plan0.agents, agents))[:, 0]
        r = report_rows(reports, len(agents))
        ok = oracle.valid_reports(r, self.rule.domains[attrs])
        self.stats["out_of_domain"] = self.stats.get("out_of_domain", 0) + int((~ok).sum())
        group, support = safa.tally("olh", attrs[ok], r[ok], self.rule.domains, oracle.epsilon)
        self.group += group
        self.support += support

    def finish(self):
        d = int(self.public["d"])
        z = safa.estimate_from("olh", self.group, self.support, self.rule.domains,
                               self.bound.rounds[0].mechanism.epsilon, "group")
        joints = calm.make_consistent(lade.joint_to_square(np.asarray(z), d))
        f, collapsed = calm.maxent_rankings(joints, perm.all_positions_shared(d),
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
        return attribute_refusal(queries, rule_of("IC", int(bound.public["d"])).n_attrs)

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
