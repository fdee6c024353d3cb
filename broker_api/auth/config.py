"""The ``[tls]`` and ``[auth]`` sections of the broker's settings.

Kept apart from :mod:`broker_api.settings` (which includes them) so that
module stays small; the same rules apply: typed, frozen, read once.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["AuthSection", "TlsSection"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TlsSection(_Section):
    """HTTPS for the broker's listeners, and the CA its own calls trust (RocketMQ's tls.*)."""

    certfile: str = Field(default="", description=(
        'PEM certificate chain the broker serves HTTPS with (`--ssl-certfile`); "" = plain HTTP.'))
    keyfile: str = Field(default="", description=(
        'PEM private key of certfile (`--ssl-keyfile`); needed with certfile.'))
    ca_file: str = Field(default="", description=(
        'PEM CA bundle the broker trusts when it calls NameServers over https:// (`--ca-file`); '
        '"" = the system CAs.'))

    @model_validator(mode="after")
    def _check_pair(self) -> TlsSection:
        if bool(self.certfile) != bool(self.keyfile):
            raise ValueError("[tls] certfile and keyfile go together (--ssl-certfile and --ssl-keyfile)")
        for name in ("certfile", "keyfile", "ca_file"):
            value = getattr(self, name)
            if value and not Path(value).is_file():
                raise ValueError(f"[tls] {name} {value!r} is not a readable file")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.certfile)


class AuthSection(_Section):
    """Authentication and ACL (RocketMQ ACL 2.0): users, policies on Topic/Group/Cluster, Pub/Sub/Admin."""

    enabled: bool = Field(default=False, description=(
        "Require credentials (bearer token or HMAC signature) on every request but /healthz and check the "
        "user's policy; manage users with `sparkmq user` and `sparkmq acl`. Off: anyone who reaches the "
        "port may do anything (keep `[broker] host` on 127.0.0.1)."))
    dir: str = Field(default="", description=(
        'Directory of users.json and acls.json (0700; secrets stored as PBKDF2 hashes); "" = `<data_dir>/auth`.'))
    control_open: bool = Field(default=True, description=(
        "/readyz, /metrics and /v1/broker answer without credentials (on both listeners); false: any "
        "authenticated user. /healthz is always open."))
    max_clock_skew_s: float = Field(default=300.0, gt=0, description=(
        "Largest difference (seconds) between a signed request's x-sparkmq-date and the broker's clock."))
    token: str = Field(default="", description=(
        'Credentials "<user>:<secret>" the broker presents to NameServers when it registers (its user needs '
        '`Cluster:<cluster>` Admin there); "" = none. Prefer the SPARKMQ_AUTH__TOKEN environment variable.'))
