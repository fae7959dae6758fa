"""The per-connection limits of `floe serve` (see `catalog/http_limits.py`, which applies them inside
uvicorn's HTTP protocol) and what its connections share: the limits from the settings, client addresses
counted per server, the warning about closed connections, the refusal answers, and a transport that
sends one event-loop step's writes together. Nothing here depends on uvicorn.
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

from catalog.error_json import HTTP_ERROR_TYPES, error_body
from catalog.settings import Settings

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
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


class ServerConnections:
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
_SERVERS: weakref.WeakKeyDictionary[Any, ServerConnections] = weakref.WeakKeyDictionary()


def server_connections(server_state: Any) -> ServerConnections:
    """The connections of the server whose per-server state object is `server_state`."""
    shared = _SERVERS.get(server_state)
    if shared is None:
        shared = _SERVERS.setdefault(server_state, ServerConnections())
    return shared


class CoalescingTransport:
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


def refusal(status: int, message: str) -> bytes:
    """A complete HTTP/1.1 response refusing the request (or connection) with `status`, in the spec's
    error JSON, that closes the connection."""
    body = error_body(status, HTTP_ERROR_TYPES[status], message)
    retry_after = b"retry-after: 1\r\n" if status in _RETRY_AFTER_STATUSES else b""
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"%sconnection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), retry_after, body)
    )
