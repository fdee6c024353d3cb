"""The produce answer: one result per message (the default), or a summary per queue.

A client picks the form with the query parameter ``answer``:

* ``answer=full`` (default)::

      {"status": "SEND_OK", "results": [{"msg_id": "...", "queue_id": 0, "queue_offset": 41}, ...]}

* ``answer=summary`` (a few dozen bytes whatever the batch size)::

      {"status": "SEND_OK", "count": 1000, "scheduled": 0,
       "queues": [{"queue_id": 0, "first_offset": 4000, "last_offset": 4249, "count": 250}, ...]}

  The messages of one request that went to one queue have consecutive queue offsets,
  ``first_offset`` .. ``last_offset``, in request order (a produce is one store put, and a
  put takes each queue's offsets in a row).  Queues are listed in the order of their first
  message in the request, so with round robin (no key, no ``queue_id``) row ``i`` of the
  request is message ``i // len(queues)`` of entry ``i % len(queues)``.  Message ids are not
  in a summary: a stored message is addressed by (topic, queue_id, offset), and a pull page
  of that offset carries its ``msg_id``.  Delayed messages wait in a hidden topic and have
  no offset yet: they are counted in ``scheduled`` only.
  A transactional produce always answers in full (its half messages have no offset).

The summary saves the broker building, encoding and writing ~70 bytes per message
(70 KB for a batch of 1,000), which is what a bulk producer that does not keep msg ids
pays for nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from store import ColumnPutResult, PutResult

from ..errors import BadRequestError

__all__ = ["Answer", "answer_form", "column_summary", "message_answer"]

Answer = Literal["full", "summary"]
_FORMS: dict[str, Answer] = {"full": "full", "summary": "summary"}


def answer_form(query: Any) -> Answer:
    """The ``answer`` query parameter (``full`` when absent); a 400 for anything else."""
    raw = query.get("answer")
    if raw is None or raw == "":
        return "full"
    form = _FORMS.get(raw.lower())
    if form is None:
        raise BadRequestError(f"answer={raw!r} is not an answer form; pass answer=full (one result per "
                              "message, the default) or answer=summary (first and last offset per queue)")
    return form


def _queue_entry(queue_id: int, first: int, count: int) -> dict[str, int]:
    return {"queue_id": queue_id, "first_offset": first, "last_offset": first + count - 1, "count": count}


def column_summary(status: str, results: Sequence[ColumnPutResult]) -> dict[str, Any]:
    """The summary of a column put (one result per queue, offsets consecutive by construction)."""
    queues = [_queue_entry(r.queue_id, r.first_queue_offset, len(r)) for r in results]
    return {"status": status, "count": sum(len(r) for r in results), "scheduled": 0, "queues": queues}


def _summary(status: str, results: Sequence[PutResult], topic: str) -> dict[str, Any]:
    firsts: dict[int, int] = {}
    counts: dict[int, int] = {}
    scheduled = 0
    for r in results:
        if r.topic != topic:
            scheduled += 1
            continue
        q = r.queue_id
        if q in counts:
            counts[q] += 1
        else:
            firsts[q], counts[q] = r.queue_offset, 1
    queues = [_queue_entry(q, firsts[q], counts[q]) for q in firsts]
    return {"status": status, "count": len(results), "scheduled": scheduled, "queues": queues}


def message_answer(status: str, results: Sequence[PutResult], topic: str, form: Answer,
                   scheduled: Any) -> dict[str, Any]:
    """The answer of a per-message put; ``scheduled(results)`` gives the full results when some
    messages were delayed (their real queue, no offset yet)."""
    if form == "summary":
        return _summary(status, results, topic)
    if results and (results[0].topic != topic or results[-1].topic != topic):
        return {"status": status, "results": scheduled(results)}
    return {"status": status, "results": [{"msg_id": r.msg_id, "queue_id": r.queue_id,
                                           "queue_offset": r.queue_offset} for r in results]}
