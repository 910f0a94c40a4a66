"""The compiled accelerators of ldpsim: small C extensions, each optional. Where one cannot be
built (no C compiler) the install goes on and the module that uses it computes the same bits
with numpy (``protocols/accel.py`` tells which runs). Everything else about the package (its
name, dependencies, packages and data) is in ``pyproject.toml``."""

import warnings

from setuptools import Extension, setup
from setuptools.warnings import InformationOnly

# An editable install (``pip install -e .``, what ``make`` does) always reports that it is one
# as a warning; it is information, not a problem, and the one warning the install leaves out.
warnings.filterwarnings("ignore", message=r"Editable installation\.", category=InformationOnly)

#: no fused multiply-add: each product and sum rounds as numpy's does
NO_FMA = ["-ffp-contract=off"]

EXTENSIONS = [
    # the wire format's batch codec (no numpy C API); without it the numpy batch codec
    Extension("ldpsim.simulator.codec._wirec", ["simulator/codec/_wirec.c"], optional=True),
    # the SplitMix64 finaliser of the counter-based streams; without it protocols/rng.py mixes
    # with numpy, to the same bits
    Extension("ldpsim.protocols._rngc", ["protocols/_rngc.c"], optional=True),
    # BLAKE2b-64 of seeds in bulk, the stream keys of protocols/rng.py; without it rng.py
    # hashes them one by one with hashlib, to the same bits
    Extension("ldpsim.protocols._b2c", ["protocols/_b2c.c"], optional=True),
    # SipHash-2-4, the PRF of every agent's keys; without it protocols/prf.py computes it with
    # numpy, to the same bits
    Extension("ldpsim.protocols._prfc", ["protocols/_prfc.c"], optional=True),
    # the exact discrete Laplace sampler's state machine; without it
    # protocols/mechanisms/dlap.py runs the same state machine in numpy, to the same values
    Extension("ldpsim.protocols._dlapc", ["protocols/_dlapc.c"], optional=True),
    # the fixed-order matrix product of every released estimate; without it
    # protocols/ordered.py sums the same tree with numpy, to the same bits
    Extension("ldpsim.protocols._orderedc", ["protocols/_orderedc.c"],
              extra_compile_args=NO_FMA, optional=True),
    # the pass over all d! rankings of CALM's maximum-entropy fit; without it
    # protocols/safari/calm.py makes it with numpy, to the same bits
    Extension("ldpsim.protocols._safaric", ["protocols/_safaric.c"],
              extra_compile_args=NO_FMA, optional=True),
    # a round's arrival times under a [deployment]; without it simulator/session/network.py
    # computes them with numpy, to the same bits
    Extension("ldpsim.simulator.session._netc", ["simulator/session/_netc.c"],
              extra_compile_args=NO_FMA, optional=True),
]

setup(ext_modules=EXTENSIONS)
