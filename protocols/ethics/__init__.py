"""Crowd-guided ethical decisions with central and local DP (Wang et al., 2019).

From Wang, Zhao, Yu, Liu, Yang, Ren & Shi, 2019, "Privacy-preserving Crowd-guided AI
Decision-making in Ethical Dilemmas" (CIKM).

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
