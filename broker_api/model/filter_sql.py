"""Property filters: RocketMQ's SQL92 subset over message properties and tags.

    a > 5 AND region IN ('eu', 'us') AND tags IS NOT NULL

The expression is parsed once (lark, LALR, the grammar below) and compiled to
a Python predicate ``(tags, properties) -> bool``.  As in RocketMQ's
``SqlFilter``:

* identifiers name message properties; ``TAGS`` (any case) is the tag;
* every property is a string: a comparison with a number converts it, and a
  value that is not a number, like an absent property, is SQL NULL;
* three-valued logic: a comparison with NULL is unknown, ``NOT unknown`` is
  unknown, and a message is delivered only when the whole expression is true;
* operators: ``= <> != > >= < <=``, ``[NOT] BETWEEN x AND y``,
  ``[NOT] IN (...)``, ``IS [NOT] NULL``, ``[NOT] CONTAINS|STARTSWITH|ENDSWITH
  'text'``, ``AND OR NOT``, parentheses, ``TRUE FALSE``.

A bad expression raises :class:`~broker_api.errors.BadFilterError` (400
``bad_filter``) naming the position (0-based character offset) of the error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedInput, v_args
from lark.exceptions import VisitError

from ..errors import BadFilterError
from .filters import MAX_FILTER_CHARS, Predicate

__all__ = ["compile_sql"]


# Evaluated form: (tags, properties) -> True, False or None (unknown).
_Eval = Callable[[str | None, Mapping[str, str]], Any]

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*                   -> or_
?and_expr: not_expr (_AND not_expr)*                 -> and_
?not_expr: _NOT not_expr                             -> not_
         | predicate
?predicate: operand COMPARE operand                  -> compare
          | operand _IS _NULL                        -> is_null
          | operand _IS _NOT _NULL                   -> is_not_null
          | operand _BETWEEN operand _AND operand     -> between
          | operand _NOT _BETWEEN operand _AND operand -> not_between
          | operand _IN "(" literal ("," literal)* ")"         -> in_
          | operand _NOT _IN "(" literal ("," literal)* ")"    -> not_in
          | operand STRING_OP STRING                  -> string_op
          | operand _NOT STRING_OP STRING             -> not_string_op
          | "(" or_expr ")"
          | BOOLEAN                                  -> boolean
?operand: IDENT -> prop
        | literal
?literal: STRING -> string
        | NUMBER -> number
        | BOOLEAN -> boolean

COMPARE: "=" | "<>" | "!=" | ">=" | "<=" | ">" | "<"
STRING_OP.2: /(CONTAINS|STARTSWITH|ENDSWITH)\b/i
_OR.2: /OR\b/i
_AND.2: /AND\b/i
_NOT.2: /NOT\b/i
_IS.2: /IS\b/i
_NULL.2: /NULL\b/i
_IN.2: /IN\b/i
_BETWEEN.2: /BETWEEN\b/i
BOOLEAN.2: /(TRUE|FALSE)\b/i
IDENT: /(?!(?i:AND|OR|NOT|IS|NULL|IN|BETWEEN|TRUE|FALSE|CONTAINS|STARTSWITH|ENDSWITH)\b)[A-Za-z_$][A-Za-z0-9_.$\-]*/
STRING: /'([^']|'')*'/
NUMBER: /[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/
%import common.WS
%ignore WS
"""


def _num(value: Any) -> float | None:
    """A property or literal as a number, None (NULL) when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return None


def _compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        if op not in ("=", "<>", "!="):
            return None
        a, b = (str(a).lower() if isinstance(a, str) else a), (str(b).lower() if isinstance(b, str) else b)
        a, b = (a == "true" if isinstance(a, str) else a), (b == "true" if isinstance(b, str) else b)
    elif isinstance(a, float) or isinstance(b, float):  # a number on either side: compare as numbers
        a, b = _num(a), _num(b)
        if a is None or b is None:
            return None
    elif op not in ("=", "<>", "!="):
        return None  # strings are compared for equality only (RocketMQ)
    if op == "=":
        return bool(a == b)
    if op in ("<>", "!="):
        return bool(a != b)
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]  # type: ignore[operator]


def _junction(parts: list[_Eval], decisive: bool) -> _Eval:
    """AND (``decisive`` False) or OR (True) in SQL's three-valued logic: one decisive part
    decides, else any unknown (NULL) part makes the whole unknown."""
    def run(tags: str | None, props: Mapping[str, str]) -> Any:
        unknown = False
        for part in parts:
            v = part(tags, props)
            if v is decisive:
                return decisive
            unknown |= v is None
        return None if unknown else not decisive
    return run


def _and(parts: list[_Eval]) -> _Eval:
    return _junction(parts, False)


def _or(parts: list[_Eval]) -> _Eval:
    return _junction(parts, True)


def _negate(inner: _Eval) -> _Eval:
    def run(tags: str | None, props: Mapping[str, str]) -> Any:
        v = inner(tags, props)
        return None if v is None else not v
    return run


def _const(value: Any) -> _Eval:
    return lambda tags, props: value


@v_args(inline=True)
class _Compile(Transformer[Token, _Eval]):
    """Parse tree -> evaluator closures."""

    def prop(self, name: Token) -> _Eval:
        key = str(name)
        if key.upper() == "TAGS":
            return lambda tags, props: tags
        return lambda tags, props: props.get(key)

    def string(self, tok: Token) -> _Eval:
        return _const(str(tok)[1:-1].replace("''", "'"))

    def number(self, tok: Token) -> _Eval:
        return _const(float(tok))

    def boolean(self, tok: Token) -> _Eval:
        return _const(str(tok).lower() == "true")

    def compare(self, a: _Eval, op: Token, b: _Eval) -> _Eval:
        o = str(op)
        return lambda tags, props: _compare(o, a(tags, props), b(tags, props))

    def is_null(self, a: _Eval) -> _Eval:
        return lambda tags, props: a(tags, props) is None

    def is_not_null(self, a: _Eval) -> _Eval:
        return lambda tags, props: a(tags, props) is not None

    def between(self, a: _Eval, lo: _Eval, hi: _Eval) -> _Eval:
        return _and([self.compare(a, Token("COMPARE", ">="), lo), self.compare(a, Token("COMPARE", "<="), hi)])

    def not_between(self, a: _Eval, lo: _Eval, hi: _Eval) -> _Eval:
        return _negate(self.between(a, lo, hi))

    def in_(self, a: _Eval, *items: _Eval) -> _Eval:
        return _or([self.compare(a, Token("COMPARE", "="), item) for item in items])

    def not_in(self, a: _Eval, *items: _Eval) -> _Eval:
        return _negate(self.in_(a, *items))

    def string_op(self, a: _Eval, op: Token, text: Token) -> _Eval:
        needle, kind = str(text)[1:-1].replace("''", "'"), str(op).upper()
        test: Callable[[str], bool] = {"CONTAINS": lambda s: needle in s, "STARTSWITH": lambda s: s.startswith(needle),
                                       "ENDSWITH": lambda s: s.endswith(needle)}[kind]

        def run(tags: str | None, props: Mapping[str, str]) -> Any:
            v = a(tags, props)
            return None if not isinstance(v, str) else test(v)
        return run

    def not_string_op(self, a: _Eval, op: Token, text: Token) -> _Eval:
        return _negate(self.string_op(a, op, text))

    def not_(self, inner: _Eval) -> _Eval:
        return _negate(inner)

    def and_(self, *parts: _Eval) -> _Eval:
        return _and(list(parts)) if len(parts) > 1 else parts[0]

    def or_(self, *parts: _Eval) -> _Eval:
        return _or(list(parts)) if len(parts) > 1 else parts[0]


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", lexer="basic")


def _bad(expression: str, pos: int, what: str) -> BadFilterError:
    snippet = expression[max(0, pos - 10):pos + 10]
    return BadFilterError(f"filter {expression!r}: {what} at position {pos} (near {snippet!r}); "
                          "write a SQL92 condition such as a > 5 AND region IN ('eu','us')", position=pos)


def compile_sql(expression: str) -> Predicate:
    """Parse ``expression`` once; the predicate is true only when the expression is (NULL is false)."""
    if len(expression) > MAX_FILTER_CHARS:
        raise _bad(expression[:40], MAX_FILTER_CHARS, f"more than {MAX_FILTER_CHARS} characters")
    if not expression.strip():
        raise _bad(expression, 0, "empty expression")
    try:
        tree = _parser().parse(expression)
        evaluate = _Compile().transform(tree)
    except UnexpectedInput as exc:
        pos = getattr(exc, "pos_in_stream", None)
        token = getattr(exc, "token", None)
        if pos is None or pos < 0 or (token is not None and token.type == "$END"):
            pos = len(expression)
        what = "unexpected end of expression" if token is not None and token.type == "$END" else \
            f"unexpected {str(token)!r}" if token is not None else f"unexpected character {expression[pos:pos + 1]!r}"
        raise _bad(expression, pos, what) from None
    except VisitError as exc:  # pragma: no cover - the grammar only builds what the transformer knows
        raise _bad(expression, 0, str(exc.orig_exc)) from None
    if not callable(evaluate):  # pragma: no cover
        raise _bad(expression, 0, "not a condition")
    return lambda tags, props: evaluate(tags, props) is True
