"""The registry of protocol families: the built-in packages and any installed plugin's (an entry
point in the group ``ldpsim.families``), built on first use so that a plugin may itself import
``protocols``; ``protocols`` re-exports it."""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import Any

from ldpsim.protocols.base import ParamError, Protocol
from ldpsim.protocols.data import DataKind, Dataset
from ldpsim.protocols.families import BUILTIN, family_of_kind, family_of_protocol
from ldpsim.protocols.keys import DataKeys

#: The entry-point group third-party families register under.
ENTRY_POINT_GROUP = "ldpsim.families"

_REGISTRY: tuple[dict[str, Protocol], dict[str, DataKind]] | None = None
#: the protocols handed to this process (``use``), ahead of the built-in ones of their names
_USED: dict[str, Protocol] = {}


def _add(origin: str, family: Any, protocols: dict[str, Protocol],
         kinds: dict[str, DataKind], builtin: bool) -> None:
    """Add one family's protocols and kinds; a plugin that clashes with a registered name or
    is malformed is skipped with a warning (built-in clashes are a bug: RuntimeError)."""

    def refuse(why: str) -> None:
        if builtin:
            raise RuntimeError(f"{origin}: {why}")
        warnings.warn(f"ldpsim: {origin} skipped: {why}", RuntimeWarning, stacklevel=3)

    items = getattr(family, "PROTOCOLS", None)
    kind_map = getattr(family, "KINDS", None)
    if items is None or not isinstance(kind_map, dict):
        return refuse("it must expose PROTOCOLS (Protocol instances) and KINDS (a dict)")
    for p in items:
        if not isinstance(p, Protocol):
            return refuse(f"{p!r} is not a protocols.base.Protocol instance")
        if p.name in protocols:
            return refuse(f"protocol name {p.name!r} is registered already")
    for name, kind in kind_map.items():
        if not isinstance(kind, DataKind):
            return refuse(f"data kind {name!r} is not a protocols.data.DataKind")
        if name in kinds:
            return refuse(f"data kind name {name!r} is registered already")
    protocols.update({p.name: p for p in items})
    kinds.update(kind_map)


def _plugins() -> list[tuple[str, Any]]:
    """The families installed packages register under ``ldpsim.families``."""
    from importlib.metadata import entry_points

    found = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        origin = f"plugin {ep.name!r} ({ep.value})"
        try:
            found.append((origin, ep.load()))
        except Exception as exc:  # a broken plugin must not break ldpsim
            warnings.warn(f"ldpsim: {origin} skipped: it failed to load: {exc!r}",
                          RuntimeWarning, stacklevel=2)
    return found


def _registry() -> tuple[dict[str, Protocol], dict[str, DataKind]]:
    global _REGISTRY
    if _REGISTRY is None:
        protocols: dict[str, Protocol] = {}
        kinds: dict[str, DataKind] = {}
        for name in BUILTIN:
            _add(name, import_module(name), protocols, kinds, builtin=True)
        for origin, family in _plugins():
            _add(origin, family, protocols, kinds, builtin=False)
        protocols.update(_USED)
        _REGISTRY = (protocols, kinds)
    return _REGISTRY


def register_family(family: Any, origin: str = "") -> None:
    """Register a family (an object with ``PROTOCOLS`` and ``KINDS``) in this process, e.g. from
    a notebook. Agent pools and the curator run in other processes: there, only built-in
    families and installed entry points exist, so use an entry point for the processes
    backend. Raises ParamError on a name clash or a malformed family."""
    protocols, kinds = _registry()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            _add(origin or repr(family), family, protocols, kinds, builtin=False)
        except RuntimeWarning as exc:
            raise ParamError(str(exc)) from None


def use(protocol: Protocol) -> None:
    """Make ``get_protocol(protocol.name)`` give ``protocol`` in this process, without building
    the registry: a curator process is handed its orchestrator's protocol object (a plugin's,
    or one registered at run time) and looks up no other."""
    _USED[protocol.name] = protocol
    if _REGISTRY is not None:
        _REGISTRY[0][protocol.name] = protocol


def protocols() -> dict[str, Protocol]:
    """Every registered protocol by name (``protocols.PROTOCOLS``), built on first use."""
    return _registry()[0]


def data_kinds() -> dict[str, DataKind]:
    """Every registered data kind by name (``protocols.DATA_KINDS``), built on first use."""
    return _registry()[1]


def _named(table: dict[str, Any], name: str, where: str) -> Any:
    """``table[name]``, or a ParamError naming ``where`` and listing the allowed names."""
    try:
        return table[name]
    except KeyError:
        raise ParamError(f"{where} {name!r}; allowed: {', '.join(sorted(table))}") from None


def _builtin(name: str, which: int) -> Any:
    """The protocol (``which`` 0) or data kind (1) named ``name`` before the registry is built:
    one handed to this process (``use``), else a built-in one from its family alone; None when
    ``name`` is neither or the registry is built (it answers then, with anything registered in
    it since)."""
    if _REGISTRY is not None:
        return None
    if not which and name in _USED:
        return _USED[name]
    family = family_of_kind(name) if which else family_of_protocol(name)
    if family is None:
        return None
    module = import_module(family)
    if which:
        return module.KINDS.get(name)
    return next((p for p in module.PROTOCOLS if p.name == name), None)


def get_protocol(name: str) -> Protocol:
    """The protocol registered under ``name``, or a ParamError listing the allowed names."""
    found = _builtin(name, 0)
    return found if found is not None else _named(_registry()[0], name,
                                                  "protocol: unknown protocol")


def get_data_kind(name: str) -> DataKind:
    """The data kind registered under ``name``, or a ParamError listing the allowed kinds."""
    found = _builtin(name, 1)
    return found if found is not None else _named(_registry()[1], name,
                                                  "[data] kind: unknown data kind")


def is_protocol(name: str) -> bool:
    """Whether a protocol is registered under ``name`` (a built-in name: its family alone
    imported)."""
    return _builtin(name, 0) is not None or name in _registry()[0]


def is_data_kind(name: str) -> bool:
    """Whether a data kind is registered under ``name`` (a built-in kind: its family alone
    imported)."""
    return _builtin(name, 1) is not None or name in _registry()[1]


def build_data(section: dict[str, Any], keys: DataKeys | int) -> Dataset:
    """The data set a ``[data]`` table names: its ``kind``, built with the table's other keys
    as that kind's arguments and the data keys ``keys`` (``DataKind.build``; an integer is
    the data keys of that seed alone, ``keys.as_data_keys``); a ParamError names an unknown
    kind or a bad argument."""
    return get_data_kind(section["kind"]).build(
        {k: v for k, v in section.items() if k != "kind"}, keys)
