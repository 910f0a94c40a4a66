"""Rank aggregation under LDP (Yan, Li & Liu, 2020, "Private Rank Aggregation under Local
Differential Privacy"): KwikSort, DP-KwikSort, LDP-KwikSort:RR and :Lap."""

from ldpsim.protocols.rank.data import KINDS
from ldpsim.protocols.rank.protocols import DPKwikSort, KwikSortPlain, LDPKwikSortLap, LDPKwikSortRR

PROTOCOLS = (KwikSortPlain(), DPKwikSort(), LDPKwikSortRR(), LDPKwikSortLap())

__all__ = ["PROTOCOLS", "KINDS"]
