"""How the curator process starts: the fork server, its preload, and starting it early.

The curator process is started from a fork server: a fresh interpreter that never held the
orchestrator's memory (the run seed, the master secret, the agents' keys), so the curator
process knows exactly what it is handed -- ``seeding.curator_config`` and the registration
key -- and nothing from which an agent's data or coins derive. Pools are forked directly and
use only the keys they are handed (``seeding.PoolKeys``: their own agents'); on one machine
under one user that is a separation of what each party is given, not an OS boundary (the
hosts backend runs pools on machines of their own).

The fork server's start-up (a fresh interpreter importing numpy, ZeroMQ and the protocol
families: most of a small run's wall time) is on the path of the first curator process unless
it begins earlier: ``start_fork_server`` begins it without waiting for it, and ``ldpsim run``
calls it before it imports the simulator when the run's backend starts a curator process
(``simulator.start``), so the fork server imports while the command line does.

This module imports nothing heavy (the standard library and the built-in families' names,
``protocols.families``), so that the command line can start the fork server before numpy is
imported, preloading the families of the run's protocols only (``preload_for``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.forkserver as mp_forkserver
import multiprocessing.spawn as mp_spawn
import os
import signal
import sys
from pathlib import Path

from ldpsim.protocols.families import family_of_protocol

#: What the fork server imports once, so that each curator process it forks starts with them:
#: the curator's loop, the protocol families (``protocols.families.BUILTIN``, named here;
#: ``ldpsim run`` narrows them to its scenario's own with ``preload_for``),
#: the entry points of plugin families, and ``numpy.random``, which numpy 2 imports on first
#: use (a curator's own Generator, ``protocols.rng.party_generator``: about 10 ms of every
#: run's curator otherwise).
PRELOAD = ("ldpsim.simulator.backends.transport",
           "ldpsim.protocols.rank", "ldpsim.protocols.truth", "ldpsim.protocols.vote",
           "ldpsim.protocols.safari", "ldpsim.protocols.ethics",
           "importlib.metadata", "numpy.random")

#: the context curator processes start in (``simulator.backends.transport``)
CURATOR_CTX = mp.get_context("forkserver")
CURATOR_CTX.set_forkserver_preload(list(PRELOAD))


def preload_for(protocols: list[str] | None) -> list[str]:
    """Have the fork server, when it starts, preload only what curators of ``protocols`` use:
    the transport, the families of those built-in protocols and ``numpy.random``, not the
    other families nor ``importlib.metadata`` (a curator is handed its protocol object,
    ``registry.use``, and builds no registry). None, or a name that is no built-in protocol's
    (a plugin's), keeps ``PRELOAD``. A curator of another protocol still runs: it imports its
    family when it starts. Returns the modules it will preload.

    Parameters
    ----------
    protocols : list of str or None
        The protocols of the runs about to start (``ldpsim run``'s scenario).
    """
    families = [family_of_protocol(p) for p in protocols or ()]
    modules = list(PRELOAD)
    if families and None not in families:
        modules = ["ldpsim.simulator.backends.transport", *dict.fromkeys(families),
                   "numpy.random"]
    CURATOR_CTX.set_forkserver_preload(modules)
    return modules


@contextlib.contextmanager
def _without_main():
    """Start fork-server children without re-running the caller's ``__main__``: their targets
    live in this package, so a script without an ``if __name__ == "__main__"`` guard (or a
    notebook) can use every backend."""
    orig = mp_spawn.get_preparation_data

    def prep(name):
        data = orig(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    mp_spawn.get_preparation_data = prep
    try:
        yield
    finally:
        mp_spawn.get_preparation_data = orig


def import_path() -> list[str]:
    """The import path of the fork server (and of the curator processes it forks): this
    process's own ``sys.path``, given explicitly, after the folder that holds this package.

    Returns
    -------
    list of str
        The folders, in order. The current directory is in it only where this process has it:
        an explicit entry (a script's folder, a ``PYTHONPATH`` entry) stays where it is, and
        the implicit one (``""``: an interactive session, a notebook) moves to the end, after
        the standard library and the installed packages, so that a module there can be a
        user's protocol but never replaces ``json``, ``msgpack`` or ``zmq``. The ``ldpsim``
        command has no current directory on its path (``python -m ldpsim`` removes it).
    """
    home = str(Path(sys.modules["ldpsim"].__file__).resolve().parent.parent)
    implicit = [os.getcwd()] if "" in sys.path else []
    out = [home]
    for p in [*(p for p in sys.path if p), *implicit]:
        if p not in out:
            out.append(p)
    return out


@contextlib.contextmanager
def _package_first():
    """Start the fork server (a fresh interpreter, ``python -c``) with this process's import
    path (``import_path``) instead of its own: without it, its ``sys.path`` begins with the
    directory it starts in, ahead of the standard library and the installed packages, so a
    ``msgpack.py`` or ``json.py`` there would run in the fork server and every curator process
    forked from it, and a folder named ``ldpsim`` (a clone of the repository, next to a
    notebook) would be a namespace package that shadows an editable install. Safe-path mode
    keeps ``python -c`` from putting the current directory first; ``PYTHONPATH`` names the
    parent's path, ahead of the fork server's own standard library (the same folders)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(import_path())
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_fork_server() -> None:
    """Begin starting the fork server now, without waiting for its imports (a no-op when it
    runs already): the first curator process's start then waits only for what is left of
    them."""
    with _without_main(), _package_first():
        mp_forkserver.ensure_running()


def start_child(proc) -> None:
    """Start a child with SIGINT blocked across fork.

    Without this, a Ctrl-C landing while the child is being forked can hit the child before it
    ignores SIGINT, or interrupt the parent half-way through ``Process.start``. With it, the
    child starts with SIGINT ignored, and a pending Ctrl-C reaches the parent right after the
    child is registered, where the caller's clean-up can stop it.
    """
    if proc._start_method == "forkserver":
        # Not blocked here: the start waits for the fork server (a fresh interpreter that may
        # still be importing ldpsim), and Ctrl-C must be able to interrupt that wait. A child
        # the fork server made before the interrupt dies with the fork server, which exits
        # with this process; one that gets the Ctrl-C before it ignores SIGINT just dies.
        with _without_main(), _package_first():
            proc.start()
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with _without_main():
            proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
