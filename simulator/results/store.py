"""Durable storage of run records: ``results.jsonl`` and the files beside it.

Every finished run produces one JSON-able record. :class:`ResultStore` appends it as one line of
``results.jsonl`` (written at once, so a finished run survives the process being killed; fsync'ed
in batches, so it survives a machine crash too within half a second) and tells a resumed sweep
which runs are already done. :func:`jsonable` turns a record into plain JSON data,
:func:`atomic_write_bytes` replaces a file whole (the summary's CSV files use it too: the
``summary`` module).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.csv"
PER_ROUND_FILE = "per_round.csv"
#: the scenario a results directory holds (``scenario.identity``)
FINGERPRINT_FILE = "scenario.json"
#: ``ResultStore.append`` fsyncs once this long has passed since the last fsync, or once this
#: many records are written and not yet fsync'ed (``ResultStore.sync`` does the rest: at the end
#: of a sweep, on an interrupt or a failure). A run longer than the interval is synced at once.
SYNC_INTERVAL_S = 0.5
SYNC_RECORDS = 100
#: ``ResultStore.append`` keeps each line it writes and parses this many together (the rest
#: when the records are handed out): the records a sweep returns, as reading the file gives
#: them, without reading it
PARSE_LINES = 256


DEGRADED = "degraded"


def is_degraded(record: dict[str, Any]) -> bool:
    """Whether a record is of a run that lost agents (older records without status: no)."""
    return record.get("status") == DEGRADED


def usable(records: list[dict[str, Any]], include_degraded: bool = False
           ) -> list[dict[str, Any]]:
    """The records a summary / plot is built from: degraded runs only when asked."""
    return list(records) if include_degraded else [r for r in records if not is_degraded(r)]


class ResultsCorruptError(ValueError):
    """``results.jsonl`` holds a line that is not a valid result record (not at its end)."""


# --------------------------------------------------------------------------------------------
# JSON conversion and atomic writes


def jsonable(obj: Any) -> Any:
    """Convert ``obj`` into plain JSON-serialisable Python data.

    Parameters
    ----------
    obj : Any
        Nested dicts / lists / tuples / sets of scalars, numpy scalars and numpy arrays.

    Returns
    -------
    Any
        The same structure with numpy scalars and arrays turned into Python ``int`` / ``float`` /
        ``bool`` / lists, tuples and sets turned into lists, dict keys turned into strings,
        :class:`~pathlib.Path` into ``str``, and non-finite floats (nan, ±inf) replaced by
        ``None`` so that ``json.dumps(..., allow_nan=False)`` accepts the result. Other objects
        are returned unchanged.
    """
    kind = type(obj)  # the plain types first, exactly: most of a record
    if kind is str or kind is int or kind is bool or obj is None:
        return obj
    if kind is float:
        return obj if math.isfinite(obj) else None
    if kind is dict:
        return {(k if type(k) is str else str(k)): jsonable(v) for k, v in obj.items()}
    if kind is list or kind is tuple:
        return [jsonable(v) for v in obj]
    return _jsonable_other(obj)


def _jsonable_other(obj: Any) -> Any:
    """``jsonable`` of anything but the plain types: subclasses, numpy, sets, paths."""
    if isinstance(obj, str | bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, set | frozenset):
        items = [jsonable(v) for v in obj]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def record_line(record: dict[str, Any]) -> str:
    """The line ``results.jsonl`` holds for ``record`` (strict JSON, no newline): what
    ``ResultStore.append`` writes, computable where the record is made (a ``--jobs`` worker)
    so the orchestrator only writes it."""
    return _dumps(record)


def _dumps(record: dict[str, Any]) -> str:
    """``record`` as one line of strict JSON: ``jsonable`` first, then ``json.dumps``.

    A record of plain data is encoded as it is (``_plain_keys``: every dict key a ``str``,
    ``int`` or ``float``, which ``json`` writes as ``jsonable`` does; numpy scalars, sets,
    paths and arrays through ``_jsonable_default``), the same bytes without the copy; one with a
    non-finite float or anything else takes the whole ``jsonable`` first."""
    if _plain_keys(record):
        try:
            return _ENCODER.encode(record)
        except (TypeError, ValueError, RecursionError):  # nan/inf (null), or not JSON at all
            pass
    return _ENCODER.encode(jsonable(record))


def _jsonable_default(obj: Any) -> Any:
    """What ``_ENCODER`` writes for an object ``json`` has no form of: its ``jsonable``."""
    got = jsonable(obj)
    if got is obj:
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
    return got


#: the encoder of ``_dumps`` (strict JSON, compact, UTF-8 as it is)
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False,
                            check_circular=False, default=_jsonable_default)
_CONTAINERS = (dict, list, tuple)
#: the key types ``json`` writes as ``jsonable`` does, and the values it needs no look into
_PLAIN_KEYS = frozenset((str, int, float))
_SCALARS = frozenset((str, int, float, bool, type(None)))


def _plain_keys(obj: dict[str, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """Whether every dict in ``obj`` (a dict, list or tuple), at any depth, is a ``dict``
    whose keys are all ``str``, ``int`` or ``float`` (those ``json`` writes as ``jsonable``
    does: ``str(k)``), found through ``dict``, ``list`` and ``tuple`` values; a subclass of
    dict, list or tuple anywhere says no. A bool or None key (``json`` writes ``true``,
    ``jsonable`` ``"True"``) or an enum's, say no too."""
    stack = [obj]
    while stack:
        item = stack.pop()
        values: Any = item
        if type(item) is dict:
            if not _PLAIN_KEYS.issuperset(map(type, item)):
                return False
            values = item.values()
        if _SCALARS.issuperset(map(type, values)):
            continue  # most of a record: no container in it
        for v in values:
            kind = type(v)
            if kind is dict or kind is list or kind is tuple:
                stack.append(v)
            elif kind not in _SCALARS and isinstance(v, _CONTAINERS):
                return False
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temporary file in the same dir + os.replace)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are for sharing
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


# --------------------------------------------------------------------------------------------
# The store


def _parsed_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Each line (a JSON object) parsed, in one pass: with the cyclic garbage collector
    paused, which has nothing to find in JSON's dicts and lists (they hold no cycles) and
    would otherwise go through them as they pile up."""
    with _collector_paused():
        return json.loads("[" + ",".join(lines) + "]")


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off inside, back as it was after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def latest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` in their order, only the last one of each key (a redone degraded run
    supersedes the earlier record)."""
    last = {r["key"]: i for i, r in enumerate(records)}
    return [r for i, r in enumerate(records) if last[r["key"]] == i]


class ResultStore:
    """Append-only store of run records in ``<out_dir>/results.jsonl``, one JSON object a line.

    Parameters
    ----------
    out_dir : str or Path
        Directory of the sweep; created (with parents) if missing.
    sync_interval_s, sync_records : float, int
        How often :meth:`append` fsyncs (see ``SYNC_INTERVAL_S``, ``SYNC_RECORDS``); 0 for
        every record.

    Notes
    -----
    Each record is written to the file (the kernel's copy) before :meth:`append` returns: a
    process that is killed (even SIGKILL) right after keeps it, and a resumed sweep counts that
    run as done. Only a machine crash or power loss can lose records written since the last
    fsync; they are then missing or a torn last line, and their runs are simply redone. Call
    :meth:`sync` when a sweep ends (or stops).

    A crash while appending can leave a truncated last line. :meth:`done_keys` and
    :meth:`records` repair this by atomically rewriting the file without it (that run is then
    simply not done). An invalid line anywhere else raises :class:`ResultsCorruptError`, naming
    the line number: that is damage we must not paper over.

    A record with ``"status": "degraded"`` (its run lost agents) does not count as done: a
    resumed sweep redoes it and the new record supersedes it (:meth:`records` returns only the
    latest record of each key). Records without a status count as complete.
    """

    def __init__(self, out_dir: str | Path, sync_interval_s: float = SYNC_INTERVAL_S,
                 sync_records: int = SYNC_RECORDS) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / RESULTS_FILE
        self._keys: set[str] | None = None  # keys of complete records (a repeat is refused)
        self._lines: list[int] = []  # the file's line number of each record ``_load`` read
        #: every record of the file as ``_load`` parsed it, then the appended lines parsed
        #: (what reading the file again gives); None until the file is read
        self._records: list[dict[str, Any]] | None = None
        self._pending: list[str] = []  # appended lines not parsed yet (``PARSE_LINES``)
        self.sync_interval_s = sync_interval_s
        self.sync_records = sync_records
        self._unsynced = 0  # records written since the last fsync
        self._created = False  # this store created the file: its directory entry is unsynced
        self._synced_at = time.monotonic()
        self._fd: int | None = None  # the file, open for appending (``append``) until ``sync``

    def __del__(self) -> None:
        self._close()

    def done_keys(self) -> set[str]:
        """Keys of the runs already stored (reads, and if needed repairs, the file).

        Returns
        -------
        set of str
            The ``key`` of every record in the file that is not degraded (see
            :func:`is_degraded`); a degraded run is to be redone.
        """
        self._load()
        assert self._keys is not None
        return set(self._keys)

    def records(self) -> list[dict[str, Any]]:
        """The stored records, in file order, only the latest one of each key (a redone
        degraded run supersedes the earlier record). Reads, and if needed repairs, the file;
        after it was read and appended to here, the records it would give are kept instead
        (the appended lines parsed ``PARSE_LINES`` at a time) and handed out, the next call
        reading the file again.

        Returns
        -------
        list of dict
        """
        if self._records is None:
            return latest(self._load())
        self._parse_pending()
        kept, self._records = self._records, None  # handed out once: a later call reads again
        return latest(kept)

    def numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """Every record in the file with its line number (1-based), superseded ones included:
        what ``identity.check_records`` checks. Reads, and if needed repairs, the file."""
        recs = self._load()
        return list(zip(self._lines, recs, strict=True))

    def append(self, record: dict[str, Any], line: str | None = None) -> None:
        """Append one record (one JSON line, written to the file; fsync'ed when the last fsync
        is ``sync_interval_s`` old or ``sync_records`` records are pending, see :meth:`sync`).

        Parameters
        ----------
        record : dict
            The run's result; must have a string ``key`` not yet in the store, or stored only
            in degraded records (which it then supersedes). It is passed through
            :func:`jsonable` first (nan/inf become ``null``).
        line : str, optional
            ``record_line(record)``, when the process that made the record computed it.

        Raises
        ------
        ValueError
            If the record has no string ``key`` or its key is already stored in a record that
            is not degraded, or it cannot be
            serialised as strict JSON.
        """
        key = record.get("key") if isinstance(record, dict) else None
        if not isinstance(key, str):
            raise ValueError("a result record must be a dict with a string 'key'")
        if self._keys is None:
            self._load()
        assert self._keys is not None
        if key in self._keys:
            raise ValueError(f"a record with key {key!r} is already in {self.path}")
        try:
            line = _dumps(record) if line is None else line
        except (TypeError, ValueError) as e:
            raise ValueError(f"record {key!r} is not JSON-serialisable: {e}") from e
        fd = self._open()
        data = memoryview(line.encode("utf-8") + b"\n")
        while data:  # in the kernel's hands once written: a killed process loses nothing
            data = data[os.write(fd, data):]
        self._unsynced += 1
        if (self._unsynced >= self.sync_records
                or time.monotonic() - self._synced_at >= self.sync_interval_s):
            self._fsync(fd)
        if not is_degraded(record):
            self._keys.add(key)
        if self._records is not None:  # the record as reading the file gives it back
            self._pending.append(line)
            if len(self._pending) >= PARSE_LINES:
                self._parse_pending()

    def _parse_pending(self) -> None:
        """Parse the appended lines not parsed yet, together (``_parsed_lines``)."""
        if self._pending and self._records is not None:
            self._records.extend(_parsed_lines(self._pending))
        self._pending = []

    def _open(self) -> int:
        """The file, open for appending (created if missing: its directory entry is then
        synced with the next fsync); kept open until ``sync`` (or ``_load``) closes it."""
        if self._fd is None:
            self._created |= not self.path.exists()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        return self._fd

    def _close(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None  # (``__del__`` of a failed ``__init__``)
        if fd is not None:
            os.close(fd)

    def sync(self) -> None:
        """fsync the records appended since the last fsync (and the new file's directory
        entry): after this they survive a machine crash too. Cheap when nothing is pending."""
        try:
            if self._unsynced or self._created:
                self._fsync(self._open())
        finally:
            self._close()

    def _fsync(self, fd: int) -> None:
        os.fsync(fd)
        if self._created:
            _fsync_dir(self.out_dir)
            self._created = False
        self._unsynced = 0
        self._synced_at = time.monotonic()

    def _load(self) -> list[dict[str, Any]]:
        """Parse the file, repairing a damaged tail; refresh the cached key set."""
        self._close()  # a repair replaces the file: the next append opens the new one
        if not self.path.exists():
            self._keys, self._lines, self._records, self._pending = set(), [], [], []
            return []
        data = self.path.read_bytes()
        raw_lines = data.split(b"\n")
        # Index of the last non-blank line: only that one may be a crash leftover.
        last = max((i for i, ln in enumerate(raw_lines) if ln.strip()), default=-1)
        records: list[dict[str, Any]] = []
        lines: list[int] = []
        offset = 0
        repaired: bytes | None = None
        for i, raw in enumerate(raw_lines):
            start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                if i == last:
                    repaired = data[:start]  # drop the truncated line (and what follows it)
                    break
                raise ResultsCorruptError(
                    f"{self.path}: line {i + 1} is not valid JSON ({e}); the file is damaged "
                    "before its last line, fix or remove that line by hand") from e
            if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                raise ResultsCorruptError(
                    f"{self.path}: line {i + 1} is not a result record (a JSON object with a "
                    "string 'key')")
            records.append(rec)
            lines.append(i + 1)
        else:
            if data and not data.endswith(b"\n"):
                repaired = data + b"\n"  # complete last record, newline lost: restore it
        if repaired is not None:
            atomic_write_bytes(self.path, repaired)
        self._keys = {r["key"] for r in records if not is_degraded(r)}
        self._lines = lines
        self._records, self._pending = list(records), []
        return records

