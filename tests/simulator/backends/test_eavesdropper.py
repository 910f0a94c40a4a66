"""What a network eavesdropper records of a run over TCP, and what it is worth (issue 47).

A recording relay sits between the pools and the curator's TCP endpoint, as a machine on the
path would: it forwards every byte both ways and keeps a copy. From the copy, the eavesdropper
must learn no credential that opens the door (PLAIN sent the door's password in the clear)
and none of the run's messages (the registration, the queries, the reports).
"""

from __future__ import annotations

import hashlib
import hmac
import multiprocessing as mp
import socket
import threading

import msgpack
from ldpsim.simulator.backends.transport import _pool_child, run_processes
from ldpsim.simulator.session import Limits

from tests import drivers
from tests.conftest import free_port

LIMITS = Limits(timeout_s=20.0)


class Relay:
    """Forward connections to ``127.0.0.1:listen`` on to ``127.0.0.1:target``, keeping every
    byte of both directions in ``recorded``."""

    def __init__(self, listen: int, target: int) -> None:
        self.target = target
        self.recorded = bytearray()
        self._lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", listen))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the curator has not bound yet: the pool connects again
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(1 << 16):
                with self._lock:
                    self.recorded += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def _config() -> dict:
    return {"protocol": "ldp_kwiksort_rr", "params": {"epsilon": 1.0, "queries": 2},
            "data": {"kind": "mallows", "n": 3000, "m": 10, "theta": 0.5}, "seed": 5,
            "pools": 2, "agent_mode": "batched", "batch": 2048,
            "collusion": {"colluders": 0, "curator": True}, "faults": []}


def _recorded_run() -> tuple[dict, bytes]:
    """A run whose pools reach the curator's TCP endpoint through a ``Relay``."""
    cfg = _config()
    port, relay_port = free_port(), free_port()
    relay = Relay(relay_port, port)
    parties = drivers.parties(cfg)
    ctx = mp.get_context("fork")
    pools = [ctx.Process(target=_pool_child, args=(
        f"tcp://127.0.0.1:{relay_port}", i, 2, drivers.AUTH, LIMITS, parties.pools[i]))
        for i in range(2)]
    for p in pools:
        p.start()
    try:
        res = run_processes(cfg, LIMITS, endpoint=f"tcp://127.0.0.1:{port}",
                            spawn_pools=False, parties=parties)
    finally:
        for p in pools:
            p.join(10)
            if p.is_alive():
                p.kill()
        relay.close()
    return res, bytes(relay.recorded)


def test_attack_an_eavesdropper_records_no_credential_and_no_message():
    res, recorded = _recorded_run()
    assert res["pools_registered"] == 2 and res["dropouts"] == 0  # the relay carried the run
    assert len(recorded) > 3000  # every report went through it
    # the PLAIN door's password, as its handshake sent it
    plain = hmac.new(drivers.AUTH, b"ldpsim\x1fdoor", hashlib.sha256).hexdigest().encode()
    assert plain not in recorded
    assert drivers.AUTH not in recorded
    # no message is readable: the pools' hello names its pool count in a msgpack map
    assert msgpack.packb("pools") not in recorded
    assert b"ldpsim-pool" not in recorded
