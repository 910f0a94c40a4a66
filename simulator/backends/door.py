"""The door: who may open a connection to the curator's TCP endpoint at all.

libzmq holds a whole message (every part) before the application sees its first part, and
queues up to the high-water mark of such messages per connection: a per-frame size limit bounds
neither a message of many parts nor the connections a peer opens. So whatever an outsider may
send once connected, the curator side pays for it before it can refuse it. The door refuses the
connection instead, during the ZMTP handshake: a peer that cannot show the run's door
credential never gets a queue, so its messages take no memory beyond the kernel's socket
buffers, and its connections are closed as soon as the handshake fails.

On a TCP endpoint without CURVE the door is ZeroMQ's PLAIN mechanism, checked by a ZAP handler
(RFC 27) in a thread of the curator process: the user name ``USER`` and a password derived from
the run's registration key (``password``), which every pool holds. The password is a one-way
function of that key (HMAC-SHA-256): PLAIN sends it in the clear, so a network eavesdropper who
reads it can pass the door, but learns nothing that registers a pool (registration answers a
fresh nonce with a MAC of the key itself), and meets the message-level hardening behind the
door. With CURVE (``simulator.backends.curve``) the enrolled keys are the door, and the traffic is
encrypted. An ``ipc://`` endpoint has the file system's permissions as its door.
"""

from __future__ import annotations

import hashlib
import hmac
import threading

import zmq

#: the user name every pool shows at the door
USER = b"ldpsim-pool"
#: where libzmq asks its ZAP handler (RFC 27: one per context)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


def password(auth: bytes) -> bytes:
    """The door credential of the registration key ``auth``: 64 hex characters."""
    return hmac.new(auth, b"ldpsim\x1fdoor", hashlib.sha256).hexdigest().encode("ascii")


def needs_door(endpoint: str, curve: object = None) -> bool:
    """Whether a connection to ``endpoint`` passes the PLAIN door: on TCP, unless CURVE
    authenticates the connection instead."""
    return endpoint.startswith("tcp://") and not curve


def show(sock: zmq.Socket, auth: bytes) -> None:
    """Make a pool's ``sock`` (before connect) show the door credential of ``auth``."""
    sock.plain_username = USER
    sock.plain_password = password(auth)


class Door:
    """A ZAP handler admitting the connections that show ``password(auth)`` under PLAIN, and
    serving ``sock`` (before bind) as a PLAIN server that needs it.

    Its thread binds the handler before the socket binds (a PLAIN server without a handler
    would admit everyone).
    """

    def __init__(self, ctx: zmq.Context, sock: zmq.Socket, auth: bytes) -> None:
        self.ctx = ctx
        self.secret = password(auth)
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="ldpsim-door", daemon=True)
        self._thread.start()
        self._bound.wait()
        if self._error is not None:
            raise self._error
        sock.plain_server = True
        sock.zap_domain = b"ldpsim"

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
        ok = (len(request) == 8 and request[0] == b"1.0" and request[5] == b"PLAIN"
              and request[6] == USER and hmac.compare_digest(request[7], self.secret))
        if ok:
            return [b"1.0", rid, b"200", b"OK", USER, b""]
        return [b"1.0", rid, b"400", b"no door credential", b"", b""]

    def stop(self) -> None:
        """End the handler's thread (before the context terminates)."""
        self._stop.set()
        self._thread.join(2.0)
