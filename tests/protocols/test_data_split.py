"""Every pool generates only its own block of agents, which is only exact if every generated
data kind is split-independent: a block's rows do not depend on how the blocks are cut
(``protocols.data.Dataset``). These tests check that contract for every generated kind."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ldpsim.protocols import DATA_KINDS, get_data_kind

#: every registered kind that generates its data, with each of its example argument sets (a new
#: kind is checked as soon as it states ``examples``)
GENERATED = [(name, args) for name, kind in sorted(DATA_KINDS.items()) for args in kind.examples]


def test_every_generated_kind_is_checked():
    """Kinds without examples are the ones that read a file (they need a path)."""
    for name, kind in DATA_KINDS.items():
        assert kind.examples or "path" in kind.params, name


def _build(kind: str, args: dict):
    return get_data_kind(kind).build(dict(args), keys=987654321)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


@pytest.mark.parametrize(("kind", "args"), GENERATED, ids=[
    f"{k}-{a.get('design', '')}" for k, a in GENERATED])
def test_generated_kinds_are_split_independent(kind, args):
    ds = _build(kind, args)
    whole = np.asarray(ds.rows(0, ds.n))
    cuts = [0, 1, 2, ds.n // 3, ds.n // 3 + 1, ds.n // 2, ds.n - 1, ds.n]
    parts = np.concatenate([np.asarray(ds.rows(a, b)) for a, b in itertools.pairwise(cuts)])
    assert _same(parts, whole)
    # a fresh data set object (another pool) gives the same rows
    assert _same(np.asarray(_build(kind, args).rows(40, 90)), whole[40:90])
