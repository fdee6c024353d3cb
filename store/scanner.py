"""Parse a run of CommitLog bytes into a columnar DispatchBatch.

Used by the reput service (dispatch) and by recovery (find the valid end).
Every record is checked: magic code, lengths that add up, the physical
offset it claims, and (when asked) the body CRC.  The scan stops at the
first record that fails, at a BLANK record, or at a record cut short by the
end of the chunk; the caller learns which.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass

import numpy as np

from . import codec
from .dispatch import DispatchBatch

__all__ = ["ScanStop", "ScanResult", "scan_chunk"]

_HEADER = codec.HEADER
_HS = codec.HEADER_SIZE
_MSG = codec.MESSAGE_MAGIC
_BLANK = codec.BLANK_MAGIC


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


def scan_chunk(buf: bytes, base_offset: int, *, check_crc: bool, store_host: int, collect: bool = True) -> ScanResult:
    """Parse records in ``buf``, whose first byte lies at log offset ``base_offset``.

    With ``collect=False`` only checks records (recovery); the batch is empty.
    """
    cols: dict[str, list] = {k: [] for k in ("topic", "qid", "qoff", "phy", "size", "tagc", "sts", "bts", "sys",
                                              "keys", "tags", "props", "body")}
    mv = memoryview(buf)
    pos, end = 0, len(buf)
    stop, reason = ScanStop.END, ""
    topics: dict[bytes, str] = {}
    tag_codes: dict[str | None, int] = {None: 0}
    while pos < end:
        if end - pos < 8:
            stop = ScanStop.SHORT
            break
        total, magic = codec._SIZE_MAGIC.unpack_from(buf, pos)
        if magic == _BLANK:
            stop = ScanStop.BLANK
            break
        if magic != _MSG or total < _HS + 3:
            stop, reason = ScanStop.INVALID, f"bad magic {magic:#x} or size {total} at {base_offset + pos}"
            break
        if pos + total > end:
            stop = ScanStop.SHORT
            break
        (_, _, crc, qid, _flag, qoff, phy, sysflag, born_ts, _bh, store_ts, _sh, _rc, _prep, blen) = \
            _HEADER.unpack_from(buf, pos)
        b0 = pos + _HS
        t0 = b0 + blen + 1
        if blen < 0 or t0 > pos + total:
            stop, reason = ScanStop.INVALID, f"bad body length at {base_offset + pos}"
            break
        tlen = buf[t0 - 1]
        p0 = t0 + tlen + 2
        plen = int.from_bytes(buf[p0 - 2 : p0], "big")
        if phy != base_offset + pos or p0 + plen != pos + total:
            stop, reason = ScanStop.INVALID, f"record at {base_offset + pos} is inconsistent"
            break
        if check_crc and zlib.crc32(mv[b0 : b0 + blen]) != crc:
            stop, reason = ScanStop.INVALID, f"body CRC mismatch at {base_offset + pos}"
            break
        if not collect:
            pos += total
            continue
        tb = buf[t0 : t0 + tlen]
        topic = topics.get(tb)
        if topic is None:
            topic = topics[tb] = tb.decode("utf-8", "replace")
        keys, tags, user = codec.split_properties(buf[p0 : p0 + plen])
        tc = tag_codes.get(tags)
        if tc is None:
            tc = tag_codes[tags] = codec.tag_code(tags)
        cols["topic"].append(topic)
        cols["qid"].append(qid)
        cols["qoff"].append(qoff)
        cols["phy"].append(phy)
        cols["size"].append(total)
        cols["tagc"].append(tc)
        cols["sts"].append(store_ts)
        cols["bts"].append(born_ts)
        cols["sys"].append(sysflag)
        cols["keys"].append(keys)
        cols["tags"].append(tags)
        cols["props"].append(user)
        cols["body"].append(buf[b0 : b0 + blen])
        pos += total
    mv.release()
    return ScanResult(_to_batch(cols, store_host, base_offset + pos), pos, stop, reason)


def _to_batch(cols: dict[str, list], store_host: int, end_offset: int) -> DispatchBatch:
    phys = np.array(cols["phy"], np.int64)
    prefix = f"{store_host:016X}"
    return DispatchBatch(
        topics=cols["topic"],
        queue_ids=np.array(cols["qid"], np.int32),
        queue_offsets=np.array(cols["qoff"], np.int64),
        phy_offsets=phys,
        sizes=np.array(cols["size"], np.int32),
        tag_codes=np.array(cols["tagc"], np.int64),
        store_timestamps=np.array(cols["sts"], np.int64),
        born_timestamps=np.array(cols["bts"], np.int64),
        sys_flags=np.array(cols["sys"], np.int32),
        keys=cols["keys"],
        tags=cols["tags"],
        properties_raw=cols["props"],
        bodies=cols["body"],
        msg_ids=[f"{prefix}{p:016X}" for p in cols["phy"]],
        end_offset=end_offset,
    )
