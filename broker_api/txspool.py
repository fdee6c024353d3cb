"""Staged messages of open transactions: one append-only file per transaction.

A transactional produce no longer appends half messages to the CommitLog
(which made every committed row cost two appends). Its messages (real topic
and queue already chosen) are written here; a commit appends them to the
CommitLog once, with the ``sparkmq.tx_id`` property and the
``TRANSACTION_COMMIT`` sys flag; a rollback deletes the file::

    <data>/config/tx-spool/<transaction id>.msgs
    +-------------------+--------------------------------------------+
    | FRAME.size (u32)  | pickle(list[ROW]), protocol 5               |   one frame per produce
    +-------------------+--------------------------------------------+
    ROW = (topic, body, queue_id, keys, tags, properties | None, flag, born_timestamp)

(plain tuples: pickling them costs about a tenth of pickling ``Message`` objects).

Files are flushed on every append and fsynced before a commit is decided
(:meth:`TxSpool.sync`), so a decided commit always finds its messages. A
frame cut short by a crash ends the file: only an open transaction can have
one (its produce was never answered), and it is rolled back.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
from collections.abc import Iterable
from pathlib import Path

from store import Message

__all__ = ["TxSpool"]

log = logging.getLogger(__name__)

FRAME = struct.Struct("<I")
_SUFFIX = ".msgs"


class TxSpool:
    """Reads and writes the staged-message files under ``root``."""

    def __init__(self, root: Path) -> None:
        self._root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, tx_id: str) -> Path:
        return self._root / f"{tx_id}{_SUFFIX}"

    def append(self, tx_id: str, messages: list[Message], born_ms: int) -> None:
        """Add one frame with ``messages`` to the transaction's file (flushed, not fsynced)."""
        rows = [(m.topic, m.body, m.queue_id, m.keys, m.tags, m.properties or None, m.flag,
                 m.born_timestamp or born_ms) for m in messages]
        data = pickle.dumps(rows, protocol=5)
        with open(self._path(tx_id), "ab") as fh:
            fh.write(FRAME.pack(len(data)) + data)

    def sync(self, tx_ids: Iterable[str]) -> None:
        """fsync the files of ``tx_ids`` (before their commit is decided)."""
        for tx_id in tx_ids:
            try:
                fd = os.open(self._path(tx_id), os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self, tx_id: str, limit: int, properties: dict[str, str],
             sys_flag: int) -> list[Message]:
        """The first ``limit`` staged messages (fewer if the file is short or gone), each
        with ``properties`` added and ``sys_flag`` set."""
        out: list[tuple] = []
        try:
            raw = self._path(tx_id).read_bytes()
        except FileNotFoundError:
            return []
        pos = 0
        while pos + FRAME.size <= len(raw) and len(out) < limit:
            (size,) = FRAME.unpack_from(raw, pos)
            end = pos + FRAME.size + size
            if end > len(raw):
                log.warning("transaction %s: staged file ends in a torn frame at byte %d", tx_id, pos)
                break
            out.extend(pickle.loads(raw[pos + FRAME.size:end]))
            pos = end
        return [Message(topic, body, qid, keys, tags, {**props, **properties} if props else
                        dict(properties), flag, sys_flag, born)
                for topic, body, qid, keys, tags, props, flag, born in out[:limit]]

    def drop(self, tx_id: str) -> None:
        self._path(tx_id).unlink(missing_ok=True)

    def ids(self) -> list[str]:
        """Transaction ids that have a staged file."""
        return sorted(p.name[: -len(_SUFFIX)] for p in self._root.glob(f"*{_SUFFIX}"))
