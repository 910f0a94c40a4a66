"""Collusion mechanics: who is in the semi-honest coalition, and the adversary's view.

A run's ``collusion`` names the colluding agents (``colluders``: a fraction in [0, 1), a count,
or a list of agent ids, which a scenario gives as ``[collusion] agents``; a scenario's list of
``colluders`` is a sweep, one value per run) and whether the curator is in the coalition
(``curator = true``, the LDP threat model). Colluders follow the protocol and, when the curator
colludes, DISCLOSE their raw data and their random coins (the agent's stream key, from which
every draw it makes can be recomputed) to the curator. The adversary view is exactly what the
curator received (queries it sent, reports, broadcasts), the disclosures and the public output;
attacks (a later module) must use nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from ldpsim.protocols import rng as rngm
from ldpsim.simulator.codec import wire


def n_colluders(n: int, spec: Any) -> int | None:
    """How many colluders a fraction or count names (None for an explicit id list)."""
    if isinstance(spec, list):
        return None
    if isinstance(spec, float):  # a fraction in [0, 1)
        return int(round(spec * n))
    return int(spec)


def colluder_mask(n: int, collusion: dict[str, Any], key: int) -> np.ndarray:
    """Boolean mask of colluding agents.

    A fraction or count picks the agents with the smallest hash of (collusion key, agent id), so
    every pool computes the same set without talking to the others, independent of pool count.
    At most n - 1 agents collude (DPWeVote's maximal collusion); an explicit list is taken as is.
    """
    spec = collusion.get("colluders", 0)
    mask = np.zeros(n, dtype=bool)
    if isinstance(spec, list):
        ids = np.asarray(spec, dtype=np.int64)
        mask[ids[(ids >= 0) & (ids < n)]] = True
        return mask
    k = min(n_colluders(n, spec) or 0, max(n - 1, 0))
    if k <= 0:
        return mask
    h = rngm.bits(key, np.arange(n), 0, 1)[:, 0]
    mask[np.argsort(h, kind="stable")[:k]] = True
    return mask


def save_view(path: str | Path, view: dict[str, Any]) -> Path:
    """Write an adversary view as one msgpack file (numpy arrays as ext type)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgpack.packb(view, default=wire.pack_ext, use_bin_type=True))
    return path


def load_view(path: str | Path) -> dict[str, Any]:
    """Read back a view written by ``save_view``."""
    return msgpack.unpackb(Path(path).read_bytes(), ext_hook=wire.unpack_ext, raw=False,
                           strict_map_key=False)
