"""Damaged records: bytes changed on disk after they were flushed (a bad sector, a stray write).

Each test writes messages, shuts the store down cleanly, garbles bytes of
real segment files, reopens the store and pulls: a damaged record is never
served and never skipped silently.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from store import GetStatus, Message, MessageStore, PutResult, StoreError

from .conftest import small_config

_HS = 88  # record header size (store.codec)


def _fill(open_store: Callable[..., MessageStore], root: Path, n: int = 20, topic: str = "t") \
        -> list[PutResult]:
    s = open_store(root)
    res = s.put_messages([Message(topic, f"body-{i:04d}".encode() * 3, keys=(f"k{i}",), tags="a") for i in range(n)])
    s.shutdown()
    return res


def _garble(root: Path, phy: int, delta: int, value: bytes | None = None, segment: int = 64 << 10) -> None:
    """Overwrite (or flip) bytes at CommitLog offset ``phy + delta`` in the segment file on disk."""
    start = phy - phy % segment
    path = root / "commitlog" / f"{start:020d}"
    pos = phy - start + delta
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(len(value) if value else 1)
        f.seek(pos)
        f.write(value if value else bytes([old[0] ^ 0xFF]))


def _reopen(root: Path, **overrides: object) -> MessageStore:
    s = MessageStore(small_config(root, **overrides))
    s.start()
    return s


@pytest.mark.parametrize("columns", [False, True], ids=["objects", "columns"])
def test_a_pull_stops_before_a_damaged_body_and_names_it(open_store: Callable[..., MessageStore], tmp_path: Path,
                                                         columns: bool, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "s"
    put = _fill(open_store, root)
    _garble(root, put[7].phy_offset, _HS + 2)  # a body byte: only the CRC can tell
    s = _reopen(root)
    try:
        read = s.get_message_batch if columns else s.get_messages
        first = read("t", 0, 0, 32)
        assert first.status is GetStatus.FOUND and first.next_offset == 7
        got = first.batch.queue_offsets.tolist() if columns else [m.queue_offset for m in first.messages]  # type: ignore[union-attr]
        assert got == list(range(7))
        with caplog.at_level(logging.ERROR, logger="store.message_store"):
            at = read("t", 0, 7, 32)
        assert at.status is GetStatus.CORRUPT_MESSAGE and at.next_offset == 8
        assert at.damaged is not None
        assert (at.damaged.topic, at.damaged.queue_id, at.damaged.queue_offset, at.damaged.phy_offset) == (
            "t", 0, 7, put[7].phy_offset)
        assert "CRC" in at.damaged.reason
        logged = caplog.text
        assert "'t' queue 0 at queue offset 7" in logged and f"CommitLog offset {put[7].phy_offset}" in logged
        rest = read("t", 0, 8, 32)
        assert rest.status is GetStatus.FOUND and rest.next_offset == 20
        assert s.stats()["damaged_records_read"] == 1
    finally:
        s.shutdown()


@pytest.mark.parametrize("what,delta,value", [
    ("body length", 84, b"\x7f\xff\xff\xff"),
    ("negative body length", 84, b"\xff\xff\xff\xf0"),
    ("total size", 0, b"\x00\x00\x00\x10"),
    ("magic", 4, b"\x00\x00\x00\x00"),
    ("claimed offset", 28, b"\x00\x00\x00\x00\x00\x00\x01\x00"),
    ("queue id", 12, b"\x00\x00\x00\x05"),
    ("queue offset", 20, b"\x00\x00\x00\x00\x00\x00\x00\x63"),
    ("topic length", None, b"\xf0"),
    ("topic bytes", None, b"\xff\xfe"),
])
@pytest.mark.parametrize("columns", [False, True], ids=["objects", "columns"])
def test_garbled_header_fields_answer_corrupt_message_not_a_crash(
        open_store: Callable[..., MessageStore], tmp_path: Path, what: str, delta: int | None, value: bytes,
        columns: bool) -> None:
    root = tmp_path / "s"
    put = _fill(open_store, root)
    body_len = len(b"body-0000" * 3)
    _garble(root, put[3].phy_offset, delta if delta is not None else _HS + body_len, value)
    s = _reopen(root)
    try:
        read = s.get_message_batch if columns else s.get_messages
        assert read("t", 0, 0, 32).next_offset == 3, what
        at = read("t", 0, 3, 32)
        assert at.status is GetStatus.CORRUPT_MESSAGE and at.next_offset == 4, what
        assert at.damaged is not None and at.damaged.queue_offset == 3
        assert read("t", 0, 4, 32).next_offset == 20
    finally:
        s.shutdown()


def test_with_crc_checks_off_a_changed_body_is_served(open_store: Callable[..., MessageStore],
                                                      tmp_path: Path) -> None:
    """The setting's trade-off, stated as a test: no CRC, no detection of a changed body."""
    root = tmp_path / "s"
    put = _fill(open_store, root)
    _garble(root, put[2].phy_offset, _HS + 1)
    s = _reopen(root, verify_crc_on_read=False)
    try:
        page = s.get_messages("t", 0, 0, 32)
        assert page.status is GetStatus.FOUND and len(page.messages) == 20
        assert page.messages[2].body != put and page.messages[2].body != b"body-0002" * 3
    finally:
        s.shutdown()


@pytest.mark.parametrize("seed", range(6))
def test_random_garbling_never_serves_a_changed_body_nor_leaves_an_unnamed_gap(
        open_store: Callable[..., MessageStore], tmp_path: Path, seed: int) -> None:
    """Garble random bytes anywhere in the written records; walking the queue with next_offset
    reaches every offset, each one served with its own body or named as damaged."""
    rng = random.Random(seed)
    root = tmp_path / "s"
    put = _fill(open_store, root, n=60)
    bodies = {r.queue_offset: f"body-{i:04d}".encode() * 3 for i, r in enumerate(put)}
    end = put[-1].phy_offset + put[-1].size
    for _ in range(rng.randint(1, 12)):
        phy = rng.randrange(put[0].phy_offset, end)
        _garble(root, phy, 0, bytes([rng.randrange(256)]) if rng.random() < 0.5 else None)
    s = _reopen(root)
    try:
        for columns in (False, True):
            seen: dict[int, str] = {}
            offset, rounds = 0, 0
            while offset < 60 and rounds < 200:
                rounds += 1
                try:
                    page = (s.get_message_batch if columns else s.get_messages)("t", 0, offset, 7)
                except StoreError:
                    pytest.fail("a pull raised instead of answering")
                if page.status is GetStatus.CORRUPT_MESSAGE:
                    assert page.damaged is not None and page.damaged.queue_offset == offset
                    seen[offset] = "damaged"
                elif columns:
                    for q, b in zip(page.batch.queue_offsets.tolist(), page.batch.bodies):  # type: ignore[union-attr]
                        assert bytes(b) == bodies[q]
                        seen[q] = "ok"
                else:
                    for m in page.messages:  # type: ignore[union-attr]
                        assert m.body == bodies[m.queue_offset]
                        seen[m.queue_offset] = "ok"
                assert page.next_offset > offset, page
                offset = page.next_offset
            assert sorted(seen) == list(range(60)), (columns, seen)
    finally:
        s.shutdown()
