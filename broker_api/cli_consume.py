"""``sparkmq consume``: tail a topic, optionally as a consumer group (one broker or all via --namesrv)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import orjson
import typer

from .cli_client import DEFAULT_URL, Namesrv, Url, console, fail, open_client
from .client import SparkMQClient

__all__ = ["consume"]

_PAGE = 100

Slot = tuple[str, int]  # (broker name, queue id)


def _start_positions(c: SparkMQClient, topic: str, queue: int | None, group: str | None,
                     start: str) -> dict[Slot, int]:
    queues = [q for q in c.queues(topic) if queue is None or q.queue_id == queue]
    if not queues:
        fail(f"topic {topic!r} has no queue {queue}")
    committed: dict[str, dict[int, int]] = c.get_offsets(group, topic) if group else {}
    return {(q.broker, q.queue_id): committed.get(q.broker, {}).get(
                q.queue_id, q.min_offset if start == "earliest" else q.max_offset)
            for q in queues}


def _show(msg: dict[str, Any], broker: str, as_json: bool, many: bool) -> None:
    if as_json:
        print(orjson.dumps({**msg, "broker": broker} if many else msg).decode(), flush=True)
        return
    body = msg.get("body", msg.get("body_base64", ""))
    meta = (f"{broker}/" if many else "") + f"q{msg['queue_id']}:{msg['offset']}"
    if msg["keys"]:
        meta += " keys=" + ",".join(msg["keys"])
    if msg["tags"]:
        meta += f" tags={msg['tags']}"
    console.print(f"[dim]{meta}[/] {body}", highlight=False, markup=True, soft_wrap=True)


def consume(
    topic: str,
    group: Annotated[Optional[str], typer.Option(help="Consumer group: start at and commit its offsets.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep waiting for new messages.")] = False,
    queue: Annotated[Optional[int], typer.Option(help="Only this queue (on every broker).")] = None,
    start: Annotated[str, typer.Option("--from", help="earliest | latest, where a group has no offset.")] = "earliest",
    max_messages: Annotated[int, typer.Option("--max", help="Stop after this many (0 = no limit).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Print a topic's messages; with --follow keep tailing until Ctrl-C."""
    if start not in ("earliest", "latest"):
        fail("--from must be earliest or latest")
    with open_client(url, namesrv) as c:
        positions = _start_positions(c, topic, queue, group, start)
        printed = _tail(c, topic, positions, group, follow, max_messages or 1 << 62, as_json)
    if not as_json:
        console.print(f"[dim]{printed} message(s)[/]", highlight=False)


def _commit(c: SparkMQClient, group: str | None, topic: str, positions: dict[Slot, int]) -> None:
    if not group:
        return
    per_broker: dict[str, dict[int, int]] = {}
    for (broker, qid), offset in positions.items():
        per_broker.setdefault(broker, {})[qid] = offset
    for broker, offsets in per_broker.items():
        c.commit_offsets(group, topic, offsets, broker=broker if c.routed else None)


def _tail(c: SparkMQClient, topic: str, positions: dict[Slot, int], group: str | None, follow: bool, limit: int,
          as_json: bool) -> int:
    """Round-robin the queues until caught up (or forever with follow); commits as it goes."""
    printed = 0
    many = c.routed
    idle_wait = max(100, 1000 // len(positions)) if follow else 0
    try:
        while printed < limit:
            got = 0
            for (broker, qid), offset in list(positions.items()):
                page = c.pull(topic, qid, offset, max_messages=min(_PAGE, limit - printed),
                              wait_ms=0 if got else idle_wait, group=group, broker=broker if many else None)
                for msg in page.messages:
                    _show(msg, broker, as_json, many)
                positions[(broker, qid)] = page.next_offset
                got, printed = got + len(page.messages), printed + len(page.messages)
                if printed >= limit:
                    break
            if got:
                _commit(c, group, topic, positions)
            elif not follow:
                break
    except KeyboardInterrupt:
        _commit(c, group, topic, positions)
    return printed
