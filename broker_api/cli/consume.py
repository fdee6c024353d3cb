"""``sparkmq consume``: tail a topic, optionally as a consumer group (one broker or all via --namesrv).

Messages go to stdout; the message count and, while a backlog is being
caught up, a progress bar go to stderr (the bar only when stderr is a
terminal and stdout is not, e.g. ``sparkmq consume orders > out.jsonl``).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.text import Text

from .common import DEFAULT_URL, Namesrv, Url, console, fail, note, open_client
from .progress import ProgressBar

if TYPE_CHECKING:  # the client loads when the command runs (open_client), not for --help
    from ..client import PullResult, SparkMQClient
    from ..errors import BrokerError

__all__ = ["consume"]

_PAGE = 100
_RETRY_DOWN_S = 2.0  # how often a broker that did not answer is tried again

Slot = tuple[str, int]  # (broker name, queue id)


def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    group: Annotated[str | None, typer.Option(help="Consumer group: start at and commit its offsets.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep waiting for new messages.")] = False,
    queue: Annotated[int | None, typer.Option(help="Only this queue (on every broker).")] = None,
    start: Annotated[str, typer.Option("--from", help="earliest | latest, where a group has no offset.")] = "earliest",
    max_messages: Annotated[int, typer.Option("--max", help="Stop after this many (0 = no limit).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    allow_partial: Annotated[bool, typer.Option(
        "--allow-partial", help="Exit 0 even if a broker could not be read (with --namesrv).")] = False,
    skip_damaged: Annotated[bool, typer.Option(
        "--skip-damaged", help="Skip a damaged record (failed CRC) with a warning instead of stopping.")] = False,
    filter: Annotated[str | None, typer.Option(
        "--filter", help="SQL92 property filter, e.g. \"amount > 5 AND region = 'eu'\"; only matches print.")] = None,
    url: Url = DEFAULT_URL,
    namesrv: Namesrv = None,
) -> None:
    """Print a topic's messages; --follow tails until Ctrl-C.

    Without --follow it stops once caught up. With --group it starts at the
    group's committed offsets and commits as it goes (also on Ctrl-C), so the
    next run continues where this one stopped. Messages go to stdout, the
    count to stderr. With --namesrv a broker that does not answer is skipped
    with a warning and read again once it answers; the exit status is then 3
    unless --allow-partial. A damaged record (its bytes changed on disk) stops
    the command with exit status 4, naming it, after committing the offsets
    before it; --skip-damaged skips it with a warning.

    Examples:

      sparkmq consume orders --group billing

      sparkmq consume orders --group billing --follow

      sparkmq consume orders --json --max 100 > orders.jsonl

      sparkmq consume orders --filter "amount > 5 AND region IN ('eu', 'us')"
    """
    if start not in ("earliest", "latest"):
        fail("--from must be earliest or latest")
    limit = max_messages or 1 << 62
    with open_client(url, namesrv) as c:
        outages = _Outages()
        positions, backlog = _start_positions(c, topic, queue, group, start, outages)
        tail = _Tail(c, topic, positions, group, as_json, outages, (queue, start), skip_damaged, filter)
        try:
            tail.run(follow, limit, min(backlog, limit))
        except KeyboardInterrupt:
            tail.commit()
            note(f"{tail.printed} message(s); interrupted")
            raise typer.Exit(130) from None
    note(f"{tail.printed} message(s)")
    if outages.ever and not allow_partial:
        fail(f"not every broker was read: {outages.summary()}; pass --allow-partial to accept a partial read",
             code=3)


class _Outages:
    """Brokers that did not answer: warned about once per outage, retried every few seconds."""

    def __init__(self) -> None:
        self.down: dict[str, float] = {}  # broker -> when to try it again
        self.ever: dict[str, str] = {}  # broker -> what failed, for the final line

    def failed(self, broker: str, url: str, exc: BrokerError) -> None:
        if broker not in self.down:
            note(f"warning: skipping broker {broker!r} at {url}: {exc.message}; "
                 "its queues are read again once it answers")
        self.down[broker] = time.monotonic() + _RETRY_DOWN_S
        self.ever[broker] = f"{broker!r} at {url}"

    def answered(self, broker: str) -> None:
        if self.down.pop(broker, None) is not None:
            note(f"broker {broker!r} answers again; reading its queues")

    def skip(self, broker: str) -> bool:
        return time.monotonic() < self.down.get(broker, 0.0)

    def summary(self) -> str:
        return "broker " + ", ".join(sorted(self.ever.values())) + " did not answer at some point"


def _start_positions(c: SparkMQClient, topic: str, queue: int | None, group: str | None, start: str,
                     outages: _Outages, known: frozenset[str] = frozenset()) -> tuple[dict[Slot, int], int]:
    """Where each queue starts, and the backlog (messages between there and the queue's end)."""
    queues = [q for q in c.queues(topic, on_unreachable=outages.failed)
              if (queue is None or q.queue_id == queue) and q.broker not in known]
    if not queues and not outages.down and not known:
        fail(f"topic {topic!r} has no queue {queue}")
    committed: dict[str, dict[int, int]] = c.get_offsets(group, topic, on_unreachable=outages.failed) if group else {}
    positions: dict[Slot, int] = {}
    backlog = 0
    for q in queues:
        default = q.min_offset if start == "earliest" else q.max_offset
        offset = max(committed.get(q.broker, {}).get(q.queue_id, default), q.min_offset)
        positions[(q.broker, q.queue_id)] = offset
        backlog += max(0, q.max_offset - offset)
    return positions, backlog


def _show(msg: dict[str, Any], broker: str, as_json: bool, many: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps({**msg, "broker": broker} if many else msg).decode() + "\n")
        sys.stdout.flush()
        return
    body = msg.get("body", msg.get("body_base64", ""))
    meta = (f"{broker}/" if many else "") + f"q{msg['queue_id']}:{msg['offset']}"
    if msg["keys"]:
        meta += " keys=" + ",".join(msg["keys"])
    if msg["tags"]:
        meta += f" tags={msg['tags']}"
    console.print(Text.assemble((meta, "dim"), " ", str(body)), soft_wrap=True)
    console.file.flush()


class _Tail:
    """Round-robins the queues of a topic, printing pages and committing the group's offsets."""

    def __init__(self, c: SparkMQClient, topic: str, positions: dict[Slot, int], group: str | None,
                 as_json: bool, outages: _Outages, start: tuple[int | None, str], skip_damaged: bool = False,
                 filter: str | None = None) -> None:
        self._c, self._topic, self._group, self._as_json, self._filter = c, topic, group, as_json, filter
        self._advanced = False  # a filtered page can move the offset without a message
        self._outages, self._start, self._skip_damaged = outages, start, skip_damaged
        self.positions = positions
        self.printed = 0
        self._interrupts = _DeferredInterrupts()

    def run(self, follow: bool, limit: int, backlog: int) -> None:
        """Tail (see :meth:`_run`) with SIGINT deferred while a message is shown and recorded."""
        with self._interrupts.installed():
            self._run(follow, limit, backlog)

    def _run(self, follow: bool, limit: int, backlog: int) -> None:
        """Catch up the backlog (with a progress bar), then stop, or with ``follow`` keep tailing."""
        show_bar = backlog > 0 and not sys.stdout.isatty()
        with ProgressBar(f"catching up {self._topic}", backlog, enabled=show_bar) as bar:
            while self.printed < limit and (self.printed < backlog or not follow):
                got = self._round(limit, 0)
                bar.advance(got)
                if not got and not self._advanced:
                    break
        while follow and self.printed < limit:
            readable = sum(1 for b, _ in self.positions if not self._outages.skip(b))
            if not readable:
                time.sleep(0.5)  # every broker is down: wait for one to answer
            self._round(limit, max(100, 1000 // max(1, readable)))

    def _round(self, limit: int, idle_wait: int) -> int:
        """One pull per queue (long-polling only while nothing arrived this round); returns messages printed."""
        from ..client import BrokerUnreachableError

        got = 0
        many = self._c.routed
        self._advanced = False
        self._rediscover()
        for (broker, qid), offset in list(self.positions.items()):
            if self._outages.skip(broker):
                continue
            try:
                page = self._c.pull(self._topic, qid, offset, max_messages=min(_PAGE, limit - self.printed),
                                    wait_ms=0 if got else idle_wait, group=self._group,
                                    broker=broker if many else None, filter=self._filter)
            except BrokerUnreachableError as exc:
                if not many:
                    raise
                self._outages.failed(broker, exc.url or "?", exc)
                continue
            self._outages.answered(broker)
            if page.status == "CORRUPT_MESSAGE":
                self._damaged(broker, qid, page)
                got += 1  # progress: the round is not idle
                continue
            for msg in page.messages:
                with self._interrupts.deferred():  # a Ctrl-C commits exactly what was shown
                    _show(msg, broker, self._as_json, many)
                    self.positions[(broker, qid)] = msg["offset"] + 1
                    self.printed += 1
            self.positions[(broker, qid)] = page.next_offset
            self._advanced |= page.next_offset > offset
            got += len(page.messages)
            if self.printed >= limit:
                break
        if got:
            self.commit()
        return got

    def _damaged(self, broker: str, qid: int, page: PullResult) -> None:
        """A damaged record at the queue's position: stop (committing what came before) or skip it."""
        d = page.damaged or {}
        what = d.get("message") or f"damaged record in topic {self._topic!r} queue {qid} at offset {page.next_offset - 1}"
        where = f" on broker {broker!r}" if self._c.routed else ""
        if not self._skip_damaged:
            self.commit()
            fail(f"{what}{where}; pass --skip-damaged to skip it", code=4)
        note(f"warning: skipping {what}{where}")
        self.positions[(broker, qid)] = page.next_offset

    def commit(self) -> None:
        """Commit the group's positions (no-op without a group)."""
        from ..client import BrokerUnreachableError

        if not self._group:
            return
        per_broker: dict[str, dict[int, int]] = {}
        for (broker, qid), offset in self.positions.items():
            per_broker.setdefault(broker, {})[qid] = offset
        for broker, offsets in per_broker.items():
            if self._outages.skip(broker):
                continue
            try:
                self._c.commit_offsets(self._group, self._topic, offsets, broker=broker if self._c.routed else None)
            except BrokerUnreachableError as exc:
                if not self._c.routed:
                    raise
                self._outages.failed(broker, exc.url or "?", exc)

    def _rediscover(self) -> None:
        """Add the queues of brokers that did not answer at the start, once they do."""
        known = frozenset(b for b, _ in self.positions)
        waiting = [b for b in self._outages.down if b not in known and not self._outages.skip(b)]
        if not waiting:
            return
        queue, start = self._start
        found, _ = _start_positions(self._c, self._topic, queue, self._group, start, self._outages, known)
        for broker in {b for b, _ in found}:
            self._outages.answered(broker)
        self.positions.update(found)


class _DeferredInterrupts:
    """A SIGINT handler that raises KeyboardInterrupt at once, except inside :meth:`deferred` (then after it)."""

    def __init__(self) -> None:
        self._critical = False
        self._pending = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._critical:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only; nothing to defer
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._critical = True
        try:
            yield
        finally:
            self._critical = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt
