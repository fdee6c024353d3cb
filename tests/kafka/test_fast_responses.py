"""ListOffsets answers packed by hand (fast_responses.py) are the bytes kio's encoder writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_api.kafka.codec import ErrorCode, build, encode_response, response_class
from broker_api.kafka.fast_responses import list_offsets_response

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
