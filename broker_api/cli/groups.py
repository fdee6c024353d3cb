"""``sparkmq groups [GROUP]`` and ``sparkmq offsets GROUP --topic T [--set Q=O]``."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import (
    DEFAULT_URL,
    AsJson,
    Namesrv,
    Url,
    fail,
    open_client,
    print_json,
    print_table,
)

__all__ = ["groups", "offsets"]


def groups(
    group: Annotated[str | None, typer.Argument(help="Describe this group.", show_default=False)] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """List consumer groups and their lag, or show one group.

    Lag is the number of messages between a group's committed offset and the
    end of each queue. A group disabled by slow-consumer protection is
    marked DISABLED.

    Examples:

      sparkmq groups

      sparkmq groups billing

      sparkmq groups billing --json
    """
    with open_client(url, namesrv) as c:
        if group is None:
            per_broker = c.groups()
            if as_json:
                print_json([{**g, "broker": b} for b, gs in per_broker.items() for g in gs])
                return
            rows = [(g["group"], b, ",".join(g["topics"]), g["total_lag"], g["consume_enabled"])
                    for b, gs in per_broker.items() for g in gs]
            print_table(["group", "broker", "topics", "lag", "enabled"], rows, title="consumer groups")
            return
        detail = c.group(group)
    if as_json:
        print_json(detail)
        return
    for b, g in detail.items():
        print_table(["topic", "queue", "committed", "max offset", "lag"],
                    [(r["topic"], r["queue_id"], r["committed_offset"], r["max_offset"], r["lag"])
                     for r in g["queues"]],
                    title=f"group {group} on {b}: lag {g['total_lag']}"
                    + ("" if g["consume_enabled"] else " (DISABLED)"))


def _parse_sets(items: list[str]) -> dict[int, int]:
    values: dict[int, int] = {}
    for item in items:
        qid, sep, off = item.partition("=")
        if not sep or not qid.isdigit() or not off.isdigit():
            fail(f"--set {item!r} must look like QUEUE=OFFSET, e.g. --set 0=12")
        values[int(qid)] = int(off)
    return values


def offsets(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str, typer.Option(help="Topic.", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option("--set", help="QUEUE=OFFSET to commit (repeatable).")] = None,
    broker: Annotated[str | None, typer.Option(help="With --namesrv: the broker whose queues --set sets.")] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Show or set a group's committed offsets on a topic.

    An offset is the next one the group consumes; --set rewinds or skips
    (queues not named keep theirs). Queues never committed are not listed.

    Examples:

      sparkmq offsets billing --topic orders

      sparkmq offsets billing --topic orders --set 0=0 --set 1=0
    """
    values = _parse_sets(set_) if set_ else {}
    with open_client(url, namesrv) as c:
        if values:
            c.commit_offsets(group, topic, values, broker=broker)
        got = c.get_offsets(group, topic)
    if as_json:
        print_json(got)
        return
    print_table(["broker", "queue", "next offset"],
                sorted((b, q, o) for b, per_queue in got.items() for q, o in per_queue.items()),
                title=f"group {group} on {topic}")
