"""Tests of ``protocols.prf``: SipHash-2-4 against the reference implementation's published test
vectors, and the compiled one-word form against numpy's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim.protocols import prf

from tests.conftest import each_implementation

implementation = each_implementation(prf.SIPHASH)

#: SipHash-2-4 under the key 00 01 .. 0f of the messages (), (00), (00 01), ..., (00 .. 3e),
#: lengths 0-63: the reference implementation's published 64-bit test vectors
#: (``vectors_sip64`` of github.com/veorq/SipHash), each as the bytes it lists
VECTORS = """
310e0edd47db6f72 fd67dc93c539f874 5a4fa9d909806c0d 2d7efbd796666785 b7877127e09427cf
8da699cd64557618 cee3fe586e46c9cb 37d1018bf50002ab 6224939a79f5f593 b0e4a90bdf82009e
f3b9dd94c5bb5d7a a7ad6b22462fb3f4 fbe50e86bc8f1e75 903d84c02756ea14 eef27a8e90ca23f7
e545be4961ca29a1 db9bc2577fcc2a3f 9447be2cf5e99a69 9cd38d96f0b3c14b bd6179a71dc96dbb
98eea21af25cd6be c7673b2eb0cbf2d0 883ea3e395675393 c8ce5ccd8c030ca8 94af49f6c650adb8
eab8858ade92e1bc f315bb5bb835d817 adcf6b0763612e2f a5c91da7acaa4dde 716595876650a2a6
28ef495c53a387ad 42c341d8fa92d832 ce7cf2722f512771 e37859f94623f3a7 381205bb1ab0e012
ae97a10fd434e015 b4a31508beff4d31 81396229f0907902 4d0cf49ee5d4dcca 5c73336a76d8bf9a
d0a704536ba93e0e 925958fcd6420cad a915c29bc8067318 952b79f3bc0aa6d4 f21df2e41d4535f9
87577519048f53a9 10a56cf5dfcd9adb eb75095ccd986cd0 51a9cb9ecba312e6 96afadfc2ce666c7
72fe52975a4364ee 5a1645b276d592a1 b274cb8ebf87870a 6f9bb4203de7b381 eaecb2a30b22a87f
9924a43cc1315724 bd838d3aafbf8db7 0b1a2a3265d51aea 135079a3231ce660 932b2846e4d70666
e1915f5cb1eca46c f325965ca16d629f 575ff28e60381be5 724506eb4c328a95
""".split()

KEY = bytes(range(16))
K0, K1 = (int.from_bytes(KEY[i:i + 8], "little") for i in (0, 8))


def _message_words(length: int) -> np.ndarray:
    """The reference's message of ``length`` bytes (00 01 02 ...) as one row of words."""
    raw = bytes(range(length)) + bytes(-length % 8 or (8 if length == 0 else 0))
    return np.frombuffer(raw, dtype="<u8").reshape(1, -1)


def test_the_published_vectors():
    """All 64 published vectors, message lengths 0-63 (every tail length, up to 8 blocks)."""
    assert len(VECTORS) == 64
    for length, hexed in enumerate(VECTORS):
        want = int.from_bytes(bytes.fromhex(hexed), "little")
        got = prf.siphash24(K0, K1, _message_words(length), length)
        assert int(got[0]) == want, f"length {length}"


def test_prf_is_siphash_of_one_word(implementation):
    """``prf`` (compiled or numpy) is the 8-byte SipHash: the published vector of length 8,
    and the general form on random keys and words, one key per row or one for all."""
    want = int.from_bytes(bytes.fromhex(VECTORS[8]), "little")
    assert int(prf.prf(K0, K1, _message_words(8)[0])[0]) == want
    g = np.random.Generator(np.random.Philox(7))
    n = 40_000  # more than one numpy chunk
    k0, k1, m = (g.integers(0, 2**64, n, dtype=np.uint64, endpoint=False) for _ in range(3))
    ref = prf.siphash24(k0, k1, m[:, None], 8)
    assert np.array_equal(prf.prf(k0, k1, m), ref)
    assert np.array_equal(prf.prf(k0[3], k1[3], m), prf.siphash24(k0[3], k1[3], m[:, None], 8))
    one = prf.prf(k0[5:6], k1[5:6], m[5:6])
    assert one.shape == (1,) and one[0] == ref[5]


def test_prf_refuses_mismatched_keys(implementation):
    with pytest.raises(ValueError, match="one key or one per message"):
        prf.prf(np.zeros(3, np.uint64), np.zeros(3, np.uint64), np.zeros(4, np.uint64))


def test_both_implementations_agree():
    """The compiled form and numpy's give the same bits (where the extension was built)."""
    if prf.SIPHASH.built is None:
        pytest.skip("the compiled SipHash was not built at install (no C compiler)")
    g = np.random.Generator(np.random.Philox(11))
    k0, k1, m = (g.integers(0, 2**64, 5000, dtype=np.uint64, endpoint=False) for _ in range(3))
    before = prf.SIPHASH.use("compiled")
    try:
        a = prf.prf(k0, k1, m)
        prf.SIPHASH.use("numpy")
        b = prf.prf(k0, k1, m)
    finally:
        prf.SIPHASH.use(before)
    assert np.array_equal(a, b)
