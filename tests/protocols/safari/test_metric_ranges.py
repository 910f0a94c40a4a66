"""The SAFARI family's metrics stay in their declared ranges, the baselines' raw estimates
(``release = "estimate"``, whose AVD exceeds 1 as in the paper's Fig. 3) included."""

from __future__ import annotations

import pytest
from ldpsim.protocols import PROTOCOLS
from ldpsim.simulator.backends.inproc import run_inproc

from tests.protocols.safari.test_protocols import LIMITS, config, score

BASELINES = ["rank_grr", "rank_olh", "rank_harmony"]


def _in_range(protocol: str, metrics: dict[str, float]) -> list[str]:
    """The metrics outside what ``protocol`` declares, each with its value and range."""
    declared = {str(m): m for m in PROTOCOLS[protocol].metrics}
    out = []
    for name, v in metrics.items():
        m = declared[name]
        if (m.low is not None and v < m.low) or (m.high is not None and v > m.high):
            out.append(f"{name} = {v} outside {m.range_text}")
    return out


@pytest.mark.parametrize("protocol", BASELINES)
def test_raw_estimates_stay_in_the_declared_range(protocol):
    cfg = config(protocol, n=300, d=6, params={"epsilon": 0.5, "release": "estimate"})
    m = score(cfg, run_inproc(cfg, LIMITS))
    assert not _in_range(protocol, m)
    # the raw estimate's negative cells: its AVD is no distance of two distributions
    assert m["avd_q2"] > 1.0


@pytest.mark.parametrize("protocol", ["safari", *BASELINES])
def test_synthetic_releases_are_distributions_whose_avd_is_at_most_one(protocol):
    params = {"epsilon": 0.5} | ({} if protocol == "safari" else {"release": "synthetic"})
    cfg = config(protocol, n=300, d=6, params=params)
    m = score(cfg, run_inproc(cfg, LIMITS))
    assert not _in_range(protocol, m)
    assert 0.0 <= m["avd_q1"] <= 1.0 and 0.0 <= m["avd_q2"] <= 1.0
