"""NameServer look-ups for the ``namesrv`` option: which brokers serve a topic.

The NameServer answers ``GET /v1/routes/{topic}``::

    {"topic": "orders",
     "brokers": [{"broker_name": "broker-a", "cluster": "c1",
                  "addresses": {"0": "http://127.0.0.1:8080", "1": ...}}],
     "queues":  [{"broker_name": "broker-a", "read_queues": 4,
                  "write_queues": 4, "perm": "rw"}]}

and ``GET /v1/topics`` → ``{"topics": {topic: [broker names]}}``. Several
NameServers (``;``-separated) are asked in turn; the first that knows wins.
Every address of a broker name is kept, master (id 0) first, then the
slaves by id: reads fall back to a slave while the master does not answer;
writes go to the master only (a broker name without a live master takes no
writes, as RocketMQ's publish info leaves it out).

A NameServer that just restarted has empty tables until its brokers
register again (they do within a second of it answering).  Every answer
carries its uptime (``X-Namesrv-Uptime-S``), so a look-up of a topic::

    answered by a NameServer younger than SETTLE_S   -> asked again once it is SETTLE_S old
                                                        (a partial route would move keys)
    "not found" from one younger than GRACE_S        -> asked again until found, GRACE_S old,
                                                        or the look-up's timeout passes
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from .auth import Trust
from .errors import NamesrvUnavailableError, TopicNotFoundError
from .transport import ConnectFailed, TransportFailed, open_transport

__all__ = ["GRACE_S", "SETTLE_S", "BrokerRoute", "NamesrvLookup"]

SETTLE_S = 3.0
GRACE_S = 60.0
_POLL_S = 0.25


@dataclass(frozen=True)
class BrokerRoute:
    """One broker name serving a topic: its addresses (master first) and queue counts."""

    name: str
    addresses: tuple[str, ...]
    read_queues: int
    write_queues: int
    has_master: bool = True

    @property
    def address(self) -> str:
        """The address tried first: the master's, else the lowest slave id's."""
        return self.addresses[0]

    @property
    def writable(self) -> bool:
        """Takes writes: writable queues and a live master (writes never go to a slave)."""
        return self.write_queues > 0 and self.has_master


def _ordered(addresses: dict[str, str]) -> tuple[str, ...]:
    """Addresses by broker id: the master (0) first, then the slaves."""
    return tuple(str(addresses[k]).rstrip("/") for k in sorted(addresses, key=int))


def parse_route(body: dict[str, Any]) -> dict[str, BrokerRoute]:
    """A route answer → broker name → :class:`BrokerRoute` (brokers without an address skipped)."""
    queues = {str(q["broker_name"]): q for q in body.get("queues", [])}
    out: dict[str, BrokerRoute] = {}
    for b in body.get("brokers", []):
        name = str(b["broker_name"])
        ids = {str(k): str(v) for k, v in (b.get("addresses") or {}).items()}
        q = queues.get(name)
        if not ids or q is None:
            continue
        perm = str(q.get("perm", "rw"))
        out[name] = BrokerRoute(
            name, _ordered(ids),
            int(q.get("read_queues", 0)) if "r" in perm else 0,
            int(q.get("write_queues", 0)) if "w" in perm else 0,
            has_master="0" in ids,
        )
    return dict(sorted(out.items()))


class NamesrvLookup:
    """Route and topic look-ups over one or more NameServers (full ``http://`` URLs)."""

    def __init__(self, addrs: tuple[str, ...], timeout_s: float = 10.0, trust: Trust = Trust()) -> None:
        self._addrs = addrs
        self._timeout_s = timeout_s
        self._http = open_transport(addrs, trust, timeout_s, min(3.0, timeout_s))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NamesrvLookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def route(self, topic: str) -> dict[str, BrokerRoute]:
        """Brokers serving ``topic``; raises TopicNotFoundError when none does."""
        body = self._get(f"/v1/routes/{topic}", topic)
        return parse_route(body)

    def topics(self) -> list[str]:
        """Every topic some live broker serves."""
        return sorted(self._get("/v1/topics", None).get("topics") or {})

    def _get(self, path: str, topic: str | None) -> dict[str, Any]:
        deadline = time.monotonic() + self._timeout_s
        while True:
            body, young, errors = self._ask(path, topic)
            if body is not None and (topic is None or young is None or young >= SETTLE_S):
                return body
            if body is None and (young is None or young >= GRACE_S):
                break  # not found by a NameServer old enough to know, or nobody answered
            now = time.monotonic()
            if now >= deadline:
                if body is not None:
                    return body
                break
            wait = SETTLE_S - young if body is not None else _POLL_S
            time.sleep(max(0.01, min(wait, deadline - now)))
        if young is not None:
            raise TopicNotFoundError(
                f"no live broker serves topic {topic!r} according to the NameServer(s) "
                f"{list(self._addrs)}; create the topic on a broker registered with them "
                "(`sparkmq topic create`), or check GET /v1/cluster on the NameServer",
                status=404, code="topic_not_found",
            )
        raise NamesrvUnavailableError(
            f"no NameServer answered GET {path}: {'; '.join(errors)}. Is the NameServer "
            "running (`sparkmq namesrv`) and is the 'namesrv' option right "
            "(host:port, several ';'-separated)?"
        )

    def _ask(self, path: str, topic: str | None) -> tuple[dict[str, Any] | None, float | None, list[str]]:
        """One pass over the NameServers: (answer or None, the uptime of who answered or said "not
        found" (GRACE_S when it did not say), errors); uptime None when nobody answered either way."""
        errors: list[str] = []
        young: float | None = None
        for base in self._addrs:
            try:
                resp = self._http.request("GET", base + path)
            except (ConnectFailed, TransportFailed) as exc:
                errors.append(f"{base}: {exc}")
                continue
            if resp.status_code == 200:
                return dict(orjson.loads(resp.content)), _uptime(resp.headers), errors
            if resp.status_code == 404 and topic is not None:
                young = max(young or 0.0, _uptime(resp.headers))
                continue
            errors.append(f"{base}: HTTP {resp.status_code} {resp.text[:200]}")
        return None, young, errors


def _uptime(headers: Any) -> float:
    """The answering NameServer's uptime; GRACE_S (old enough to trust) when it does not say."""
    try:
        return float(headers.get("X-Namesrv-Uptime-S") or GRACE_S)
    except (TypeError, ValueError):
        return GRACE_S
