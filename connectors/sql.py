"""Read-only SQL over the mirror table with delta-rs's embedded DataFusion engine.

The mirror table is registered as ``messages``; the caller may pass more
tables by name (the broker passes each table topic as ``<topic>`` and its
dead-letter table as ``<topic>__dlq``; connectors never read the broker's
metadata themselves).  A named table with nothing on disk yet is left out.
Names are registered as quoted identifiers, so a topic ``my-topic`` or
``Orders`` is queried as ``"my-topic"`` / ``"Orders"`` (unquoted names fold
to lower case, as in standard SQL).
Only queries run: a statement may
not contain a writing or file-touching keyword (COPY, INSERT, CREATE, ...)
outside string literals and comments; everything else goes to DataFusion,
whose parser and planner messages are passed on unchanged (DataFusion itself
refuses more than one statement).

Limits: at most ``max_rows`` rows come back (the schema metadata key
``sparkmq.truncated`` says whether more were available), and a statement
running longer than ``timeout_s`` raises :class:`SqlTimeoutError`.  DataFusion
cannot be interrupted from Python, so a timed-out statement finishes in the
background; at most ``_MAX_RUNNING`` statements run at once, later ones wait
for a slot within their own timeout.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from queue import Empty, Queue

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, TableNotFoundError

from .errors import SqlError, SqlTimeoutError

__all__ = ["run_sql", "TABLE_NAME", "TRUNCATED_KEY", "is_truncated"]

TABLE_NAME = "messages"
TRUNCATED_KEY = b"sparkmq.truncated"
_MAX_RUNNING = 2
_slots = threading.BoundedSemaphore(_MAX_RUNNING)
_FORBIDDEN = {
    "COPY", "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER",
    "TRUNCATE", "SET", "RESET", "PREPARE", "EXECUTE", "DEALLOCATE", "EXTERNAL", "LOCATION",
}
_LITERALS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)
_WORD = re.compile(r"[A-Za-z_]+")


def run_sql(table_uri: str | None, sql: str, *, max_rows: int, timeout_s: float,
            tables: Mapping[str, str] | None = None) -> pa.Table:
    """Run one read-only statement over the table at ``table_uri`` (as ``messages``) and ``tables`` (name -> URI).

    ``table_uri`` None: no mirror, only ``tables``."""
    check_read_only(sql)
    deadline = time.monotonic() + timeout_s
    if not _slots.acquire(timeout=max(0.0, timeout_s)):
        raise SqlTimeoutError(f"no SQL slot free within {timeout_s:g} s; {_MAX_RUNNING} statements are running")
    answers: Queue[pa.Table | BaseException] = Queue(maxsize=1)
    worker = threading.Thread(
        target=_execute_into, args=(answers, _named(table_uri, tables), sql, max_rows), name="sparkmq-sql",
        daemon=True,
    )
    worker.start()
    try:
        answer = answers.get(timeout=max(0.0, deadline - time.monotonic()))
    except Empty:
        raise SqlTimeoutError(f"statement ran longer than {timeout_s:g} s; narrow it with WHERE or LIMIT") from None
    if isinstance(answer, BaseException):
        raise answer
    return answer


def is_truncated(table: pa.Table) -> bool:
    """Whether ``run_sql`` cut the answer at ``max_rows``."""
    meta = table.schema.metadata or {}
    return meta.get(TRUNCATED_KEY) == b"true"


def check_read_only(sql: str) -> None:
    """Raise SqlError unless ``sql`` is a single query."""
    words = _WORD.findall(_LITERALS.sub(" ", sql))
    if not words:
        raise SqlError("empty SQL statement")
    bad = sorted({w.upper() for w in words} & _FORBIDDEN)
    if bad:
        raise SqlError(f"SQL over the mirror is read-only: {', '.join(bad)} is not allowed; write a query")


def _named(table_uri: str | None, tables: Mapping[str, str] | None) -> dict[str, str]:
    named = dict(tables or {})
    if table_uri is not None:
        named[TABLE_NAME] = table_uri
    return named


def _execute_into(answers: Queue, named: dict[str, str], sql: str, max_rows: int) -> None:
    try:
        answers.put(_execute(named, sql, max_rows))
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
        answers.put(exc)
    finally:
        _slots.release()


def _open_tables(named: dict[str, str]) -> QueryBuilder:
    """A QueryBuilder with every table of ``named`` that exists on disk; SqlError when none does."""
    builder, missing = QueryBuilder(), []
    for name, uri in sorted(named.items()):
        try:
            builder.register(_quoted(name), DeltaTable(uri))
        except TableNotFoundError:
            missing.append((name, uri))
    if len(missing) == len(named):
        where = ", ".join(uri for _, uri in missing) or "(no table given)"
        raise SqlError(f"no Delta table at {where}; is the mirror enabled (or a table topic configured) "
                       "and has it written yet?")
    return builder


def _quoted(name: str) -> str:
    """The name as a quoted SQL identifier: kept exactly (case, dots, dashes); unquoted queries fold to lower."""
    return '"' + name.replace('"', '""') + '"'


def _execute(named: dict[str, str], sql: str, max_rows: int) -> pa.Table:
    builder = _open_tables(named)
    try:
        reader = pa.RecordBatchReader.from_stream(builder.execute(sql))
        batches, rows, truncated = [], 0, False
        for batch in reader:
            if rows + batch.num_rows > max_rows:
                batches.append(batch.slice(0, max_rows - rows))
                truncated = True
                break
            batches.append(batch)
            rows += batch.num_rows
    except DeltaError as exc:
        raise SqlError(str(exc)) from exc
    result = pa.Table.from_batches(batches, schema=reader.schema)
    return _plain_types(result).replace_schema_metadata({TRUNCATED_KEY: b"true" if truncated else b"false"})


def _plain_types(table: pa.Table) -> pa.Table:
    """Replace string_view/binary_view columns (DataFusion's) with string/binary."""
    fields = [pa.field(f.name, _plain(f.type), f.nullable) for f in table.schema]
    target = pa.schema(fields)
    return table if target.equals(table.schema) else table.cast(target)


def _plain(t: pa.DataType) -> pa.DataType:
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_plain(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), _plain(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in t])
    return t
