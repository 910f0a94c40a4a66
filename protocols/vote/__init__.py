"""Weighted voting under LDP (seed 002): DPWeVote and its Laplace baseline."""

PROTOCOLS: tuple = ()
KINDS: dict = {}
