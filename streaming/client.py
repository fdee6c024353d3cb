"""A small synchronous HTTP client for the broker, used by driver and executors.

All endpoint handling lives in :class:`BrokerClient._request`. A client
talks to one broker: its master's URL, then its slaves' (``endpoint`` list,
or a NameServer route). Reads go to the first address a shared
:class:`health.BrokerHealth` does not hold back, so they fall back to a
slave while the master fails and return to the master once it answers;
writes (produce, transactions, sink commits, group offsets) go to the
master only. Requests that may have reached the broker are only retried
when they are idempotent; a connection refused or a 503/429 (fast failure,
nothing stored) is always retried, a bounded number of times.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .errors import BrokerRequestError, BrokerUnavailableError, TopicNotFoundError
from .health import BrokerHealth
from .offsets import QueueRange
from .options import ClientConfig
from .transport import ConnectFailed, Reply, TransportFailed, open_transport

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BrokerClient", "Page", "ARROW_MIME"]

log = logging.getLogger("sparkmq.streaming")

ARROW_MIME = "application/vnd.apache.arrow.stream"
_ROUNDS = 3
_BACKOFF_S = (0.1, 0.3, 1.0)
_BUSY_RETRIES = 32  # busy answers (429/503 with Retry-After) waited out per request, within timeout_s
_NOT_FOUND = {"topic_not_found", "queue_not_found"}


@dataclass(frozen=True)
class Page:
    """One Arrow pull answer: the rows and the queue's window."""

    status: str
    table: pa.Table
    next_offset: int
    min_offset: int
    max_offset: int
    damaged: str = ""  # status CORRUPT_MESSAGE: what the broker says about the damaged record


def _damaged(header: str) -> str:
    """The broker's description of a damaged record (``X-Sparkmq-Damaged``, JSON)."""
    if not header:
        return ""
    try:
        return str(orjson.loads(header).get("message", header))
    except (ValueError, AttributeError):
        return header


class BrokerClient:
    """Talks to one broker (master URL, then slave URLs) over HTTP.

    ``health`` shares back-off with the other clients of a routing layer;
    when it is given, a request to a broker whose every address is backing
    off fails at once, without a network call. ``rounds`` is how many passes
    over the addresses are made before giving up.
    """

    def __init__(
        self, config: ClientConfig, *, health: BrokerHealth | None = None, rounds: int = _ROUNDS
    ) -> None:
        self._config = config
        self._shared = health is not None
        self._health = health if health is not None else BrokerHealth()
        self._rounds = max(1, rounds)
        self._http = open_transport(config.endpoints, config.trust, config.timeout_s, min(5.0, config.timeout_s))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- endpoint handling ------------------------------------------------
    @property
    def master(self) -> str:
        """The address writes go to (the first configured one)."""
        return self._config.endpoints[0]

    def _endpoints(self, write: bool) -> list[str]:
        """Addresses to try, in order: the master only for writes."""
        urls = [self.master] if write else list(self._config.endpoints)
        return self._health.order(urls)

    def _request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool = True,
        write: bool = False,
        **kwargs: Any,
    ) -> Reply:
        urls = self._endpoints(write)
        if self._shared and self._health.all_backing_off(urls):
            raise self._unavailable(method, path, urls, self._backing_off(urls), write)
        errors: list[str] = []
        busy_until = time.monotonic() + self._config.timeout_s
        rounds = busy = 0
        while rounds < self._rounds:
            resp = self._try_endpoints(method, path, idempotent, errors, kwargs, urls)
            if resp is None:  # nobody answered: back off, a bounded number of rounds
                rounds += 1
                if rounds < self._rounds:
                    time.sleep(self._pause(rounds))
                urls = self._endpoints(write)
            elif resp.status_code in (429, 503) and busy < _BUSY_RETRIES and time.monotonic() < busy_until:
                # fast failure: nothing was stored; wait as told (doubling, jittered), a bounded number of times
                busy += 1
                told = float(resp.headers.get("Retry-After", "0.1") or 0.1)
                delay = min(2.0, told * 2 ** (busy - 1)) * random.uniform(0.5, 1.5)
                log.info("sparkmq broker %s busy (HTTP %s) on %s %s; retry %d of %d in %.2f s",
                         resp.host, resp.status_code, method, path, busy, _BUSY_RETRIES, delay)
                time.sleep(delay)
            else:
                return self._check(resp, method, resp.url)
        raise self._unavailable(method, path, urls, errors, write)

    def _pause(self, rounds: int) -> float:
        """Seconds between passes: fetchOffset.retryIntervalMs, else a short growing back-off."""
        if self._config.retry_interval_ms is not None:
            return self._config.retry_interval_ms / 1000.0
        return _BACKOFF_S[min(rounds, len(_BACKOFF_S)) - 1]

    def _backing_off(self, urls: list[str]) -> list[str]:
        out = []
        for url in urls:
            f = self._health.failure(url)
            if f is not None:
                out.append(f"{url}: {f.failures} failure(s) in a row, next try in "
                           f"{self._health.retry_in(url):.1f} s; last: {f.error}")
        return out

    def _unavailable(
        self, method: str, path: str, urls: list[str], errors: list[str], write: bool
    ) -> BrokerUnavailableError:
        """The error for a broker none of whose addresses answered."""
        failure = self._health.failure(urls[0]) if urls else None
        last = errors[-3:] or ([failure.error] if failure else [])
        several = len(self._config.endpoints) > 1
        only = " (writes go to the master only)" if write and several else ""
        if self._config.broker:
            text = (f"broker {self._config.broker!r} at {', '.join(urls)}{only} did not answer "
                    f"{method} {path} (address from the NameServer routes); is that broker "
                    f"running? last errors: {last}")
        else:
            text = (f"no sparkmq broker answered {method} {path} after {self._rounds} round(s) "
                    f"over {list(self._config.endpoints)}{only}; is the broker running and is "
                    f"the 'endpoint' option right? last errors: {last}")
        return BrokerUnavailableError(text, broker=self._config.broker, address=",".join(urls))

    def _try_endpoints(
        self, method: str, path: str, idempotent: bool, errors: list[str],
        kwargs: dict[str, Any], urls: list[str],
    ) -> Reply | None:
        """The first answer from ``urls`` in order, or None; failures feed the back-off."""
        for url in urls:
            try:
                resp = self._http.request(method, url + path, **kwargs)
            except ConnectFailed as exc:
                errors.append(f"{url}: {exc}")
                self._health.failed(url, str(exc))
                continue
            except TransportFailed as exc:
                self._health.failed(url, str(exc))
                if not idempotent:
                    raise BrokerUnavailableError(
                        f"{method} {url}{path} failed mid-request ({exc}); "
                        "not retried because it may have been applied",
                        broker=self._config.broker, address=url,
                    ) from exc
                errors.append(f"{url}: {exc}")
                continue
            self._health.succeeded(url)
            return resp
        return None

    @staticmethod
    def _check(resp: Reply, method: str, where: str) -> Reply:
        if resp.status_code < 400:
            return resp
        try:
            body = orjson.loads(resp.content)
            code, message = str(body.get("error", "")), str(body.get("message", resp.text))
        except (orjson.JSONDecodeError, AttributeError):
            code, message = "", resp.text[:500]
        text = f"broker answered {resp.status_code} {code} to {method} {where}: {message}"
        cls = TopicNotFoundError if code in _NOT_FOUND else BrokerRequestError
        raise cls(text, status=resp.status_code, code=code)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self._request(method, path, **kwargs).content)

    # -- topics and queues ------------------------------------------------
    def topics(self) -> list[str]:
        return sorted(str(t["name"]) for t in self._json("GET", "/v1/topics"))

    def queues(self, topic: str) -> dict[int, QueueRange]:
        rows = self._json("GET", f"/v1/topics/{topic}/queues")
        return {
            int(r["queue_id"]): QueueRange(int(r["min_offset"]), int(r["max_offset"]))
            for r in rows
        }

    def offset_at(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        path = f"/v1/topics/{topic}/queues/{queue_id}/offset"
        return int(self._json("GET", path, params={"timestamp_ms": timestamp_ms})["offset"])

    def pull_arrow(
        self, topic: str, queue_id: int, offset: int, max_messages: int, tags: str | None,
        filter_sql: str | None = None, fields: str | None = None,
    ) -> Page:
        """One Arrow page; ``fields`` (comma separated) names the columns wanted, all when None."""
        params: dict[str, Any] = {"offset": offset, "max_messages": max_messages, "wait_ms": 0}
        if tags:
            params["tags"] = tags
        if fields:
            params["fields"] = fields
        if filter_sql:
            params["filter"] = filter_sql
        resp = self._request(
            "GET", f"/v1/topics/{topic}/queues/{queue_id}/messages",
            params=params, headers={"Accept": ARROW_MIME},
        )
        import pyarrow as pa  # here, not at the top: the driver's sink commit needs no Arrow

        h = resp.headers
        table = pa.ipc.open_stream(resp.content).read_all()
        return Page(
            status=h.get("X-Sparkmq-Status", "FOUND"),
            table=table,
            next_offset=int(h["X-Sparkmq-Next-Offset"]),
            min_offset=int(h["X-Sparkmq-Min-Offset"]),
            max_offset=int(h["X-Sparkmq-Max-Offset"]),
            damaged=_damaged(h.get("X-Sparkmq-Damaged", "")),
        )

    # -- consumer groups --------------------------------------------------
    def group_offsets(self, group: str, topic: str) -> dict[int, int]:
        body = self._json("GET", f"/v1/groups/{group}/offsets", params={"topic": topic})
        return {int(q): int(o) for q, o in (body.get("offsets") or {}).items()}

    def commit_group(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        payload = {"topic": topic, "offsets": {str(q): int(o) for q, o in offsets.items()}}
        self._request("PUT", f"/v1/groups/{group}/offsets", write=True,
                      content=orjson.dumps(payload),
                      headers={"Content-Type": "application/json"})

    # -- producing and transactions ----------------------------------------
    def produce(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        *,
        transactional: bool = False,
        transaction_id: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"messages": messages}
        params: dict[str, str] = {}
        if transaction_id is not None:
            params["transaction_id"] = transaction_id
        elif transactional:
            payload["transactional"] = True
        resp = self._request(
            "POST", f"/v1/topics/{topic}/messages", idempotent=False, write=True, params=params,
            content=orjson.dumps(payload), headers={"Content-Type": "application/json"},
        )
        return dict(orjson.loads(resp.content))

    def produce_arrow(
        self,
        topic: str,
        table: pa.Table,
        *,
        transactional: bool = False,
        transaction_id: str | None = None,
        staged: bool = False,
    ) -> dict[str, Any]:
        """Bulk produce: an Arrow IPC stream with ``body`` (+ keys/tags/properties/queue_id).

        ``staged``: a transactional body kept unparsed by the broker until the commit
        (the sink's path; the answer has ``messages`` instead of per-message results)."""
        params: dict[str, str] = {"staging": "raw"} if staged else {}
        if transaction_id is not None:
            params["transaction_id"] = transaction_id
        elif transactional:
            params["transactional"] = "true"
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        resp = self._request(
            "POST", f"/v1/topics/{topic}/messages", idempotent=False, write=True, params=params,
            content=sink.getvalue().to_pybytes(), headers={"Content-Type": ARROW_MIME},
        )
        return dict(orjson.loads(resp.content))

    def end_transaction(self, transaction_id: str, action: str) -> None:
        self._request("POST", f"/v1/transactions/{transaction_id}", write=True,
                      content=orjson.dumps({"action": action}),
                      headers={"Content-Type": "application/json"})

    def commit_sink_batch(self, sink_id: str, batch_id: int, txids: list[str]) -> dict[str, Any]:
        return dict(self._json(
            "POST", f"/v1/sinks/{sink_id}/batches/{batch_id}/commit", write=True,
            content=orjson.dumps({"transaction_ids": txids}),
            headers={"Content-Type": "application/json"},
        ))

    def abort_sink_batch(self, sink_id: str, batch_id: int, txids: list[str]) -> None:
        self._request("POST", f"/v1/sinks/{sink_id}/batches/{batch_id}/abort", write=True,
                      content=orjson.dumps({"transaction_ids": txids}),
                      headers={"Content-Type": "application/json"})

    def sink_status(self, sink_id: str) -> dict[str, Any]:
        """``{"sink_id", "last_batch_id", "batches"}``; a sink never committed has None."""
        try:
            return dict(self._json("GET", f"/v1/sinks/{sink_id}", write=True))
        except BrokerRequestError as exc:
            if exc.status != 404:
                raise
            return {"sink_id": sink_id, "last_batch_id": None, "batches": []}
