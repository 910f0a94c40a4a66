"""Rank aggregation under LDP (seed 000): KwikSort, DP-KwikSort, LDP-KwikSort:RR and :Lap."""

from protocols.rank.data import KINDS
from protocols.rank.protocols import DPKwikSort, KwikSortPlain, LDPKwikSortLap, LDPKwikSortRR

PROTOCOLS = (KwikSortPlain(), DPKwikSort(), LDPKwikSortRR(), LDPKwikSortLap())

__all__ = ["PROTOCOLS", "KINDS"]
