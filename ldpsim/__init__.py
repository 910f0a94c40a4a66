"""ldpsim from Python: run a scenario, reload its results, audit it.

::

    import ldpsim

    res = ldpsim.run("demo", overrides={"params.epsilon": [0.5, 1, 2], "data.n": 500},
                     backend="inproc")
    df = res.to_pandas()                 # one row per run: params.*, metrics.*, comm.*, ...
    res.summary()                        # one row per parameter point: mean and std
    res.plot("error_rate", x="params.epsilon")

    again = ldpsim.load("results/demo")  # a directory written by ``ldpsim run`` or ``out=``
    ldpsim.audit("audit_rank", trials=500)

The science (``protocols``: mechanisms, protocols, ``run_locally``) and the runtime
(``simulator``) stay importable on their own.
"""

from __future__ import annotations

from ldpsim.api import Results, audit, load, run
from protocols import register_family, run_locally
from simulator import __version__

__all__ = ["run", "load", "audit", "Results", "run_locally", "register_family", "__version__"]
