"""``sparkmq table status|replay-dlq`` and the ``--table-*`` options of ``sparkmq topic create|alter``.

    sparkmq topic create orders --table-mode typed --table-schema "order_id STRING, amount DOUBLE"
    sparkmq topic alter orders --table-schema @orders.schema.json
    sparkmq table status [TOPIC] [--json]
    sparkmq table replay-dlq TOPIC
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from .common import DEFAULT_URL, AsJson, Namesrv, Url, fail, open_client, print_json, print_table, say

__all__ = ["table_app", "table_settings", "TableMode", "TableSchema", "TableWriteMode", "TablePartitionBy",
           "TableTargetLag"]

table_app = typer.Typer(
    help="Table topics: status and lag, dead-letter replay.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

TableMode = Annotated[str | None, typer.Option(
    "--table-mode", help="off | raw | typed: the topic's own Delta table (typed needs --table-schema).")]
TableSchema = Annotated[str | None, typer.Option(
    "--table-schema", help="JSON Schema (a JSON object) or Spark DDL (\"id STRING, amount DOUBLE\"); @FILE reads it.")]
TableWriteMode = Annotated[str | None, typer.Option(
    "--table-write-mode", help="append | upsert (upsert: the message key is the primary key).")]
TablePartitionBy = Annotated[str | None, typer.Option(
    "--table-partition-by", help="A top-level field, day(field) or hour(field); \"\" = none.")]
TableTargetLag = Annotated[float | None, typer.Option(
    "--table-target-lag", help="Seconds: the table commits at least this often while messages arrive.")]


def table_settings(mode: str | None, schema: str | None, write_mode: str | None, partition_by: str | None,
                   target_lag: float | None) -> dict[str, Any]:
    """The ``table`` object of the given ``--table-*`` options (only those given; the broker checks values)."""
    out: dict[str, Any] = {}
    if mode is not None:
        out["mode"] = mode
    if schema is not None:
        out["schema"] = _schema(schema)
    if write_mode is not None:
        out["write_mode"] = write_mode
    if partition_by is not None:
        out["partition_by"] = partition_by or None
    if target_lag is not None:
        out["target_lag_s"] = target_lag
    return out


def _schema(text: str) -> dict[str, Any] | str:
    """``--table-schema``: @FILE is read; a value starting with ``{`` is a JSON Schema, anything else DDL."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text()
        except OSError as exc:
            fail(f"--table-schema {text}: cannot read {path}: {exc.strerror or exc}")
    if not text.lstrip().startswith("{"):
        return text.strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        fail(f"--table-schema is not valid JSON ({exc}); give a JSON Schema object or a Spark DDL string")
    if not isinstance(value, dict):
        fail("--table-schema must be a JSON object (a JSON Schema) or a Spark DDL string")
    return value


def table_line(table: dict[str, Any] | None) -> str:
    """One line describing a topic's table settings (for create/alter/describe output)."""
    if not table or table.get("mode", "off") == "off":
        return "table off"
    part = f", partition_by {table['partition_by']}" if table.get("partition_by") else ""
    return (f"table {table['mode']} ({table.get('write_mode', 'append')}{part}, "
            f"target lag {table.get('target_lag_s', 5):g} s)")


@table_app.command("status")
def table_status(
    topic: Annotated[str | None, typer.Argument(help="A table topic (default: every one).")] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Show each table topic's rows, dead-letter rows and lag.

    Examples:

      sparkmq table status

      sparkmq table status orders --json
    """
    with open_client(url, namesrv) as c:
        per_broker = c.table_status(topic)
    if as_json:
        print_json(per_broker)
        return
    if topic is not None and not any(per_broker.values()):
        fail(f"topic {topic!r} has no table; enable one with `sparkmq topic alter {topic} --table-mode typed "
             "--table-schema ...`")
    rows = [(t, b, s.get("mode"), s.get("write_mode"), s.get("rows"), s.get("dlq_rows"), s.get("lag_bytes"),
             s.get("lag_seconds"), s.get("last_error") or "")
            for b, tables in sorted(per_broker.items()) for t, s in sorted(tables.items())]
    print_table(["topic", "broker", "mode", "write mode", "rows", "dlq rows", "lag bytes", "lag s", "last error"],
                rows, title="table topics")


@table_app.command("replay-dlq")
def table_replay_dlq(
    topic: Annotated[str, typer.Argument(help="Table topic whose <topic>__dlq rows to translate again.")],
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Translate dead-letter rows again after a schema change.

    Rows that now fit move to the table; the others stay in <topic>__dlq
    with their (new) error.

    Example:

      sparkmq table replay-dlq orders
    """
    with open_client(url, namesrv) as c:
        answers = c.replay_dlq(topic)
    if as_json:
        print_json(answers)
        return
    for broker, answer in answers.items():
        say(f"{topic} on {broker}: " + ", ".join(f"{k} {v}" for k, v in sorted(answer.items())))
