"""Authentication and ACL, after RocketMQ ACL 2.0 (users, policies, Pub/Sub/Admin).

* :mod:`.signature`: the wire format of tokens and HMAC signatures (clients share it);
* :mod:`.users`: the users and ACL files under the auth directory;
* :mod:`.policy`: resource patterns and the most-specific-entry-wins decision;
* :mod:`.authn`: checking a request's credentials and permissions;
* :mod:`.routes`: which broker paths are open; :mod:`.needs`: what a route declares it needs.

The ASGI middleware that applies them to every request is
:mod:`broker_api.http.auth`.  No web framework is imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .authn import Authenticator, Permission, Principal
    from .policy import ACTIONS, RESOURCE_TYPES, PolicyEntry, decide, parse_entry, parse_resource
    from .routes import broker_access
    from .signature import Credentials, derive_key, new_secret, parse_token, signed_headers
    from .users import AuthSnapshot, User, UserStore, check_user_name

# Each name loads its module on first use: a client signing requests needs only .signature.
_WHERE: dict[str, str] = {
    **dict.fromkeys(("Authenticator", "Permission", "Principal"), "authn"),
    **dict.fromkeys(("ACTIONS", "RESOURCE_TYPES", "PolicyEntry", "decide", "parse_entry", "parse_resource"),
                    "policy"),
    "broker_access": "routes",
    **dict.fromkeys(("Credentials", "derive_key", "new_secret", "parse_token", "signed_headers"), "signature"),
    **dict.fromkeys(("AuthSnapshot", "User", "UserStore", "check_user_name"), "users"),
}

__getattr__ = lazy_getattr(__name__, _WHERE)

__all__ = sorted([*_WHERE, "exposure_warning"])  # the face: the lazily loaded names above and exposure_warning

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def exposure_warning(host: str, auth_enabled: bool, tls: bool, what: str) -> str | None:
    """The warning to print when ``what`` listens beyond this machine without auth (or TLS), else None."""
    if host in _LOOPBACK or host.startswith("127."):
        return None
    if not auth_enabled:
        return (f"warning: the {what} listens on {host} without authentication: anyone who can reach it may "
                "produce, consume and delete topics; enable [auth] (see README, Security)")
    if not tls:
        return (f"warning: the {what} listens on {host} with authentication but without TLS: bearer tokens "
                "travel in clear text; add --ssl-certfile/--ssl-keyfile or sign requests (HMAC)")
    return None
