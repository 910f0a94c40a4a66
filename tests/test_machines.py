"""Same inputs, same record, on any machine (docs/determinism.md).

A reviewer re-executes our results on a processor that is not ours: OpenBLAS then picks another
kernel (another summation order for every ``@``, ``solve`` or ``eigh``), another thread count,
and numpy another SIMD dispatch. Each environment below runs in a fresh interpreter and must
give (1) every built-in protocol's record digests exactly as this process computes them (the
snapshot's runs, ``tests/test_snapshot.py``), and (2) ``ldpsim verify`` passes on results
directories this process wrote: one per family whose estimators use linear algebra.

Nothing here (or in the Makefile, conftest or package) pins these variables for the rest of the
suite: the whole suite must pass under whatever ``OPENBLAS_*`` the machine sets.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from ldpsim.protocols.local import example_data

import ldpsim
from tests.test_snapshot import BUILTIN, _run_record, _sections

ROOT = Path(__file__).resolve().parents[1]

#: OpenBLAS kernels of processors of other kinds than this one (OPENBLAS_CORETYPE)
KERNELS = {"x86_64": ("Haswell", "SkylakeX", "Zen", "Sandybridge", "Prescott"),
           "AMD64": ("Haswell", "SkylakeX", "Zen", "Sandybridge", "Prescott"),
           "aarch64": ("ARMV8", "CortexA57", "NeoverseN1"),
           "arm64": ("ARMV8", "CortexA57", "NeoverseN1")}.get(platform.machine(), ())

#: the name OpenBLAS reports for a core type that runs another's kernels
ALIASES = {"zen": "haswell", "prescott": "katmai"}


def _baseline() -> str:
    """NPY_DISABLE_CPU_FEATURES that leaves numpy its baseline: every dispatched target off."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return " ".join(__cpu_dispatch__)


ENVIRONMENTS = ([(f"kernel-{k}", {"OPENBLAS_CORETYPE": k}) for k in KERNELS]
                + [(f"threads-{t}", {"OPENBLAS_NUM_THREADS": str(t)}) for t in (1, 2)]
                + [("numpy-baseline", {"NPY_DISABLE_CPU_FEATURES": _baseline()})])

#: the families whose estimators and metrics use linear algebra, one results directory each
FAMILIES = {"truth": ("truth_lp", "truth_mf", "truth_rr", "truth_two_layer", "truth_plain"),
            "vote": ("dpwevote", "dpwevote_laplace"),
            "ethics": ("ethics_nonprivate", "ethics_rldp_fm", "ethics_rldp_laplace",
                       "ethics_vldp", "ethics_rlcp", "ethics_vlcp"),
            "safari": ("safari",)}

PROBE = """
import json, sys
from tests.test_snapshot import BUILTIN, _run_record, _sections
import ldpsim
digests = {name: _sections(_run_record(name)) for name in BUILTIN}
verified = {}
for d in sys.argv[1:]:
    rep = ldpsim.verify(d)
    verified[d] = [rep.ok, rep.checked, [str(x) for x in rep.differing], rep.failed]
kernel = None
try:
    import threadpoolctl
    info = [i for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
    kernel = info[0].get("architecture") if info else None
except ImportError:
    pass
print(json.dumps({"digests": digests, "verified": verified, "kernel": kernel}))
"""


def _scenario(family: str) -> dict:
    names = FAMILIES[family]
    return {"name": f"machines-{family}", "protocols": list(names), "repeats": 2, "seed": 11,
            "data": example_data(names[0]), "runtime": {"backend": "inproc", "pools": 2}}


@pytest.fixture(scope="module")
def here(tmp_path_factory):
    """This process's digests, and one results directory per family written here."""
    dirs = []
    for family in FAMILIES:
        out = tmp_path_factory.mktemp("machines") / family
        ldpsim.run(_scenario(family), out=out)
        dirs.append(str(out))
    return {name: _sections(_run_record(name)) for name in BUILTIN}, dirs


def _probe(overrides: dict[str, str], dirs: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OPENBLAS_") or k == "NPY_DISABLE_CPU_FEATURES")}
    env.update(overrides, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", PROBE, *dirs], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("label", "overrides"), ENVIRONMENTS, ids=[e[0] for e in ENVIRONMENTS])
def test_records_and_verify_hold_in_another_environment(here, label, overrides):
    digests, dirs = here
    got = _probe(overrides, dirs)
    differing = {name: sorted(k for k in digests[name].keys() | got["digests"][name].keys()
                              if digests[name].get(k) != got["digests"][name].get(k))
                 for name in digests}
    assert not any(differing.values()), (
        f"{label}: record fields that differ from this process's: "
        f"{ {k: v for k, v in differing.items() if v} }")
    for d, (ok, checked, diff, failed) in got["verified"].items():
        assert ok and checked > 0, f"{label}: verify {Path(d).name}: {diff} {failed}"
    if "OPENBLAS_CORETYPE" in overrides and got["kernel"] is not None:
        # the kernel asked for is the one that ran (not silently this machine's own); OpenBLAS
        # names some by the kernels they share: Zen runs Haswell's, Prescott reports Katmai
        asked = overrides["OPENBLAS_CORETYPE"].lower()
        assert got["kernel"].lower() in {asked, ALIASES.get(asked)}, got["kernel"]


def test_the_environments_cover_what_the_contract_names():
    """At least five processors' kernels where OpenBLAS has them, two thread counts and
    numpy's baseline dispatch (an honest list: the parametrisation above is built from it)."""
    labels = [e[0] for e in ENVIRONMENTS]
    if platform.machine() in ("x86_64", "AMD64"):
        assert sum(x.startswith("kernel-") for x in labels) >= 5
    assert {"threads-1", "threads-2", "numpy-baseline"} <= set(labels)
