"""When a round of a ``[deployment]`` ends, and what its record says of its answers' arrival
times (``session.network``): the completion percentiles of an evenly spaced sample of them, the
arrival that completes the quota, and the end itself (the deadline, the quota, or the last
answer). Shared by a whole round's close (``network.Network.close_round``) and a streamed
round's (``streamnet``), which evaluates the same sample on its own pass.
"""

from __future__ import annotations

import math

import numpy as np

#: answers above which a round's completion percentiles are those of an evenly spaced sample
#: of them (every k-th in agent order, at least this many): exact below
PERCENTILE_SAMPLE = 1 << 15


def sample_stride(n: int) -> int:
    """The stride of the evenly spaced sample of ``n`` answers whose percentiles a round
    reports (``order_stats``): every one up to ``PERCENTILE_SAMPLE`` of them."""
    return 1 if n <= PERCENTILE_SAMPLE else n // PERCENTILE_SAMPLE


def percentiles(sample: np.ndarray) -> list[float | None]:
    """The 50th, 95th and 99th percentiles of ``sample`` (linear interpolation, as
    ``np.percentile``; None each when it is empty)."""
    m = len(sample)
    if not m:
        return [None, None, None]
    pos = [(m - 1) * q for q in (0.50, 0.95, 0.99)]
    kth = sorted({math.floor(p) for p in pos} | {math.ceil(p) for p in pos})
    part = np.partition(sample, kth)
    pct: list[float | None] = []
    for p in pos:
        lo, hi = float(part[math.floor(p)]), float(part[math.ceil(p)])
        pct.append(lo + (hi - lo) * (p - math.floor(p)))
    return pct


def order_stats(times: np.ndarray, quota_rank: int) -> tuple[list[float | None], float | None]:
    """The 50th, 95th and 99th percentiles of ``times`` (linear interpolation, as
    ``np.percentile``; of every k-th time above ``PERCENTILE_SAMPLE`` of them) and its
    ``quota_rank``-th smallest value (1-based, exact; None: out of range)."""
    n = len(times)
    if not n:
        return [None, None, None], None
    pct = percentiles(times[::sample_stride(n)])
    if not 0 < quota_rank <= n:
        return pct, None
    if quota_rank == n:
        return pct, float(times.max())
    return pct, float(np.partition(times, quota_rank - 1)[quota_rank - 1])


def round_end(last: float | None, quota_time: float | None, everyone_answered: bool,
              deadline: float | None) -> float:
    """When a round ends (see the module docstring): ``last`` its last online answer's
    arrival (None: none), ``quota_time`` the arrival that completes the quota (None: it is
    not reached), ``everyone_answered`` whether every online agent answered (else the last
    arrival does not end it)."""
    ends = [math.inf if deadline is None else float(deadline)]
    if quota_time is not None:
        ends.append(quota_time)
    if everyone_answered:
        ends.append(0.0 if last is None else last)
    end = min(ends)
    if math.isinf(end):  # nobody to wait for and no deadline: it ends with its last answer
        end = 0.0 if last is None else last
    return end
