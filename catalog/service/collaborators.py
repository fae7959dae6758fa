"""What each catalog service is given: the repositories, caches and policies it uses, and nothing else.

One process-wide object (`CatalogContext`) provides them all; each service declares its own narrow view
of it here, so mypy refuses a service that reaches for anything else, and a test can hand a service a
small object of its own. Read these to see what a service depends on.
"""

from __future__ import annotations

from typing import Any, Protocol

from catalog.auth import Principal
from catalog.events import EventBus
from catalog.identifiers import Namespace
from catalog.security.vending import CredentialVendor
from catalog.service.commit_loop import CommitLoop
from catalog.service.listing_cache import Listing
from catalog.service.load_cache import LoadCache
from catalog.service.metadata_models import MetadataModels
from catalog.service.shared_reads import SharedReads
from catalog.service.tabulars import Tabulars
from catalog.settings import Settings
from catalog.storage import Storage
from catalog.store import CatalogStore, TabularKind, WarehouseRecord


class CatalogCollaborators(Protocol):
    """The namespace and watermark services': the store, the settings (limits, quotas), the spec's
    lookups and the cached warehouse of a `prefix`."""

    store: CatalogStore
    settings: Settings
    tabulars: Tabulars

    async def warehouse(self, name: str) -> WarehouseRecord: ...


class ViewCollaborators(CatalogCollaborators, Protocol):
    """The view service's: besides `CatalogCollaborators`, the cached listings, confined storage in
    the caller's share of the storage pool, and the commit loop."""

    commits: CommitLoop

    async def listing(
        self,
        warehouse: WarehouseRecord,
        namespace: Namespace,
        kind: TabularKind,
        page_token: str | None,
        page_size: int | None,
    ) -> Listing: ...

    def storage(self, warehouse: WarehouseRecord, root: str) -> Storage: ...

    async def run_storage(
        self, warehouse: WarehouseRecord, principal: Principal, func: Any, *args: Any
    ) -> Any: ...


class TableCommitCollaborators(ViewCollaborators, Protocol):
    """The table commit path's: besides the view service's, the committed metadata models (the next
    commit's base) and the bus that tells subscribers of committed changes."""

    events: EventBus
    metadata_models: MetadataModels


class TableCollaborators(TableCommitCollaborators, Protocol):
    """The table service's: besides the commit path's, the loadTable caches and the credential vendor."""

    vendor: CredentialVendor
    load_cache: LoadCache
    table_locations: SharedReads[tuple[str, str, str], tuple[str, str | None] | None]
