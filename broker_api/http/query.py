"""The one query parser: every route's query string is read here, once.

``?a=1&b=2`` is split on ``&``; each name and value is percent-decoded once
(``+`` is a space), as starlette does, and *then* checked:

- a name the route does not take is ``400 bad_request`` naming it and the
  valid ones (``?max_message=5``, ``?t%6Fpic=secret`` on a route without
  ``topic``... and with one, ``t%6Fpic`` *is* ``topic``);
- a name given twice is ``400`` naming it (``?topic=orders&topic=secret``),
  unless the route lists it as repeatable (``key`` of a raw produce).

The answer is cached in the request's scope and handed to the handlers
and to the permission check alike (:func:`query_of`), so both read the
same values.  FastAPI's own parsing of a checked query string gives the
same values too, as no name is left that could be read twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote_plus

from starlette.datastructures import QueryParams
from starlette.types import Scope

from ..errors import BadQueryError, BadRequestError

__all__ = ["QUERY_KEY", "bool_param", "check_query", "int_param", "parse_pairs", "query_of"]

QUERY_KEY = "sparkmq.query"


def parse_pairs(raw: bytes | str) -> list[tuple[str, str]]:
    """``(name, value)`` pairs of a query string, each percent-decoded once."""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    pairs = []
    for part in text.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((unquote_plus(name), unquote_plus(value)))
    return pairs


def check_query(scope: Scope, allowed: Iterable[str], repeatable: Iterable[str] = ()) -> QueryParams:
    """The parsed query of ``scope``; raises BadQueryError for an unknown or repeated name."""
    cached = scope.get(QUERY_KEY)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    allowed_set, repeat = frozenset(allowed), frozenset(repeatable)
    pairs = parse_pairs(scope.get("query_string", b""))
    seen: set[str] = set()
    for name, _ in pairs:
        if name not in allowed_set:
            raise BadQueryError(f"query parameter {name!r} is not known here; {_valid(allowed_set)}")
        if name in seen and name not in repeat:
            raise BadQueryError(f"query parameter {name!r} is given more than once; give it once "
                                f"({_valid(allowed_set)})")
        seen.add(name)
    query = QueryParams(pairs)
    scope[QUERY_KEY] = query
    return query


def query_of(scope: Scope) -> QueryParams:
    """The query checked for this request (empty when none was)."""
    cached = scope.get(QUERY_KEY)
    return cached if cached is not None else QueryParams(parse_pairs(scope.get("query_string", b"")))


def _valid(allowed: frozenset[str]) -> str:
    return f"valid: {', '.join(sorted(allowed))}" if allowed else "this route takes no query parameters"


def int_param(params: Any, name: str, default: int | None, error: type[BadRequestError] = BadRequestError,
              top: tuple[int, int, str] | None = None) -> int:
    """A non-negative integer parameter; ``top`` = (least, most, the setting that caps it): outside is 400."""
    raw = params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise error(f"query parameter {name!r} is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{name}={raw!r} is not an integer; pass a non-negative integer") from None
    if value < 0:
        raise error(f"{name}={value} is negative; pass a non-negative integer")
    if top is not None and not top[0] <= value <= top[1]:
        raise error(f"{name}={value} is out of range; pass {top[0]} to {top[1]} ({top[2]})")
    return value


_BOOLS = {"true": True, "1": True, "false": False, "0": False}


def bool_param(params: Any, name: str) -> bool:
    """A boolean query parameter: true/false (or 1/0); anything else (``null``, ``yes``) is a 400."""
    raw = params.get(name)
    if raw is None:
        return False
    value = _BOOLS.get(raw.lower())
    if value is None:
        raise BadRequestError(f"{name}={raw!r} is not a boolean; pass true or false")
    return value
