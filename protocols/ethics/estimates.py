"""One voter's estimate (Wang et al., 2019): the layout of a voter's row (``split_rows``), the
norm-constrained MLE of its records (``voter_mle``, Eq. 3) and how far that estimate can move
when the voter's data change: the sensitivities of Theorems 1 and 3, kept in one place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ldpsim.protocols.ethics import memo, truthtap
from ldpsim.protocols.ethics.mle import constrained_mle
from ldpsim.protocols.ethics.model import ball_diameter_l1


def central_sensitivity(norm: str, bound: float, d: int, n_voters: int) -> float:
    """Theorem 1: L1 sensitivity of the average of N constrained MLEs, D_1(C) / N.

    One voter's beta_i can move anywhere in the C-ball whether her whole data set changes
    (voter level) or one record does (record level: in the proof's worst case the other records
    are ~0, so one record decides beta_i), hence the same Delta for VLCP and RLCP. D_1(C) is the
    ball's L1 diameter (``ball_diameter_l1``: 2C, 2 sqrt(d) C or 2 d C). The paper's formula was
    lost in extraction; the reconstruction reads 2C/N, which is D_1 for an L1 ball. Whichever
    norm the paper bounds, the L1 diameter of that ball is what the Laplace mechanism needs, so
    that is what is used here (2 sqrt(d) C / N for the default L2 ball).
    """
    return ball_diameter_l1(norm, bound, d) / max(n_voters, 1)


def local_sensitivity(norm: str, bound: float, d: int) -> float:
    """Theorem 3: L1 sensitivity of one voter's constrained MLE, D_1(C), voter or record level."""
    return ball_diameter_l1(norm, bound, d)


def split_rows(data: np.ndarray, public: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(eps column (B,), records (B, n, d)) from rows ``[eps_i, z_1, ..., z_n]``."""
    d, n = int(public["d"]), int(public["records"])
    data = np.asarray(data, dtype=np.float64)
    return data[:, 0], data[:, 1:1 + n * d].reshape(len(data), n, d)


def voter_mle(z: np.ndarray, public: dict[str, Any]) -> np.ndarray:
    """Each voter's Eq. (3) estimate from its records ``z`` (B, n, d), in the data set's
    C-ball (``public["bound"]``, ``public["norm"]``)."""
    return memo_mle(z, float(public["bound"]), public["norm"])


def memo_mle(z: np.ndarray, bound: float, norm: str) -> np.ndarray:
    """``constrained_mle(z, bound, norm)`` (Eq. 3), each voter solved once per process: a
    voter's estimate depends on her records alone, bit for bit, so it is kept
    (``memo.MLE``) for the ground truth and every run on the same data set. A pool's
    truth tap hears the estimates (``truthtap.solved``: only of its own rows, in place)."""
    z = np.asarray(z, dtype=np.float64)
    tag = f"eq3:{float(bound)!r}:{norm}"
    est = memo.MLE.results(tag, z, z.shape[-1], lambda block: constrained_mle(block, bound, norm))
    truthtap.solved(z, est, bound, norm)
    return est
