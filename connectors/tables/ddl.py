"""Parse a Spark DDL column list into :class:`Column` trees.

Grammar (case-insensitive keywords)::

    columns := column ("," column)*
    column  := name [":"] type ["NOT NULL"] ["COMMENT" 'text']
    type    := STRING | VARCHAR(n) | CHAR(n) | BOOLEAN | TINYINT | SMALLINT | INT | BIGINT
             | FLOAT | DOUBLE | DECIMAL[(p[,s])] | DATE | TIMESTAMP
             | ARRAY<type> | STRUCT<column, ...>

Names may be quoted with backticks.  MAP, BINARY and TIMESTAMP_NTZ are refused
(JSON bodies have no way to carry them unambiguously).
"""

from __future__ import annotations

import re

from ..errors import TableSpecError
from .columns import Column

__all__ = ["parse_ddl"]

_TOKEN = re.compile(r"\s*(`[^`]+`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")
_SIMPLE = {
    "string": "string", "varchar": "string", "char": "string", "boolean": "bool", "bool": "bool",
    "tinyint": "int8", "byte": "int8", "smallint": "int16", "short": "int16", "int": "int32",
    "integer": "int32", "bigint": "int64", "long": "int64", "float": "float32", "real": "float32",
    "double": "float64", "date": "date", "timestamp": "timestamp",
}


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise TableSpecError(f"table.schema DDL: cannot read {text[pos:pos + 20]!r}")
            self.items.append(m.group(1))
            pos = m.end()
        self.pos = 0

    def peek(self) -> str | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def take(self, expect: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expect is not None and tok.lower() != expect):
            want = f"{expect!r}" if expect else "more text"
            raise TableSpecError(f"table.schema DDL: expected {want} at token {self.pos}, got {tok!r}")
        self.pos += 1
        return tok


def parse_ddl(text: str) -> tuple[Column, ...]:
    """The columns of ``text``; raise TableSpecError naming what could not be read."""
    tokens = _Tokens(text)
    columns = _columns(tokens, closing=None)
    if tokens.peek() is not None:
        raise TableSpecError(f"table.schema DDL: unexpected {tokens.peek()!r} after the last column")
    return columns


def _columns(tokens: _Tokens, closing: str | None) -> tuple[Column, ...]:
    out: list[Column] = []
    while True:
        out.append(_column(tokens))
        if tokens.peek() != ",":
            break
        tokens.take(",")
        if closing is None and tokens.peek() is None:
            break
    return tuple(out)


def _column(tokens: _Tokens) -> Column:
    name = tokens.take().strip("`")
    if tokens.peek() == ":":
        tokens.take(":")
    col = _type(tokens, name)
    if (tokens.peek() or "").lower() == "not":
        tokens.take("not")
        tokens.take("null")
        col = Column(col.name, col.kind, True, col.children, col.enum, col.precision, col.scale)
    if (tokens.peek() or "").lower() == "comment":
        tokens.take("comment")
        tokens.take()
    return col


def _type(tokens: _Tokens, name: str) -> Column:
    word = tokens.take().lower()
    if word == "array":
        tokens.take("<")
        item = _type(tokens, "item")
        tokens.take(">")
        return Column(name, "list", False, (item,))
    if word == "struct":
        tokens.take("<")
        fields = _columns(tokens, closing=">")
        tokens.take(">")
        return Column(name, "struct", False, fields)
    if word in ("decimal", "dec", "numeric"):
        return _decimal(tokens, name)
    if word in ("varchar", "char"):
        tokens.take("(")
        tokens.take()
        tokens.take(")")
    if word in _SIMPLE:
        return Column(name, _SIMPLE[word], False)
    raise TableSpecError(
        f"table.schema DDL column {name!r}: type {word.upper()!r} is not supported; use STRING, BOOLEAN, "
        "TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), DATE, TIMESTAMP, ARRAY<...> or STRUCT<...>"
    )


def _decimal(tokens: _Tokens, name: str) -> Column:
    precision, scale = 10, 0
    if tokens.peek() == "(":
        tokens.take("(")
        precision = _int(tokens.take(), name)
        if tokens.peek() == ",":
            tokens.take(",")
            scale = _int(tokens.take(), name)
        tokens.take(")")
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise TableSpecError(f"table.schema DDL column {name!r}: DECIMAL({precision},{scale}) needs 1 <= p <= 38 "
                             "and 0 <= s <= p")
    return Column(name, "decimal", False, precision=precision, scale=scale)


def _int(token: str, name: str) -> int:
    if not token.isdigit():
        raise TableSpecError(f"table.schema DDL column {name!r}: expected a number, got {token!r}")
    return int(token)
