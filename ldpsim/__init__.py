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
    ldpsim.verify("results/demo").ok     # every stored run re-executed, bit for bit

``ldpsim`` is the one installed import name: the science is ``ldpsim.protocols`` (mechanisms,
protocols, ``run_locally``) and the runtime ``ldpsim.simulator``. In the repository they are the
top-level folders ``protocols/`` and ``simulator/``, mapped into this package when installed
and, in a source checkout, through ``__path__`` below. Everything is imported on first use, so
``ldpsim --version`` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

__version__ = "0.1.0"

# a source checkout: protocols/ and simulator/ sit next to this folder, not inside it
_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "protocols" / "base.py").is_file() and not (Path(__file__).parent
                                                         / "protocols").exists():
    __path__.append(str(_ROOT))  # noqa: F821 - the package's own __path__

_API = {"run": "ldpsim.api", "load": "ldpsim.api", "audit": "ldpsim.api", "verify": "ldpsim.api",
        "report": "ldpsim.api",
        "Results": "ldpsim.api", "run_locally": "ldpsim.protocols",
        "register_family": "ldpsim.protocols"}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module 'ldpsim' has no attribute {name!r}")


__all__ = ["run", "load", "audit", "verify", "report", "Results", "run_locally", "register_family",
           "__version__"]
