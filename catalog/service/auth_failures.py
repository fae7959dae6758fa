"""Failed token requests: what is counted, and which requests are refused without checking a secret.

Counters are rows of `auth_failures`, each with a fixed window (`auth_failure_window_seconds`, W) that
starts at its first failure:

- `pair:` a client id from one source address. At `auth_failure_limit` (L, 10) failures that source's
  requests for that id are refused (429) without checking the secret until the window ends: this is what
  bounds guessing. Other sources are not affected: a tenant's wrong secrets for the admin's id never stop
  the admin's correct secret from another address.
- `client:` a client id from every source (keys that exist only). Once it reaches `LOCKDOWN_FACTOR` x L
  failures (100), the id is under attack from many addresses and each source's pair limit drops to 1:
  every further source gets one wrong guess per window, while a correct secret from a source without a
  failure still passes.
- `source:` a source address. At `auth_source_failure_limit` (100) its further failures are answered 429
  (not 401), and no longer counted per unknown client id; a correct secret still passes, so junk from a
  proxy many clients share locks nobody behind it out.

Guesses of one key's secret per window W: at most L per source address (per catalog process: count,
check and record are one step under a lock per client id and address), and from S addresses at most
LOCKDOWN_FACTOR x L + S in all, plus the requests in flight when the lockdown began.

The table stays bounded: failures for client ids no key has (random junk) are counted per pair only
while their source is under its limit and while the table has fewer than `MAX_FAILURE_ROWS` rows, and
counters whose window has ended are deleted (at most once per `PRUNE_INTERVAL_SECONDS` per process).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from catalog.settings import Settings
from catalog.store.interfaces import SecurityStore

LOCKDOWN_FACTOR = 10
MAX_FAILURE_ROWS = 10_000
PRUNE_INTERVAL_SECONDS = 10.0
# IPv6 text is at most 45 characters; the counter key column is 128.
_MAX_SOURCE_CHARS = 48


@dataclass(frozen=True, slots=True)
class FailureKeys:
    """The counters a token request of one client id from one source address touches."""

    pair: str
    client: str
    source: str


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class KeyedLocks:
    """An asyncio lock per name, kept only while someone holds or awaits it (names come from requests)."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        held = self._held.setdefault(name, _Held())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if held.users == 0:
                del self._held[name]


class FailureLimits:
    """The token endpoint's failure counters and limits (see the module docstring)."""

    def __init__(self, store: SecurityStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.window = timedelta(seconds=settings.auth_failure_window_seconds)
        self._pruned_at = time.monotonic()

    @staticmethod
    def keys(client_id: str, source: str) -> FailureKeys:
        source = source[:_MAX_SOURCE_CHARS]
        # The address first: it has no space, so no client id can make two pairs' keys equal (and
        # PostgreSQL text cannot hold the NUL a separator would otherwise be).
        return FailureKeys(f"pair:{source} {client_id}", f"client:{client_id}", f"source:{source}")

    def pair_refused(self, keys: FailureKeys, counts: dict[str, int]) -> bool:
        """Whether the source is over its limit for this client id: refused without a check."""
        limit = self.settings.auth_failure_limit
        if counts.get(keys.client, 0) >= LOCKDOWN_FACTOR * limit:
            limit = 1
        return counts.get(keys.pair, 0) >= limit

    def source_over(self, keys: FailureKeys, counts: dict[str, int]) -> bool:
        return counts.get(keys.source, 0) >= self.settings.auth_source_failure_limit

    async def record(self, keys: FailureKeys, counts: dict[str, int], *, known: bool) -> bool:
        """Count a failed request (`known`: its client id names a key); whether its source is over its
        limit (the answer is then 429)."""
        source_over = self.source_over(keys, counts)
        counted: list[str] = []
        capped: list[str] = []
        if known:  # always: this is what bounds guessing a secret
            counted += [keys.pair, keys.client]
        elif not source_over:  # answered like a known id's, while the table has room
            counted.append(keys.pair)
            capped.append(keys.pair)
        if not source_over:  # over its limit it stays there until its window ends
            counted.append(keys.source)
            capped.append(keys.source)
        if counted:  # junk from a source over its limit costs no write
            await self.store.record_auth_failure(
                counted, self.window, capped=capped, max_rows=MAX_FAILURE_ROWS
            )
            await self._prune()
        return source_over

    async def record_source(self, source: str) -> bool:
        """Count a failure of the source alone (a client id no key can have); whether it is over."""
        keys = self.keys("", source)
        counts = await self.store.auth_failure_counts([keys.source], self.window)
        if self.source_over(keys, counts):
            return True
        await self.store.record_auth_failure(
            [keys.source], self.window, capped=[keys.source], max_rows=MAX_FAILURE_ROWS
        )
        await self._prune()
        return False

    async def _prune(self) -> None:
        now = time.monotonic()
        if now - self._pruned_at < min(PRUNE_INTERVAL_SECONDS, self.window.total_seconds()):
            return
        self._pruned_at = now
        await self.store.prune_auth_failures(self.window)
