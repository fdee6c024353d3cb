"""Schema of a table topic: JSON Schema and Spark DDL to Arrow, spec checks, evolution rules."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connectors.errors import SchemaChangeError, TableSpecError
from connectors.tables import TableSpec, arrow_schema, check_evolution, table_schema, validate_spec

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "qty": {"type": ["integer", "null"]},
        "paid": {"type": "boolean"},
        "ts": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "status": {"enum": ["new", "paid"]},
        "items": {"type": "array", "items": {"type": "string"}},
        "customer": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    "required": ["order_id"],
}


def typed(schema: object, **kw: object) -> TableSpec:
    return TableSpec.from_json({"mode": "typed", "schema": schema, **kw})


def test_json_schema_maps_to_arrow_types() -> None:
    schema = arrow_schema(typed(ORDER))
    assert schema == pa.schema([
        pa.field("order_id", pa.string(), nullable=False),
        pa.field("amount", pa.float64()),
        pa.field("qty", pa.int64()),
        pa.field("paid", pa.bool_()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("status", pa.string()),
        pa.field("items", pa.list_(pa.field("item", pa.string()))),
        pa.field("customer", pa.struct([pa.field("name", pa.string(), nullable=False)])),
    ])


def test_spark_ddl_maps_to_arrow_types() -> None:
    ddl = ("order_id STRING NOT NULL, amount DECIMAL(12,2), ts TIMESTAMP, n INT, big BIGINT, d DATE, "
           "tags ARRAY<STRING>, addr STRUCT<city: STRING, zip STRING> COMMENT 'where'")
    schema = arrow_schema(typed(ddl))
    assert schema.field("order_id").nullable is False
    assert schema.field("amount").type == pa.decimal128(12, 2)
    assert schema.field("n").type == pa.int32() and schema.field("big").type == pa.int64()
    assert schema.field("tags").type == pa.list_(pa.string())
    assert schema.field("addr").type == pa.struct([("city", pa.string()), ("zip", pa.string())])


def test_typed_table_has_metadata_and_partition_columns() -> None:
    names = table_schema(typed(ORDER, partition_by="day(ts)")).names
    assert names[:9] == [f.name for f in arrow_schema(typed(ORDER))]
    assert "_sparkmq_commitlog_offset" in names and "_sparkmq_key" in names and names[-1] == "_sparkmq_day"
    assert all(f.nullable for f in table_schema(typed(ORDER)))


@pytest.mark.parametrize(("spec", "words"), [
    ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, ["'a'", "$ref"]),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, ["'a'", "properties"]),
    ({"type": "object", "properties": {"_sparkmq_key": {"type": "string"}}}, ["reserved"]),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, ["'a'", "items"]),
    ("a STRING, b MAP<STRING,STRING>", ["'b'", "MAP"]),
    ("a STRING,, b INT", ["DDL"]),
])
def test_bad_schemas_are_refused_naming_the_field(spec: object, words: list[str]) -> None:
    with pytest.raises(TableSpecError) as err:
        validate_spec(typed(spec))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_bad_partition_and_upsert_settings_are_refused() -> None:
    with pytest.raises(TableSpecError, match="partition_by"):
        validate_spec(typed(ORDER, partition_by="hour(order_id)"))
    with pytest.raises(TableSpecError, match="upsert"):
        validate_spec(TableSpec.from_json({"mode": "raw", "write_mode": "upsert"}))
    validate_spec(typed(ORDER, partition_by="status", write_mode="upsert"))
    validate_spec(TableSpec.from_json({"mode": "raw", "partition_by": "hour(store_timestamp)"}))


def test_adding_an_optional_field_is_an_allowed_change() -> None:
    wider = {**ORDER, "properties": {**ORDER["properties"], "note": {"type": "string"}}}  # type: ignore[dict-item]
    check_evolution(typed(ORDER), typed(wider))
    check_evolution(typed("a STRING NOT NULL"), typed("a STRING, b INT"))  # required -> optional is fine


@pytest.mark.parametrize(("old", "new", "field"), [
    ("a BIGINT, b STRING", "a INT, b STRING", "a"),
    ("a BIGINT, b STRING", "a BIGINT", "b"),
    ("a BIGINT, b STRING", "a BIGINT, b STRING NOT NULL", "b"),
    ("a BIGINT", "a BIGINT, c STRING NOT NULL", "c"),
    ("s STRUCT<x: INT, y: STRING>", "s STRUCT<x: STRING, y: STRING>", "s.x"),
])
def test_narrowing_requiring_or_removing_is_refused(old: str, new: str, field: str) -> None:
    with pytest.raises(SchemaChangeError) as err:
        check_evolution(typed(old), typed(new))
    assert err.value.field == field


def test_changing_the_layout_of_an_enabled_table_is_refused() -> None:
    with pytest.raises(SchemaChangeError) as err:
        check_evolution(typed(ORDER), typed(ORDER, write_mode="upsert"))
    assert err.value.field == "table.write_mode"
    check_evolution(TableSpec(), typed(ORDER, write_mode="upsert"))  # enabling: anything goes
