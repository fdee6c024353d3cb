"""``sparkmq produce``: send messages from arguments, stdin lines or a file, in batches.

A few bodies given as arguments go in one synchronous call (and their
message ids are shown); lines from stdin or ``--file`` (or, with
``--files``, the files those lines name) stream through the asynchronous
:class:`~broker_api.client.Producer`: batches per queue, several requests in
flight, a progress bar on a terminal, then the count, the rate and the
failures.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import (
    DEFAULT_URL,
    Namesrv,
    Url,
    client_options,
    fail,
    note,
    open_client,
    print_table,
    say,
)
from .progress import ProgressBar, stderr_is_terminal

if TYPE_CHECKING:  # the client loads when the command runs, not for --help
    from ..client import SendResult, SparkMQClient
    from ..errors import BrokerError

__all__ = ["produce"]

_BATCH = 1000
_SHOW_RESULTS = 10  # a produce of at most this many messages prints where each landed


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to produce to (auto-created unless the broker forbids it).")],
    bodies: Annotated[list[str] | None, typer.Argument(
        help="Message bodies; without any, one message per line of --file or stdin.", show_default=False)] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", help="Read one message per line from this file (shows a progress bar).")] = None,
    key: Annotated[list[str] | None, typer.Option("--key", "-k", help="Key (repeatable).")] = None,
    tag: Annotated[str | None, typer.Option("--tag", "-t", help="Tag.")] = None,
    queue: Annotated[int | None, typer.Option(help="Explicit queue id.")] = None,
    files: Annotated[bool, typer.Option(
        "--files", help="Each input line names a file; the file's bytes are one message.")] = False,
    linger_ms: Annotated[float, typer.Option(help="How long a batch waits for more lines (the Producer).")] = 5.0,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Send messages from arguments, stdin or a file.

    Bodies come from the arguments, else one per line of --file, else one per
    line of stdin; they are sent in batches of 1000. Bulk input shows a
    progress bar on stderr; stdout gets one summary line.

    Examples:

      sparkmq produce orders "one message" "another"

      echo hello | sparkmq produce orders --key order-1 --tag new

      sparkmq produce orders --file orders.txt

      ls images/*.png | sparkmq produce images --files
    """
    if bodies and file is not None:
        fail("give message bodies as arguments or --file, not both")
    extra: dict[str, Any] = {"keys": key or []}
    if tag:
        extra["tags"] = tag
    if queue is not None:
        extra["queue_id"] = queue
    lines, total = _source(bodies, file)
    if bodies or len(key or []) > 1:  # a few arguments (ids shown), or several keys per message
        _produce_sync(url, namesrv, topic, extra, lines, total, files)
        return
    _produce_async(url, namesrv, topic, (key or [None])[0], tag, queue, linger_ms, lines, total, files)


def _produce_sync(url: str, namesrv: str | None, topic: str, extra: dict[str, Any], lines: Iterable[str],
                  total: int | None, files: bool) -> None:
    with open_client(url, namesrv) as c:
        results = _send_all(c, topic, ({"body": body, **extra} for body in _bodies(lines, files)), total)
    if results.first and results.count <= _SHOW_RESULTS:
        print_table(["msg_id", "broker", "queue", "offset"],
                    [(r.msg_id, r.broker, r.queue_id, r.queue_offset) for r in results.first],
                    title=f"produced to {topic}")
    say(f"produced {results.count} message(s) to {topic}")


def _bodies(lines: Iterable[str], files: bool) -> Iterator[Any]:
    """The lines, or with ``--files`` the bytes of the file each line names."""
    if not files:
        yield from lines
        return
    for line in lines:
        if not line:
            continue
        try:
            yield Path(line).read_bytes()
        except OSError as exc:
            fail(f"--files: cannot read {line!r} ({exc.strerror or exc}); the messages before it were sent")


class _Outcomes:
    """Acknowledged and failed counts and the first failure, from the Producer's callbacks (any thread)."""

    def __init__(self) -> None:
        self.acked = self.failed = 0
        self.first_error: BrokerError | None = None
        self._lock = threading.Lock()

    def record(self, result: SendResult | None, error: BrokerError | None) -> None:
        with self._lock:
            if error is None:
                self.acked += 1
                return
            self.failed += 1
            self.first_error = self.first_error or error


def _produce_async(url: str, namesrv: str | None, topic: str, key: str | None, tag: str | None,
                   queue: int | None, linger_ms: float, lines: Iterable[str], total: int | None, files: bool) -> None:
    from ..client import Producer  # pyarrow and numpy load only for a streamed produce
    from ..errors import BrokerError

    o, out, sent = client_options(), _Outcomes(), 0
    where: dict[str, Any] = {"namesrv": namesrv} if namesrv else {"endpoint": url}
    started = time.monotonic()
    try:
        with Producer(**where, linger_ms=linger_ms, token=o.token, ca_file=o.ca_file) as p, \
                ProgressBar(f"producing to {topic}", total) as bar:
            for body in _bodies(lines, files):
                p.send(topic, body, key=key, tags=tag, queue_id=queue, callback=out.record)
                sent += 1
                if sent % 1000 == 0:
                    bar.advance(out.acked + out.failed - bar.done)
            p.flush()
            bar.advance(out.acked + out.failed - bar.done)
    except KeyboardInterrupt:
        note(f"interrupted: {out.acked} message(s) were produced to {topic}")
        raise typer.Exit(130) from None
    except BrokerError as exc:
        fail(f"{exc.message}; {out.acked} message(s) were produced to {topic}")
    elapsed = max(time.monotonic() - started, 1e-9)
    if stderr_is_terminal() or out.failed:  # piped: stdout's summary line only (scripts parse it)
        note(f"{out.acked:,} acknowledged in {elapsed:.2f} s ({out.acked / elapsed:,.0f} msg/s), {out.failed:,} failed")
    if out.failed:
        assert out.first_error is not None
        fail(f"{out.failed} of {sent} message(s) were not stored, first: {out.first_error.message}; "
             f"{out.acked} were produced to {topic}")
    say(f"produced {out.acked} message(s) to {topic}")


def _source(bodies: list[str] | None, file: Path | None) -> tuple[Iterable[str], int | None]:
    """The bodies to send and their count when known up front (arguments, a file)."""
    if bodies:
        return bodies, len(bodies)
    if file is not None:
        if not file.is_file():
            fail(f"--file {str(file)!r} does not exist or is not a file")
        return _file_lines(file), _count_lines(file)
    return (line.rstrip("\r\n") for line in sys.stdin), None


def _count_lines(path: Path) -> int:
    count, last = 0, b"\n"
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _file_lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", newline="") as f:
            for line in f:
                yield line.rstrip("\r\n")
    except UnicodeDecodeError as exc:
        fail(f"--file {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})")


class _Sent:
    """What a produce sent: the count, and the first batch's results (for the small-produce table)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[SendResult] = []

    def add(self, results: list[SendResult]) -> None:
        if self.count == 0:
            self.first = results
        self.count += len(results)


def _send_all(c: SparkMQClient, topic: str, messages: Iterable[dict[str, Any]], total: int | None) -> _Sent:
    from ..client import SendError

    sent = _Sent()
    bulk = total is None and not sys.stdin.isatty() or (total or 0) > _SHOW_RESULTS
    batch: list[dict[str, Any]] = []
    try:
        with ProgressBar(f"producing to {topic}", total, enabled=bulk) as bar:
            for message in messages:
                batch.append(message)
                if len(batch) == _BATCH:
                    sent.add(c.produce(topic, batch))
                    bar.advance(len(batch))
                    batch = []
            if batch:
                sent.add(c.produce(topic, batch))
                bar.advance(len(batch))
    except KeyboardInterrupt:
        note(f"interrupted: {sent.count} message(s) were produced to {topic}")
        raise typer.Exit(130) from None
    except SendError as exc:
        stored = sent.count + len(exc.sent)
        fail(f"{exc.message}; {stored} message(s) in all were produced to {topic} and the input stopped there")
    return sent
