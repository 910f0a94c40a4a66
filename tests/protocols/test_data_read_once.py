"""A data set read from a file is read and parsed once per process (``DataKind.build``), handed
to every run read-only, and read again when the file changes."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import data as data_mod
from ldpsim.protocols.rank.data import KINDS

ORDER = "10 1\n0 3 2 0 1\n0 3 0 1 2\n0 3 1 2 0\n"


def _write(path, text):
    path.write_text(text.replace("10 1", "3 1"))


@pytest.fixture()
def order_file(tmp_path):
    p = tmp_path / "small.order"
    _write(p, ORDER)
    return p


def test_a_file_is_parsed_once_and_shared(order_file):
    calls = []
    kind = KINDS["sushi"]
    counting = data_mod.DataKind(kind.name, lambda **kw: calls.append(1) or kind.factory(**kw),
                                 kind.params, kind.data_type, kind.summary)
    a = counting.build({"path": str(order_file)}, 1)
    b = counting.build({"path": str(order_file)}, 2)
    assert len(calls) == 1
    assert a is b
    assert a.n == 3


def test_the_shared_data_set_is_read_only(order_file):
    ds = KINDS["sushi"].build({"path": str(order_file)}, 1)
    arrays = [v for v in vars(ds).values() if isinstance(v, np.ndarray)]
    assert arrays
    for arr in arrays:
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0


def test_a_changed_file_is_read_again(order_file):
    first = KINDS["sushi"].build({"path": str(order_file)}, 1)
    _write(order_file, ORDER + "0 3 2 1 0\n")
    second = KINDS["sushi"].build({"path": str(order_file)}, 1)
    assert (first.n, second.n) == (3, 4)


def test_other_arguments_build_another_data_set(order_file):
    whole = KINDS["sushi"].build({"path": str(order_file)}, 1)
    part = KINDS["sushi"].build({"path": str(order_file), "n": 2}, 1)
    assert (whole.n, part.n) == (3, 2)


def test_a_missing_file_still_says_so(tmp_path):
    with pytest.raises(data_mod.ParamError, match="file not found"):
        KINDS["sushi"].build({"path": str(tmp_path / "absent.order")}, 1)


def test_the_cache_keeps_a_bounded_number(tmp_path, monkeypatch):
    monkeypatch.setattr(data_mod, "READ_CACHE_SIZE", 2)
    for i in range(4):
        p = tmp_path / f"f{i}.order"
        _write(p, ORDER)
        KINDS["sushi"].build({"path": str(p)}, 1)
    assert len(data_mod._READ) <= 2
