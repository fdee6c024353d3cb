"""``sparkmq sql "SELECT ..."``: the embedded SQL engine over the mirror and the table topics, from the shell.

Reads the Delta tables on disk directly (no broker needed): ``messages`` is
``[mirror] table_uri`` from the settings, by default ``<data dir>/delta/messages``;
each topic with a table (``config/topics.json``) is its name, its dead letters
``<topic>__dlq``, under ``[tables] root_dir`` (by default ``<data dir>/tables``).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from .common import fail, note, print_table, validation_summary

if TYPE_CHECKING:
    from ..settings.broker import BrokerSettings

__all__ = ["sql_command"]

_FORMATS = ("table", "csv", "json")


def sql_command(
    sql: Annotated[str, typer.Argument(help="One read-only statement over `messages` and the table topics.")],
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="Broker data directory (default: ./data).")] = None,
    config: Annotated[str | None, typer.Option(help="TOML settings file (default: ./conf/broker.toml).")] = None,
    output: Annotated[str, typer.Option("--format", "-f", help="table | csv | json.")] = "table",
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    max_rows: Annotated[int | None, typer.Option(
        "--max-rows", help="Row limit (default: the mirror's sql_max_rows setting).")] = None,
) -> None:
    """Run SQL over the Delta mirror and table topics (no broker needed).

    One read-only statement over the table `messages` (columns topic,
    queue_id, queue_offset, msg_id, keys, tags, properties, body, ...), each
    table topic by its name and its dead letters as <topic>__dlq, read from
    the broker's data directory on disk.

    Examples:

      sparkmq sql "SELECT topic, count(*) AS n FROM messages GROUP BY topic"

      sparkmq sql "SELECT body FROM messages WHERE topic = 'orders' LIMIT 5" --format csv

      sparkmq sql "SELECT region, sum(amount) FROM orders GROUP BY region"
    """
    from pydantic import ValidationError  # settings (pydantic) load only when the command runs

    from ..settings.broker import load_settings

    if as_json:
        output = "json"
    if output not in _FORMATS:
        fail(f"--format must be one of {', '.join(_FORMATS)}, not {output!r}")
    try:
        settings = load_settings(config, broker={"data_dir": data_dir} if data_dir else {})
    except FileNotFoundError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(f"invalid settings: {validation_summary(exc)}")
    values = settings.mirror_values()
    limit = values["sql_max_rows"] if max_rows is None else max_rows
    mirror: str | None = values["table_uri"]
    tables = _table_topics(settings)
    if mirror and "://" not in mirror and not Path(mirror).exists():
        if not tables:
            fail(f"no mirror table at {mirror} and no table topic; run a broker with the mirror on, or pass --data-dir")
        mirror = None
    from connectors import SqlError, is_truncated, run_sql  # the SQL engine loads only when used
    from connectors.jsonrows import table_rows

    try:
        table = run_sql(mirror, sql, max_rows=limit, timeout_s=values["sql_timeout_s"], tables=tables)
    except SqlError as exc:
        fail(str(exc))
    columns, rows = table_rows(table)
    truncated = is_truncated(table)
    _print(output, columns, rows, truncated)


def _table_topics(settings: BrokerSettings) -> dict[str, str]:
    """SQL name -> table of every topic with a table in the data directory's topics.json (as the broker names them)."""
    from ..jsonfile import read_json
    from ..model.topics import TopicConfig

    root, out = settings.tables_root, {}
    for name, raw in read_json(settings.meta_path / "topics.json", {}).items():
        if TopicConfig.from_json({**raw, "name": name}).table.enabled:
            out[name], out[f"{name}__dlq"] = f"{root}/{name}", f"{root}/{name}__dlq"
    return out


def _print(output: str, columns: list[str], rows: list[list[object]], truncated: bool) -> None:
    if output == "json":
        sys.stdout.write(orjson.dumps({"columns": columns, "rows": rows, "truncated": truncated}).decode() + "\n")
    elif output == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([_csv_cell(v) for v in row] for row in rows)
    else:
        print_table(columns, rows)
        more = " (truncated; raise --max-rows)" if truncated else ""
        note(f"{len(rows)} row(s){more}")


def _csv_cell(value: object) -> object:
    if isinstance(value, (list, dict)):
        return orjson.dumps(value).decode()
    return "" if value is None else value
