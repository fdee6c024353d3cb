"""SlaveSyncService: a slave copies its master's metadata (RocketMQ's SlaveSynchronize).

Topics (with their table settings), consumer-group offsets, subscription groups and delay progress are not part of the
CommitLog stream; every ``[ha] metadata_sync_interval_s`` the slave asks the
master's ``GET /v1/admin/metadata`` and takes the answer as it is (no reverse
sync: offsets committed on a slave do not exist, it refuses commits).  A sync
also runs as soon as replication (re)connects, and when replicated data names
a topic the slave does not know yet (a topic the master auto-created), so a
new topic is readable on the slave within moments, not a whole interval.

Between full syncs the slave asks the master's topic list (``GET
/v1/topics``, small) every half second and syncs at once when it differs,
so a topic created on the master is known to the slave within a second.
Replicated data for a queue beyond a topic's queue count (a slave with no
master HTTP address adopts topics from the data it replicated) grows that
count: the slave serves every queue it holds data for.

It copies only while the HA link is up and not refused: a slave pointed at
the wrong master never takes that master's topics.  Without a master HTTP
address (``[ha] master_url`` or a NameServer) it has nothing to ask and
says so once in the log.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

import httpx

from store.service_thread import ServiceThread

from ..errors import TopicNotFoundError
from ..model.groups import GroupManager
from ..model.topics import TopicConfig, TopicManager
from .replication import Replication

__all__ = ["SlaveSyncService"]

log = logging.getLogger(__name__)
_TICK_S = 0.25
_TOPICS_POLL_S = 0.5
_TIMEOUT_S = 5.0


class SlaveSyncService:
    """``start()``/``stop()``; ``sync_now()`` copies at once; ``status()`` for /v1/broker."""

    def __init__(self, replication: Replication, topics: TopicManager, groups: GroupManager, store: Any,
                 interval_s: float, delay: Any = None, http_options: dict[str, Any] | None = None) -> None:
        self._replication, self._topics, self._groups, self._store = replication, topics, groups, store
        # the broker's own credentials ([auth] token) and CA ([tls] ca_file): a master with auth or TLS
        self._http_options = dict(http_options or {})
        self._delay = delay  # DelayService: delivery progress follows the master
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._worker = ServiceThread("sparkmq-slave-sync", self._run, join_timeout_s=_TIMEOUT_S + 5,
                                     wake=self._wake.set)
        self.syncs = 0
        self.last_sync_ms: int | None = None
        self.last_error: str | None = None
        self._warned_no_master = False
        self._http: httpx.Client | None = None  # the worker thread's, see _client()

    def start(self) -> None:
        if self._worker.running:
            return
        self._store.add_arrival_listener(self._on_arrival)
        self._worker.start()

    def stop(self) -> None:
        """End the thread (an HTTP call in flight ends within its timeout); safe twice."""
        self._worker.stop()

    def _on_arrival(self, topic: str, queue_id: int, _max_offset: int) -> None:
        if not self._topics.exists(topic):
            self._wake.set()
            return
        try:
            if queue_id >= self._topics.get(topic).queues:
                self._wake.set()
        except TopicNotFoundError:
            pass  # a system topic: not served to clients

    def _client(self) -> httpx.Client:
        """The worker's one HTTP client (kept-alive connection, TLS context built once): the topic list is
        polled twice a second, and a client per poll cost ~55 ms of CPU each (its CA bundle loaded anew)."""
        if self._http is None:
            self._http = httpx.Client(timeout=_TIMEOUT_S, **self._http_options)
        return self._http

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            http, self._http = self._http, None
            if http is not None:
                http.close()

    def _loop(self) -> None:
        was_connected, next_due, next_poll = False, 0.0, 0.0
        while not self._worker.stopping.is_set():
            client = self._replication.client
            connected = client is not None and client.connected and client.error is None
            now = time.monotonic()
            woken = self._wake.is_set()
            self._wake.clear()
            polled = connected and now >= next_poll and self._master_topics_differ()
            if connected and (not was_connected or woken or polled or now >= next_due):
                self.sync_now()
                next_due = time.monotonic() + self._interval_s
            if connected and now >= next_poll:
                next_poll = now + _TOPICS_POLL_S
            if woken:  # replicated data of a topic (or queue) the master's metadata did not bring: serve it
                self._adopt_replicated()
            was_connected = connected
            self._wake.wait(_TICK_S)

    def _adopt_replicated(self) -> None:
        """Serve every (topic, queue) the slave holds replicated data for."""
        self._topics.adopt_store_topics(self._store)
        grown = []
        stored = self._store.topics()
        for cfg in self._topics.list():
            held = stored.get(cfg.name) or []
            if held and max(held) + 1 > cfg.queues:
                grown.append(dataclasses.replace(cfg, queues=max(held) + 1))
        if grown:
            self._topics.replace_all(grown, self._store, drop=False)
            log.info("slave: queue counts grown to the replicated data: %s",
                     {c.name: c.queues for c in grown})

    def _master_topics_differ(self) -> bool:
        """Does the master list other topics (or queue counts, perms) than this slave has? False if unknown."""
        url = self._replication.master_url
        if url is None:
            return False
        try:
            resp = self._client().get(f"{url}/v1/topics")
            resp.raise_for_status()
            theirs = {(str(t["name"]), int(t["queues"]), str(t["perm"])) for t in resp.json()}
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False  # the next full sync reports it
        return theirs != {(c.name, c.queues, c.perm) for c in self._topics.list()}

    def sync_now(self) -> bool:
        """Copy the master's metadata now; False (and ``last_error``) when the master did not answer."""
        url = self._replication.master_url
        if url is None:
            if not self._warned_no_master:
                log.warning("slave metadata sync: the master's HTTP address is unknown; set [ha] master_url "
                            "or register with a NameServer")
                self._warned_no_master = True
            return False
        try:
            resp = self._client().get(f"{url}/v1/admin/metadata")
            resp.raise_for_status()
            self._apply(resp.json())
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            if message != self.last_error:
                log.warning("slave metadata sync from %s failed: %s", url, message)
            self.last_error = message
            return False
        self.syncs += 1
        self.last_sync_ms, self.last_error = int(time.time() * 1000), None
        return True

    def _apply(self, body: dict[str, Any]) -> None:
        # with each topic's table settings (a slave keeps them for failover and shows them; it writes no table)
        topics = [TopicConfig.from_json(t) for t in body["topics"]]
        # The master reads its max offset before its topics: a topic with bytes below that offset
        # is in the answer.  A slave already holding more may hold a topic created since, so
        # nothing is dropped this round.
        drop = int(body["max_phy_offset"]) >= self._store.max_phy_offset()
        if self._topics.replace_all(topics, self._store, drop):
            log.info("slave metadata sync: %d topics from the master", len(topics))
        offsets = {g: {t: {int(q): int(o) for q, o in qs.items()} for t, qs in ts.items()}
                   for g, ts in body["offsets"].items()}
        self._groups.replace_all(offsets, dict(body.get("subscription_groups") or {}))
        if self._delay is not None and isinstance(body.get("delay_progress"), dict):
            self._delay.follow(body["delay_progress"])

    def status(self) -> dict[str, Any]:
        return {"syncs": self.syncs, "last_sync_ms": self.last_sync_ms, "last_error": self.last_error,
                "interval_s": self._interval_s}
