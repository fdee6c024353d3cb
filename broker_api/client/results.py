"""What client calls return and raise: send results, pages, queue infos and the client's errors.

An error answer of a broker becomes the class its ``error`` code maps to in
:data:`broker_api.errors.ERROR_TABLE`, with ``.status`` and ``.code`` set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ERROR_TABLE, BrokerError

if TYPE_CHECKING:  # the results and errors load without httpx (the CLI's command modules name them)
    import httpx

__all__ = ["BrokerUnreachableError", "PullResult", "QueueInfo", "SendError", "SendResult", "answer_error",
           "busy_delay", "error_from_answer", "no_answer_error", "retryable", "unreachable_error"]

# error code -> the broker's class for it (the first, most specific, entry of ERROR_TABLE wins)
_CODE_CLASSES: dict[str, type[BrokerError]] = {
    code: cls for cls, (_, code) in reversed(ERROR_TABLE.items()) if issubclass(cls, BrokerError)
}
# answers that mean "nothing of this request was stored": safe to send again elsewhere
_NOT_STORED_CODES = frozenset({"broker_busy", "not_ready", "store_closed", "slave_read_only"})


class BrokerUnreachableError(BrokerError):
    """Raised when no broker or NameServer answered a client call (refused, timed out).

    ``broker`` and ``url`` name what failed; ``stored_unknown`` is True when
    the request may have reached the broker (a timeout after sending), so
    its messages may be stored.
    """

    def __init__(self, message: str, *, broker: str | None = None, url: str | None = None,
                 stored_unknown: bool = False) -> None:
        super().__init__(message)
        self.broker, self.url, self.stored_unknown = broker, url, stored_unknown


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where one produced message landed, and the broker's SendStatus for it.

    ``status`` is RocketMQ's SendStatus: ``SEND_OK``, or (stored on the master,
    not confirmed by a slave) ``FLUSH_SLAVE_TIMEOUT`` / ``SLAVE_NOT_AVAILABLE``.
    """

    broker: str
    msg_id: str
    queue_id: int
    queue_offset: int
    status: str = "SEND_OK"


class SendError(BrokerError):
    """Raised when some messages of a produce call were not stored; carries every message's outcome.

    ``results[i]`` is the :class:`SendResult` of message ``i`` when it was
    stored, else None and ``errors[i]`` says why.  Resend only the messages
    whose result is None, so nothing stored is sent twice.
    """

    def __init__(self, message: str, results: list[SendResult | None], errors: list[BrokerError | None]) -> None:
        super().__init__(message)
        self.results, self.errors = results, errors

    @property
    def sent(self) -> list[SendResult]:
        """The results of the messages that were stored, in call order."""
        return [r for r in self.results if r is not None]

    @property
    def failed(self) -> list[int]:
        """Indexes (in the call's list) of the messages that were not stored."""
        return [i for i, r in enumerate(self.results) if r is None]


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pulled page of a queue (``messages`` are the broker's JSON objects); ``url`` is who answered."""

    broker: str
    status: str
    messages: list[dict[str, Any]]
    next_offset: int
    min_offset: int
    max_offset: int
    url: str = ""
    damaged: dict[str, Any] | None = None  # status CORRUPT_MESSAGE: the record skipped by next_offset


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue of a topic on one broker; ``max_offset`` is exclusive."""

    broker: str
    queue_id: int
    min_offset: int
    max_offset: int


def error_from_answer(resp: httpx.Response, url: str) -> BrokerError:
    """The BrokerError subclass for an error answer (by its ``error`` code)."""
    return answer_error(resp.status_code, resp.content, resp.headers.get("Retry-After", ""), url)


def answer_error(status: int, content: bytes, retry_after: str, url: str) -> BrokerError:
    """:func:`error_from_answer` from the answer's parts (whichever HTTP library carried it)."""
    try:
        body = orjson.loads(content)
        code, message = str(body["error"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        text = content.decode("utf-8", errors="replace")
        code, message = f"http_{status}", f"HTTP {status} from {url}: {text[:200]}"
    exc = _CODE_CLASSES.get(code, BrokerError)(message)
    exc.status, exc.code = status, code  # type: ignore[attr-defined]
    if retry_after.isdigit():
        exc.retry_after_s = int(retry_after)
    return exc


def retryable(exc: BrokerError) -> bool:
    """Whether ``exc`` proves that nothing of the request was stored (so it may go to another broker)."""
    if isinstance(exc, BrokerUnreachableError):
        return not exc.stored_unknown
    return getattr(exc, "code", "") in _NOT_STORED_CODES


_MAX_BUSY_WAIT_S = 5.0


def busy_delay(exc: BrokerError, attempt: int, retries: int) -> float | None:
    """Seconds to wait before asking again after a busy answer (429/503 with Retry-After), or None.

    The broker's Retry-After, doubled per attempt, capped, with +-50 % jitter so
    refused clients do not come back in step; None once ``retries`` are spent
    or when the answer is not a "busy, nothing done" refusal.
    """
    status = getattr(exc, "status", 0)
    if attempt >= retries or status not in (429, 503) or not retryable(exc) or exc.retry_after_s is None:
        return None
    base = min(_MAX_BUSY_WAIT_S, max(0.05, float(exc.retry_after_s)) * 2 ** attempt)
    return base * random.uniform(0.5, 1.5)


def unreachable_error(method: str, url: str, broker: str | None, exc: httpx.HTTPError,
                      routed: bool) -> BrokerUnreachableError:
    """The error for a request that got no answer, naming the broker, its address and what is known."""
    import httpx  # loaded already: ``exc`` came from it

    # a refused or timed-out connection sent nothing; anything later may have been stored
    sent = method != "GET" and not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
    return no_answer_error(url, broker, f"{type(exc).__name__}: {exc}", sent=sent,
                           timed_out=isinstance(exc, httpx.TimeoutException), routed=routed)


def no_answer_error(url: str, broker: str | None, reason: str, *, sent: bool, timed_out: bool,
                    routed: bool) -> BrokerUnreachableError:
    """:func:`unreachable_error` from what is known: ``sent`` (the request may have reached the
    broker, so its messages may be stored) and ``timed_out``."""
    base = url.split("/v1")[0]
    who = f"broker {broker!r} at {base}" if broker else f"the broker at {base}"
    what = f"{who} did not answer in time" if timed_out else f"cannot reach {who}"
    where = "; the NameServer answered and still routes it" if routed and broker else ""
    detail = f"{what} ({reason}){where}"
    if sent:
        detail += "; the request may have been stored"
    return BrokerUnreachableError(detail, broker=broker, url=base, stored_unknown=sent)
