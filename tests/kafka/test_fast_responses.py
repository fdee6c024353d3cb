"""ListOffsets and Fetch answers packed by hand (fast_responses.py) are the bytes kio's encoder writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_api.kafka.codec import ErrorCode, build, encode_response, response_class
from broker_api.kafka.fast_responses import fetch_response, list_offsets_response

_part = st.fixed_dictionaries({
    "partition_index": st.integers(0, 2 ** 31 - 1), "error_code": st.sampled_from(list(ErrorCode)),
    "timestamp": st.integers(-1, 2 ** 62), "offset": st.integers(-1, 2 ** 62), "leader_epoch": st.integers(-1, 99)})
_topic = st.fixed_dictionaries({"name": st.text(min_size=1, max_size=300),
                                "partitions": st.lists(_part, max_size=4)})
_body = st.fixed_dictionaries({"throttle_time": st.integers(0, 1000), "topics": st.lists(_topic, max_size=3)})


@pytest.mark.parametrize("version", range(1, 8))
@settings(max_examples=40, deadline=None)
@given(correlation=st.integers(-(2 ** 31), 2 ** 31 - 1), body=_body)
def test_list_offsets_answers_are_the_bytes_kio_writes(version: int, correlation: int, body: dict) -> None:
    theirs = encode_response(2, version, correlation, build(response_class(2, version), body))
    assert list_offsets_response(version, correlation, body) == theirs


_records = st.one_of(st.none(), st.binary(max_size=300), st.integers(64 << 10, 200 << 10).map(lambda n: b"r" * n))
_aborted = st.one_of(st.none(), st.lists(st.fixed_dictionaries({
    "producer_id": st.integers(-1, 2 ** 62), "first_offset": st.integers(0, 2 ** 62)}), max_size=2))
_fetch_part = st.fixed_dictionaries({
    "partition_index": st.integers(0, 2 ** 31 - 1), "error_code": st.sampled_from(list(ErrorCode)),
    "high_watermark": st.integers(-1, 2 ** 62), "last_stable_offset": st.integers(-1, 2 ** 62),
    "log_start_offset": st.integers(-1, 2 ** 62), "aborted_transactions": _aborted,
    "preferred_read_replica": st.integers(-1, 99), "records": _records})
_fetch_topic = st.fixed_dictionaries({"topic": st.text(min_size=1, max_size=300),
                                      "partitions": st.lists(_fetch_part, max_size=4)})
_fetch_body = st.fixed_dictionaries({"throttle_time": st.integers(0, 1000), "error_code": st.sampled_from(list(ErrorCode)),
                                     "session_id": st.integers(0, 2 ** 31 - 1),
                                     "responses": st.lists(_fetch_topic, max_size=3)})


@pytest.mark.parametrize("version", range(4, 13))
@settings(max_examples=30, deadline=None)
@given(correlation=st.integers(-(2 ** 31), 2 ** 31 - 1), body=_fetch_body)
def test_fetch_answers_are_the_bytes_kio_writes(version: int, correlation: int, body: dict) -> None:
    theirs = encode_response(1, version, correlation, build(response_class(1, version), body))
    pieces = fetch_response(version, correlation, body)
    assert b"".join(pieces) == theirs
    big = [p["records"] for t in body["responses"] for p in t["partitions"] if len(p["records"] or b"") >= 64 << 10]
    assert all(any(piece is r for piece in pieces) for r in big)  # handed on as they are, not copied
