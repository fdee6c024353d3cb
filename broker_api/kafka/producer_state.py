"""Idempotent producers' sequence state, kept in the log itself so that it survives a restart.

The first message of each batch from an idempotent producer carries the property
``KAFKA_SEQ = "<producer id>,<epoch>,<first seq>,<last seq>"`` (one property per batch, not per
record; Fetch does not return it as a header). After a restart the broker has no state for a
producer id it did not hand out itself; the first batch of such a producer on a partition makes it
read back the partition's last :data:`SCAN_RECORDS` messages and rebuild the producer's recent
batches from those stamps, so a batch retried across the restart is answered, not stored twice.
"""

from __future__ import annotations

from typing import Any

from store.pull import PullColumns

__all__ = ["SEQ_PROPERTY", "SCAN_RECORDS", "stamp", "recover"]

SEQ_PROPERTY = "KAFKA_SEQ"
SCAN_RECORDS = 20_000
_PAGE = 5_000
_MARK = SEQ_PROPERTY.encode() + b"\x01"


def stamp(producer_id: int, epoch: int, first: int, last: int) -> str:
    return f"{producer_id},{epoch},{first},{last}"


def recover(store: Any, topic: str, queue: int, lo: int, hi: int, producer_id: int,
            epoch: int) -> list[tuple[int, int, int]]:
    """The producer's (first seq, last seq, base offset) batches found in the partition's tail, oldest first."""
    found: list[tuple[int, int, int]] = []
    want = _MARK + f"{producer_id},{epoch},".encode()
    offset = max(lo, hi - SCAN_RECORDS)
    while offset < hi:
        page = store.get_message_columns(topic, queue, offset, _PAGE, settle=False)
        rows = list(_rows(page))
        if not rows:
            break
        for queue_offset, props in rows:
            at = props.find(want)
            if at >= 0:
                end = props.find(b"\x02", at)
                fields = props[at + len(_MARK):end if end >= 0 else None].split(b",")
                found.append((int(fields[2]), int(fields[3]), queue_offset))
        offset = rows[-1][0] + 1
    return found


def _rows(page: Any) -> Any:
    """(queue offset, raw properties) of a page's messages whose properties hold a stamp."""
    if isinstance(page, PullColumns):
        if not len(page):
            return
        props, po = page.properties.tobytes(), page.property_offsets.tolist()
        offsets = page.queue_offsets.tolist()
        if _MARK not in props:
            yield offsets[-1], b""
            return
        for i, off in enumerate(offsets):
            yield off, props[po[i]:po[i + 1]]
        return
    batch = getattr(page, "batch", None)
    if batch is None:
        return
    yield from zip(batch.queue_offsets.tolist(), batch.properties_raw)
