"""HMAC-signed requests (options ``user`` and ``secret``) for httpx; see :mod:`streaming.auth`."""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from collections.abc import Generator

import httpx

__all__ = ["Signer"]

_ALGORITHM = "SPARKMQ-HMAC-SHA256"


@functools.lru_cache(maxsize=16)
def _key(user: str, secret: str) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), f"sparkmq:{user}".encode(), 100_000, 32)


class Signer(httpx.Auth):
    requires_request_body = True

    def __init__(self, user: str, secret: str) -> None:
        self._user, self._secret = user, secret

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        date = str(int(time.time() * 1000))
        content = hashlib.sha256(request.content).hexdigest()
        canonical = "\n".join((_ALGORITHM, request.method.upper(), request.url.path,
                               request.url.query.decode("ascii"), date, content)).encode()
        signature = hmac.new(_key(self._user, self._secret), canonical, hashlib.sha256).hexdigest()
        request.headers["Authorization"] = f"{_ALGORITHM} Credential={self._user}, Signature={signature}"
        request.headers["x-sparkmq-date"] = date
        request.headers["x-sparkmq-content-sha256"] = content
        yield request
