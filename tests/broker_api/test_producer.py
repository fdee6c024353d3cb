"""The asynchronous Producer against a real broker: order per queue, keyed routing, flush, close, a full buffer.

    send()            returns at once; flush() waits for every outcome
    order             a queue's messages are stored in send order with several requests in flight
    keys              land where SparkMQClient.produce puts them
    buffer full       blocks (bounded) or raises, as the caller chose
    close()           leaves no thread; later sends raise ProducerClosedError
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
import pytest

import broker_api
from broker_api.client import (
    BufferFullError,
    Producer,
    ProducerClosedError,
    SendResult,
    SparkMQClient,
    producer_sender,
)
from broker_api.client.producer_batch import Batch
from broker_api.client.producer_route import Placer
from broker_api.errors import BrokerError

BROKER_API = Path(broker_api.__file__).parent


def _producer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sparkmq-producer")]


def _bodies(c: SparkMQClient, topic: str, queue_id: int) -> list[str]:
    out: list[str] = []
    offset = 0
    while True:
        page = c.pull(topic, queue_id, offset, max_messages=1_000)
        out.extend(m["body"] for m in page.messages)
        if page.next_offset == offset or not page.messages:
            return out
        offset = page.next_offset


def test_send_returns_futures_and_each_queue_keeps_send_order_with_many_in_flight(quick: Any) -> None:
    with SparkMQClient(quick.url) as c:
        c.create_topic("ordered", queues=4)
        with Producer(quick.url, linger_ms=1, batch_max_messages=50, max_in_flight=4) as p:
            futures = [p.send("ordered", f"{i % 4}:{i}", queue_id=i % 4) for i in range(4_000)]
            assert p.flush(30) == 0
            results = [f.result(0) for f in futures]
        for q in range(4):
            sent = [r.queue_offset for i, r in enumerate(results) if i % 4 == q]
            assert sent == list(range(1_000))  # offsets in send order, no gap, no duplicate
            assert _bodies(c, "ordered", q) == [f"{q}:{i}" for i in range(q, 4_000, 4)]


def test_flush_returns_only_after_every_callback_has_run(quick: Any) -> None:
    seen: list[int] = []

    def slow(result: SendResult | None, error: BrokerError | None) -> None:
        time.sleep(0.002)  # a callback that takes a moment (a progress bar, a counter behind a lock)
        seen.append(1 if error is None else 0)

    with Producer(quick.url, linger_ms=1, batch_max_messages=100, max_in_flight=2) as p:
        for i in range(500):
            p.send("flushed", f"m{i}", callback=slow)
        assert p.flush(30) == 0
        assert len(seen) == 500 and all(seen)  # flush() is the point where every outcome was reported


def test_keyed_and_free_messages_land_where_the_client_puts_them(quick: Any) -> None:
    with SparkMQClient(quick.url) as c:
        c.create_topic("keyed", queues=8)
        keys = [f"order-{i}" for i in range(40)]
        expected = [c.produce("keyed", [{"body": "x", "keys": [k]}])[0].queue_id for k in keys]
        done: list[tuple[SendResult | None, BrokerError | None]] = []
        with Producer(quick.url) as p:
            futures = [p.send("keyed", "y", key=k, tags="t", callback=lambda r, e: done.append((r, e)))
                       for k in keys]
            p.flush(30)
        assert [f.result().queue_id for f in futures] == expected
        assert len(done) == 40 and all(e is None for _, e in done)
        page = c.pull("keyed", expected[0], futures[0].result().queue_offset, max_messages=1)
        assert page.messages[0]["keys"] == ["order-0"] and page.messages[0]["tags"] == "t"


def _ok_requests(url: str) -> int:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith('sparkmq_produce_requests_total{outcome="ok"}'):
            return int(float(line.split()[-1]))
    return 0


def test_free_messages_fill_one_queue_per_batch_then_move_to_the_next(quick: Any) -> None:
    with SparkMQClient(quick.url) as c:
        c.create_topic("sticky", queues=8)
    with Producer(quick.url, linger_ms=60_000) as p:  # only flush closes a batch
        warm = p.send("sticky", "warm")
        assert p.flush(30) == 0
        before = _ok_requests(quick.url)
        rounds = []
        for _ in range(8):
            futures = [p.send("sticky", b"\x00\xff binary") for _ in range(25)]
            assert p.flush(30) == 0
            rounds.append({f.result(0).queue_id for f in futures})
    assert _ok_requests(quick.url) - before == 8  # one request per batch, not one per queue
    assert all(len(r) == 1 for r in rounds)  # a batch fills one queue
    assert set().union(*rounds) == set(range(8))  # batches go round robin over every queue
    queues = [warm.result(0).queue_id] + [min(r) for r in rounds]
    assert all(a != b for a, b in zip(queues, queues[1:])), queues  # each closed batch moves the next one on


def test_the_next_batch_of_free_messages_skips_queues_with_a_batch_waiting_or_in_flight(quick: Any) -> None:
    with SparkMQClient(quick.url) as c:
        c.create_topic("idle-first", queues=4)
        placer = Placer(c, 5.0)
        busy: set[int] = set()  # queues (counted from the first one used) with a batch waiting or in flight
        first: list[int] = []
        placer.busy = lambda qkey: (qkey[0][2] - first[0]) % 4 in busy
        used = []
        for held in ((), (), (2,), (0, 1, 2, 3), (), (2, 3)):
            busy.clear()
            busy.update(held)
            qkey = placer.place("idle-first", None, None)
            if not first:
                first.append(qkey[0][2])
            used.append((qkey[0][2] - first[0]) % 4)
            batch = Batch(*qkey)
            batch.add(b"x", None, None, None, None)
            placer.filled("idle-first", batch)
            batch.open = False  # taken by a sender: the next free message moves on
    # next idle queue in round robin; when all four are busy, simply the next one
    assert used == [0, 1, 3, 0, 1, 0]


def test_a_lone_message_goes_out_at_its_linger_not_at_a_later_wake_up(quick: Any) -> None:
    linger = 0.25  # long next to a round trip; a sender that misses its wake-up holds a batch for 1 s or more
    waits = []
    with Producer(quick.url, linger_ms=linger * 1000) as p:
        p.send("linger", "warm").result(30)
        for _ in range(3):  # the fastest of three: a held batch is held every time, a slow machine not always
            time.sleep(0.05)  # every sender thread is idle
            started = time.monotonic()
            future = p.send("linger", "alone")
            future.result(30)
            waits.append(time.monotonic() - started)
            stages = future.stages()
            assert started <= stages["opened"] <= stages["taken"] <= stages["posted"] <= stages["answered"]
            assert stages["taken"] - stages["opened"] >= linger * 0.99  # taken by a sender once due, not before
    assert min(waits) >= linger * 0.9  # the batch waited for more messages
    assert min(waits) < linger + 0.5, waits  # and went out when due


def test_a_batch_due_now_wakes_a_sender_without_a_clock(quick: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full batches, and the next batch of a queue whose request was answered, go at once: with a linger
    and an idle tick of two minutes, only the wake-ups of the due batches can send them in time."""
    monkeypatch.setattr(producer_sender, "_IDLE_WAIT_S", 120.0)
    with Producer(quick.url, linger_ms=120_000, batch_max_messages=5, max_in_flight=3) as p:
        p.send("woken", "warm", queue_id=0)
        assert p.flush(30) == 0
        futures = [p.send("woken", f"m{i}", queue_id=i // 10) for i in range(40)]  # 8 full batches, 2 per queue
        results = [f.result(30) for f in futures]  # no flush: each full batch woke a sender
        late = p.send("woken", "alone", queue_id=1)
        time.sleep(0.2)
        assert not late.done()  # a batch that is not full waits for its linger (or a flush)
        assert p.flush(30) == 0
    for q in range(4):  # each queue in send order (queue 0 holds the warm-up message first)
        assert [r.queue_offset for r in results[q * 10:q * 10 + 10]] == list(range(q == 0, (q == 0) + 10))


def test_a_waiting_flush_does_not_swallow_the_wake_up_of_a_new_batch(quick: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A send while another thread waits in flush(): its batch is woken for a sender, not for the flush
    (they waited on one condition, and the wake-up of a new batch could go to the flush instead)."""
    monkeypatch.setattr(producer_sender, "_IDLE_WAIT_S", 120.0)  # a missed wake-up holds the batch 2 min
    entered, release = threading.Event(), threading.Event()

    def held(_result: SendResult | None, _error: BrokerError | None) -> None:
        entered.set()
        release.wait(60)  # keeps its message counted as unsent: the flush below waits

    with Producer(quick.url, linger_ms=5, max_in_flight=3) as p:
        p.send("swallowed", "warm").result(30)
        p.send("swallowed", "held", callback=held)
        assert entered.wait(30)
        flusher = threading.Thread(target=p.flush, args=(60,))
        flusher.start()
        time.sleep(0.3)  # the flush is waiting, and so are the idle senders it woke
        try:
            late = p.send("swallowed", "late")
            assert late.result(20).queue_offset >= 0
        finally:
            release.set()
            flusher.join()


def test_a_sender_opens_a_new_connection_when_the_broker_closed_its_kept_alive_one(fast_broker: Any) -> None:
    broker = fast_broker()
    with Producer(broker.url, linger_ms=1, max_in_flight=2, send_timeout_s=30) as p:
        before = [p.send("reopened", f"a{i}", queue_id=0) for i in range(50)]
        assert p.flush(30) == 0 and all(f.exception(0) is None for f in before)
        broker.restart()  # every sender's kept-alive connection is closed by the old broker process
        after = [p.send("reopened", f"b{i}", queue_id=0) for i in range(50)]
        assert p.flush(30) == 0
    errors = [f.exception(0) for f in after]
    assert errors == [None] * 50, errors[:3]  # not failed as "may have been stored": nothing was sent on a dead one
    assert [f.result(0).queue_offset for f in after] == list(range(50, 100))


def test_msg_ids_and_properties_take_the_per_message_answer(quick: Any) -> None:
    with Producer(quick.url, msg_ids=True) as p:
        f = p.send("props", "with props", properties={"region": "eu"})
        p.flush(30)
        result = f.result()
    assert len(result.msg_id) == 32
    with SparkMQClient(quick.url) as c:
        assert c.message(result.msg_id)["properties"]["region"] == "eu"


def test_a_full_buffer_raises_or_blocks_as_chosen(fast_broker: Any) -> None:
    broker = fast_broker()
    body = b"b" * 1_000
    with SparkMQClient(broker.url) as c:
        c.create_topic("full", queues=1)
    raising = Producer(broker.url, buffer_max_bytes=10_000, on_full="raise", timeout_s=30)
    bounded = Producer(broker.url, buffer_max_bytes=10_000, max_block_s=0.3, timeout_s=30)
    patient = Producer(broker.url, buffer_max_bytes=10_000, max_block_s=20, timeout_s=30)
    for p in (raising, bounded, patient):  # the topic's route is known before the broker stops
        p.send("full", body).result(30)
    os.kill(broker.proc.pid, signal.SIGSTOP)  # the broker takes nothing: the buffers can only fill
    try:
        for p in (raising, bounded, patient):
            for _ in range(9):
                p.send("full", body)
        with pytest.raises(BufferFullError, match="buffer_max_bytes"):
            raising.send("full", body)
        started = time.monotonic()
        with pytest.raises(BufferFullError, match="did not drain within 0.3 s"):
            bounded.send("full", body)
        assert time.monotonic() - started >= 0.25
        threading.Timer(0.3, os.kill, (broker.proc.pid, signal.SIGCONT)).start()
        late = patient.send("full", body)  # waits until the resumed broker drained the buffer
        assert patient.flush(20) == 0 and late.result().queue_offset >= 9
    finally:
        os.kill(broker.proc.pid, signal.SIGCONT)
        for p in (raising, bounded, patient):
            p.close(20)


def test_close_flushes_stops_every_thread_and_refuses_later_sends(quick: Any) -> None:
    before = len(threading.enumerate())
    p = Producer(quick.url, linger_ms=10_000, max_in_flight=3)
    futures = [p.send("closing", f"m{i}") for i in range(100)]
    assert not any(f.done() for f in futures)  # lingering: nothing sent yet
    assert len(_producer_threads()) == 3
    assert p.close(30) == 0  # close flushes first
    assert all(f.result(0).queue_offset >= 0 for f in futures)
    assert _producer_threads() == [] and len(threading.enumerate()) == before
    with pytest.raises(ProducerClosedError):
        p.send("closing", "late")
    assert p.close() == 0  # twice is safe


def test_a_closed_producer_and_its_batches_are_freed_without_the_cyclic_collector(quick: Any) -> None:
    """No reference cycle: the collector's full passes (which stop every thread) have nothing of ours to find."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        p = Producer(quick.url, linger_ms=1)
        calls = []
        for i in range(3_000):  # free, explicit-queue and keyed messages, some with callbacks
            p.send("acyclic", f"m{i}", key=f"k{i}" if i % 5 == 0 else None, queue_id=i & 3 if i % 3 == 0 else None,
                   callback=(lambda r, e: calls.append(e)) if i % 2 else None)
        kept = p.send("acyclic", "last")
        batch = weakref.ref(kept[0])
        assert p.close(30) == 0 and len(calls) == 1_500 and calls == [None] * 1_500
        gone = weakref.ref(p)
        del p, kept
        assert gone() is None and batch() is None  # freed by reference counting alone
        gc.collect()
        cyclic = [o for o in gc.garbage if type(o).__module__.startswith("broker_api") or isinstance(o, threading.Thread)
                  or type(o).__name__ == "frame" and o.f_code.co_filename.startswith(str(BROKER_API))]
        assert cyclic == []  # (httpx's own request and response cycles are not ours to break)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_a_failed_send_keeps_its_error_but_not_the_sender_frames_behind_it() -> None:
    with socket.socket() as s:  # a port nobody listens on: every send fails (connection refused)
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    gc.collect()
    gc.disable()
    try:
        p = Producer(dead, linger_ms=1, timeout_s=2)
        futures = [p.send("nowhere", f"m{i}") for i in range(10)]
        p.close(10)
        errors = [f.exception(5) for f in futures]
        assert all(isinstance(e, BrokerError) for e in errors), errors[:2]
        gone = weakref.ref(p)
        del p
        assert gone() is None  # no error's traceback ties the producer's frames to it
    finally:
        gc.enable()


def test_a_broker_killed_mid_flight_fails_futures_with_our_errors_and_stores_nothing_twice(fast_broker: Any) -> None:
    broker = fast_broker()
    with SparkMQClient(broker.url) as c:
        c.create_topic("crash", queues=2)
    p = Producer(broker.url, linger_ms=1, batch_max_messages=100, max_in_flight=2, timeout_s=5, send_timeout_s=0.5)
    futures = [p.send("crash", f"m{i}", queue_id=i % 2) for i in range(1_000)]
    futures[500].result(30)  # acknowledgements are coming back: kill the broker while sends go on
    broker.kill()
    futures += [p.send("crash", f"m{i}", queue_id=i % 2) for i in range(1_000, 3_000)]
    assert p.flush(30) == 0
    p.close()
    stored: dict[str, SendResult] = {}
    unknown: set[str] = set()
    for i, f in enumerate(futures):
        error = f.exception(0)
        if error is None:
            stored[f"m{i}"] = f.result(0)
        else:
            assert isinstance(error, BrokerError) and "crash" not in type(error).__module__
            if getattr(error, "stored_unknown", False):
                unknown.add(f"m{i}")
    assert 250 < len(stored) < 3_000  # some before the kill, not all
    broker.start()  # same data dir: what was acknowledged is there, once, in send order
    with SparkMQClient(broker.url) as c:
        for q in range(2):
            bodies = _bodies(c, "crash", q)
            assert len(bodies) == len(set(bodies))  # nothing stored twice
            assert set(bodies) <= set(stored) | unknown  # a failure that said "not stored" was not stored
            assert [int(b[1:]) for b in bodies] == sorted(int(b[1:]) for b in bodies)  # send order
            acked = {b: r for b, r in stored.items() if r.queue_id == q}
            assert {bodies[r.queue_offset] for r in acked.values()} == set(acked)  # each where its future said
