"""ldpsim's runtime: processes, transport, wire format, rounds, seeding, accounting, collusion,
scenarios, results, reports and the command line."""

__version__ = "0.1.0"
