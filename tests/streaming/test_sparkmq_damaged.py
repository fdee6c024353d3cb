"""A record damaged on disk: failOnDataLoss=true fails the read naming it, false skips it with a warning.

The reader is driven as Spark drives it (pickled to the executor side), against a real broker
whose segment file was garbled while it was down, first without Spark, then in a real query.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import httpx
import pytest

import streaming
from streaming.errors import DataLossError
from streaming.options import parse_reader
from streaming.reader import SparkMQStreamReader
from tests.garble import garble_body

from .support import NO_MIRROR, create_topic

_ENV = {**NO_MIRROR, "SPARKMQ_STORE__COMMITLOG_SEGMENT_BYTES": str(1 << 20)}


def _damaged(broker_factory: Any) -> Any:
    """Topic ``dmg``, one queue, offsets 0-19 with offset 7 damaged on disk."""
    b = broker_factory(env=_ENV)
    create_topic(b.url, "dmg", queues=1)
    r = httpx.post(f"{b.url}/v1/topics/dmg/messages", json={"messages": [{"body": f"v{i}"} for i in range(20)]},
                   timeout=30)
    r.raise_for_status()
    b.stop()
    garble_body(b.data_dir, r.json()["results"][7]["msg_id"])
    b.start()
    return b


def _read(url: str, **options: str) -> list[dict[str, Any]]:
    reader = SparkMQStreamReader(parse_reader({"endpoint": url, "subscribe": "dmg",
                                               **{k.lower(): v for k, v in options.items()}}, batch=False))
    start, end = {"dmg": {"0": 0}}, {"dmg": {"0": 20}}
    executor_side = pickle.loads(pickle.dumps(reader))
    return [row for p in reader.partitions(start, end)
            for batch in executor_side.read(pickle.loads(pickle.dumps(p)))
            for row in batch.to_pylist()]


def test_reader_fails_on_a_damaged_record_or_skips_it_with_a_warning(broker_factory: Any,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    b = _damaged(broker_factory)
    with pytest.raises(DataLossError, match=r"dmg/0: damaged record in topic 'dmg' queue 0 at queue offset 7 "
                                            r"\(CommitLog offset \d+\).*failOnDataLoss"):
        _read(b.url, maxOffsetsPerTrigger="5")
    with caplog.at_level(logging.WARNING, logger="sparkmq.streaming"):
        rows = _read(b.url, failOnDataLoss="false")
    assert [x["offset"] for x in rows] == [o for o in range(20) if o != 7]
    assert [bytes(x["value"]) for x in rows] == [f"v{o}".encode() for o in range(20) if o != 7]
    assert "skipping damaged record in topic 'dmg' queue 0 at queue offset 7" in caplog.text


@pytest.mark.spark
def test_a_query_fails_naming_the_damaged_record(spark: Any, broker_factory: Any) -> None:
    streaming.register(spark)
    b = _damaged(broker_factory)
    df = spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "dmg").load()
    with pytest.raises(Exception, match=r"damaged record in topic 'dmg' queue 0 at queue offset 7"):
        df.collect()
    rows = (spark.read.format("sparkmq").option("endpoint", b.url).option("subscribe", "dmg")
            .option("failOnDataLoss", "false").load().select("offset").collect())
    assert sorted(r.offset for r in rows) == [o for o in range(20) if o != 7]
