"""Credentials and TLS trust for the client's HTTP connections.

``token="<user>:<secret>"`` sends ``Authorization: Bearer`` on every
request; ``user=`` and ``secret=`` sign every request instead (the secret
never travels; see :mod:`broker_api.auth.signature` for the wire format);
``ca_file`` is the PEM bundle that signed the servers' certificates.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Generator
from typing import Any

import httpx

from ..auth.signature import Credentials, signed_headers

__all__ = ["HmacAuth", "http_options", "trust"]


class HmacAuth(httpx.Auth):
    """Signs each request with ``SPARKMQ-HMAC-SHA256`` (body, path, query and the time)."""

    requires_request_body = True

    def __init__(self, user: str, secret: str) -> None:
        self._user, self._secret = user, secret

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        headers = signed_headers(self._user, self._secret, request.method, request.url.path,
                                 request.url.query.decode("ascii"), request.content, int(time.time() * 1000))
        request.headers.update(headers)
        yield request


def http_options(token: str | None = None, user: str | None = None, secret: str | None = None,
                 ca_file: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``httpx.Client`` that carry these credentials and trust ``ca_file``.

    Raises ValueError for a malformed token or a user without a secret.
    """
    credentials = Credentials(token or None, user or None, secret or None)
    options: dict[str, Any] = {}
    if credentials.token:
        options["headers"] = {"Authorization": f"Bearer {credentials.token.strip()}"}
    elif credentials.user and credentials.secret:
        options["auth"] = HmacAuth(credentials.user, credentials.secret)
    if ca_file:
        options["verify"] = trust(ca_file)
    return options


def trust(ca_file: str) -> ssl.SSLContext:
    """An SSL context that trusts the CAs of ``ca_file`` (raises OSError/SSLError if it is unreadable)."""
    return ssl.create_default_context(cafile=ca_file)
