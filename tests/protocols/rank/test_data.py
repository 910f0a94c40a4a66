"""Tests of ``protocols.rank.data``: the Mallows data kind and the .soc / .order loaders.

Small files are written to ``tmp_path``. The real SUSHI and TurkDots files are used only when
present, found via ``$LDPSIM_DATA`` or ``<repo>/../shared/data``; they are never copied here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, ParamError, get_data_kind
from ldpsim.protocols.keys import DataKeys
from ldpsim.protocols.rank import mallows, profile
from ldpsim.protocols.rank.data import read_order, read_soc

from tests.conftest import ROOT

SOC = """# FILE NAME: tiny.soc
# DATA TYPE: soc
# NUMBER ALTERNATIVES: 3
# NUMBER VOTERS: 4
# ALTERNATIVE NAME 1: a
2: 1,2,3
1: 3,1,2

1: 2,1,3
"""
SOC_ROWS = [[0, 1, 2], [0, 1, 2], [2, 0, 1], [1, 0, 2]]

ORDER = """3 1
0 3 2 0 1
0 3 0 1 2
"""
ORDER_ROWS = [[2, 0, 1], [0, 1, 2]]


# --------------------------------------------------------------------------- helpers


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _data_dir() -> Path:
    env = os.environ.get("LDPSIM_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def _real_file(*parts: str) -> str:
    p = _data_dir().joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"data file not available: {p}")
    return str(p)


def _brute_counts(rankings: list[list[int]], m: int) -> np.ndarray:
    """C[a, b]: how many best-first lists put a before b."""
    c = np.zeros((m, m), dtype=np.int64)
    for r in rankings:
        for i, a in enumerate(r):
            for b in r[i + 1:]:
                c[a, b] += 1
    return c


def _check_full_rankings(table: np.ndarray, n: int, m: int) -> None:
    assert table.shape == (n, m)
    assert np.array_equal(np.sort(table, axis=1), np.tile(np.arange(m), (n, 1)))


# --------------------------------------------------------------------------- .soc


def test_read_soc_one_based_and_counts_expanded(tmp_path):
    table = read_soc(_write(tmp_path, "tiny.soc", SOC))
    assert table.dtype == np.int16
    assert table.tolist() == SOC_ROWS


def test_read_soc_without_header_infers_m(tmp_path):
    table = read_soc(_write(tmp_path, "nohead.soc", "1: 2,1\n3: 1,2\n"))
    assert table.tolist() == [[1, 0], [0, 1], [0, 1], [0, 1]]


@pytest.mark.parametrize("bad,what", [
    ("2: 1,2,3\nx: 1,2,3\n", "expected 'count"),
    ("2: 1,2,3\n1 1,2,3\n", "expected 'count"),
    ("2: 1,2,3\n1: 1,2\n", "not a complete order"),
    ("2: 1,2,3\n1: 1,2,2\n", "not a complete order"),
    ("2: 1,2,3\n1: 0,1,2\n", "not a complete order"),
    ("# NUMBER ALTERNATIVES: 3\n# only comments\n", "no rankings found"),
])
def test_read_soc_bad_lines_name_the_path(tmp_path, bad, what):
    path = _write(tmp_path, "bad.soc", bad)
    with pytest.raises(ParamError, match=what) as info:
        read_soc(path)
    assert path in str(info.value)


def test_read_soc_error_names_the_line(tmp_path):
    path = _write(tmp_path, "bad.soc", "# c\n2: 1,2,3\n1: 1,2\n")
    with pytest.raises(ParamError, match=r"bad\.soc:3:"):
        read_soc(path)


def test_missing_file(tmp_path):
    with pytest.raises(ParamError, match="file not found"):
        read_soc(str(tmp_path / "absent.soc"))
    with pytest.raises(ParamError, match="file not found"):
        DATA_KINDS["sushi"].build({"path": str(tmp_path / "absent.order")}, keys=0)


# --------------------------------------------------------------------------- .order


def test_read_order(tmp_path):
    table = read_order(_write(tmp_path, "tiny.order", ORDER))
    assert table.dtype == np.int16
    assert table.tolist() == ORDER_ROWS


@pytest.mark.parametrize("bad", [
    "3 1\n0 3 2 0 1\n0 2 0 1\n",  # wrong length field
    "3 1\n0 3 2 0\n",  # too few items
    "3 1\n0 3 2 2 1\n",  # repeated item
    "3 1\n0 3 1 2 3\n",  # 1-based items
])
def test_read_order_bad_lines_name_the_path(tmp_path, bad):
    path = _write(tmp_path, "bad.order", bad)
    with pytest.raises(ParamError, match="not a full ranking") as info:
        read_order(path)
    assert path in str(info.value)


# --------------------------------------------------------------------------- data kinds


def test_preflib_kind(tmp_path):
    data = DATA_KINDS["preflib"].build({"path": _write(tmp_path, "t.soc", SOC)}, keys=0)
    assert (data.n, data.m) == (4, 3)
    assert data.public == {"m": 3, "data_type": "ranking"}
    # rows are positions: the inverse of the file's best-first lists
    assert data.rows(0, 4).tolist() == profile.positions(np.array(SOC_ROWS)).tolist()
    assert profile.rankings(data.rows(1, 3)).tolist() == SOC_ROWS[1:3]
    truth = data.truth()
    assert truth["n"] == 4
    assert truth["counts"].tolist() == _brute_counts(SOC_ROWS, 3).tolist()


def test_sushi_kind_reads_order_and_soc(tmp_path):
    order = DATA_KINDS["sushi"].build({"path": _write(tmp_path, "s.order", ORDER)}, keys=0)
    assert profile.rankings(order.rows(0, order.n)).tolist() == ORDER_ROWS
    soc = DATA_KINDS["sushi"].build({"path": _write(tmp_path, "s.soc", SOC)}, keys=0)
    assert profile.rankings(soc.rows(0, soc.n)).tolist() == SOC_ROWS


def test_n_keeps_first_agents(tmp_path):
    path = _write(tmp_path, "t.soc", SOC)
    data = DATA_KINDS["preflib"].build({"path": path, "n": 3}, keys=0)
    assert data.n == 3 and profile.rankings(data.rows(0, 3)).tolist() == SOC_ROWS[:3]
    assert data.truth()["counts"].sum() == 3 * 3
    with pytest.raises(ParamError, match="the file has 4 agents"):
        DATA_KINDS["preflib"].build({"path": path, "n": 5}, keys=0)
    with pytest.raises(ParamError, match=r"\[data\] n"):
        DATA_KINDS["preflib"].build({"path": path, "n": 0}, keys=0)


def test_kind_argument_errors(tmp_path):
    with pytest.raises(ParamError, match="required"):
        DATA_KINDS["preflib"].build({}, keys=0)
    with pytest.raises(ParamError, match="unknown argument"):
        DATA_KINDS["preflib"].build({"path": "x.soc", "size": 3}, keys=0)
    with pytest.raises(ParamError, match="unknown data kind"):
        get_data_kind("nope")


# --------------------------------------------------------------------------- mallows kind


def test_mallows_kind_defaults_and_theta():
    data = DATA_KINDS["mallows"].build({"n": 100, "m": 6}, keys=9)
    assert data.phi == 0.5  # default theta 0.5
    assert DATA_KINDS["mallows"].build({"n": 5, "m": 6, "theta": 0.8}, keys=9).phi == (
        pytest.approx(0.2))
    assert DATA_KINDS["mallows"].build({"n": 5, "m": 6, "phi": 0.3}, keys=9).phi == 0.3
    assert data.public == {"m": 6, "data_type": "ranking"}


@pytest.mark.parametrize("args,name", [
    ({"n": 10, "m": 5, "theta": 0.5, "phi": 0.5}, "theta/phi"),
    ({"n": 10, "m": 1}, "m"),
    ({"n": 0, "m": 5}, "n"),
    ({"m": 5}, "n"),
    ({"n": 10, "m": 5, "theta": 1.5}, "theta"),
])
def test_mallows_kind_bad_args(args, name):
    with pytest.raises(ParamError, match=rf"\[data\] {name}"):
        DATA_KINDS["mallows"].build(args, keys=0)


def test_mallows_kind_rows_and_truth():
    """Each agent's ranking from its own data key, around the population's reference."""
    data = DATA_KINDS["mallows"].build({"n": 700, "m": 5, "theta": 0.4}, keys=123)
    keys = DataKeys.of_seed(123)
    rows = data.rows(0, 700)
    own = mallows.sample(keys.population, np.arange(700), 5, 0.6,
                         agent_keys=keys.range(0, 700))
    assert np.array_equal(profile.rankings(rows), own)
    assert np.array_equal(np.vstack([data.rows(0, 250), data.rows(250, 700)]), rows)
    truth = data.truth()
    assert np.array_equal(truth["counts"], profile.count_matrix(rows))
    assert truth["n"] == 700
    assert truth["reference"] == mallows.reference_ranking(keys.population, 5).tolist()


# --------------------------------------------------------------------------- real data


def test_real_sushi_order():
    path = _real_file("sushi", "kamishima", "sushi3a.5000.10.order")
    data = DATA_KINDS["sushi"].build({"path": path}, keys=0)
    assert (data.n, data.m) == (5000, 10)
    _check_full_rankings(data.rows(0, data.n), 5000, 10)
    c = data.truth()["counts"]
    assert np.array_equal(c + c.T, 5000 * (1 - np.eye(10, dtype=np.int64)))
    # first agent of the file: "0 10 5 0 3 4 6 9 8 1 7 2"
    assert profile.rankings(data.rows(0, 1)).tolist() == [[5, 0, 3, 4, 6, 9, 8, 1, 7, 2]]


def test_real_turkdots_soc():
    path = _real_file("turkdots", "00024-00000001.soc")
    data = DATA_KINDS["preflib"].build({"path": path}, keys=0)
    assert (data.n, data.m) == (795, 4)
    _check_full_rankings(data.rows(0, data.n), 795, 4)
    # the first line of the file is "74: 1,2,3,4"
    assert np.array_equal(data.rows(0, 74), np.tile(np.arange(4), (74, 1)))  # identity
    assert data.rows(74, 75).tolist() != [[0, 1, 2, 3]]
