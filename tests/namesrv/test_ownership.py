"""NameServer ownership: a broker name belongs to the cluster that registered it first.

A real NameServer with auth on and two users: ``c1node`` (Cluster:c1 Admin) and
``evil`` (Cluster:evil Admin).  Also the route table in-process (no auth).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker_api.errors import BrokerNameOwnedError
from broker_api.namesrv import RouteTable
from broker_api.namesrv.models import BrokerRef, RegisterBody
from tests.broker_api.test_auth import sparkmq

from .support import NamesrvProcess, free_port, register_body

A_PORT, EVIL_PORT = 18201, 18202


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvProcess, dict[str, str]]]:
    base = tmp_path_factory.mktemp("ownership")
    tokens = {}
    for name, cluster in (("c1node", "c1"), ("evil", "evil")):
        out = sparkmq("user", "add", name, "--data-dir", str(base))
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
        assert sparkmq("acl", "grant", name, f"Cluster:{cluster}", "Admin", "--data-dir", str(base)).returncode == 0
    ns = NamesrvProcess(free_port(), base / "namesrv.log", {
        "SPARKMQ_NAMESRV_AUTH_ENABLED": "true", "SPARKMQ_NAMESRV_AUTH_DIR": str(base / "auth")}).start()
    yield ns, tokens
    ns.stop()


def _post(ns: NamesrvProcess, token: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(ns.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=5)


def _ref(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("cluster", "broker_name", "broker_id", "address")}


def _route(ns: NamesrvProcess, token: str) -> dict[str, Any]:
    r = httpx.get(ns.url + "/v1/routes/secret", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_another_cluster_cannot_register_or_unregister_a_broker_name(
        secured: tuple[NamesrvProcess, dict[str, str]]) -> None:
    ns, tokens = secured
    real = register_body("broker-a", {"secret": 4}, port=A_PORT, cluster="c1")
    assert _post(ns, tokens["c1node"], "/v1/brokers/register", real).status_code == 200
    want = _route(ns, tokens["evil"])["brokers"]

    hijack = register_body("broker-a", {"secret": 4}, port=EVIL_PORT, cluster="evil")
    r = _post(ns, tokens["evil"], "/v1/brokers/register", hijack)
    assert r.status_code == 409 and r.json()["error"] == "broker_name_owned", r.text
    assert "c1" in r.json()["message"]
    as_c1 = register_body("broker-a", {"secret": 4}, port=EVIL_PORT, cluster="c1")
    assert _post(ns, tokens["evil"], "/v1/brokers/register", as_c1).status_code == 403
    same_address = register_body("evil-b", {"other": 1}, port=A_PORT, cluster="evil")
    assert _post(ns, tokens["evil"], "/v1/brokers/register", same_address).status_code == 409

    assert _post(ns, tokens["evil"], "/v1/brokers/unregister", {**_ref(real), "cluster": "evil"}).status_code == 409
    assert _post(ns, tokens["evil"], "/v1/brokers/unregister", _ref(real)).status_code == 403
    assert _route(ns, tokens["evil"])["brokers"] == want  # still the real broker-a, at its own address
    assert "refused broker 'broker-a' of cluster 'evil'" in ns.log()

    assert _post(ns, tokens["c1node"], "/v1/brokers/unregister", _ref(real)).status_code == 200


def _reg(table: RouteTable, name: str, port: int, cluster: str) -> None:
    table.register(RegisterBody.model_validate(register_body(name, {"t": 1}, port=port, cluster=cluster)))


def test_ownership_outlives_expiry_and_ends_with_a_clean_unregister(tmp_path: Path) -> None:
    table = RouteTable()
    _reg(table, "broker-a", 1, "c1")
    table.expire(-1)  # the owner went silent: its address is gone, its name is not free
    with pytest.raises(BrokerNameOwnedError):
        _reg(table, "broker-a", 2, "evil")
    _reg(table, "broker-a", 1, "c1")  # the owner comes back
    table.unregister(BrokerRef(cluster="c1", broker_name="broker-a", broker_id=0, address="http://127.0.0.1:1"))
    _reg(table, "broker-a", 2, "other")  # stopped cleanly by its owner: the name is free again
    assert table.cluster()["clusters"] == {"other": ["broker-a"]}
