"""Curator and pool sessions: the message logic of one run, independent of the transport.

Both sessions consume frames (bytes) and produce frames; a *driver* moves the frames, either over
ZeroMQ sockets between processes (``simulator.backends.transport``) or by direct calls in one
process (``simulator.backends.inproc``). Because the logic is the same object in both cases, the
backends differ only in how bytes travel, and must agree bit for bit.

Message flow of one run (``run`` is the run's number on this curator)::

    pool    HELLO(run=-1, round=-1)            "ready" (repeated until set up)
    curator BCAST(run, round=-1, {config})     the run's public configuration
    pool    HELLO(run, round=-1, {agents...})  registers its block of logical agents
    pool    DISCLOSE(run, -1, agent, {...})    colluders only, when the curator colludes
    per round r = 0, 1, ...:
      curator BCAST(run, r, broadcast)         once per pool, if the round has one
      curator QUERY(run, r, agent, query)      one envelope per asked agent, batched
      pool    REPORT(run, r, agent, report)    one envelope per agent, batched
    curator DONE(run, -1, {output})            public release; pool answers DONE with its stats
    curator DONE(run=-1)                       no more runs: the pool exits

Every inbound envelope is validated; anything wrong is dropped with a reason, counted, answered
with an ERROR envelope (up to a cap per peer) and never reaches the estimator.

Where each concern lives:

* ``curator``: the curator's state machine (``CuratorSession``, ``State``).
* ``registration``: the handshake that gives authenticated pools their slots.
* ``ingest``: decoding a frame's reports (``decode_reports`` and its reference,
  ``EnvelopeReader``) and screening them against the round.
* ``rounds``: one round's state and the send window (``Round``, ``WINDOW``); ``roundloop``: the
  rounds one after another (``RoundLoop``: plan, send, screen and store, close, finish).
* ``notices``: a pool's ERROR, DONE and DISCLOSE, taken; ``adversary``: the adversary view.
* ``accounting``: bytes, messages and clocks (``CommStats``, ``Timing``), pools' statistics.
* ``record``: the result record (the curator's, and the one ``results.jsonl`` stores).
* ``network``: the deployment model of a ``[deployment]`` (``DeploymentModel``, built once per
  run) and the round's end in virtual time (``Network.close_round``).
* ``pool``, ``odometer`` and ``agentrows``: the pool's session, its agents' privacy budgets,
  and their rows and coin keys; ``poolsetup`` (its checks of a set-up, its registration),
  ``poolmemory`` (the runs answered, the ledger, the state file), ``querybatches`` (queued
  batches answered at once), ``faults`` (injected faults).
* ``common``: limits, ``RunFailed``, the agent layout (``block_of``).
"""

from ldpsim.simulator.session.accounting import CommStats, Timing, check_stats, zmtp_bytes
from ldpsim.simulator.session.common import (
    MAX_AUTH_FAILURES,
    MAX_PEERS,
    MAX_REASON,
    MAX_REJECTS_PER_FRAME,
    MAX_ROUNDS,
    Bounded,
    Limits,
    RunFailed,
    block_of,
    peak_rss_mb,
)
from ldpsim.simulator.session.curator import CuratorSession, State
from ldpsim.simulator.session.pool import PoolSession
from ldpsim.simulator.session.rounds import WINDOW

__all__ = ["MAX_AUTH_FAILURES", "MAX_PEERS", "MAX_REASON", "MAX_REJECTS_PER_FRAME",
           "MAX_ROUNDS", "WINDOW", "Bounded", "CommStats", "CuratorSession", "Limits",
           "PoolSession", "RunFailed", "State", "Timing", "block_of", "check_stats",
           "peak_rss_mb", "zmtp_bytes"]
