"""The closest allowed name to one that is not: what an error about an unknown key or value
ends with (``; did you mean 'x'?``). The standard library only: the scenario language's
checks (``scenario``, ``tables``, ``axes``, ``deployment``) and the figures' ``[plot]`` table use
it."""

from __future__ import annotations

import difflib


def hint(name: object, allowed: object) -> str:
    """``; did you mean 'x'?`` for the name in ``allowed`` (any iterable; compared as text)
    closest to ``name``, or nothing: what an error about an unknown key or value ends with."""
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
