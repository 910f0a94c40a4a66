"""A pool's queued query batches, joined: which of them it answers in one randomizer call.

The curator's send window queues several batches of a round while the pool computes; the pool
answers canonical batches of one round for consecutive agents (``continues``) with one call of
the protocol's randomizer over all of them, up to ``GROUP_AGENTS`` agents (``joined``), so the
protocol's per-batch fixed costs are paid once. The reports are the same (every agent's coins
are its own, whatever the batch), and each query batch still gets its own report frame
(``rounds.report_frames``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
from ldpsim.simulator.codec import wire, wire_numpy_read
from ldpsim.simulator.session.rounds import AUTO_MAX

#: The most agents a pool answers in one randomizer call when it joins queued query batches
#: (``PoolSession.answer``): the largest batch "auto" makes. Joining more does not pay:
#: every array of the call grows with it, and memory a process has not used before costs a
#: page fault per 4 KiB on first touch (about 1.3 us each on the 2-core machine of
#: docs/performance.md). Measured at 10^6 agents, 2 pools (batches of 31,250; without the cap up
#: to 8 were joined), medians of seven alternating processes runs: a pool's first-touch page faults
#: in an LDP-KwikSort round 4,600 -> 1,900; rounds LDP-KwikSort RR 55.5 -> 48.5 ms, Lap 56.5
#: -> 49.8, rank_grr 46.1 -> 43.0; DPWeVote unchanged within the noise (136 -> 138 ms).
GROUP_AGENTS = AUTO_MAX

#: one canonical query batch: its round, its agents (increasing ids) and their queries
Batch = tuple[int, np.ndarray, np.ndarray | None]


def continues(last: Batch, rnd: int, ids: np.ndarray, queries: np.ndarray | None) -> bool:
    """Whether the query batch (``rnd``, ``ids``, ``queries``) continues the batch ``last``:
    the same round, the next agents, queries of the same kind and width (or none in both)."""
    lrnd, lids, lq = last
    if rnd != lrnd or int(ids[0]) != int(lids[-1]) + 1:
        return False
    if lq is None or queries is None:
        return lq is None and queries is None
    return lq.dtype == queries.dtype and lq.shape[1:] == queries.shape[1:]


def joined(frames: Iterable[bytes], takes: Callable[[int], bool], cap: int = GROUP_AGENTS
           ) -> Iterator[tuple[list[Batch], bytes | None]]:
    """The frames that arrived together, in order, as (batches to answer at once, of at most
    ``cap`` agents in all, then the frame that is not a canonical query batch, or None). A
    canonical batch of a run the pool does not take (``takes(run)`` False: asked when the
    batch is reached, after everything before it was handled) is dropped."""
    group: list[Batch] = []
    count = 0  # agents in ``group``
    for frame in frames:
        fast = wire_numpy_read.parse_consecutive(frame, wire.QUERY)
        if fast is None:  # a batch without its offline agents (a ``[deployment]``)
            fast = wire_numpy_read.parse_increasing(frame, wire.QUERY)
        if fast is None:
            yield group, frame
            group, count = [], 0
            continue
        run, rnd, ids, queries = fast
        if not takes(run):
            continue
        if group and (count + len(ids) > cap
                      or not continues(group[-1], rnd, ids, queries)):
            yield group, None
            group, count = [], 0
        group.append((rnd, ids, queries))
        count += len(ids)
    yield group, None
