"""The executor's plain-HTTP Arrow pulls answer exactly what the full client answers, and fall back to it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from streaming.client import BrokerClient
from streaming.errors import BrokerRequestError, BrokerUnavailableError
from streaming.options import ClientConfig
from streaming.plain_http import PagePuller

from ..conftest import BrokerProcess, _free_port
from .support import create_topic, produce, wait_visible

_FIELDS = "offset,keys,body,born_timestamp"


def test_pages_equal_the_full_clients_over_a_queue(broker: BrokerProcess) -> None:
    create_topic(broker.url, "pp", 2)
    produce(broker.url, "pp", 900, queues=2, tags=lambda i: "a" if i % 3 else None)
    wait_visible(broker.url, "pp", 900)
    config = ClientConfig((broker.url,))
    with PagePuller(config) as plain, BrokerClient(config) as full:
        for tags, fields in ((None, _FIELDS), ("a", None)):
            offset, seen = 0, 0
            while offset < 450:
                mine = plain.pull_arrow("pp", 1, offset, 100, tags, None, fields)
                assert mine == full.pull_arrow("pp", 1, offset, 100, tags, None, fields)
                seen += mine.table.num_rows
                offset = mine.next_offset
            assert seen == (450 if tags is None else 300)
        assert plain._client is None  # every page came over the plain connection
        tail = plain.pull_arrow("pp", 0, 450, 100, None)
        assert (tail.status, tail.next_offset, tail.table.num_rows) == ("NO_NEW_MESSAGE", 450, 0)
        with pytest.raises(BrokerRequestError, match="nope"):  # a 400: the full client asks again and says why
            plain.pull_arrow("pp", 0, 0, 10, None, None, "offset,nope")


def test_a_broker_that_is_down_raises_what_the_full_client_raises(broker_factory: Callable[..., BrokerProcess]) \
        -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with PagePuller(ClientConfig((url,), timeout_s=2.0)) as plain:
        with pytest.raises(BrokerUnavailableError):
            plain.pull_arrow("pp", 0, 0, 10, None)
    broker = broker_factory()
    create_topic(broker.url, "back", 1)
    produce(broker.url, "back", 5, queues=1)
    wait_visible(broker.url, "back", 5)
    with PagePuller(ClientConfig((broker.url,))) as plain:
        assert plain.pull_arrow("back", 0, 0, 10, None).table.num_rows == 5
        broker.stop()
        with pytest.raises(BrokerUnavailableError):
            plain.pull_arrow("back", 0, 0, 10, None)
        broker.start()
        page = plain.pull_arrow("back", 0, 2, 10, None)  # the full client now, after the error
        assert (page.status, page.table.num_rows, page.next_offset) == ("FOUND", 3, 5)
