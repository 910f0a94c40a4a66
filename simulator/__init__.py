"""ldpsim's runtime: processes, transport, wire format, rounds, seeding, accounting, collusion,
scenarios, results, reports and the command line."""

from ldpsim import __version__  # noqa: F401 - one version, re-exported
