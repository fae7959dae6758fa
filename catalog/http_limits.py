"""Limits on what a client can hold of `floe serve` before it is authenticated.

uvicorn's httptools protocol keeps request headers without a size limit (a 60 MB header was answered
200, and 8 of them at once took the server from 379 MB to 1 GB) and times a connection out only after
a response (keep-alive), so a connection that never finishes its request head stays open for good.
`LimitedHttpToolsProtocol` adds, per connection: a limit on the request head's size and on its number
of header fields (431), a deadline for receiving the head (counted from the connection's start or
from the start of the next request on a keep-alive connection), and a cap on open connections per
process (further connections get a 503 and are closed).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import cache
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from catalog.api.errors import error_body
from catalog.settings import Settings

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}
_ERROR_TYPES = {
    408: "BadRequestException",
    431: "BadRequestException",
    503: "ServiceUnavailableException",
}


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout_seconds: float
    max_connections: int


@cache
def connection_limits() -> ConnectionLimits:
    """The limits of this process, from the environment (`floe serve` workers inherit it)."""
    settings = Settings.from_env()
    return ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout_seconds=settings.header_timeout_seconds,
        max_connections=settings.max_connections,
    )


class _CoalescingTransport:
    """A connection's transport whose writes of one event-loop step leave as one.

    uvicorn writes a response's head as soon as the app starts it and its body after: two send calls,
    two TCP segments and, on loopback, two wake-ups of the client per response (profiled: the head's
    write alone was a fifth of a loadTable's CPU). Writes are gathered and sent at the end of the
    step, in order; closing sends what is gathered first.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a request head that breaks a limit."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP/1.1 protocol with the limits of `ConnectionLimits`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = connection_limits()
        self._reading_head = True
        self._head_raw_bytes = 0
        self._head_field_bytes = 0
        self._head_fields = 0
        # The loop time the request head being read began at (None between requests); the timer checks
        # it when it fires, so a request costs no timer of its own.
        self._head_started: float | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None

    # -- connection --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        if len(self.connections) > self.limits.max_connections:
            self.logger.warning("Refused a connection: %d open", len(self.connections) - 1)
            self._refuse(503, "Too many open connections: retry later")
            return
        # The first head's deadline runs from the connection (a later one's from its first byte).
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _start_head(self) -> None:
        if self._head_started is None:
            self._head_started = self.loop.time()
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(
                    self.limits.header_timeout_seconds, self._head_timed_out
                )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        started = self._head_started
        if started is None or not self._reading_head or self.transport.is_closing():
            return  # between requests: the next head starts the timer again
        remaining = started + self.limits.header_timeout_seconds - self.loop.time()
        if remaining > 0:  # a head that began after the timer was set: wait for its own deadline
            self._head_timer = self.loop.call_later(remaining, self._head_timed_out)
            return
        if self._head_raw_bytes:
            self._refuse(408, "Request head not received in time")
        else:
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` (unless a response is under way) and close the connection."""
        self._cancel_head_timer()
        if self.cycle is None or self.cycle.response_complete:
            body = error_body(status, _ERROR_TYPES[status], message)
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body)
            )
        self.transport.close()

    # -- parsing -----------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        # uvicorn's own `data_received`, with a refusal of the head told apart from a malformed request.
        self._unset_keepalive_if_required()
        if self._reading_head:
            self._head_raw_bytes += len(data)
            self._start_head()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(*self._refusal)
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        # An unfinished head is held in memory by the parser: bound it by what was received.
        if self._reading_head and self._head_raw_bytes > self.limits.max_header_bytes:
            self._refuse(431, f"Request head larger than {self.limits.max_header_bytes} bytes")

    def _count_head(self, size: int) -> None:
        self._head_field_bytes += size
        if self._head_field_bytes > self.limits.max_header_bytes:
            self._refusal = (431, f"Request head larger than {self.limits.max_header_bytes} bytes")
            raise _HeadRefused

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_fields += 1
        if self._head_fields > self.limits.max_headers:
            self._refusal = (431, f"More than {self.limits.max_headers} header fields")
            raise _HeadRefused
        self._count_head(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._head_started = None  # the timer, when it fires, finds no head to time
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # The next request's head starts now; its deadline starts with its first byte (until then the
        # keep-alive timeout applies).
        self._reading_head = True
        self._head_raw_bytes = self._head_field_bytes = self._head_fields = 0
