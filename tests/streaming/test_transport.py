"""The clients' plain HTTP transport: the same answers as httpx, reconnects, no httpx import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from streaming.auth import Trust
from streaming.client import BrokerClient
from streaming.errors import BrokerRequestError, BrokerUnavailableError
from streaming.options import ClientConfig
from streaming.transport import HttpxTransport, PlainTransport, open_transport

from ..conftest import BrokerProcess, _free_port
from .support import create_topic, produce, wait_visible

_FIELDS = "offset,keys,body,born_timestamp"


def test_plain_and_httpx_transports_give_the_same_answers(broker: BrokerProcess) -> None:
    create_topic(broker.url, "pp", 2)
    produce(broker.url, "pp", 900, queues=2, tags=lambda i: "a" if i % 3 else None)
    wait_visible(broker.url, "pp", 900)
    plain, full = PlainTransport(10, 5), HttpxTransport(10, 5, {})
    try:
        url = f"{broker.url}/v1/topics/pp/queues/1/messages"
        for params in ({"offset": 0, "max_messages": 100, "fields": _FIELDS}, {"offset": 7, "tags": "a"},
                       {"offset": 0, "fields": "offset,nope"}):  # the last is a 400 naming the field
            mine = plain.request("GET", url, params=params, headers={"Accept": "application/vnd.apache.arrow.stream"})
            theirs = full.request("GET", url, params=params, headers={"Accept": "application/vnd.apache.arrow.stream"})
            assert (mine.status_code, mine.content) == (theirs.status_code, theirs.content)
            assert mine.headers.get("x-SPARKMQ-next-offset") == theirs.headers.get("X-Sparkmq-Next-Offset")
            assert mine.status_code == 400 or "X-Sparkmq-Next-Offset" in mine.headers
        assert mine.status_code == 400 and b"nope" in mine.content and "x-sparkmq-next-offset" not in mine.headers
        body = b'{"messages": [{"body": "one"}]}'
        answer = plain.request("POST", f"{broker.url}/v1/topics/pp/messages", content=body,
                               headers={"Content-Type": "application/json"})
        assert answer.status_code == 200 and b"SEND_OK" in answer.content
    finally:
        plain.close()
        full.close()


def test_clients_of_plain_http_brokers_use_the_plain_transport_and_signing_clients_httpx() -> None:
    assert isinstance(open_transport(("http://a:1", "http://b:2"), Trust(token="u:s"), 5, 1), PlainTransport)
    assert isinstance(open_transport(("http://a:1",), Trust(user="u", secret="s"), 5, 1), HttpxTransport)
    assert isinstance(open_transport(("https://a:1",), Trust(), 5, 1), HttpxTransport)


def test_a_query_on_a_plain_http_broker_never_imports_httpx(broker: BrokerProcess) -> None:
    # httpx and httpcore cost ~0.1 s to import in each of a query's Python processes
    create_topic(broker.url, "noimp", 2)
    code = ("import sys\n"
            "from streaming.client import BrokerClient\n"
            "from streaming.options import ClientConfig\n"
            f"with BrokerClient(ClientConfig(({broker.url!r},))) as c:\n"
            "    assert sorted(c.queues('noimp')) == [0, 1]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


def test_pages_reach_a_task_over_one_kept_alive_connection(broker: BrokerProcess) -> None:
    create_topic(broker.url, "ka", 1)
    produce(broker.url, "ka", 300, queues=1)
    wait_visible(broker.url, "ka", 300)
    with BrokerClient(ClientConfig((broker.url,))) as client:
        offset, seen = 0, 0
        while offset < 300:
            page = client.pull_arrow("ka", 0, offset, 100, None, None, _FIELDS)
            seen += page.table.num_rows
            offset = page.next_offset
        transport = client._http
        assert isinstance(transport, PlainTransport) and len(transport._conns) == 1
        assert seen == 300
        tail = client.pull_arrow("ka", 0, 300, 100, None)
        assert (tail.status, tail.next_offset, tail.table.num_rows) == ("NO_NEW_MESSAGE", 300, 0)
        with pytest.raises(BrokerRequestError, match="nope"):
            client.pull_arrow("ka", 0, 0, 10, None, None, "offset,nope")


def test_a_broker_that_is_down_is_unavailable_and_is_used_again_when_back(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with BrokerClient(ClientConfig((url,), timeout_s=2.0)) as client:
        with pytest.raises(BrokerUnavailableError, match="is the broker running"):
            client.pull_arrow("pp", 0, 0, 10, None)
    broker = broker_factory()
    create_topic(broker.url, "back", 1)
    produce(broker.url, "back", 5, queues=1)
    wait_visible(broker.url, "back", 5)
    with BrokerClient(ClientConfig((broker.url,))) as client:
        assert client.pull_arrow("back", 0, 0, 10, None).table.num_rows == 5
        broker.stop()
        with pytest.raises(BrokerUnavailableError):
            client.pull_arrow("back", 0, 0, 10, None)
        broker.start()  # the kept-alive connection died with the broker: a new one is made
        page = client.pull_arrow("back", 0, 2, 10, None)
        assert (page.status, page.table.num_rows, page.next_offset) == ("FOUND", 3, 5)
