"""Data sets and generators: what each agent privately holds, and the ground truth.

A ``Dataset`` hands each pool only its own block of agents (``rows(start, stop)``), tells the
curator only public facts (``public``: e.g. the number of items), and gives the orchestrator the
ground truth it needs to score an output (``truth()``). Generated data sets draw agent ``a``'s row
from its own data key (``protocols.keys.DataKeys``: a PRF of its device key, so a block is the
same whichever pool generates it, and no agent's row or key tells anything about another's
beyond what the population's shared draws do).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from ldpsim.protocols.base import ParamError, ParamSpec
from ldpsim.protocols.datasets import resolve
from ldpsim.protocols.keys import DataKeys, as_data_keys


class RangeTap:
    """A pool's tap of its agents' share of a data set's truth, counted as the pool makes
    their rows (``Dataset.truth_tap``): it hears the rows of its block ``[start, stop)`` (the
    whole block, or a chunked pool's chunks: ``first`` says where they lie; a chunk made again
    is heard once) and counts them (``add``). Its part (``share``) is None unless the ranges
    heard are exactly the block, each once. The counts are integers: their sum is the same in
    any order, so the orchestrator's join gives ``truth()`` exactly."""

    #: hears a chunked pool's rows chunk by chunk (``TruthShare``)
    chunked = True

    def __init__(self, fingerprint: bytes, start: int, stop: int) -> None:
        self.fingerprint, self.start, self.stop = fingerprint, start, stop
        self.heard: dict[int, int] = {}  # first agent -> one past the last, of each range
        self.spoilt = False

    def add(self, rows: np.ndarray) -> None:
        """Count ``rows`` (heard once)."""
        raise NotImplementedError

    def share(self) -> Any:
        """The share of the whole block, once every agent was heard exactly once."""
        raise NotImplementedError

    def watch(self, rows: np.ndarray, first: int | None = None) -> None:
        """Count ``rows``, the rows of agents ``first ..`` (default: the block's first)."""
        first = self.start if first is None else int(first)
        stop = first + len(rows)
        if self.heard.get(first) == stop:
            return  # a chunk made again (a pool keeps only its last chunks)
        if first in self.heard or not self.start <= first <= stop <= self.stop:
            self.spoilt = True
            return
        self.heard[first] = stop
        self.add(rows)

    def part(self) -> Any:
        """The share, or None unless every agent of the block was heard exactly once."""
        at = self.start
        for first in sorted(self.heard):
            if first != at:
                return None
            at = self.heard[first]
        if self.spoilt or at != self.stop:
            return None
        return self.share()

    def close(self) -> None:
        """Hear nothing more."""
        self.heard.clear()


@dataclass
class Dataset(ABC):
    """Base class: ``n`` agents, ``public`` facts, per-block private rows, ground truth.

    A generated data set must be split-independent: ``rows(a, b)`` is the same whichever
    blocks a pool asks for (draw agent i's row from agent i's own data key,
    ``keys.range(a, b)``, and the population's draws from ``keys.population``).
    """

    kind: str
    n: int
    public: dict[str, Any] = field(default_factory=dict)

    @abstractmethod
    def rows(self, start: int, stop: int) -> np.ndarray:
        """The private rows of agents ``start .. stop - 1`` (one row per agent)."""

    @abstractmethod
    def truth(self) -> dict[str, Any]:
        """The ground truth the orchestrator scores an output against (never the curator)."""

    def truth_from_run(self, protocol: Any) -> bool:
        """Whether a run of ``protocol`` on this data set leaves, in the memory of the process
        its agents run in, the costly part of ``truth`` (a per-agent result both compute, kept
        by the family): computed in that process after the run, the truth then costs little,
        and computed beside the run it would repeat the run's work. Default: False."""
        return False

    def truth_from_pools(self, protocol: Any) -> bool:
        """Whether the pools of a run of ``protocol`` on this data set can hand the costly
        parts of ``truth`` over as their run computes them (``truth_tap``), so that nobody
        computes it again. Default: False."""
        return False

    def truth_tap(self, start: int, stop: int, protocol: Any) -> Any:
        """In a pool of agents ``start .. stop - 1`` running ``protocol``: an object that
        hears that pool's share of ``truth`` as the run computes it, open until its
        ``close()``, whose ``part()`` is the share (small and picklable, or None when it cannot
        tell), for the orchestrator alone (never the curator: the truth is what an output is
        scored against). Default: None (no share)."""
        return None

    def truth_join(self, parts: list[Any]) -> dict[str, Any] | None:
        """``truth()`` from every pool's share (``truth_tap``), exactly as it computes it, or
        None when the parts do not make it (then the orchestrator computes it). Default:
        None."""
        return None

    def with_keys(self, keys: DataKeys) -> Dataset:
        """The same data set drawing its rows with ``keys`` (the keys it was built with, a
        block's data keys computed already: ``DataKeys.with_cache``), without building it
        again; a data set that keeps no keys (read from a file) is itself."""
        if any(f.name == "keys" for f in fields(self)):
            return replace(self, keys=keys)
        return self


@dataclass(frozen=True)
class DataKind:
    """A registered data kind: its factory and the arguments it accepts."""

    name: str
    factory: Any
    params: dict[str, ParamSpec]
    data_type: str
    summary: str
    #: small argument sets (without ``kind``) that build in milliseconds: what the contract
    #: tests and the docs run every protocol of this data type on (generated kinds only)
    examples: tuple[dict[str, Any], ...] = ()

    def build(self, args: dict[str, Any], keys: DataKeys | int) -> Dataset:
        """Validate ``args`` (the scenario's [data] table minus ``kind``) and build the data set
        with ``keys`` (``DataKeys``, or one integer: ``keys.as_data_keys``). The factory is
        called as ``factory(keys=DataKeys, **args)``."""
        checked = {}
        for name, value in args.items():
            if name not in self.params:
                raise ParamError(f"[data] {name}: unknown argument for kind {self.name!r}; "
                                 f"allowed: {', '.join(sorted(self.params))}")
            checked[name] = self.params[name].check(value, f"[data] {name}")
        for name, spec in self.params.items():
            if name not in checked:
                if spec.required:
                    raise ParamError(f"[data] {name}: required for kind {self.name!r}; "
                                     f"allowed: {spec.describe()}")
                if spec.default is not None:
                    checked[name] = spec.default
        stamp = file_stamp(checked["path"]) if isinstance(checked.get("path"), str) else None
        if stamp is None:
            return self.factory(keys=as_data_keys(keys), **checked)
        key = (self.name, repr(sorted(checked.items())), stamp)
        if key not in _READ:
            _READ[key] = frozen(self.factory(keys=as_data_keys(keys), **checked))
            while len(_READ) > READ_CACHE_SIZE:
                _READ.popitem(last=False)
        _READ.move_to_end(key)
        return _READ[key]


#: how many data sets read from files a process keeps built (``DataKind.build``)
READ_CACHE_SIZE = 8
#: (kind, checked arguments, the file's stamp) -> the data set built from the file
_READ: OrderedDict[tuple[str, str, tuple], Dataset] = OrderedDict()


def file_stamp(path: str) -> tuple | None:
    """What identifies the contents of the data file (or folder of files) ``path`` names,
    without reading it: each file's path, size and modification time. None when there is no
    such file or folder (the kind's loader then reports it).

    A data set read from a file takes no coins: its runs differ only in the protocols' coins,
    so ``DataKind.build`` reads and parses it once per process and hands every run the same
    (read-only) data set while this stamp is unchanged."""
    p = None
    for directory in (False, True):
        try:
            p = resolve(path, directory)
            break
        except (OSError, ValueError):
            continue
    if p is None:
        return None
    try:
        if p.is_file():
            st = p.stat()
            return (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if p.is_dir():
            return tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns)
                         for f in sorted(p.rglob("*")) if f.is_file())
    except OSError:
        return None
    return None


def frozen(ds: Dataset) -> Dataset:
    """``ds`` with its arrays made read-only: a data set shared by the runs of a process
    (``DataKind.build``) cannot be changed by one of them."""
    for f in fields(ds):
        value = getattr(ds, f.name)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return ds


def resolve_path(path: str) -> Path:
    """A data file's path: ``data:NAME/FILE`` in the data folder (``datasets.resolve``; one
    line naming what is missing and where to get it), else the path, with a clear error when
    it is missing."""
    p = resolve(path)
    if not p.is_file():
        raise ParamError(f"[data] path: file not found: {path!r}")
    return p
