"""The compiled passes of the SAFARI family (OLH's support counts in ``protocols/_prfc.c``,
CALM's maximum-entropy fit and a weight vector's marginals in ``protocols/_safaric.c``) give the
same bits as the numpy code they replace, which stays as the reference (and the fallback)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim.protocols import rng as rngm
from ldpsim.protocols.mechanisms import olh
from ldpsim.protocols.mechanisms.olh import OLH, hash_values
from ldpsim.protocols.safari import calm, metrics, perm


def _both(accelerator, fn):
    """``fn()`` with the compiled implementation and with numpy's: (compiled, numpy)."""
    if accelerator.built is None:
        pytest.skip(f"the compiled {accelerator.what} was not built at install")
    before = accelerator.use("compiled")
    try:
        fast = fn()
        accelerator.use("numpy")
        slow = fn()
    finally:
        accelerator.use(before)
    return fast, slow


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("epsilon", [0.1, math.log(3), 2.0, 10.0, 40.0])
@pytest.mark.parametrize("n, domain", [(0, 5), (1, 1), (7, 13), (500, 24), (1003, 720),
                                       (64, 0), (3, 5041)])
def test_olh_support_counts_compiled_equal_numpy(epsilon, n, domain):
    o = OLH(epsilon)
    gen = rngm.party_generator(n * 1000 + domain)
    seeds = gen.integers(0, 2**32, n)
    # buckets outside [0, g) too: they match nothing in either implementation
    ys = gen.integers(-2, o.g + 2, n)
    fast, slow = _both(olh.SUPPORT, lambda: o.support_counts(seeds, ys, domain))
    assert _same_bits(fast, slow)
    h = (np.stack([hash_values(seeds, np.full(n, v), o.g) for v in range(domain)], axis=1)
         if n and domain else np.zeros((n, domain), dtype=np.int64))
    assert fast.tolist() == (h == ys[:, None]).sum(axis=0).tolist()


def test_olh_support_counts_at_the_edges_of_the_buckets():
    """Seeds and values whose hash lands on the first or last 32-bit input of a bucket: the
    compiled range test agrees with the multiply-high at every boundary."""
    o = OLH(math.log(3))
    gen = rngm.party_generator(11)
    seeds = gen.integers(0, 2**32, 4000)
    values = np.arange(50)
    h = hash_values(seeds[:, None], values[None, :], o.g)
    for shift in (-1, 0, 1):
        ys = np.clip(h[:, 0] + shift, -1, o.g)
        fast, slow = _both(olh.SUPPORT, lambda ys=ys: o.support_counts(seeds, ys, len(values)))
        assert _same_bits(fast, slow)


@pytest.mark.parametrize("d", [3, 4, 5, 6, 7])
@pytest.mark.parametrize("noise", [0.0, 0.01, 0.2])
def test_maxent_rankings_compiled_equal_numpy(d, noise):
    """The same distribution, bit for bit, and the same collapse verdict (large noise makes the
    projected marginals' zero cells cover every ranking)."""
    pos = perm.all_positions(d)
    gen = rngm.party_generator(d * 100 + int(noise * 100))
    f0 = gen.random(len(pos)) ** 3
    f0 /= f0.sum()
    _, q2 = metrics.distribution_marginals(f0, pos)
    joints = calm.make_consistent(q2 + gen.normal(0.0, noise, q2.shape)) if noise else q2
    for iters in (1, 20):
        (fa, ca), (fb, cb) = _both(perm.RANKINGS,
                                   lambda it=iters: calm.maxent_rankings(joints, pos, it))
        assert ca == cb and _same_bits(fa, fb)


@pytest.mark.parametrize("d", [2, 3, 5, 7])
def test_distribution_marginals_compiled_equal_numpy(d):
    pos = perm.all_positions(d)
    f = rngm.party_generator(d).normal(0.0, 1.0, len(pos))  # signed, as a raw estimate
    (q1a, q2a), (q1b, q2b) = _both(perm.RANKINGS,
                                   lambda: metrics.distribution_marginals(f, pos))
    assert _same_bits(q1a, q1b) and _same_bits(q2a, q2b)


def test_all_positions_shared_is_all_positions_read_only():
    for k in (1, 4, 6, 4):
        shared = perm.all_positions_shared(k)
        assert _same_bits(shared, perm.all_positions(k)) and not shared.flags.writeable
        assert perm.all_positions_shared(k) is shared


def test_read_jester_reads_a_file_and_again_when_it_changes(tmp_path):
    from ldpsim.protocols.safari import data

    f = tmp_path / "jester.csv"
    f.write_text("userId,jokeId,rating\n1,5,2.0\n1,7,-1.5\n2,5,0.5\n2,7,3.0\n3,5,1.0\n")
    first = data.read_jester(str(f), 2)
    assert first[0].tolist() == [[0, 1], [1, 0]] and first[1] == [5, 7]
    first[0][0, 0] = 9  # the caller's copy: the next read is unchanged
    assert data.read_jester(str(f), 2)[0].tolist() == [[0, 1], [1, 0]]
    f.write_text("userId,jokeId,rating\n1,5,2.0\n1,7,-1.5\n2,5,0.5\n2,7,3.0\n3,5,1.0\n3,7,9.5\n")
    assert data.read_jester(str(f), 2)[0].tolist() == [[0, 1], [1, 0], [1, 0]]


@pytest.mark.parametrize("d", [3, 4, 7, 8, 9, 10])
def test_ipf_triple_compiled_equal_numpy(d):
    """Every sweep's sums (numpy's pairwise sum along the contiguous axis from 8 terms on),
    quotients and products as numpy makes them: the same table bit for bit, from consistent
    marginals (it converges) and from noisy ones (it runs all sweeps, or loses its mass)."""
    gen = rngm.party_generator(d)
    idx = np.arange(d)
    valid = ((idx[:, None, None] != idx[None, :, None]) & (idx[:, None, None] != idx[None, None, :])
             & (idx[None, :, None] != idx[None, None, :]))
    for trial in range(6):
        t0 = gen.random((d, d, d)) ** (1 + trial) * valid
        t0 /= t0.sum()
        margs = [t0.sum(axis=2), t0.sum(axis=1), t0.sum(axis=0)]
        if trial % 2:
            margs = [np.clip(m + gen.normal(0.0, 0.3 / d**2, m.shape), 0.0, None) for m in margs]
        if trial == 5:
            margs[0][0, :] = 0.0  # zero cells: the fit drops mass
        for iters, tol in ((1, 1e-9), (500, 1e-9), (50, 0.0)):
            fast, slow = _both(perm.RANKINGS,
                               lambda it=iters, tl=tol, m=margs: calm.ipf_triple(*m, it, tl))
            assert _same_bits(fast, slow), (trial, iters)
    s3 = _both(perm.RANKINGS, lambda: calm.s3_from_joints(
        metrics.distribution_marginals(np.full(math.factorial(min(d, 6)), 1.0),
                                       perm.all_positions(min(d, 6)))[1], 30))
    assert _same_bits(*s3)


@pytest.mark.parametrize("n", [1, 2, 8, 4096, 8192, 1 << 15])
def test_fwht_compiled_equal_numpy(n):
    """In place and cache-blocked, the same sums and differences as numpy's level by level."""
    from ldpsim.protocols.mechanisms import hadamard

    a = rngm.party_generator(n).normal(0.0, 1.0, n) * 10.0 ** rngm.party_generator(1).integers(
        -8, 8, n)
    fast, slow = _both(hadamard.FWHT, lambda: hadamard.fwht(a))
    assert _same_bits(fast, slow)
    assert _same_bits(a, rngm.party_generator(n).normal(0.0, 1.0, n) * 10.0 ** rngm.party_generator(
        1).integers(-8, 8, n))  # the input is not changed


def test_sushi_subset_parses_a_file_once_and_again_when_it_changes(tmp_path):
    from ldpsim.protocols.safari import data

    f = tmp_path / "s.order"
    f.write_text("4 1\n0 4 3 1 0 2\n0 4 0 1 2 3\n")
    first = data._sushi_subset(None, str(f), 3)
    assert first.table.tolist() == [[1, 0, 2], [0, 1, 2]]
    assert data._sushi_subset(None, str(f), 3).table.tolist() == first.table.tolist()
    f.write_text("4 1\n0 4 3 1 0 2\n0 4 0 1 2 3\n0 4 2 1 0 3\n")
    assert data._sushi_subset(None, str(f), 3).table.tolist() == [[1, 0, 2], [0, 1, 2], [2, 1, 0]]
