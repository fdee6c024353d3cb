"""ConsumeQueue ranges and IndexFiles go to S3 (moto on loopback) with their segments: once the local files of
old ranges are gone, pulls by queue offset, lookups by id, key and time still give the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store import GetStatus, Message, MessageStore, RemoteReadError
from tests.s3_support import S3Server
from tests.store.test_tiered import Opener, aws_env, open_tiered  # noqa: F401  (fixtures)

_TOPIC = "logics"
_SMALL = {"consumequeue_segment_units": 40, "index_entries": 64}  # 800-byte queue files, 63 keys per index file


def _fill(store: MessageStore, n: int = 240) -> list[Message]:
    msgs = [Message(_TOPIC, os.urandom(900) + i.to_bytes(4, "big"), queue_id=i % 2, keys=(f"k{i}",))
            for i in range(n)]
    for lo in range(0, n, 40):
        store.put_messages(msgs[lo : lo + 40])
    assert store.wait_visible(5.0)
    return msgs


def _queue(store: MessageStore, qid: int) -> list[tuple[int, int, str, int, bytes]]:
    out, offset = [], store.min_offset(_TOPIC, qid)
    while (r := store.get_messages(_TOPIC, qid, offset, 16)).status is GetStatus.FOUND:
        out += [(m.queue_offset, m.phy_offset, m.msg_id, m.store_timestamp, m.body) for m in r.messages]
        offset = r.next_offset
    return out


def _answers(store: MessageStore, msgs: list[Message]) -> dict[str, object]:
    queues = [_queue(store, 0), _queue(store, 1)]
    ids = [m[2] for q in queues for m in q[::7]]
    stamps = [q[i][3] for q in queues for i in (0, 20, 60)]
    return {
        "queues": queues, "mins": [store.min_offset(_TOPIC, q) for q in (0, 1)],
        "by_id": [store.get_message(i).body for i in ids],
        "by_key": [[m.body for m in store.query_by_key(_TOPIC, f"k{i}", 0, 1 << 62)] for i in range(0, 240, 5)],
        "by_time": [store.offset_for_timestamp(_TOPIC, q, ts) for q in (0, 1) for ts in stamps],
    }


def _local_units(store: MessageStore, qid: int) -> int:
    cq = store.queues.get(_TOPIC, qid)
    assert cq is not None
    return cq.files.min_offset() // 20


def test_queue_ranges_and_index_files_answer_after_the_local_ones_are_gone(aws_env: S3Server,  # noqa: F811
                                                                           open_tiered: Opener) -> None:  # noqa: F811
    bucket = aws_env.new_bucket()
    store, tier = open_tiered(f"s3://{bucket}/q", store_conf=_SMALL)
    msgs = _fill(store)
    before = _answers(store, msgs)
    assert [len(q) for q in before["queues"]] == [120, 120] and all(before["by_key"])  # type: ignore[arg-type]
    index_files = len(store.index.files())
    assert index_files >= 3 and tier.run_once() >= 3
    assert len(store.commitlog.queue.files) == 1
    assert min(_local_units(store, 0), _local_units(store, 1)) >= 80  # the queues' old files are gone
    assert len(store.index.files()) < index_files  # and so are the old index files
    keys = aws_env.keys(bucket, "q/")
    assert [k for k in keys if "/consumequeue/" in k] and [k for k in keys if "/index/" in k]
    assert _answers(store, msgs) == before  # the same answers, now from the object store
    tier.stop()
    store.shutdown()
    store, tier = open_tiered(f"s3://{bucket}/q", store_conf=_SMALL)  # restart: the manifest lists them
    assert _local_units(store, 0) >= 80 and _answers(store, msgs) == before


def test_a_damaged_queue_range_is_an_error_not_wrong_offsets(aws_env: S3Server,  # noqa: F811
                                                             open_tiered: Opener) -> None:  # noqa: F811
    bucket = aws_env.new_bucket()
    store, tier = open_tiered(f"s3://{bucket}/d", store_conf=_SMALL, cache_max_bytes=16 << 10)
    _fill(store)
    tier.run_once()
    cq = tier.manifest.segments()[0].cq
    assert cq is not None and _local_units(store, 0) > 0
    s3 = aws_env.client()
    body = bytearray(s3.get_object(Bucket=bucket, Key=f"d/{cq.key}")["Body"].read())
    body[3] ^= 0x01  # the first unit's physical offset, one bit
    s3.put_object(Bucket=bucket, Key=f"d/{cq.key}", Body=bytes(body))
    tier.cache.forget(cq.key)
    with pytest.raises(RemoteReadError, match="damaged"):
        store.get_messages(_TOPIC, 0, 0, 10)


def test_uploads_resume_after_a_kill_between_the_queue_range_and_the_manifest(open_tiered: Opener,  # noqa: F811
                                                                               tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    store, tier = open_tiered(str(remote), store_conf=_SMALL)
    msgs = _fill(store)
    before = _answers(store, msgs)
    tier.logics.upload_ranges(0, 64 << 10)  # as a kill after this PUT leaves it: an object nobody lists
    assert (remote / "consumequeue" / ("0" * 20)).exists() and tier.manifest.segments() == []
    tier.stop()
    store.shutdown()
    store, tier = open_tiered(str(remote), store_conf=_SMALL)
    assert tier.run_once() >= 3 and _answers(store, msgs) == before


def test_a_topic_deleted_and_created_again_keeps_its_new_queue_files(aws_env: S3Server,  # noqa: F811
                                                                    open_tiered: Opener) -> None:  # noqa: F811
    store, tier = open_tiered(f"s3://{aws_env.new_bucket()}/t", store_conf=_SMALL)
    _fill(store)
    assert tier.run_once() >= 3 and _local_units(store, 0) > 0  # the old topic's ranges are remote
    store.delete_topic(_TOPIC)
    _fill(store)  # the same name again: its queues start at offset 0
    before = [_queue(store, 0), _queue(store, 1)]
    assert before[0][0][0] == 0
    tier.run_once()
    assert [_queue(store, 0), _queue(store, 1)] == before  # never the old topic's remote units
