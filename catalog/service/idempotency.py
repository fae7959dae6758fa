"""`Idempotency-Key`: the rules behind `catalog.api.middleware.idempotency_step`.

- Keys belong to the caller: the stored key is sha256(subject, cluster, key), so callers never replay,
  block or collide with each other's keys; only the same caller reusing a key for another request is
  refused.
- The first final response (2xx, 4xx) is stored and replayed; 5xx responses are not finalized, so the
  client may retry them. A response that carries a secret is stored as its status only (`withheld`).
- A pending key is held under a lease of `IDEMPOTENCY_LEASE_SECONDS` that its request renews while it
  runs; when the owner dies, one waiting retry takes the key over once the lease runs out.
- A table commit marks its key `landed` in the commit's own transaction (`catalog.store.commit_records`),
  so a retry after a crash between the commit and the answer takes the key over `landed`: the commit
  is answered from what it wrote, never applied again (`catalog.service.request_records`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from catalog.store.interfaces import IdempotencyStore

log = logging.getLogger("floe.access")

# How long a second request waits for the first one with the same key to finish.
IDEMPOTENCY_WAIT_SECONDS = 30.0
# A pending key's lease: renewed every quarter of it while its request runs, so a crashed owner's key
# is taken over within this long, and a live owner would have to stall for 3/4 of it to lose it.
# Leases are compared with each server's own clock: servers sharing a database keep theirs in sync (NTP).
IDEMPOTENCY_LEASE_SECONDS = 5.0
LEASE = timedelta(seconds=IDEMPOTENCY_LEASE_SECONDS)
# Who holds a pending key (for whoever looks at the table after a crash): host and process.
_INSTANCE = f"{socket.gethostname()[:24]}:{os.getpid()}"


def idempotency_identity(
    subject: str, cluster: str | None, key: str, method: str, raw_path: bytes
) -> tuple[str, str]:
    """The stored key and the request fingerprint: both bound to the caller, so one caller's key is
    never another's (and a crash test can write the row a dead owner would leave)."""
    caller = f"{subject}\x1f{cluster or ''}"
    stored_key = hashlib.sha256(f"{caller}\x1f{key}".encode()).hexdigest()
    fingerprint = hashlib.sha256(f"{caller} {method} {raw_path!r}".encode()).hexdigest()
    return stored_key, fingerprint


@dataclass(frozen=True, slots=True)
class Claimed:
    """This request owns the key: run it, then `finish` (or `release`). `landed`: an earlier attempt's
    change committed, and this is what its answer is rebuilt from."""

    stored_key: str
    owner: str
    landed: str | None = None


@dataclass(frozen=True, slots=True)
class UsedForOtherRequest:
    """The caller used the key for a different request."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The earlier request's stored final response."""

    status_code: int
    body: str
    content_type: str | None


@dataclass(frozen=True, slots=True)
class SecretWithheld:
    """The earlier request succeeded with a response holding a secret, which is never stored."""

    status_code: int


@dataclass(frozen=True, slots=True)
class StillRunning:
    """The earlier request is still running after `IDEMPOTENCY_WAIT_SECONDS`."""


ClaimOutcome = Claimed | UsedForOtherRequest | Replay | SecretWithheld | StillRunning


class IdempotencyService:
    def __init__(self, store: IdempotencyStore, lifetime_seconds: int) -> None:
        self.store = store
        self.lifetime_seconds = lifetime_seconds

    async def claim(self, stored_key: str, fingerprint: str) -> ClaimOutcome:
        """Claim the key for this request, waiting while an earlier one with the same key runs."""
        owner = f"{_INSTANCE}/{uuid.uuid4().hex[:16]}"
        deadline = time.monotonic() + IDEMPOTENCY_WAIT_SECONDS
        while True:
            earlier = await self.store.claim_idempotency_key(stored_key, fingerprint, owner, LEASE)
            if earlier is None:
                return Claimed(stored_key, owner)
            state, row = earlier
            if row is not None and row.fingerprint != fingerprint:
                return UsedForOtherRequest()
            if state == "taken" and row is not None:
                return Claimed(stored_key, owner, row.response_body or "")
            if state == "done" and row is not None:
                return Replay(row.status_code or 0, row.response_body or "", row.content_type)
            if state == "withheld" and row is not None:
                return SecretWithheld(row.status_code or 0)
            if time.monotonic() > deadline:
                return StillRunning()
            await asyncio.sleep(0.05)

    async def keep_lease(self, claim: Claimed, stop: asyncio.Event) -> None:
        """Keep the owner's lease ahead while its request runs (stopped, not cancelled, so that no
        database write is cut off half way)."""
        while True:
            try:
                await asyncio.wait_for(stop.wait(), IDEMPOTENCY_LEASE_SECONDS / 4)
                return
            except TimeoutError:
                pass
            try:
                if not await self.store.renew_idempotency_lease(claim.stored_key, claim.owner, LEASE):
                    log.warning("idempotency key lease lost to a retry while its request still runs")
                    return
            except Exception:  # the request itself will meet the same database trouble
                log.warning("could not renew an idempotency key lease", exc_info=True)

    async def release(self, claim: Claimed) -> None:
        """Forget the claim: the request failed before a final answer, a retry may run it again."""
        await self.store.release_idempotency_key(claim.stored_key, claim.owner)

    async def finish(
        self, claim: Claimed, status: int, body: bytes, content_type: str, *, carries_secret: bool
    ) -> None:
        """Store the request's outcome: 5xx releases the key, a secret is withheld, else the response
        is kept for replay."""
        if status >= 500:
            await self.release(claim)
        elif carries_secret:
            await self.store.finish_idempotency_key(
                claim.stored_key, claim.owner, "withheld", status, None, content_type
            )
        else:
            text = body.decode("utf-8", "replace")
            await self.store.finish_idempotency_key(
                claim.stored_key, claim.owner, "done", status, text, content_type
            )
        if uuid.uuid4().int % 200 == 0:  # now and then, forget keys past their advertised lifetime
            await self.store.expire_idempotency_keys(timedelta(seconds=2 * self.lifetime_seconds))
