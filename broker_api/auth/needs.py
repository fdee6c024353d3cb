"""What a route needs, declared next to its handler (see :mod:`broker_api.http.guard`).

A route lists :class:`Need` values; each names a resource kind, where the
resource's name comes from, and an action::

    Topic("path:topic", "Pub")          the {topic} path parameter, as the handler receives it
    Group("query:group", "Sub")         the ``group`` query parameter (skipped when absent)
    Topic("body:topic", "Sub", origins=True)  a field of the parsed JSON body; each message of a
                                        %RETRY%/%DLQ% topic is checked against its origin topic
    Topic("message:body.msg_id", "Sub") the topic of the message the body names (its origin topic
                                        for a %RETRY% / %DLQ% copy)
    Topic("receipt:body.receipts", "Sub") the topics of the popped messages the receipts name
    Cluster("Admin")                    this broker's cluster
    Owner("path:tx_id")                 the transaction(s) belong to the caller (a super user may end any)
    OPEN, CONTROL, LOGIN                no credentials; open unless ``[auth] control_open`` is false;
                                        any authenticated user

Names are resolved from the values the handler itself receives (FastAPI's
parsed parameters and body, or the one query parser's answer on the fast
lane), never from a second parse of the raw request.  A topic that is a
consumer group's ``%RETRY%g`` / ``%DLQ%g`` topic needs ``Group:g`` Sub:
the messages in it come from other topics, so whoever reads them is also
checked against each message's origin topic (:func:`origin_needs`).
No web framework is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .authn import Permission

__all__ = [
    "CONTROL",
    "LOGIN",
    "OPEN",
    "Cluster",
    "Group",
    "Marker",
    "Need",
    "Owner",
    "Topic",
    "group_of_topic",
    "topic_permission",
]

_GROUP_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%")


@dataclass(frozen=True)
class Need:
    """One permission a route needs: ``kind`` (Topic, Group, Cluster, Owner), ``source``, ``action``."""

    kind: str
    source: str
    action: str = ""
    origins: bool = False  # a group topic's messages are checked one by one by the handler (POP)

    def describe(self) -> str:
        if self.kind == "Cluster":
            return f"Cluster:<cluster> {self.action}"
        if self.kind == "Owner":
            return f"owner of {self.source}"
        return f"{self.kind}:<{self.source}> {self.action}"


@dataclass(frozen=True)
class Marker:
    """A route that needs no permission: ``open`` (no credentials), ``control`` or ``login``."""

    name: str

    def describe(self) -> str:
        return {"open": "nothing (open)", "control": "open, or a user when [auth] control_open = false",
                "login": "any authenticated user"}[self.name]


OPEN = Marker("open")
CONTROL = Marker("control")
LOGIN = Marker("login")


def Topic(source: str, action: str, origins: bool = False) -> Need:
    """A topic named by ``source``.  A group's %RETRY%/%DLQ% topic needs ``Group:g`` Sub and, as its
    messages come from any topic, ``Cluster`` Sub, unless ``origins``: the handler then checks
    each message's origin topic before it answers (POP)."""
    return Need("Topic", source, action, origins)


def Group(source: str, action: str) -> Need:
    """A consumer group named by ``source``."""
    return Need("Group", source, action)


def Cluster(action: str) -> Need:
    """This broker's cluster."""
    return Need("Cluster", "cluster", action)


def Owner(source: str) -> Need:
    """The transaction ids in ``source`` belong to the caller."""
    return Need("Owner", source)


def group_of_topic(topic: str) -> str | None:
    """``g`` for ``%RETRY%g`` / ``%DLQ%g``, else None."""
    for prefix in _GROUP_TOPIC_PREFIXES:
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return None


def topic_permission(topic: str, action: str) -> Permission:
    """``(Topic:t, action)``, or ``(Group:g, Sub)`` for a group's retry or dead-letter topic."""
    group = group_of_topic(topic)
    if group is not None:
        return f"Group:{group}", "Sub"
    return f"Topic:{topic}", action
