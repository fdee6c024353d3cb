"""Permissions by construction (issue 30): every route declares its needs; a user missing one gets 403.

* Every route of the app (its FastAPI routes, flattened, and the fast lane's
  produce/pull handlers) declares what it needs with ``@requires``; the open
  and control markers agree with the front door's open paths.
* The matrix is generated from those declarations: for every route and every
  permission it declares, the route is sent as a user who holds everything
  (``*`` All) but exactly that permission (a literal deny entry), and must
  answer 403 naming that resource and action, with no byte of the topic's
  data in the answer.
* POP reads past the ACL (issue 30's reproductions): pop of another topic,
  retry of a ``secret`` id into ``%DLQ%evil3`` and a pop of it, transactions
  of another user, a long poll parked before the user's removal.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker_api.auth import PolicyEntry, UserStore
from broker_api.auth.needs import CONTROL, OPEN, Need
from broker_api.auth.routes import CONTROL_PATHS, is_open
from broker_api.http import hotpath
from broker_api.http.app import create_app
from broker_api.http.guard import all_routes, declared
from broker_api.settings.broker import BrokerSettings
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import _TEST_BROKER_ENV, BrokerProcess, _free_port

SECRET = b"TOPSECRET-7f3a"  # the body of every message of topic `secret`
CLUSTER = "DefaultCluster"
# The permissions the matrix takes away, one per user ("lacks-<n>").
TAKEN = [("Topic:secret", "Pub"), ("Topic:secret", "Sub"), ("Topic:secret", "Admin"), ("Group:g1", "Sub"),
         ("Group:g1", "Admin"), (f"Cluster:{CLUSTER}", "Sub"), (f"Cluster:{CLUSTER}", "Admin")]


@dataclass
class Secured:
    url: str
    tokens: dict[str, str]
    store: UserStore
    sample: dict[str, Any]

    def as_(self, user: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {self.tokens[user]}"})


def _users(auth_dir: Path) -> tuple[UserStore, dict[str, str]]:
    store = UserStore(auth_dir)
    tokens = {"admin": "admin:" + store.add_user("admin", super_user=True)}
    for name in ("full", "other"):
        tokens[name] = f"{name}:" + store.add_user(name)
        store.grant(name, PolicyEntry("*", ("All",)))
    for i, (resource, action) in enumerate(TAKEN):
        name = f"lacks-{i}"
        tokens[name] = f"{name}:" + store.add_user(name)
        store.grant(name, PolicyEntry("*", ("All",)))
        store.grant(name, PolicyEntry(resource, (action,), "deny"))
    tokens["app"] = "app:" + store.add_user("app")  # issue 30's users
    store.grant("app", PolicyEntry("Topic:orders", ("Pub", "Sub")))
    store.grant("app", PolicyEntry("Group:*", ("Sub",)))
    tokens["prod"] = "prod:" + store.add_user("prod")
    store.grant("prod", PolicyEntry("Topic:orders", ("Pub",)))
    return store, tokens


def _seed(c: httpx.Client) -> dict[str, Any]:
    """As the super user: topics, a secret message, a group's offsets and a popped receipt."""
    for name in ("secret", "orders"):
        c.post("/v1/topics", json={"name": name, "queues": 1}).raise_for_status()
    sent = c.post("/v1/topics/secret/messages",
                  json={"messages": [{"body": SECRET.decode(), "keys": ["k"]} for _ in range(4)]}).json()
    c.put("/v1/groups/g1/offsets", json={"topic": "secret", "offsets": {"0": 0}}).raise_for_status()
    popped = c.post("/v1/groups/g1/pop", json={"topic": "secret", "max_messages": 1}).json()["messages"]
    return {"msg_id": sent["results"][0]["msg_id"], "receipt": popped[0]["receipt"]}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("perm")
    store, tokens = _users(base / "auth")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update({**_TEST_BROKER_ENV, **FAST_ENV, "SPARKMQ_AUTH__ENABLED": "true",
                "SPARKMQ_AUTH__DIR": str(base / "auth")})
    broker = BrokerProcess(base / "data", _free_port(), env, base / "broker.log").start()
    try:
        s = Secured(broker.url, tokens, store, {})
        with s.as_("admin") as admin:
            s.sample = _seed(admin)
        yield s
    finally:
        broker.stop()


def _routes(tmp_path: Path) -> list[tuple[str, str, Any]]:
    app = create_app(BrokerSettings(data_dir=tmp_path / "data"))
    out = []
    for route in all_routes(app.routes):
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                out.append((method, route.path, getattr(route, "endpoint", None)))
    return out


def test_every_route_declares_what_it_needs(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    assert len(routes) > 30
    undeclared = [f"{m} {p}" for m, p, endpoint in routes if declared(endpoint) is None and not is_open(p)]
    assert not undeclared, f"routes without @requires: {undeclared}"
    for method, path, endpoint in routes:
        spec = declared(endpoint)
        if spec is None:
            continue  # FastAPI's own documents: open paths
        assert (OPEN in spec.needs) == is_open(path), (method, path)
        assert (CONTROL in spec.needs) == (path in CONTROL_PATHS), (method, path)
    for handler in (hotpath.produce, hotpath.pull):  # the fast lane calls these, not the FastAPI routes
        spec = declared(handler)
        assert spec is not None and spec.query is not None, handler
        assert any(isinstance(n, Need) for n in spec.needs)


# One valid request per route; the path's {topic} is `secret`, {group} `g1`.
def _requests(sample: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        ("POST", "/v1/topics/{topic}/messages"): {"json": {"messages": [{"body": "x"}]}},
        ("GET", "/v1/topics/{topic}/queues/{queue_id}/messages"): {"params": {"offset": 0, "group": "g1"}},
        ("POST", "/v1/topics"): {"json": {"name": "brand-new"}},
        ("PUT", "/v1/topics/{topic}"): {"json": {"table": {"mode": "off"}}},
        ("POST", "/v1/topics/{topic}/table/replay-dlq"): {},
        ("GET", "/v1/topics/{topic}"): {},
        ("DELETE", "/v1/topics/{topic}"): {},
        ("GET", "/v1/topics/{topic}/queues"): {},
        ("GET", "/v1/topics/{topic}/queues/{queue_id}/offset"): {"params": {"timestamp_ms": 0}},
        ("GET", "/v1/topics/{topic}/messages"): {"params": {"key": "k"}},
        ("GET", "/v1/messages/{msg_id}"): {},
        ("GET", "/v1/groups/{group}"): {},
        ("PUT", "/v1/groups/{group}"): {"json": {"consume_enabled": True}},
        ("PUT", "/v1/groups/{group}/offsets"): {"json": {"topic": "secret", "offsets": {"0": 0}}},
        ("GET", "/v1/groups/{group}/offsets"): {"params": {"topic": "secret"}},
        ("POST", "/v1/groups/{group}/pop"): {"json": {"topic": "secret"}},
        ("POST", "/v1/groups/{group}/ack"): {"json": {"receipts": [sample["receipt"]]}},
        ("POST", "/v1/groups/{group}/invisible"): {"json": {"receipt": sample["receipt"], "invisible_ms": 1000}},
        ("POST", "/v1/groups/{group}/retry"): {"json": {"msg_id": sample["msg_id"]}},
        ("POST", "/v1/admin/retention"): {"json": {}},
        ("POST", "/v1/sql"): {"json": {"sql": "SELECT 1"}},
        ("GET", "/v1/admin/metadata"): {},
    }


def _taken_by(need: Need) -> tuple[str, str]:
    name = {"Topic": "secret", "Group": "g1", "Cluster": CLUSTER}[need.kind]
    return f"{need.kind}:{name}", need.action


def test_each_route_as_a_user_missing_exactly_one_of_its_permissions_is_403_without_data(
        secured: Secured, tmp_path: Path) -> None:
    samples = _requests(secured.sample)
    sent = 0
    for method, path, endpoint in _routes(tmp_path):
        spec = declared(endpoint)
        needs = [n for n in (spec.needs if spec else ()) if isinstance(n, Need) and n.kind != "Owner"]
        if not needs:
            continue
        assert (method, path) in samples, f"no sample request for {method} {path}: add one to the matrix"
        url = path.format(topic="secret", group="g1", queue_id=0, msg_id=secured.sample["msg_id"])
        for need in needs:
            resource, action = _taken_by(need)
            user = f"lacks-{TAKEN.index((resource, action))}"
            with secured.as_(user) as c:
                resp = c.request(method, url, **samples[(method, path)])
            assert resp.status_code == 403, (method, path, user, resp.text)
            assert resp.json()["error"] == "permission_denied"
            assert f"{action} on {resource}" in resp.json()["message"], (method, path, resp.text)
            assert SECRET not in resp.content
            sent += 1
    assert sent >= 25
    with secured.as_("full") as full:  # the users are not refused for anything else
        assert SECRET.decode() in full.get("/v1/topics/secret/queues/0/messages", params={"offset": 0}).text
        assert full.get("/v1/groups/g1/offsets", params={"topic": "secret"}).status_code == 200


def test_pop_ack_and_retry_need_the_topic_and_a_dead_letter_pop_its_origin(secured: Secured) -> None:
    with secured.as_("prod") as prod:
        resp = prod.post("/v1/groups/evil/pop", json={"topic": "secret"})
        assert resp.status_code == 403 and SECRET not in resp.content
    with secured.as_("app") as app:
        retried = app.post("/v1/groups/evil3/retry", json={"msg_id": secured.sample["msg_id"], "delay_level": -1})
        assert retried.status_code == 403 and "Sub on Topic:secret" in retried.json()["message"]
        assert app.post("/v1/groups/g1/ack", json={"receipts": [secured.sample["receipt"]]}).status_code == 403
    with secured.as_("admin") as admin:  # someone allowed puts a secret message in %DLQ%evil3
        assert admin.post("/v1/groups/evil3/retry", json={"msg_id": secured.sample["msg_id"],
                                                          "delay_level": -1}).json()["status"] == "DLQ"
    with secured.as_("app") as app:  # Group:* Sub, nothing on secret
        popped = app.post("/v1/groups/evil3/pop", json={"topic": "%DLQ%evil3"})
        assert popped.status_code == 403 and "Sub on Topic:secret" in popped.json()["message"]
        assert SECRET not in popped.content
        pulled = app.get("/v1/topics/%25DLQ%25evil3/queues/0/messages", params={"offset": 0})
        assert pulled.status_code == 403 and SECRET not in pulled.content
        app.post("/v1/topics/orders/messages", json={"messages": [{"body": "o"}]}).raise_for_status()
        assert app.post("/v1/groups/g7/pop", json={"topic": "orders"}).json()["messages"][0]["body"] == "o"


def test_a_transaction_belongs_to_its_owner(secured: Secured) -> None:
    with secured.as_("full") as owner:
        opened = owner.post("/v1/topics/secret/messages", json={"messages": [{"body": "tx"}], "transactional": True})
        tx = opened.json()["transaction_id"]
        assert owner.get(f"/v1/transactions/{tx}").json()["state"] == "open"
    with secured.as_("other") as other:  # every permission, but not its owner
        refused = [
            other.get(f"/v1/transactions/{tx}"),
            other.post(f"/v1/transactions/{tx}", json={"action": "commit"}),
            other.post(f"/v1/transactions/{tx}", json={"action": "rollback"}),
            other.post("/v1/sinks/s1/batches/1/commit", json={"transaction_ids": [tx]}),
            other.post("/v1/sinks/s1/batches/1/abort", json={"transaction_ids": [tx]}),
            other.post("/v1/topics/secret/messages", params={"transaction_id": tx},
                       json={"messages": [{"body": "sneaked"}]}),
        ]
    for resp in refused:
        assert resp.status_code == 403, resp.text
        assert resp.json()["error"] == "permission_denied" and "owner" in resp.json()["message"]
    with secured.as_("admin") as admin:  # a super user may end any
        assert admin.post(f"/v1/transactions/{tx}", json={"action": "rollback"}).json()["state"] == "rolled_back"
        assert admin.get(f"/v1/transactions/{tx}").json()["messages"] == 1  # the sneaked one never joined


def test_a_long_poll_parked_before_a_removal_does_not_deliver_after_it(secured: Secured) -> None:
    token = "temp:" + secured.store.add_user("temp")
    secured.store.grant("temp", PolicyEntry("Topic:orders", ("Sub",)))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=secured.url, timeout=30, headers=headers) as temp:
        known = time.monotonic() + 2  # the broker looks at the users file every 0.25 s
        while (queues := temp.get("/v1/topics/orders/queues")).status_code == 401 and time.monotonic() < known:
            time.sleep(0.02)
        start = queues.json()[0]["max_offset"]  # the user is known now
        answer: dict[str, httpx.Response] = {}
        parked = threading.Thread(target=lambda: answer.setdefault("r", temp.get(
            "/v1/topics/orders/queues/0/messages", params={"offset": start, "wait_ms": 20_000})))
        parked.start()
        deadline = time.monotonic() + 10
        while httpx.get(secured.url + "/v1/broker", timeout=5).json()["parked_pulls"] < 1:
            assert time.monotonic() < deadline, "the pull never parked"
            time.sleep(0.02)
        secured.store.remove_user("temp")
        removed = time.monotonic()
        with secured.as_("admin") as admin:
            admin.post("/v1/topics/orders/messages", json={"messages": [{"body": "after-removal"}]})
        parked.join(15)
        assert answer["r"].status_code == 401 and b"after-removal" not in answer["r"].content
        while temp.get("/v1/topics").status_code != 401:  # a new request bites within about a second
            assert time.monotonic() - removed < 1.5
            time.sleep(0.02)
        assert time.monotonic() - removed < 1.5



