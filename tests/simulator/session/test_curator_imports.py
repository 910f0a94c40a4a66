"""``Protocol.curator_imports``: the curator imports them once every pool has its set-up, so
no round pays for a module its curator would import on first use."""

from __future__ import annotations

import sys

from ldpsim.protocols import PROTOCOLS, get_protocol
from ldpsim.simulator.backends.inproc import run_inproc
from ldpsim.simulator.session import Limits

PROBE = "tests.simulator.session._preload_probe"
SEEN: list[bool] = []


def _probe_protocol():
    base = get_protocol("ldp_kwiksort_rr")

    class Curator(base.curator_class(None)):
        def plan(self, rnd):
            SEEN.append(PROBE in sys.modules)  # round 0 has not started yet
            return super().plan(rnd)

    class Probe(base.__class__):
        name = "preload_probe"
        curator_imports = (PROBE, "no.such.module")  # a missing one is left to the round

        def curator_class(self, bound):
            return Curator

    return Probe()


def test_the_curator_imports_its_modules_before_round_0(monkeypatch):
    monkeypatch.setitem(PROTOCOLS, "preload_probe", _probe_protocol())
    monkeypatch.delitem(sys.modules, PROBE, raising=False)
    SEEN.clear()
    cfg = {"protocol": "preload_probe", "params": {"epsilon": 1.0, "queries": 1},
           "data": {"kind": "mallows", "n": 50, "m": 4, "theta": 0.5}, "seed": 3, "pools": 2,
           "collusion": {"colluders": 0, "curator": True}, "faults": []}
    res = run_inproc(cfg, Limits(timeout_s=10))
    assert res["output"] and res["rejected"] == 0 and res["dropouts"] == 0
    assert SEEN and SEEN[0] is True


def test_safari_declares_no_import_its_lasso_does_not_make():
    """LADE's Lasso solves with our order-fixed NNLS (``ordered.nnls``), not scipy's: the
    curator has nothing to import ahead of round 1."""
    import inspect

    import ldpsim.protocols.safari.lade as lade

    assert "scipy" not in inspect.getsource(lade)
    assert get_protocol("safari").curator_imports == ()
