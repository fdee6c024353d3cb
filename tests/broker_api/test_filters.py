"""SQL92 property filters: the expression language, and pulls over HTTP that use it."""

from __future__ import annotations

import time

import httpx
import pytest

from broker_api.errors import BadFilterError
from broker_api.model.filters import compile_filter


@pytest.mark.parametrize("expr,tags,props,expected", [
    ("a > 5 AND region IN ('eu','us') AND tags IS NOT NULL", "T", {"a": "6", "region": "eu"}, True),
    ("a > 5 AND region IN ('eu','us') AND tags IS NOT NULL", None, {"a": "6", "region": "eu"}, False),
    ("a > 5", None, {"a": "5"}, False),
    ("a > 5", None, {}, False),                      # unknown property: NULL
    ("NOT a > 5", None, {}, False),                  # NOT NULL is still NULL
    ("NOT a > 5", None, {"a": "1"}, True),
    ("a > 5", None, {"a": "abc"}, False),            # not a number: NULL
    ("a = 'x' OR b IS NULL", None, {}, True),
    ("a BETWEEN 1 AND 3", None, {"a": "2.5"}, True),
    ("a NOT BETWEEN 1 AND 3", None, {"a": "7"}, True),
    ("region NOT IN ('eu')", None, {"region": "us"}, True),
    ("region NOT IN ('eu')", None, {}, False),
    ("name STARTSWITH 'ab' and x CONTAINS 'z'", None, {"name": "abc", "x": "xyz"}, True),
    ("TAGS = 'TagA'", "TagA", {}, True),
    ("s = 'it''s'", None, {"s": "it's"}, True),
    ("flag = TRUE", None, {"flag": "true"}, True),
    ("(a > 1 OR b > 1) AND c <> 2", None, {"b": "3", "c": "1"}, True),
])
def test_expressions_follow_sql_null_semantics(expr: str, tags: str | None, props: dict[str, str],
                                               expected: bool) -> None:
    assert compile_filter(expr)(tags, props) is expected


@pytest.mark.parametrize("expr,position", [("a >", 3), ("a > 5 AND", 9), ("a == 5", 3), ("a > 5 )", 6),
                                           ("region IN ('eu'", 15), ("", 0), ("a > 'x", 4)])
def test_bad_expressions_name_the_position(expr: str, position: int) -> None:
    with pytest.raises(BadFilterError) as info:
        compile_filter(expr)
    assert info.value.position == position
    assert f"position {position}" in info.value.message


def test_pull_with_a_filter_over_http(client: httpx.Client) -> None:
    client.post("/v1/topics", json={"name": "f", "queues": 1})
    msgs = [{"body": f"m{i}", "tags": "T" if i % 2 else None,
             "properties": {"a": str(i), "region": "eu" if i % 3 else "asia"}} for i in range(30)]
    assert client.post("/v1/topics/f/messages", json={"messages": msgs}).status_code == 200
    expr = "a > 5 AND region IN ('eu','us') AND tags IS NOT NULL"
    want = [f"m{i}" for i in range(30) if i > 5 and i % 3 and i % 2]
    got, offset = [], 0
    deadline = time.monotonic() + 10
    while offset < 30 and time.monotonic() < deadline:
        page = client.get("/v1/topics/f/queues/0/messages",
                          params={"offset": offset, "max_messages": 4, "filter": expr}).json()
        got += [m["body"] for m in page["messages"]]
        offset = page["next_offset"]
    assert got == want
    bad = client.get("/v1/topics/f/queues/0/messages", params={"offset": 0, "filter": "a > AND"})
    assert bad.status_code == 400
    assert bad.json()["error"] == "bad_filter" and "position 4" in bad.json()["message"]
