"""What a curator sends in one round (``RoundPlan``) and what a valid report looks like
(``ReportSchema``): the runtime checks every report against it before the estimator sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from ldpsim.protocols.queries import RowQueries


@dataclass(frozen=True)
class ReportSchema:
    """What a valid report payload looks like: a flat list of ``length`` numbers.

    ``dtype`` is "int" (whole numbers in [low, high]) or "float" (finite reals in [low, high]).
    Anything else is rejected by the runtime before the estimator sees it.
    """

    dtype: str
    length: int
    low: float = -math.inf
    high: float = math.inf

    def validate(self, payloads: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised validation. Returns (ok mask, array of the valid rows' values).

        The array has one row per payload (rows of invalid payloads are zero) and the
        schema's dtype (int64 or float64).
        """
        n = len(payloads)
        dt = np.int64 if self.dtype == "int" else np.float64
        ok = np.ones(n, dtype=bool)
        try:
            with np.errstate(invalid="ignore"):  # a peer's NaN cast to int: rejected below
                arr = np.array(payloads, dtype=dt)
            if arr.shape != (n, self.length) or (dt is np.int64 and not _all_ints(payloads)):
                raise ValueError
        except (ValueError, TypeError, OverflowError):
            arr = np.zeros((n, self.length), dtype=dt)
            for i, p in enumerate(payloads):
                try:
                    if not isinstance(p, list | tuple) or len(p) != self.length:
                        raise ValueError
                    if dt is np.int64 and not all(type(v) is int for v in p):
                        raise ValueError
                    if dt is np.float64 and not all(type(v) in (int, float) for v in p):
                        raise ValueError
                    arr[i] = p
                except (ValueError, TypeError, OverflowError):
                    ok[i] = False
        ok &= self.inside(arr)
        arr[~ok] = 0
        return ok, arr

    def all_inside(self, values: np.ndarray) -> bool:
        """Whether every value of ``values`` is finite and in [low, high] (one check for a
        whole batch; ``inside`` says which rows fail)."""
        if not values.size:
            return True
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            return False
        return bool(values.min() >= self.low and values.max() <= self.high)

    def inside(self, values: np.ndarray) -> np.ndarray:
        """Per row of numeric ``values``: every value finite and in [low, high]."""
        with np.errstate(invalid="ignore"):
            return np.isfinite(values).all(axis=1) & (values >= self.low).all(axis=1) & (
                values <= self.high).all(axis=1)

    def reason(self, payload: Any) -> str:
        """Explain why one payload is invalid (for the ERROR record)."""
        if not isinstance(payload, list | tuple):
            return (f"payload must be a list of {self.length} {self.dtype}s, "
                    f"got {type(payload).__name__}")
        if len(payload) != self.length:
            return f"payload must have {self.length} values, got {len(payload)}"
        shown = ", ".join(_short(v) for v in payload[:8])
        return (f"payload values must be {self.dtype}s in [{self.low:g}, {self.high:g}], "
                f"got [{shown}{', ...' if len(payload) > 8 else ''}]")


def _short(value: Any) -> str:
    """A short repr of one value of an untrusted payload (never formats a large object)."""
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 24 else text[:24] + "..."


def _all_ints(payloads: list[Any]) -> bool:
    # np.array(dtype=int64) silently truncates floats; reports must be exact integers.
    for p in payloads:
        for v in p:
            if type(v) is not int:
                return False
    return True


@dataclass
class RoundPlan:
    """What the curator sends in one round.

    ``agents`` are the asked agents' ids (sorted int64). ``queries`` is None or one msgpack-able
    payload per asked agent (an array with one row per agent is fine, or a
    ``protocols.queries.RowQueries``, drawn batch by batch as the queries go out).
    ``broadcast`` is sent once and is the same for every asked agent. ``schema`` validates the
    reports, together with the optional per-agent bounds ``report_high``.
    """

    round: int
    agents: np.ndarray
    queries: np.ndarray | list | RowQueries | None
    broadcast: Any
    schema: ReportSchema
    report_bits: float = 0.0  # information-theoretic size of one report, for the comm tables
    #: optional per-agent upper bounds, aligned with ``agents``: shape (N,) for every value of a
    #: report or (N, length) per value (e.g. the domain of the attribute this agent was asked
    #: about). The runtime rejects reports above them like any other out-of-domain report.
    report_high: np.ndarray | None = None
