"""``sparkmq pop``, ``sparkmq ack`` and ``sparkmq dlq``: POP consumption and the dead-letter queue.

    sparkmq pop orders --group billing --max 10 --invisible-ms 30000   messages with their receipts
    sparkmq ack --group billing RECEIPT [RECEIPT ...]                  finish them
    sparkmq dlq billing                                                what %DLQ%billing holds

Receipts name the broker that issued them (``broker-a@0:1:1763...``), so ``ack``
reaches the right broker with ``--namesrv`` too.  Messages go to stdout,
counts to stderr (``cli/common.py``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.text import Text

from .common import DEFAULT_URL, AsJson, Namesrv, Url, console, fail, note, open_client, print_json, print_table

if TYPE_CHECKING:
    from ..client import DeadLetter, PopMessage

__all__ = ["ack_command", "dlq_command", "pop_command"]


def pop_command(
    topic: Annotated[str, typer.Argument(help="Topic to pop from (every queue, on every broker serving it).")],
    group: Annotated[str, typer.Option("--group", help="Consumer group (required).")],
    max_messages: Annotated[int, typer.Option("--max", min=1, max=1000, help="Most messages to pop.")] = 32,
    invisible_ms: Annotated[int, typer.Option(
        "--invisible-ms", min=100, help="Ms a popped message stays invisible; not acked by then, it comes back.")] = 60_000,
    wait_ms: Annotated[int, typer.Option("--wait-ms", min=0, help="Wait this long (ms) for a message.")] = 0,
    filter: Annotated[str | None, typer.Option(
        "--filter", help="SQL92 property filter, e.g. \"amount > 5 AND region = 'eu'\".")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Pop messages for a consumer group, each with its ack receipt.

    A message not acked within --invisible-ms is delivered again (through
    %RETRY%GROUP, with reconsume_times + 1), and after max_reconsume_times it
    moves to %DLQ%GROUP (see `sparkmq dlq`).

    Examples:

      sparkmq pop orders --group billing --max 10

      sparkmq pop orders --group billing --json --wait-ms 2000 | jq -r .receipt | xargs sparkmq ack --group billing
    """
    with open_client(url, namesrv) as c:
        messages = c.pop(group, topic, max_messages, invisible_ms, wait_ms, filter)
    for m in messages:
        _show(m, as_json)
    note(f"{len(messages)} message(s) popped; ack them with `sparkmq ack --group {group} RECEIPT...`"
         if messages else "0 message(s) popped")


def _show(m: PopMessage, as_json: bool) -> None:
    if as_json:
        line = {**m.raw, "receipt": m.receipt, "broker": m.broker}
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
        sys.stdout.flush()
        return
    meta = f"{m.receipt} {m.topic} q{m.queue_id}:{m.offset}"
    if m.reconsume_times:
        meta += f" reconsume={m.reconsume_times}"
    if m.tags:
        meta += f" tags={m.tags}"
    body = m.body if m.body is not None else m.raw.get("body_base64", "")
    console.print(Text.assemble((meta, "dim"), " ", str(body)), soft_wrap=True)
    console.file.flush()


def ack_command(
    receipts: Annotated[list[str], typer.Argument(help="Receipts printed by `sparkmq pop`.")],
    group: Annotated[str, typer.Option("--group", help="Consumer group the messages were popped for.")],
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Ack popped messages so they are never delivered again.

    Per receipt: OK, ALREADY_ACKED, or EXPIRED (its invisible time passed and
    it was delivered again; ack the newer receipt). Exit status 1 unless every
    receipt answered OK or ALREADY_ACKED.

    Example:

      sparkmq ack --group billing broker-a@12:0:1763000000000
    """
    with open_client(url, namesrv) as c:
        results = c.ack(group, receipts)
    if as_json:
        print_json([{"receipt": r.receipt, "status": r.status, "broker": r.broker} for r in results])
    else:
        print_table(["receipt", "status"], [(r.receipt, r.status) for r in results], title=f"acks of {group}")
    expired = [r.receipt for r in results if r.status not in ("OK", "ALREADY_ACKED")]
    if expired:
        fail(f"{len(expired)} of {len(results)} receipt(s) expired (already delivered again): "
             f"{', '.join(expired[:3])}{' ...' if len(expired) > 3 else ''}; ack the receipt of the newer delivery")
    note(f"{len(results)} receipt(s) acked")


def dlq_command(
    group: Annotated[str, typer.Argument(help="Consumer group whose dead-letter queue (%DLQ%GROUP) to read.")],
    max_messages: Annotated[int, typer.Option("--max", min=1, help="Most messages to list.")] = 1000,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """List a group's dead-letter messages with their origin.

    A message lands there after max_reconsume_times deliveries without an ack
    (PUT /v1/groups/GROUP {"max_reconsume_times": N} sets it per group).

    Example:

      sparkmq dlq billing --json
    """
    with open_client(url, namesrv) as c:
        dead = c.dlq(group, max_messages)
    if as_json:
        print_json([_dead_json(d) for d in dead])
    else:
        print_table(["broker", "msg id", "original topic", "original msg id", "reconsumed", "body"],
                    [(d.broker, d.msg_id, d.origin_topic, d.origin_msg_id, d.reconsume_times, _short(d.body))
                     for d in dead], title=f"%DLQ%{group}")
    note(f"{len(dead)} dead-lettered message(s) in %DLQ%{group}")


def _dead_json(d: DeadLetter) -> dict[str, object]:
    return {"broker": d.broker, "msg_id": d.msg_id, "origin_topic": d.origin_topic, "origin_msg_id": d.origin_msg_id,
            "reconsume_times": d.reconsume_times, "queue_id": d.queue_id, "offset": d.offset, "body": d.body,
            "store_timestamp": d.store_timestamp}


def _short(body: str | None, width: int = 60) -> str:
    text = body or ""
    return text if len(text) <= width else text[: width - 3] + "..."
