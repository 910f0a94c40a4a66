"""Shared test set-up: make the repository root importable without installing the package."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _infrastructure() -> set[int]:
    """multiprocessing's own long-lived helpers: the fork server the curator processes start
    from, and the resource tracker. They are not leaks; their children are checked."""
    from multiprocessing import forkserver, resource_tracker

    pids = {getattr(forkserver._forkserver, "_forkserver_pid", None),
            getattr(resource_tracker._resource_tracker, "_pid", None)}
    return {p for p in pids if p}


def child_pids() -> list[int]:
    """Live (non-zombie) child processes of this test process, from /proc, including the
    children of multiprocessing's fork server (whose curator processes this test started)."""
    import os

    parents = {os.getpid()} | _infrastructure()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) in parents and fields[0] != "Z" and int(d.name) not in parents:
            out.append(int(d.name))
    return out


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def no_orphans():
    """Every test must leave no child process behind."""
    yield
    import time

    deadline = time.monotonic() + 3.0
    while child_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() == [], "a test left child processes running"


def each_implementation(accelerator):
    """A module's autouse fixture that runs each of its tests with both implementations of
    ``accelerator`` (``protocols.accel``): the compiled one (skipped where the install did not
    build it) and numpy's. The fixture's value is the implementation's name."""

    @pytest.fixture(autouse=True, params=["compiled", "numpy"])
    def implementation(request):
        if request.param == "compiled" and accelerator.built is None:
            pytest.skip(f"the compiled {accelerator.what} was not built at install "
                        "(no C compiler)")
        before = accelerator.use(request.param)
        yield request.param
        accelerator.use(before)

    return implementation


#: ``[runtime] chunk`` of the chunked runs ``each_chunking`` adds: fewer agents than the tests'
#: runs and a prime, so that it divides no pool's block and no batch
SMALL_CHUNK = 97


def each_chunking(module: str, helper: str):
    """A module's autouse fixture that runs each of its tests twice: as it is, and with every
    configuration its ``helper`` makes (a function of the module returning a run's
    configuration, or a configuration it holds) given ``[runtime] chunk = SMALL_CHUNK``, so
    that its runs are chunked (the curator streams the rounds of a protocol that absorbs in
    parts). The fixture's value is the chunk (None: as it is)."""

    @pytest.fixture(autouse=True, params=[None, SMALL_CHUNK], ids=["whole", "chunked"])
    def chunking(request, monkeypatch):
        if request.param is not None:
            mod = sys.modules[module]
            make = getattr(mod, helper)
            if isinstance(make, dict):
                monkeypatch.setattr(mod, helper, {**make, "chunk": request.param})
                return request.param

            def chunked(*args, **kwargs):
                return {**make(*args, **kwargs), "chunk": request.param}

            monkeypatch.setattr(mod, helper, chunked)
        return request.param

    return chunking


@pytest.fixture
def empty_ethics_memory():
    """The ethics family's per-process memories (``protocols.ethics.memo``) empty before and
    after the test: a test sees only what it computed."""
    from ldpsim.protocols.ethics import memo

    for m in (memo.MLE, memo.FM, memo.ROWS):
        m.clear()
    yield
    for m in (memo.MLE, memo.FM, memo.ROWS):
        m.clear()


def same_truth(got: dict, want: dict) -> None:
    """Every entry of two ground truths the same, arrays bit for bit."""
    import numpy as np

    assert got.keys() == want.keys()
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
            np.testing.assert_array_equal(got[k].view(np.uint64), v.view(np.uint64), k)
        else:
            assert type(got[k]) is type(v) and got[k] == v, k


@pytest.fixture
def streamed(monkeypatch) -> list[bool]:
    """Whether each run's rounds streamed (``RoundLoop.streams``), in this process's runs."""
    from ldpsim.simulator.session.roundloop import RoundLoop

    seen: list[bool] = []
    streams = RoundLoop.streams

    def spy(self, n, curator):
        seen.append(streams(self, n, curator))
        return seen[-1]

    monkeypatch.setattr(RoundLoop, "streams", spy)
    return seen
