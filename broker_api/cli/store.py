"""``sparkmq store verify DATA_DIR``: check a broker's CommitLog offline, naming each damaged record."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Annotated

import typer

from .common import AsJson, fail, note, print_json, say

__all__ = ["store_app"]

store_app = typer.Typer(help="Offline checks of a broker's data directory.", no_args_is_help=True)


def _commitlog_dir(path: Path) -> Path:
    """The CommitLog folder of a broker data dir, a store root, or the folder itself."""
    for candidate in (path / "store" / "commitlog", path / "commitlog", path):
        if candidate.is_dir() and any(p.name.isdigit() for p in candidate.iterdir()):
            return candidate
    fail(f"no CommitLog segments under {str(path)!r}; pass a broker's --data-dir (it holds store/commitlog)")


def _in_use(commitlog: Path) -> bool:
    """Whether a running broker holds the store's lock (checked without taking it for long)."""
    lock = commitlog.parent / "lock"
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we got
    return False


@store_app.command("verify")
def verify(
    data_dir: Annotated[Path, typer.Argument(help="The broker's data directory (or its store/commitlog).")],
    as_json: AsJson = False,
) -> None:
    """Check every CommitLog record (structure and body CRC) and name the damaged ones.

    Prints one line per damaged record (topic, queue, queue offset and
    CommitLog offset) on stdout and exits 1 if there is any; a torn tail
    (what a crash leaves, cut by recovery on the next start) is only noted
    when the store was not shut down cleanly.
    Stop the broker first for an exact answer.

    Examples:

      sparkmq store verify ./data

      sparkmq store verify ./data --json
    """
    from store.verify import verify_commitlog  # the store (numpy) loads only when the command runs

    commitlog = _commitlog_dir(data_dir)
    running = _in_use(commitlog)
    if running:
        note(f"warning: a broker is running on {data_dir}; records it writes meanwhile may show as a torn tail")
    clean = not running and not (commitlog.parent / "abort").exists()  # no crash: no torn tail either
    report = verify_commitlog(commitlog, clean_shutdown=clean)
    if as_json:
        print_json({"segments": report.segments, "records": report.records, "bytes": report.bytes,
                    "damaged": [_as_dict(d) for d in report.damaged],
                    "torn_tail": _as_dict(report.torn_tail) if report.torn_tail else None,
                    "quarantined": [r.as_dict() for r in report.quarantined]})
    else:
        for damage in report.damaged:
            say(f"damaged: {damage.describe()}")
        for rec in report.quarantined:
            say(f"quarantined: {rec.describe()}")
    note(f"checked {report.records} record(s) in {report.segments} segment(s), {report.bytes / (1 << 20):.1f} MiB")
    if report.torn_tail is not None:
        note(f"note: {report.torn_tail.describe()}; the broker cuts it when it starts")
    if report.quarantined:
        note(f"{len(report.quarantined)} record(s) quarantined by the broker's recovery: kept, the records after "
             "them served; a read of one answers CORRUPT_MESSAGE")
    if report.damaged:
        fail(f"{len(report.damaged)} damaged record(s) in {commitlog}; pulls answer CORRUPT_MESSAGE at them "
             "(see the README: Limits and guarantees)")


def _as_dict(damage: object) -> dict[str, object]:
    return {name: getattr(damage, name) for name in ("phy_offset", "size", "reason", "topic", "queue_id",
                                                     "queue_offset")}
