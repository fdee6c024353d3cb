"""Executor side: Arrow pulls of one partition over a plain kept-alive HTTP connection.

A read task pulls pages of about 1 MB in a loop. Through httpx each page is
read in 64 KB chunks by h11 and joined, about 1.7 ms of CPU per 10k-row page
on the test box, and the first client of each Python worker imports httpcore
(and trio, when installed) and loads the system CA store. ``http.client``
reads the same page into one buffer for about 0.5 ms, and needs neither.

:class:`PagePuller` takes that path only where nothing else is needed: one
``http://`` address and no credentials. Anything else (TLS, a token,
signing, master and slave addresses) goes through :class:`BrokerClient`,
and so does any pull the plain path cannot answer with a 200: a refused
connection, a timeout, a 4xx or 5xx. The BrokerClient then asks again and
raises, backs off or fails over exactly as it does alone, and the plain
path is not used again by this puller after a connection error.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlencode, urlsplit

import pyarrow as pa

from .client import ARROW_MIME, BrokerClient, Page, _damaged
from .options import ClientConfig

__all__ = ["PagePuller"]


class PagePuller:
    """``pull_arrow`` for one partition's reads; :meth:`close` closes what was opened."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._client: BrokerClient | None = None
        self._conn: http.client.HTTPConnection | None = None
        self._prefix = ""
        url = urlsplit(config.endpoints[0]) if len(config.endpoints) == 1 else None
        if url is not None and url.scheme == "http" and url.hostname and not config.trust.http_options():
            self._conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=config.timeout_s)
            self._prefix = url.path.rstrip("/")

    @property
    def client(self) -> BrokerClient:
        """The full client, built the first time it is needed."""
        if self._client is None:
            self._client = BrokerClient(self._config)
        return self._client

    def pull_arrow(self, topic: str, queue_id: int, offset: int, max_messages: int, tags: str | None,
                   filter_sql: str | None = None, fields: str | None = None) -> Page:
        """Same answer as :meth:`BrokerClient.pull_arrow`."""
        if self._conn is not None:
            params: dict[str, Any] = {"offset": offset, "max_messages": max_messages, "wait_ms": 0}
            params.update((k, v) for k, v in (("tags", tags), ("fields", fields), ("filter", filter_sql)) if v)
            page = self._plain(f"{self._prefix}/v1/topics/{topic}/queues/{queue_id}/messages?{urlencode(params)}")
            if page is not None:
                return page
        return self.client.pull_arrow(topic, queue_id, offset, max_messages, tags, filter_sql, fields)

    def _plain(self, target: str) -> Page | None:
        """The page, or None when the full client should answer (and say what went wrong)."""
        assert self._conn is not None
        try:
            self._conn.request("GET", target, headers={"Accept": ARROW_MIME})
            resp = self._conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException):
            self._conn.close()
            self._conn = None  # down or unreachable: the full client waits, backs off and reports
            return None
        if resp.status != 200:
            return None
        header = resp.getheader
        return Page(status=header("X-Sparkmq-Status", "FOUND") or "FOUND",
                    table=pa.ipc.open_stream(body).read_all(),
                    next_offset=int(header("X-Sparkmq-Next-Offset") or 0),
                    min_offset=int(header("X-Sparkmq-Min-Offset") or 0),
                    max_offset=int(header("X-Sparkmq-Max-Offset") or 0),
                    damaged=_damaged(header("X-Sparkmq-Damaged", "") or ""))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> PagePuller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
