"""Table topics from the Python client: change a topic's table, read table status, replay a DLQ.

    client.create_topic("orders", 4, table={"mode": "typed", "schema": "order_id STRING, amount DOUBLE"})
    client.alter_topic("orders", {"schema": "order_id STRING, amount DOUBLE, region STRING"})
    client.table_status("orders")      # broker -> {"orders": {"rows": ..., "dlq_rows": ..., "lag_bytes": ...}}
    client.replay_dlq("orders")        # broker -> what moved from orders__dlq to orders

Each call goes to every master serving the topic (or to the endpoint), as
``create_topic`` does: every broker of a topic writes its own table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

__all__ = ["TablesMixin"]


class TablesMixin:
    """The table calls of :class:`~broker_api.client.SparkMQClient` (which supplies the transport)."""

    if TYPE_CHECKING:
        def _call(self, method: str, url: str, broker: str | None = None, **kwargs: Any) -> Any: ...
        def brokers(self, topic: str | None = None) -> dict[str, str]: ...
        def masters(self, cluster: str | None = None) -> dict[str, str]: ...

    def alter_topic(self, name: str, table: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """``PUT /v1/topics/{name}`` ``{"table": table}`` (only the given keys change); broker -> topic."""
        return {b: self._call("PUT", f"{url}/v1/topics/{name}", json={"table": dict(table)})
                for b, url in sorted(self.brokers(name).items())}

    def table_status(self, topic: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
        """broker -> {topic: table status} for ``topic`` (brokers serving it) or every table topic."""
        if topic is None:
            return {b: self._call("GET", f"{url}/v1/tables")["tables"] for b, url in sorted(self.masters().items())}
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for b, url in sorted(self.brokers(topic).items()):
            found = self._call("GET", f"{url}/v1/topics/{topic}")
            out[b] = {topic: found["table_status"]} if found.get("table_status") is not None else {}
        return out

    def replay_dlq(self, topic: str) -> dict[str, dict[str, Any]]:
        """``POST /v1/topics/{topic}/table/replay-dlq`` on every broker serving it; broker -> answer."""
        return {b: self._call("POST", f"{url}/v1/topics/{topic}/table/replay-dlq")
                for b, url in sorted(self.brokers(topic).items())}
