"""Users and their policies, kept in two JSON files under the auth directory.

The directory (``[auth] dir``, default ``<data_dir>/auth``) is created 0700::

    users.json   {"users": {"alice": {"key": "<hex PBKDF2 of the secret>", "super": false,
                                      "enabled": true, "key_sha512": "<the same with SHA-512>"}}}
    acls.json    {"acls": {"alice": [{"resource": "Topic:orders", "actions": ["Pub"],
                                      "decision": "allow"}]}}

Both are written atomically (temp file, fsync, rename) by ``sparkmq user`` /
``sparkmq acl`` and read by the broker or NameServer.  A running server
looks at the files' identity (inode, size, mtime) at most every
``check_interval_s`` (0.25 s) and reloads them when they changed, so a new
user, a removed user or a changed policy applies within about a second
without a restart (a parked long poll re-checks at once when it wakes).
The secret itself is shown once, when the user is added, and stored
nowhere (see :mod:`.signature` for the key).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonfile import read_json, write_json_atomic
from .policy import PolicyEntry, parse_entry
from .signature import derive_key, derive_key_sha512, new_secret

__all__ = ["AuthSnapshot", "User", "UserStore", "check_user_name"]

log = logging.getLogger("sparkmq.auth")


@dataclass(frozen=True)
class User:
    """A user as the servers see it: name, key (slow hash of the secret), super, enabled."""

    name: str
    key: bytes
    super: bool = False
    enabled: bool = True
    key_sha512: bytes | None = None  # SCRAM-SHA-512 (Kafka port); users added before it have none


@dataclass(frozen=True)
class AuthSnapshot:
    """Users and policies as last read; ``version`` grows with every reload."""

    version: int = 0
    users: dict[str, User] = field(default_factory=dict)
    policies: dict[str, tuple[PolicyEntry, ...]] = field(default_factory=dict)


def check_user_name(name: str) -> str:
    if not name or ":" in name or any(c.isspace() for c in name) or len(name) > 64:
        raise ValueError(f"user name {name!r} must be 1-64 characters without ':' or spaces")
    return name


class UserStore:
    """The users and ACL files of one auth directory."""

    def __init__(self, directory: Path | str, check_interval_s: float = 0.25) -> None:
        self.directory = Path(directory)
        self.users_path = self.directory / "users.json"
        self.acls_path = self.directory / "acls.json"
        self._interval = check_interval_s
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._checked = float("-inf")
        self._snapshot = AuthSnapshot()

    # -- reading (servers) -------------------------------------------------

    def snapshot(self, fresh: bool = False) -> AuthSnapshot:
        """The current users and policies, reloaded if the files changed (checked at most every interval,
        or now when ``fresh``: two stat calls)."""
        now = time.monotonic()
        if now - self._checked < self._interval and not fresh:
            return self._snapshot
        with self._lock:
            self._checked = now
            stamp = (self._stat(self.users_path), self._stat(self.acls_path))
            if stamp != self._stamp:
                self._snapshot = self._load(self._snapshot.version + 1)
                self._stamp = stamp
                log.info("auth: %d users loaded from %s", len(self._snapshot.users), self.directory)
            return self._snapshot

    @staticmethod
    def _stat(path: Path) -> tuple[int, int, int] | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _load(self, version: int) -> AuthSnapshot:
        users: dict[str, User] = {}
        for name, raw in dict(read_json(self.users_path, {}).get("users", {})).items():
            try:
                sha512 = raw.get("key_sha512")
                users[name] = User(name, bytes.fromhex(raw["key"]), bool(raw.get("super", False)),
                                   bool(raw.get("enabled", True)), bytes.fromhex(sha512) if sha512 else None)
            except (KeyError, ValueError, TypeError) as exc:
                log.error("auth: user %r in %s is unreadable (%s); it cannot log in", name, self.users_path, exc)
        policies: dict[str, tuple[PolicyEntry, ...]] = {}
        for name, raw_entries in dict(read_json(self.acls_path, {}).get("acls", {})).items():
            entries = []
            for raw in raw_entries:
                try:
                    entries.append(parse_entry(raw))
                except ValueError as exc:
                    log.error("auth: a policy entry of %r in %s is ignored: %s", name, self.acls_path, exc)
            policies[name] = tuple(entries)
        return AuthSnapshot(version, users, policies)

    # -- writing (the CLI) -------------------------------------------------

    def _read_raw(self) -> tuple[dict[str, Any], dict[str, Any]]:
        users = dict(read_json(self.users_path, {}).get("users", {}))
        acls = dict(read_json(self.acls_path, {}).get("acls", {}))
        return users, acls

    def _write(self, users: dict[str, Any] | None = None, acls: dict[str, Any] | None = None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        if users is not None:
            write_json_atomic(self.users_path, {"users": users})
            os.chmod(self.users_path, 0o600)
        if acls is not None:
            write_json_atomic(self.acls_path, {"acls": acls})
            os.chmod(self.acls_path, 0o600)

    def add_user(self, name: str, super_user: bool = False, secret: str | None = None) -> str:
        """Create ``name`` (or give it a new secret); returns the secret, which is stored nowhere."""
        check_user_name(name)
        secret = secret or new_secret()
        users, _ = self._read_raw()
        users[name] = {"key": derive_key(name, secret).hex(), "super": super_user, "enabled": True,
                       "key_sha512": derive_key_sha512(name, secret).hex()}
        self._write(users=users)
        return secret

    def remove_user(self, name: str) -> None:
        """Delete ``name`` and its policy; raises KeyError when there is no such user."""
        users, acls = self._read_raw()
        if name not in users:
            raise KeyError(name)
        del users[name]
        acls.pop(name, None)
        self._write(users=users, acls=acls)

    def set_enabled(self, name: str, enabled: bool) -> None:
        users, _ = self._read_raw()
        if name not in users:
            raise KeyError(name)
        users[name]["enabled"] = enabled
        self._write(users=users)

    def list_users(self) -> list[dict[str, Any]]:
        users, acls = self._read_raw()
        return [{"user": n, "super": bool(u.get("super")), "enabled": bool(u.get("enabled", True)),
                 "policy_entries": len(acls.get(n, []))} for n, u in sorted(users.items())]

    def grant(self, user: str, entry: PolicyEntry) -> None:
        """Add ``entry`` to ``user``'s policy, replacing an entry on the same resource and decision."""
        users, acls = self._read_raw()
        if user not in users:
            raise KeyError(user)
        kept = [e for e in acls.get(user, [])
                if (e.get("resource"), e.get("decision", "allow")) != (entry.resource, entry.decision)]
        acls[user] = kept + [entry.to_json()]
        self._write(acls=acls)

    def revoke(self, user: str, resource: str) -> int:
        """Remove ``user``'s entries on ``resource``; how many were removed."""
        _, acls = self._read_raw()
        entries = acls.get(user, [])
        kept = [e for e in entries if e.get("resource") != resource]
        acls[user] = kept
        self._write(acls=acls)
        return len(entries) - len(kept)

    def policy(self, user: str | None = None) -> dict[str, list[dict[str, Any]]]:
        _, acls = self._read_raw()
        return {u: list(e) for u, e in sorted(acls.items()) if user is None or u == user}
