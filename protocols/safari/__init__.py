"""Preference-ranking collection under LDP (seed 003): SAFARI and full-domain baselines."""

PROTOCOLS: tuple = ()
KINDS: dict = {}
