"""A minimal progress bar: tqdm when installed, else a one-line text counter, or nothing.

tqdm's monitor thread is switched off (``tqdm.monitor_interval = 0``) because the simulator forks
processes, and a fork taken while another thread holds a lock can deadlock the child.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO


class ProgressBar:
    """The interface every progress object offers; this base class does nothing.

    Use as a context manager (``with progress(...) as bar:``); :meth:`close` is called on exit.
    """

    #: whether the bar shows what :meth:`set_postfix_str` is given (a caller need not make it
    #: when it does not)
    shows: bool = True

    def update(self, n: int = 1) -> None:
        """Advance the counter by ``n`` completed items."""

    def set_postfix_str(self, s: str) -> None:
        """Show ``s`` after the counter (e.g. the current run or an ETA detail)."""

    def close(self) -> None:
        """Finish the display; further updates are ignored."""

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _NullProgress(ProgressBar):
    """Progress disabled: every method is a no-op."""

    shows = False


class _TqdmProgress(ProgressBar):
    """Thin wrapper around a :class:`tqdm.tqdm` bar writing to stderr."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread: we fork worker processes
        self._bar: Any = tqdm(total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def set_postfix_str(self, s: str) -> None:
        self._bar.set_postfix_str(s)

    def close(self) -> None:
        self._bar.close()


class _TextProgress(ProgressBar):
    """Fallback without tqdm: rewrites ``desc: i/total [postfix]`` in place with ``\\r``.

    Parameters
    ----------
    total : int
        Number of items expected.
    desc : str
        Label printed before the counter.
    stream : TextIO
        Where to write (stderr in normal use).
    min_interval : float, default 0.1
        Minimum seconds between redraws (the final state is always drawn on close).
    """

    def __init__(self, total: int, desc: str, stream: TextIO, min_interval: float = 0.1) -> None:
        self.total = total
        self.desc = desc
        self.n = 0
        self.postfix = ""
        self._stream = stream
        self._min_interval = min_interval
        self._last = -float("inf")
        self._width = 0
        self._closed = False
        self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._min_interval:
            return
        self._last = now
        text = f"{self.desc}: {self.n}/{self.total}"
        if self.postfix:
            text += f" {self.postfix}"
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()

    def update(self, n: int = 1) -> None:
        if self._closed:
            return
        self.n += n
        self._draw(force=self.n >= self.total)

    def set_postfix_str(self, s: str) -> None:
        if self._closed:
            return
        self.postfix = s
        self._draw()

    def close(self) -> None:
        if self._closed:
            return
        self._draw(force=True)
        self._stream.write("\n")
        self._stream.flush()
        self._closed = True


def progress(total: int, desc: str, enabled: bool = True) -> ProgressBar:
    """Create a progress display for ``total`` items on stderr.

    Parameters
    ----------
    total : int
        Number of items expected.
    desc : str
        Label shown before the counter.
    enabled : bool, default True
        When False, return an object whose methods do nothing.

    Returns
    -------
    ProgressBar
        A context manager with ``update(n=1)``, ``set_postfix_str(s)`` and ``close()``: nothing
        when stderr is not a terminal (a redirected log stays clean); else a tqdm bar when tqdm
        is importable, or a ``desc: i/total`` text counter.
    """
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    if not enabled or stream is None or not (callable(isatty) and isatty()):
        return _NullProgress()  # a log file gets no progress lines
    try:
        return _TqdmProgress(total, desc)
    except ImportError:
        pass
    return _TextProgress(total, desc, stream)
