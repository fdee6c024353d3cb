"""Arrow query results as JSON-ready columns and rows (for /v1/sql and the CLI).

Type mapping: binary → base64 text, map → object, list → array,
timestamp/date → ISO 8601 text, decimal → text, everything else as Arrow's
Python value.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any

import pyarrow as pa

__all__ = ["table_rows", "json_value"]


def table_rows(table: pa.Table) -> tuple[list[str], list[list[Any]]]:
    """Column names and row-major JSON-ready values."""
    columns = [_column_values(table.column(i).combine_chunks(), table.schema.field(i).type)
               for i in range(table.num_columns)]
    return list(table.column_names), [list(row) for row in zip(*columns)] if columns else []


def _column_values(array: pa.Array, kind: pa.DataType) -> list[Any]:
    return [json_value(v, kind) for v in array.to_pylist()]


def json_value(value: Any, kind: pa.DataType) -> Any:
    """One Python value of Arrow type ``kind``, made JSON-ready."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {str(k): json_value(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return [json_value(v, kind.value_type) for v in value]
    if pa.types.is_struct(kind):
        return {f.name: json_value(value.get(f.name), f.type) for f in kind}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
