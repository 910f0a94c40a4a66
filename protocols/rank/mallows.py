"""Mallows rankings by repeated insertion, generated per agent from a counter-based stream.

Yan, Li & Liu (2020, §5.2.1) define the dispersion as ``theta = 1 - q_M / p_M`` in [0, 1], where
``p_M`` is the probability that a pair keeps the reference order. With Mallows' adjacent-swap ratio
``phi = q_M / p_M`` (P(pi) ∝ phi^d_K(pi, pi0)) that is ``phi = 1 - theta``: ``theta = 0`` is the
uniform distribution, ``theta -> 1`` concentrates on the reference ranking. PerMallows, which
generated the paper's synthetic data, writes ``phi = exp(-theta)`` instead (``theta`` in
[0, inf)): at theta = 0.75 the paper's definition gives phi = 0.25, PerMallows' 0.47. The data
kinds take either (``theta_convention = "paper" | "permallows"``, see ``phi_from``) or ``phi``.

Repeated insertion (Doignon et al. 2004): item ``c_i`` (the i-th of the reference ranking) is
inserted above ``v_i`` of the ``i - 1`` items already placed, with P(v_i = v) ∝ phi^v, v in
0..i-1; the total number of inversions is sum v_i = d_K, so P(pi) ∝ phi^d_K.

The counts are independent, so consecutive items whose joint outcomes number at most 512 share
one uniform, read by inverse cdf over their product distribution (exact, like one uniform per
item): for m = 10 that is 3 draws per ranking instead of 9. Agent ``a``'s ranking uses only
draws keyed by ``a`` (its own data key, ``agent_keys``; or, for a stream key alone, the key
``protocols.rng`` derives for ``a``), so a pool generates exactly its own block; the reference
ranking is the population's draw (``key``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import rng as rng_mod

#: How a dispersion theta maps to Mallows' phi: Yan, Li & Liu (2020, §5.2.1) define
#: theta = 1 - q/p, so phi = 1 - theta ("paper", theta in [0, 1]); PerMallows, whose generator
#: the paper's synthetic data came from, parameterises phi = exp(-theta) ("permallows",
#: theta >= 0).
THETA_CONVENTIONS = ("paper", "permallows")


def phi_from(theta: float | None = None, phi: float | None = None,
             convention: str = "paper") -> float:
    """Mallows' phi from theta under ``convention`` (``THETA_CONVENTIONS``) or phi itself.

    Raises ValueError for both or neither of theta and phi, an unknown convention, or a theta
    outside its convention's range.
    """
    if (theta is None) == (phi is None):
        raise ValueError("give exactly one of theta or phi")
    if phi is not None:
        return float(phi)
    if convention == "paper":
        if not 0.0 <= theta <= 1.0:
            raise ValueError(f"theta = {theta:g} is outside [0, 1], the paper's 1 - q/p")
        return 1.0 - float(theta)
    if convention == "permallows":
        if not theta >= 0.0:
            raise ValueError(f"theta = {theta:g} is negative; PerMallows' theta is -ln(phi)")
        return math.exp(-float(theta))
    raise ValueError(f"unknown theta convention {convention!r}; allowed: "
                     f"{', '.join(THETA_CONVENTIONS)}")


def reference_ranking(key: int, m: int) -> np.ndarray:
    """The ground-truth central ranking (best first), a random permutation of the items."""
    return rng_mod.party_generator(rng_mod.stream_key(key, "mallows-reference")).permutation(m)


def insertion_pmf(phi: float, i: int) -> np.ndarray:
    """P(v = 0..i-1) ∝ phi^v for the i-th inserted item (uniform when phi = 1)."""
    w = np.power(float(phi), np.arange(i, dtype=np.float64)) if phi > 0 else np.eye(1, i)[0]
    return w / w.sum()


_BLOCK = 8192  # agents per pass: the block's draws and positions stay in cache
_BUCKET_BITS = 14
_BUCKET_SHIFT = np.uint64(64 - _BUCKET_BITS)
_GROUP_OUTCOMES = 512  # consecutive items share one draw while their joint outcomes fit


@dataclass(frozen=True)
class _Group:
    """Items ``first + 1 .. last`` of the reference (1-based), whose counts share one draw.

    Their insertion counts ``v_i`` are independent, so their joint outcome, numbered
    lexicographically (the last item's count varies fastest), has the product pmf, and one
    uniform picks it by inverse cdf exactly as one uniform per item picks each count.
    ``at[t, g]`` is where item ``first + 1 + t`` is inserted under outcome g (0 = top of the
    items placed before it); in the first group (``first == 0``) it is the item's final place
    among the group, since the group starts from an empty list.
    """

    first: int
    last: int
    cdf: np.ndarray  # (outcomes,), cdf[-1] = 1
    table: np.ndarray  # (2^14,) outcome by the top 14 bits of a draw; -1: search exactly
    at: np.ndarray  # (last - first, outcomes), int16


def _group(phi: float, first: int, last: int) -> _Group:
    sizes = list(range(first + 1, last + 1))  # item i has i places
    v = np.indices(sizes).reshape(len(sizes), -1)  # (items, outcomes), lexicographic
    pmf = np.ones(v.shape[1])
    for t, i in enumerate(sizes):
        pmf *= insertion_pmf(phi, i)[v[t]]
    cdf = np.cumsum(pmf)
    cdf[-1] = 1.0
    at = np.array([(i - 1) - v[t] for t, i in enumerate(sizes)], dtype=np.int64)
    if first == 0:  # insert into an empty list: keep the final places instead
        for t in range(1, len(sizes)):
            at[:t] += at[:t] >= at[t]
    edges = np.arange((1 << _BUCKET_BITS) + 1, dtype=np.float64) * 2.0**-_BUCKET_BITS
    at_edge = np.searchsorted(cdf, edges, side="right")  # outcome at each bucket edge
    table = np.where(at_edge[1:] != at_edge[:-1], -1, at_edge[:-1]).astype(
        np.int16 if len(cdf) < 2**15 else np.int32)
    return _Group(first, last, cdf, table, at.astype(np.int16))


@functools.lru_cache(maxsize=8)
def _groups(phi: float, m: int) -> tuple[_Group, ...]:
    """Items 1..m in consecutive groups of at most ``_GROUP_OUTCOMES`` joint outcomes.

    A draw ``d`` gives ``u = rng.uniform_of(d)`` and the outcome ``#{k : cdf[k] <= u}``
    (``searchsorted(cdf, u, "right")``). Draws whose top 14 bits equal b have u in
    [b, b + 1] * 2^-14 (the upper end by rounding), so the table holds the outcome at the
    bucket's lower edge unless some cdf value lies in (lo, hi]; then it holds -1 (at most
    outcomes - 1 of the 2^14 buckets) and those draws search exactly. The lookup is exact,
    only faster. For m = 10 the groups are items 1-5, 6-8 and 9-10: three draws, not nine.
    """
    out, first = [], 0
    while first < m:
        last, size = first + 1, first + 1
        while last < m and size * (last + 1) <= _GROUP_OUTCOMES:
            last += 1
            size *= last
        out.append(_group(phi, first, last))
        first = last
    return tuple(out)


def _outcomes(draws: np.ndarray, group: _Group) -> np.ndarray:
    """The group's outcome for each 64-bit draw: ``searchsorted(cdf, uniform_of(draw))``,
    as intp (it indexes ``group.at`` once per item: a smaller index type converts each time)."""
    g = group.table[(draws >> _BUCKET_SHIFT).view(np.int64)].astype(np.intp)
    edge = np.flatnonzero(g < 0)  # draws in a bucket that holds a cdf value: search exactly
    if len(edge):
        g[edge] = np.searchsorted(group.cdf, rng_mod.uniform_of(draws[edge]), side="right")
    return g


def _draw_key(key: int, agent_keys: np.ndarray | None, s: int, e: int) -> int | np.ndarray:
    """The key the draws of agents ``s .. e - 1`` (positions in the call) are made with: their
    own keys where given, else the stream key."""
    return key if agent_keys is None else agent_keys[s:e]


def _blocks(key: int, agents: np.ndarray, m: int, phi: float,
            agent_keys: np.ndarray | None = None):
    """Per block of agents: (start, pos) with pos[k, r] the place (0 = top) of reference
    item k in agent ``agents[start + r]``'s ranking (repeated insertion, one draw per group:
    draw index j of round 0 for group j, under the agent's own key ``agent_keys[r]`` where
    given, else under the stream key ``key``)."""
    groups = _groups(float(phi), m)
    if agent_keys is not None and len(agent_keys) != len(agents):
        raise ValueError(f"one key per agent: {len(agent_keys)} keys for {len(agents)} agents")
    for s in range(0, len(agents), _BLOCK):
        blk = agents[s:s + _BLOCK]
        draws = np.ascontiguousarray(rng_mod.bits(_draw_key(key, agent_keys, s, s + _BLOCK),
                                                  blk, 0, len(groups)).T)
        pos = np.empty((m, len(blk)), dtype=np.int16)
        for j, grp in enumerate(groups):
            g = _outcomes(draws[j], grp)
            for t, i in enumerate(range(grp.first + 1, grp.last + 1)):
                at = grp.at[t][g]
                if grp.first:
                    head = pos[: i - 1]
                    head += head >= at
                pos[i - 1] = at
        yield s, pos


def sample_reference(key: int, agents: np.ndarray, m: int, phi: float,
                     agent_keys: np.ndarray | None = None) -> np.ndarray:
    """The readable reference of ``sample``: plain repeated insertion from the same draws, one
    agent at a time with Python lists. Each group's outcome by ``searchsorted`` on its joint
    cdf, decoded into the items' counts (mixed radix, the last item fastest), each item
    inserted v places above the bottom. ``sample`` must equal it row for row (a test checks);
    it is slow (a Python loop per agent and item), for checking only.
    """
    groups = _groups(phi, m)
    ref = reference_ranking(key, m)
    agents = np.asarray(agents, dtype=np.int64)
    u = rng_mod.uniform(_draw_key(key, agent_keys, 0, len(agents)), agents, 0, len(groups))
    out = []
    for row in u:
        order: list[int] = []  # reference indices, best first
        for j, grp in enumerate(groups):
            g = int(np.searchsorted(grp.cdf, row[j], side="right"))
            sizes = list(range(grp.first + 1, grp.last + 1))
            for i, v in zip(sizes, np.unravel_index(g, sizes), strict=True):
                order.insert(len(order) - int(v), i - 1)
        out.append([int(ref[k]) for k in order])
    return np.array(out, dtype=np.int16).reshape(len(out), m)


def sample(key: int, agents: np.ndarray, m: int, phi: float,
           agent_keys: np.ndarray | None = None) -> np.ndarray:
    """Rankings (best first) of the given agents, shape ``(len(agents), m)``, dtype int16.

    The vectorised speed path of ``sample_reference`` (identical output): agents in blocks,
    a group's outcomes read from a bucket table, insertion as position arithmetic.

    Item i of the reference is inserted ``v_i`` places above the bottom of the i - 1 items
    already placed, P(v_i = v) ∝ phi^v; the counts of a group of consecutive items come from
    one of the agent's uniforms (``_groups``).
    """
    agents = np.asarray(agents, dtype=np.int64)
    n = len(agents)
    ref = reference_ranking(key, m).astype(np.int16)
    ranking = np.empty((n, m), dtype=np.int16)
    base = (np.arange(min(n, _BLOCK), dtype=np.intp) * m)[:, None]  # row offsets, flat index
    items = np.tile(ref, min(n, _BLOCK))
    for s, pos in _blocks(key, agents, m, phi, agent_keys):
        b = pos.shape[1]
        flat = pos.T + base[:b]  # ranking[r, pos[k, r]] = ref[k]
        ranking[s:s + b].reshape(-1)[flat.reshape(-1)] = items[: b * m]
    return ranking


def sample_positions(key: int, agents: np.ndarray, m: int, phi: float,
                     agent_keys: np.ndarray | None = None) -> np.ndarray:
    """The same agents' rankings as positions: ``out[r, item]`` = place of item (0 = best),
    the inverse permutation of ``sample``'s rows (cheaper: no scatter)."""
    agents = np.asarray(agents, dtype=np.int64)
    by_ref = np.argsort(reference_ranking(key, m))  # by_ref[item] = its index in the reference
    out = np.empty((len(agents), m), dtype=np.int16)
    for s, pos in _blocks(key, agents, m, phi, agent_keys):
        out[s:s + pos.shape[1]] = pos[by_ref].T
    return out
