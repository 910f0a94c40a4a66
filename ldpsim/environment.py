"""Every environment variable ldpsim reads, in one place.

Scenario files and options say what an experiment is; these variables only choose how this
machine computes it (the same outputs either way) or tell it what the network cannot. A module
that reads one takes its name from here; ``tests/test_layers.py`` fails on a variable named
anywhere else, and the documentation's table lists each one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the values it takes and what it does."""

    name: str
    values: str
    effect: str


#: the compiled batch codec (``simulator/codec/_wirec.c``) or numpy's: the same bytes
CODEC = "LDPSIM_CODEC"
#: the compiled random-stream helpers (``protocols/_rngc.c``, ``_prfc.c``, ``_dlapc.c``, ``_b2c.c``)
#: and OLH's support counts (``_prfc.c``) or numpy's: the same bits
RNG = "LDPSIM_RNG"
#: the compiled arrival times of a ``[deployment]`` (``simulator/session/_netc.c``) or numpy's:
#: the same bits
NETWORK = "LDPSIM_NETWORK"
#: the compiled fixed-order sums (``protocols/_orderedc.c``) and SAFARI's passes over all d!
#: rankings and Walsh-Hadamard transform (``protocols/_safaric.c``) or numpy's: the same bits
ORDERED = "LDPSIM_ORDERED"
#: keep freed memory for reuse in every ldpsim process (``simulator.backends.alloc``)
TUNE_MALLOC = "LDPSIM_TUNE_MALLOC"
#: the address Dask workers reach this machine at (``simulator.backends.on_dask``)
DASK_ADVERTISE = "LDPSIM_DASK_ADVERTISE"
#: the data folder the scenarios' named data sets (``data:NAME/FILE``) are read from
#: (``protocols.datasets``); ``ldpsim run --data-dir`` sets it
DATA = "LDPSIM_DATA"
#: set by a Dask nanny started with its defaults; read to undo what it does to every run
#: (``simulator.backends.dask_client``)
MALLOC_TRIM_THRESHOLD = "MALLOC_TRIM_THRESHOLD_"

VARIABLES = (
    Variable(CODEC, '"numpy" (unset: the compiled codec where the install built it)',
             "which batch codec writes and reads the wire's frames; both give the same bytes"),
    Variable(RNG, '"numpy" (unset: the compiled helpers where the install built them)',
             "which implementation mixes the random streams, derives the agents' keys and "
             "samples the discrete Laplace; both give the same bits"),
    Variable(NETWORK, '"numpy" (unset: the compiled kernel where the install built it)',
             "which implementation computes a [deployment]'s arrival times; both give the "
             "same bits"),
    Variable(ORDERED, '"numpy" (unset: the compiled kernel where the install built it)',
             "which implementation computes the fixed-order matrix products of the "
             "estimators (protocols/ordered.py); both give the same bits"),
    Variable(TUNE_MALLOC, '"1" (unset or anything else: off)',
             "every ldpsim process keeps freed memory for reuse (up to 1 GB held); "
             "`ldpsim bench` sets it for itself and its children"),
    Variable(DASK_ADVERTISE, "a host name or IP address",
             "the address of this machine the Dask workers connect to for the dask backend's "
             "curator (default: the one this machine uses towards the scheduler)"),
    Variable(DATA, "a folder (unset: shared/data beside the checkout)",
             "where the real data sets a scenario names (data:NAME/FILE) are read from; "
             "`ldpsim run --data-dir DIR` sets it, `ldpsim data` lists what it holds"),
    Variable(MALLOC_TRIM_THRESHOLD, "set by a Dask nanny, not by you",
             "read on a Dask worker: where a nanny set it, ldpsim applies the same memory "
             "tuning as with LDPSIM_TUNE_MALLOC=1"),
)
