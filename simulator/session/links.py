"""The deployment model's links (``session.network``): each agent's link quality, drawn from
the normal distribution itself, and the curator's own link, which every agent's query and
report crosses.

**An agent's link quality** is z ~ N(0, 1), one per agent, from one 64-bit draw of the
network's device stream (``link_z``): the draw's 53 low bits above its 11 lowest make a
uniform u = (k + 1/2) 2^-53 on the nearer half, its top bit the side, and z is the normal
quantile of u (Acklam's rational approximation, relative error below 1.2e-9). It reaches
+-8.29 sigma (u = 2^-54), far beyond the largest of 10^6 or 10^9 agents (about 4.9 and 6.1
sigma), and both tails are exactly symmetric. The factor exp(spread z) follows from IEEE
additions, products, divisions, square roots and exact scalings alone (this module's ``exp``
and ``log``: numpy's own round differently with and without AVX-512), so every factor is an
exact function of the seed, on any machine and BLAS; ``_netc.c``'s ``link_factors`` computes
them in the same order, leaving the tails' logarithms to numpy.

**The curator's link** has a stated capacity each way (``curator_down_mbps``: what it sends,
the queries and broadcasts of a round; ``curator_up_mbps``: what it receives, the reports),
unlimited by default. The curator sends a round's queries one after the other in agent order
(the plan's), so agent i's query has left it once the wire bytes of every query up to its own
have crossed its link, at ``S_i = 8 (bytes before i and i's) / capacity``: its query reaches
it no earlier than that (and no earlier than its own link delivers it), which shifts its
report by ``max(0, S_i - D_i)``, ``D_i`` the time its own link takes for the query. The
reports then land in the order they would at an unlimited curator, one at a time: a report
lands at ``F_k = max(A_k, F_(k-1) + 8 w_k / capacity)`` (``F_0 = 0``, the round's start):
its own arrival ``A_k`` or, when the link is busy, once the reports before it and its own
``w_k`` wire bytes have crossed it (``F = P + max(0, cummax(A - P))`` with P the link's
cumulative transfer times: exact integer sums of bytes, one product, a running maximum, the
same on every machine). A report on an idle link is taken to cross it while it uploads (the
curator's link is far faster than any one phone's). With both capacities unlimited neither
step runs: the arrival times are those of the agents' links alone.
"""

from __future__ import annotations

import math

import numpy as np
from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the compiled link factors (``_netc.c``'s ``link_factors``: the same bits outside the tails,
#: which numpy fills), or numpy's
LINKS = Accelerator.load("link factors", "ldpsim.simulator.session._netc", environment.NETWORK,
                         "simulator/session/_netc.c", needs=("link_factors",))

#: Acklam's rational approximation of the normal quantile (relative error below 1.2e-9):
#: the central region's numerator and denominator, the tails'
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155288572e+01, 1.0)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00, 1.0)
_P_LOW = 0.02425
#: the 52 bits of a draw that make the uniform's magnitude on its half (bits 11 .. 62)
_HALF_MASK = np.uint64((1 << 52) - 1)
#: the draw's top bit: the side of z
_TOP = np.uint64(1 << 63)
#: ln 2 in two parts (fdlibm's: the high part's low 21 bits are zero, so k ln2_hi is exact for
#: |k| < 2^20), 1 / ln 2 and sqrt(1/2), for ``exp`` and ``log``
_LN2_HI, _LN2_LO = float.fromhex("0x1.62e42fee00000p-1"), float.fromhex("0x1.a39ef35793c76p-33")
_INV_LN2 = float.fromhex("0x1.71547652b82fep+0")
_SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
#: exp(r) for |r| <= ln2 / 2: Taylor's 1/k! for k = 13 .. 0 (the rest below 4e-18 relative)
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
#: log(m) = 2 s (1 + w/3 + ... + w^11/23), s = (m - 1)/(m + 1), w = s^2 <= 0.0295: 1/(2k+1)
#: for k = 11 .. 0 (the rest below 1e-18 relative)
_LOG_C = tuple(1.0 / (2 * k + 1) for k in range(11, -1, -1))


def _poly(coefs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    """Horner's rule."""
    out = np.full_like(x, coefs[0])
    for c in coefs[1:]:
        out *= x
        out += c
    return out


def exp(x: np.ndarray) -> np.ndarray:
    """e^x of each element, from IEEE additions, products and an exact scaling only (numpy's
    own ``exp`` rounds differently on processors of other kinds): x = k ln2 + r with k the
    nearest integer to x / ln2 and r in two steps (Cody and Waite), e^r by Horner's rule on
    its Taylor series, times 2^k. Relative error below 1e-15 for |x| < 700."""
    x = np.asarray(x, dtype=np.float64)
    k = np.rint(x * _INV_LN2)
    r = x - k * _LN2_HI
    r -= k * _LN2_LO
    return np.ldexp(_poly(_EXP_C, r), k.astype(np.int32))


def log(p: np.ndarray) -> np.ndarray:
    """The natural logarithm of each positive normal p, from IEEE operations only (as
    ``exp``): p = m 2^e with m in [sqrt(1/2), sqrt(2)) (exact), log m = 2 atanh((m - 1)/(m + 1))
    by its series, plus e ln 2 in two parts. Relative error below 1e-15."""
    m, e = np.frexp(np.asarray(p, dtype=np.float64))
    low = m < _SQRT_HALF
    m[low] *= 2.0  # exact
    e = (e - low).astype(np.float64)
    s = m - 1.0  # exact
    s /= m + 1.0
    out = _poly(_LOG_C, s * s)
    out *= s
    out *= 2.0
    out += e * _LN2_LO
    out += e * _LN2_HI
    return out


def normal_quantile(u: np.ndarray) -> np.ndarray:
    """The standard normal quantile of each u in (0, 1), by Acklam's rational approximation
    (relative error below 1.2e-9): numpy only, so that the curator imports no SciPy."""
    u = np.asarray(u, dtype=np.float64)
    q = u - 0.5
    r = q * q
    out = _poly(_A, r)
    out *= q
    out /= _poly(_B, r)
    tail = np.flatnonzero(np.abs(q) > 0.5 - _P_LOW)
    if len(tail):
        p = np.minimum(u[tail], 1.0 - u[tail])
        t = np.sqrt(-2.0 * log(p))  # ``log``: the same bits on every processor
        x = _poly(_C, t) / _poly(_D, t)
        out[tail] = np.where(u[tail] < 0.5, x, -x)
    return out


def link_z(b: np.ndarray) -> np.ndarray:
    """A standard normal z of each 64-bit draw ``b``, from the distribution itself (see the
    module docstring): ``p = (k + 1/2) 2^-53`` in (0, 1/2) from the draw's bits 11 .. 62 (k,
    exact in a double), z the normal quantile of p (negative), negated where the top bit is
    set. So z is the quantile of a uniform on the 2^53 midpoints of (0, 1), evaluated on its
    nearer tail: no rounding near 1, both tails reach 8.29 sigma, and z(-) = -z(+) exactly."""
    b = np.asarray(b, dtype=np.uint64)
    p = ((b >> np.uint64(11)) & _HALF_MASK).astype(np.float64)  # below 2^52: exact
    p += 0.5
    p *= 2.0 ** -53
    z = normal_quantile(p)
    z.view(np.uint64)[...] ^= b & _TOP  # the top bit flips z's sign bit: exactly -z
    return z


def link_factors(b: np.ndarray, cls: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Each agent's link factor exp(spread z): ``b`` its draw (``link_z``), ``cls`` its class
    (uint8 or uint16), ``spread`` each class's sigma; with this module's ``exp`` and ``log``,
    so the same bits on every processor. The compiled pass (``LINKS``) writes them over ``b``
    (a contiguous uint64 array it may overwrite), leaving the tails' 4.85% to numpy."""
    spread = np.ascontiguousarray(spread, dtype=np.float64)
    if LINKS.module is None or cls.dtype not in (np.uint8, np.uint16):
        return _factors(b, np.take(spread, cls))
    b = np.ascontiguousarray(b, dtype=np.uint64)
    tails = np.empty(len(b), dtype=np.int64)  # only the pages written are ever touched
    k = LINKS.module.link_factors(b, np.ascontiguousarray(cls), cls.dtype == np.uint16,
                                  spread, tails)
    out = b.view(np.float64)
    if k:  # the tails kept their draws: their logarithms are numpy's
        at = tails[:k]
        out[at] = _factors(b[at], np.take(spread, cls[at]))
    return out


def _factors(b: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``link_factors`` in numpy: ``spread`` per agent."""
    z = link_z(b)
    z *= spread
    return exp(z)


def query_departures(wire_down: np.ndarray, capacity_s_per_byte: float) -> np.ndarray:
    """When each query of a round has left the curator (seconds after the round starts): its
    link sends them one after the other in row order, ``wire_down`` the wire bytes of each
    row's (its query's and, when it is online, the broadcast's; 0: nothing sent), at
    ``capacity_s_per_byte`` seconds a byte (an exact integer running sum, one product)."""
    sent = np.cumsum(np.asarray(wire_down, dtype=np.int64))
    return sent.astype(np.float64) * capacity_s_per_byte


def report_landings(arrivals: np.ndarray, wire_up: np.ndarray,
                    capacity_s_per_byte: float) -> np.ndarray:
    """When each report lands at a curator whose link takes ``capacity_s_per_byte`` seconds a
    byte: ``arrivals`` their landing at an unlimited curator, ``wire_up`` their wire bytes.
    In the order of ``arrivals`` (ties in row order), ``F_k = max(A_k, F_(k-1) + 8 w_k / C)``
    with ``F_0 = 0`` (see the module docstring), computed as ``P + max(0, cummax(A - P))``
    with P the link's cumulative transfer time. Returned in the rows' order."""
    order = np.argsort(arrivals, kind="stable")
    sent = np.cumsum(np.asarray(wire_up, dtype=np.int64)[order])
    busy = sent.astype(np.float64) * capacity_s_per_byte
    land = arrivals[order] - busy
    np.maximum.accumulate(land, out=land)
    np.maximum(land, 0.0, out=land)  # F_0 = 0: the link is free when the round starts
    land += busy
    np.maximum(land, arrivals[order], out=land)  # never before its own arrival (rounding)
    out = np.empty_like(land)
    out[order] = land
    return out
