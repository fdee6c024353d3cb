"""Who sent a request (authentication) and whether they may (authorization).

No web framework here: the ASGI middleware (:mod:`broker_api.http.auth`)
hands in the method, path, query and headers.  Bearer tokens cost one slow
hash the first time and a dictionary look-up after that (the verified
token's SHA-256 is remembered until the users file changes); HMAC requests
cost one HMAC-SHA256.  Every comparison of secrets is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..errors import AccessDeniedError, UnauthenticatedError
from .policy import decide
from .signature import ALGORITHM, CONTENT_HEADER, DATE_HEADER, canonical_request, derive_key, parse_token, sign
from .users import AuthSnapshot, User, UserStore

__all__ = ["Authenticator", "Principal", "Permission"]

Permission = tuple[str, str]  # (resource "Type:name", action)
_CACHE_MAX = 10_000


@dataclass(frozen=True)
class Principal:
    """An authenticated user."""

    user: str
    super: bool = False


class Authenticator:
    """Checks credentials against a :class:`UserStore` and permissions against its policies."""

    def __init__(self, store: UserStore, max_clock_skew_s: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._skew_ms = max_clock_skew_s * 1000
        self._clock = clock
        self._tokens: dict[bytes, str] = {}
        self._version = -1

    def _current(self, fresh: bool = False) -> AuthSnapshot:
        snap = self.store.snapshot(fresh)
        if snap.version != self._version:  # users or policies changed: forget verified tokens
            self._tokens = {}
            self._version = snap.version
        return snap

    # -- authentication ----------------------------------------------------

    def cached(self, authorization: str) -> Principal | None:
        """The principal of a bearer token verified before (still valid), else None."""
        if not authorization.startswith("Bearer "):
            return None
        snap = self._current()
        name = self._tokens.get(hashlib.sha256(authorization.encode()).digest())
        user = snap.users.get(name) if name is not None else None
        return Principal(user.name, user.super) if user is not None and user.enabled else None

    def authenticate(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> Principal:
        """The sender of a request; raises UnauthenticatedError (401) saying what is missing or wrong."""
        authorization = headers.get("authorization", "")
        if not authorization:
            raise UnauthenticatedError(
                "this broker requires credentials: send 'Authorization: Bearer <user>:<secret>' or an HMAC "
                "signature (pass --token / SPARKMQ_TOKEN to the CLI, token= to the client)")
        scheme, _, rest = authorization.partition(" ")
        if scheme == "Bearer":
            return self._bearer(authorization, rest.strip())
        if scheme == ALGORITHM:
            return self._signed(method, path, query, headers, rest)
        raise UnauthenticatedError(f"authorization scheme {scheme!r} is not supported; use Bearer or {ALGORITHM}")

    def _bearer(self, authorization: str, token: str) -> Principal:
        found = self.cached(authorization)
        if found is not None:
            return found
        try:
            name, secret = parse_token(token)
        except ValueError as exc:
            raise UnauthenticatedError(f"bad bearer token: {exc}") from exc
        user = self._user(name)
        if not hmac.compare_digest(derive_key(name, secret), user.key):
            raise UnauthenticatedError(f"wrong secret for user {name!r}")
        if len(self._tokens) >= _CACHE_MAX:
            self._tokens.clear()
        self._tokens[hashlib.sha256(authorization.encode()).digest()] = name
        return Principal(name, user.super)

    def _signed(self, method: str, path: str, query: str, headers: Mapping[str, str], rest: str) -> Principal:
        fields = dict(part.strip().partition("=")[::2] for part in rest.split(","))
        name, signature = fields.get("Credential", ""), fields.get("Signature", "")
        date, content = headers.get(DATE_HEADER, ""), headers.get(CONTENT_HEADER, "")
        if not name or not signature or not date.isdigit() or len(content) != 64:
            raise UnauthenticatedError(
                f"an {ALGORITHM} request needs 'Credential=<user>, Signature=<hex>' and the headers "
                f"{DATE_HEADER} (unix ms) and {CONTENT_HEADER} (hex SHA-256 of the body)")
        skew = abs(self._clock() * 1000 - int(date))
        if skew > self._skew_ms:
            raise UnauthenticatedError(
                f"{DATE_HEADER} is {skew / 1000:.0f} s away from the broker's clock (at most "
                f"{self._skew_ms / 1000:.0f} s allowed); check the client's clock")
        user = self._user(name)
        expected = sign(user.key, canonical_request(method, path, query, date, content))
        if not hmac.compare_digest(expected, signature):
            raise UnauthenticatedError(f"the signature of user {name!r} does not match the request")
        return Principal(name, user.super)

    def _user(self, name: str) -> User:
        user = self._current().users.get(name)
        if user is None or not user.enabled:
            raise UnauthenticatedError(f"unknown or disabled user {name!r}")
        return user

    # -- authorization -----------------------------------------------------

    def recheck(self, principal: Principal, needs: Iterable[Permission]) -> None:
        """Against the current users and policies: 401 when the user was removed or disabled since
        ``principal`` was authenticated, 403 when a permission was revoked (a parked long poll wakes)."""
        user = self._current(fresh=True).users.get(principal.user)  # the files as they are now
        if user is None or not user.enabled:
            raise UnauthenticatedError(f"user {principal.user!r} was removed or disabled")
        self.authorize(Principal(user.name, user.super), needs)

    def authorize(self, principal: Principal, needs: Iterable[Permission]) -> None:
        """Raise AccessDeniedError (403) naming the first permission ``principal`` lacks."""
        if principal.super:
            return
        entries = self._current().policies.get(principal.user, ())
        for resource, action in needs:
            entry = decide(entries, resource, action)
            if entry is None or entry.decision == "deny":
                why = "no policy entry grants it" if entry is None else f"denied by {entry.resource}"
                raise AccessDeniedError(
                    f"user {principal.user!r} may not {action} on {resource} ({why}); grant it with "
                    f"`sparkmq acl grant {principal.user} {resource} {action}`",
                    resource=resource, action=action)


