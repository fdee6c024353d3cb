"""POP state as records in the store's own revive topic (RocketMQ's ``rmq_sys_REVIVE_LOG``).

Every POP state change is one message in ``RMQ_SYS_REVIVE_LOG`` queue 0, its
body a small JSON object, its tag the record kind::

    tag "ck"    a checkpoint: messages of one queue handed to a group
                {"g": group, "t": stored topic, "q": queue id, "pt": pop time ms,
                 "it": invisible ms, "no": next pop offset of the queue,
                 "m": [[queue offset, msg id, reconsume times], ...],
                 "lv": delay level (POST /retry only), "r": 1 (POST /retry only)}
    tag "done"  messages of one checkpoint that are finished
                {"ck": revive offset of the checkpoint, "i": [message index, ...],
                 "why": "ack" | "revive" | "invisible"}

A checkpoint is named by its queue offset in the revive topic.  A "done" record
comes after its checkpoint in the log, and a revive writes its done record in
the *same* put as the retry or DLQ message (one batch is atomic), so replaying
the log from any offset at or before the first unfinished checkpoint rebuilds
the same state: nothing is acked twice and nothing revives twice.

Receipt handles are ``"<checkpoint offset>:<index>:<pop time>"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from store import Message, MessageStore, StoredMessage

from ..errors import BadReceiptError

__all__ = ["REVIVE_TOPIC", "RETRY_PREFIX", "DLQ_PREFIX", "Checkpoint", "ck_message", "done_message",
           "parse_receipt", "reconsume_times", "replay", "retry_message", "dlq_message", "ORIGIN_TOPIC", "ORIGIN_MSG_ID",
           "RECONSUME_TIME", "RECEIPT_PATTERN"]

RECEIPT_PATTERN = r"^[0-9]{1,19}:[0-9]{1,9}:[0-9]{1,19}$"  # <checkpoint>:<index>:<pop time>; also the OpenAPI pattern
_RECEIPT = re.compile(RECEIPT_PATTERN)

REVIVE_TOPIC = "RMQ_SYS_REVIVE_LOG"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
# RocketMQ's property names: the original topic, the first message id, the reconsume count.
ORIGIN_TOPIC = "RETRY_TOPIC"
ORIGIN_MSG_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"


@dataclass(slots=True)
class Checkpoint:
    """Messages of one queue handed out together; ``done[i]`` says why one is finished."""

    offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    invisible_ms: int
    next_offset: int
    msgs: list[tuple[int, str, int]]  # (queue offset, msg id, reconsume times)
    level: int | None = None  # POST /retry: the delay level asked for
    done: list[str] = field(default_factory=list)  # per message: "" in flight, else "ack", "revive", "invisible"

    def __post_init__(self) -> None:
        if not self.done:
            self.done = [""] * len(self.msgs)

    @property
    def finished(self) -> bool:
        return all(self.done)

    def receipt(self, i: int) -> str:
        return f"{self.offset}:{i}:{self.pop_time}"

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"g": self.group, "t": self.topic, "q": self.queue_id, "pt": self.pop_time,
                               "it": self.invisible_ms, "no": self.next_offset, "m": [list(m) for m in self.msgs]}
        if self.level is not None:
            out["lv"] = self.level
        return out

    @classmethod
    def from_body(cls, offset: int, b: dict[str, Any]) -> Checkpoint:
        return cls(offset, b["g"], b["t"], int(b["q"]), int(b["pt"]), int(b["it"]), int(b["no"]),
                   [(int(o), str(m), int(r)) for o, m, r in b["m"]], b.get("lv"))


def ck_message(ck: Checkpoint) -> Message:
    return Message(REVIVE_TOPIC, orjson.dumps(ck.body()), 0, (), "ck")


def done_message(ck_offset: int, indices: list[int], why: str) -> Message:
    return Message(REVIVE_TOPIC, orjson.dumps({"ck": ck_offset, "i": indices, "why": why}), 0, (), "done")


def parse_receipt(receipt: str) -> tuple[int, int, int]:
    """(checkpoint offset, index, pop time) of a receipt handle."""
    if not isinstance(receipt, str) or not _RECEIPT.fullmatch(receipt):
        raise BadReceiptError(f"receipt {receipt!r} is not a receipt handle from POST /v1/groups/GROUP/pop "
                              "(<checkpoint>:<index>:<pop time>)")
    ck, i, pt = (int(x) for x in receipt.split(":"))
    return ck, i, pt


def replay(store: MessageStore, start: int) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(tag, revive offset, body) of every record from ``start`` to the end of the revive topic."""
    offset = start
    while True:
        page = store.get_messages(REVIVE_TOPIC, 0, offset, 1000, None, None)
        for m in page.messages:
            yield m.tags or "", m.queue_offset, orjson.loads(m.body)
        if not page.messages or page.next_offset <= offset:
            return
        offset = page.next_offset


def reconsume_times(m: StoredMessage) -> int:
    """How often ``m`` was delivered again (the record's count, or RECONSUME_TIME after a delayed re-put)."""
    try:
        return max(m.reconsume_times, int(m.properties.get(RECONSUME_TIME, 0)))
    except ValueError:
        return m.reconsume_times


def _origin(m: StoredMessage) -> tuple[str, str]:
    """(original topic, original msg id) of a message that may itself be a retry."""
    return m.properties.get(ORIGIN_TOPIC, m.topic), m.properties.get(ORIGIN_MSG_ID, m.msg_id)


def retry_message(m: StoredMessage, group: str, reconsume_times: int) -> Message:
    """``m`` again, for ``%RETRY%{group}``, counted ``reconsume_times``."""
    topic, msg_id = _origin(m)
    props = {**m.properties, ORIGIN_TOPIC: topic, ORIGIN_MSG_ID: msg_id, RECONSUME_TIME: str(reconsume_times)}
    return Message(RETRY_PREFIX + group, m.body, 0, m.keys, m.tags, props, m.flag, 0, m.born_timestamp,
                   None, reconsume_times)


def dlq_message(m: StoredMessage, group: str, reconsume_times: int) -> Message:
    """``m`` for ``%DLQ%{group}`` with its original topic, msg id and reconsume count in its properties."""
    out = retry_message(m, group, reconsume_times)
    out.topic = DLQ_PREFIX + group
    return out
