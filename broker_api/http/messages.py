"""Hot routes: produce and pull (raw bodies, orjson, no per-request validation).

Their request shapes are documented in the OpenAPI schema via
``openapi_extra`` instead of pydantic models, so ``/docs`` still shows them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
import zlib
from types import MappingProxyType
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from store import (
    GetResult,
    GetStatus,
    Message,
    MessageTooLargeError,
    PullBatch,
    PullColumns,
    PutResult,
)
from store.errors import FlushTimeoutError
from store.pull import page_is_recent
from store.schedule import REAL_QID

from ..auth.needs import Group, Owner, Topic
from ..broker import Broker
from ..errors import (
    BadOffsetError,
    BadQueueIdError,
    BadRequestError,
    BatchTooLargeError,
    UnsupportedMediaTypeError,
)
from ..model.filters import Predicate, apply_filter, compile_filter
from ..model.topics import TopicConfig, validate_group_name
from ..protection.admission import TICKET_KEY, Ticket
from .arrow_produce import produce_columns
from .guard import GuardedRoute, owner_of, recheck, requires
from .openapi import PRODUCE_DOC, PULL_DOC, RESERVED_CHARS
from .produce_answer import answer_form, message_answer
from .pull_arrow import columns_to_arrow, parse_fields
from .query import bool_param, int_param, query_of
from .staging import stage_raw, wants_raw_staging
from .wire import (
    ARROW_STREAM,
    JSON_TYPES,
    Draft,
    batch_to_arrow,
    batch_to_json,
    damaged_header,
    damaged_to_json,
    message_to_json,
    parse_arrow_produce,
    parse_json_produce,
)

__all__ = ["router"]

router = APIRouter(tags=["messages"], route_class=GuardedRoute)

_WAIT_STATUSES = (GetStatus.NO_NEW_MESSAGE, GetStatus.NO_MATCHED_MESSAGE)
# A pull that finds nothing at these may be ahead of the reput thread, not of the producers.
_TAIL_STATUSES = (*_WAIT_STATUSES, GetStatus.OFFSET_OVERFLOW)
_INLINE_PULL_MAX = 256
# An untagged Arrow page (store.pull_page: flat, at most 16 MiB of log) starting in the newest bytes of
# the CommitLog is built on the event loop: they are in the page cache, and the thread hop would cost
# ~10-15% of the broker's CPU per 10k page. Older pages (maybe on disk) and tag-filtered ones (a scan
# of up to MAX_UNITS_EXAMINED records) are built in the thread pool.
_WARM_LOG_BYTES = 256 << 20
_FILTER_SCAN = 1024  # a filtered pull looks at up to this many units for its matches
_SMALL_PAGE = 16  # JSON pages up to this size are read as message objects
_INLINE_PARSE_BYTES = 1 << 20  # produce bodies larger than this are parsed off the event loop
_PRODUCE_QUERY = ("transactional", "transaction_id", "key", "tags", "queue_id", "delay_level", "deliver_at_ms",
                  "check_url", "answer", "staging")
_PULL_QUERY = ("offset", "max_messages", "wait_ms", "tags", "filter", "group", "fields")
_RECHECK_S = 0.5  # a parked pull re-checks its user at least this often
_NO_PROPERTIES: MappingProxyType[str, str] = MappingProxyType({})
_JSON_TYPES = JSON_TYPES  # as POST /v1/topics: application/json (or no type); text and forms are 415


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


_NO_OPTIONS: tuple[int | None, int | None, int | None] = (None, None, None)


def _raw_options(q: Any) -> tuple[int | None, int | None, int | None]:
    """queue_id, delay_level and deliver_at_ms of a raw message (each None when absent)."""
    qid = int_param(q, "queue_id", -1, BadQueueIdError) if "queue_id" in q else None
    delay = int_param(q, "delay_level", -1) if "delay_level" in q else None
    at = int_param(q, "deliver_at_ms", -1) if "deliver_at_ms" in q else None
    if delay == 0:
        raise BadRequestError("delay_level=0 is not a level; pass 1 or more")
    for name in ("key", "tags"):
        if any(RESERVED_CHARS.search(v) for v in q.getlist(name)):
            raise BadRequestError(f"{name} holds control characters \\x00-\\x03; remove them")
    return qid, delay, at


# -- produce -----------------------------------------------------------------


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise BatchTooLargeError(
            f"request body of {length} bytes exceeds {limit} bytes ([limits] max_request_bytes); split it"
        )
    body = await request.body()
    if len(body) > limit:
        raise BatchTooLargeError(f"request body exceeds {limit} bytes ([limits] max_request_bytes); split it")
    return body


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def _query_options(request: Request, extras: dict[str, Any] | None) -> tuple[bool, tuple[int | None, ...]]:
    """The transactional flag and the raw message's options; ``extras`` receives ``check_url``."""
    q = query_of(request.scope)
    if "check_url" in q:
        if not q["check_url"].startswith(("http://", "https://")):
            raise BadRequestError("check_url must be an http:// or https:// URL")
        if extras is not None:
            extras["check_url"] = q["check_url"]
    if not q:  # the query's options are checked whatever the body (they apply to raw and Arrow bodies)
        return False, _NO_OPTIONS
    return bool_param(q, "transactional"), _raw_options(q)


def _drafts(request: Request, raw: bytes, max_messages: int,
            extras: dict[str, Any] | None = None) -> tuple[list[Draft], bool]:
    """Drafts and the transactional flag; ``extras`` receives a transaction's ``check_url``."""
    ctype, q = _content_type(request), query_of(request.scope)
    transactional, raw_opts = _query_options(request, extras)
    if ctype in _JSON_TYPES:
        return parse_json_produce(raw, max_messages, extras)
    if ctype == ARROW_STREAM:
        return parse_arrow_produce(raw, max_messages), transactional
    if ctype == "application/octet-stream":
        keys = tuple(k for k in q.getlist("key") if k)
        qid, delay, at = raw_opts
        return [Draft(raw, keys, q.get("tags") or None, None, qid, delay, at)], transactional
    raise UnsupportedMediaTypeError(
        f"content type {ctype!r} is not accepted; send application/json, application/octet-stream or {ARROW_STREAM}"
    )


def _to_messages(broker: Broker, cfg: TopicConfig, drafts: list[Draft]) -> list[Message]:
    """Messages with their queue chosen: explicit, else the first key's CRC32, else round robin."""
    limit = broker.settings.store.max_message_bytes
    topic, queues = cfg.name, cfg.queues
    rr = broker.reserve_round_robin(topic, len(drafts))
    out: list[Message] = []
    for i, d in enumerate(drafts):
        if len(d.body) > limit:
            raise MessageTooLargeError(f"message {i} has a {len(d.body)}-byte body; the limit is {limit} bytes")
        qid = d.queue_id
        if qid is None:
            qid = zlib.crc32(d.keys[0].encode("utf-8")) % queues if d.keys else (rr + i) % queues
        elif not 0 <= qid < queues:
            cfg.check_queue(qid)
        m = Message(topic, d.body, qid, d.keys, d.tags, d.properties or _NO_PROPERTIES)
        if d.delay_level is not None or d.deliver_at_ms is not None:  # waits in a hidden topic: delay.py
            m = broker.delay.transform(m, d.delay_level, d.deliver_at_ms)
        out.append(m)
    return out


def _parse_big(broker: Broker, cfg: TopicConfig, request: Request, raw: bytes,
               extras: dict[str, Any]) -> tuple[bool, list[Message]]:
    drafts, transactional = _drafts(request, raw, broker.settings.limits.max_batch_messages, extras)
    return transactional, _to_messages(broker, cfg, drafts)


@router.post("/v1/topics/{topic}/messages", openapi_extra=PRODUCE_DOC, summary="Produce messages")
@requires(Topic("path:topic", "Pub"), Owner("query:transaction_id"), query=_PRODUCE_QUERY, repeatable=("key",))
async def produce(request: Request) -> Response:
    """Append messages to a topic (JSON, raw octet-stream or Arrow bulk)."""
    started = time.perf_counter()
    topic: str = request.path_params["topic"]
    broker: Broker = request.app.state.broker
    raw = await _read_body(request, broker.settings.limits.max_request_bytes)
    tx_id = query_of(request.scope).get("transaction_id") or None
    cfg = broker.topics.for_produce(topic)
    if wants_raw_staging(request):  # the Spark sink: staged as it came, parsed at commit
        return _json(await stage_raw(request, broker, cfg.name, raw, tx_id))
    extras: dict[str, Any] = {"answer": answer_form(query_of(request.scope))}
    ctype = _content_type(request)
    if not tx_id and (ctype == ARROW_STREAM or ctype in _JSON_TYPES) and not _query_options(request, None)[0]:
        answer = await produce_columns(broker, cfg, raw, ctype == ARROW_STREAM, started, extras)
        if answer is not None:
            return answer
    if len(raw) <= _INLINE_PARSE_BYTES:
        drafts, transactional = _drafts(request, raw, broker.settings.limits.max_batch_messages, extras)
        messages = _to_messages(broker, cfg, drafts)
    else:  # a big body is parsed on a thread: the event loop keeps serving everyone else
        transactional, messages = await asyncio.get_running_loop().run_in_executor(
            None, _parse_big, broker, cfg, request, raw, extras)
    try:
        if transactional or tx_id:
            tx_id, results = await broker.gate.run(broker.transactions.add_halves, messages, tx_id,
                                                   extras.get("check_url"), owner_of(request), offload=True)
            send_status = await broker.replication.confirm(results)  # SYNC_MASTER: a slave holds it
            body: dict[str, Any] = {"status": send_status, "transaction_id": tx_id,
                                    "results": _half_results(messages, results)}
        else:
            try:
                results, flushed = await broker.writer.put(messages), True
            except FlushTimeoutError as exc:  # stored; fdatasync did not confirm it in time
                results, flushed = exc.results, False
            send_status = await broker.replication.confirm(results, flushed)
            body = message_answer(send_status, results, topic, extras["answer"],
                                  lambda rs: _scheduled_results(messages, rs, topic))
    except Exception as exc:
        broker.metrics.produce_requests.inc(outcome=type(exc).__name__)
        raise
    m = broker.metrics
    m.produce_requests.inc(outcome="ok")
    m.produce_messages.inc(len(messages), topic=topic)
    m.produce_bytes.inc(sum(len(x.body) for x in messages), topic=topic)
    m.produce_latency.observe(time.perf_counter() - started)
    return _json(body)


def _scheduled_results(messages: list[Message], results: list[PutResult], topic: str) -> list[dict[str, Any]]:
    """Delayed messages get their real queue and no offset yet (they reach it when due)."""
    return [{"msg_id": r.msg_id, "queue_id": r.queue_id, "queue_offset": r.queue_offset} if r.topic == topic
            else {"msg_id": r.msg_id, "queue_id": int(m.properties[REAL_QID]), "queue_offset": None,
                  "scheduled": True} for m, r in zip(messages, results)]


def _half_results(messages: list[Message], results: list[PutResult]) -> list[dict[str, Any]]:
    return [{"msg_id": r.msg_id, "queue_id": m.queue_id, "queue_offset": None} for m, r in zip(messages, results)]


# -- pull --------------------------------------------------------------------


def _tags(raw: str | None) -> frozenset[str] | None:
    if raw is None or raw.strip() in ("", "*"):
        return None
    return frozenset(t.strip() for t in raw.split("||") if t.strip())


Page = GetResult | PullBatch | PullColumns  # a page as message objects, columns or flat buffers


async def _get(broker: Broker, topic: str, qid: int, offset: int, n: int, tags: frozenset[str] | None,
               arrow: bool, flt: Predicate | None = None, flat: bool = True) -> Page:
    """One page: as flat buffers for Arrow (built per page, see store.pull_page), as columns
    for big JSON pages and filtered pages, as message objects for small JSON pages (the
    columnar path has a fixed cost).
    With a property filter ``flt``, up to ``_FILTER_SCAN`` units are read and the matches kept."""
    if flt is not None:
        page = await _get(broker, topic, qid, offset, max(n, _FILTER_SCAN), tags, arrow, flat=False)
        assert not isinstance(page, PullColumns)
        return apply_filter(page, flt, n)
    store, max_bytes = broker.store, broker.settings.limits.max_pull_bytes
    small = not arrow and (n <= _SMALL_PAGE or store.max_offset(topic, qid) - offset <= _SMALL_PAGE)
    fetch: Any = store.get_messages if small else store.get_message_batch
    inline = n <= _INLINE_PULL_MAX or small
    if arrow and flat:
        fetch = store.get_message_columns
        cq = store.queues.get(topic, qid)
        inline = inline or (not tags and page_is_recent(store.commitlog, cq, offset, _WARM_LOG_BYTES))
    if inline:
        # settle=False: never block the event loop; the pull handler settles in a thread instead.
        result: Page = fetch(topic, qid, offset, n, tags, max_bytes, settle=False)
    else:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(None, functools.partial(fetch, settle=False), topic, qid, offset, n,
                                            tags, max_bytes)
    return _known_queue(result, offset)


def _page_len(result: Page) -> int:
    if isinstance(result, PullColumns):
        return len(result)
    return len(result.batch) if isinstance(result, PullBatch) else len(result.messages)


def _known_queue(result: Page, offset: int) -> Page:
    """A queue the broker knows but the store never wrote is empty, not missing."""
    if result.status != GetStatus.NO_QUEUE:
        return result
    status = GetStatus.NO_NEW_MESSAGE if offset == 0 else GetStatus.OFFSET_OVERFLOW
    return dataclasses.replace(result, status=status, next_offset=0, min_offset=0, max_offset=0)


async def _long_poll(request: Request, topic: str, qid: int, result: Page, n: int,
                     tags: frozenset[str] | None, wait_ms: int, arrow: bool, flt: Predicate | None = None) -> Page:
    """Hold the pull until the queue grows (woken by the reput thread) or the wait ends; the caller's
    permissions are checked again each time it wakes (at least every second)."""
    broker: Broker = request.app.state.broker
    assert broker.waiters is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    while result.status in _WAIT_STATUSES and broker.ready:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        offset = result.next_offset
        event = broker.waiters.register(topic, qid)
        try:
            while broker.queue_range(topic, qid)[1] <= offset and not event.is_set() and remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, _RECHECK_S))
                recheck(request)  # a user removed while parked gets 401, not the data
                remaining = deadline - loop.time()
        finally:
            broker.waiters.unregister(topic, qid, event)
        recheck(request)
        result = await _get(broker, topic, qid, offset, n, tags, arrow, flt)
    return result


@router.get("/v1/topics/{topic}/queues/{queue_id}/messages", openapi_extra=PULL_DOC, summary="Pull messages")
@requires(Topic("path:topic", "Sub"), Group("query:group", "Sub"), query=_PULL_QUERY)
async def pull(request: Request) -> Response:
    """Read a page of one queue as JSON or Arrow, optionally long polling."""
    started = time.perf_counter()
    topic: str = request.path_params["topic"]
    queue_id: str = request.path_params["queue_id"]
    broker: Broker = request.app.state.broker
    q = query_of(request.scope)
    qid = int_param({"queue_id": queue_id}, "queue_id", None, BadQueueIdError)
    offset = int_param(q, "offset", None, BadOffsetError)
    arrow = ARROW_STREAM in request.headers.get("accept", "")
    limits = broker.settings.limits
    cap = limits.max_pull_messages_arrow if arrow else limits.max_pull_messages_json
    n = int_param(q, "max_messages", limits.default_pull_messages, top=(1, cap, "[limits] max_pull_messages_"
                                                                         + ("arrow" if arrow else "json")))
    wait_ms = int_param(q, "wait_ms", 0, top=(0, limits.max_wait_ms, "[limits] max_wait_ms"))
    group = q.get("group")
    if group is not None:
        validate_group_name(group)  # an empty or illegal name is a mistake, not "no group"
        broker.groups.check_enabled(group)
    cfg = broker.topics.for_pull(topic)
    cfg.check_queue(qid)
    tags = _tags(q.get("tags"))
    flt = compile_filter(q["filter"]) if q.get("filter") else None
    result = await _get(broker, topic, qid, offset, n, tags, arrow, flt)
    parks = wait_ms > 0 and result.status in _WAIT_STATUSES  # parks now: woken when the queue grows
    if result.status in _TAIL_STATUSES and broker.store.dispatch_behind and not parks:  # read your writes
        await asyncio.get_running_loop().run_in_executor(None, broker.settle)
        result = await _get(broker, topic, qid, offset, n, tags, arrow, flt)
    if wait_ms > 0 and result.status in _WAIT_STATUSES:
        ticket: Ticket | None = request.scope.get(TICKET_KEY)
        with ticket.parked() if ticket is not None else contextlib.nullcontext():  # parked: no slot held
            result = await _long_poll(request, topic, qid, result, n, tags, wait_ms, arrow, flt)
    status = result.status.value
    m = broker.metrics
    m.pull_requests.inc(status=status)
    m.pull_messages.inc(_page_len(result), topic=topic)
    m.pull_latency.observe(time.perf_counter() - started)
    if isinstance(result, PullBatch | PullColumns) and arrow:
        headers = {"X-Sparkmq-Status": status, "X-Sparkmq-Next-Offset": str(result.next_offset),
                   "X-Sparkmq-Min-Offset": str(result.min_offset), "X-Sparkmq-Max-Offset": str(result.max_offset)}
        if result.damaged is not None:
            headers["X-Sparkmq-Damaged"] = damaged_header(result.damaged)
        fields = parse_fields(q.get("fields"))
        body = (columns_to_arrow(result, fields) if isinstance(result, PullColumns)
                else batch_to_arrow(result.batch, fields))
        return Response(body, media_type=ARROW_STREAM, headers=headers)
    assert not isinstance(result, PullColumns)
    messages = batch_to_json(result.batch) if isinstance(result, PullBatch) else [
        message_to_json(x) for x in result.messages]
    page = {"status": status, "messages": messages, "next_offset": result.next_offset,
            "min_offset": result.min_offset, "max_offset": result.max_offset}
    if result.damaged is not None:
        page["damaged"] = damaged_to_json(result.damaged)
    return _json(page)
