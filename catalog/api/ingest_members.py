"""`/management/v1/ingest/groups/{group}/members/{member}`: leases of `floe ingest --shard auto`
instances (`catalog/service/ingest_members.py` holds the rules)."""

from __future__ import annotations

from litestar import Controller, delete, put

from catalog.api.guards import lease_holders_only
from catalog.auth import Principal
from catalog.service.ingest_members import IngestMemberService
from catalog.wire import IngestMembers, RenewIngestMember


class RenewIngestMemberRequest(RenewIngestMember, frozen=True):
    # No docstring: the body's own would become the schema's description.
    pass


class IngestMemberController(Controller):
    path = "/management/v1/ingest/groups/{group:str}/members/{member:str}"
    tags = ["Management API"]
    guards = [lease_holders_only]

    @put("/", operation_id="renewIngestMember", status_code=200)
    async def renew(
        self,
        group: str,
        member: str,
        principal: Principal,
        ingest_members: IngestMemberService,
        data: RenewIngestMemberRequest,
    ) -> IngestMembers:
        """Hold (or renew) this ingestion instance's lease in the group for `ttl-seconds`, and answer
        the group's live instances: `floe ingest --shard auto` divides the tables among them. A group
        is the calling key's own; writer and admin keys may hold leases (256 live ones a key)."""
        return await ingest_members.renew(principal, group, member, data.ttl_seconds)

    @delete("/", operation_id="endIngestMember", status_code=204)
    async def end(
        self, group: str, member: str, principal: Principal, ingest_members: IngestMemberService
    ) -> None:
        """End this instance's lease now (a clean shutdown): the others take its tables over at their
        next renewal instead of after the lease runs out."""
        await ingest_members.leave(principal, group, member)
