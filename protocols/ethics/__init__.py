"""Crowd-guided ethical decisions with central and local DP (seed 004: Wang et al., CIKM 2019).

Thurstone–Mosteller voters, the norm-bounded per-voter MLE (``mle``), Algorithm 1 (VLCP/RLCP),
Algorithm 2 (VLDP/RLDP Laplace), Algorithm 3 (RLDP functional mechanism, ``fm``) and the
synthetic generator of §5.1 (``data``).
"""

from ldpsim.protocols.ethics.data import KINDS
from ldpsim.protocols.ethics.protocols import (
    RLCP,
    VLCP,
    VLDP,
    NonPrivate,
    RLDPFunctional,
    RLDPLaplace,
)

PROTOCOLS = (NonPrivate(), VLCP(), RLCP(), VLDP(), RLDPLaplace(), RLDPFunctional())

__all__ = ["PROTOCOLS", "KINDS"]
