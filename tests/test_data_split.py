"""Every pool generates only its own block of agents, which is only exact if every generated
data kind is split-independent: a block's rows do not depend on how the blocks are cut
(``protocols.data.Dataset``). These tests check that contract for every generated kind."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from protocols import get_data_kind

GENERATED = [
    ("mallows", {"n": 300, "m": 6, "theta": 0.4}),
    ("crowd_synthetic", {"n": 300, "tasks": 30, "sparsity": 0.7}),
    ("weighted_votes", {"n": 300, "candidates": 2}),
    ("weighted_votes", {"n": 300, "candidates": 2, "design": "balanced"}),
    ("safari_mallows", {"n": 300, "d": 5, "theta": 0.3}),
    ("ethics_synthetic", {"n": 120, "d": 3, "records": 4, "eps_mode": "uniform"}),
]


def _build(kind: str, args: dict):
    return get_data_kind(kind).build(dict(args), key=987654321)


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
