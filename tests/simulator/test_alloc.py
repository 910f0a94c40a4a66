"""``simulator.alloc``: the opt-in allocator tuning and the heap a tuned process warms at
set-up (``warm_heap``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ldpsim.simulator import alloc

PROBE = r"""
import json, resource, sys
import numpy as np
from ldpsim.simulator import alloc

tune, warm = sys.argv[1] == "1", sys.argv[2] == "1"
if tune:
    alloc.keep_freed_memory()
warmed = alloc.warm_heap(10**6) if warm else 0
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
arrays = [np.ones(1 << 20) for _ in range(6)]  # 48 MiB of round-sized arrays
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({"tuned": alloc.tuned(), "warmed": warmed, "faults": faults}))
"""


def _probe(tune: bool, warm: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(int(tune)), str(int(warm))],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_warm_heap_does_nothing_in_an_untuned_process():
    got = _probe(tune=False, warm=True)
    assert got == {"tuned": False, "warmed": 0, "faults": got["faults"]}
    assert alloc.warm_heap(0) == 0


def test_a_warmed_heap_spares_the_first_arrays_their_page_faults():
    cold, warm = _probe(tune=True, warm=False), _probe(tune=True, warm=True)
    assert cold["tuned"] and warm["tuned"]
    assert warm["warmed"] == alloc.WARM_POOL * 10**6
    # 48 MiB is 12,288 pages: cold, they fault in (a few pages per fault with fault-around);
    # warmed, they are already there
    if cold["faults"] < 1000:
        pytest.skip(f"the heap faults in large pages here ({cold['faults']} faults for 48 MiB)")
    assert warm["faults"] < cold["faults"] / 10


def test_warm_heap_is_capped():
    probe = PROBE.replace("alloc.warm_heap(10**6)", "alloc.warm_heap(10**9)")
    out = subprocess.run([sys.executable, "-c", probe, "1", "1"], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out)["warmed"] == alloc.WARM_MAX_BYTES
