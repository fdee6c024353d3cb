"""The NameServer HTTP API against a real server: register, routes, CRC, needRegister, unregister."""

from __future__ import annotations

from typing import Any

import pytest

from .support import NamesrvProcess, register_body


def _ref(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("cluster", "broker_name", "broker_id", "address")}


def _live(namesrv: NamesrvProcess, broker_name: str) -> list[dict[str, Any]]:
    return [b for b in namesrv.get("/v1/cluster").json()["brokers"] if b["broker_name"] == broker_name]


def test_register_makes_the_route_appear(namesrv: NamesrvProcess) -> None:
    body = register_body("api-a", {"api-orders": 4, "api-audit": 2}, port=18101)
    resp = namesrv.post("/v1/brokers/register", body)
    assert resp.status_code == 200
    assert resp.json() == {"ok": True, "master_address": None, "ha_server_address": None}

    route = namesrv.get("/v1/routes/api-orders").json()
    assert route == {
        "topic": "api-orders",
        "brokers": [{"broker_name": "api-a", "cluster": "c1", "addresses": {"0": "http://127.0.0.1:18101"}}],
        "queues": [{"broker_name": "api-a", "read_queues": 4, "write_queues": 4, "perm": "rw"}],
    }
    cluster = namesrv.get("/v1/cluster").json()
    assert "api-a" in cluster["clusters"]["c1"]
    [live] = _live(namesrv, "api-a")
    assert live["role"] == "master" and live["address"] == "http://127.0.0.1:18101"
    assert live["data_version"] == body["data_version"]
    assert namesrv.get("/v1/topics").json()["topics"]["api-audit"] == ["api-a"]
    assert namesrv.get("/healthz").json()["status"] == "ok"


def test_unknown_topic_is_a_clear_404(namesrv: NamesrvProcess) -> None:
    resp = namesrv.get("/v1/routes/never-created")
    assert resp.status_code == 404
    assert resp.json()["error"] == "topic_not_found"
    assert "never-created" in resp.json()["message"]


def test_bad_crc_is_rejected_and_changes_nothing(namesrv: NamesrvProcess) -> None:
    body = register_body("api-crc", {"api-crc-topic": 1}, port=18102)
    body["crc32"] ^= 0x1
    resp = namesrv.post("/v1/brokers/register", body)
    assert resp.status_code == 400
    assert resp.json()["error"] == "bad_crc"
    assert namesrv.get("/v1/routes/api-crc-topic").status_code == 404
    tampered = register_body("api-crc", {"api-crc-topic": 1}, port=18102)
    tampered["topics"]["api-crc-topic"]["read_queues"] = 8  # body changed after the CRC
    assert namesrv.post("/v1/brokers/register", tampered).json()["error"] == "bad_crc"


def test_malformed_registration_is_a_bad_request(namesrv: NamesrvProcess) -> None:
    body = register_body("api-bad", {"t": 1}, port=18103)
    body["address"] = "not a url"
    resp = namesrv.post("/v1/brokers/register", body)
    assert resp.status_code == 400
    assert resp.json()["error"] == "bad_request" and "address" in resp.json()["message"]


def test_query_data_version_is_a_heartbeat_until_the_topics_change(namesrv: NamesrvProcess) -> None:
    body = register_body("api-dv", {"api-dv-1": 2}, port=18104, counter=5)
    namesrv.post("/v1/brokers/register", body)
    [before] = _live(namesrv, "api-dv")

    query = {**_ref(body), "data_version": body["data_version"]}
    assert namesrv.post("/v1/brokers/query-data-version", query).json() == {"changed": False}
    [after] = _live(namesrv, "api-dv")
    assert after["version_checks"] == before["version_checks"] + 1
    assert after["last_heartbeat_ms"] >= before["last_heartbeat_ms"]
    assert after["silent_s"] <= before["silent_s"] + 0.5

    # The broker created api-dv-2 and deleted api-dv-1: its version moved on.
    newer = {**query, "data_version": {"timestamp": body["data_version"]["timestamp"] + 1, "counter": 6}}
    assert namesrv.post("/v1/brokers/query-data-version", newer).json() == {"changed": True}
    namesrv.post("/v1/brokers/register", register_body("api-dv", {"api-dv-2": 2}, port=18104, counter=6))
    assert namesrv.get("/v1/routes/api-dv-2").status_code == 200
    assert namesrv.get("/v1/routes/api-dv-1").status_code == 404

    stranger = {**query, "address": "http://127.0.0.1:18999"}
    assert namesrv.post("/v1/brokers/query-data-version", stranger).json() == {"changed": True}


def test_slave_learns_master_and_ha_address(namesrv: NamesrvProcess) -> None:
    master = register_body("api-ha", {"api-ha-t": 2}, port=18105, ha_address="127.0.0.1:10912")
    namesrv.post("/v1/brokers/register", master)
    slave = register_body("api-ha", {"api-ha-t": 2}, broker_id=1, port=18106)
    resp = namesrv.post("/v1/brokers/register", slave).json()
    assert resp == {"ok": True, "master_address": "http://127.0.0.1:18105", "ha_server_address": "127.0.0.1:10912"}
    route = namesrv.get("/v1/routes/api-ha-t").json()
    assert route["brokers"][0]["addresses"] == {"0": "http://127.0.0.1:18105", "1": "http://127.0.0.1:18106"}
    roles = {b["broker_id"]: b["role"] for b in _live(namesrv, "api-ha")}
    assert roles == {0: "master", 1: "slave"}


def test_unregister_removes_the_broker_and_its_routes(namesrv: NamesrvProcess) -> None:
    body = register_body("api-gone", {"api-gone-t": 3}, port=18107)
    namesrv.post("/v1/brokers/register", body)
    assert namesrv.get("/v1/routes/api-gone-t").status_code == 200

    assert namesrv.post("/v1/brokers/unregister", _ref(body)).json() == {"ok": True}
    assert namesrv.get("/v1/routes/api-gone-t").status_code == 404
    assert _live(namesrv, "api-gone") == []
    assert "api-gone" not in namesrv.get("/v1/cluster").json()["clusters"].get("c1", [])
    again = namesrv.post("/v1/brokers/unregister", _ref(body))
    assert again.status_code == 404 and again.json()["error"] == "broker_not_found"


def test_unknown_path_answers_json_error(namesrv: NamesrvProcess) -> None:
    resp = namesrv.get("/v1/nothing-here")
    assert resp.status_code == 404
    assert set(resp.json()) == {"error", "message"}


def test_client_skips_dead_namesrvs_and_reports_missing_topics(namesrv: NamesrvProcess) -> None:
    from broker_api.namesrv import NamesrvClient, NamesrvUnavailableError, TopicRouteNotFoundError

    from .support import free_port

    namesrv.post("/v1/brokers/register", register_body("api-cli", {"api-cli-t": 2}, port=18108))
    dead = f"127.0.0.1:{free_port()}"
    with NamesrvClient(f"{dead};{namesrv.url}") as client:
        assert client.route("api-cli-t")["brokers"][0]["broker_name"] == "api-cli"
        assert client.topics()["api-cli-t"] == ["api-cli"]
        assert any(b["broker_name"] == "api-cli" for b in client.cluster()["brokers"])
        with pytest.raises(TopicRouteNotFoundError, match="api-cli-missing"):
            client.route("api-cli-missing")
    with NamesrvClient(dead) as client, pytest.raises(NamesrvUnavailableError, match=dead):
        client.cluster()
