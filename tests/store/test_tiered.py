"""Tiered CommitLog against a real S3 API (moto's server on loopback): upload, drop, read back the
same bytes by offset, id, key and time; damaged and missing objects; retention; failed uploads; restart."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store import GetStatus, Message, MessageStore, RemoteReadError
from store.tiered import TieredConfig, TieredStorage
from tests.s3_support import S3Server
from tests.store.conftest import small_config

_TOPIC = "tier"
Opener = Callable[..., tuple[MessageStore, TieredStorage]]


@pytest.fixture
def aws_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """obstore reads credentials and the endpoint from the environment, as in production."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def open_tiered(tmp_path: Path) -> Iterator[Opener]:
    opened: list[tuple[MessageStore, TieredStorage]] = []

    def _open(uri: str, root: Path | None = None, store_conf: dict[str, object] | None = None,
              **tiered: object) -> tuple[MessageStore, TieredStorage]:
        store = MessageStore(small_config(root or tmp_path / "store", **(store_conf or {})))
        conf = dict(uri=uri, local_retention_s=0.0, interval_s=3600.0, block_bytes=16 << 10, retention_s=0.0)
        tier = TieredStorage(store, TieredConfig(**{**conf, **tiered}))  # type: ignore[arg-type]
        store.start()
        tier.start()
        opened.append((store, tier))
        return store, tier

    yield _open
    for store, tier in opened:
        tier.stop()
        store.shutdown()


def _fill(store: MessageStore, n: int = 240) -> list[str]:
    """n messages of ~1 KiB (about four 64 KiB segments) with keys; returns their ids."""
    ids: list[str] = []
    for lo in range(0, n, 40):
        msgs = [Message(_TOPIC, os.urandom(900) + i.to_bytes(4, "big"), keys=(f"k{i}",)) for i in range(lo, lo + 40)]
        ids += [r.msg_id for r in store.put_messages(msgs)]
    assert store.wait_visible(5.0)
    return ids


def _read_all(store: MessageStore) -> list[tuple[int, int, bytes]]:
    out, offset = [], store.min_offset(_TOPIC, 0)
    while True:
        r = store.get_messages(_TOPIC, 0, offset, 64)
        if r.status is not GetStatus.FOUND:
            return out
        out += [(m.queue_offset, m.phy_offset, m.body) for m in r.messages]
        offset = r.next_offset


def _columns(store: MessageStore) -> bytes:
    page = store.get_message_columns(_TOPIC, 0, 0, 1000)
    return bytes(page.bodies) if hasattr(page, "bodies") else b""


def test_segments_move_to_s3_and_read_back_the_same(aws_env: S3Server, open_tiered: Opener) -> None:
    bucket = aws_env.new_bucket()
    store, tier = open_tiered(f"s3://{bucket}/broker-a")
    ids = _fill(store)
    before, columns, first = _read_all(store), _columns(store), store.get_message(ids[0])
    local_segments = len(store.commitlog.queue.files)
    assert local_segments >= 4
    assert tier.run_once() == local_segments - 1
    assert len(store.commitlog.queue.files) == 1  # only the active segment is local
    keys = aws_env.keys(bucket, "broker-a/")
    assert len([k for k in keys if "/commitlog/" in k]) == local_segments - 1 and "broker-a/manifest.json" in keys
    assert _read_all(store) == before  # pulls, by offset
    assert _columns(store) == columns  # the column (Arrow) page path
    assert store.get_message(ids[0]) == first  # by id
    assert [m.body for m in store.query_by_key(_TOPIC, "k3", 0, 1 << 62)] == [before[3][2]]  # by key
    ts = first.store_timestamp
    assert store.offset_for_timestamp(_TOPIC, 0, ts) == 0  # by time
    stats = tier.stats()
    assert stats["remote_bytes"] == (local_segments - 1) * (64 << 10) and stats["cache_misses"] > 0
    assert stats["upload_lag_bytes"] == 0 and stats["failed_uploads"] == 0


def test_restart_reads_remote_segments_from_the_manifest(aws_env: S3Server, open_tiered: Opener,
                                                           tmp_path: Path) -> None:
    uri = f"s3://{aws_env.new_bucket()}/p"
    store, tier = open_tiered(uri)
    _fill(store)
    before = _read_all(store)
    tier.run_once()
    tier.stop()
    store.shutdown()
    store, tier = open_tiered(uri)  # same root: recovery sees the remote segments through the manifest
    assert store.min_phy_offset() == 0 and store.min_offset(_TOPIC, 0) == 0
    assert _read_all(store) == before


def test_damaged_or_missing_object_is_an_error_not_wrong_bytes(aws_env: S3Server, open_tiered: Opener) -> None:
    bucket = aws_env.new_bucket()
    store, tier = open_tiered(f"s3://{bucket}/d", cache_max_bytes=16 << 10)
    ids = _fill(store)
    tier.run_once()
    key = tier.manifest.segments()[0].key
    s3 = aws_env.client()
    body = bytearray(s3.get_object(Bucket=bucket, Key=f"d/{key}")["Body"].read())
    body[100] ^= 0xFF  # one flipped byte in the first record's header area
    s3.put_object(Bucket=bucket, Key=f"d/{key}", Body=bytes(body))
    tier.cache.forget(key)
    with pytest.raises(RemoteReadError, match="damaged"):
        store.get_message(ids[0])
    with pytest.raises(RemoteReadError):
        store.get_messages(_TOPIC, 0, 0, 10)
    s3.delete_object(Bucket=bucket, Key=f"d/{key}")
    with pytest.raises(RemoteReadError, match="could not be read"):
        store.get_message(ids[0])


def test_retention_deletes_remote_objects(aws_env: S3Server, open_tiered: Opener) -> None:
    bucket = aws_env.new_bucket()
    store, tier = open_tiered(f"s3://{bucket}/r", retention_s=3600.0)
    _fill(store)
    tier.run_once()
    remote = tier.manifest.segments()
    assert remote and tier.uploader.run_once(now=remote[-1].newest_ms / 1000 + 1800) == 0  # not yet old enough
    assert tier.manifest.segments() == remote
    tier.uploader.run_once(now=remote[-1].newest_ms / 1000 + 3601)
    assert tier.manifest.segments() == [] and aws_env.keys(bucket, "r/commitlog/") == []
    assert aws_env.keys(bucket, "r/consumequeue/") == [] and aws_env.keys(bucket, "r/index/") == []
    low = store.commitlog.queue.min_offset()
    assert store.min_phy_offset() == low
    assert all(q >= 0 and p >= low for q, p, _ in _read_all(store))
    assert store.min_offset(_TOPIC, 0) > 0  # the ConsumeQueue's minimum followed
    assert json.loads(aws_env.client().get_object(Bucket=bucket, Key="r/manifest.json")["Body"].read())["segments"] == []


def test_failed_upload_keeps_the_local_copy_and_is_retried(aws_env: S3Server, open_tiered: Opener) -> None:
    bucket = f"sparkmq-later-{os.getpid()}"  # does not exist yet: every PUT fails
    store, tier = open_tiered(f"s3://{bucket}/f")
    _fill(store)
    before, segments = _read_all(store), len(store.commitlog.queue.files)
    assert tier.run_once() == 0
    assert tier.stats()["failed_uploads"] == 1 and tier.stats()["last_error"]
    assert len(store.commitlog.queue.files) == segments and tier.manifest.segments() == []
    assert _read_all(store) == before
    aws_env.client().create_bucket(Bucket=bucket)
    assert tier.run_once() == segments - 1
    assert _read_all(store) == before


def test_local_directory_and_size_limit(open_tiered: Opener, tmp_path: Path) -> None:
    store, tier = open_tiered(str(tmp_path / "remote"), local_retention_s=3600.0, local_max_bytes=128 << 10)
    _fill(store)
    before = _read_all(store)
    tier.run_once()
    assert len(store.commitlog.queue.files) == 2  # 2 x 64 KiB stay: the size limit, not the age, moved the rest
    assert sorted(p.name for p in (tmp_path / "remote" / "commitlog").iterdir())[0] == "0" * 20
    assert _read_all(store) == before


def test_slave_from_scratch_copies_segments_that_are_only_remote(open_store: Callable[..., MessageStore],
                                                                  tmp_path: Path) -> None:
    from store import HAConfig
    from store.ha import HAClient, HAService
    from tests.store.test_ha import SLAVE_HOST, read_queue, summary, wait_until

    master = open_store(tmp_path / "master")
    tier = TieredStorage(master, TieredConfig(uri=str(tmp_path / "remote"), local_retention_s=0.0,
                                              interval_s=3600.0, block_bytes=16 << 10))
    _fill(master)
    assert tier.run_once() >= 3 and len(master.commitlog.queue.files) == 1
    ha = HAService(master, HAConfig(listen_host="127.0.0.1", listen_port=0))
    ha.start()
    slave = open_store(tmp_path / "slave", store_host=SLAVE_HOST)
    client = HAClient(slave, HAConfig(master_address=f"127.0.0.1:{ha.port}"))
    client.start()
    try:
        assert wait_until(lambda: slave.max_phy_offset() == master.max_phy_offset())
        assert slave.wait_visible(10) and slave.min_phy_offset() == 0
        assert summary(read_queue(slave, _TOPIC, 0)) == summary(read_queue(master, _TOPIC, 0))
    finally:
        client.stop()
        ha.stop()
        tier.stop()


def test_killed_after_the_manifest_names_a_segment_the_local_copy_is_dropped_not_uploaded_again(
        open_tiered: Opener, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    store, tier = open_tiered(str(remote))
    _fill(store)
    before = _read_all(store)
    assert tier.run_once() >= 3
    tier.stop()
    store.shutdown()
    last = tier.manifest.segments()[-1]  # as a kill between the manifest write and the local delete leaves it:
    (tmp_path / "store" / "commitlog" / last.key.split("/")[-1]).write_bytes((remote / last.key).read_bytes())
    store, tier = open_tiered(str(remote))
    assert store.commitlog.queue.min_offset() == last.start and _read_all(store) == before
    assert tier.run_once() == 1 and tier.stats()["uploaded_segments"] == 0  # dropped, not uploaded again
    assert store.commitlog.queue.min_offset() == last.end and _read_all(store) == before


def test_an_unreadable_manifest_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    from store import StoreError

    store = MessageStore(small_config(tmp_path / "store"))
    (tmp_path / "store" / "tiered").mkdir(parents=True)
    (tmp_path / "store" / "tiered" / "manifest.json").write_text('{"version": 1, "segm')
    with pytest.raises(StoreError, match="manifest .* is unreadable"):
        TieredStorage(store, TieredConfig(uri=str(tmp_path / "remote")))


def test_a_lookup_by_id_reads_only_its_blocks(aws_env: S3Server, open_tiered: Opener) -> None:
    store, tier = open_tiered(f"s3://{aws_env.new_bucket()}/l", block_bytes=4096, readahead_blocks=64)
    ids = _fill(store)
    tier.run_once()
    mid = next(i for i in ids if 2 * 4096 <= int(i[16:], 16) - (64 << 10) < 3 * 4096 - 1100)  # segment 1, block 2
    before = store.get_message(mid)
    tier.cache.close()  # waits for any fetch started in the background
    assert tier.cache.stats.fetched_bytes <= 2 * 4096 and tier.cache.stats.prefetched_blocks == 0
    assert before.msg_id == mid
