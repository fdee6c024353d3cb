"""``sparkmq store verify``: an offline check names every damaged record of a real store on disk."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from store import Message, MessageStore, PutResult
from store.verify import verify_commitlog
from tests import launcher

from .test_damaged import _HS, _garble

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = 64 << 10


def _fill(open_store: Callable[..., MessageStore], root: Path, n: int) -> list[PutResult]:
    s = open_store(root)
    res = s.put_messages([Message(f"t{i % 3}", f"body-{i:05d}".encode() * 20, keys=(f"k{i}",)) for i in range(n)])
    s.shutdown()
    return res


def _verify_cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return launcher.run(["store", "verify", str(path), *args], cwd=ROOT, timeout=120)


def test_a_clean_store_over_several_segments_verifies(open_store: Callable[..., MessageStore],
                                                      tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _fill(open_store, root, 600)
    report = verify_commitlog(root / "commitlog")
    assert report.ok and report.torn_tail is None
    assert report.records == 600 and report.segments == len(list((root / "commitlog").iterdir())) > 2
    out = _verify_cli(root)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and "checked 600 record(s)" in out.stderr
    assert put[-1].phy_offset > 2 * SEGMENT


def test_damaged_records_are_named_and_the_walk_continues_past_them(open_store: Callable[..., MessageStore],
                                                                     tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _fill(open_store, root, 600)
    _garble(root, put[10].phy_offset, _HS + 5)  # a body byte: the CRC tells, the header still names it
    _garble(root, put[300].phy_offset, 0, b"\x00\x00\x7f\x00")  # TOTAL_SIZE: the walk must find the next record
    report = verify_commitlog(root / "commitlog")
    assert [d.phy_offset for d in report.damaged] == [put[10].phy_offset, put[300].phy_offset]
    crc, structure = report.damaged
    assert (crc.topic, crc.queue_id, crc.queue_offset) == ("t1", put[10].queue_id, put[10].queue_offset)
    assert crc.reason == "whole-record CRC (WCRC) does not match"
    assert structure.size == put[301].phy_offset - put[300].phy_offset  # resynced at the very next record
    assert report.records == 598  # every other record was checked
    out = _verify_cli(root, "--json")
    assert out.returncode == 1
    body = json.loads(out.stdout)
    assert [d["phy_offset"] for d in body["damaged"]] == [put[10].phy_offset, put[300].phy_offset]
    assert out.stderr.strip().splitlines()[-1].startswith("error: 2 damaged record(s)")
    text = _verify_cli(root)
    assert f"damaged: topic 't1' queue {put[10].queue_id} offset {put[10].queue_offset}" in text.stdout


def test_a_torn_tail_is_only_noted_after_a_crash(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    root = tmp_path / "s"
    put = _fill(open_store, root, 50)
    _garble(root, put[-1].phy_offset, _HS + 1)  # the newest record: what a crash mid-write leaves
    report = verify_commitlog(root / "commitlog")
    assert report.ok and report.torn_tail is not None and report.torn_tail.phy_offset == put[-1].phy_offset
    clean = _verify_cli(root)  # shut down cleanly: a bad last record is damage, not a torn tail
    assert clean.returncode == 1 and f"CommitLog offset {put[-1].phy_offset}" in clean.stdout
    (root / "abort").touch()  # as a killed broker leaves it
    crashed = _verify_cli(root)
    assert crashed.returncode == 0 and "torn tail" in crashed.stderr
