"""A small closed-loop HTTP/1.1 load generator: N keep-alive connections, each sending its next request
as soon as the previous response is complete, for a warm-up period and then a fixed measured period.

Built on asyncio protocols (uvloop when installed) with pre-encoded requests and a minimal response
parser, so one Python process drives several thousand requests per second on one core; the CPU it
used is reported with the results so a saturated generator is visible.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

# A request factory gets a per-run sequence number (for request bodies that must differ) and returns
# the complete request bytes.
RequestFactory = Callable[[int], bytes]


def build_request(
    method: str,
    path: str,
    host: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    content_type: str = "application/json",
) -> bytes:
    """An HTTP/1.1 keep-alive request; no Accept-Encoding, so servers answer uncompressed."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Accept: application/json"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


class ConnectionLost(Exception):
    """The server closed the connection before the response was complete."""


class _ResponseReader(asyncio.Protocol):
    """Parses one response at a time from a keep-alive connection: status, then the body framed by
    Content-Length or chunked transfer encoding (the body is discarded unless `keep_body`: then the
    last response's body is in `body`)."""

    def __init__(self, keep_body: bool = False) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.keep_body = keep_body
        self.body = bytearray()
        self.waiter: asyncio.Future[int] | None = None
        self.status = 0
        # Parser state: remaining -1 = reading headers, >= 0 = bytes of a fixed-length body still
        # expected; chunked = inside a chunked body.
        self.remaining = -1
        self.chunked = False
        self.closed = False
        self.server_closes = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionLost(str(exc) if exc else "connection closed"))

    def send(self, request: bytes) -> asyncio.Future[int]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.waiter is not None and not self.waiter.done():
            if not self._advance():
                return

    def _advance(self) -> bool:
        """Consume what the buffer holds; True when a response completed."""
        buf = self.buffer
        if self.remaining < 0 and not self.chunked:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return False
            head = bytes(buf[:end]).lower()
            del buf[: end + 4]
            if self.keep_body:
                self.body = bytearray()
            self.status = int(head[9:12])
            self.server_closes = b"\r\nconnection: close" in head
            if self.status == 304 or self.status == 204 or (100 <= self.status < 200):
                return self._complete()
            if b"\r\ntransfer-encoding: chunked" in head:
                self.chunked = True
            else:
                marker = head.find(b"\r\ncontent-length:")
                if marker < 0:
                    return self._complete()
                line_end = head.find(b"\r\n", marker + 2)
                value = head[marker + 17 : line_end if line_end >= 0 else len(head)]
                self.remaining = int(value.strip())
        if self.chunked:
            return self._advance_chunked()
        if len(buf) < self.remaining:
            return False
        if self.keep_body:
            self.body += buf[: self.remaining]
        del buf[: self.remaining]
        return self._complete()

    def _advance_chunked(self) -> bool:
        buf = self.buffer
        while True:
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                return False
            size = int(bytes(buf[:line_end]).split(b";", 1)[0], 16)
            if size == 0:
                # Last chunk: no trailers expected, so the body ends with an empty line.
                if len(buf) < line_end + 4:
                    return False
                del buf[: line_end + 4]
                self.chunked = False
                return self._complete()
            if len(buf) < line_end + 2 + size + 2:
                return False
            if self.keep_body:
                self.body += buf[line_end + 2 : line_end + 2 + size]
            del buf[: line_end + 2 + size + 2]

    def _complete(self) -> bool:
        self.remaining = -1
        assert self.waiter is not None
        self.waiter.set_result(self.status)
        return True


@dataclass
class LoadResult:
    """What one closed-loop run measured (only requests that started and ended in the window)."""

    concurrency: int
    duration_s: float
    latencies_ns: list[int] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    connection_errors: int = 0
    loadgen_cpu_s: float = 0.0
    wall_s: float = 0.0

    @classmethod
    def merge(cls, parts: list[LoadResult]) -> LoadResult:
        """Several runs of one workload (e.g. alternating rounds) as one result."""
        merged = cls(concurrency=parts[0].concurrency, duration_s=0.0)
        for part in parts:
            merged.duration_s += part.duration_s
            merged.latencies_ns.extend(part.latencies_ns)
            merged.statuses.update(part.statuses)
            merged.connection_errors += part.connection_errors
            merged.loadgen_cpu_s += part.loadgen_cpu_s
            merged.wall_s += part.wall_s
        return merged

    @property
    def requests(self) -> int:
        return len(self.latencies_ns)

    @property
    def errors(self) -> int:
        """Failed requests: HTTP statuses >= 400, broken connections and timeouts."""
        return sum(n for status, n in self.statuses.items() if status >= 400) + self.connection_errors

    @property
    def throughput(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    def percentile_ms(self, q: float) -> float | None:
        """The nearest-rank q-th percentile latency in milliseconds."""
        if not self.latencies_ns:
            return None
        ordered = sorted(self.latencies_ns)
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        return ordered[rank - 1] / 1e6

    @property
    def loadgen_cpu_share(self) -> float:
        """Share of one core the generator used over the whole run (warm-up included)."""
        return self.loadgen_cpu_s / self.wall_s if self.wall_s else 0.0


async def open_connection(host: str, port: int, keep_body: bool = False) -> _ResponseReader:
    """A keep-alive connection: `send(request)` answers the response's status once it is complete
    (with `keep_body`, its body is then in `.body`)."""
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(lambda: _ResponseReader(keep_body), host, port)
    return protocol


async def run_closed_loop(
    host: str,
    port: int | Sequence[int],
    request_factory: RequestFactory,
    concurrency: int,
    duration_s: float,
    warmup_s: float = 0.0,
    timeout_s: float = 30.0,
) -> LoadResult:
    """Drive `concurrency` connections for `warmup_s + duration_s` seconds; measure the last part.

    With several ports (server processes behind no balancer) the connections are spread round-robin:
    client i talks to `port[i % len(port)]`, as a keep-alive balancer would place them.

    A request still unanswered `timeout_s` after the run ends counts as a connection error.
    """
    result = LoadResult(concurrency=concurrency, duration_s=duration_s)
    started = time.perf_counter_ns()
    measure_from = started + int(warmup_s * 1e9)
    measure_until = measure_from + int(duration_s * 1e9)
    sequence = 0
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)

    ports = [port] if isinstance(port, int) else list(port)

    async def client(port: int) -> None:
        nonlocal sequence
        reader: _ResponseReader | None = None
        try:
            while True:
                now = time.perf_counter_ns()
                if now >= measure_until:
                    break
                if reader is None or reader.closed or reader.server_closes:
                    if reader is not None and reader.transport is not None:
                        reader.transport.close()
                    try:
                        reader = await open_connection(host, port)
                    except OSError:
                        if now >= measure_from:
                            result.connection_errors += 1
                        reader = None
                        await asyncio.sleep(0.05)
                        continue
                sequence += 1
                request = request_factory(sequence)
                sent = time.perf_counter_ns()
                try:
                    status = await reader.send(request)
                except (ConnectionLost, OSError):
                    if sent >= measure_from and time.perf_counter_ns() <= measure_until:
                        result.connection_errors += 1
                    reader.closed = True
                    continue
                done = time.perf_counter_ns()
                if sent >= measure_from and done <= measure_until:
                    result.latencies_ns.append(done - sent)
                    result.statuses[status] += 1
        finally:
            if reader is not None and reader.transport is not None:
                reader.transport.close()

    # No per-request timer (it would cost as much as the parsing): one deadline for the whole run.
    tasks = [asyncio.create_task(client(ports[i % len(ports)])) for i in range(concurrency)]
    _, pending = await asyncio.wait(tasks, timeout=warmup_s + duration_s + timeout_s)
    for task in pending:
        task.cancel()
        result.connection_errors += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    result.loadgen_cpu_s = (cpu_after.ru_utime + cpu_after.ru_stime) - (
        cpu_before.ru_utime + cpu_before.ru_stime
    )
    result.wall_s = (time.perf_counter_ns() - started) / 1e9
    return result


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when available (it ships with uvicorn[standard]); the default loop otherwise."""
    with contextlib.suppress(ImportError):
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_load(
    host: str,
    port: int | Sequence[int],
    request_factory: RequestFactory,
    concurrency: int,
    duration_s: float,
    warmup_s: float = 0.0,
) -> LoadResult:
    """`run_closed_loop` on a fresh event loop (uvloop when available)."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(
            run_closed_loop(host, port, request_factory, concurrency, duration_s, warmup_s)
        )
    finally:
        loop.close()
