"""The client's routing parts without a cluster: routes with slaves, the back-off, busy retries."""

from __future__ import annotations

from broker_api.client.results import busy_delay
from broker_api.client.routing import FaultTracker, id_host, parse_route
from broker_api.errors import BrokerBusyError, TopicNotFoundError

ROUTE = {
    "brokers": [
        {"broker_name": "broker-b", "addresses": {"0": "http://127.0.0.1:8091"}},
        {"broker_name": "broker-a", "addresses": {"1": "http://127.0.0.1:8090", "0": "http://127.0.0.1:8080"}},
        {"broker_name": "broker-c", "addresses": {"1": "http://127.0.0.1:8095"}},  # its master is gone
    ],
    "queues": [
        {"broker_name": "broker-a", "read_queues": 2, "write_queues": 2, "perm": "rw"},
        {"broker_name": "broker-b", "read_queues": 1, "write_queues": 1, "perm": "rw"},
        {"broker_name": "broker-c", "read_queues": 1, "write_queues": 1, "perm": "rw"},
    ],
}


def test_route_reads_master_then_slaves_and_writes_masters_only() -> None:
    route = parse_route(ROUTE)
    assert route.readers("broker-a") == ["http://127.0.0.1:8080", "http://127.0.0.1:8090"]
    assert route.readers("broker-c") == ["http://127.0.0.1:8095"]  # a slave keeps serving reads
    assert route.slots() == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)]  # no master, no writes
    assert sorted(route.readable()) == ["broker-a", "broker-b", "broker-c"]


def test_back_off_grows_while_failing_and_clears_on_success() -> None:
    now = [100.0]
    faults = FaultTracker(base_s=1.0, max_s=4.0, clock=lambda: now[0])
    url = "http://127.0.0.1:8091"
    assert [faults.failed(url, "refused") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert not faults.available(url)
    assert faults.order([url, "http://ok"]) == ["http://ok", url]
    now[0] += 4.0
    assert faults.available(url)  # tried again after its back-off
    assert faults.down_for(url) == 4.0 and faults.reason(url) == "refused"
    faults.succeeded(url)
    assert faults.down_for(url) is None and faults.failed(url) == 1.0


def test_message_id_names_the_broker_that_stored_it() -> None:
    assert id_host("7F0000010000271F" + "0" * 16) == "127.0.0.1:10015"


def test_busy_answers_are_waited_out_a_bounded_number_of_times() -> None:
    busy = BrokerBusyError("busy", retry_after_s=1)
    busy.status, busy.code = 503, "broker_busy"  # type: ignore[attr-defined]
    delays = [busy_delay(busy, attempt, 3) for attempt in range(4)]
    assert delays[3] is None
    assert all(d is not None and 0.5 * 2 ** i <= d <= 1.5 * min(5.0, 2 ** i) for i, d in enumerate(delays[:3]))
    missing = TopicNotFoundError("no such topic")
    missing.status, missing.code = 404, "topic_not_found"  # type: ignore[attr-defined]
    assert busy_delay(missing, 0, 3) is None
