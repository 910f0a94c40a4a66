"""ldpsim's science: mechanisms, protocols, estimators, data sets and utility metrics.

No processes, sockets or files beyond reading data sets: the runtime in ``simulator`` drives
these objects through the small interface in ``protocols.base``.

Families are the built-in packages below plus any installed package that declares an entry
point in the group ``ldpsim.families`` (``[project.entry-points."ldpsim.families"]`` in its
``pyproject.toml``): the object it names exposes ``PROTOCOLS`` (Protocol instances) and ``KINDS``
(data kinds by name), like ``protocols.rank``. The registry is built on first use, so a plugin
may itself import ``protocols``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: what this package offers, by the module that holds it: imported on first use, so that
#: ``protocols.families`` (the built-in names) is read before numpy is imported
_FROM = {"ParamError": "base", "LocalRun": "local", "run_locally": "local",
         **{name: "registry" for name in (
             "BUILTIN", "ENTRY_POINT_GROUP", "build_data", "data_kinds", "get_data_kind",
             "get_protocol", "is_data_kind", "is_protocol", "register_family")}}


def __getattr__(name: str) -> Any:
    """``PROTOCOLS`` and ``DATA_KINDS`` (the registry, built on first use), the families and
    the registry's functions, each imported on first use."""
    if name == "PROTOCOLS":
        return import_module("ldpsim.protocols.registry").protocols()
    if name == "DATA_KINDS":
        return import_module("ldpsim.protocols.registry").data_kinds()
    if name in ("rank", "truth", "vote", "safari", "ethics", "registry"):
        return import_module(f"ldpsim.protocols.{name}")
    if name in _FROM:
        value = getattr(import_module(f"ldpsim.protocols.{_FROM[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'protocols' has no attribute {name!r}")


__all__ = ["PROTOCOLS", "DATA_KINDS", "ENTRY_POINT_GROUP", "BUILTIN", "get_protocol",
           "get_data_kind", "is_protocol", "is_data_kind", "build_data", "register_family",
           "ParamError", "LocalRun", "run_locally"]
