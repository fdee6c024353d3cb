"""SASL/PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (see scram.py) on the Kafka port, onto sparkmq's users and ACL (``[auth] enabled``).

A connection first sends SaslHandshake (v1, mechanism ``PLAIN``) and SaslAuthenticate with
``authzid \\0 user \\0 secret``; the user and secret are a sparkmq user's (``sparkmq acl user-add``),
checked as a bearer token ``user:secret`` would be. Until then only ApiVersions and the two SASL
APIs are served; anything else closes the connection (as Kafka does). Afterwards each request is
authorized against the user's policies: produce needs ``Topic:<t> Pub``, fetch and offsets
``Topic:<t> Sub``, group APIs ``Group:<g> Sub``, creating and deleting topics ``Cluster:<c> Admin``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..auth.authn import Authenticator, Principal
from ..auth.users import User, UserStore
from ..errors import AccessDeniedError, UnauthenticatedError
from .codec import ErrorCode, Request
from .scram import SCRAM_MECHANISMS, ScramExchange

__all__ = ["SaslGate", "SASL_HANDLERS", "PRE_AUTH_KEYS"]

log = logging.getLogger(__name__)
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PRE_AUTH_KEYS = frozenset({18, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class SaslGate:
    """Checks PLAIN credentials and permissions (None of it when ``[auth]`` is off)."""

    def __init__(self, settings: Any) -> None:
        self.enabled = bool(settings.auth.enabled)
        self.cluster = settings.broker.cluster
        self._auth = Authenticator(UserStore(settings.auth_path), settings.auth.max_clock_skew_s) \
            if self.enabled else None

    def login(self, auth_bytes: bytes) -> Principal:
        """The user of a PLAIN token; UnauthenticatedError if it is wrong."""
        if self._auth is None:
            raise UnauthenticatedError("[auth] is off on this broker: connect without SASL")
        parts = auth_bytes.split(b"\0")
        if len(parts) != 3 or not parts[1]:
            raise UnauthenticatedError("a SASL/PLAIN token is authzid NUL user NUL password")
        user, secret = parts[1].decode(errors="replace"), parts[2].decode(errors="replace")
        return self._auth.authenticate("KAFKA", "/", "", {"authorization": f"Bearer {user}:{secret}"})

    def user(self, name: str) -> User:
        """The enabled user ``name`` (SCRAM's lookup); UnauthenticatedError if there is none."""
        user = self._auth.store.snapshot().users.get(name) if self._auth is not None else None
        if user is None or not user.enabled:
            raise UnauthenticatedError(f"unknown or disabled user {name!r}")
        return user

    def allowed(self, principal: Principal | None, resource: str, action: str) -> bool:
        if self._auth is None:
            return True
        if principal is None:
            return False
        try:
            self._auth.authorize(principal, [(resource, action)])
        except (AccessDeniedError, UnauthenticatedError):
            return False
        return True


async def sasl_handshake(ctx: Any, req: Request) -> dict[str, Any]:
    mechanisms = ["PLAIN", *SCRAM_MECHANISMS] if ctx.sasl.enabled else []
    ok = req.body.mechanism in mechanisms
    if ok:
        req.session["mechanism"] = req.body.mechanism
        req.session.pop("scram", None)
    return {"error_code": 0 if ok else ErrorCode.unsupported_sasl_mechanism, "mechanisms": mechanisms}


async def sasl_authenticate(ctx: Any, req: Request) -> dict[str, Any]:
    """Answers the token; the server records the principal (``req.session``) on success."""
    token = bytes(req.body.auth_bytes)
    try:
        if req.session.get("mechanism") in SCRAM_MECHANISMS:
            reply = _scram(ctx, req.session, token)
        else:
            req.session["principal"] = ctx.sasl.login(token)
            reply = b""
    except UnauthenticatedError as exc:
        log.warning("kafka: SASL/%s authentication failed (client %s): %s", req.session.get("mechanism", "PLAIN"),
                    req.client_id, exc.message)
        req.session.pop("scram", None)
        return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": exc.message,
                "auth_bytes": b"", "session_lifetime": 0}
    return {"error_code": 0, "error_message": None, "auth_bytes": reply, "session_lifetime": 0}


def _scram(ctx: Any, session: dict[str, Any], token: bytes) -> bytes:
    """One SCRAM round: client-first (answered with the salt), then client-final (logs the user in)."""
    exchange = session.get("scram")
    if exchange is None:
        exchange = session["scram"] = ScramExchange(session["mechanism"])
        return exchange.first(token)
    user = ctx.sasl.user(exchange.user)
    reply = exchange.final(token, user)
    del session["scram"]
    session["principal"] = Principal(user.name, user.super)
    return reply


SASL_HANDLERS = {SASL_HANDSHAKE: sasl_handshake, SASL_AUTHENTICATE: sasl_authenticate}
