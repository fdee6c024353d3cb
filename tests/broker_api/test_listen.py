"""The broker's main listening socket: bound by the broker itself, with Nagle off on every connection."""

from __future__ import annotations

import asyncio
import socket

from broker_api.server import main_socket


def test_connections_accepted_on_the_main_socket_have_nagle_off() -> None:
    # With Nagle on, a small answer after a small request waits for the client's delayed ACK:
    # a long poll's p50 went from ~1 ms to ~50 ms when the socket was made without IPPROTO_TCP.
    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=main_socket("127.0.0.1", 0, 16))
        async with server:
            port = server.sockets[0].getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            nodelay = await asyncio.wait_for(accepted, 5)
            writer.close()
            return nodelay

    assert asyncio.run(accept_one()) != 0
