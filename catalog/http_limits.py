"""Limits on what a client can hold of `floe serve` before it is authenticated.

uvicorn's httptools protocol keeps request headers without a size limit (a 60 MB header was answered
200, and 8 of them at once took the server from 379 MB to 1 GB) and times a connection out only after
a response (keep-alive), so a connection that never finishes its request head, or its body, stays open
for good (1,000 connections trickling a POST body a byte every few seconds made every other client
get 503). `LimitedHttpToolsProtocol` adds, per connection: a limit on the request head's size and on
its number of header fields (431), a deadline for receiving the head (counted from the connection's
start or from the start of the next request on a keep-alive connection), a deadline for receiving the
body that grows with the bytes received (408), a cap on open connections per process (further
connections get a 503 and are closed) and, below it, per client address (429).

One timer per connection checks the deadlines when it fires, never more than the shorter of the two
timeouts ahead: a request costs no timer of its own.

This is the one module of floe that uses uvicorn's internals (its `HttpToolsProtocol`, parser callbacks and
a copy of its `data_received`): uvicorn has no public setting for any of these limits on httptools.
pyproject.toml pins uvicorn to the version they were written against and tests/unit/test_library_contracts.py
fails on an upgrade that changes what is used here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import weakref
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from catalog.api.errors import error_body
from catalog.settings import Settings

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
_ERROR_TYPES = {
    400: "BadRequestException",
    408: "BadRequestException",
    429: "TooManyRequestsException",
    431: "BadRequestException",
    503: "ServiceUnavailableException",
}
# Refusals of a connection for a cap: the client may come back in a second.
_RETRY_AFTER_STATUSES = (429, 503)
# A warning about closed connections is written at most this often (a flood would flood the log too).
WARNING_INTERVAL_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout_seconds: float
    max_connections: int
    body_timeout_seconds: float
    body_min_bytes_per_second: int
    max_connections_per_address: int  # 0: no cap

    @property
    def check_interval_seconds(self) -> float:
        """How far ahead a connection's timer is ever set: no phase's deadline comes sooner after the
        phase begins, so a timer set in an earlier phase never fires after a later phase's deadline."""
        return min(self.header_timeout_seconds, self.body_timeout_seconds)


@cache
def connection_limits() -> ConnectionLimits:
    """The limits of this process, from the environment (`floe serve` workers inherit it)."""
    settings = Settings.from_env()
    return ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout_seconds=settings.header_timeout_seconds,
        max_connections=settings.max_connections,
        body_timeout_seconds=settings.body_timeout_seconds,
        body_min_bytes_per_second=settings.body_min_bytes_per_second,
        max_connections_per_address=settings.max_connections_per_address,
    )


def address_key(host: str) -> str:
    """The client address a per-address cap counts by: an IPv4 address, or the /64 of an IPv6 one (a
    single host is commonly given a whole /64)."""
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))


class _ServerConnections:
    """What the connections of one uvicorn server share: open connections per client address, and the
    closed connections not yet reported in a warning."""

    __slots__ = ("by_address", "closed", "warned_at")

    def __init__(self) -> None:
        self.by_address: dict[str, int] = {}
        self.closed: Counter[str] = Counter()
        self.warned_at = -math.inf

    def report(self, reason: str, now: float, logger: logging.Logger) -> None:
        """Count a connection closed for `reason`; warn at most every WARNING_INTERVAL_SECONDS."""
        self.closed[reason] += 1
        if now - self.warned_at >= WARNING_INTERVAL_SECONDS:
            counts = ", ".join(f"{count} {why}" for why, count in sorted(self.closed.items()))
            logger.warning("Closed connections (since the last such line): %s", counts)
            self.closed.clear()
            self.warned_at = now


# Keyed by uvicorn's per-server state object, which every connection of a server is given: several
# servers in one process (tests run them in threads) count apart.
_SERVERS: weakref.WeakKeyDictionary[Any, _ServerConnections] = weakref.WeakKeyDictionary()


def _server_connections(server_state: Any) -> _ServerConnections:
    shared = _SERVERS.get(server_state)
    if shared is None:
        shared = _SERVERS.setdefault(server_state, _ServerConnections())
    return shared


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
        # The loop time the request head being read began at (None between requests) and the time the
        # end of its head was parsed with the body bytes since (None: no body being read). The timer
        # checks them when it fires, so a request costs no timer of its own.
        self._head_started: float | None = None
        self._body_started: float | None = None
        self._body_bytes = 0
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None
        # The client address this connection is counted under (None: not counted).
        self._address: str | None = None
        self._shared = _server_connections(self.server_state)

    # -- connection --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        if len(self.connections) > self.limits.max_connections:
            self._shared.report("over FLOE_MAX_CONNECTIONS", self.loop.time(), self.logger)
            self._refuse(503, "Too many open connections: retry later")
            return
        if not self._count_address():
            self._shared.report("over FLOE_MAX_CONNECTIONS_PER_ADDRESS", self.loop.time(), self.logger)
            self._refuse(429, "Too many open connections from this address: retry later")
            return
        # The first head's deadline runs from the connection (a later one's from its first byte).
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline_timer()
        self._uncount_address()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        # The connection leaves this protocol (uvicorn stops counting it as well).
        self._cancel_deadline_timer()
        self._uncount_address()
        super().handle_websocket_upgrade()

    def _count_address(self) -> bool:
        """Count this connection under its client's address; False when that address is at its cap."""
        cap = self.limits.max_connections_per_address
        if not cap or self.client is None:  # no cap, or a Unix socket
            return True
        address = address_key(self.client[0])
        by_address = self._shared.by_address
        count = by_address.get(address, 0)
        if count >= cap:
            return False
        by_address[address] = count + 1
        self._address = address
        return True

    def _uncount_address(self) -> None:
        address, self._address = self._address, None
        if address is not None:
            by_address = self._shared.by_address
            count = by_address.get(address, 0) - 1
            if count > 0:
                by_address[address] = count
            else:
                by_address.pop(address, None)

    # -- deadlines ---------------------------------------------------------------------------------

    def _start_head(self) -> None:
        if self._head_started is None:
            self._head_started = self.loop.time()
            self._arm_deadline_timer(self.limits.header_timeout_seconds)

    def _arm_deadline_timer(self, delay: float) -> None:
        if self._deadline_timer is None:
            delay = min(delay, self.limits.check_interval_seconds)
            self._deadline_timer = self.loop.call_later(delay, self._check_deadlines)

    def _cancel_deadline_timer(self) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None

    def _check_deadlines(self) -> None:
        self._deadline_timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if self._reading_head:
            started = self._head_started
            if started is None:
                return  # between requests: the next head starts the timer again
            remaining = started + self.limits.header_timeout_seconds - now
            if remaining <= 0:
                if self._head_raw_bytes:
                    self._refuse(408, "Request head not received in time")
                else:
                    self.transport.close()
                return
        elif self._body_started is not None:
            remaining = self._body_remaining(now)
            if remaining <= 0:
                self._body_timed_out(now)
                return
        else:
            return  # a request without a body, being answered
        # A head or body that began after the timer was set: wait for its own deadline.
        self._arm_deadline_timer(remaining)

    def _body_remaining(self, now: float) -> float:
        """Seconds left to receive the body: the body timeout from the end of the head, plus a second
        per `body_min_bytes_per_second` bytes received."""
        assert self._body_started is not None
        if not self.transport.is_reading():
            # The server does not read (flow control: the application has not taken what it has, or a
            # pipelined request waits): no time of the client's; the measure starts again.
            self._body_started, self._body_bytes = now, 0
        limits = self.limits
        deadline = self._body_started + limits.body_timeout_seconds
        if limits.body_min_bytes_per_second:
            deadline += self._body_bytes / limits.body_min_bytes_per_second
        return deadline - now

    def _body_timed_out(self, now: float) -> None:
        self._shared.report("request body too slow", now, self.logger)
        # Answered already (the application need not read a body to answer): then only closed.
        cycle = self.cycle
        self._refuse(
            408, "Request body not received in time", answer=cycle is None or not cycle.response_started
        )

    def _refuse(self, status: int, message: str, *, answer: bool | None = None) -> None:
        """Answer `status` (by default unless a response is under way) and close the connection."""
        self._cancel_deadline_timer()
        cycle = self.cycle
        if answer is None:
            answer = cycle is None or cycle.response_complete
        if answer:
            body = error_body(status, _ERROR_TYPES[status], message)
            retry_after = b"retry-after: 1\r\n" if status in _RETRY_AFTER_STATUSES else b""
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"%sconnection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), retry_after, body)
            )
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False
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

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers a request it cannot parse (a NUL in the path, a broken request line) in plain
        # text; floe's errors are the spec's error JSON.
        self._refuse(400, msg)

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
        # The body's deadline runs from here until the message is complete (at once for a request
        # without a body), whether or not the application answered before reading it.
        self._body_started = self.loop.time()
        self._body_bytes = 0
        self._arm_deadline_timer(self.limits.body_timeout_seconds)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_started = None
        super().on_message_complete()
        # The next request's head starts now; its deadline starts with its first byte (until then the
        # keep-alive timeout applies).
        self._reading_head = True
        self._head_raw_bytes = self._head_field_bytes = self._head_fields = 0
