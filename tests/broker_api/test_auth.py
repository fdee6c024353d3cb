"""[auth]: users, policies, bearer tokens and HMAC signatures, on a real broker and NameServer.

One NameServer and one broker serve the whole module, both with auth on and
sharing one auth directory made with the `sparkmq user` / `sparkmq acl`
commands; the broker registers with its own token.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from broker_api.auth import PolicyEntry, decide
from broker_api.auth.signature import signed_headers
from broker_api.client import Producer, SparkMQClient
from broker_api.errors import BrokerError
from tests import launcher
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import BrokerProcess, _free_port
from tests.namesrv.support import NamesrvProcess, register_body

ROOT = Path(__file__).resolve().parents[2]


def sparkmq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    return launcher.run(list(args), env={**clean, **(env or {})}, cwd=ROOT, timeout=60)


@dataclass
class Cluster:
    broker: BrokerProcess
    namesrv: NamesrvProcess
    auth_dir: Path
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("auth")
    data = base / "data"
    tokens = {}
    for name, flags in {"admin": ["--super"], "app": [], "reader": [], "node": []}.items():
        out = sparkmq("user", "add", name, *flags, "--data-dir", str(data))
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
    grants = [("app", "Topic:orders", "Pub,Sub"), ("app", "Group:*", "Sub"), ("reader", "Topic:audit-*", "Sub"),
              ("node", "Cluster:DefaultCluster", "Admin")]
    for user, resource, actions in grants:
        assert sparkmq("acl", "grant", user, resource, actions, "--data-dir", str(data)).returncode == 0
    assert sparkmq("acl", "grant", "reader", "Topic:audit-secret", "Sub", "--deny", "--data-dir",
                   str(data)).returncode == 0
    auth_dir = data / "auth"
    namesrv = NamesrvProcess(_free_port(), base / "namesrv.log", {
        "SPARKMQ_NAMESRV_AUTH_ENABLED": "true", "SPARKMQ_NAMESRV_AUTH_DIR": str(auth_dir)}).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update(FAST_ENV)
    env.update({"SPARKMQ_AUTH__ENABLED": "true", "SPARKMQ_AUTH__TOKEN": tokens["node"],
                "SPARKMQ_BROKER__NAMESRV_ADDR": f"127.0.0.1:{namesrv.port}"})
    broker = BrokerProcess(data, _free_port(), env, base / "broker.log")
    try:
        broker.start()
        yield Cluster(broker, namesrv, auth_dir, tokens)
    finally:
        broker.stop()
        namesrv.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_policy_most_specific_entry_wins_and_nothing_matching_is_denied() -> None:
    entries = (PolicyEntry("Topic:*", ("Sub",)), PolicyEntry("Topic:audit-*", ("Sub",), "deny"),
               PolicyEntry("Topic:audit-public", ("Sub",)), PolicyEntry("*", ("All",), "deny"),
               PolicyEntry("Group:g1", ("Sub",)), PolicyEntry("Group:g1", ("Sub",), "deny"))
    assert decide(entries, "Topic:orders", "Sub") == entries[0]
    assert decide(entries, "Topic:audit-log", "Sub") == entries[1]  # longer prefix beats Topic:*
    assert decide(entries, "Topic:audit-public", "Sub") == entries[2]  # literal beats prefix
    assert decide(entries, "Topic:orders", "Pub") == entries[3]  # only * covers Pub: deny
    assert decide(entries, "Group:g1", "Sub") == entries[5]  # deny beats allow at equal rank
    assert decide(entries[:3], "Cluster:c", "Admin") is None  # nothing matches: the caller denies


def test_requests_without_or_with_unknown_credentials_get_401(secured: Cluster) -> None:
    url = secured.broker.url + "/v1/topics/orders/messages"
    for headers in ({}, bearer("nobody:x"), bearer(secured.tokens["app"] + "x"), bearer("garbage")):
        resp = httpx.post(url, json={"messages": [{"body": "x"}]}, headers=headers, timeout=10)
        assert resp.status_code == 401, resp.text
        assert resp.json()["error"] == "unauthenticated"
        assert "Bearer" in resp.headers["www-authenticate"]
    assert httpx.get(secured.broker.url + "/healthz", timeout=10).status_code == 200  # always open


def test_policy_allows_and_403_names_resource_and_action(secured: Cluster) -> None:
    url = secured.broker.url
    with SparkMQClient(url, token=secured.tokens["app"]) as app:
        sent = app.produce("orders", ["a", "b"])
        assert len(sent) == 2
        page = app.pull("orders", sent[0].queue_id, 0, group="g1")
        assert [m["body"] for m in page.messages][:1] in (["a"], ["b"])
        with pytest.raises(BrokerError) as denied:
            app.produce("payments", ["x"])
    assert denied.value.status == 403 and denied.value.code == "permission_denied"
    assert "Pub on Topic:payments" in denied.value.message
    resp = httpx.post(url + "/v1/topics", json={"name": "t2"}, headers=bearer(secured.tokens["app"]), timeout=10)
    assert resp.status_code == 403 and "Admin on Cluster:DefaultCluster" in resp.json()["message"]


def test_prefix_grant_and_deny_entry(secured: Cluster) -> None:
    with SparkMQClient(secured.broker.url, token=secured.tokens["admin"]) as admin:  # a super user
        admin.produce("audit-log", ["l"])
        admin.produce("audit-secret", ["s"])
    with SparkMQClient(secured.broker.url, token=secured.tokens["reader"]) as reader:
        assert reader.queues("audit-log")
        with pytest.raises(BrokerError, match="Sub on Topic:audit-secret .*denied by Topic:audit-secret"):
            reader.queues("audit-secret")
        with pytest.raises(BrokerError, match="Pub on Topic:audit-log"):
            reader.produce("audit-log", ["no"])


def test_hmac_signed_requests(secured: Cluster) -> None:
    user, secret = secured.tokens["app"].split(":", 1)
    with SparkMQClient(secured.broker.url, user=user, secret=secret) as app:
        assert app.produce("orders", [b"\x00signed"])[0].queue_offset >= 0
        assert app.queues("orders")
    path, body = "/v1/topics/orders/messages", b'{"messages":[{"body":"x"}]}'
    now = int(time.time() * 1000)
    good = signed_headers(user, secret, "POST", path, "", body, now)
    tampered = httpx.post(secured.broker.url + path, content=b'{"messages":[{"body":"y"}]}', headers=good,
                          timeout=10)
    assert tampered.status_code == 401 and "body does not match" in tampered.json()["message"]
    stale = signed_headers(user, secret, "POST", path, "", body, now - 3_600_000)
    old = httpx.post(secured.broker.url + path, content=body, headers=stale, timeout=10)
    assert old.status_code == 401 and "clock" in old.json()["message"]
    wrong = signed_headers(user, "not-the-secret", "POST", path, "", body, now)
    assert httpx.post(secured.broker.url + path, content=body, headers=wrong, timeout=10).status_code == 401


def test_producer_with_a_token_or_signed_requests(secured: Cluster) -> None:
    """The Producer's own connections carry the token; signed requests go through the client's signer."""
    with SparkMQClient(secured.broker.url, token=secured.tokens["admin"]) as admin:
        admin.create_topic("audit-producer", queues=2)
    for name in ("app", "reader"):
        user, secret = secured.tokens[name].split(":", 1)
        for credentials in ({"token": secured.tokens[name]}, {"user": user, "secret": secret}):
            with Producer(secured.broker.url, linger_ms=1, **credentials) as p:
                futures = [p.send("orders" if name == "app" else "audit-producer", f"p{i}", queue_id=i % 2)
                           for i in range(20)]
                assert p.flush(30) == 0
            errors = {type(f.exception(0)).__name__ if f.exception(0) else None for f in futures}
            assert errors == ({None} if name == "app" else {"PermissionDeniedError"}), credentials
    assert "may not Pub on Topic:audit-producer" in str(futures[0].exception(0))  # the broker's answer, as ours


def test_cli_token_and_revocation(secured: Cluster) -> None:
    data = str(secured.broker.data_dir)
    out = sparkmq("user", "add", "temp", "--data-dir", data)
    token = out.stdout.strip()
    assert sparkmq("acl", "grant", "temp", "Topic:orders", "Pub", "--data-dir", data).returncode == 0
    url = ["--url", secured.broker.url]
    refused = sparkmq("produce", "orders", "x", *url)
    assert refused.returncode == 1 and "unauthenticated" in refused.stderr
    sent = sparkmq("--token", token, "produce", "orders", "hello", *url)
    assert sent.returncode == 0, sent.stderr
    via_env = sparkmq("produce", "orders", "hello", *url, env={"SPARKMQ_TOKEN": token})
    assert via_env.returncode == 0, via_env.stderr
    listed = sparkmq("acl", "list", "temp", "--data-dir", data, "--json")
    assert '"Topic:orders"' in listed.stdout
    assert sparkmq("user", "remove", "temp", "--data-dir", data).returncode == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the broker rereads the users file within about a second
        status = httpx.get(secured.broker.url + "/v1/topics", headers=bearer(token), timeout=10).status_code
        if status == 401:
            break
        time.sleep(0.2)
    assert status == 401


def test_namesrv_checks_registrations_and_lookups(secured: Cluster) -> None:
    ns = secured.namesrv.url
    assert httpx.get(ns + "/v1/cluster", timeout=10).status_code == 401
    deadline = time.monotonic() + 20
    brokers: list[dict[str, object]] = []
    while time.monotonic() < deadline and not brokers:  # the broker registered with its [auth] token
        brokers = httpx.get(ns + "/v1/cluster", headers=bearer(secured.tokens["app"]), timeout=10).json()["brokers"]
        time.sleep(0.1)
    assert [b["broker_name"] for b in brokers] == ["broker-a"]
    body = register_body("rogue", {"orders": 4}, cluster="DefaultCluster")
    refused = httpx.post(ns + "/v1/brokers/register", json=body, headers=bearer(secured.tokens["app"]), timeout=10)
    assert refused.status_code == 403
    assert "Admin on Cluster:DefaultCluster" in refused.json()["message"]
    with SparkMQClient(secured.broker.url, token=secured.tokens["app"]) as direct:
        direct.produce("orders", ["direct"])  # the topic exists (auto-created) whichever test ran first
    deadline = time.monotonic() + 20  # the broker registers a new topic soon after, not at once
    while httpx.get(ns + "/v1/routes/orders", headers=bearer(secured.tokens["app"]), timeout=10).status_code == 404:
        assert time.monotonic() < deadline, httpx.get(secured.broker.url + "/v1/broker", timeout=10,
                                                      headers=bearer(secured.tokens["admin"])).text
        time.sleep(0.1)
    with SparkMQClient(namesrv=f"127.0.0.1:{secured.namesrv.port}", token=secured.tokens["app"]) as routed:
        assert routed.produce("orders", ["routed"])[0].broker == "broker-a"


def test_spark_batch_read_with_token_and_hmac(secured: Cluster, spark: object) -> None:
    import streaming

    streaming.register(spark)
    with SparkMQClient(secured.broker.url, token=secured.tokens["app"]) as app:
        app.produce("orders", ["for spark"])
    user, secret = secured.tokens["app"].split(":", 1)
    read = spark.read.format("sparkmq").option("endpoint", secured.broker.url)  # type: ignore[attr-defined]
    rows = read.option("subscribe", "orders").option("token", secured.tokens["app"]).load().collect()
    assert "for spark" in {bytes(r["value"]).decode() for r in rows}
    signed = (spark.read.format("sparkmq").option("endpoint", secured.broker.url)  # type: ignore[attr-defined]
              .option("subscribe", "orders").option("user", user).option("secret", secret).load().count())
    assert signed == len(rows)
    with pytest.raises(Exception, match="Sub on Topic:orders"):
        (spark.read.format("sparkmq").option("endpoint", secured.broker.url)  # type: ignore[attr-defined]
         .option("subscribe", "orders").option("token", secured.tokens["reader"]).load().collect())


def test_a_slave_copies_the_masters_metadata_with_its_credentials(secured: Cluster,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    admin = bearer(secured.tokens["admin"])
    master = secured.broker.url
    assert httpx.post(master + "/v1/topics", json={"name": "ha-orders", "queues": 2}, headers=admin,
                      timeout=10).status_code == 201
    ha_address = httpx.get(master + "/v1/broker", headers=admin, timeout=10).json()["ha"]["listen_address"]
    base = tmp_path_factory.mktemp("auth-slave")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    env.update(FAST_ENV)
    env.update({"SPARKMQ_AUTH__ENABLED": "true", "SPARKMQ_AUTH__DIR": str(secured.auth_dir),
                "SPARKMQ_AUTH__TOKEN": secured.tokens["node"], "SPARKMQ_BROKER__BROKER_ID": "1",
                "SPARKMQ_HA__MASTER_ADDR": ha_address.replace("0.0.0.0", "127.0.0.1"),
                "SPARKMQ_HA__MASTER_URL": master, "SPARKMQ_HA__METADATA_SYNC_INTERVAL_S": "1"})
    slave = BrokerProcess(base / "data", _free_port(), env, base / "slave.log")
    try:
        slave.start()
        deadline = time.monotonic() + 30
        names: set[str] = set()
        while time.monotonic() < deadline and "ha-orders" not in names:
            names = {t["name"] for t in httpx.get(slave.url + "/v1/topics", headers=admin, timeout=10).json()}
            time.sleep(0.2)
        assert "ha-orders" in names, slave.log_tail()  # GET /v1/admin/metadata on the master needs Cluster Admin
        shown = sparkmq("--token", secured.tokens["admin"], "cluster", "--url", slave.url, "--json")
        assert shown.returncode == 0, shown.stderr
        assert '"role": "slave"' in shown.stdout.replace('"role":"slave"', '"role": "slave"')
    finally:
        slave.stop()
