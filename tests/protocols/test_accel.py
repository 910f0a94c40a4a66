"""``protocols.accel``: the switch between a compiled accelerator and numpy, for both of them
(the batch codec and the streams' finaliser)."""

from __future__ import annotations

import pytest
from ldpsim.protocols import accel, rng
from ldpsim.simulator.codec import wire_numpy


@pytest.mark.parametrize("acc", [wire_numpy.CODEC, rng.MIXER, rng.BLAKE2B],
                         ids=["codec", "mixer", "blake2b"])
def test_use_names_the_choices_and_says_what_is_missing(acc):
    start = acc.name()
    try:
        with pytest.raises(ValueError, match=f"{acc.what}: 'fast' is not one of compiled, numpy"):
            acc.use("fast")
        assert acc.use("numpy") == start and acc.name() == "numpy" and acc.module is None
        if acc.built is not None:
            assert acc.use("compiled") == "numpy" and acc.module is acc.built
    finally:
        acc.use(start)
    missing = accel.Accelerator("codec", None, "X", "simulator/codec/_wirec.c")
    assert missing.name() == "numpy"
    with pytest.raises(ValueError,
                       match=r"compiled codec \(simulator/codec/_wirec.c\) was not built"):
        missing.use("compiled")


def test_the_environment_variable_chooses_numpy(monkeypatch):
    monkeypatch.setenv("LDPSIM_TEST_ACCEL", "numpy")
    assert accel.Accelerator("mixer", rng, "LDPSIM_TEST_ACCEL", "x.c").name() == "numpy"
    monkeypatch.setenv("LDPSIM_TEST_ACCEL", "compiled")
    assert accel.Accelerator("mixer", rng, "LDPSIM_TEST_ACCEL", "x.c").module is rng
    assert accel.Accelerator.load("mixer", "ldpsim.no_such_module", "X", "x.c").built is None


def test_a_build_older_than_its_source_is_not_used(monkeypatch):
    """An extension built from an older source (a checkout updated without installing again)
    lacks a function the code now calls: it is not used, numpy does the work."""
    import types

    from ldpsim.protocols import accel

    old = types.ModuleType("old_build")
    old.siphash = lambda *a: None
    monkeypatch.setattr(accel.importlib, "import_module", lambda name: old)
    stale = accel.Accelerator.load("support", "x", "LDPSIM_NONE", "x.c", needs=("olh_support",))
    assert stale.built is None and stale.name() == "numpy"
    fresh = accel.Accelerator.load("hash", "x", "LDPSIM_NONE", "x.c", needs=("siphash",))
    assert fresh.built is old and fresh.name() == "compiled"
