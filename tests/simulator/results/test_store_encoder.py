"""Tests of the line ``ResultStore.append`` writes (``store._dumps``): a record of plain data is
encoded as it is, anything else through ``jsonable`` first, and both give exactly the bytes of
``json.dumps(jsonable(record), ...)``, the encoding every stored line was written with."""

from __future__ import annotations

import collections
import enum
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ldpsim.simulator.results import store
from ldpsim.simulator.results.store import ResultStore, jsonable, record_line


def reference(record: dict[str, Any]) -> str:
    """The line as every record was written before the plain path: ``jsonable`` first."""
    return json.dumps(jsonable(record), separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False)


class Colour(str, enum.Enum):  # noqa: UP042  (a mixed-in enum: str() is not its value)
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Word(str):
    pass


Pair = collections.namedtuple("Pair", "a b")


def base_record() -> dict[str, Any]:
    return {"key": "k", "status": "complete", "point": {"protocol": "p", "params.epsilon": 0.5},
            "output": {"x": [1.5, -0.0, 2], "tables": [[[1, 6], [1, 1]]], "t": (1, 2.5, "é ✓")},
            "metrics": {"err": 1 / 3, "big": 10**30, "tiny": 5e-324, "ok": True, "none": None},
            "comm": {"per_round": [{"round": 0, "wall_s": 1e-7}, {"round": 1}]}}


EXTRAS: dict[str, Any] = {
    "plain": {},
    "numpy scalars": {"n": np.int64(7), "f": np.float64(0.1), "h": np.float32(0.1),
                      "b": np.bool_(True), "u": np.uint8(255)},
    "numpy array": {"a": np.array([[1.0, np.nan], [np.inf, 2.0]]), "i": np.arange(3)},
    "nan": {"v": float("nan")},
    "inf nested": {"deep": {"deeper": [1.0, [-math.inf]]}},
    "numpy nan": {"v": np.float64("nan")},
    "int keys": {"d": {1: "a", 2: {3: "b"}}},
    "float keys": {"d": {0.5: 1, 1e16: 2, -0.0: 3}},
    "bool key": {"d": {True: 1}},
    "None key": {"d": {None: 1}},
    "numpy key": {"d": {np.int64(4): 1}},
    "enum keys": {"d": {Colour.RED: 1, Level.HIGH: 2}},
    "enum values": {"c": Colour.RED, "l": Level.HIGH},
    "str subclass key": {"d": {Word("w"): 1}, "v": Word("x")},
    "tuple key": {"d": {(1, 2): 1}},
    "sets": {"s": {3, 1, 2}, "f": frozenset({"b", "a"}), "mixed": {1, "a"}},
    "paths": {"p": Path("a") / "b", "in list": [Path("c")]},
    "namedtuple": {"nt": Pair(1, {True: 2})},
    "dict subclass": {"od": collections.OrderedDict([(True, 1)]),
                      "dd": collections.defaultdict(int, {"a": 1})},
    "list of dicts": {"rows": [{"a": 1}, {2: [np.int32(3)]}]},
    "nan in set": {"s": {float("nan")}},
    "non-finite key": {"d": {math.inf: 1}},
}


@pytest.mark.parametrize("name", list(EXTRAS))
def test_the_line_is_the_reference_encoding(name: str) -> None:
    record = {**base_record(), **EXTRAS[name]}
    assert store._dumps(record) == reference(record)
    assert record_line(record) == reference(record)


def test_every_extra_at_once_and_at_depth() -> None:
    record = base_record()
    record["all"] = dict(EXTRAS)
    record["output"]["nested"] = [dict(EXTRAS)]
    assert store._dumps(record) == reference(record)


@pytest.mark.parametrize("name", ["plain", "int keys", "float keys", "numpy scalars",
                                  "paths", "sets", "numpy array", "enum values"])
def test_plain_keys_take_the_direct_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dict keys that json writes as ``jsonable`` does: no copy of the record is made (only
    the values json has no form of pass through ``jsonable``)."""
    record = {**base_record(), **EXTRAS[name]}
    whole: list[int] = []
    real = store.jsonable
    monkeypatch.setattr(store, "jsonable",
                        lambda obj: whole.append(obj is record) or real(obj))
    assert store._dumps(record) == reference(record)
    assert not any(whole)


@pytest.mark.parametrize("name", ["bool key", "None key", "enum keys", "str subclass key",
                                  "numpy key", "tuple key", "namedtuple", "dict subclass"])
def test_other_keys_are_not_plain(name: str) -> None:
    assert not store._plain_keys({**base_record(), **EXTRAS[name]})
    assert store._plain_keys({**base_record(), **EXTRAS["plain"]})


def test_what_is_not_json_still_fails() -> None:
    for bad in ({"o": object()}, {"d": {"x": [object()]}}, {"d": {True: object()}}):
        with pytest.raises(TypeError):
            reference({"key": "k", **bad})
        with pytest.raises(TypeError):
            store._dumps({"key": "k", **bad})


def test_the_store_refuses_what_is_not_json(tmp_path: Path) -> None:
    s = ResultStore(tmp_path)
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        s.append({"key": "k", "o": object()})
    assert not s.path.exists() or s.path.read_text() == ""


def test_the_file_holds_the_reference_lines(tmp_path: Path) -> None:
    s = ResultStore(tmp_path)
    records = [{**base_record(), **extra, "key": name} for name, extra in EXTRAS.items()]
    for r in records:
        s.append(r)
    s.sync()
    assert s.path.read_text(encoding="utf-8").splitlines() == [reference(r) for r in records]
