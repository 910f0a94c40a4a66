"""Every output pinned: one run of every registered protocol (with a colluding coalition and its
attacks) and one audit of every shipped ``audit_*`` scenario, reduced to a digest per record
section and compared with ``tests/snapshot.json``.

A refactor that leaves the science alone (modules moved, privacy stated in another place) must
leave every digest as it was. A change that means to move an output rewrites the file with
``python -m tests.test_snapshot`` and says so in its commit. Timings, process sizes, physical
frames and library versions are left out (they differ from run to run); everything else a record
holds is in. The digests hold on one machine and one numpy/scipy release: on another release the
test skips (floating-point library code may round differently), saying which.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy
from ldpsim.protocols import PROTOCOLS
from ldpsim.protocols.local import example_data

import ldpsim

GOLDEN = Path(__file__).with_name("snapshot.json")
AUDITS = ("audit_rank", "audit_truth", "audit_vote", "audit_safari", "audit_ethics")
#: record fields that are measurements of this machine, not outputs
MEASURED = {"timing", "versions", "seconds", "trials_per_second", "wall_s", "curator_cpu_s",
            "physical_bytes_up", "physical_bytes_down", "physical_frames", "curator_peak_rss_mb",
            "pool_peak_rss_mb"}


def _versions() -> dict[str, str]:
    return {"numpy": ".".join(np.__version__.split(".")[:2]),
            "scipy": ".".join(scipy.__version__.split(".")[:2])}


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in MEASURED}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _digest(value) -> str:
    text = json.dumps(_strip(value), sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _sections(record: dict) -> dict[str, str]:
    return {k: _digest(v) for k, v in sorted(record.items()) if k not in MEASURED}


#: the built-in families' protocols (a plugin's outputs are its own)
BUILTIN = sorted(n for n, p in PROTOCOLS.items() if p.__module__.startswith("ldpsim.protocols"))


def _run_record(name: str) -> dict:
    # the seed-only secret: a digest pins the output of the scenario alone (a run given no
    # secret draws a fresh one: its data and coins differ every time)
    scen = {"name": "snapshot", "protocols": [name], "repeats": 1, "seed": 3,
            "data": example_data(name),
            "runtime": {"backend": "inproc", "pools": 2, "secret": "seed"},
            "collusion": {"colluders": 0.3, "curator": True, "attacks": True,
                          "attack_targets": 40}}
    (record,) = ldpsim.run(scen).records
    return record


def snapshot() -> dict:
    """The digests of today's code (what ``tests/snapshot.json`` holds)."""
    runs = {name: _sections(_run_record(name)) for name in BUILTIN}
    return {"versions": _versions(), "runs": runs, "audits": _audits()}


def _golden() -> dict:
    golden = json.loads(GOLDEN.read_text())
    if golden["versions"] != _versions():
        pytest.skip(f"the snapshot was taken on numpy/scipy {golden['versions']}, this is "
                    f"{_versions()}")
    return golden


@pytest.mark.parametrize("name", BUILTIN)
def test_every_protocol_run_is_as_pinned(name):
    golden = _golden()
    got = _sections(_run_record(name))
    pinned = golden["runs"].get(name, {})
    differing = sorted(k for k in pinned.keys() | got.keys() if pinned.get(k) != got.get(k))
    assert not differing, f"{name}: these record fields changed: {differing}"


def test_every_audit_is_as_pinned():
    golden = _golden()
    got = _audits()
    assert got.keys() == golden["audits"].keys()
    differing = {k: sorted(f for f in got[k] if got[k][f] != golden["audits"][k].get(f))
                 for k in got}
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


def _audits() -> dict:
    out = {}
    for scen in AUDITS:
        for rec in ldpsim.audit(scen, trials=300):
            out[f"{scen} {rec['protocol']} {json.dumps(rec['point'], sort_keys=True)}"] = (
                _sections(rec))
    return out


def test_every_registered_built_in_protocol_is_pinned():
    """A new built-in protocol joins the snapshot (``python -m tests.test_snapshot``)."""
    golden = json.loads(GOLDEN.read_text())
    assert set(BUILTIN) == set(golden["runs"])


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    sys.stdout.write(f"wrote {GOLDEN}\n")
