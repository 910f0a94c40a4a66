"""Weighted voting under LDP (Yan, Liu & Liu, 2018, "DPWeVote: differentially private weighted
voting protocol for cloud-based decision-making"): DPWeVote and its Laplace baseline."""

from ldpsim.protocols.vote.data import KINDS
from ldpsim.protocols.vote.dpwevote import DPWeVote, DPWeVoteLaplace

PROTOCOLS = (DPWeVote(), DPWeVoteLaplace())

#: A small valid run of this family (data table and params), for generic runtime tests.
EXAMPLE = {"data": {"kind": "weighted_votes", "n": 300, "candidates": 2},
           "params": {"epsilon": 1.5}}

__all__ = ["PROTOCOLS", "KINDS", "EXAMPLE"]
