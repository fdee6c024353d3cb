"""The tiered block cache against a real S3 API (moto on loopback): sequential readers share fetches and
find the next blocks read ahead; a random lookup reads no more than its block; a damaged block fails
every reader that waited for it, never serving wrong bytes."""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Iterator

import obstore
import pytest

from store import RemoteReadError
from store.tiered.cache import BlockCache
from store.tiered.manifest import RemoteObject
from store.tiered.objects import open_store
from tests.s3_support import S3Server

_BB = 4096
_BLOCKS = 64


@pytest.fixture
def cache_and_object(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[BlockCache, RemoteObject, bytes]]:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    store = open_store(f"s3://{s3_server.new_bucket()}/c")
    data = os.urandom(_BB * _BLOCKS - 100)  # the last block is shorter
    obstore.put(store, "obj", data)
    crcs = [zlib.crc32(data[i : i + _BB]) for i in range(0, len(data), _BB)]
    cache = BlockCache(store, max_bytes=1 << 20)
    yield cache, RemoteObject("obj", len(data), zlib.crc32(data), _BB, crcs), data
    cache.close()


def test_sequential_readers_share_fetches_and_find_blocks_read_ahead(
        cache_and_object: tuple[BlockCache, RemoteObject, bytes]) -> None:
    cache, obj, data = cache_and_object
    results: list[bytes] = []

    def scan() -> None:
        results.append(b"".join(cache.read(obj, pos, 1000, ahead=16) for pos in range(0, obj.size, 1000)))

    readers = [threading.Thread(target=scan) for _ in range(4)]
    for t in readers:
        t.start()
    for t in readers:
        t.join(60)
    assert results == [data] * 4
    stats = cache.stats
    assert stats.fetched_bytes == obj.size  # every block fetched once, whatever the interleaving
    assert stats.prefetched_blocks >= _BLOCKS - 8 and stats.misses <= 8  # the rest came read ahead


def test_a_random_lookup_reads_only_its_block(cache_and_object: tuple[BlockCache, RemoteObject, bytes]) -> None:
    cache, obj, data = cache_and_object
    assert cache.read(obj, 30 * _BB + 5, 100, ahead=16) == data[30 * _BB + 5 : 30 * _BB + 105]
    assert cache.read(obj, 10 * _BB, 100, ahead=16) == data[10 * _BB : 10 * _BB + 100]
    assert cache.stats.fetched_bytes == 2 * _BB and cache.stats.prefetched_blocks == 0


def test_a_damaged_block_read_ahead_fails_its_readers_not_the_blocks_before(
        cache_and_object: tuple[BlockCache, RemoteObject, bytes]) -> None:
    cache, obj, data = cache_and_object
    crcs = list(obj.block_crcs)
    crcs[20] ^= 1  # as if the object's block 20 had changed since the upload
    bad = RemoteObject(obj.key, obj.size, obj.crc, obj.block_bytes, crcs)
    pos, got = 0, []
    with pytest.raises(RemoteReadError, match="block 20 .* damaged"):
        while pos < bad.size:
            got.append(cache.read(bad, pos, 1000, ahead=16))
            pos += 1000
    assert b"".join(got) == data[:pos] and 20 * _BB - 1000 < pos <= 21 * _BB
