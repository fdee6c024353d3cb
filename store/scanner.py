"""Parse a run of CommitLog bytes into a columnar DispatchBatch.

Used by the reput service (dispatch) and by recovery (find the valid end).
Every record is checked: magic code, lengths that add up, the physical
offset it claims, and (when asked) the body CRC.  The scan stops at the
first record that fails, at a BLANK record, or at a record cut short by the
end of the chunk; the caller learns which.

Work is split so that Python pays per record only what cannot be avoided:

1. walk: a tight loop follows TOTAL_SIZE from record to record;
2. headers: numpy gathers the 88-byte headers of all records at once and
   checks magic, physical offsets and lengths as arrays;
3. CRC (recovery): one zlib call per body;
4. columns (dispatch): topics decoded per distinct value, properties split.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass

import numpy as np

from . import codec
from .dispatch import DispatchBatch

__all__ = ["ScanStop", "ScanResult", "scan_chunk"]

_HS = codec.HEADER_SIZE
_MIN_RECORD = _HS + 3
_MSG = codec.MESSAGE_MAGIC
_BLANK = codec.BLANK_MAGIC
_HDR_RANGE = np.arange(_HS, dtype=np.int64)
_SIZE_MAGIC = codec._SIZE_MAGIC


class ScanStop(enum.Enum):
    END = "end"  # consumed the whole chunk
    BLANK = "blank"  # reached the segment's BLANK filler
    SHORT = "short"  # the last record runs past the chunk
    INVALID = "invalid"  # a record failed a check


@dataclass(slots=True)
class ScanResult:
    batch: DispatchBatch
    consumed: int  # bytes of valid records parsed
    stop: ScanStop
    reason: str = ""


def _walk(buf: bytes) -> tuple[list[int], ScanStop, str]:
    """Follow TOTAL_SIZE fields; returns record starts and why the walk ended."""
    starts: list[int] = []
    append, unpack = starts.append, _SIZE_MAGIC.unpack_from
    pos, end = 0, len(buf)
    while pos + 8 <= end:
        total, magic = unpack(buf, pos)
        if magic != _MSG or total < _MIN_RECORD or pos + total > end:
            break
        append(pos)
        pos += total
    if pos == end:
        return starts, ScanStop.END, ""
    if pos + 8 > end:
        return starts, ScanStop.SHORT, ""
    total, magic = unpack(buf, pos)
    if magic == _BLANK:
        return starts, ScanStop.BLANK, ""
    if magic == _MSG and total >= _MIN_RECORD:
        return starts, ScanStop.SHORT, ""
    return starts, ScanStop.INVALID, f"bad magic {magic:#x} or size {total}"


def _first_false(ok: np.ndarray) -> int:
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if len(bad) else len(ok)


def scan_chunk(buf: bytes, base_offset: int, *, check_crc: bool, store_host: int, collect: bool = True) -> ScanResult:
    """Parse records in ``buf``, whose first byte lies at log offset ``base_offset``.

    With ``collect=False`` only checks records (recovery); the batch is empty.
    """
    starts, stop, reason = _walk(buf)
    n = len(starts)
    st = np.array(starts, np.int64)
    u8 = np.frombuffer(buf, np.uint8)
    hdr = u8[st[:, None] + _HDR_RANGE].view(codec.HEADER_DTYPE).reshape(n) if n else np.empty(0, codec.HEADER_DTYPE)
    total = hdr["total"].astype(np.int64)
    blen = hdr["body_len"].astype(np.int64)
    t_at = st + _HS + blen  # TOPIC_LENGTH byte
    ok = (blen >= 0) & (t_at + 3 <= st + total) & (hdr["phy_offset"] == base_offset + st)
    last = len(buf) - 1
    tlen = u8[np.clip(t_at, 0, last)].astype(np.int64)
    p_at = t_at + 1 + tlen  # PROPERTIES_LENGTH
    plen = u8[np.clip(p_at, 0, last)].astype(np.int64) * 256 + u8[np.clip(p_at + 1, 0, last)]
    ok &= p_at + 2 + plen == st + total
    good = _first_false(ok)
    if check_crc and good:
        b0s, bls = (st[:good] + _HS).tolist(), blen[:good].tolist()
        with memoryview(buf) as mv:
            crcs = np.fromiter((zlib.crc32(mv[b : b + k]) for b, k in zip(b0s, bls)), np.uint32, good)
        good = _first_false(crcs == hdr["crc"][:good])
    if good < n:
        stop, reason = ScanStop.INVALID, f"record at {base_offset + starts[good]} fails its checks"
    consumed = starts[good] if good < n else (int(st[-1] + total[-1]) if n else 0)
    if not collect:
        good = 0
    sl = slice(0, good)
    batch = _columns(buf, hdr[sl], st[sl], blen[sl], t_at[sl], tlen[sl], p_at[sl], plen[sl], store_host,
                     base_offset + consumed)
    return ScanResult(batch, consumed, stop, reason)


def _columns(buf: bytes, hdr: np.ndarray, st: np.ndarray, blen: np.ndarray, t_at: np.ndarray, tlen: np.ndarray,
             p_at: np.ndarray, plen: np.ndarray, store_host: int, end_offset: int) -> DispatchBatch:
    topics_cache: dict[bytes, str] = {}
    tag_cache: dict[str | None, int] = {None: 0}
    topics: list[str] = []
    keys: list[tuple[str, ...]] = []
    tags: list[str | None] = []
    props: list[bytes] = []
    bodies: list[bytes] = []
    split = codec.split_properties
    for s, b, t, tl, p, pl in zip((st + _HS).tolist(), blen.tolist(), (t_at + 1).tolist(), tlen.tolist(),
                                  (p_at + 2).tolist(), plen.tolist()):
        tb = buf[t : t + tl]
        topic = topics_cache.get(tb)
        if topic is None:
            topic = topics_cache[tb] = tb.decode("utf-8", "replace")
        topics.append(topic)
        k, tg, rest = split(buf[p : p + pl])
        keys.append(k)
        tags.append(tg)
        props.append(rest)
        bodies.append(buf[s : s + b])
    for tg in set(tags):
        if tg not in tag_cache:
            tag_cache[tg] = codec.tag_code(tg)
    phys = hdr["phy_offset"].astype(np.int64)
    prefix = f"{store_host:016X}"
    return DispatchBatch(
        topics=topics,
        queue_ids=hdr["queue_id"].astype(np.int32),
        queue_offsets=hdr["queue_offset"].astype(np.int64),
        phy_offsets=phys,
        sizes=hdr["total"].astype(np.int32),
        tag_codes=np.fromiter(map(tag_cache.__getitem__, tags), np.int64, len(tags)),
        store_timestamps=hdr["store_ts"].astype(np.int64),
        born_timestamps=hdr["born_ts"].astype(np.int64),
        sys_flags=hdr["sys_flag"].astype(np.int32),
        keys=keys,
        tags=tags,
        properties_raw=props,
        bodies=bodies,
        msg_ids=[f"{prefix}{p:016X}" for p in phys.tolist()],
        end_offset=end_offset,
    )
