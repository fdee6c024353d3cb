"""``sparkmq consume``: tail a topic, optionally as a consumer group."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import orjson
import typer

from .cli_client import CliClient, console, fail

__all__ = ["consume"]

_PAGE = 100


def _start_positions(c: CliClient, topic: str, qids: list[int], group: str | None, start: str) -> dict[int, int]:
    queues = {q["queue_id"]: q for q in c.call("GET", f"/v1/topics/{topic}/queues")}
    committed: dict[str, int] = {}
    if group:
        committed = c.call("GET", f"/v1/groups/{group}/offsets", params={"topic": topic})["offsets"]
    positions = {}
    for qid in qids:
        if qid not in queues:
            fail(f"topic {topic!r} has no queue {qid}")
        default = queues[qid]["min_offset"] if start == "earliest" else queues[qid]["max_offset"]
        positions[qid] = committed.get(str(qid), default)
    return positions


def _show(msg: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(orjson.dumps(msg).decode(), flush=True)
        return
    body = msg.get("body", msg.get("body_base64", ""))
    meta = f"q{msg['queue_id']}:{msg['offset']}"
    if msg["keys"]:
        meta += " keys=" + ",".join(msg["keys"])
    if msg["tags"]:
        meta += f" tags={msg['tags']}"
    console.print(f"[dim]{meta}[/] {body}", highlight=False, markup=True, soft_wrap=True)


def _drain(c: CliClient, topic: str, qid: int, offset: int, wait_ms: int, as_json: bool, budget: int,
           group: str | None) -> tuple[int, int]:
    """Pull one page from a queue, print it; returns (new offset, printed)."""
    page = c.call("GET", f"/v1/topics/{topic}/queues/{qid}/messages",
                  params={"offset": offset, "max_messages": min(_PAGE, budget), "wait_ms": wait_ms,
                          **({"group": group} if group else {})})
    for msg in page["messages"]:
        _show(msg, as_json)
    return page["next_offset"], len(page["messages"])


def consume(
    topic: str,
    group: Annotated[Optional[str], typer.Option(help="Consumer group: start at and commit its offsets.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep waiting for new messages.")] = False,
    queue: Annotated[Optional[int], typer.Option(help="Only this queue.")] = None,
    start: Annotated[str, typer.Option("--from", help="earliest | latest, where a group has no offset.")] = "earliest",
    max_messages: Annotated[int, typer.Option("--max", help="Stop after this many (0 = no limit).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    url: Annotated[str, typer.Option("--url", envvar="SPARKMQ_URL", help="Broker base URL.")] = "http://127.0.0.1:8080",
) -> None:
    """Print a topic's messages; with --follow keep tailing until Ctrl-C."""
    if start not in ("earliest", "latest"):
        fail("--from must be earliest or latest")
    with CliClient(url) as c:
        topic_info = c.call("GET", f"/v1/topics/{topic}")
        qids = [queue] if queue is not None else list(range(topic_info["queues"]))
        positions = _start_positions(c, topic, qids, group, start)
        printed = _tail(c, topic, positions, group, follow, max_messages or 1 << 62, as_json)
    if not as_json:
        console.print(f"[dim]{printed} message(s)[/]", highlight=False)


def _commit(c: CliClient, group: str | None, topic: str, positions: dict[int, int]) -> None:
    if group:
        c.call("PUT", f"/v1/groups/{group}/offsets",
               json={"topic": topic, "offsets": {str(q): o for q, o in positions.items()}})


def _tail(c: CliClient, topic: str, positions: dict[int, int], group: str | None, follow: bool, limit: int,
          as_json: bool) -> int:
    """Round-robin the queues until caught up (or forever with follow); commits as it goes."""
    printed = 0
    idle_wait = max(100, 1000 // len(positions)) if follow else 0
    try:
        while printed < limit:
            got = 0
            for qid in positions:
                positions[qid], n = _drain(c, topic, qid, positions[qid], 0 if got else idle_wait,
                                           as_json, limit - printed, group)
                got, printed = got + n, printed + n
                if printed >= limit:
                    break
            if got:
                _commit(c, group, topic, positions)
            elif not follow:
                break
    except KeyboardInterrupt:
        _commit(c, group, topic, positions)
    return printed
