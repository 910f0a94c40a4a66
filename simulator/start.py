"""The ``ldpsim`` command's entry point: the curator's fork server begins first, then the CLI.

A small ``ldpsim run`` on the processes backend spends most of its wall time importing: the
command line and the curator's fork server (``simulator.backends.launch``) each import numpy,
ZeroMQ and the protocol families, one after the other when the fork server starts with the
first curator process. This module imports the standard library only; for ``ldpsim run`` it
reads which backend and executor the run asks for (the scenario file, ``--backend``,
``--executor`` and ``--set``) and, when the runs start a curator process here, begins starting
the fork server before it imports the command line, so that the two import at once.

What it reads is a hint, never a check: a scenario it cannot read or an argument it does not
understand leaves the fork server to start with the first curator process, as it would without
this module; the command line validates everything.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from ldpsim.simulator import options
from ldpsim.simulator.scenario.catalogue import find

from ldpsim import environment

#: the backends whose runs start a curator process on this machine
CURATOR_BACKENDS = ("processes", "hosts", "dask")
#: the backends after whose ``ldpsim run`` nothing of this process's is left running (no
#: Dask client, no bound endpoint): the program may end without the interpreter's teardown
QUICK_EXIT = ("processes", "inproc")
#: the backend of a scenario that names none (``session.runconfig.DEFAULTS``)
DEFAULT_BACKEND = "processes"


class _Quiet(argparse.ArgumentParser):
    """A parser that raises instead of printing a usage error: what it reads is a hint, and
    the command line's own parser reports what is wrong (``ldpsim run --help`` names no
    scenario, and is no error)."""

    def error(self, message: str):  # noqa: D102 - argparse's
        raise ValueError(message)


def run_parser() -> argparse.ArgumentParser:
    """The options of ``ldpsim run`` (``options.RUN``, the command line's own table), each as
    a plain value or flag, no type or choices checked; it raises ``ValueError`` on what it
    cannot parse, printing nothing."""
    p = _Quiet(add_help=False)
    for flags, spec in (*options.RUN, *options.COMMON):
        p.add_argument(*flags, **{k: v for k, v in spec.items() if k in ("action", "dest")})
    p.set_defaults(set=[])
    return p


def _setting(raw: dict[str, Any], overrides: list[str], table: str, key: str) -> Any:
    """``[table] key`` of the raw scenario after the ``--set`` overrides (the last one wins)."""
    value = raw.get(table, {}).get(key)
    for text in overrides:
        k, _, v = text.partition("=")
        if k.strip() == f"{table}.{key}":
            value = v.strip().strip("'\"")
    return value


def starts_curator(argv: list[str]) -> bool:
    """Whether ``argv`` is an ``ldpsim run`` whose runs start a curator process here (the
    processes, hosts or dask backend, the local executor); False when in doubt."""
    return _starts_curator(where_runs(argv))


def _starts_curator(where: tuple[str, str] | None) -> bool:
    """Whether runs at ``where`` (``where_runs``) start a curator process here."""
    return where is not None and where[0] in CURATOR_BACKENDS and where[1] == "local"


def where_runs(argv: list[str]) -> tuple[str, str] | None:
    """(backend, executor) of an ``ldpsim run`` ``argv``, None when it is no run or in doubt."""
    hint = _run_hint(argv)
    return None if hint is None else hint[:2]


def run_protocols(argv: list[str]) -> list[str] | None:
    """The protocols of an ``ldpsim run`` ``argv`` (the scenario's ``protocol`` or
    ``protocols``, after the ``--set`` overrides), None when it is no run or in doubt."""
    hint = _run_hint(argv)
    return None if hint is None else hint[2]


def _run_hint(argv: list[str]) -> tuple[str, str, list[str] | None] | None:
    """(backend, executor, protocols or None) of an ``ldpsim run`` ``argv``, None when it is
    no run or in doubt."""
    if not argv or argv[0] != "run":
        return None
    try:
        args, _ = run_parser().parse_known_args(argv[1:])
        raw = tomllib.loads(Path(find(args.scenario)).read_text(encoding="utf-8"))
        backend = args.backend or _setting(raw, args.set, "runtime", "backend")
        executor = args.executor or _setting(raw, args.set, "runtime", "executor")
    except (Exception, SystemExit):  # argparse exits on what it cannot parse
        return None
    return str(backend or DEFAULT_BACKEND), str(executor or "local"), _protocols(raw, args.set)


def _protocols(raw: dict[str, Any], overrides: list[str]) -> list[str] | None:
    """The scenario's protocol names after the ``--set`` overrides (the last one wins), None
    when they are not a name or a list of names."""
    names = raw.get("protocols", raw.get("protocol"))
    for text in overrides:
        k, _, v = text.partition("=")
        if k.strip() in ("protocol", "protocols"):
            try:
                names = tomllib.loads(f"v = {v.strip()}")["v"]
            except tomllib.TOMLDecodeError:
                names = v.strip()  # a bare word, as the scenario's reader takes it
    names = [names] if isinstance(names, str) else names
    ok = isinstance(names, list) and names and all(isinstance(n, str) for n in names)
    return list(names) if ok else None


def main(argv: list[str] | None = None) -> int:
    """``ldpsim``: begin the fork server when the run needs it, then run the command line.

    Run as the program (``argv`` None) on a local backend, ``ldpsim run`` ends without the
    interpreter's teardown (about 30 ms of a small run's 0.4 s): by then every file it wrote
    is closed and fsync'ed, every curator and pool process joined, its output flushed, and
    the fork server exits as its parent's pipe closes."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    data_dir = options.data_dir_of(argv)
    if data_dir:  # before the fork server begins: every process it starts reads it
        os.environ[environment.DATA] = str(Path(data_dir).expanduser().resolve())
    hint = _run_hint(argv)
    where = None if hint is None else hint[:2]
    if _starts_curator(where):
        from ldpsim.simulator.backends.launch import preload_for, start_fork_server

        with contextlib.suppress(Exception):  # it starts with the first curator otherwise
            preload_for(hint[2])  # the run's own families, not every one
            start_fork_server()
    # the command line imports numpy and the simulator: after the fork server has begun
    from ldpsim.simulator.cli import main as cli_main

    code = cli_main(argv)
    if program and where is not None and where[0] in QUICK_EXIT and where[1] == "local":
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        _remove_mp_directory()
        os._exit(code)
    return code


def _remove_mp_directory() -> None:
    """Remove the temporary directory multiprocessing made for this process (``pymp-*``: the
    fork server's socket), which the interpreter's teardown would have removed; the fork
    server exits as this process's pipe to it closes."""
    mp_process = sys.modules.get("multiprocessing.process")
    tmp = getattr(mp_process.current_process(), "_config", {}).get("tempdir") \
        if mp_process else None
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
