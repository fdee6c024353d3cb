"""Say which field of one rejected body is wrong, and why (runs only for bodies the batch decoder refused)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import orjson

from .columns import Column

__all__ = ["diagnose"]

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_JSON_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def diagnose(body: bytes, columns: tuple[Column, ...], exc: Exception | None) -> tuple[str | None, str]:
    """``(field, error)`` for a body that did not decode; field is None when the whole body is wrong."""
    if not body.strip():
        return None, "body is empty (a tombstone only deletes in write_mode 'upsert')"
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        return None, f"body is not JSON: {err}"
    if not isinstance(obj, dict):
        return None, f"body is not a JSON object (got {_kind(obj)})"
    found = _check_object(obj, columns, "")
    if found is not None:
        return found
    detail = f": {exc}" if exc is not None else ""
    return None, f"body does not fit the table schema{detail}"


def _check_object(obj: dict[str, Any], columns: tuple[Column, ...], prefix: str) -> tuple[str, str] | None:
    for col in columns:
        value = obj.get(col.name)
        if value is None:
            continue
        path = f"{prefix}{col.name}"
        problem = _check_value(value, col, path)
        if problem is not None:
            return problem
    return None


def _check_value(value: Any, col: Column, path: str) -> tuple[str, str] | None:
    if col.kind == "struct":
        if not isinstance(value, dict):
            return _wrong(path, "object", value)
        return _check_object(value, col.children, f"{path}.")
    if col.kind == "list":
        if not isinstance(value, list):
            return _wrong(path, "array", value)
        for i, item in enumerate(value):
            if item is not None and (problem := _check_value(item, col.children[0], f"{path}[{i}]")):
                return problem
        return None
    return _check_scalar(value, col, path)


def _check_scalar(value: Any, col: Column, path: str) -> tuple[str, str] | None:
    kind = col.kind
    if kind == "string":
        return None if isinstance(value, str) else _wrong(path, "string", value)
    if kind == "bool":
        return None if isinstance(value, bool) else _wrong(path, "boolean", value)
    if kind in _INT_BITS:
        if isinstance(value, bool) or not isinstance(value, int):
            return _wrong(path, "integer", value)
        limit = 1 << (_INT_BITS[kind] - 1)
        return None if -limit <= value < limit else (path, f"field {path!r}: {value} does not fit {kind}")
    if kind in ("float32", "float64"):
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else _wrong(path, "number", value)
    if kind == "decimal":
        return _check_decimal(value, col, path)
    if kind in ("timestamp", "date"):
        return _check_time(value, kind, path)
    return None


def _check_decimal(value: Any, col: Column, path: str) -> tuple[str, str] | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return _wrong(path, "number or numeric string", value)
    try:
        d = decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        return path, f"field {path!r}: {value!r} is not a number"
    exponent = d.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > col.scale:
        return path, f"field {path!r}: {value} has more than {col.scale} decimal places"
    if d.is_finite() and d.adjusted() + 1 > col.precision - col.scale:
        return path, f"field {path!r}: {value} does not fit {col.describe()}"
    return None


def _check_time(value: Any, kind: str, path: str) -> tuple[str, str] | None:
    want = "ISO 8601 date-time string" if kind == "timestamp" else "ISO 8601 date string"
    if not isinstance(value, str):
        return _wrong(path, want, value)
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return path, f"field {path!r}: {value!r} is not an {want}"
    return None


def _wrong(path: str, expected: str, value: Any) -> tuple[str, str]:
    return path, f"field {path!r}: expected {expected}, got {_kind(value)} {_short(value)}"


def _kind(value: Any) -> str:
    return "null" if value is None else _JSON_NAMES.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
