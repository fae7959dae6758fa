"""One listening socket per worker process for `floe serve --workers N` (Linux `SO_REUSEPORT`).

uvicorn's workers share one listening socket, and whichever process wakes first accepts a whole burst
of new connections: a client pool that connects at once lands almost entirely on one worker (31 of 32
keep-alive connections in the catalog benchmark) while the others idle, which cut throughput and
doubled the p99 latency. With one `SO_REUSEPORT` listener per worker the kernel spreads connections
over the workers.

uvicorn's supervisor pickles the parent's sockets into every worker it starts (and restarts);
`ReusePortSocket` pickles as "bind a sibling listener on the same address", so each worker gets its own.
The parent's socket is bound (reserving the port and failing early when it is taken) but never
listens, so it receives no connections.
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def reuseport_supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


class ReusePortSocket(socket.socket):
    """A bound, not yet listening TCP socket with `SO_REUSEPORT`; a copy sent to another process is
    a new socket bound to the same address (the server calls `listen` on it)."""

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[Any, ...]]:
        return (bind_reuseport, (self.family, self.getsockname()[:2]))


def bind_reuseport(family: socket.AddressFamily, address: tuple[str, int]) -> ReusePortSocket:
    sock = ReusePortSocket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def reuseport_socket(host: str, port: int) -> ReusePortSocket:
    """The parent's socket for `host:port`, from which every worker binds its own listener."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return bind_reuseport(family, (str(address[0]), int(address[1])))
