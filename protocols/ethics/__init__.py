"""Crowd-guided ethical decisions with central and local DP (seed 004)."""

PROTOCOLS: tuple = ()
KINDS: dict = {}
