"""The HA link's handshake: TLS (optional) and a mutual HMAC challenge keyed by a cluster secret.

Runs once per connection, before a single byte of the log is sent.  The slave
speaks first, so a peer that does not know the protocol gets nothing back::

    slave -> master   HELLO: magic b"SMQHA\\x00\\x01\\x00" (8) | slave nonce (32)
    master -> slave   master nonce (32) | HMAC(secret, "master" | ns | nm) (32)
    slave -> master   HMAC(secret, "slave" | ns | nm) (32)
    master -> slave   b"OK" (2), then the classic stream (see store.ha.protocol)

A wrong magic, a wrong proof or ``timeout_s`` of silence closes the
connection at once; the master counts the refusal by reason
(:attr:`HAService.refused`).  The slave checks the master's proof too, so it
never writes a stream from a peer that does not know the secret.  With
``server_ssl``/``client_ssl`` the whole connection (handshake included) runs
over TLS; the slave verifies the master's certificate with ``client_ssl``.

Without a secret (``HASecurity.secret`` empty) the handshake is skipped and
the link is the classic one: only for brokers whose HA port no one else can
reach.  The broker refuses that combination when ``[auth]`` is on.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import select
import socket
import ssl
import threading
from dataclasses import dataclass

__all__ = ["HASecurity", "HandshakeError", "LockedSocket", "master_handshake", "slave_handshake", "readable"]

MAGIC = b"SMQHA\x00\x01\x00"
_NONCE = 32
_MAC = 32
_OK = b"OK"


class HandshakeError(ConnectionError):
    """Raised when an HA peer does not prove it knows the cluster secret (``reason`` says how)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class HASecurity:
    """What the HA link needs to authenticate and encrypt: a secret, TLS contexts, a deadline."""

    secret: bytes = b""
    server_ssl: ssl.SSLContext | None = None  # master: wraps accepted sockets
    client_ssl: ssl.SSLContext | None = None  # slave: wraps its connection, verifies the master
    timeout_s: float = 5.0
    refuse_all: bool = False  # master: refuse every peer (the broker sets it for auth on and no secret)

    @property
    def authenticated(self) -> bool:
        return bool(self.secret)


def _mac(secret: bytes, role: bytes, ns: bytes, nm: bytes) -> bytes:
    return hmac.new(secret, role + b"|" + ns + nm, hashlib.sha256).digest()


def _read_exact(sock: socket.socket, n: int, what: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            data = sock.recv(n - len(buf))
        except TimeoutError as exc:
            raise HandshakeError("timeout", f"no {what} within the handshake deadline") from exc
        except (OSError, ssl.SSLError) as exc:
            raise HandshakeError("tls" if isinstance(exc, ssl.SSLError) else "io", f"reading {what}: {exc}") from exc
        if not data:
            raise HandshakeError("closed", f"the peer closed the connection before its {what}")
        buf += data
    return bytes(buf)


def _wrap(sock: socket.socket, ctx: ssl.SSLContext, server_side: bool, host: str | None) -> socket.socket:
    try:
        return ctx.wrap_socket(sock, server_side=server_side, server_hostname=None if server_side else host)
    except (OSError, ssl.SSLError) as exc:
        raise HandshakeError("tls", f"TLS handshake failed: {exc}") from exc


def master_handshake(sock: socket.socket, security: HASecurity) -> socket.socket:
    """Authenticate an accepted slave; the (maybe TLS-wrapped) socket, blocking.  Raises HandshakeError."""
    sock.settimeout(security.timeout_s)
    if security.server_ssl is not None:
        sock = _wrap(sock, security.server_ssl, True, None)
    if security.refuse_all:
        raise HandshakeError("no_secret", "this master has no [ha] secret while [auth] is enabled: it refuses "
                                          "every slave")
    if not security.authenticated:
        sock.settimeout(None)
        return sock
    hello = _read_exact(sock, len(MAGIC) + _NONCE, "hello")
    if not hmac.compare_digest(hello[:len(MAGIC)], MAGIC):
        raise HandshakeError("bad_hello", "the peer did not open with the HA handshake (an old slave, or not a slave)")
    ns, nm = hello[len(MAGIC):], os.urandom(_NONCE)
    sock.sendall(nm + _mac(security.secret, b"master", ns, nm))
    proof = _read_exact(sock, _MAC, "proof")
    if not hmac.compare_digest(proof, _mac(security.secret, b"slave", ns, nm)):
        raise HandshakeError("bad_secret", "the slave's proof does not match this master's [ha] secret")
    sock.sendall(_OK)
    sock.settimeout(None)
    return sock


def slave_handshake(sock: socket.socket, security: HASecurity, host: str) -> socket.socket:
    """Prove this slave to the master at ``host`` and check the master's proof.  Raises HandshakeError."""
    sock.settimeout(security.timeout_s)
    if security.client_ssl is not None:
        sock = _wrap(sock, security.client_ssl, False, host)
    if not security.authenticated:
        sock.settimeout(None)
        return sock
    ns = os.urandom(_NONCE)
    sock.sendall(MAGIC + ns)
    answer = _read_exact(sock, _NONCE + _MAC, "challenge")
    nm = answer[:_NONCE]
    sock.sendall(_mac(security.secret, b"slave", ns, nm))  # first, so a master with another secret counts it
    if not hmac.compare_digest(answer[_NONCE:], _mac(security.secret, b"master", ns, nm)):
        raise HandshakeError("bad_secret", "the master's proof does not match this slave's [ha] secret")
    if _read_exact(sock, len(_OK), "acceptance") != _OK:
        raise HandshakeError("refused", "the master did not accept this slave")
    sock.settimeout(None)
    return sock


def readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``recv`` will not block: bytes TLS already decrypted count (select cannot see them)."""
    if isinstance(sock, (ssl.SSLSocket, LockedSocket)) and sock.pending():
        return True
    return bool(select.select([sock], [], [], timeout_s)[0])


class LockedSocket:
    """A TLS socket shared by the master's reader and writer threads: one OpenSSL call at a time."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock, self._lock = sock, threading.Lock()

    def fileno(self) -> int:
        return self._sock.fileno()

    def pending(self) -> int:
        with self._lock:
            return self._sock.pending()

    def recv(self, n: int) -> bytes:
        with self._lock:
            return self._sock.recv(n)

    def sendall(self, data: bytes) -> None:
        with self._lock:
            self._sock.sendall(data)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()


def for_threads(sock: socket.socket) -> socket.socket:
    """``sock``, or a :class:`LockedSocket` around it when it is a TLS socket."""
    return LockedSocket(sock) if isinstance(sock, ssl.SSLSocket) else sock  # type: ignore[return-value]
