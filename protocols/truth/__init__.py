"""Truth inference on sparse crowdsourcing answers under LDP (seed 001)."""

PROTOCOLS: tuple = ()
KINDS: dict = {}
