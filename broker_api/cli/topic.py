"""``sparkmq topic create|alter|list|describe|delete`` (the ``--table-*`` options: cli/table.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import (
    DEFAULT_URL,
    AsJson,
    Namesrv,
    fail,
    Url,
    open_client,
    print_json,
    print_table,
    say,
)
from .table import TableMode, TablePartitionBy, TableSchema, TableTargetLag, TableWriteMode, table_line, table_settings

__all__ = ["topic_app"]

topic_app = typer.Typer(
    help="Create, alter (table settings), list, describe and delete topics.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@topic_app.command("create")
def topic_create(
    name: Annotated[str, typer.Argument(help="Topic name: 1-127 of A-Za-z0-9_.- .")],
    queues: Annotated[int | None, typer.Option(help="Number of queues [default: the broker's default_queues].")] = None,
    perm: Annotated[str, typer.Option(help="rw | r | w")] = "rw",
    cluster: Annotated[str | None, typer.Option(help="With --namesrv: only this cluster's masters.")] = None,
    table_mode: TableMode = None,
    table_schema: TableSchema = None,
    table_write_mode: TableWriteMode = None,
    table_partition_by: TablePartitionBy = None,
    table_target_lag: TableTargetLag = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Create a topic and its optional table (--namesrv: every master).

    Creating a topic that exists with the same settings is a no-op; with
    different settings it is an error.

    Examples:

      sparkmq topic create orders --queues 4

      sparkmq topic create payments --queues 2 --namesrv 127.0.0.1:9876

      sparkmq topic create orders --table-mode typed --table-schema "order_id STRING, region STRING, amount DOUBLE"
    """
    table = table_settings(table_mode, table_schema, table_write_mode, table_partition_by, table_target_lag)
    with open_client(url, namesrv) as c:
        created = c.create_topic(name, queues, perm, cluster=cluster, table=table or None)
    for broker, t in created.items():
        say(f"topic {t['name']}: {t['queues']} queues, perm {t['perm']!r}, {table_line(t.get('table'))} on {broker}")


@topic_app.command("alter")
def topic_alter(
    name: Annotated[str, typer.Argument(help="Topic to change.")],
    table_mode: TableMode = None,
    table_schema: TableSchema = None,
    table_write_mode: TableWriteMode = None,
    table_partition_by: TablePartitionBy = None,
    table_target_lag: TableTargetLag = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Change a topic's table settings (only the options given change).

    Enabling a table backfills it from the oldest retained message; a new
    schema may only add optional fields (a narrowing change is refused).

    Examples:

      sparkmq topic alter orders --table-mode raw

      sparkmq topic alter orders --table-schema @orders.schema.json

      sparkmq topic alter orders --table-mode off
    """
    table = table_settings(table_mode, table_schema, table_write_mode, table_partition_by, table_target_lag)
    if not table:
        fail("nothing to change; give at least one --table-* option (see --help)")
    with open_client(url, namesrv) as c:
        altered = c.alter_topic(name, table)
    for broker, t in altered.items():
        say(f"topic {t['name']}: {table_line(t.get('table'))} on {broker}")


@topic_app.command("list")
def topic_list(as_json: AsJson = False, url: Url = DEFAULT_URL, namesrv: Namesrv = None) -> None:
    """List topics with their queues, permissions and table mode.

    Examples:

      sparkmq topic list

      sparkmq topic list --json
    """
    with open_client(url, namesrv) as c:
        per_broker = c.topics()
    rows = sorted((t["name"], b, t["queues"], t["perm"], (t.get("table") or {}).get("mode", "off"))
                  for b, topics in per_broker.items() for t in topics)
    if as_json:
        print_json([{"topic": name, "broker": b, "queues": q, "perm": p, "table": m} for name, b, q, p, m in rows])
        return
    print_table(["topic", "broker", "queues", "perm", "table"], rows, title="topics")


@topic_app.command("describe")
def topic_describe(
    name: Annotated[str, typer.Argument(help="Topic to describe.")],
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Show a topic's queues, offsets and message counts.

    Examples:

      sparkmq topic describe orders

      sparkmq topic describe orders --json
    """
    with open_client(url, namesrv) as c:
        per_broker = c.describe_topic(name)
    if as_json:
        print_json(per_broker)
        return
    for broker, t in per_broker.items():
        rows = [(q["queue_id"], q["min_offset"], q["max_offset"], q["max_offset"] - q["min_offset"])
                for q in t["queue_offsets"]]
        print_table(["queue", "min offset", "max offset", "messages"], rows,
                    title=f"{t['name']} on {broker} (perm {t['perm']!r}, {t['messages']} messages{_table_note(t)})")


def _table_note(topic: dict[str, Any]) -> str:
    """``, table typed (...): N rows, M dead letters`` for a table topic; "" without a table."""
    status = topic.get("table_status")
    if not status:
        return ""
    return f", {table_line(topic.get('table'))}: {status.get('rows')} rows, {status.get('dlq_rows')} dead letters"


@topic_app.command("delete")
def topic_delete(
    name: Annotated[str, typer.Argument(help="Topic to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Delete a topic and its messages.

    With --namesrv it is deleted on every broker serving it. Asks first
    unless --yes is given.

    Example:

      sparkmq topic delete orders --yes
    """
    if not yes:
        typer.confirm(f"delete topic {name!r} and all its messages?", abort=True)
    with open_client(url, namesrv) as c:
        brokers = c.delete_topic(name)
    say(f"deleted topic {name} on {', '.join(brokers)}")
