"""Preference-ranking collection under LDP: SAFARI and full-domain baselines.

From Cheng, Yang, Wang, Su, Chen & Li, 2021, "Collecting Preference Rankings under Local
Differential Privacy".

Protocols: ``safari`` (Rule I → SAFA → LADE → Anchors K-thin chain → Rule II → SAFA →
synthesis), ``safari_nopriv`` (the same without privacy), and the baselines over all d!
rankings ``rank_grr``, ``rank_olh``, ``rank_harmony``, ``rank_calm``. Data kinds:
``sushi_subset``, ``jester``, ``safari_mallows``.
"""

from ldpsim.protocols.safari.baselines import RankCALM, RankGRR, RankHarmony, RankOLH
from ldpsim.protocols.safari.data import KINDS
from ldpsim.protocols.safari.protocols import Safari, SafariNoPriv

PROTOCOLS = (Safari(), SafariNoPriv(), RankGRR(), RankOLH(), RankHarmony(), RankCALM())

__all__ = ["PROTOCOLS", "KINDS"]
