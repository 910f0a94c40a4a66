"""Answer matrices as Algorithm 1 (Sun et al., 2018, §II-B, Eq. 1-2) reads them: the answered
cells only (``SparseAnswers``), or the dense matrix (``DenseAnswers``) when most cells are
answered.

Crowdsourcing answers are sparse (AdultContent: 825 workers × 11,040 tasks, 1% answered), and
every round of Algorithm 1 is four sums over each worker's or each task's answers. On the
dense matrix each of them runs over every cell, NULLs included as zeros; here they run over the
answered cells only, summed by ``ordered.segment_sums`` in the same tree as ``ordered.matmul``
sums the dense rows, so both forms give the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ldpsim.protocols import ordered

#: At most this fraction of answered cells: Algorithm 1 runs on the answered cells only (an
#: answered cell costs about ten dense ones; the result is the same either way).
SPARSE_FILL = 0.05


@dataclass(frozen=True)
class SparseAnswers:
    """The answered cells of an (m, n) answer matrix (workers × tasks), in row-major order.

    Attributes
    ----------
    shape : (int, int)
        (m, n): workers and tasks.
    workers, tasks : ndarray of int64, shape (nnz,)
        Each answered cell's row and column, sorted by worker, then task.
    values : ndarray of float64, shape (nnz,)
        The answers (finite).
    """

    shape: tuple[int, int]
    workers: np.ndarray
    tasks: np.ndarray
    values: np.ndarray

    @classmethod
    def from_dense(cls, x: np.ndarray, mask: np.ndarray | None = None) -> SparseAnswers:
        """The answered cells of ``x`` (``mask``: its finite cells by default)."""
        x = np.asarray(x, dtype=np.float64)
        mask = np.isfinite(x) if mask is None else mask
        rows, cols = np.nonzero(mask)  # row-major: sorted by worker, then task
        return cls((int(x.shape[0]), int(x.shape[1])), rows.astype(np.int64),
                   cols.astype(np.int64), x[rows, cols])

    @classmethod
    def from_codes(cls, codes: np.ndarray, levels: int) -> SparseAnswers:
        """The answered cells of integer reports (``levels`` = NULL, as ``mechanisms.to_codes``
        writes them)."""
        c = np.asarray(codes)
        rows, cols = np.nonzero(c != levels)
        return cls((int(c.shape[0]), int(c.shape[1])), rows.astype(np.int64),
                   cols.astype(np.int64), c[rows, cols].astype(np.float64))

    @property
    def null_fraction(self) -> float:
        """The fraction of unanswered cells (as ``np.isnan(dense).mean()``)."""
        size = self.shape[0] * self.shape[1]
        return float(np.float64(size - len(self.values)) / np.float64(size))

    @classmethod
    def from_cells(cls, shape: tuple[int, int], workers: np.ndarray, tasks: np.ndarray,
                   values: np.ndarray) -> SparseAnswers:
        """From (worker, task, answer) cells in any order, each cell at most once."""
        w = np.asarray(workers, dtype=np.int64)
        t = np.asarray(tasks, dtype=np.int64)
        v = np.asarray(values, dtype=np.float64)
        order = np.lexsort((t, w))
        return cls((int(shape[0]), int(shape[1])), w[order], t[order], v[order])

    def dense(self) -> np.ndarray:
        """The (m, n) matrix, NaN at the unanswered cells."""
        out = np.full(self.shape, np.nan)
        out[self.workers, self.tasks] = self.values
        return out

    # -- the layout of the sums (computed once) --------------------------------------------
    def __post_init__(self) -> None:
        m, n = self.shape
        by_task = np.argsort(self.tasks, kind="stable")  # workers stay ascending per task
        object.__setattr__(self, "_row_starts", _starts(self.workers, m))
        object.__setattr__(self, "_by_task", by_task)
        object.__setattr__(self, "_col_workers", self.workers[by_task])
        object.__setattr__(self, "_col_values", self.values[by_task])
        object.__setattr__(self, "_col_starts", _starts(self.tasks[by_task], n))

    @property
    def counts(self) -> np.ndarray:
        """Answers per worker (float64)."""
        return np.diff(self._row_starts).astype(np.float64)

    def squares(self) -> np.ndarray:
        """Σ_j a_ij² over each worker's answers (the dense row sum of the squares)."""
        return self._rows(self.values * self.values)

    def answers_times(self, y: np.ndarray) -> np.ndarray:
        """Σ_j a_ij y_j per worker (``ordered.matmul(x0, y)``)."""
        return self._rows(self.values * y[self.tasks])

    def mask_times(self, y: np.ndarray) -> np.ndarray:
        """Σ_{j answered} y_j per worker (``ordered.matmul(w, y)``)."""
        return self._rows(y[self.tasks])

    def quality_times_answers(self, q: np.ndarray) -> np.ndarray:
        """Σ_i q_i a_ij per task (``ordered.matmul(q, x0)``)."""
        return self._cols(q[self._col_workers] * self._col_values)

    def quality_times_mask(self, q: np.ndarray) -> np.ndarray:
        """Σ_{i answered} q_i per task (``ordered.matmul(q, w)``)."""
        return self._cols(q[self._col_workers])

    def _rows(self, terms: np.ndarray) -> np.ndarray:
        return ordered.segment_sums(terms, self.tasks, self._row_starts, self.shape[1])

    def _cols(self, terms: np.ndarray) -> np.ndarray:
        return ordered.segment_sums(terms, self._col_workers, self._col_starts, self.shape[0])


def answers_of_codes(codes: np.ndarray, levels: int) -> np.ndarray | SparseAnswers:
    """Integer reports (``levels`` = NULL) as Algorithm 1's input: their answered cells when
    at most ``SPARSE_FILL`` of the cells are answered, else the dense matrix (NaN = NULL)."""
    c = np.asarray(codes)
    if c.ndim == 2 and c.size and np.count_nonzero(c != levels) <= SPARSE_FILL * c.size:
        return SparseAnswers.from_codes(c, levels)
    out = c.astype(np.float64)
    out[c == levels] = np.nan
    return out


def _starts(keys: np.ndarray, segments: int) -> np.ndarray:
    """Segment starts (``segments + 1``) of ascending ``keys`` in [0, segments)."""
    return np.concatenate(([0], np.cumsum(np.bincount(keys, minlength=segments)))).astype(
        np.int64)


class DenseAnswers:
    """The dense operands of Algorithm 1 (Eq. 1-2): answers with NULL as 0 (``x0``) and the
    0/1 mask ``w``; a fully answered matrix (LP's and MF's reports) sums its mask once.

    Parameters
    ----------
    x : ndarray, shape (m, n)
        The answers.
    mask : ndarray of bool, shape (m, n)
        Their answered (finite) cells.
    """

    def __init__(self, x: np.ndarray, mask: np.ndarray) -> None:
        self.shape = x.shape
        self.full = bool(mask.all())
        if self.full:  # no NULL: x itself, and n answers per worker (w.sum's exact count)
            self.x0, self.w = x, None
            self.counts = np.full(x.shape[0], float(x.shape[1]))
        else:
            self.x0 = np.where(mask, x, 0.0)
            self.w = mask.astype(np.float64)
            self.counts = np.count_nonzero(mask, axis=1).astype(np.float64)  # exact, as w.sum

    def squares(self) -> np.ndarray:
        # numpy's row sum of the squares, in its own tree (``ordered.dot``: the same bits)
        return ordered.dot(self.x0, self.x0)

    def answers_times(self, y: np.ndarray) -> np.ndarray:
        return ordered.matmul(self.x0, y)

    def mask_times(self, y: np.ndarray) -> np.ndarray:
        if self.full:  # every row sums 1.0 * y_j over all tasks: one tree, the same bits
            return np.full(self.shape[0], ordered.matmul(np.ones((1, self.shape[1])), y)[0])
        return ordered.matmul(self.w, y)

    def quality_times_answers(self, q: np.ndarray) -> np.ndarray:
        return ordered.matmul(q, self.x0)

    def quality_times_mask(self, q: np.ndarray) -> np.ndarray:
        if self.full:  # every column sums q_i * 1.0 over all workers
            return np.full(self.shape[1], ordered.matmul(q, np.ones((self.shape[0], 1)))[0])
        return ordered.matmul(q, self.w)
