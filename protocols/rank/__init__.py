"""Rank aggregation under LDP (seed 000): KwikSort, DP-KwikSort, LDP-KwikSort:RR and :Lap."""

from ldpsim.protocols.rank.data import KINDS
from ldpsim.protocols.rank.protocols import DPKwikSort, KwikSortPlain, LDPKwikSortLap, LDPKwikSortRR

PROTOCOLS = (KwikSortPlain(), DPKwikSort(), LDPKwikSortRR(), LDPKwikSortLap())

__all__ = ["PROTOCOLS", "KINDS"]
