"""Limits on what a client can hold of `floe serve` before it is authenticated.

uvicorn's httptools protocol keeps request headers without a size limit (a 60 MB header was answered
200, and 8 of them at once took the server from 379 MB to 1 GB) and times a connection out only after
a response (keep-alive), so a connection that never finishes its request head, or its body, stays open
for good (1,000 connections trickling a POST body a byte every few seconds made every other client
get 503). `LimitedHttpToolsProtocol` adds, per connection (`catalog/connection_limits.py` holds the limits and
what the connections share): a limit on the request head's size and on
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
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from catalog.connection_limits import (
    CoalescingTransport,
    address_key,
    connection_limits,
    refusal,
    server_connections,
)


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
        self._shared = server_connections(self.server_state)

    # -- connection --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
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
            self.transport.write(refusal(status, message))
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
