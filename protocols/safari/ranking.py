"""What the ranking-collection protocols of Cheng, Yang, Wang, Su, Chen & Li (2021) share:
SAFARI, its non-private version (``protocols``) and the full-domain baselines (``baselines``)
are compared on one evaluation over the §6.1 marginals (``RankingProtocol``), one synthetic
release and its public output, the private ones' ε = ln 3 default, one set of audit candidates,
and the reports' schemas of the frequency oracles they use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.base import AuditSpec, Bound, ParamError, ParamSpec, Protocol, ReportSchema
from ldpsim.protocols.mechanisms import hadamard, olh
from ldpsim.protocols.metrics import Metric, fraction
from ldpsim.protocols.safari import metrics, perm, rules
from ldpsim.protocols.safari.riffle import Chain, RIModel

LN3 = math.log(3.0)
MAX_DOMAIN = math.factorial(10)
DIGITS = 7  # significant digits of the floats in the public output

EPSILON = ParamSpec("epsilon", "float", default=LN3, low=0, low_open=True, high=1000,
                    help="total privacy budget per user (the paper's default: ln 3)")
MAX_DOMAIN_SPEC = ParamSpec("max_domain", "int", default=MAX_DOMAIN, low=2,
                            help="largest attribute domain the curator will hold in memory "
                                 "(default 10! = 3628800)")
OUTPUT_RANKINGS = ParamSpec("output_rankings", "bool", default=False,
                            help="include the synthetic rankings in the output (large)")


def need_marginal_truth(name: str, public: dict[str, Any]) -> int:
    """The number of items d of a data kind with marginal ground truth; ParamError naming
    protocol ``name`` for any other kind."""
    if "d" not in public:
        raise ParamError(f"[data] kind: protocol {name!r} needs full rankings with marginal "
                         "ground truth; allowed: jester, safari_mallows, sushi_subset")
    return int(public["d"])


@lru_cache(maxsize=64)
def rule_of(name: str, d: int, chain: Chain | None = None) -> rules.Rule:
    """The rule ``name`` ("I", "IN", "IC" or "II" over ``chain``) for d items, cached."""
    return rules.Rule(name, d, chain)


def report_schema(oracle: str, domains: np.ndarray, epsilon: float) -> tuple[ReportSchema, float]:
    """(schema, information-theoretic report size in bits averaged over the attributes)."""
    dom = np.asarray(domains)
    if oracle == "safa":
        return ReportSchema("int", 1, 0, int(dom.max()) - 1), float(np.log2(dom).mean())
    if oracle == "harmony":
        kp = np.array([hadamard.order(int(k)) for k in dom])
        return ReportSchema("int", 2, 0, int(kp.max()) - 1), float(np.log2(kp).mean() + 1)
    return (ReportSchema("int", 2, 0, 2**olh.SEED_BITS - 1),
            olh.SEED_BITS + math.log2(olh.hash_range(epsilon)))


def report_high(oracle: str, domains: np.ndarray, epsilon: float) -> np.ndarray:
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


def round_list(x: np.ndarray) -> Any:
    a = np.asarray(x, dtype=float)
    return np.vectorize(lambda v: float(f"{v:.{DIGITS}g}"), otypes=[float])(a).tolist() \
        if a.size else a.tolist()


def synthetic_output(syn: np.ndarray, include_rankings: bool) -> dict[str, Any]:
    """The public summary of a synthetic set: its size, how many rows are permutations, and
    the counts of its first- and second-order marginals (valid rows only)."""
    syn = np.asarray(syn, dtype=np.int64)
    out = synthetic_summary([syn])
    if include_rankings:
        out["rankings"] = syn.tolist()
    return out


def synthetic_summary(parts: Iterable[np.ndarray]) -> dict[str, Any]:
    """``synthetic_output`` of the rows of ``parts`` one after another, without the rankings:
    every number in it is an integer count, the same whichever parts hold the rows."""
    n = valid = 0
    c1 = c2 = None
    for syn in parts:
        syn = np.asarray(syn, dtype=np.int64)
        ok = perm.is_permutation(syn)
        pos = perm.positions(syn[ok])
        n += len(syn)
        valid += int(ok.sum())
        q1, q2 = metrics.q1_counts(pos), metrics.q2_counts(pos)
        c1, c2 = (q1, q2) if c1 is None else (c1 + q1, c2 + q2)
    return {"n_synthetic": int(n), "synthetic_valid": valid,
            "marginals": {"source": "synthetic", "n": valid, "q1": c1.tolist(),
                          "q2": c2.tolist()}}


#: synthetic rankings drawn and counted at a time when the output leaves them out
SYNTH_ROWS = 1 << 16


def synthesis(model: RIModel, n: int, key: int, include_rankings: bool) -> dict[str, Any]:
    """Phase 5 (§5.1): the public summary (``synthetic_output``) of ``n`` rankings drawn from
    ``model`` with the curator's synthesis generator. Unless the output includes them, they
    are drawn and counted ``SYNTH_ROWS`` at a time (``RIModel.sample_part`` from the
    generator's place for each, ``rng.party_generator_at``), never held all at once: the same
    rankings, so the same counts."""
    stream = rngm.stream_key(key, "safari-synthesis")
    step = SYNTH_ROWS
    if include_rankings or n <= step:
        return synthetic_output(model.sample(n, rngm.party_generator(stream)), include_rankings)

    def uniforms(offset: int, m: int) -> np.ndarray:
        return rngm.party_generator_at(stream, offset).random(m)

    return synthetic_summary(model.sample_part(n, lo, min(n, lo + step), uniforms)
                             for lo in range(0, n, step))


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


class RankingProtocol(Protocol):
    """What the ranking protocols share: their family, metrics (§6.1), evaluation and audit.

    ``avd_q1`` and ``avd_q2`` are declared ≥ 0 without an upper end: the AVD of two
    distributions is at most 1, and so is every synthetic release's (SAFARI's, and the
    baselines' default); but a baseline's ``release = "estimate"`` scores the marginals of its
    raw unbiased estimate over the d! rankings, whose negative cells make ½ Σ|P - P'| grow
    with the estimate's variance (e.g. 4 · 10^2 for GRR at d = 7, n = 300, ε = 0.5), as the
    paper's Fig. 3 plots ("larger than 1"). The metric stays the paper's; the declaration says
    what it can be (``sse_*`` likewise).
    """

    family = "ranking collection (Cheng et al., 2021)"
    data_type = "ranking"
    metrics = (
        Metric("avd_q1", "AVD of the first-order marginals", low=0.0, better="lower",
               about="§6.1: the mean total variation distance between the released and the "
                     "true item-position marginals; at most 1 when the release is a "
                     "distribution (synthetic rankings), above 1 for a baseline's raw "
                     'estimate (release = "estimate": negative cells, as in Fig. 3)'),
        Metric("avd_q2", "AVD of the second-order marginals", low=0.0, better="lower",
               about="§6.1: the same over the pairwise (item pair before/after) marginals; "
                     'at most 1 likewise, above it with release = "estimate"'),
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


def attribute_refusal(queries: np.ndarray | None, n_attrs: int) -> str | None:
    """Why ``queries`` are not one attribute index in [0, ``n_attrs``) per user, or None."""
    q = None if queries is None else np.asarray(queries)
    if q is None or q.ndim != 2 or q.shape[1] != 1 or q.dtype.kind not in "iu":
        got = "none" if q is None else f"an array of {q.dtype} of shape {q.shape}"
        return f"each user is asked one attribute index in [0, {n_attrs}), got {got}"
    if q.size and (int(q.min()) < 0 or int(q.max()) >= n_attrs):
        return (f"each user is asked one attribute index in [0, {n_attrs}), got indices from "
                f"{int(q.min())} to {int(q.max())}")
    return None


def report_rows(reports: Any, n: int) -> np.ndarray:
    """The reports of ``n`` agents as int64 rows (n = 0, every agent a dropout: no rows, of
    the width the array has)."""
    r = np.asarray(reports, dtype=np.int64)
    return r.reshape(n, -1) if n else r.reshape(0, r.shape[-1] if r.ndim == 2 else 0)
