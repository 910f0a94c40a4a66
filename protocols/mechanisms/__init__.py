"""Every local randomizer and noise mechanism of ldpsim, in one place.

One object per mechanism, configured once (ε, domain, sensitivity), with ``perturb`` (from the
agent's own uniforms or words, so a report is the same batched or alone), the exact
``log_likelihood`` the audit uses, an ``estimate`` and its theoretical ``bias`` / ``variance``:

* ``GRR`` — binary and generalised randomized response (``grr``);
* ``OLH`` — optimised local hashing (``olh``);
* ``Hadamard`` — the Hadamard ("Harmony") frequency oracle (``hadamard``);
* ``Laplace`` — the Laplace mechanism, exactly ε-DP as a discrete Laplace on a grid
  (``laplace``; its exact integer sampler is ``dlap``).

Each states the ε it satisfies and the sensitivity it assumes in its ``privacy`` property (a
``MechanismPrivacy``); protocols bind their mechanisms once per run (``Protocol.rounds``), their
``PrivacyClaim`` is composed from these and the audit checks the claims empirically. The families
never add noise or flip coins themselves (``tests/protocols/mechanisms/test_layer.py`` inspects
their modules).
"""

from __future__ import annotations

from ldpsim.protocols.mechanisms import dlap, grr, hadamard, laplace, olh, privacy
from ldpsim.protocols.mechanisms.grr import GRR
from ldpsim.protocols.mechanisms.hadamard import Hadamard
from ldpsim.protocols.mechanisms.laplace import (
    Laplace,
    laplace_grid,
    laplace_scale,
    laplace_threshold_keep_probabilities,
)
from ldpsim.protocols.mechanisms.olh import OLH
from ldpsim.protocols.mechanisms.privacy import MechanismPrivacy

__all__ = ["GRR", "OLH", "Hadamard", "Laplace", "MechanismPrivacy", "laplace_grid",
           "laplace_scale", "laplace_threshold_keep_probabilities", "dlap", "grr", "hadamard",
           "laplace", "olh", "privacy"]
