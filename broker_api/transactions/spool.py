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

The Spark sink stages its Arrow produce bodies as they came, unparsed, and
the commit parses them (so a row is parsed once and appended once, as a
plain produce is)::

    <data>/config/tx-spool/<transaction id>.arrow
    +-------------------+-------+------------------+--------------------------+
    | FRAME.size (u32)  | topic | FRAME.size (u32) | Arrow IPC stream (bytes) |   one per produce
    +-------------------+-------+------------------+--------------------------+

At commit the parsed messages are written to ``<id>.msgs`` (temp file,
fsync, rename) before the decision, so recovery never parses again; bodies
the column put takes are written as columns instead, with every row's queue
decided, to ``<id>.cols`` (see :mod:`tx_columns`).

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
_RAW = ".arrow"
_COLS = ".cols"


class TxSpool:
    """Reads and writes the staged-message files under ``root``."""

    def __init__(self, root: Path) -> None:
        self._root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, tx_id: str) -> Path:
        return self._root / f"{tx_id}{_SUFFIX}"

    def append(self, tx_id: str, messages: list[Message], born_ms: int) -> None:
        """Add one frame with ``messages`` to the transaction's file (flushed, not fsynced)."""
        self._append_to(self._path(tx_id), messages, born_ms)

    @staticmethod
    def _append_to(path: Path, messages: list[Message], born_ms: int) -> None:
        rows = [(m.topic, m.body, m.queue_id, m.keys, m.tags, m.properties or None, m.flag,
                 m.born_timestamp or born_ms) for m in messages]
        data = pickle.dumps(rows, protocol=5)
        with open(path, "ab") as fh:
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

    def append_raw(self, tx_id: str, topic: str, raw: bytes) -> None:
        """Add one unparsed Arrow produce body for ``topic`` (flushed, not fsynced)."""
        name = topic.encode("utf-8")
        with open(self._root / f"{tx_id}{_RAW}", "ab") as fh:
            fh.write(b"".join((FRAME.pack(len(name)), name, FRAME.pack(len(raw)), raw)))

    def read_raw(self, tx_id: str) -> list[tuple[str, bytes]]:
        """The (topic, Arrow body) frames of a transaction, up to a torn one."""
        try:
            raw = (self._root / f"{tx_id}{_RAW}").read_bytes()
        except FileNotFoundError:
            return []
        out: list[tuple[str, bytes]] = []
        pos, view = 0, memoryview(raw)
        while pos + FRAME.size <= len(raw):
            (n,) = FRAME.unpack_from(raw, pos)
            start = pos + FRAME.size + n
            if start + FRAME.size > len(raw):
                break
            (size,) = FRAME.unpack_from(raw, start)
            end = start + FRAME.size + size
            if end > len(raw):
                break
            out.append((bytes(view[pos + FRAME.size:start]).decode("utf-8"),
                        bytes(view[start + FRAME.size:end])))
            pos = end
        return out

    def replace(self, tx_id: str, messages: list[Message], born_ms: int) -> None:
        """Write ``messages`` as the transaction's staged file: temp file, fsync, rename."""
        tmp = self._root / f"{tx_id}{_SUFFIX}.tmp"
        tmp.unlink(missing_ok=True)
        self._append_to(tmp, messages, born_ms)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self._path(tx_id))

    def columns_path(self, tx_id: str) -> Path:
        """Where a commit's column frames are (:mod:`tx_columns`); the file exists once they are."""
        return self._root / f"{tx_id}{_COLS}"

    def drop(self, tx_id: str) -> None:
        for suffix in (_SUFFIX, _RAW, f"{_SUFFIX}.tmp", _COLS, f"{_COLS}.tmp"):
            (self._root / f"{tx_id}{suffix}").unlink(missing_ok=True)

    def drop_raw(self, tx_id: str) -> None:
        (self._root / f"{tx_id}{_RAW}").unlink(missing_ok=True)

    def ids(self) -> list[str]:
        """Transaction ids that have a staged file."""
        names = {p.name.split(".")[0] for p in self._root.iterdir()}
        return sorted(names)
