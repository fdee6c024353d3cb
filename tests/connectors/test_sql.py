"""The embedded SQL engine: answers, row limit, read-only guard, engine messages, timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors import SqlError, SqlTimeoutError, is_truncated, run_sql
from connectors.jsonrows import table_rows
from connectors.rows import batch_to_table
from connectors.table import MirrorTable

from .batches import make_batch


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    uri = str(tmp_path / "messages")
    table = MirrorTable(uri, "a")
    for i, topic in enumerate(["orders", "orders", "payments"]):
        b = make_batch(i * 10_000, 40, topic=topic, props=[{"region": "eu"}] * 40)
        table.append(batch_to_table(b, from_offset=0, bodies=True), b.end_offset)
    return uri


def test_group_by_counts_what_was_written(table_uri: str) -> None:
    result = run_sql(table_uri, "SELECT topic, count(*) AS n FROM messages GROUP BY topic ORDER BY topic",
                     max_rows=100, timeout_s=30)
    assert result.to_pylist() == [{"topic": "orders", "n": 80}, {"topic": "payments", "n": 40}]
    assert not is_truncated(result)


def test_row_limit_truncates_and_says_so(table_uri: str) -> None:
    result = run_sql(table_uri, "SELECT msg_id FROM messages", max_rows=7, timeout_s=30)
    assert result.num_rows == 7 and is_truncated(result)


def test_maps_lists_and_bodies_come_back_json_ready(table_uri: str) -> None:
    sql = "SELECT keys, properties['region'] AS region, properties, body FROM messages ORDER BY commitlog_offset LIMIT 1"
    columns, rows = table_rows(run_sql(table_uri, sql, max_rows=10, timeout_s=30))
    assert columns == ["keys", "region", "properties", "body"]
    assert rows == [[["k0"], "eu", {"region": "eu"}, "Ym9keS0wLTA="]]  # base64 of b"body-0-0"


@pytest.mark.parametrize(
    "sql",
    ["COPY (SELECT 1) TO '/tmp/sparkmq-should-not-exist.csv'",
     "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
     "INSERT INTO messages SELECT * FROM messages"],
)
def test_statements_that_write_or_read_files_are_refused(table_uri: str, sql: str) -> None:
    with pytest.raises(SqlError, match="read-only"):
        run_sql(table_uri, sql, max_rows=10, timeout_s=30)
    assert not Path("/tmp/sparkmq-should-not-exist.csv").exists()


def test_keywords_inside_string_literals_are_fine(table_uri: str) -> None:
    assert run_sql(table_uri, "SELECT 'COPY' AS word", max_rows=1, timeout_s=30).to_pylist() == [{"word": "COPY"}]


def test_bad_sql_raises_with_the_engines_message(table_uri: str) -> None:
    with pytest.raises(SqlError, match="ParserError"):
        run_sql(table_uri, "SELEC topic FROM messages", max_rows=10, timeout_s=30)
    with pytest.raises(SqlError, match="No field named nosuch"):
        run_sql(table_uri, "SELECT nosuch FROM messages", max_rows=10, timeout_s=30)


def test_a_missing_table_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SqlError, match="no Delta table"):
        run_sql(str(tmp_path / "nothing"), "SELECT 1", max_rows=1, timeout_s=30)


def test_a_statement_past_its_timeout_raises(table_uri: str) -> None:
    with pytest.raises(SqlTimeoutError, match="longer than"):
        run_sql(table_uri, "SELECT count(*) FROM messages a, messages b, messages c", max_rows=1, timeout_s=0.0)


def _typed_table(uri: str, rows: list[dict[str, object]]) -> str:
    from deltalake import write_deltalake
    import pyarrow as pa

    write_deltalake(uri, pa.Table.from_pylist(rows))
    return uri


def test_named_tables_sit_next_to_messages(table_uri: str, tmp_path: Path) -> None:
    orders = _typed_table(str(tmp_path / "orders"), [{"region": "eu", "amount": 2.5}, {"region": "us", "amount": 1.0},
                                                     {"region": "eu", "amount": 1.5}])
    dlq = _typed_table(str(tmp_path / "dlq"), [{"error": "amount: not a number"}])
    tables = {"orders": orders, "orders__dlq": dlq, "Odd-Name.v1": orders}
    sql = "SELECT region, sum(amount) AS total FROM orders GROUP BY region ORDER BY region"
    assert run_sql(table_uri, sql, max_rows=10, timeout_s=30, tables=tables).to_pylist() == [
        {"region": "eu", "total": 4.0}, {"region": "us", "total": 1.0}]
    sql = ("SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM orders__dlq) AS d, "
           "(SELECT count(*) FROM \"Odd-Name.v1\") AS o")
    assert run_sql(table_uri, sql, max_rows=1, timeout_s=30, tables=tables).to_pylist() == [{"m": 120, "d": 1, "o": 3}]


def test_tables_without_the_mirror_and_a_table_not_written_yet(tmp_path: Path) -> None:
    orders = _typed_table(str(tmp_path / "orders"), [{"region": "eu"}])
    tables = {"orders": orders, "later": str(tmp_path / "not-yet")}
    assert run_sql(None, "SELECT region FROM orders", max_rows=5, timeout_s=30, tables=tables).to_pylist() == [
        {"region": "eu"}]
    with pytest.raises(SqlError, match="later"):
        run_sql(None, "SELECT * FROM later", max_rows=5, timeout_s=30, tables=tables)
