"""Load-generating clients for bench_broker.py (run inside client processes).

Raw-socket HTTP/1.1 (keep-alive) and RESP clients, so the client side costs
the same for the broker, the bare route and Redis.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import socket
import time
from typing import Any

import orjson

ARROW = "application/vnd.apache.arrow.stream"


# -- HTTP ----------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def _load_worker(port: int, request: bytes, stop_at: float, counts: dict[str, int],
                       interval: float | None) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    next_at = time.monotonic()
    try:
        while time.monotonic() < stop_at:
            if interval is not None:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            writer.write(request)
            status, _, _ = await _read_response(reader)
            key = "requests" if status == 200 else f"http_{status}"
            counts[key] = counts.get(key, 0) + 1
    finally:
        writer.close()


def http_load(port: int, request: bytes, duration: float, connections: int, rate: float | None = None) -> dict:
    """Send ``request`` over ``connections`` keep-alive connections for ``duration`` s."""
    counts = {"requests": 0}
    interval = connections / rate if rate else None

    async def main() -> None:
        stop_at = time.monotonic() + duration
        await asyncio.gather(*(_load_worker(port, request, stop_at, counts, interval) for _ in range(connections)))

    asyncio.run(main())
    return counts


def _get(sock_file: Any, sock: socket.socket, port: int, path: str, accept: str) -> tuple[dict[str, str], bytes]:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\n\r\n".encode())
    status_line = sock_file.readline()
    headers = {}
    while True:
        line = sock_file.readline().decode("latin-1").strip()
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if b" 200 " not in status_line:
        raise RuntimeError(f"GET {path}: {status_line!r}")
    return headers, sock_file.read(int(headers["content-length"]))


def pull_arrow_all(port: int, topic: str, queues: int) -> tuple[int, float]:
    """Read every queue of ``topic`` from offset 0 in Arrow pages of 10,000; (messages, seconds)."""
    import pyarrow as pa

    total, started = 0, time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock, sock.makefile("rb") as f:
        for qid in range(queues):
            offset = 0
            while True:
                headers, body = _get(f, sock, port, f"/v1/topics/{topic}/queues/{qid}/messages"
                                     f"?offset={offset}&max_messages=10000", ARROW)
                total += pa.ipc.open_stream(body).read_all().num_rows
                offset = int(headers["x-sparkmq-next-offset"])
                if headers["x-sparkmq-status"] != "FOUND":
                    break
    return total, time.perf_counter() - started


# -- long-poll latency --------------------------------------------------------------


def _consume_latencies(port: int, topic: str, expect: int, timeout_s: float, out: Any) -> None:
    latencies: list[float] = []
    offset, deadline = 0, time.monotonic() + timeout_s
    with socket.create_connection(("127.0.0.1", port)) as sock, sock.makefile("rb") as f:
        while len(latencies) < expect and time.monotonic() < deadline:
            _, body = _get(f, sock, port, f"/v1/topics/{topic}/queues/0/messages"
                           f"?offset={offset}&max_messages=100&wait_ms=1000", "application/json")
            now = time.time_ns()
            page = orjson.loads(body)
            latencies += [(now - int(m["body"])) / 1e6 for m in page["messages"]]
            offset = page["next_offset"]
    out.put(latencies)


def longpoll_latency(port: int, topic: str, rate: int, duration: float) -> dict[str, float]:
    """Produce ``rate`` msg/s (body = send time) while a consumer long-polls; latency percentiles."""
    import httpx

    httpx.post(f"http://127.0.0.1:{port}/v1/topics", json={"name": topic, "queues": 1})
    n = int(rate * duration)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    consumer = ctx.Process(target=_consume_latencies, args=(port, topic, n, duration + 30, out))
    consumer.start()
    time.sleep(2.0)  # let the consumer start and park

    async def produce() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        start = time.monotonic()
        for i in range(n):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            body = orjson.dumps({"messages": [{"body": str(time.time_ns())}]})
            writer.write((f"POST /v1/topics/{topic}/messages HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          f"application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
            await _read_response(reader)
        writer.close()

    asyncio.run(produce())
    return _percentiles(out.get(timeout=duration + 60), consumer)


# -- Redis (RESP) ---------------------------------------------------------------------


def _resp_command(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)


def _resp_parse(buf: bytes, i: int) -> tuple[Any, int]:
    """Parse one RESP value at ``buf[i:]``; raises IndexError when incomplete."""
    end = buf.index(b"\r\n", i)
    kind, line = buf[i:i + 1], buf[i + 1:end]
    i = end + 2
    if kind in (b"+", b":"):
        return line, i
    if kind == b"-":
        raise RuntimeError(line.decode())
    n = int(line)
    if kind == b"$":
        if n < 0:
            return None, i
        if len(buf) < i + n + 2:
            raise IndexError
        return buf[i:i + n], i + n + 2
    if n < 0:
        return None, i
    items = []
    for _ in range(n):
        item, i = _resp_parse(buf, i)
        items.append(item)
    return items, i


def _resp_call(sock: socket.socket, payload: bytes, replies: int) -> list[Any]:
    sock.sendall(payload)
    buf, i = b"", 0
    out: list[Any] = []
    while len(out) < replies:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("redis closed the connection")
        buf += chunk
        try:
            while len(out) < replies:
                value, i = _resp_parse(buf, i)
                out.append(value)
        except (IndexError, ValueError):
            continue
    return out


def redis_xadd_load(port: int, stream: str, depth: int, duration: float, body_size: int) -> int:
    """XADD pipelined ``depth`` deep for ``duration`` s; messages added."""
    cmd = _resp_command(b"XADD", stream.encode(), b"*", b"b", b"x" * body_size) * depth
    added, stop_at = 0, time.monotonic() + duration
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while time.monotonic() < stop_at:
            _resp_call(sock, cmd, depth)
            added += depth
    return added


def redis_xadd_paced(port: int, stream: str, depth: int, duration: float, body_size: int, rate: float) -> int:
    """XADD pipelined ``depth`` deep at ``rate`` messages per second for ``duration`` s; messages added."""
    cmd = _resp_command(b"XADD", stream.encode(), b"*", b"b", b"x" * body_size) * depth
    added, start = 0, time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while (now := time.monotonic()) < start + duration:
            ahead = start + added / rate - now
            if ahead > 0:
                time.sleep(ahead)
            _resp_call(sock, cmd, depth)
            added += depth
    return added


def _redis_consume_latencies(port: int, stream: str, expect: int, timeout_s: float, out: Any) -> None:
    latencies: list[float] = []
    last, deadline = b"0-0", time.monotonic() + timeout_s
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while len(latencies) < expect and time.monotonic() < deadline:
            (reply,) = _resp_call(sock, _resp_command(b"XREAD", b"COUNT", b"100", b"BLOCK", b"1000", b"STREAMS",
                                                      stream.encode(), last), 1)
            now = time.time_ns()
            for entry_id, fields in (reply[0][1] if reply else []):
                latencies.append((now - int(fields[1])) / 1e6)
                last = entry_id
    out.put(latencies)


def redis_latency(port: int, stream: str, rate: int, duration: float) -> dict[str, float]:
    """The Redis peer of :func:`longpoll_latency`: XADD one entry per call (body = send time) at ``rate``
    while a consumer waits in XREAD BLOCK; latency percentiles."""
    n = int(rate * duration)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    consumer = ctx.Process(target=_redis_consume_latencies, args=(port, stream, n, duration + 30, out))
    consumer.start()
    time.sleep(2.0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.monotonic()
        for i in range(n):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            _resp_call(sock, _resp_command(b"XADD", stream.encode(), b"*", b"t", str(time.time_ns()).encode()), 1)
    return _percentiles(out.get(timeout=duration + 60), consumer)


def _percentiles(latencies: list[float], consumer: Any) -> dict[str, float]:
    consumer.join(30)
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    return {"n": len(latencies), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": latencies[-1]}


def redis_read_all(port: int, stream: str) -> tuple[int, float]:
    """XREADGROUP COUNT 1000 NOACK until the stream is drained; (messages, seconds)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        _resp_call(sock, _resp_command(b"XGROUP", b"CREATE", stream.encode(), b"g", b"0"), 1)
        read = _resp_command(b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1000", b"NOACK",
                             b"STREAMS", stream.encode(), b">")
        total, started = 0, time.perf_counter()
        while True:
            (reply,) = _resp_call(sock, read, 1)
            if not reply or not reply[0][1]:
                break
            total += len(reply[0][1])
    return total, time.perf_counter() - started


# -- volume --------------------------------------------------------------------------


async def _count_worker(port: int, request: bytes, left: list[int], counts: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while left[0] > 0:
            left[0] -= 1
            writer.write(request)
            status, _, _ = await _read_response(reader)
            key = "requests" if status == 200 else f"http_{status}"
            counts[key] = counts.get(key, 0) + 1
    finally:
        writer.close()


def http_send_count(port: int, request: bytes, count: int, connections: int) -> dict:
    """Send ``request`` ``count`` times over ``connections`` keep-alive connections; answers by status."""
    counts: dict[str, int] = {"requests": 0}
    left = [count]

    async def main() -> None:
        await asyncio.gather(*(_count_worker(port, request, left, counts) for _ in range(connections)))

    asyncio.run(main())
    return counts
