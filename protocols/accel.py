"""Optional compiled accelerators: which implementation a module uses, and the switch.

Small C extensions are built at install where a C compiler exists (setup.py's extensions,
``optional``): among them the wire format's batch codec (``simulator/codec/_wirec.c``), the
random streams' SplitMix64 finaliser (``protocols/_rngc.c``) and their stream keys of many seeds
at once (BLAKE2b-64, ``protocols/_b2c.c``). Each does exactly what numpy (or hashlib) does in the
module that uses it (the same bytes, the same bits), so either may run: the compiled one
when it was built, unless its environment variable says ``numpy`` (inherited by every process
a run starts); tests and benchmarks switch with ``use``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

CHOICES = ("compiled", "numpy")


class Accelerator:
    """An optional compiled module and which implementation is in use.

    Parameters
    ----------
    what : str
        What it accelerates, for messages ("codec", "mixer").
    built : module or None
        The extension, None where the install could not build it.
    env : str
        The environment variable that chooses numpy (``env=numpy``).
    source : str
        The extension's source file, for the message when it is missing.
    """

    def __init__(self, what: str, built: ModuleType | None, env: str, source: str) -> None:
        self.what, self.built, self.env, self.source = what, built, env, source
        #: the compiled module in use, or None for numpy
        self.module = None if os.environ.get(env) == "numpy" else built

    @classmethod
    def load(cls, what: str, module: str, env: str, source: str,
             needs: tuple[str, ...] = ()) -> Accelerator:
        """The accelerator of the extension ``module`` (dotted name), None inside where the
        install did not build it, or built it from an older source that lacks one of the
        functions ``needs`` (a checkout updated without installing again: numpy does the
        work, the same bits, until it is)."""
        try:
            built = importlib.import_module(module)
        except ImportError:  # pragma: no cover - depends on the install
            built = None
        if built is not None and not all(hasattr(built, f) for f in needs):
            built = None
        return cls(what, built, env, source)

    def name(self) -> str:
        """"compiled" or "numpy": the implementation in use."""
        return "numpy" if self.module is None else "compiled"

    def use(self, name: str) -> str:
        """Use ``name`` ("compiled" or "numpy") in this process; returns the one used before.
        Raises ValueError for another name, or for "compiled" where it was not built."""
        if name not in CHOICES:
            raise ValueError(f"{self.what}: {name!r} is not one of {', '.join(CHOICES)}")
        if name == "compiled" and self.built is None:
            raise ValueError(f"{self.what}: the compiled {self.what} ({self.source}) was not "
                             "built at install; install with a C compiler, or use 'numpy'")
        before = self.name()
        self.module = self.built if name == "compiled" else None
        return before
