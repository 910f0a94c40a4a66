"""The discrete Laplace benchmark (``python -m ldpsim.simulator.bench.laplace``) runs and prints
every row."""

from __future__ import annotations

import pytest
from ldpsim.protocols.mechanisms import dlap
from ldpsim.simulator.bench import laplace


@pytest.mark.skipif(dlap.DLAP.built is None, reason="the compiled sampler was not built")
def test_the_table_has_every_sampler(capsys):
    """A row per sampler, each lane engine's timed where this CPU runs it (each forced for
    its own calls) and marked not run elsewhere; the engine in use is the same after."""
    before = dlap.DLAP.built.engine()
    laplace.main(2000, 2)
    assert dlap.DLAP.built.engine() == before
    out = capsys.readouterr().out
    for row in ("lane engine, AVX-512", "lane engine, AVX2", "stream engine",
                "floating-point sampler", "Laplace.perturb"):
        assert sum(line.startswith(row) for line in out.splitlines()) == 1, row
    for name, row in laplace.LANES.items():
        line = next(line for line in out.splitlines() if line.startswith(row))
        assert ("not run" in line) == (name not in dlap.DLAP.built.engines()), line
    assert "1.00" in out  # the floating-point sampler against itself
