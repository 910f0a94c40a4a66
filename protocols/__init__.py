"""ldpsim's science: mechanisms, protocols, estimators, data sets and utility metrics.

No processes, sockets or files beyond reading data sets: the runtime in ``simulator`` drives
these objects through the small interface in ``protocols.base``.
"""

from __future__ import annotations

from protocols.base import ParamError, Protocol
from protocols.data import DataKind
from protocols.rank import data as rank_data
from protocols.rank.protocols import DPKwikSort, KwikSortPlain, LDPKwikSortLap, LDPKwikSortRR

PROTOCOLS: dict[str, Protocol] = {
    p.name: p for p in (KwikSortPlain(), DPKwikSort(), LDPKwikSortRR(), LDPKwikSortLap())
}

DATA_KINDS: dict[str, DataKind] = dict(rank_data.KINDS)


def get_protocol(name: str) -> Protocol:
    """The protocol registered under ``name``, or a ParamError listing the allowed names."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ParamError(f"protocol: unknown protocol {name!r}; allowed: "
                         f"{', '.join(sorted(PROTOCOLS))}") from None


def get_data_kind(name: str) -> DataKind:
    """The data kind registered under ``name``, or a ParamError listing the allowed kinds."""
    try:
        return DATA_KINDS[name]
    except KeyError:
        raise ParamError(f"[data] kind: unknown data kind {name!r}; allowed: "
                         f"{', '.join(sorted(DATA_KINDS))}") from None


__all__ = ["PROTOCOLS", "DATA_KINDS", "get_protocol", "get_data_kind", "ParamError"]
