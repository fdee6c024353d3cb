"""Host addresses and message ids (store host + physical offset); see :mod:`.codec`."""

from __future__ import annotations

import functools
import socket
from typing import Sequence

import numpy as np

from .errors import InvalidMessageError

__all__ = ["decode_host", "encode_host", "make_msg_id", "make_msg_ids", "parse_msg_id"]


def encode_host(host: str) -> int:
    """``"ip:port"`` → 8 bytes packed in an int (IPv4 high, port low)."""
    ip, _, port = host.rpartition(":")
    try:
        packed = socket.inet_aton(ip or "127.0.0.1")
        return (int.from_bytes(packed, "big") << 32) | int(port or 0)
    except (OSError, ValueError) as exc:
        raise InvalidMessageError(f"host {host!r} is not 'ipv4:port'") from exc


@functools.lru_cache(maxsize=1024)
def decode_host(value: int) -> str:
    return f"{socket.inet_ntoa((value >> 32).to_bytes(4, 'big'))}:{value & 0xFFFFFFFF}"


def make_msg_id(store_host: int, phy_offset: int) -> str:
    return f"{store_host:016X}{phy_offset:016X}"


def make_msg_ids(store_host: int, phy_offsets: Sequence[int] | np.ndarray) -> list[str]:
    """``make_msg_id`` for many offsets at once (hex-encoded in one C call)."""
    prefix = f"{store_host:016X}"
    digits = np.asarray(phy_offsets, dtype=">u8").tobytes().hex().upper()
    return [prefix + digits[i:i + 16] for i in range(0, len(digits), 16)]


def parse_msg_id(msg_id: str) -> tuple[int, int]:
    """Message id → (store host, physical offset)."""
    if len(msg_id) != 32:
        raise InvalidMessageError(f"message id {msg_id!r} must be 32 hex characters")
    try:
        return int(msg_id[:16], 16), int(msg_id[16:], 16)
    except ValueError as exc:
        raise InvalidMessageError(f"message id {msg_id!r} is not hexadecimal") from exc
