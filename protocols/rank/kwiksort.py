"""KwikSort (Ailon, Charikar & Newman, J. ACM 2008) on a pairwise comparison profile.

``cmp[a, b] = C_ab - C_ba`` is the net number of agents preferring item ``a`` to item ``b``
(Yan, Li & Liu, 2020, Table 1). KwikSort picks a uniform random pivot, puts every other item
before the pivot when ``cmp[item, pivot] > 0``, after it when ``< 0``, and on a random side when
the comparison is a tie (Yan, Li & Liu, 2020, §2.1: "the randomized placement method is adopted
instead of [pwlistorder's] default method that directly places a_q after a_p"), then recurses on
both sides. The output is a ranking, most preferred item first.

The comparison can be replaced by a callable (DP-KwikSort draws fresh Laplace noise for every
comparison it makes) and capped: after ``max_comparisons`` comparisons the still unsorted
sub-lists are ordered uniformly at random, using no data (see ``dp_kwiksort``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class KwikSortResult:
    """A KwikSort run: the ranking and how many comparisons it made."""

    ranking: list[int]
    comparisons: int
    capped: bool  # True when the comparison cap stopped the sort early


def kwiksort(
    cmp: np.ndarray | None,
    rng: np.random.Generator,
    compare: Callable[[int, int], float] | None = None,
    max_comparisons: int | None = None,
    m: int | None = None,
) -> KwikSortResult:
    """Sort ``m`` items by KwikSort with random tie placement.

    Parameters
    ----------
    cmp : (m, m) array or None
        Antisymmetric comparison profile; ``cmp[a, b] > 0`` means ``a`` is preferred to ``b``.
    rng : numpy Generator
        The curator's own stream (pivots, tie sides, random completion after the cap).
    compare : callable, optional
        ``compare(item, pivot)`` returning the (possibly noisy) value used in place of
        ``cmp[item, pivot]``. Called exactly once per comparison.
    max_comparisons : int, optional
        Stop comparing after this many comparisons; remaining sub-lists are shuffled uniformly.
    m : int, optional
        Number of items when ``cmp`` is None.
    """
    if compare is None:
        if cmp is None:
            raise ValueError("kwiksort needs cmp or compare")
        table = np.asarray(cmp, dtype=np.float64)

        def compare(a: int, p: int) -> float:
            return float(table[a, p])

    n_items = m if m is not None else np.asarray(cmp).shape[0]
    used = 0
    capped = False
    out: list[int] = []
    # Explicit stack of sub-lists, processed left to right: output order is stack pop order.
    stack: list[list[int]] = [list(range(n_items))]
    while stack:
        items = stack.pop()
        if len(items) <= 1:
            out.extend(items)
            continue
        budget_left = max_comparisons is None or used + (len(items) - 1) <= max_comparisons
        if not budget_left:
            capped = True
            out.extend(int(x) for x in rng.permutation(items))
            continue
        pivot = items[int(rng.integers(len(items)))]
        left: list[int] = []
        right: list[int] = []
        for a in items:
            if a == pivot:
                continue
            v = compare(a, pivot)
            used += 1
            if v > 0 or (v == 0 and rng.random() < 0.5):
                left.append(a)
            else:
                right.append(a)
        stack.append(right)
        stack.append([pivot])
        stack.append(left)
    return KwikSortResult(ranking=out, comparisons=used, capped=capped)
