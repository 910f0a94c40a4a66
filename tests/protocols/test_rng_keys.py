"""``rng.stream_key`` of many seeds at once and ``rng.stream_keys``: exactly hashlib's BLAKE2b-64
of each seed's decimal text and labels, with the compiled hash (``protocols/_b2c.c``, where the
install built it) and with the hashlib loop."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from ldpsim.protocols import rng
from ldpsim.protocols.keys import run_seed, run_seeds

from tests.conftest import each_implementation

implementation = each_implementation(rng.BLAKE2B)

EDGES = [0, 1, 9, 10, 99, 100, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]
LABELS = [(), ("curator",), ("repeat", 7), ("",), ("", ""), (0,), (-3, "x"),
          ("audit-prior", 12345678901234567890), ("é\x1fz",),
          # messages of about one block and longer: 128 and 129 bytes, several blocks
          ("a" * 107,), ("a" * 108,), ("b" * 400, 5)]


def _reference(seed: int, *labels: str | int) -> int:
    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(seed)).encode())
    for label in labels:
        h.update(b"\x1f" + str(label).encode())
    return int.from_bytes(h.digest(), "little")


def _seeds() -> np.ndarray:
    rand = np.random.default_rng(7).integers(0, 2**64 - 1, 3000, dtype=np.uint64,
                                             endpoint=True)
    small = np.random.default_rng(8).integers(0, 10**6, 500, dtype=np.uint64)
    return np.concatenate([np.array(EDGES, dtype=np.uint64), rand, small])


@pytest.mark.parametrize("labels", LABELS, ids=repr)
def test_many_seeds_are_hashlibs_keys(labels):
    seeds = _seeds()
    got = rng.stream_key(seeds, *labels)
    assert got.dtype == np.uint64 and got.shape == seeds.shape
    assert got.tolist() == [_reference(s, *labels) for s in seeds.tolist()]
    # the per-item path agrees (it is the reference's own code)
    assert [rng.stream_key(s, *labels) for s in EDGES] == got[:len(EDGES)].tolist()


def test_shapes_dtypes_and_stream_keys_stay_what_they_were():
    seeds = _seeds()[:60]
    got = rng.stream_key(seeds.reshape(6, 10), "x")
    assert got.shape == (6, 10) and got.reshape(-1).tolist() == [
        _reference(s, "x") for s in seeds.tolist()]
    sk = rng.stream_key(rng.StreamKeys(seeds), "curator")
    assert isinstance(sk, rng.StreamKeys)
    assert sk.tolist() == [_reference(s, "curator") for s in seeds.tolist()]
    signed = np.array([0, 5, 2**62], dtype=np.int64)
    assert rng.stream_key(signed, "y").tolist() == [_reference(s, "y") for s in signed.tolist()]
    # negative seeds hash their own text ("-5"), as one at a time
    neg = np.array([-5, 3], dtype=np.int64)
    assert rng.stream_key(neg, "y").tolist() == [_reference(-5, "y"), _reference(3, "y")]
    assert rng.stream_key(np.zeros(0, dtype=np.uint64), "z").shape == (0,)


@pytest.mark.parametrize("seed", [0, 20240601, 2**64 - 1, 2**64 + 5, -7])
def test_stream_keys_vary_the_last_label(seed):
    last = np.array([0, 1, 2, 10, 999, 2**63, 2**64 - 1], dtype=np.uint64)
    got = rng.stream_keys(seed, "repeat", last=last)
    assert got.tolist() == [_reference(seed, "repeat", int(i)) for i in last.tolist()]
    assert rng.stream_keys(seed, last=np.arange(5)).tolist() == [
        _reference(seed, i) for i in range(5)]
    with pytest.raises(ValueError, match="non-negative integers"):
        rng.stream_keys(seed, "repeat", last=np.array([1, -1]))


@pytest.mark.parametrize("scenario_seed", [0, 1, 20240601, 2**63 + 11])
def test_run_seeds_are_run_seed(scenario_seed):
    got = run_seeds(scenario_seed, 3, 400)
    assert got.dtype == np.uint64
    assert got.tolist() == [run_seed(scenario_seed, r) for r in range(3, 403)]
    assert run_seeds(scenario_seed, 0, 0).shape == (0,)


def test_the_compiled_hash_refuses_mismatched_buffers(implementation):
    if implementation != "compiled":
        pytest.skip("the compiled hash's own checks")
    with pytest.raises(ValueError, match="as many uint64s"):
        rng.BLAKE2B.module.digest_ints(b"", np.zeros(3, np.uint64), b"", np.zeros(2, np.uint64))
    with pytest.raises(TypeError):
        rng.BLAKE2B.module.digest_ints(b"", np.zeros(3, np.uint64), b"", b"\0" * 24)
