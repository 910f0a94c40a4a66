"""Arrays a round reads and then updates in place start with their pages present
(``common.written_zeros``): the per-agent byte counters and the pool's privacy odometer. A page
of ``np.zeros`` memory that is read before it is written costs two page faults inside the round
(docs/performance.md has the measurements)."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest
from ldpsim.simulator.session import CommStats
from ldpsim.simulator.session.common import written_zeros
from ldpsim.simulator.session.odometer import Odometer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="minor page faults as Linux counts them")

N = 1 << 21  # 4 MiB of int16, 16 MiB of float64: about 1000 and 4000 pages
BATCH = 1 << 12  # temporaries of 32 KiB: below glibc's mmap threshold, so they fault nothing
#: faults the interpreter itself may take while the loop runs (its own small allocations);
#: an array whose pages were not present would take one or two per 4 KiB page
SLACK = 128


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_written_zeros_are_zeros_of_the_shape_and_dtype():
    for shape, dtype in ((5, np.int16), ((3, 4), bool), (7, np.float64)):
        a = written_zeros(shape, dtype)
        assert a.dtype == np.dtype(dtype) and a.shape == np.zeros(shape).shape
        assert not a.any() and a.flags.writeable and a.flags.c_contiguous
    assert written_zeros(3).dtype == np.float64


def test_reading_then_updating_written_zeros_faults_no_page():
    a = written_zeros(N, np.int16)
    before = _faults()
    for s in range(0, N, BATCH):
        a[s:s + BATCH] += 12
    assert _faults() - before < SLACK, _faults() - before
    assert int(a.sum(dtype=np.int64)) == 12 * N


def test_a_rounds_byte_counting_faults_no_page_of_the_counters():
    sizes = np.full(BATCH, 12, dtype=np.int64)
    comm = CommStats()
    comm.start(N)
    before = _faults()
    for s in range(0, N, BATCH):
        comm.count_down(slice(s, s + BATCH), sizes)
        comm.count_up(slice(s, s + BATCH), sizes)
    assert _faults() - before < SLACK, _faults() - before
    assert int(comm.up.sum(dtype=np.int64)) == int(comm.down.sum(dtype=np.int64)) == 12 * N


class _OneEpsilon:
    """A bound run whose every round costs ε = 1."""

    def round_epsilon(self, rnd):
        return 1.0


def test_the_odometers_first_round_faults_no_page_of_its_spending():
    odo = Odometer(_OneEpsilon(), 2.0, 0, N)
    batches = [np.arange(s, s + BATCH) for s in range(0, N, BATCH)]
    before = _faults()
    for ids in batches:
        assert odo.admit(0, ids) is None  # every agent may answer
    # the round's answered-mask is made here (N bools, one write fault per page as it is
    # filled); the spending (N float64s, 4x as many pages) is read and updated without a fault
    assert _faults() - before < N // 4096 + SLACK
    assert odo.spent.sum() == N and odo.answered[0].all()
