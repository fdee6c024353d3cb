"""Transactions: half messages, staged batches, sink commits, the spool and the producer check-back.

Names load on first use, so a client or the CLI that needs one module does not load the room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:
    from .checkback import CHECK_MAX_TOPIC, CheckBackService
    from .columns import ColumnFrame, ColumnParser, publish_frames, read_frames, write_frames
    from .service import HALF_TOPIC, TX_PROPERTY, TransactionService
    from .sinks import Parser, SinkBatches
    from .spool import TxSpool

__getattr__ = lazy_getattr(__name__, {
    "CHECK_MAX_TOPIC": "checkback",
    "CheckBackService": "checkback",
    "ColumnFrame": "columns",
    "ColumnParser": "columns",
    "HALF_TOPIC": "service",
    "Parser": "sinks",
    "SinkBatches": "sinks",
    "TX_PROPERTY": "service",
    "TransactionService": "service",
    "TxSpool": "spool",
    "publish_frames": "columns",
    "read_frames": "columns",
    "write_frames": "columns",
})

__all__ = [
    "CHECK_MAX_TOPIC",
    "CheckBackService",
    "ColumnFrame",
    "ColumnParser",
    "HALF_TOPIC",
    "Parser",
    "SinkBatches",
    "TX_PROPERTY",
    "TransactionService",
    "TxSpool",
    "publish_frames",
    "read_frames",
    "write_frames",
]
