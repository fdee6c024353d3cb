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
