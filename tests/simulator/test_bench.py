"""The benchmark harness itself (``ldpsim bench``): it must not hang or crash on any split."""

from __future__ import annotations

import os

import pytest
from ldpsim.simulator import alloc, bench, cli


@pytest.mark.parametrize("envelopes", ["raw", "batch", "msgpack"])
@pytest.mark.parametrize("pools", [1, 3])
def test_transport_ceiling_any_split(envelopes, pools):
    # 10_001 agents over 3 pools: unequal blocks and a partial last batch in every block
    wall, cpu = bench.transport_ceiling(10_001, pools, 1000, 12, 11, envelopes)
    assert 0 < wall < 30 and cpu > 0


def test_bench_quick_prints_every_row(capsys, monkeypatch):
    monkeypatch.setenv(alloc.TUNE_MALLOC_ENV, "0")  # the bench sets it; restored afterwards
    assert cli.main(["bench", "--quick", "--pools", "3"]) == 0
    assert os.environ[alloc.TUNE_MALLOC_ENV] == "1"  # the bench tunes its children too
    out = capsys.readouterr().out
    for row in ("ceiling: raw bytes", "ceiling: envelopes", "full run, processes",
                "rounds only", "full run, inproc"):
        assert out.count(row) == 2, row  # one per size
