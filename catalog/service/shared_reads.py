"""One database read shared by the requests that need it at the same moment, never answering a request
from before it arrived.

Engines load the same tables over and over, and every load checks the table's current metadata location
in the database (`catalog.service.load_cache`), so under load most of a loadTable's cost was that one
round trip. Here, per key, at most one read is in flight; requests that arrive while it runs do not join
it (it may have read the row before a commit they already saw finish), they wait for the next read,
which starts when the running one ends and serves all of them. Every request is thus answered by a read
that started after the request arrived: a commit that finished before a load began, through any
process, is seen by that load, exactly as with one read per request, but a burst of N loads of one
table costs at most two round trips instead of N.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedReads(Generic[K, V]):
    """`read(key)` through `fetch`, shared among the concurrent callers of one event loop."""

    def __init__(self, fetch: Callable[[K], Awaitable[V]]) -> None:
        self._fetch = fetch
        # key -> the read that has not started yet (newcomers join it) / the read in flight.
        self._waiting: dict[K, asyncio.Future[V]] = {}
        self._running: dict[K, asyncio.Future[Any]] = {}

    async def read(self, key: K) -> V:
        """The value of a read of `key` that started after this call."""
        pending = self._waiting.get(key)
        loop = asyncio.get_running_loop()
        # Done before it started: cancelled at shutdown; another loop's: left by a loop that stopped.
        if pending is None or pending.done() or pending.get_loop() is not loop:
            previous = self._running.get(key)
            if previous is not None and previous.get_loop() is not loop:
                previous = None
            pending = asyncio.ensure_future(self._read_after(key, previous))
            pending.add_done_callback(_retrieve)
            self._waiting[key] = pending
        # A caller that goes away (client disconnect) must not cancel the others' read.
        return await asyncio.shield(pending)

    async def _read_after(self, key: K, previous: asyncio.Future[V] | None) -> V:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome belongs to its own callers
        this = asyncio.current_task()
        assert this is not None
        if self._waiting.get(key) is this:
            del self._waiting[key]  # from now on newcomers queue for the next read
        self._running[key] = this
        try:
            return await self._fetch(key)
        finally:
            if self._running.get(key) is this:
                del self._running[key]

    def __len__(self) -> int:
        """Reads in flight or waiting to start (0 when idle)."""
        return len(self._waiting) + len(self._running)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failure as seen: its callers got it, or all of them went away before it came."""
    with contextlib.suppress(asyncio.CancelledError):
        future.exception()
