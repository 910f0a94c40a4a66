"""Exact intervals of what an attack scored: a success rate from its wins and trials.

A coalition's attack (``simulator.audit.leakage``) scores each target 1, ½ (a tie) or 0; its
accuracy is its wins over its trials. With few trials (one target at n − 1 colluders) a band
from the spread over repetitions says little: the Clopper–Pearson interval of the wins and
trials themselves is exact at every count (Clopper & Pearson, 1934), and pools over repetitions
by summing both.
"""

from __future__ import annotations


def exact_interval(wins: float, trials: int, level: float = 0.95) -> list[float] | None:
    """The Clopper–Pearson interval of a success rate from ``wins`` of ``trials`` (a tie
    counted ½ is a half win: the beta quantiles take any real count); None without trials."""
    if trials <= 0:
        return None
    # the beta distribution's quantile, as scipy.stats.beta.ppf computes it, from
    # scipy.special alone (scipy.stats would double a run's memory: about 50 MB more)
    from scipy.special import betaincinv

    a = (1.0 - level) / 2.0
    lo = 0.0 if wins <= 0 else float(betaincinv(wins, trials - wins + 1, a))
    hi = 1.0 if wins >= trials else float(betaincinv(wins + 1, trials - wins, 1.0 - a))
    return [lo, hi]
