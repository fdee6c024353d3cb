"""Parse a JSON Schema object into :class:`Column` trees (any draft; the structural subset below).

Accepted::

    {"type": "object", "properties": {...}, "required": [...]}     -> struct (the root: the table)
    {"type": "string"}                                               -> string
    {"type": "string", "format": "date-time" | "date"}               -> timestamp (UTC) | date
    {"enum": [...]} / {"type": "string", "enum": [...]}              -> string, values checked
    {"type": "integer"} / {"type": "number"} / {"type": "boolean"}   -> int64 / float64 / bool
    {"type": "array", "items": {...}}                                -> list
    {"type": ["string", "null"]}                                     -> string (null only marks optional)

Annotations (title, description, examples, default, minimum, ...) are ignored.
Composition and references ($ref, oneOf, anyOf, allOf, not, if, patternProperties)
are refused with a TableSpecError naming the field.
"""

from __future__ import annotations

from typing import Any

from ..errors import TableSpecError
from .columns import Column

__all__ = ["parse_json_schema"]

_REFUSED = ("$ref", "oneOf", "anyOf", "allOf", "not", "if", "then", "else", "patternProperties", "$dynamicRef")
_SIMPLE = {"integer": "int64", "number": "float64", "boolean": "bool"}


def parse_json_schema(schema: dict[str, Any]) -> tuple[Column, ...]:
    """The top-level columns of an object schema."""
    root = _column("", schema, required=True, path="(root)")
    if root.kind != "struct":
        raise TableSpecError('table.schema must describe an object: {"type": "object", "properties": {...}}')
    return root.children


def _column(name: str, node: Any, *, required: bool, path: str) -> Column:
    if not isinstance(node, dict):
        raise TableSpecError(f"table.schema field {path!r}: a schema must be a JSON object, got {node!r}")
    for key in _REFUSED:
        if key in node:
            raise TableSpecError(f"table.schema field {path!r}: {key!r} is not supported; write the type inline")
    if "enum" in node:
        return _enum(name, node, required, path)
    kind = _type_name(node, path)
    if kind == "object":
        return _object(name, node, required, path)
    if kind == "array":
        if "items" not in node or not isinstance(node["items"], dict):
            raise TableSpecError(f"table.schema field {path!r}: an array needs an 'items' schema object")
        item = _column("item", node["items"], required=False, path=f"{path}[]")
        return Column(name, "list", required, (item,))
    if kind == "string":
        fmt = str(node.get("format", ""))
        return Column(name, {"date-time": "timestamp", "date": "date"}.get(fmt, "string"), required)
    if kind in _SIMPLE:
        return Column(name, _SIMPLE[kind], required)
    raise TableSpecError(
        f"table.schema field {path!r}: type {kind!r} is not supported; use string, integer, number, "
        "boolean, array or object"
    )


def _type_name(node: dict[str, Any], path: str) -> str:
    kind = node.get("type")
    if kind is None and "properties" in node:
        return "object"
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise TableSpecError(
                f"table.schema field {path!r}: type {kind!r} must name one type (plus optionally 'null')"
            )
        kind = kinds[0]
    if not isinstance(kind, str):
        raise TableSpecError(f"table.schema field {path!r}: 'type' is missing or not a string")
    return kind


def _object(name: str, node: dict[str, Any], required: bool, path: str) -> Column:
    props = node.get("properties")
    if not isinstance(props, dict) or not props:
        raise TableSpecError(
            f"table.schema field {path!r}: an object needs 'properties' naming its fields "
            "(free-form objects have no column type)"
        )
    needed = node.get("required", [])
    if not isinstance(needed, list) or not all(isinstance(r, str) for r in needed):
        raise TableSpecError(f"table.schema field {path!r}: 'required' must be a list of field names")
    missing = sorted(set(needed) - set(props))
    if missing:
        raise TableSpecError(f"table.schema field {path!r}: required field(s) {missing} are not in 'properties'")
    prefix = "" if path == "(root)" else f"{path}."
    children = tuple(
        _column(str(key), sub, required=key in needed, path=f"{prefix}{key}") for key, sub in props.items()
    )
    return Column(name, "struct", required, children)


def _enum(name: str, node: dict[str, Any], required: bool, path: str) -> Column:
    values = node["enum"]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise TableSpecError(f"table.schema field {path!r}: 'enum' must be a non-empty list of strings")
    if node.get("type", "string") not in ("string", ["string", "null"], ["null", "string"]):
        raise TableSpecError(f"table.schema field {path!r}: only string enums are supported")
    return Column(name, "string", required, enum=tuple(values))
