"""ACL policies (RocketMQ ACL 2.0's model, on HTTP resources).

A policy entry grants or refuses actions on a resource pattern::

    {"resource": "Topic:orders",  "actions": ["Pub"],        "decision": "allow"}
    {"resource": "Topic:audit-*", "actions": ["Sub"],        "decision": "allow"}
    {"resource": "Group:*",       "actions": ["Sub"],        "decision": "allow"}
    {"resource": "Cluster:*",     "actions": ["Admin"],      "decision": "deny"}

* Resource types: ``Topic``, ``Group``, ``Cluster``; ``*`` alone is any
  resource of any type.  ``Type:name`` is literal, ``Type:prefix*`` a prefix,
  ``Type:*`` any name of the type.
* Actions: ``Pub``, ``Sub``, ``Admin``, and ``All`` for the three.
* Decision: the entries whose pattern matches the resource and whose actions
  hold the action are ranked, most specific first: a named type beats ``*``;
  literal beats prefix beats any; a longer prefix beats a shorter one; at the
  same rank ``deny`` beats ``allow``.  The first decides.  No entry: denied.
* Super users skip all of this (:func:`is_allowed` is never asked for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ACTIONS", "Decision", "PolicyEntry", "RESOURCE_TYPES", "decide", "parse_entry", "parse_resource"]

RESOURCE_TYPES = ("Topic", "Group", "Cluster")
ACTIONS = ("Pub", "Sub", "Admin", "All")
Decision = Literal["allow", "deny"]

_LITERAL, _PREFIX, _ANY = 3, 2, 1


@dataclass(frozen=True)
class PolicyEntry:
    """One line of a user's policy: ``resource`` pattern, ``actions``, ``decision``."""

    resource: str
    actions: tuple[str, ...]
    decision: Decision = "allow"

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "actions": list(self.actions), "decision": self.decision}

    def rank(self, resource_type: str, name: str) -> tuple[int, int, int, int] | None:
        """How specifically this entry's pattern matches ``type:name`` (higher wins), or None."""
        if self.resource == "*":
            return (0, _ANY, 0, self.decision == "deny")
        kind, _, pattern = self.resource.partition(":")
        if kind != resource_type:
            return None
        if pattern == "*":
            return (1, _ANY, 0, self.decision == "deny")
        if pattern.endswith("*"):
            prefix = pattern[:-1]
            return (1, _PREFIX, len(prefix), self.decision == "deny") if name.startswith(prefix) else None
        return (1, _LITERAL, 0, self.decision == "deny") if name == pattern else None

    def covers(self, action: str) -> bool:
        return action in self.actions or "All" in self.actions


def parse_resource(text: str) -> str:
    """Check a resource pattern (``Topic:orders``, ``Topic:pre*``, ``Group:*``, ``*``); returns it."""
    text = text.strip()
    if text == "*":
        return text
    kind, sep, name = text.partition(":")
    if not sep or kind not in RESOURCE_TYPES or not name or "*" in name[:-1]:
        raise ValueError(f"resource {text!r} is not one of Topic:NAME, Topic:PREFIX*, Topic:*, "
                         "Group:..., Cluster:... or *")
    return text


def parse_entry(value: Any) -> PolicyEntry:
    """A policy entry from its JSON form; raises ValueError naming what is wrong."""
    if not isinstance(value, dict):
        raise ValueError(f"a policy entry is an object, not {value!r}")
    actions = value.get("actions")
    if isinstance(actions, str):
        actions = [a for a in actions.replace(",", " ").split() if a]
    if not isinstance(actions, list) or not actions:
        raise ValueError("a policy entry needs actions, e.g. [\"Pub\", \"Sub\"]")
    by_lower = {a.lower(): a for a in ACTIONS}
    unknown = [a for a in actions if str(a).lower() not in by_lower]
    if unknown:
        raise ValueError(f"unknown actions {unknown}; use {', '.join(ACTIONS)}")
    decision = str(value.get("decision", "allow")).lower()
    if decision not in ("allow", "deny"):
        raise ValueError(f"decision {decision!r} is not allow or deny")
    return PolicyEntry(parse_resource(str(value.get("resource", ""))),
                       tuple(sorted({by_lower[str(a).lower()] for a in actions})),
                       "allow" if decision == "allow" else "deny")


def decide(entries: tuple[PolicyEntry, ...], resource: str, action: str) -> PolicyEntry | None:
    """The entry that decides ``action`` on ``resource`` (``Type:name``), or None when none matches."""
    resource_type, _, name = resource.partition(":")
    best: tuple[tuple[int, int, int, int], PolicyEntry] | None = None
    for entry in entries:
        if not entry.covers(action):
            continue
        rank = entry.rank(resource_type, name)
        if rank is not None and (best is None or rank > best[0]):
            best = (rank, entry)
    return None if best is None else best[1]
