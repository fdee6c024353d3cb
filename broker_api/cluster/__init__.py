"""The cluster: NameServer registration and its client, replication to slaves, metadata sync.

Names load on first use, so a client or the CLI that needs one module does not load the room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .namesrv_client import NamesrvClient
    from .registration import BrokerIdentity, DataVersion, NamesrvRegistrar, NamesrvState, parse_namesrv_addrs, topics_payload
    from .replication import FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, Replication, SEND_OK, SLAVE_NOT_AVAILABLE, end_offset
    from .slave_sync import SlaveSyncService
    from .wire import body_crc32

__getattr__ = lazy_getattr(__name__, {
    "BrokerIdentity": "registration",
    "DataVersion": "registration",
    "FLUSH_DISK_TIMEOUT": "replication",
    "FLUSH_SLAVE_TIMEOUT": "replication",
    "NamesrvClient": "namesrv_client",
    "NamesrvRegistrar": "registration",
    "NamesrvState": "registration",
    "Replication": "replication",
    "SEND_OK": "replication",
    "SLAVE_NOT_AVAILABLE": "replication",
    "SlaveSyncService": "slave_sync",
    "body_crc32": "wire",
    "end_offset": "replication",
    "parse_namesrv_addrs": "registration",
    "topics_payload": "registration",
})

__all__ = [
    "BrokerIdentity",
    "DataVersion",
    "FLUSH_DISK_TIMEOUT",
    "FLUSH_SLAVE_TIMEOUT",
    "NamesrvClient",
    "NamesrvRegistrar",
    "NamesrvState",
    "Replication",
    "SEND_OK",
    "SLAVE_NOT_AVAILABLE",
    "SlaveSyncService",
    "body_crc32",
    "end_offset",
    "parse_namesrv_addrs",
    "topics_payload",
]
