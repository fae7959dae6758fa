"""`--shard auto` of `floe ingest` and `floe maintain`: instances that divide the tables among themselves
through leases held in floe.

Each instance holds a lease in its group (`PUT /management/v1/leases/{group}/{member}`) and renews it
every third of its lifetime; each renewal answers the group's live instances, and an instance takes the
tables `runtime.shards.owner_of` gives it among them. A killed instance stops renewing: once its lease
runs out (`DEFAULT_TTL_SECONDS` on the catalog's clock), the others' next renewal no longer names it
and they take its tables over (ingestion at its next reconcile, from the offsets floe committed). A new
instance takes its share the same way. While views differ (for at most a renewal interval), two
ingestion instances may both open a table: the catalog's offsets fence lets only one of them commit
each batch, and the other re-reads from floe's offsets (two maintainers would both visit a table: its
commits are checked as any concurrent writer's).

An instance whose renewals have failed for a whole lifetime (floe unreachable from it) takes no table:
the others, which can still reach floe, have taken its tables over by then. Groups are named by what
the instances do (`group_name`) and are the key's own (floe keeps another key's apart). This module talks
to floe through the two functions it is given (runtime imports nothing of the catalog).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from runtime.shards import owner_of

# (group, member, ttl seconds) → the group's live members; raises when floe does not answer.
Renew = Callable[[str, str, float], Sequence[str]]
# (group, member): end the lease now.
End = Callable[[str, str], None]

log = logging.getLogger(__name__)
DEFAULT_TTL_SECONDS = 15.0
# Renewals a lifetime: one lost renewal (a slow catalog) does not end the lease.
RENEWALS_PER_TTL = 3
_NOT_NAME = re.compile(r"[^A-Za-z0-9._:-]+")


def group_name(role: str, filters: Iterable[str] = ()) -> str:
    """The group of the instances doing `role` (`ingest`, `maintain`) with the same filters (say
    `--cluster`s; none: everything): instances that take different tables never divide each other's."""
    chosen = sorted(filters)
    if not chosen:
        return f"{role}-all"
    return f"{role}-" + hashlib.sha256("\n".join(chosen).encode()).hexdigest()[:16]


def member_name() -> str:
    """This instance's name: host, process and a random part (a restarted process is a new member)."""
    host = _NOT_NAME.sub("-", socket.gethostname()).strip("-._:")[:80] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


class Lease:
    """This instance's lease in its group, renewed on a thread of its own, and the tables it owns."""

    def __init__(
        self,
        renew: Renew,
        end: End,
        group: str,
        member: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        on_members: Callable[[int], None] = lambda _count: None,
    ) -> None:
        self._renew = renew
        self._end = end
        self.on_members = on_members
        self.group = group
        self.member = member or member_name()
        self.ttl_seconds = ttl_seconds
        self._members: tuple[str, ...] = ()
        self._renewed_at: float | None = None  # monotonic time of the last renewal answered
        self._failing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def members(self) -> tuple[str, ...]:
        """The live members as the catalog last answered; none once renewals failed for a lifetime."""
        renewed = self._renewed_at
        if renewed is None or time.monotonic() - renewed > self.ttl_seconds:
            return ()
        return self._members

    def owns(self, table: str) -> bool:
        """Whether the table of dotted name `table` is this instance's (to ingest or maintain)."""
        members = self.members
        return self.member in members and owner_of(table, members) == self.member

    def renew(self) -> bool:
        """Renew the lease now; False (logged once per run of failures) when the catalog did not answer."""
        asked_at = time.monotonic()
        try:
            members = tuple(self._renew(self.group, self.member, self.ttl_seconds))
        except Exception as exc:  # floe unreachable or refusing: the lease runs out, the tables go
            if not self._failing:
                log.warning("cannot renew this instance's lease in %s (retrying): %s", self.group, exc)
            self._failing = True
            return False
        if self._failing:
            log.info("lease in %s renewed again", self.group)
        self._failing = False
        self._answered(members, asked_at)
        return True

    def _answered(self, members: tuple[str, ...], asked_at: float) -> None:
        """Take a renewal's answer: the live members, as of when it was asked (the lease runs from
        then on the catalog's clock, so this instance gives its tables up no later than the others
        take them)."""
        if members != self._members:
            log.info("group %s: %d live instance(s): %s", self.group, len(members), ", ".join(members))
        self._members, self._renewed_at = members, asked_at
        self.on_members(len(members))

    def start(self) -> None:
        """Take the lease (a refusal, say a reader key, raises) and keep renewing it."""
        asked_at = time.monotonic()
        self._answered(tuple(self._renew(self.group, self.member, self.ttl_seconds)), asked_at)
        log.info("joined %s as %s", self.group, self.member)
        self._thread = threading.Thread(target=self._run, name="floe-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_seconds / RENEWALS_PER_TTL):
            self.renew()

    def stop(self) -> None:
        """Stop renewing and end the lease, so the others take the tables over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ttl_seconds)
        try:
            self._end(self.group, self.member)
        except Exception as exc:  # the lease runs out by itself
            log.warning("could not end this instance's lease (it runs out by itself): %s", exc)


__all__ = ["DEFAULT_TTL_SECONDS", "Lease", "group_name", "member_name"]
