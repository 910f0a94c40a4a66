"""The door: who may open a connection to the curator's TCP endpoint at all.

libzmq holds a whole message (every part) before the application sees its first part, and
queues up to the high-water mark of such messages per connection: a per-frame size limit bounds
neither a message of many parts nor the connections a peer opens. So whatever an outsider may
send once connected, the curator side pays for it before it can refuse it. The door refuses the
connection instead, during the ZMTP handshake: a peer that cannot show the run's door
credential never gets a queue, so its messages take no memory beyond the kernel's socket
buffers, and its connections are closed as soon as the handshake fails.

On a TCP endpoint without enrolled CURVE keys (``simulator.backends.curve``) the door is CurveZMQ
(RFC 26) with key pairs derived from the run's registration key, which every pool holds
(``keys``): the curator's and the pools'. The pools' public key is checked by a ZAP handler
(RFC 27) in a thread of the curator process. CurveZMQ proves the possession of a secret key
without sending it, and encrypts everything after the handshake; so what crosses the network
(the curator's public key, ephemeral keys, ciphertext) opens no door and reads no message: a
network eavesdropper has nothing to replay
(``tests/simulator/backends/test_eavesdropper.py``). The keys are
one-way functions of the registration key (HMAC-SHA-256): holding a door key does not
register a pool (registration answers a fresh nonce with a MAC of the registration key itself).
A holder of the registration key (a pool's machine) passes the door and meets the
message-level hardening behind it.

The door of earlier versions was ZeroMQ's PLAIN mechanism, whose password travels in the clear:
an eavesdropper who read it passed the door and could flood the curator (3.9-5.4x a clean run's
memory, pools locked out by 1,100 HELLOs: ``tests/simulator/backends/test_floods.py``).

With enrolled CURVE keys (``ldpsim keys``, ``[runtime] curve``) those keys are the door. An
``ipc://`` endpoint has the file system's permissions as its door.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass

import zmq
from zmq.utils import z85

#: the ZAP domain of the door
DOMAIN = b"ldpsim"
#: where libzmq asks its ZAP handler (RFC 27: one per context)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


@dataclass(frozen=True)
class DoorKeys:
    """The CurveZMQ key pairs of a registration key (Z85 text, as libzmq takes them)."""

    server_public: bytes
    server_secret: bytes
    pool_public: bytes
    pool_secret: bytes


def _secret(auth: bytes, role: str) -> bytes:
    """A Curve25519 secret key (Z85) for ``role``, derived from the registration key."""
    return z85.encode(hmac.new(auth, b"ldpsim\x1fdoor\x1fcurve\x1f" + role.encode(),
                               hashlib.sha256).digest())


def keys(auth: bytes) -> DoorKeys:
    """The door's key pairs of the registration key ``auth``: the curator's and the pools'."""
    server, pool = _secret(auth, "curator"), _secret(auth, "pool")
    return DoorKeys(zmq.curve_public(server), server, zmq.curve_public(pool), pool)


def server_public(auth: bytes) -> bytes:
    """The curator's public door key (what any connection's handshake shows on the wire)."""
    return keys(auth).server_public


def needs_door(endpoint: str, curve: object = None) -> bool:
    """Whether a connection to ``endpoint`` passes the derived door: on TCP, unless enrolled
    CURVE keys authenticate the connection instead."""
    return endpoint.startswith("tcp://") and not curve


def show(sock: zmq.Socket, auth: bytes) -> None:
    """Make a pool's ``sock`` (before connect) a CurveZMQ client with the pools' door key pair
    of ``auth``, expecting the curator's."""
    k = keys(auth)
    sock.curve_serverkey = k.server_public
    sock.curve_publickey = k.pool_public
    sock.curve_secretkey = k.pool_secret


class Door:
    """A ZAP handler admitting the CurveZMQ connections whose client key is the pools' door key
    of ``auth``, and serving ``sock`` (before bind) as the CurveZMQ server that needs it.

    Its thread binds the handler before the socket binds (a CURVE server without a handler
    would admit every client key).
    """

    def __init__(self, ctx: zmq.Context, sock: zmq.Socket, auth: bytes) -> None:
        self.ctx = ctx
        k = keys(auth)
        self.pool_key = z85.decode(k.pool_public)  # ZAP names the client key in 32 bytes
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="ldpsim-door", daemon=True)
        self._thread.start()
        self._bound.wait()
        if self._error is not None:
            raise self._error
        sock.curve_server = True
        sock.curve_secretkey = k.server_secret
        sock.curve_publickey = k.server_public
        sock.zap_domain = DOMAIN

    def _serve(self) -> None:
        try:
            zap = self.ctx.socket(zmq.REP)
            zap.linger = 0
            zap.bind(ZAP_ENDPOINT)
        except BaseException as e:  # reported by the constructor
            self._error = e
            self._bound.set()
            return
        self._bound.set()
        try:
            while not self._stop.is_set():
                if not zap.poll(100):
                    continue
                zap.send_multipart(self._answer(zap.recv_multipart()))
        except zmq.ZMQError:  # the context is terminating
            pass
        finally:
            zap.close(linger=0)

    def _answer(self, request: list[bytes]) -> list[bytes]:
        """RFC 27: [version, id, domain, address, identity, mechanism, credentials...] ->
        [version, id, status, text, user id, metadata]."""
        rid = request[1] if len(request) > 1 else b""
        ok = (len(request) == 7 and request[0] == b"1.0" and request[5] == b"CURVE"
              and hmac.compare_digest(request[6], self.pool_key))
        if ok:
            return [b"1.0", rid, b"200", b"OK", b"ldpsim-pool", b""]
        return [b"1.0", rid, b"400", b"not a pool's door key", b"", b""]

    def stop(self) -> None:
        """End the handler's thread (before the context terminates)."""
        self._stop.set()
        self._thread.join(2.0)
