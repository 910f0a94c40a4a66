"""The discrete Laplace benchmark (``python -m ldpsim.simulator.bench.laplace``) runs and prints
every row."""

from __future__ import annotations

import pytest
from ldpsim.protocols.mechanisms import dlap
from ldpsim.simulator.bench import laplace


@pytest.mark.skipif(dlap.DLAP.built is None, reason="the compiled sampler was not built")
def test_the_table_has_every_sampler(capsys):
    laplace.main(2000, 2)
    out = capsys.readouterr().out
    for row in ("lane engine", "stream engine", "floating-point sampler", "Laplace.perturb"):
        assert sum(line.startswith(row) for line in out.splitlines()) == 1, row
    assert "1.00" in out  # the floating-point sampler against itself
