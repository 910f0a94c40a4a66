"""``Coalition`` selects exactly ``colluder_mask``'s agents, bit for bit, without a mask over
all agents: fractions, counts and id lists, for many n, keys and chunk sizes, through every
level of its radix selection and with ties of the hash (which the mask's stable sort breaks
by id)."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.simulator.session import collusion
from ldpsim.simulator.session.collusion import Coalition, colluder_mask


def _specs(n: int) -> list:
    return [0, 0.0, 1, 2, 0.01, 0.1, 0.5, 0.99, 7, n - 1, n, n + 5,
            [0, 3, n - 1, n, -1, 3], [], [n // 2]]


@pytest.mark.parametrize("n", [1, 2, 3, 10, 100, 1000, 4097, 20000])
@pytest.mark.parametrize("key", [1, 12345678901234, 2**63 + 5])
def test_the_coalition_is_the_masks_agents(n, key):
    for spec in _specs(n):
        mask = colluder_mask(n, {"colluders": spec}, key)
        want = np.flatnonzero(mask)
        for chunk in (1, 7, 1000, 1 << 20):
            if chunk < 1000 and n > 1000:
                continue
            c = Coalition(n, {"colluders": spec}, key, chunk=chunk)
            assert len(c) == int(mask.sum())
            assert np.array_equal(c.ids(), want), (n, spec, chunk)
            lo, hi = n // 3, 2 * n // 3 + 1
            assert np.array_equal(c.ids(lo, hi), want[(want >= lo) & (want < hi)])
            assert np.array_equal(c.mask(), mask)
            assert np.array_equal(c.members(np.arange(n)), mask)
            assert all((a in c) == bool(mask[a]) for a in range(0, n, max(1, n // 17)))


@pytest.mark.parametrize("gather", [1, 2, 50])
def test_every_level_of_the_radix_selection(monkeypatch, gather):
    """A bucket larger than ``GATHER`` is split on the next 16 bits: with a tiny ``GATHER``
    the selection goes down every level and still picks the mask's agents."""
    monkeypatch.setattr(collusion, "GATHER", gather)
    for n, spec in [(5000, 0.3), (5000, 1), (5000, 4999), (777, 100)]:
        want = np.flatnonzero(colluder_mask(n, {"colluders": spec}, 99))
        assert np.array_equal(Coalition(n, {"colluders": spec}, 99, chunk=333).ids(), want)


@pytest.mark.parametrize("levels", [1, 7, 2**16 + 3])
def test_hash_ties_are_broken_by_id_as_the_stable_sort_does(monkeypatch, levels):
    """Hashes with many ties (few distinct values, all in one top bucket or spread): the
    colluders are those of the smallest (hash, id) pairs, as the mask's stable argsort."""
    def hashes(self, lo, hi):
        ids = np.arange(lo, hi, dtype=np.uint64)
        return (ids * np.uint64(2654435761)) % np.uint64(levels) * np.uint64(1 + 2**40)

    monkeypatch.setattr(Coalition, "_hashes", hashes)
    n = 3000
    h = hashes(None, 0, n)
    for k in (1, 2, 5, 999, 1500, 2999):
        want = np.sort(np.argsort(h, kind="stable")[:k])
        for chunk in (64, 1 << 20):
            assert np.array_equal(Coalition(n, {"colluders": k}, 0, chunk=chunk).ids(), want)


def test_a_coalition_is_selected_only_when_asked():
    c = Coalition(10**12, {"colluders": 5}, 3)  # would take hours to hash
    assert len(c) == 5
    c = Coalition(10**12, {"colluders": [4, 10**11]}, 3)
    assert len(c) == 2 and 10**11 in c and 5 not in c and c.ids(0, 10).tolist() == [4]
