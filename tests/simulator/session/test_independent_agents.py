"""Attacks on the independence of the agents' keys, one test each: what a colluding curator, a
colluding pool or a guesser of the token learns when the keys are not independent across
agents, across the runs of a sweep, or from the secrets that authenticate.

Each attack on a run uses only the view of the party mounting it, as a scenario user gets it
(``[collusion] save_view = true``, read back with ``collusion.load_view``): the queries the
curator sent, the reports it received, the broadcasts, the colluders' disclosures (data and
coins), the public output, parameters and configuration, and the protocol's public code and
constants. The test itself is the referee: it builds the data set the pools used, as the
orchestrator does to score a run, and scores the attack against it.

* **coin inversion from a colluder.** Before agents' keys came from a PRF, an agent's coins
  were the SplitMix64 finaliser of (agents' stream key + id x GOLDEN), and the finaliser is a
  bijection: one colluder's disclosed coins gave the run's stream key, and from it every honest
  agent's uniforms, so every randomized response could be undone. Measured then: with 20
  colluders out of 20,000 (LDP-KwikSort:RR, ε = 1) a colluding curator recovered 100% of the
  honest agents' true answers, against the ε bound of 0.73.
* **an ε sweep seen by one curator.** The runs of one repetition shared data, coins and
  queries. A curator that serves a sweep over ε = [0.5, 2] saw each answer twice, randomized
  with the same uniform u: the reports differed exactly when p(0.5) <= u < p(2), and then the
  ε = 2 report was the truth every time. Measured then: 26% of all answers disclosed exactly.
* **a colluding pool.** A pool held the run's data and agents' stream keys, and so rebuilt
  every other pool's agents: 100% of their reports predicted.
* **offline token guessing.** The results directory stored sha256(token)[:12], the curator
  held HMAC(token, label) and the wire carried a nonce with its MAC: each a free oracle for a
  guessed token.

Every attack must fail now: a colluder's coins say nothing about an honest agent's, two runs'
reports are two independent randomized responses of one answer, a pool's keys compute its own
agents' keys alone, and no stored or observable value tests a guess of the token without the
cost of scrypt.

Tolerances are 5 standard errors from the theoretical variance; the seeds are fixed, so each
outcome is deterministic.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.protocols.rank import profile
from ldpsim.simulator.session.collusion import load_view
from ldpsim.simulator.session.keyfiles import SECRET_FILE, secrets_of
from ldpsim.simulator.sweep.execute import _dataset, keyed_seed

import ldpsim
from tests.protocols.test_rng import _unmix  # the finaliser's inverse (a bijection)

Z = 5.0  # tolerance in standard errors

# --------------------------------------------------------------- the attacker's public arithmetic
# The published derivation of the agents' draws (``protocols/rng.py``), re-implemented here so
# that the attacker keeps computing today's formula whatever the library computes later.

_MASK64 = (1 << 64) - 1
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_C = 0xD1B54A32D192ED03


def _mix(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser on an array of uint64 (wrapping arithmetic)."""
    x = np.array(x, dtype=np.uint64)
    x ^= x >> np.uint64(30)
    x *= np.uint64(_M1)
    x ^= x >> np.uint64(27)
    x *= np.uint64(_M2)
    x ^= x >> np.uint64(31)
    return x


def _stream_key_from_coins(disclosures: dict[int, Any]) -> int | None:
    """The agents' stream key, inverted from the colluders' disclosed coins: today
    ``coins = mix(key + id x GOLDEN)``, so ``key = unmix(coins) - id x GOLDEN``.

    Accepted only when at least two colluders disclose integer coins and all of them give the
    same key (the cross-check); otherwise None: the attacker has learnt nothing.
    """
    keys, count = set(), 0
    for agent, payload in disclosures.items():
        coins = payload.get("coins") if isinstance(payload, dict) else None
        if isinstance(coins, bool) or not isinstance(coins, int | np.integer):
            continue
        if not 0 <= int(coins) <= _MASK64:
            continue
        keys.add((_unmix(int(coins)) - int(agent) * _GOLDEN) & _MASK64)
        count += 1
    return keys.pop() if count >= 2 and len(keys) == 1 else None


def _predicted_uniforms(key: int, agents: np.ndarray, rnd: int, width: int) -> np.ndarray:
    """Today's uniforms of ``agents`` in round ``rnd``, draw indices 0 .. width - 1::

        h = mix(key + agent x GOLDEN);  b = mix(h ^ mix(rnd << 32 | index + C))
        u = min(((b >> 11) + 0.5) 2^-53, 1 - 2^-53)
    """
    h = _mix(np.uint64(key) + np.asarray(agents).astype(np.uint64) * np.uint64(_GOLDEN))
    ctr = _mix((np.uint64(rnd) << np.uint64(32)) + np.arange(width, dtype=np.uint64)
               + np.uint64(_C))
    b = _mix(h[:, None] ^ ctr[None, :])
    u = ((b >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    return np.minimum(u, 1.0 - 2.0**-53)


def _keep_probability(eps: float) -> float:
    """Binary randomized response keeps the answer with p = e^ε / (1 + e^ε)."""
    return 1.0 / (1.0 + math.exp(-eps))


# ------------------------------------------------------------------------------- the runs


def _sweep(raw: dict[str, Any], out: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Run a scenario as a user does (``ldpsim.run`` into a results directory, the views
    saved); (record, adversary view) of each run."""
    res = ldpsim.run(raw, out=out)
    runs = [(rec, load_view(rec["view_path"])) for rec in res]
    assert runs and all(rec["status"] == "complete" for rec, _ in runs)
    return runs


def _referee_rows(rec: dict[str, Any], out: Path) -> np.ndarray:
    """The run's private rows, built as the orchestrator builds them to score a run (it alone
    holds the secret: the fresh one the sweep kept in its results directory ``out``): the
    referee's ground truth, never the attacker's."""
    secret = secrets_of({"secret": str(out / SECRET_FILE)})
    ds = _dataset(rec["data"], keyed_seed(rec["seed"], secret), secret)
    return ds.rows(0, ds.n)


def _answers(view: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """Every answer the curator received, flattened: (round, agent, pair index, report, place
    in the agent's report row)."""
    rnds, agents, pairs, reports, places = [], [], [], [], []
    for r in view["rounds"]:
        ra, rep, q = r.get("report_agents"), r.get("reports"), r.get("queries")
        if ra is None or rep is None or q is None or len(ra) == 0:
            continue
        ra, rep = np.asarray(ra, dtype=np.int64), np.asarray(rep)
        q = np.asarray(q)[np.searchsorted(np.asarray(r["agents"]), ra)]  # the reporters' pairs
        k = rep.shape[1]
        rnds.append(np.full(len(ra) * k, int(r["round"]), dtype=np.int64))
        agents.append(np.repeat(ra, k))
        pairs.append(q.reshape(-1).astype(np.int64))
        reports.append(rep.reshape(-1).astype(np.int64))
        places.append(np.tile(np.arange(k, dtype=np.int64), len(ra)))
    return tuple(np.concatenate(x) for x in (rnds, agents, pairs, reports, places))


def _true_answers(rows: np.ndarray, agents: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    return profile.answers(rows[agents], pairs[:, None])[:, 0]


# ----------------------------------------------------------------------------- the attacks


def test_attack_colluders_coins_do_not_predict_honest_agents_coins(tmp_path: Path) -> None:
    """LDP-KwikSort:RR, 20,000 Mallows agents, m = 8, ε = 1, 20 colluders and the curator.

    The attacker inverts the finaliser on each colluder's disclosed coins to get the agents'
    stream key (cross-checked: every colluder must give the same key), recomputes each honest
    agent's uniforms by the published derivation, and reads its randomized response backwards:
    ``u < p`` kept the answer, else flipped it. Without a key (no integer coins, or colluders
    that disagree) it has no information and takes each report for the answer.

    Under ε-LDP with ε_k = ε/K per answer no guess beats p = e^ε_k / (1 + e^ε_k) per answer:
    the accuracy over the N honest answers must stay within 5 s.e. (sqrt(p(1 - p)/N)) of it.
    The issue measured 100% (every honest answer recovered) against the bound 0.73.
    """
    raw = {"name": "coin-inversion", "protocol": "ldp_kwiksort_rr", "seed": 20240611,
           "data": {"kind": "mallows", "n": 20_000, "m": 8, "theta": 0.3},
           "params": {"epsilon": 1.0},
           "runtime": {"backend": "inproc", "pools": 2, "jobs": 1},
           "collusion": {"colluders": 20, "curator": True, "save_view": True}}
    t0 = time.perf_counter()
    [(rec, view)] = _sweep(raw, tmp_path)
    t_run = time.perf_counter() - t0

    # --- the attack: the view and public facts only
    t1 = time.perf_counter()
    eps_k = float(view["params"]["epsilon"]) / int(view["params"]["queries"])
    p = _keep_probability(eps_k)
    disclosures = view.get("disclosures") or {}
    key = _stream_key_from_coins(disclosures)
    answers = _answers(view)
    honest = ~np.isin(answers[1],
                      np.fromiter(disclosures, dtype=np.int64, count=len(disclosures)))
    rnds, agents, pairs, reports, places = (x[honest] for x in answers)
    guess = reports.copy()  # no information: the report itself
    if key is not None:
        for r in np.unique(rnds):
            at = np.flatnonzero(rnds == r)
            ids = np.unique(agents[at])
            # answer j of an agent's report row was randomized with its draw j of the round
            u = _predicted_uniforms(key, ids, int(r), int(places[at].max()) + 1)
            flipped = u[np.searchsorted(ids, agents[at]), places[at]] >= p
            guess[at] = np.where(flipped, 1 - reports[at], reports[at])
    t_attack = time.perf_counter() - t1

    # --- the referee
    rows = _referee_rows(rec, tmp_path)
    for a, payload in disclosures.items():  # the referee's rows are the pools' rows
        if isinstance(payload, dict) and "data" in payload:
            assert np.array_equal(np.asarray(payload["data"]), rows[int(a)])
    truth = _true_answers(rows, agents, pairs)
    n = len(truth)
    se = math.sqrt(p * (1 - p) / n)
    baseline = float(np.mean(reports == truth))
    acc = float(np.mean(guess == truth))
    print(f"\ncoin inversion: stream key {'recovered' if key is not None else 'not recovered'}"
          f" from {len(disclosures)} colluders; {n} honest answers; accuracy {acc:.4f} against "
          f"the bound p = {p:.4f} (+5 s.e. = {p + Z * se:.4f}); reports alone {baseline:.4f}; "
          f"run {t_run:.2f} s, attack {t_attack:.2f} s")
    assert n >= 19_000  # every honest agent answered
    assert abs(baseline - p) <= Z * se  # the referee's truth is the pools' truth
    assert acc <= p + Z * se, (
        f"the coalition recovered {acc:.1%} of the honest answers, above the ε bound {p:.3f}")


def test_attack_an_epsilon_sweep_seen_by_one_curator_discloses_no_answer_exactly(
        tmp_path: Path) -> None:
    """One curator serves a sweep over ε = [0.5, 2] (one repetition, K = 1 answer per agent)
    of LDP-KwikSort:RR and sees every agent answer the same pair twice.

    m = 2 items: a single pair, so each agent is asked the same question in both runs whatever
    the curator's query draws (the leak is per answer; m does not change it).

    The attack: where an agent's two reports differ, take the ε = 2 report for the truth.
    Today both runs randomize with the same uniform u, and reports differ exactly when
    p1 <= u < p2, where the ε = 2 report was kept: right every time (the issue: 26% of all
    answers disclosed exactly). With independent coins the two reports are independent
    randomized responses of one answer, and among those that differ the ε = 2 one is right
    with probability p2 (1 - p1) / (p2 (1 - p1) + p1 (1 - p2)) (0.818 here), p_i =
    e^{ε_i/K} / (1 + e^{ε_i/K}): within 5 s.e. of it, and below 1 (no answer disclosed
    exactly).
    """
    raw = {"name": "epsilon-sweep", "protocol": "ldp_kwiksort_rr", "seed": 20240612,
           "data": {"kind": "mallows", "n": 20_000, "m": 2, "theta": 0.3},
           "params": {"epsilon": [0.5, 2.0], "queries": 1},
           "runtime": {"backend": "inproc", "pools": 2, "jobs": 1},
           "collusion": {"colluders": 0, "curator": True, "save_view": True}}
    t0 = time.perf_counter()
    runs = _sweep(raw, tmp_path)
    by_eps = {float(rec["params"]["epsilon"]): (rec, view) for rec, view in runs}
    assert sorted(by_eps) == [0.5, 2.0]
    (rec1, view1), (rec2, view2) = by_eps[0.5], by_eps[2.0]
    assert rec1["repeat"] == rec2["repeat"]
    k = int(view1["params"]["queries"])
    assert int(view2["params"]["queries"]) == k

    # --- the attack: both views, nothing else
    _, a1, q1, r1, _ = _answers(view1)
    _, a2, q2, r2, _ = _answers(view2)
    n_pairs = int(view1["public"]["m"]) * (int(view1["public"]["m"]) - 1) // 2
    # each (agent, pair) is asked at most once per run (K distinct pairs): join on it
    both, i1, i2 = np.intersect1d(a1 * n_pairs + q1, a2 * n_pairs + q2, return_indices=True)
    differ = r1[i1] != r2[i2]
    guess = r2[i2][differ]  # where they differ, the ε = 2 report
    seconds = time.perf_counter() - t0

    # --- the referee
    rows = _referee_rows(rec1, tmp_path)
    # the sweep's runs share the data set
    assert np.array_equal(rows, _referee_rows(rec2, tmp_path))
    truth = _true_answers(rows, a1[i1], q1[i1])
    p1, p2 = (_keep_probability(e / k) for e in (0.5, 2.0))
    for rep, p in ((r1[i1], p1), (r2[i2], p2)):  # the referee's truth is the pools' truth
        assert abs(np.mean(rep == truth) - p) <= Z * math.sqrt(p * (1 - p) / len(truth))
    n_d = int(differ.sum())
    acc = float(np.mean(guess == truth[differ]))
    theory = p2 * (1 - p1) / (p2 * (1 - p1) + p1 * (1 - p2))
    se = math.sqrt(theory * (1 - theory) / n_d)
    exact = n_d / len(both) if acc == 1.0 else 0.0
    print(f"\nε sweep: {len(both)} answers seen twice, {n_d} differ ({n_d / len(both):.1%}); "
          f"the ε = 2 report is right on {acc:.4f} of those (independent coins: {theory:.4f} "
          f"± {Z * se:.4f}); answers disclosed exactly: {exact:.1%}; {seconds:.2f} s")
    assert len(both) >= 19_000  # every agent answered the same pair in both runs
    assert n_d >= 3000  # not vacuous
    assert acc < 1.0, f"{n_d} answers ({n_d / len(both):.1%}) disclosed exactly"
    assert abs(acc - theory) <= Z * se


# ------------------------------------------------------- a central sweep read from its results


def _central_sweep(raw: dict[str, Any], tmp_path: Path) -> dict[tuple[int, str, float], dict]:
    """A sweep of a central-model protocol next to its non-private baseline, run with a
    key file's own secret (so that the seed in the results gives nothing away); its records
    by (repetition, protocol, ε)."""
    from ldpsim.simulator.session import keyfiles

    files = keyfiles.write_host_keys(tmp_path / "keys", 2, [[(0, 1)], [(1, 2)]])
    raw = {**raw, "runtime": {"backend": "inproc", "pools": 2, "jobs": 1, "progress": False,
                              "secret": str(files["secret"])}, "output": {"plots": False}}
    recs = ldpsim.run(raw, out=tmp_path / "out")
    assert recs and all(r["status"] == "complete" for r in recs)
    return {(r["repeat"], r["protocol"], float(r["params"].get("epsilon", math.inf))): r
            for r in recs}


def _two_release_estimate(r1: np.ndarray, r2: np.ndarray, grid1: float, grid2: float
                          ) -> np.ndarray:
    """What two exact-Laplace releases ``Λ_i (rint(v/Λ_i) + Z_i)`` of one value give if they
    share the noise Z: the difference of their grid indices is rint(v/Λ1) - rint(v/Λ2), so
    v = d / (1/Λ1 - 1/Λ2) up to the grids' rounding."""
    d = np.rint(r1 / grid1) - np.rint(r2 / grid2)
    return d / (1.0 / grid1 - 1.0 / grid2)


def test_attack_a_central_sweeps_results_give_no_exact_comparison(tmp_path: Path) -> None:
    """Anyone who reads the results of a DP-KwikSort sweep over ε = [0.5, 2] (10 repetitions,
    10 items, a key file's secret) sees each repetition's noisy comparisons ``cmp_hat`` at
    both ε. The attack: for every comparison released in both runs, solve the two releases for
    the value as if they shared their noise (``_two_release_estimate``).

    Before, the curator's noise came from its stream key, the same in every run of a
    repetition: the two releases of a comparison were v + 4N and v + N, and the attack gave
    the exact count difference C_ab - C_ba (the trusted curator's central DP, gone for a sweep).
    With noise fresh per run, each release is an independent Laplace of scale Δ/ε'_i on its
    comparison: the attack's error (ε'_1 N_1 - ε'_2 N_2) / (ε'_1 - ε'_2) is within 0.5 of 0
    with probability 1 - (1 + c/(2Δ)) e^(-c/Δ), c = |ε'_1 - ε'_2| / 2 (the difference of two
    Laplace(Δ) variables; 0.6% here): within 5 s.e. of it.
    """
    from ldpsim.protocols.mechanisms import Laplace
    from ldpsim.protocols.rank.protocols import DPKwikSort

    m, reps = 10, 10
    runs = _central_sweep({"name": "central-sweep", "protocols": ["kwiksort", "dp_kwiksort"],
                           "seed": 20240613, "repeats": reps,
                           "data": {"kind": "mallows", "n": 2000, "m": m, "theta": 0.3},
                           "params": {"epsilon": [0.5, 2.0]}}, tmp_path)
    eps = [DPKwikSort.budget(m, e)[1] for e in (0.5, 2.0)]
    grids = [float(Laplace(e, DPKwikSort.SENSITIVITY).grid) for e in eps]
    exact, total = 0, 0
    for rep in range(reps):
        truth = runs[(rep, "kwiksort", math.inf)]["output"]["cmp_hat"]  # the referee's
        c1 = runs[(rep, "dp_kwiksort", 0.5)]["output"]["cmp_hat"]
        c2 = runs[(rep, "dp_kwiksort", 2.0)]["output"]["cmp_hat"]
        both = [i for i in range(len(truth)) if c1[i] is not None and c2[i] is not None]
        est = _two_release_estimate(np.array([c1[i] for i in both]),
                                    np.array([c2[i] for i in both]), *grids)
        exact += int(np.sum(np.abs(est - np.array([truth[i] for i in both])) < 0.5))
        total += len(both)
    c = abs(eps[0] - eps[1]) / 2
    delta = DPKwikSort.SENSITIVITY
    p = 1 - (1 + c / (2 * delta)) * math.exp(-c / delta)
    se = math.sqrt(p * (1 - p) / total)
    print(f"\ncentral sweep: {total} comparisons released at both ε; the two-release attack "
          f"gives {exact} exactly ({exact / total:.1%}; independent noise: {p:.2%} "
          f"+ 5 s.e. = {p + Z * se:.2%})")
    assert total >= 200  # not vacuous: most comparisons are released in both runs
    assert exact / total <= p + Z * se, (
        f"the results of a central sweep give {exact} of {total} comparisons exactly")


def test_attack_a_central_ethics_sweep_releases_independent_noise(tmp_path: Path) -> None:
    """The same for the trusted aggregator of Wang et al.'s Algorithm 1 (VLCP): a sweep over
    ε = [0.5, 2] releases β̃_ε = β̄ + N_ε (d = 6 coordinates, 3 repetitions) next to the
    non-private average β̄. Before, N_0.5 = 4 N_2 in every coordinate up to the grids' rounding
    (one noise stream, scaled by the budget), so (4 β̃_2 - β̃_0.5) / 3 gave β̄ within a few
    10^-6 of the release's noise scale b_2. With fresh noise that estimate's error is
    (4 N_2 - N_0.5) / 3, whose density at 0 is 3 / (16 b_2): it falls within 10^-4 b_2 with
    probability 4·10^-5 per coordinate (7·10^-4 for all 18); none may."""
    d, reps = 6, 3
    runs = _central_sweep({"name": "central-ethics", "repeats": reps,
                           "protocols": ["ethics_nonprivate", "ethics_vlcp"], "seed": 20240614,
                           "data": {"kind": "ethics_synthetic", "n": 400, "records": 5, "d": d,
                                    "test_instances": 100},
                           "params": {"epsilon": [0.5, 2.0]}}, tmp_path)
    misses = []
    for rep in range(reps):
        avg = np.array(runs[(rep, "ethics_nonprivate", math.inf)]["output"]["beta"])
        b1 = np.array(runs[(rep, "ethics_vlcp", 0.5)]["output"]["beta"])
        out2 = runs[(rep, "ethics_vlcp", 2.0)]["output"]
        b2 = np.array(out2["beta"])
        misses.append(np.abs((4 * b2 - b1) / 3 - avg) / float(out2["noise_scale"]))
    misses = np.concatenate(misses)
    print(f"\ncentral ethics sweep: the two-release estimate of the average misses it by "
          f"{misses.min():.3g} noise scales at the least (of {len(misses)} coordinates)")
    assert len(misses) == d * reps
    assert np.all(misses > 1e-4), "the sweep's releases share their noise"


# ------------------------------------------------------------------------- a colluding pool


def test_attack_a_colluding_pool_cannot_predict_another_pools_reports() -> None:
    """Pool 0 of an LDP-KwikSort:RR run (4,000 agents, a key file's own secret) colludes: it
    holds its key file (its agents' device keys, the population secret, its policy key) and
    the public configuration, and is even told pool 1's true rankings. It tries every 64-bit
    word and every 16-byte string of what it holds as the agents' coin key (a stream key, as
    before) and as a master secret, and its own agent keys on pool 1's agents. None reproduces
    pool 1's reports (the true keys do), and the candidates' agreement with them is that of
    coins independent of pool 1's, within 5 standard errors."""
    from ldpsim.protocols import get_protocol
    from ldpsim.protocols.keys import Secrets
    from ldpsim.simulator.backends.inproc import run_inproc
    from ldpsim.simulator.session import Limits
    from ldpsim.simulator.session.seeding import local_parties, public_config, run_keys

    secrets = Secrets(b"colluding-pool test: a master!!!")
    cfg = {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 1},
           "data": {"kind": "mallows", "n": 4000, "m": 6, "theta": 0.5}, "seed": 11,
           "pools": 2, "agent_mode": "batched", "batch": 1024,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    view = run_inproc(cfg, Limits(timeout_s=10), record_view=True, secrets=secrets)["view"]
    held = local_parties(cfg, 4000, secrets).pools[0]  # what pool 0 holds
    rnd = view["rounds"][0]
    agents = np.asarray(rnd["report_agents"])
    other = agents >= 2000  # pool 1's agents
    ids, reports = agents[other], np.asarray(rnd["reports"])[other]
    queries = np.asarray(rnd["queries"])[np.searchsorted(rnd["agents"], ids)]
    keys = run_keys(cfg["seed"], secrets)
    rows = _dataset(cfg["data"], cfg["seed"], secrets).rows(0, 4000)[ids]  # told to it
    proto = get_protocol("ldp_kwiksort_rr")
    params = proto.resolve(cfg["params"], {"m": 6})

    def predict(coins):
        bound = proto.bind(params, {"m": 6}, resolved=True)
        return np.asarray(proto.respond(bound.block(0, rows, ids, coins, queries=queries)))

    assert np.array_equal(predict(keys.coins(cfg, ids)), reports)  # the attack is not vacuous
    with pytest.raises(KeyError, match="do not cover"):
        held.agents.coins(ids, public_config(cfg)["run_id"])
    words: set[int] = set()
    blobs: list[bytes] = [held.population, held.policy]
    for node in held.agents.nodes:
        words |= {node.k0, node.k1}
        blobs.append(node.k0.to_bytes(8, "little") + node.k1.to_bytes(8, "little"))
    for b in blobs:
        words |= {int.from_bytes(b[i:i + 8], "little") for i in range(0, len(b) - 7, 8)}
    words |= {int(v) for v in public_config(cfg).values() if isinstance(v, int)}
    run_id = public_config(cfg)["run_id"]
    agree, hits = [], 0
    for w in sorted(words)[:400]:
        got = predict(w)  # as a stream key
        hits += np.array_equal(got, reports)
        agree.append(float(np.mean(got == reports)))
    for b in blobs[:60]:
        got = predict(Secrets(b).agents.coins(ids, run_id))  # as a master secret
        hits += np.array_equal(got, reports)
        agree.append(float(np.mean(got == reports)))
    # chance: coins independent of pool 1's agree with a report that keeps the answer with
    # probability p (the candidate keeps it too) and with a flipped one with 1 - p; given the
    # reports, candidates are independent, each agreeing on N answers
    p = math.e / (1 + math.e)
    kept = reports[:, 0] == profile.answers(rows, queries)[:, 0]
    chance = float(np.mean(np.where(kept, p, 1 - p)))
    se = math.sqrt(chance * (1 - chance) / len(ids) / len(agree))
    print(f"\ncolluding pool: {len(agree)} candidate keys, exact predictions {hits}, mean "
          f"agreement {np.mean(agree):.4f} against chance {chance:.4f} (p^2 + (1 - p)^2 = "
          f"{p * p + (1 - p) ** 2:.4f})")
    assert hits == 0
    assert abs(float(np.mean(agree)) - chance) <= Z * se


# ------------------------------------------------------------------ offline token guessing


def test_attack_offline_token_guessing_finds_no_oracle_without_the_kdf(tmp_path: Path,
                                                                      monkeypatch) -> None:
    """A typed token (a phrase a person chose). Everything a guesser may see: the results
    directory of a sweep run with it, the registration key the curator process holds, and a
    nonce with its MAC on the wire. Every cheap check of a guess that earlier versions allowed
    fails for the true token; the only check that works stretches it with scrypt (at least
    2^15 x 8 x 128 bytes), and a token under 16 characters is refused before any use."""
    import hashlib
    import hmac
    import json

    from ldpsim.simulator.session import keyfiles, signing

    token = "correct horse battery"
    files = keyfiles.write_host_keys(tmp_path / "keys", 2, [[(0, 150)], [(150, 300)]])
    host = keyfiles.read_host_keys(files["secret"])
    raw = {"name": "tok", "protocol": "ldp_kwiksort_rr", "seed": 1,
           "data": {"kind": "mallows", "n": 300, "m": 5},
           "runtime": {"backend": "inproc", "pools": 2, "jobs": 1, "token": token,
                       "secret": str(files["secret"]), "progress": False},
           "output": {"plots": False}}
    ldpsim.run(raw, out=tmp_path / "out")
    stored = (tmp_path / "out" / "scenario.json").read_text()
    records = (tmp_path / "out" / "results.jsonl").read_text()
    curator_key = keyfiles.registration_key(token, host.salt)  # what the curator process holds
    nonce = b"\x01" * 16
    mac = signing.registration_mac(curator_key, nonce, 0, 0, 2)  # what the wire carries

    def cheap_checks(guess: str) -> list[bool]:
        legacy_auth = hmac.new(guess.encode(), b"ldpsim\x1fregistration", hashlib.sha256).digest()
        return [hashlib.sha256(guess.encode()).hexdigest()[:12] in stored + records,
                guess in stored + records,
                legacy_auth == curator_key,
                signing.registration_mac(legacy_auth, nonce, 0, 0, 2) == mac,
                hmac.new(guess.encode(), nonce, hashlib.sha256).digest() == mac]

    assert not any(cheap_checks(token))
    calls = []
    real = hashlib.scrypt

    def counted(*a, **k):
        calls.append(k)
        return real(*a, **k)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    keyfiles.registration_key.cache_clear()  # a guesser has not computed it before
    assert keyfiles.registration_key(token, host.salt) == curator_key  # the KDF's check works
    assert len(calls) == 1 and calls[0]["n"] >= 1 << 15 and calls[0]["r"] >= 8
    assert keyfiles.registration_key("correct horse battery!", host.salt) != curator_key
    with pytest.raises(keyfiles.KeyFileError, match="at least 16"):
        keyfiles.registration_key("s3cret", host.salt)
    assert json.loads(stored)["fingerprint"]["runtime.secret"][0] not in (
        host.secrets.master.hex(), hashlib.sha256(host.secrets.master).hexdigest()[:24])
