"""Which local address this process's HA connection to a master uses (Linux ``/proc``).

The controller-mode master must know which HA connection belongs to which
replica of its in-sync set.  The classic HA stream carries no replica id, so
a slave reports the local end of its connection (``ha_client_address``) in
its controller heartbeat and the master matches it with the peer address of
the connections it accepted.  Found by looking up this process's sockets in
``/proc/self/fd`` and their ESTABLISHED rows in ``/proc/self/net/tcp``.
Once the HA handshake carries the replica id, this can go.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["local_ha_address"]

_ESTABLISHED = "01"


def local_ha_address(master_ha: str | None) -> str | None:
    """``host:port`` of this process's connection to ``master_ha``, None when there is none (or no /proc)."""
    if not master_ha:
        return None
    host, _, port = master_ha.rpartition(":")
    try:
        want = (socket.gethostbyname(host or "127.0.0.1"), int(port))
        inodes = _socket_inodes()
        for table in ("tcp", "tcp6"):
            found = _find(Path(f"/proc/self/net/{table}"), want, inodes)
            if found:
                return found
    except (OSError, ValueError):
        return None
    return None


def _socket_inodes() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _find(path: Path, want: tuple[str, int], inodes: set[str]) -> str | None:
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[1:]:
        cols = line.split()
        if len(cols) < 10 or cols[3] != _ESTABLISHED or cols[9] not in inodes:
            continue
        remote = _addr(cols[2])
        if remote == want:
            local = _addr(cols[1])
            return f"{local[0]}:{local[1]}" if local else None
    return None


def _addr(hexaddr: str) -> tuple[str, int] | None:
    ip_hex, _, port_hex = hexaddr.partition(":")
    raw = bytes.fromhex(ip_hex)
    if len(raw) == 4:
        ip = socket.inet_ntoa(raw[::-1])
    elif len(raw) == 16 and raw[:8] == bytes(8) and raw[8:12] == b"\xff\xff\x00\x00":  # ::ffff:a.b.c.d
        ip = socket.inet_ntoa(raw[12:16][::-1])
    else:
        return None
    return ip, int(port_hex, 16)
