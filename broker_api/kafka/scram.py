"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677) on the Kafka port, from the keys sparkmq stores.

A sparkmq user's stored key is ``PBKDF2-HMAC-SHA256(secret, "sparkmq:" + user, 100 000, 32)``
(:mod:`broker_api.auth.signature`), which is exactly SCRAM-SHA-256's SaltedPassword for that salt and
iteration count; ``key_sha512`` is the same with SHA-512 (64 bytes), SCRAM-SHA-512's. So the server
sends salt ``sparkmq:<user>`` and i = 100 000, and clients log in with the user's name and secret,
the same as for SASL/PLAIN; the secret never crosses the wire. A user added before SHA-512 keys
were stored has none: it logs in with SCRAM-SHA-256 or PLAIN until it is given a new secret.

Two SaslAuthenticate rounds: client-first ``n,,n=<user>,r=<nonce>`` is answered
``r=<nonce+ours>,s=<salt>,i=<n>``; client-final ``c=biws,r=<nonce>,p=<proof>`` is checked and
answered ``v=<server signature>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ..auth.signature import KDF_ROUNDS
from ..auth.users import User
from ..errors import UnauthenticatedError

__all__ = ["ScramExchange", "SCRAM_SHA_256", "SCRAM_SHA_512", "SCRAM_MECHANISMS"]

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SCRAM_MECHANISMS = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


def _hmac(algorithm: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, algorithm).digest()


def _fields(message: str) -> dict[str, str]:
    return {part[0]: part[2:] for part in message.split(",") if len(part) >= 2 and part[1] == "="}


@dataclass
class ScramExchange:
    """One connection's SCRAM login (``mechanism`` one of SCRAM_MECHANISMS): :meth:`first` then :meth:`final`."""

    mechanism: str = SCRAM_SHA_256
    user: str = ""
    client_first_bare: str = ""
    server_first: str = ""
    nonce: str = ""

    def first(self, message: bytes) -> bytes:
        """The server-first message for client-first ``message`` (an unknown user fails at the end)."""
        text = message.decode("utf-8", errors="replace")
        gs2, _, bare = text.partition(",")
        _, _, bare = bare.partition(",")  # gs2 header "n,," or "y,,": no channel binding
        if gs2 not in ("n", "y"):
            raise UnauthenticatedError("SCRAM: channel binding is not supported")
        f = _fields(bare)
        name = f.get("n", "").replace("=2C", ",").replace("=3D", "=")
        if not name or not f.get("r"):
            raise UnauthenticatedError("SCRAM: client-first needs n=<user> and r=<nonce>")
        self.user, self.client_first_bare = name, bare
        self.nonce = f["r"] + secrets.token_urlsafe(18)
        salt = base64.b64encode(f"sparkmq:{name}".encode()).decode()
        self.server_first = f"r={self.nonce},s={salt},i={KDF_ROUNDS}"
        return self.server_first.encode()

    def final(self, message: bytes, user: User) -> bytes:
        """The server-final message; UnauthenticatedError when the proof is wrong."""
        text = message.decode("utf-8", errors="replace")
        without_proof, _, proof_part = text.rpartition(",p=")
        f = _fields(without_proof)
        if f.get("r") != self.nonce or not proof_part:
            raise UnauthenticatedError("SCRAM: the client-final nonce does not match")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        algorithm = SCRAM_MECHANISMS[self.mechanism]
        salted = user.key if algorithm == "sha256" else user.key_sha512
        if salted is None:
            raise UnauthenticatedError(f"SCRAM-SHA-512: user {self.user!r} has no SHA-512 key (added before it "
                                       "was stored); use SCRAM-SHA-256, or give it a new secret with sparkmq user add")
        stored = hashlib.new(algorithm, _hmac(algorithm, salted, b"Client Key")).digest()
        signature = _hmac(algorithm, stored, auth_message)
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise UnauthenticatedError("SCRAM: the proof is not base64") from exc
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if len(proof) != len(signature) or not hmac.compare_digest(hashlib.new(algorithm, client_key).digest(),
                                                                   stored):
            raise UnauthenticatedError(f"SCRAM: wrong secret for user {self.user!r}")
        server_signature = _hmac(algorithm, _hmac(algorithm, salted, b"Server Key"), auth_message)
        return b"v=" + base64.b64encode(server_signature)
