"""Every local randomizer and noise mechanism of ldpsim, in one place.

One object per mechanism, configured once (ε, domain, sensitivity), with ``perturb`` (from the
agent's uniforms, so a report is the same batched or alone), the exact ``log_likelihood`` the
audit uses, an unbiased ``estimate`` and its theoretical ``bias`` / ``variance``:

* ``GRR`` — binary and generalised randomized response (``grr``);
* ``OLH`` — optimised local hashing (``olh``);
* ``Hadamard`` — the Hadamard ("Harmony") frequency oracle (``hadamard``);
* ``Laplace`` — the Laplace mechanism, snapped to a grid (``laplace``).

Each states the ε it satisfies and the sensitivity it assumes; protocols build their
``PrivacyClaim`` from these and the audit checks the claims empirically. The families never add
noise or flip coins themselves (``tests/protocols/mechanisms/test_layer.py`` inspects their
modules).
"""

from __future__ import annotations

from ldpsim.protocols.mechanisms import grr, hadamard, laplace, olh
from ldpsim.protocols.mechanisms.grr import GRR
from ldpsim.protocols.mechanisms.hadamard import Hadamard
from ldpsim.protocols.mechanisms.laplace import (
    GRID_BITS,
    Laplace,
    laplace_mechanism,
    laplace_scale,
    laplace_threshold_keep_probability,
    snap_to_grid,
    snapped_laplace,
)
from ldpsim.protocols.mechanisms.olh import OLH

__all__ = ["GRR", "OLH", "Hadamard", "Laplace", "GRID_BITS", "laplace_mechanism",
           "laplace_scale", "laplace_threshold_keep_probability", "snap_to_grid",
           "snapped_laplace", "grr", "hadamard", "laplace", "olh"]
