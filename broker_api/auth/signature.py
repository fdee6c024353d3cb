"""Credentials on the wire: bearer tokens and HMAC-signed requests.

A user has a name and a random secret.  The broker keeps only the user's
*key*, a slow hash of the secret, never the secret itself::

    key = PBKDF2-HMAC-SHA256(secret, salt = "sparkmq:" + user, 100 000 rounds, 32 bytes)

A request proves who sent it in one of two ways:

* **Bearer token** -- ``Authorization: Bearer <user>:<secret>``.  The broker
  hashes the secret once and remembers the verified token (its SHA-256, not
  the token) until the users file changes.  Use it over TLS only: the token is
  the secret.
* **HMAC signature** -- the secret never travels.  Three headers::

      Authorization: SPARKMQ-HMAC-SHA256 Credential=<user>, Signature=<hex>
      X-Sparkmq-Date: <unix time in milliseconds>
      X-Sparkmq-Content-Sha256: <hex SHA-256 of the body; of b"" when there is none>

  where ``Signature = hex(HMAC-SHA256(key, canonical))`` and ``canonical`` is
  six lines joined by ``\\n``::

      SPARKMQ-HMAC-SHA256
      <METHOD, upper case>
      <path, percent-decoded, e.g. /v1/topics/orders/messages>
      <query string exactly as sent, without '?', e.g. offset=0&max_messages=32>
      <the X-Sparkmq-Date value>
      <the X-Sparkmq-Content-Sha256 value>

  The broker refuses a date more than ``[auth] max_clock_skew_s`` away from
  its clock and a body whose SHA-256 differs from the signed one.  A captured
  request can be replayed within the skew window (as in RocketMQ's ACL, which
  signs no time at all); TLS prevents the capture.

This module has no web framework in it: the Python client, the CLI and the
servers share it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = [
    "ALGORITHM",
    "CONTENT_HEADER",
    "DATE_HEADER",
    "Credentials",
    "canonical_request",
    "derive_key",
    "new_secret",
    "parse_token",
    "sign",
    "signed_headers",
]

ALGORITHM = "SPARKMQ-HMAC-SHA256"
DATE_HEADER = "x-sparkmq-date"
CONTENT_HEADER = "x-sparkmq-content-sha256"
KDF_ROUNDS = 100_000
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Credentials:
    """What a client presents: a bearer ``token`` or a ``user`` and ``secret`` that sign."""

    token: str | None = None
    user: str | None = None
    secret: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and (self.user or self.secret):
            raise ValueError("give either a token or a user and secret, not both")
        if bool(self.user) != bool(self.secret):
            raise ValueError("HMAC signing needs both a user and a secret")
        if self.token is not None:
            parse_token(self.token)

    @property
    def empty(self) -> bool:
        return not self.token and not self.user


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe base64)."""
    return secrets.token_urlsafe(32)


@functools.lru_cache(maxsize=256)
def derive_key(user: str, secret: str) -> bytes:
    """The slow hash of ``secret`` the broker stores, and the HMAC signing key."""
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), f"sparkmq:{user}".encode(), KDF_ROUNDS, 32)


@functools.lru_cache(maxsize=256)
def derive_key_sha512(user: str, secret: str) -> bytes:
    """The same slow hash with SHA-512 (64 bytes): SCRAM-SHA-512's SaltedPassword on the Kafka port."""
    return hashlib.pbkdf2_hmac("sha512", secret.encode(), f"sparkmq:{user}".encode(), KDF_ROUNDS, 64)


def parse_token(token: str) -> tuple[str, str]:
    """``"<user>:<secret>"`` -> (user, secret); raises ValueError on any other shape."""
    user, sep, secret = token.strip().partition(":")
    if not sep or not user or not secret:
        raise ValueError("a token has the form <user>:<secret> (as `sparkmq user add` prints it)")
    return user, secret


def canonical_request(method: str, path: str, query: str, date: str, content_sha256: str) -> bytes:
    """The six signed lines (see the module docstring)."""
    return "\n".join((ALGORITHM, method.upper(), path, query, date, content_sha256)).encode()


def sign(key: bytes, canonical: bytes) -> str:
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def signed_headers(user: str, secret: str, method: str, path: str, query: str, body: bytes,
                   now_ms: int) -> dict[str, str]:
    """The three headers that sign one request."""
    date = str(now_ms)
    content = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
    signature = sign(derive_key(user, secret), canonical_request(method, path, query, date, content))
    return {"Authorization": f"{ALGORITHM} Credential={user}, Signature={signature}",
            DATE_HEADER: date, CONTENT_HEADER: content}
