"""The Producer through a NameServer: keyed messages keep their broker, free ones move (real processes, SIGKILL)."""

from __future__ import annotations

from broker_api.client import BrokerUnreachableError, Producer, SparkMQClient

from .test_cluster import Cluster, cluster  # noqa: F401 - the NameServer + broker-a + broker-b fixture


def test_keyed_messages_wait_then_fail_naming_their_broker_while_free_ones_move(cluster: Cluster) -> None:
    with SparkMQClient(namesrv=cluster.addr) as c:
        c.create_topic("routed", queues=2)
        keys = [f"k{i}" for i in range(40)]
        where = {k: c.produce("routed", [{"body": "probe", "keys": [k]}])[0] for k in keys}
    with Producer(namesrv=cluster.addr, send_timeout_s=0.5, linger_ms=1) as p:
        same = [p.send("routed", "again", key=k) for k in keys]
        p.flush(30)
        assert [(f.result().broker, f.result().queue_id) for f in same] == [
            (where[k].broker, where[k].queue_id) for k in keys]  # the client's placement, unchanged
        cluster.b.kill()
        on_b = [k for k in keys if where[k].broker == "broker-b"]
        keyed = [p.send("routed", "after", key=k) for k in on_b]
        free = [p.send("routed", f"free-{i}") for i in range(20)]
        assert p.flush(30) == 0
    assert on_b and all(isinstance(f.exception(0), BrokerUnreachableError) for f in keyed)
    assert all("broker-b" in str(f.exception(0)) for f in keyed)  # named; never sent to broker-a
    assert {f.result(0).broker for f in free} == {"broker-a"}  # free messages moved to the live broker
