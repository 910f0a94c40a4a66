"""ldpsim's science: mechanisms, protocols, estimators, data sets and utility metrics.

No processes, sockets or files beyond reading data sets: the runtime in ``simulator`` drives
these objects through the small interface in ``protocols.base``.
"""

from __future__ import annotations

from protocols import ethics, rank, safari, truth, vote
from protocols.base import ParamError, Protocol
from protocols.data import DataKind
from protocols.local import LocalRun, run_locally

#: Each family package exposes ``PROTOCOLS`` (instances) and ``KINDS`` (data kinds by name).
FAMILIES = (rank, truth, vote, safari, ethics)


def _collect() -> tuple[dict[str, Protocol], dict[str, DataKind]]:
    protocols: dict[str, Protocol] = {}
    kinds: dict[str, DataKind] = {}
    for fam in FAMILIES:
        for p in fam.PROTOCOLS:
            if p.name in protocols:
                raise RuntimeError(f"protocol name {p.name!r} registered twice")
            protocols[p.name] = p
        for name, kind in fam.KINDS.items():
            if name in kinds:
                raise RuntimeError(f"data kind {name!r} registered twice")
            kinds[name] = kind
    return protocols, kinds


PROTOCOLS, DATA_KINDS = _collect()


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


__all__ = ["PROTOCOLS", "DATA_KINDS", "get_protocol", "get_data_kind", "ParamError", "LocalRun",
           "run_locally"]
