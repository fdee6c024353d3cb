"""Credentials and TLS trust for the source's and sink's HTTP connections.

Options (reader and writer): ``token`` (``<user>:<secret>``, sent as
``Authorization: Bearer``), or ``user`` and ``secret`` (every request is
HMAC-signed; the secret never travels), and ``caFile`` (the PEM bundle that
signed the brokers' and NameServers' certificates).  Spark redacts option
values whose names contain ``token`` or ``secret`` in plans and the UI.

The signature is the broker's ``SPARKMQ-HMAC-SHA256`` (README, Security)::

    key       = PBKDF2-HMAC-SHA256(secret, "sparkmq:" + user, 100000, 32)
    canonical = "SPARKMQ-HMAC-SHA256\\n" METHOD "\\n" path "\\n" query "\\n" date_ms "\\n" sha256(body)
    Authorization: SPARKMQ-HMAC-SHA256 Credential=<user>, Signature=hex(HMAC-SHA256(key, canonical))
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import OptionError
from .optvalues import get

__all__ = ["Trust", "parse_trust"]

@dataclass(frozen=True)
class Trust:
    """Credentials and CA file of a client (plain strings: it pickles to the executors)."""

    token: str = ""
    user: str = ""
    secret: str = ""
    ca_file: str = ""

    def http_options(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client``."""
        options: dict[str, Any] = {}
        if self.token:
            options["headers"] = {"Authorization": f"Bearer {self.token}"}
        elif self.user:
            from .signing import Signer  # imports httpx: only clients that sign load it

            options["auth"] = Signer(self.user, self.secret)
        if self.ca_file:
            options["verify"] = ssl.create_default_context(cafile=self.ca_file)
        return options


def parse_trust(options: Mapping[str, str]) -> Trust:
    """``token`` | ``user`` + ``secret``, and ``caFile``; raises OptionError on a bad combination."""
    token, user, secret = get(options, "token") or "", get(options, "user") or "", get(options, "secret") or ""
    if token and (user or secret):
        raise OptionError("set either option 'token' (<user>:<secret>) or 'user' and 'secret' (HMAC), not both")
    if token and ":" not in token.strip():
        raise OptionError("option 'token' has the form <user>:<secret> (as `sparkmq user add` prints it)")
    if bool(user) != bool(secret):
        raise OptionError("options 'user' and 'secret' go together (HMAC-signed requests)")
    return Trust(token.strip(), user, secret, get(options, "caFile") or "")
