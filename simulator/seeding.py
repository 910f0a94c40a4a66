"""Seeding: one run seed, one stream key per party (see ``protocols.rng``).

Every random draw of a run is a pure function of (run seed, party, round, draw index): the data
generator, the agents' randomizers (keyed further by agent id), the curator, and the choice of
colluders each have their own key. The run seed of repetition ``r`` of a scenario with seed ``s``
is derived from (s, r) only, so every protocol and parameter point of one repetition sees the same
data and the same agents' coins (common random numbers: differences between protocols are not
drowned in data noise), while different repetitions and different scenario seeds are independent.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols.rng import stream_key


@dataclass(frozen=True)
class RunKeys:
    """The stream keys of one run."""

    data: int
    agents: int
    curator: int
    collusion: int


def run_keys(seed: int) -> RunKeys:
    """Stream keys for every party of a run with this seed."""
    return RunKeys(data=stream_key(seed, "data"), agents=stream_key(seed, "agents"),
                   curator=stream_key(seed, "curator"), collusion=stream_key(seed, "collusion"))


def run_seed(scenario_seed: int, repeat: int) -> int:
    """The seed of repetition ``repeat`` of a scenario (a 63-bit integer)."""
    return stream_key(scenario_seed, "repeat", repeat) >> 1
