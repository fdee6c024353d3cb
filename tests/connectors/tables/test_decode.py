"""Batch decoding of JSON bodies: typed columns at once, and the exact bad bodies named (no store needed)."""

from __future__ import annotations

import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.tables import TableSpec
from connectors.tables.decode import Decoder
from connectors.tables.schema import columns, table_schema

SPEC = TableSpec.from_json({"mode": "typed", "schema": "id BIGINT NOT NULL, name STRING, score DOUBLE"})


def decoder() -> Decoder:
    cols = columns(SPEC)
    names = {c.name for c in cols}
    return Decoder(cols, pa.schema([f for f in table_schema(SPEC) if f.name in names]))


def test_pretty_printed_bodies_and_carriage_returns_decode_like_one_line_bodies() -> None:
    bodies = [b'{\n  "id": 1,\r\n  "name": "a\\nb"\n}', b'{"id": 2}', b'{"id":\n3, "score": 1.5}']
    out = decoder().decode(bodies)
    assert out.errors == {}
    assert out.table.to_pylist() == [{"id": 1, "name": "a\nb", "score": None}, {"id": 2, "name": None, "score": None},
                                     {"id": 3, "name": None, "score": 1.5}]


def test_two_objects_in_one_body_or_an_empty_body_are_dead_letters_not_shifted_rows() -> None:
    out = decoder().decode([b'{"id": 1}', b'{"id": 2}{"id": 3}', b"   ", b'{"id": 4}'])
    assert out.good.tolist() == [0, 3] and out.table["id"].to_pylist() == [1, 4]
    assert sorted(out.errors) == [1, 2] and out.errors[2][1].startswith("body is empty")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(-(2**60), 2**60), st.sampled_from(["x", None, 1.5, "bad-json"])),
                min_size=1, max_size=60))
def test_every_good_body_is_decoded_and_every_bad_one_is_named(values: list[object]) -> None:
    bodies = [b"{not json" if v == "bad-json" else orjson.dumps({"id": v, "name": "n"}) for v in values]
    out = decoder().decode(bodies)
    good = [i for i, v in enumerate(values) if isinstance(v, int)]
    assert out.good.tolist() == good
    assert out.table["id"].to_pylist() == [values[i] for i in good]
    assert sorted(out.errors) == [i for i in range(len(values)) if i not in good]
    for i, (field, error) in out.errors.items():
        assert (field is None) if values[i] == "bad-json" else (field == "id" and "'id'" in error)
