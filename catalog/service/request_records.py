"""What the HTTP layer hands a mutation's own database transaction: the request's audit entry and its
`Idempotency-Key` claim (request-scoped, like the request id).

A table commit writes both in its transaction (`CommitRecords`), so a change is never without its
entry, and a crash after the commit leaves the key `landed`: the retry is answered from what the commit
wrote (`landed_locations`). Other mutations are audited by `catalog.api.audit.audit_step` before
their answer, which it withholds when the entry cannot be written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from catalog.errors import BadRequest
from catalog.service.idempotency import Claimed
from catalog.store.commit_records import CommitRecords, IdempotencyLanding
from catalog.store.security import AuditEntry


@dataclass(slots=True)
class RequestRecords:
    """One mutation's audit entry (built for an answer's status) and idempotency claim."""

    audit_entry: Callable[[int], AuditEntry] | None = None
    # The status the route answers when its change lands: what the in-transaction entry records.
    success_status: int = 200
    claim: Claimed | None = None
    # Set when the change's transaction stored the audit entry (for an answer with this status).
    audited_status: int | None = None

    def for_commit(self, locations: Sequence[str | None]) -> CommitRecords:
        """The records of a commit whose answer is the tables at `locations`."""
        audit = self.audit_entry(self.success_status) if self.audit_entry is not None else None
        landing = None
        if self.claim is not None and self.claim.landed is None:
            reference = json.dumps(list(locations))
            landing = IdempotencyLanding(self.claim.stored_key, self.claim.owner, reference)
        return CommitRecords(audit, landing)

    def committed(self, records: CommitRecords) -> None:
        """The change landed with `records`."""
        if records.audit is not None:
            self.audited_status = records.audit.status_code

    def landed_locations(self, count: int) -> list[str] | None:
        """The metadata locations an earlier attempt of this request committed (None: it did not),
        for a request of `count` tables."""
        if self.claim is None or self.claim.landed is None:
            return None
        locations = json.loads(self.claim.landed)
        if not isinstance(locations, list) or len(locations) != count:
            raise BadRequest("Idempotency-Key was already used for a different request")
        return [str(location) for location in locations]


REQUEST_RECORDS: ContextVar[RequestRecords | None] = ContextVar("floe_request_records", default=None)


def request_records() -> RequestRecords | None:
    """The current request's records (None outside an audited request)."""
    return REQUEST_RECORDS.get()
