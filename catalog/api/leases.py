"""`/management/v1/leases/{group}/{member}`: leases of `--shard auto` instances of `floe ingest` and
`floe maintain` (`catalog/service/leases.py` holds the rules)."""

from __future__ import annotations

from litestar import Controller, delete, put

from catalog.api.guards import lease_holders_only
from catalog.auth import Principal
from catalog.service.leases import LeaseService
from catalog.wire import LeaseGroup, RenewLease


class RenewLeaseRequest(RenewLease, frozen=True):
    # No docstring: the body's own would become the schema's description.
    pass


class LeaseController(Controller):
    path = "/management/v1/leases/{group:str}/{member:str}"
    tags = ["Management API"]
    guards = [lease_holders_only]

    @put("/", operation_id="renewLease", status_code=200)
    async def renew(
        self,
        group: str,
        member: str,
        principal: Principal,
        leases: LeaseService,
        data: RenewLeaseRequest,
    ) -> LeaseGroup:
        """Hold (or renew) this instance's lease in the group for `ttl-seconds`, and answer the group's
        live instances: `floe ingest --shard auto` and `floe maintain --shard auto` divide the tables
        among them. A group is the calling key's own; writer and admin keys may hold leases (256 live
        ones a key)."""
        return await leases.renew(principal, group, member, data.ttl_seconds)

    @delete("/", operation_id="endLease", status_code=204)
    async def end(self, group: str, member: str, principal: Principal, leases: LeaseService) -> None:
        """End this instance's lease now (a clean shutdown): the others take its tables over at their
        next renewal instead of after the lease runs out."""
        await leases.leave(principal, group, member)
