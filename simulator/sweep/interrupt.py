"""Ctrl-C that cannot be lost: a SIGINT handler that remembers the interrupt.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT arrives. If
that is inside a finaliser (e.g. ``multiprocessing``'s clean-up of a finished child process,
run when the process object is collected), the exception is printed as "Exception ignored" and
dropped, and a sweep would go on to its end and exit 0. With ``remembered()`` in force the
handler also records the interrupt, and ``check()``, which the sweep calls between runs,
raises it again.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_interrupted = threading.Event()


def _handler(signum: int, frame: object) -> None:
    _interrupted.set()
    raise KeyboardInterrupt


@contextmanager
def remembered() -> Iterator[None]:
    """Within: SIGINT raises KeyboardInterrupt as usual and is remembered for ``check``
    (only in the main thread, and only where SIGINT is not ignored: a background job keeps
    its ignored SIGINT)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    _interrupted.clear()
    old = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        _interrupted.clear()


def check() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C arrived (and was perhaps swallowed) since
    ``remembered`` began."""
    if _interrupted.is_set():
        raise KeyboardInterrupt
