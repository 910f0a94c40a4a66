"""Benchmark: ldpsim's frequency oracles against two Python LDP libraries on equal work
(``ldpsim bench --peers N``).

The work: N users each hold a value of a domain of k values (uniform), each user's value is
perturbed with ε = 1, and the curator estimates the frequency of every one of the k values from
the N reports. Three oracles:

* **GRR** (generalised randomized response): ldpsim's ``mechanisms.GRR`` (``perturb``, then
  ``estimate`` from the report counts); multi-freq-ldpy's ``GRR_Client`` / ``GRR_Aggregator_MI``;
  pure-ldp's ``DEClient`` / ``DEServer`` (direct encoding).
* **OLH** (optimised local hashing, g = round(e^ε) + 1 buckets): ldpsim's ``mechanisms.OLH``
  (``perturb``, ``support_counts``, ``estimate``); multi-freq-ldpy's ``LH_Client`` /
  ``LH_Aggregator_MI`` (``optimal=True``); pure-ldp's ``LHClient`` / ``LHServer``
  (``use_olh=True``). Decoding is N · k hash evaluations in all three.
* **Hadamard** (Harmony: one random row of the Hadamard matrix, its coefficient through binary
  randomized response): ldpsim's ``mechanisms.Hadamard``; pure-ldp's ``HadamardMechClient`` /
  ``HadamardMechServer`` with t = 1 coefficient per user (the same oracle; its transform needs a
  power-of-two domain, so it runs over k' = the next power of two >= k, as ldpsim does inside).
  multi-freq-ldpy has no Hadamard oracle.

ldpsim's time counts drawing the users' coins (``protocols.rng``), perturbing every value and
estimating every frequency, best of three. The peers perturb one user per Python call and
aggregate one report per Python step, so they are timed once on a subsample of users and their
time is scaled linearly to N (their per-user work does not depend on N); each row says how many
users were measured. OLH's subsample is smaller for large k (its decoding is k hash calls per
user in Python). The ratio is the peer's scaled time over ldpsim's.

The peers are optional (``pip install 'ldpsim[bench]'``); a peer that is not installed, or fails,
gets a row saying so.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from ldpsim.protocols import mechanisms as mech
from ldpsim.protocols import rng as rngm
from ldpsim.simulator.bench.audit import print_table
from ldpsim.simulator.bench.kernels import processes_rounds

EPSILON = 1.0
DOMAINS = (10, 24, 720, 1000)
MECHANISMS = ("GRR", "OLH", "Hadamard")
#: OLH subsample: at most this many hash evaluations (users x k) per peer measurement
OLH_HASHES = 2 * 10**7
PEERS = {"multi-freq-ldpy": "multi_freq_ldpy", "pure-ldp": "pure_ldp"}


def user_values(n: int, k: int, seed: int = 0) -> np.ndarray:
    """n values uniform over [0, k) (the users' data; drawn before any clock starts)."""
    return np.random.default_rng(seed).integers(0, k, n)


def ldpsim_oracle(name: str, values: np.ndarray, k: int, epsilon: float = EPSILON,
                  key: int = 7) -> np.ndarray:
    """Every user's report from its own coins, then the k frequency estimates (ldpsim)."""
    n = len(values)
    agents = np.arange(n, dtype=np.int64)
    if name == "GRR":
        g = mech.GRR(epsilon, k)
        reports = g.perturb(values, rngm.uniform(key, agents, 0, 1)[:, 0])
        return g.estimate(g.counts(reports), n)
    if name == "OLH":
        o = mech.OLH(epsilon)
        seeds = (rngm.bits(key, agents, 0, 1)[:, 0] >> np.uint64(32)).astype(np.int64)
        u = rngm.uniform(key, agents, 0, 2, offset=1)
        buckets = o.perturb(values, seeds, u[:, 0], u[:, 1])
        return o.estimate(o.support_counts(seeds, buckets, k), n)
    h = mech.Hadamard(epsilon)
    u = rngm.uniform(key, agents, 0, 2)
    rows, bits = h.perturb(values, k, u[:, 0], u[:, 1])
    return h.estimate(rows, bits, k, n)


# ------------------------------------------------------------------------------- the peers


def _identity(x: Any) -> Any:
    return x


def _multi_freq_ldpy(name: str) -> Callable[[np.ndarray, int, float], Any] | None:
    """multi-freq-ldpy's client loop + aggregator for ``name`` (None: it has no such oracle)."""
    if name == "Hadamard":
        return None
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client

    GRR_Client(0, 2, 1.0)  # numba compiles on the first call: not part of the work

    if name == "GRR":
        def run(values, k, eps):
            return GRR_Aggregator_MI([GRR_Client(v, k, eps) for v in values.tolist()], k, eps)
    else:
        def run(values, k, eps):
            return LH_Aggregator_MI([LH_Client(v, k, eps, True) for v in values.tolist()], k,
                                    eps, True)
    return run


def _pure_ldp(name: str) -> Callable[[np.ndarray, int, float], Any] | None:
    """pure-ldp's client/server pair for ``name``, values indexed from 0."""
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.hadamard_mechanism import (
        HadamardMechClient,
        HadamardMechServer,
    )
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer

    def run(values, k, eps):
        if name == "GRR":
            client = DEClient(eps, k, index_mapper=_identity)
            server = DEServer(eps, k, index_mapper=_identity)
        elif name == "OLH":
            client = LHClient(eps, k, use_olh=True, index_mapper=_identity)
            server = LHServer(eps, k, use_olh=True, index_mapper=_identity)
        else:
            kp = mech.hadamard.order(k)
            client = HadamardMechClient(eps, kp, 1, index_mapper=_identity)
            server = HadamardMechServer(eps, kp, 1, index_mapper=_identity)
        server.aggregate_all([client.privatise(v) for v in values.tolist()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return server.estimate_all(range(k), suppress_warnings=True) / len(values)

    return run


PEER_RUNNERS = {"multi-freq-ldpy": _multi_freq_ldpy, "pure-ldp": _pure_ldp}


def installed(peer: str) -> bool:
    return importlib.util.find_spec(PEERS[peer]) is not None


def subsample(name: str, k: int, n: int, peer_users: int) -> int:
    """Users a peer is measured on (see the module docstring)."""
    m = min(n, peer_users)
    if name == "OLH":
        m = min(m, max(100, OLH_HASHES // k))
    return max(1, m)


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def rows(n: int, peer_users: int = 10**5, domains: tuple[int, ...] = DOMAINS,
         progress: bool = True) -> list[list[str]]:
    """One row per (oracle, k, peer) (see the module docstring)."""
    out = []
    for name in MECHANISMS:
        for k in domains:
            values = user_values(n, k)
            ours = _best(lambda m=name, v=values, k=k: ldpsim_oracle(m, v, k), 3)
            for peer in PEERS:
                row = [name, str(k), f"{n:,}", _s(ours), peer]
                if not installed(peer):
                    out.append(row + ["", "", "", "", "not installed (pip install "
                                      "'ldpsim[bench]')"])
                    continue
                try:
                    run = PEER_RUNNERS[peer](name)
                    if run is None:
                        out.append(row + ["", "", "", "", f"{peer} has no {name} oracle"])
                        continue
                    m = subsample(name, k, n, peer_users)
                    part = values[:m]
                    t = _best(lambda r=run, p=part, k=k: r(p, k, EPSILON), 1)
                except Exception as exc:  # a broken peer must not stop the bench
                    out.append(row + ["", "", "", "", f"failed: {type(exc).__name__}: {exc}"
                                      [:100]])
                    continue
                scaled = t * n / m
                note = (f"measured on {m:,} users, scaled x{n / m:.3g}" if m < n
                        else "all users")
                ratio = scaled / ours
                out.append(row + [f"{m:,}", _s(t), _s(scaled),
                                  f"{ratio:,.1f}" if ratio < 10 else f"{ratio:,.0f}", note])
                if progress:
                    print("  " + "  ".join(out[-1][:9]), file=sys.stderr, flush=True)
    return out


def _s(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


HEAD = ["oracle", "k", "users", "ldpsim s", "peer", "peer users", "peer s", "peer s scaled",
        "peer/ldpsim", "notes"]


#: the SAFARI family's full-domain protocol of each oracle (``round_rows``)
ROUND_PROTOCOLS = {"GRR": "rank_grr", "OLH": "rank_olh", "Hadamard": "rank_harmony"}


def round_rows(n: int, peer_rows: list[list[str]], domains: tuple[int, ...] = DOMAINS,
               pools: int = 2, batch: int | str = "auto", repeats: int = 3,
               progress: bool = True) -> list[list[str]]:
    """A whole protocol round against the fastest peer's oracle alone: for each oracle and
    each k of ``domains`` that is d! (d items ranked: k = 24, 720), the full-domain SAFARI
    protocol (``ROUND_PROTOCOLS``, ε = ``EPSILON``) on n rankings (Mallows, θ = 0.3) on the
    processes backend, its one round's wall time (queries out, the pools' randomizers, reports
    back and validated, the estimate; best of ``repeats``), next to the fastest installed
    peer's scaled time for the same oracle and k in ``peer_rows`` (``rows``)."""
    out = []
    for name, proto in ROUND_PROTOCOLS.items():
        for k in domains:
            d = next((d for d in range(2, 9) if math.factorial(d) == k), None)
            if d is None:
                continue
            timed = [(float(r[7].replace(",", "")), r[4]) for r in peer_rows
                     if r[0] == name and r[1] == str(k) and r[7]]
            best, who = min(timed) if timed else (None, "none installed")
            row = [proto, str(k), f"{n:,}"]
            data = {"kind": "safari_mallows", "n": n, "d": d, "theta": 0.3}
            try:
                runs = sorted(processes_rounds(proto, n, pools, batch, data=data,
                                               params={"epsilon": EPSILON})["rounds_wall_s"]
                              for _ in range(repeats))
            except (RuntimeError, ValueError) as exc:
                out.append(row + ["", who, "", "", f"failed: {exc}"[:100]])
                continue
            peer = ["", ""] if best is None else [_s(best), f"{best / runs[0]:.1f}"]
            out.append(row + [_s(runs[0]), who, *peer,
                              f"processes, {pools} pools, batch {batch}; rounds "
                              f"{_s(runs[0])}-{_s(runs[-1])} s over {repeats} run(s)"])
            if progress:
                print("  " + "  ".join(out[-1][:7]), file=sys.stderr, flush=True)
    return out


ROUND_HEAD = ["protocol", "k = d!", "users", "round s", "fastest peer", "peer s scaled",
              "peer/round", "notes"]


def main(n: int, peer_users: int = 10**5, domains: tuple[int, ...] = DOMAINS,
         repeats: int = 3) -> None:
    """Print the two tables (``repeats``: processes runs per round row)."""
    print(f"\nfrequency oracles against peers on equal work (eps = {EPSILON:g}, perturb {n:,} "
          "values + estimate all k frequencies; ldpsim: best of 3; peers: one run on a "
          "subsample, scaled linearly)")
    peer_rows = rows(n, peer_users, domains)
    print_table(HEAD, peer_rows)
    print(f"\na whole SAFARI round (processes backend) against the fastest peer's oracle alone "
          f"(eps = 1, {n:,} users)")
    print_table(ROUND_HEAD, round_rows(n, peer_rows, domains, repeats=repeats))
