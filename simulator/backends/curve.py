"""CURVE authentication and encryption for the hosts backend (ZeroMQ's CurveZMQ).

``ldpsim keys DIR --pools P`` creates a key pair for the curator and one per pool::

    DIR/server.key            curator public key   -> copy to every pool machine
    DIR/server.key_secret     curator secret key   (stays with the curator)
    DIR/clients/pool-I.key    pool I's public key  (the enrolment list the curator checks)
    DIR/pool-I.key_secret     pool I's secret key  -> copy to pool I's machine only

The curator (``[runtime] curve = "DIR"`` or ``ldpsim curator --curve DIR``) then accepts
connections only from pools whose public key is in ``DIR/clients`` (checked by a ZAP
authenticator thread), and all traffic is encrypted. A pool connects with
``ldpsim agents --curve-key DIR/pool-I.key_secret --curve-server DIR/server.key``. Remove a
pool's ``.key`` from ``DIR/clients`` to revoke it from the next run on: the curator re-reads the
list at every run and drops messages whose connection authenticated with a key no longer in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import zmq
import zmq.auth

if TYPE_CHECKING:  # the authenticator thread's module imports asyncio: only with CURVE on
    from zmq.auth.thread import ThreadAuthenticator


class CurveError(ValueError):
    """Missing or unreadable CURVE key files."""


def make_keys(directory: str | Path, pools: int) -> list[Path]:
    """Create the curator's key pair and one per pool; return the files written."""
    if not zmq.has("curve"):
        raise CurveError("this libzmq has no CURVE support")
    d = Path(directory)
    clients = d / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    written = list(map(Path, zmq.auth.create_certificates(d, "server")))
    for i in range(pools):
        pub, sec = map(Path, zmq.auth.create_certificates(d, f"pool-{i}"))
        written.append(pub.replace(clients / pub.name))
        written.append(sec)
    return written


def _load(path: str | Path, secret: bool) -> tuple[bytes, bytes | None]:
    p = Path(path)
    if not p.is_file():
        raise CurveError(f"CURVE key file not found: {str(p)!r}")
    try:
        public, sec = zmq.auth.load_certificate(p)
    except Exception as e:  # malformed certificate
        raise CurveError(f"not a CURVE key file: {str(p)!r} ({e})") from None
    if secret and sec is None:
        raise CurveError(f"{str(p)!r} holds no secret key (use the .key_secret file)")
    return public, sec


def check_dir(directory: str | Path) -> None:
    """Raise CurveError unless ``directory`` holds a curator secret key and an enrolment list."""
    d = Path(directory)
    _load(d / "server.key_secret", secret=True)
    if not (d / "clients").is_dir() or not any((d / "clients").glob("*.key")):
        raise CurveError(f"no enrolled pool keys in {str(d / 'clients')!r} (run ldpsim keys)")


def serve_curve(ctx: zmq.Context, sock: zmq.Socket, directory: str | Path) -> ThreadAuthenticator:
    """Make ``sock`` (before bind) a CURVE server accepting only the enrolled pools' keys."""
    d = Path(directory)
    check_dir(d)
    public, secret = _load(d / "server.key_secret", secret=True)
    from zmq.auth.thread import ThreadAuthenticator

    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=str(d / "clients"))
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_server = True
    return auth


def connect_curve(sock: zmq.Socket, key_secret: str | Path, server_key: str | Path) -> None:
    """Make ``sock`` (before connect) a CURVE client with this pool's keys."""
    public, secret = _load(key_secret, secret=True)
    server_public, _ = _load(server_key, secret=False)
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_serverkey = server_public
