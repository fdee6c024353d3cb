"""Offline check of a CommitLog: every record's structure and body CRC, damage named.

``verify_commitlog(directory)`` reads the segment files in offset order and
walks each from its first byte, record by record (TOTAL_SIZE), until the
segment's BLANK filler or its unwritten (zero) tail::

    record ok?  magic, TOTAL_SIZE that fits, PHYSICAL_OFFSET = where it lies,
                body/topic/properties lengths that add up, and its whole-record
                CRC (:mod:`.wcrc`), or zlib.crc32(body) = BODY_CRC for a record
                written before it

A record whose structure holds but whose CRC does not is named with the
topic, queue and queue offset from its own header.  A record whose
structure is broken cannot say where the next one starts: the walk looks
for the next position holding MESSAGE_MAGIC whose PHYSICAL_OFFSET field
names that very position (a record start cannot be faked by chance), and
reports the skipped span.  Damage after which no valid record follows in
the newest segment is a torn tail, which recovery cuts on the next start;
it is reported apart, since it is what a crash normally leaves (unless the
store was shut down cleanly: then it is damage).

The check reads files only; it never writes, so a running broker's files
can be read, but the result is only exact for a stopped broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .crc import crc32
from . import codec, wcrc
from .quarantine import Quarantine, QuarantinedRecord

__all__ = ["Damage", "VerifyReport", "verify_commitlog"]

_HS = codec.HEADER_SIZE
_MAGIC_BYTES = codec.MESSAGE_MAGIC.to_bytes(4, "big")


@dataclass(frozen=True, slots=True)
class Damage:
    """One damaged record (or unreadable span) of the CommitLog."""

    phy_offset: int
    size: int  # bytes skipped
    reason: str
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None

    def describe(self) -> str:
        where = (f"topic {self.topic!r} queue {self.queue_id} offset {self.queue_offset}, "
                 if self.topic is not None else "")
        return f"{where}CommitLog offset {self.phy_offset} ({self.size} bytes): {self.reason}"


@dataclass(slots=True)
class VerifyReport:
    segments: int = 0
    records: int = 0
    bytes: int = 0
    damaged: list[Damage] = field(default_factory=list)
    torn_tail: Damage | None = None
    # what the store's recovery quarantined (``<root>/quarantine``): also in ``damaged`` while on disk
    quarantined: list[QuarantinedRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged


def _segments(directory: Path) -> list[tuple[int, Path]]:
    found = [(int(p.name), p) for p in directory.iterdir() if p.is_file() and p.name.isdigit()]
    return sorted(found)


def _check(buf: bytes, pos: int, base: int) -> tuple[int, str, tuple[str, int, int] | None]:
    """(total size or 0, reason if bad, (topic, queue, queue offset) when the header is sound)."""
    if pos + _HS > len(buf):
        return 0, "record header cut short by the end of the segment", None
    (total, _magic, crc, qid, _flag, qoff, phy, sysflag, *_rest, blen) = codec.HEADER.unpack_from(buf, pos)
    if total < _HS + 3 or pos + total > len(buf):
        return 0, f"TOTAL_SIZE {total} does not fit the segment", None
    if phy != base + pos:
        return 0, f"PHYSICAL_OFFSET field says {phy}", None
    t_at = pos + _HS + blen
    if blen < 0 or t_at + 3 > pos + total:
        return 0, f"BODY_LENGTH {blen} does not fit TOTAL_SIZE {total}", None
    tlen = buf[t_at]
    p_at = t_at + 1 + tlen
    plen = int.from_bytes(buf[p_at:p_at + 2], "big") if p_at + 2 <= pos + total else -1
    if p_at + 2 + plen != pos + total:
        return 0, "topic and properties lengths do not add up to TOTAL_SIZE", None
    where = (buf[t_at + 1:p_at].decode("utf-8", "replace"), qid, qoff)
    return total, _crc_problem(buf, pos, total, bool(sysflag & wcrc.FLAG), crc, blen), where


def _crc_problem(buf: bytes, pos: int, total: int, sealed: bool, crc: int, blen: int) -> str:
    if sealed:
        return "" if wcrc.trailer_ok(buf, pos + total, pos) else "whole-record CRC (WCRC) does not match"
    if wcrc.looks_sealed(buf, pos + total, pos):
        return "ends with a WCRC pair but its sys flag does not say so"
    return "" if crc32(buf[pos + _HS:pos + _HS + blen]) == crc else "body CRC does not match"


def _resync(buf: bytes, pos: int, base: int) -> int:
    """The next position after ``pos`` where a record plausibly starts, or len(buf)."""
    at = buf.find(_MAGIC_BYTES, pos + 1)
    while at >= 4:
        start = at - 4
        if start > pos and start + _HS <= len(buf) and codec.HEADER.unpack_from(buf, start)[6] == base + start:
            return start
        at = buf.find(_MAGIC_BYTES, at + 1)
    return len(buf)


def _walk(buf: bytes, base: int) -> Iterator[tuple[int, int, Damage | None]]:
    """(position, size, damage or None) for each record and each damaged span of one segment."""
    pos = 0
    while pos + 8 <= len(buf):
        total, magic = codec._SIZE_MAGIC.unpack_from(buf, pos)
        if total == 0 and magic == 0:
            nxt = _resync(buf, pos, base)
            if nxt == len(buf):
                return  # the unwritten tail of the segment
            yield pos, nxt - pos, Damage(base + pos, nxt - pos, "zeroed bytes")
            pos = nxt
            continue
        if magic == codec.BLANK_MAGIC:
            return
        size, reason, where = _check(buf, pos, base) if magic == codec.MESSAGE_MAGIC else (0, "bad MAGIC", None)
        if not reason:
            yield pos, size, None
            pos += size
            continue
        skip = size or (_resync(buf, pos, base) - pos)
        topic, qid, qoff = where if where else (None, None, None)
        yield pos, skip, Damage(base + pos, skip, reason, topic, qid, qoff)
        pos += skip


def verify_commitlog(directory: Path, *, clean_shutdown: bool = False) -> VerifyReport:
    """Check every record of the CommitLog in ``directory`` (its segment files); see the module doc.

    After a clean shutdown (``clean_shutdown``: the store has no abort marker)
    there is no torn tail: damage at the end is damage like any other.
    """
    report = VerifyReport()
    quarantine = Quarantine(directory.parent / "quarantine")
    quarantine.load()
    report.quarantined = quarantine.records()
    segments = _segments(directory)
    for i, (base, path) in enumerate(segments):
        buf = path.read_bytes()
        report.segments += 1
        last_good_end = 0
        pending: list[Damage] = []
        for pos, size, damage in _walk(buf, base):
            if damage is None:
                report.records += 1
                report.bytes += size
                last_good_end = pos + size
                report.damaged.extend(pending)
                pending = []
            else:
                pending.append(damage)
        if pending and not clean_shutdown and i == len(segments) - 1 and pending[0].phy_offset >= base + last_good_end:
            first = pending[0]
            report.torn_tail = Damage(first.phy_offset, sum(d.size for d in pending), "torn tail: " + first.reason)
        else:
            report.damaged.extend(pending)
    return report
