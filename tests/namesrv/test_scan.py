"""The inactive-broker scan: silent brokers and their routes disappear; live ones stay."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from broker_api.cluster.registration import BrokerIdentity, DataVersion, NamesrvRegistrar

from .support import NamesrvProcess, register_body, wait_until

SHORT = {"SPARKMQ_NAMESRV_SCAN_INTERVAL_S": "0.2", "SPARKMQ_NAMESRV_BROKER_TIMEOUT_S": "1.5"}


@pytest.fixture(scope="module")
def short_namesrv(namesrv_factory: Callable[..., NamesrvProcess]) -> NamesrvProcess:
    return namesrv_factory(SHORT)


@pytest.fixture
def heartbeating(short_namesrv: NamesrvProcess) -> Iterator[NamesrvRegistrar]:
    """A broker that keeps heartbeating every 0.3 s through the registrar."""
    ident = BrokerIdentity("c1", "scan-live", 0, "http://127.0.0.1:18202")
    version = DataVersion()
    registrar = NamesrvRegistrar(short_namesrv.url, ident, lambda: {"scan-live-t": _topic(2)},
                                 lambda: version, interval_s=0.3)
    registrar.start()
    yield registrar
    registrar.stop()


def _topic(queues: int) -> dict[str, object]:
    return {"read_queues": queues, "write_queues": queues, "perm": "rw"}


def test_scan_drops_a_silent_broker_and_its_routes(
    short_namesrv: NamesrvProcess, heartbeating: NamesrvRegistrar
) -> None:
    master = register_body("scan-silent", {"scan-silent-t": 4, "scan-shared": 2}, port=18201)
    slave = register_body("scan-silent", {"scan-silent-t": 4}, broker_id=1, port=18203)
    assert short_namesrv.post("/v1/brokers/register", master).status_code == 200
    assert short_namesrv.post("/v1/brokers/register", slave).status_code == 200
    assert short_namesrv.get("/v1/routes/scan-silent-t").status_code == 200
    wait_until(lambda: short_namesrv.get("/v1/routes/scan-live-t").status_code == 200)

    gone = wait_until(lambda: short_namesrv.get("/v1/routes/scan-silent-t").status_code == 404, timeout_s=10)
    assert gone
    assert short_namesrv.get("/v1/routes/scan-shared").status_code == 404
    cluster = short_namesrv.get("/v1/cluster").json()
    names = {b["broker_name"] for b in cluster["brokers"]}
    assert names == {"scan-live"}
    assert cluster["clusters"] == {"c1": ["scan-live"]}
    # The heartbeating broker outlived several timeouts' worth of scans.
    assert short_namesrv.get("/v1/routes/scan-live-t").status_code == 200
    [live] = cluster["brokers"]
    assert live["version_checks"] >= 1 and live["registrations"] == 1


def test_master_gone_keeps_routes_while_its_slave_lives(short_namesrv: NamesrvProcess) -> None:
    master = register_body("scan-pair", {"scan-pair-t": 2}, port=18204)
    slave_body = register_body("scan-pair", {"scan-pair-t": 2}, broker_id=1, port=18205)
    short_namesrv.post("/v1/brokers/register", master)
    short_namesrv.post("/v1/brokers/register", slave_body)
    ident = BrokerIdentity("c1", "scan-pair", 1, "http://127.0.0.1:18205")
    version = DataVersion.from_dict(slave_body["data_version"])
    slave = NamesrvRegistrar([short_namesrv.url], ident, lambda: {"scan-pair-t": _topic(2)},
                             lambda: version, interval_s=0.3)
    slave.start()
    try:
        wait_until(lambda: _addresses(short_namesrv, "scan-pair-t") == {"1": "http://127.0.0.1:18205"})
        route = short_namesrv.get("/v1/routes/scan-pair-t").json()
        assert route["queues"] == [{"broker_name": "scan-pair", "read_queues": 2, "write_queues": 2, "perm": "rw"}]
    finally:
        slave.stop()
    assert short_namesrv.get("/v1/routes/scan-pair-t").status_code == 404  # stop() unregistered


def _addresses(ns: NamesrvProcess, topic: str) -> dict[str, str] | None:
    resp = ns.get(f"/v1/routes/{topic}")
    return resp.json()["brokers"][0]["addresses"] if resp.status_code == 200 else None
