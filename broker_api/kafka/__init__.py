"""The Kafka wire-protocol listener: Kafka clients (librdkafka, the Java client, Spark's
``format("kafka")``) produce to and fetch from the broker's own store, topics and groups.

``codec`` and ``records`` hold the wire format (no I/O); ``server`` the asyncio listener; the
handlers one module per concern (``handlers``, ``produce``, ``fetch``, ``groups``, ``admin``)."""

from __future__ import annotations

from .server import KafkaListener

__all__ = ["KafkaListener"]
