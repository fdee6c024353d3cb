"""Which permissions each broker route needs (RocketMQ's request-code table, for HTTP).

``None`` means the route is open; an empty list means any authenticated
user; otherwise every ``(resource, action)`` listed must be allowed.

=====================================================  ==============================================
route                                                  needs
=====================================================  ==============================================
GET /healthz, /docs, /openapi.json                     nothing (open)
GET /console, /console/{file}                          nothing (the web console's static files)
GET /readyz, /metrics, /v1/broker                      open, or a user when ``[auth] control_open`` is false
POST /v1/topics/{t}/messages                           Topic:t Pub
GET  /v1/topics/{t}/queues/{q}/messages                Topic:t Sub (+ Group:g Sub with ?group=g);
                                                       a ``%RETRY%g`` topic: Group:g Sub
GET  /v1/topics/{t}, .../queues, .../offset, lookups   Topic:t Sub
DELETE /v1/topics/{t}                                  Topic:t Admin
POST /v1/topics (create)                               Cluster:<cluster> Admin
GET  /v1/topics, /v1/groups                            any user
GET  /v1/groups/{g}[/offsets], PUT .../offsets         Group:g Sub (+ Topic:t Sub with ?topic=t)
PUT  /v1/groups/{g} (enable/disable)                   Group:g Admin
/v1/transactions/..., /v1/sinks/...                    any user (ids come from a Pub the user made)
GET  /v1/messages/{id}, POST /v1/sql                   Cluster:<cluster> Sub (reads any topic)
/v1/admin/...                                          Cluster:<cluster> Admin
anything else                                          any user (then 404/405 as usual)
=====================================================  ==============================================
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from .authn import Permission

__all__ = ["OPEN_PATHS", "broker_permissions", "is_open"]

OPEN_PATHS = frozenset({"/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
CONTROL_PATHS = frozenset({"/readyz", "/metrics", "/v1/broker"})
_TOPIC = re.compile(r"^/v1/topics/(?P<topic>[^/]+)(?P<rest>/.*)?$")
_GROUP = re.compile(r"^/v1/groups/(?P<group>[^/]+)(?P<rest>/offsets)?$")
_RETRY = "%RETRY%"
_CONSOLE = "/console"


def is_open(path: str) -> bool:
    """True for the routes anyone may call: health, the API documents, the console's static files."""
    return path in OPEN_PATHS or path == _CONSOLE or path.startswith(_CONSOLE + "/")


def _query(query: str, name: str) -> str | None:
    values = parse_qs(query).get(name) if name in query else None
    return values[0] if values else None


def _topic_resource(topic: str) -> Permission:
    if topic.startswith(_RETRY):
        return f"Group:{topic[len(_RETRY):]}", "Sub"
    return f"Topic:{topic}", "Sub"


def broker_permissions(method: str, path: str, query: str, cluster: str,
                       control_open: bool = True) -> list[Permission] | None:
    """What ``method path?query`` needs on a broker of ``cluster`` (see the table above)."""
    if is_open(path) or (control_open and path in CONTROL_PATHS):
        return None
    if path.startswith("/v1/admin/"):
        return [(f"Cluster:{cluster}", "Admin")]
    if path in ("/v1/sql",) or path.startswith("/v1/messages/"):
        return [(f"Cluster:{cluster}", "Sub")]
    if path == "/v1/topics":
        return [(f"Cluster:{cluster}", "Admin")] if method == "POST" else []
    m = _TOPIC.match(path)
    if m is not None:
        return _topic_permissions(method, m["topic"], m["rest"] or "", query)
    g = _GROUP.match(path)
    if g is not None:
        group = f"Group:{g['group']}"
        if method == "PUT" and not g["rest"]:
            return [(group, "Admin")]
        topic = _query(query, "topic")
        return [(group, "Sub")] + ([_topic_resource(topic)] if topic else [])
    return []


def _topic_permissions(method: str, topic: str, rest: str, query: str) -> list[Permission]:
    if method == "POST" and rest == "/messages":
        if topic.startswith(_RETRY):
            return [(f"Group:{topic[len(_RETRY):]}", "Sub")]
        return [(f"Topic:{topic}", "Pub")]
    if method in ("DELETE", "PUT", "PATCH", "POST"):
        return [(f"Topic:{topic}", "Admin")]
    needs = [_topic_resource(topic)]
    group = _query(query, "group") if rest.endswith("/messages") else None
    if group:
        needs.append((f"Group:{group}", "Sub"))
    return needs
