"""Immutable records the store hands to the service layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from catalog.kafka_offsets import KafkaProgress

TabularKind = Literal["table", "view"]


@dataclass(frozen=True, slots=True)
class WarehouseRecord:
    id: str
    name: str
    location: str
    properties: dict[str, str]


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    id: str
    warehouse_id: str
    key: str
    properties: dict[str, str]


@dataclass(frozen=True, slots=True)
class TabularRecord:
    id: str
    namespace_id: str
    namespace_key: str
    name: str
    kind: TabularKind
    metadata_location: str | None
    metadata_json: str
    version: int


@dataclass(frozen=True, slots=True)
class DroppedTabular:
    """A table or view as it was when its row was deleted."""

    metadata_location: str | None
    metadata_json: str
    managed_location: str | None


@dataclass(frozen=True, slots=True)
class ClusterQuota:
    """The most namespaces, tables or views (by what is created) the cluster `root` of a warehouse may
    hold; `variable` is the setting that says so (named in the error)."""

    warehouse_id: str
    root: str
    limit: int
    variable: str


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """One pointer swap of a commit: `tabular_id` None means create in `namespace_id`."""

    tabular_id: str | None
    expected_version: int
    metadata_location: str
    metadata_json: str
    namespace_id: str = ""
    name: str = ""
    kind: TabularKind = "table"
    # Kafka offsets this commit advances the table to (ingestion commits only).
    kafka: KafkaProgress | None = None
    # Creates only: the catalog-assigned folder of a new table (canonical), None for a chosen location.
    managed_location: str | None = None
    # Creates only: the quota of the new table's or view's cluster, counted in the swap's transaction.
    quota: ClusterQuota | None = None
