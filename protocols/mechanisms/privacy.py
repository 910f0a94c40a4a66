"""What one use of a mechanism guarantees, stated by the mechanism itself.

Every mechanism of ``protocols.mechanisms`` (and every family-local one) has a ``privacy``
property returning a ``MechanismPrivacy``: the ε one release satisfies, the L1 sensitivity of the
query it assumes (None for randomized response, where sensitivity does not apply) and the
mechanism's name. A protocol never writes these numbers again: its binding hook
(``Protocol.rounds``) builds the mechanisms of a run once, and the protocol's privacy claim, its
agents' budget and the ε its agents' odometers charge per round are composed from them
(``protocols.rounds.Rounds``), in the spirit of OpenDP's privacy maps.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MechanismPrivacy:
    """The guarantee of one use of a mechanism.

    Parameters
    ----------
    epsilon : float
        The ε one release is stated at (the largest of a block when the mechanism holds one ε
        per row).
    sensitivity : float or None
        The L1 sensitivity Δ of the query the release assumes; None where sensitivity does not
        apply (randomized response over a finite domain).
    name : str
        The mechanism's name as a privacy claim shows it (e.g. ``"laplace"``).
    delivered : float or None
        The ε the implementation delivers when it is below ``epsilon`` (the discrete Laplace's
        ⌊εt⌋/t); None when it is ``epsilon`` itself.
    """

    epsilon: float
    sensitivity: float | None = None
    name: str = ""
    delivered: float | None = None

    @property
    def delivered_epsilon(self) -> float:
        """The ε the release delivers (<= ``epsilon``)."""
        return self.epsilon if self.delivered is None else self.delivered


class Private(typing.Protocol):
    """Anything that states its own privacy: a mechanism (``GRR``, ``Laplace``, ...)."""

    @property
    def privacy(self) -> MechanismPrivacy: ...


def largest(x: Any) -> float:
    """The largest value of a scalar or array (a block's worst ε or Δ), as a float."""
    if isinstance(x, int | float):
        return float(x)
    return float(np.max(np.asarray(x, dtype=np.float64)))
