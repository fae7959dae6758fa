"""The catalog benchmarks' load generator keeps a response's body when asked (the Trino-like workload
reads the access token of each token response), framed by Content-Length or chunked, and still
discards it otherwise."""

from __future__ import annotations

import asyncio

from benchmarks.catalog.loadgen import build_request, open_connection

RESPONSES = [
    b'HTTP/1.1 200 OK\r\nContent-Length: 27\r\n\r\n{"access_token": "abc.def"}',
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n",
]


async def _exchange(keep_body: bool) -> list[tuple[int, bytes]]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for response in RESPONSES:
            await reader.readuntil(b"\r\n\r\n")
            # Split across writes: the parser must wait for the rest of a body.
            writer.write(response[:40])
            await writer.drain()
            await asyncio.sleep(0.01)
            writer.write(response[40:])
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        connection = await open_connection("127.0.0.1", port, keep_body=keep_body)
        got = []
        for _ in RESPONSES:
            status = await connection.send(build_request("GET", "/", f"127.0.0.1:{port}"))
            got.append((status, bytes(connection.body)))
        assert connection.transport is not None
        connection.transport.close()
        return got
    finally:
        server.close()
        await server.wait_closed()


def test_bodies_are_kept_when_asked() -> None:
    got = asyncio.run(_exchange(keep_body=True))
    assert got == [(200, b'{"access_token": "abc.def"}'), (200, b"hello world"), (304, b"")]


def test_bodies_are_discarded_otherwise() -> None:
    got = asyncio.run(_exchange(keep_body=False))
    assert got == [(200, b""), (200, b""), (304, b"")]
