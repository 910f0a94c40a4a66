"""Which batch codec this process uses: the compiled one (``_wirec``, where the install built
it) or numpy's, the same bytes either way (``protocols.accel``)."""

from __future__ import annotations

from ldpsim.protocols.accel import Accelerator

from ldpsim import environment

#: the batch codec in use: compiled or numpy, the same bytes; ``LDPSIM_CODEC=numpy`` chooses numpy
CODEC = Accelerator.load("codec", "ldpsim.simulator.codec._wirec", environment.CODEC,
                          "simulator/codec/_wirec.c")
