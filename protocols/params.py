"""A protocol's and a data kind's parameters: their specs (``ParamSpec``), checked when a
scenario is validated, and the error a bad value raises (``ParamError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class ParamError(ValueError):
    """A protocol or data parameter has a value outside what is allowed."""


#: Most agents a scenario may have (the ``n`` of every data kind, colluder counts and ids):
#: below the 2^40 agents the device keys reach (``keytree.ID_LIMIT``). Memory, not this, bounds
#: a run: a run whose curator would not fit in the machine's memory is refused before it
#: starts with the estimate (what a protocol's curator keeps per agent, and whether it takes
#: the reports a chunk at a time), and pools hold a chunk of agents at a time.
MAX_AGENTS = 10**11


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its type, default and allowed values, used to validate scenarios."""

    name: str
    kind: str  # "float", "int", "str", "bool", "int_or_auto"
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    low_open: bool = False
    help: str = ""
    required: bool = False

    def describe(self) -> str:
        """Human description of the allowed values."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        parts = {"float": "a number", "int": "an integer", "str": "a string", "bool": "true/false",
                 "int_or_auto": '"auto" or an integer'}[self.kind]
        if self.low is not None:
            parts += f" {'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            parts += f" and <= {_number(self.high)}"
        return parts

    def check(self, value: Any, where: str) -> Any:
        """Return the value coerced to its kind, or raise ParamError naming ``where``."""
        got = self._checked(value)
        if got is _BAD:  # the message (``describe``) is made only for a value that fails
            raise ParamError(f"{where}: got {value!r}; allowed: {self.describe()}")
        return got

    def _checked(self, value: Any) -> Any:
        """``check``'s value, or ``_BAD`` when it is not allowed."""
        if self.kind == "int_or_auto" and value == "auto":
            return value
        if self.choices is not None:
            return value if value in self.choices else _BAD
        if self.kind in ("float", "int", "int_or_auto"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return _BAD
            if self.kind in ("int", "int_or_auto"):
                if isinstance(value, float):
                    if not value.is_integer():  # also rejects inf and nan
                        return _BAD
                    value = int(value)
            else:
                try:
                    value = float(value)
                except OverflowError:  # an integer beyond any float
                    return _BAD
                if not math.isfinite(value):
                    return _BAD
            if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
                return _BAD
            if self.high is not None and value > self.high:
                return _BAD
            return value
        if self.kind == "bool":
            return value if isinstance(value, bool) else _BAD
        if self.kind == "str":
            return value if isinstance(value, str) else _BAD
        raise AssertionError(self.kind)


#: what ``ParamSpec._checked`` returns for a value that is not allowed
_BAD = object()


def _number(x: float) -> str:
    """A bound as the error messages show it: whole numbers exactly (1073741824, not 1.07e+09)."""
    if isinstance(x, int) or (math.isfinite(x) and x.is_integer() and abs(x) < 1e18):
        return str(int(x))
    return f"{x:g}"
