"""Models of the broker's JSON answers, for the OpenAPI document only.

The routes build their answers as dicts (the hot ones with orjson); these
models describe them so a generated client gets typed results.  They are
never used to validate or serialize a response, so they add no work per
request; :mod:`broker_api.http.contract` puts them in the document at app
build time and its tests hold the answers to them (schemathesis checks every
answer against its schema).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from store import GetStatus

__all__ = ["ANSWER_MODELS", "TableSettings", "TableStatus", "Topic", "TopicDetail", "TopicAltered", "TablesAnswer",
           "ReplayAnswer", "QueueOffsets", "ProduceResult", "ProduceQueueRange", "ProduceAnswer",
           "PulledMessage", "PullPage", "OffsetCommitted", "GroupOffsets", "Deleted", "OffsetAnswer",
           "MessagesAnswer", "Status", "JsonInt", "JsonBool", "RequestBody"]


def _json_int(value: Any) -> Any:
    """A JSON number, not true/false or a numeric string (pydantic's lax mode takes both as ints)."""
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    return value


# Request body field types: what the document says and nothing more (an integer is no boolean).
JsonInt = Annotated[int, BeforeValidator(_json_int)]
JsonBool = StrictBool


class RequestBody(BaseModel):
    """A JSON request body: a field the document does not name is a 400, never silently ignored
    (a typo such as ``invisble_time_ms`` must not fall back to the default)."""

    model_config = ConfigDict(extra="forbid")


class TableSettings(BaseModel):
    """A topic's table settings (``mode`` off: no table of its own)."""

    mode: Literal["off", "raw", "typed"]
    table_schema: dict[str, Any] | str | None = Field(alias="schema", description="JSON Schema object or Spark DDL")
    write_mode: Literal["append", "upsert"]
    partition_by: str | None
    target_lag_s: float = Field(gt=0)


class TableStatus(BaseModel):
    """How far a topic's table is; the counters are null until the writer has opened it."""

    mode: Literal["off", "raw", "typed"]
    write_mode: Literal["append", "upsert"]
    writing: bool = Field(description="false where no table is written (a slave, [tables] enabled = false)")
    rows: int | None = Field(ge=0)
    dlq_rows: int | None = Field(ge=0, description="rows of the dead-letter table <topic>__dlq")
    committed_offset: int | None = Field(ge=0, description="CommitLog offset the table's last commit covers")
    lag_bytes: int | None = Field(ge=0)
    lag_seconds: float | None = Field(ge=0)
    version: int | None = Field(description="Delta table version")
    last_error: str | None
    table_uri: str | None = None
    dlq_uri: str | None = None


class Topic(BaseModel):
    """A topic's settings."""

    name: str
    queues: int = Field(ge=1)
    perm: Literal["rw", "r", "w", ""]
    table: TableSettings


class TopicAltered(Topic):
    """A topic after PUT /v1/topics/{topic}, with its table's status."""

    table_status: TableStatus | None


class TablesAnswer(BaseModel):
    """Every table topic's status, by topic."""

    tables: dict[str, TableStatus]


class ReplayAnswer(BaseModel):
    """What a DLQ replay did: rows moved to the table, rows left in <topic>__dlq."""

    replayed: int = Field(ge=0)
    remaining: int = Field(ge=0)


class QueueOffsets(BaseModel):
    """The readable range of one queue: offsets min_offset .. max_offset - 1."""

    queue_id: int = Field(ge=0)
    min_offset: int = Field(ge=0)
    max_offset: int = Field(ge=0)


class TopicDetail(Topic):
    """A topic with its queues' offsets and its readable message count."""

    queue_offsets: list[QueueOffsets]
    messages: int = Field(ge=0)
    table_status: TableStatus | None


class ProduceResult(BaseModel):
    """Where one message landed; ``queue_offset`` is null for a half or delayed message."""

    msg_id: str
    queue_id: int = Field(ge=0)
    queue_offset: int | None = Field(ge=0)
    scheduled: bool | None = Field(default=None, description="true for a delayed message")


class ProduceQueueRange(BaseModel):
    """Where a request's messages of one queue landed (answer=summary): consecutive offsets, request order."""

    queue_id: int = Field(ge=0)
    first_offset: int = Field(ge=0)
    last_offset: int = Field(ge=0)
    count: int = Field(ge=1)


class ProduceAnswer(BaseModel):
    """Answer of produce: one result per message in request order (answer=full, the default), or
    a count and the offset range per queue (answer=summary)."""

    status: str = Field(description="SEND_OK, or FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (SYNC_MASTER)")
    results: list[ProduceResult] | None = Field(default=None, description="answer=full: one per message")
    transaction_id: str | None = Field(default=None, description="set for transactional produce")
    count: int | None = Field(default=None, ge=1, description="answer=summary: messages stored")
    scheduled: int | None = Field(default=None, ge=0, description="answer=summary: of them delayed (no offset yet)")
    queues: list[ProduceQueueRange] | None = Field(default=None, description=(
        "answer=summary: per queue, in the order of its first message in the request"))


class PulledMessage(BaseModel):
    """One stored message; its body is ``body`` (UTF-8 text) or ``body_base64`` (binary)."""

    msg_id: str
    topic: str
    queue_id: int = Field(ge=0)
    offset: int = Field(ge=0)
    keys: list[str]
    tags: str | None
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    body: str | None = None
    body_base64: str | None = None


class PullPage(BaseModel):
    """A page of one queue; pull again from ``next_offset``."""

    status: GetStatus
    messages: list[PulledMessage]
    next_offset: int = Field(ge=0)
    min_offset: int = Field(ge=0)
    max_offset: int = Field(ge=0)
    damaged: dict[str, Any] | None = Field(default=None, description="the unreadable record (CORRUPT_MESSAGE)")


class MessagesAnswer(BaseModel):
    """Messages found by key."""

    messages: list[PulledMessage]


class OffsetCommitted(BaseModel):
    """Answer of commit_offsets."""

    ok: bool


class GroupOffsets(BaseModel):
    """Committed offsets of a group on a topic, by queue id (queues never committed are absent)."""

    topic: str
    offsets: dict[str, int]


class OffsetAnswer(BaseModel):
    """An offset of a queue."""

    offset: int = Field(ge=0)


class Deleted(BaseModel):
    """Answer of delete_topic."""

    deleted: str


class Status(BaseModel):
    """A liveness or readiness answer."""

    status: str


ANSWER_MODELS: tuple[type[BaseModel], ...] = (
    TableSettings, TableStatus, Topic, TopicDetail, TopicAltered, TablesAnswer, ReplayAnswer, QueueOffsets, ProduceResult, ProduceQueueRange, ProduceAnswer, PulledMessage, PullPage, MessagesAnswer,
    OffsetCommitted, GroupOffsets, OffsetAnswer, Deleted, Status)
