"""`floe apply` on the server: validate a floe.yaml, plan it against the catalog, apply it, store it.

Applying ensures the warehouse (from `destination_bucket_url`, else the named or default one) and each
source cluster as a floe cluster (with its namespace), creates or evolves every table and its dead-letter
table in ONE multi-table commit through the table commit path (all land or none does), then stores the
normalized configuration as a new revision: the desired state the ingestion service reads. Tables
removed from the configuration are kept with their data, only no longer ingested.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from dataclasses import dataclass, replace
from typing import Any

from cachetools import LRUCache
from pyiceberg.table.metadata import TableMetadata

from catalog import commit as core
from catalog.auth import Principal, authorize_pipeline_read, require_admin
from catalog.errors import AlreadyExists, NotFound, ServiceUnavailable
from catalog.events import EventBus, PipelineApplied
from catalog.identifiers import Namespace, TableIdent
from catalog.pipelines import (
    ConfigError,
    InvalidConfig,
    PipelineConfig,
    PipelinePlan,
    parse_config,
    plan_pipeline,
)
from catalog.pipelines.evolution import table_names
from catalog.pipelines.sources import strip_userinfo
from catalog.service.keys import visible_principals
from catalog.service.metadata_models import MetadataModels
from catalog.service.table_model import TableChange, parse_change
from catalog.service.tables import TableService
from catalog.settings import Settings
from catalog.store import CatalogStore, WarehouseRecord
from catalog.store.pipelines import PipelineRevisionRecord

log = logging.getLogger(__name__)

# Parsed revisions by store (one per app) and (revision, applied at, cluster seen by): every `floe ingest`
# reads the configuration every few seconds, and validating a thousand tables' configuration took
# a quarter of the catalog's CPU at a thousand tables. A revision is never changed once stored.
_PARSED_REVISIONS = 16
_parsed: weakref.WeakKeyDictionary[object, LRUCache[tuple[Any, ...], tuple[PipelineConfig, dict[str, Any]]]]
_parsed = weakref.WeakKeyDictionary()

# Only these of the server's default-warehouse settings carry over to a bucket named in floe.yaml
# (endpoint and keys of an S3-compatible store); an STS role is scoped to its own bucket.
_INHERITED_S3_PROPERTIES = (
    "s3.endpoint",
    "s3.client-endpoint",
    "s3.region",
    "s3.path-style-access",
    "s3.access-key-id",
    "s3.secret-access-key",
)


@dataclass(frozen=True, slots=True)
class WarehouseChoice:
    """Where a configuration's tables live: an existing warehouse, or one to create from the bucket URL."""

    name: str
    record: WarehouseRecord | None
    location: str
    properties: dict[str, str]
    create: bool


@dataclass(frozen=True, slots=True)
class ApplyResult:
    revision: int | None
    warehouse: str
    plan: PipelinePlan
    dry_run: bool
    applied: bool


@dataclass(frozen=True, slots=True)
class PipelineState:
    record: PipelineRevisionRecord
    config: PipelineConfig


class PipelineService:
    """`floe apply` over the store, the settings (the default warehouse), the table service's commit
    path (the one multi-table commit) and the bus told of applied revisions."""

    def __init__(
        self,
        store: CatalogStore,
        settings: Settings,
        events: EventBus,
        tables: TableService,
        metadata_models: MetadataModels,
    ) -> None:
        self.store = store
        self.settings = settings
        self.events = events
        self.tables = tables
        self.metadata_models = metadata_models

    async def current(self, principal: Principal) -> PipelineState:
        """The applied configuration (a cluster key sees only its cluster's part)."""
        authorize_pipeline_read(principal)
        record = await self.store.latest_pipeline_revision()
        if record is None:
            raise NotFound("No pipeline configuration has been applied yet: run floe apply -f floe.yaml")
        try:
            return (await self._as_seen_by(principal, [record]))[0]
        except InvalidConfig:
            if principal.is_admin:
                raise
            # Its errors would quote other clusters' parts of it.
            raise ServiceUnavailable(
                f"The applied pipeline configuration (revision {record.revision}) no longer validates: "
                "an administrator must apply it again"
            ) from None

    async def history(self, principal: Principal, limit: int = 50) -> list[PipelineState]:
        """Applied revisions newest first, each as `current` shows it (a cluster key: its cluster's
        part); revisions that no longer validate (stored by an older floe) are left out."""
        authorize_pipeline_read(principal)
        records = await self.store.list_pipeline_revisions(limit=limit)
        return await self._as_seen_by(principal, records, skip_invalid=True)

    async def _as_seen_by(
        self, principal: Principal, records: list[PipelineRevisionRecord], *, skip_invalid: bool = False
    ) -> list[PipelineState]:
        """Revisions as `principal` may see them: a cluster key gets its cluster's part, and who applied
        them only when that is a key of its cluster (global administrators apply: "operator")."""
        names = await visible_principals(self.store, principal, {r.applied_by for r in records})
        states = []
        cache = self._parsed_revisions()
        cluster = None if principal.is_admin else principal.cluster
        assert principal.is_admin or cluster is not None  # authorize_pipeline_read let it in
        for record in records:
            key = (record.revision, record.applied_at, record.warehouse, cluster)
            cached = cache.get(key)
            if cached is None:
                try:
                    config = parse_stored_config(record.config)
                except InvalidConfig as exc:
                    if not skip_invalid:
                        raise
                    log.warning("pipeline revision %d no longer validates: %s", record.revision, exc)
                    continue
                if cluster is not None:
                    config = config.for_cluster(cluster)
                cached = cache[key] = (config, config.to_json())
            config, shown_config = cached
            # The record itself leaves with the redacted applier and the shown part of the config only.
            shown = replace(record, applied_by=names[record.applied_by], config=shown_config, plan=[])
            states.append(PipelineState(shown, config))
        return states

    def _parsed_revisions(self) -> LRUCache[tuple[Any, ...], tuple[PipelineConfig, dict[str, Any]]]:
        """Parsed revisions by (revision, applied at, warehouse, cluster seeing it), one cache per store."""
        return _parsed.setdefault(self.store, LRUCache(maxsize=_PARSED_REVISIONS))

    def _previous_config(self, previous: PipelineRevisionRecord | None) -> PipelineConfig | None:
        """The applied revision's configuration, parsed once per revision as `current` parses it (the
        same cache: ingestion's reads of a thousand-table revision parsed it already)."""
        if previous is None:
            return None
        cache = self._parsed_revisions()
        key = (previous.revision, previous.applied_at, previous.warehouse, None)
        cached = cache.get(key)
        if cached is not None:
            return cached[0]
        try:
            config = parse_stored_config(previous.config)
        except InvalidConfig as exc:  # stored by an older floe with other rules: no removed-table report
            log.warning("the stored pipeline revision %d no longer validates: %s", previous.revision, exc)
            return None
        cache[key] = (config, config.to_json())
        return config

    async def apply(self, principal: Principal, raw_config: Any, *, dry_run: bool) -> ApplyResult:
        """Validate, plan and (unless `dry_run`) apply; `InvalidConfig` lists every refused change."""
        require_admin(principal, "apply a pipeline configuration")
        config = parse_config(raw_config)
        store = self.store
        previous = await store.latest_pipeline_revision()
        previous_config = self._previous_config(previous)
        errors: list[ConfigError] = []
        warehouse = await self._choose_warehouse(config, errors)
        await self._check_clusters(config, warehouse.name, errors)
        current = await self._current_tables(config, warehouse.record, errors)
        try:
            plan = plan_pipeline(config, current, previous_config)
        except InvalidConfig as exc:
            errors.extend(exc.errors)
        if errors:
            raise InvalidConfig(errors)
        normalized = config.to_json()
        revision = previous.revision if previous is not None else None
        unchanged = (
            previous is not None
            and previous.config == normalized
            and previous.warehouse == warehouse.name
            and not plan.commits
        )
        if dry_run or unchanged:
            return ApplyResult(revision, warehouse.name, plan, dry_run, applied=False)
        record = await self._ensure_warehouse(warehouse)
        await self._ensure_clusters(config, record)
        if plan.commits:
            changes: list[TableChange] = [
                parse_change(
                    {"requirements": list(t.requirements), "updates": list(t.updates)},
                    TableIdent(Namespace.of([t.namespace]), t.table),
                )
                for t in plan.commits
            ]
            await self.tables.commit_all(principal, record.name, changes)
        stored = await store.add_pipeline_revision(
            after=revision or 0,
            warehouse=record.name,
            config=normalized,
            plan=plan.to_json(),
            applied_by=principal.subject,
        )
        if strip_userinfo(normalized) == normalized:  # what `current` parses from it: the same config
            cache = self._parsed_revisions()
            cache[(stored.revision, stored.applied_at, stored.warehouse, None)] = (config, normalized)
        before = previous.config if previous is not None else {}
        changed = frozenset(
            k for k in before.keys() | normalized.keys() if before.get(k) != normalized.get(k)
        )
        await self.events.publish(PipelineApplied(stored.revision, record.name, changed))
        log.info(
            "pipeline revision %d applied by %s: %d tables created or evolved",
            stored.revision,
            principal.subject,
            len(plan.commits),
        )
        return ApplyResult(stored.revision, record.name, plan, dry_run=False, applied=True)

    # -- planning ---------------------------------------------------------------------------------

    async def _choose_warehouse(self, config: PipelineConfig, errors: list[ConfigError]) -> WarehouseChoice:
        store, settings = self.store, self.settings
        if config.destination is not None:
            destination = config.destination
            name = destination.warehouse_name
            existing = await store.get_warehouse(name)
            properties: dict[str, str] = {}
            if destination.scheme == "s3" and settings.warehouse_location.startswith("s3://"):
                properties = {
                    k: v for k, v in settings.warehouse_properties.items() if k in _INHERITED_S3_PROPERTIES
                }
            inherited_endpoint = properties.get("s3.endpoint")
            properties.update(destination.storage_properties())
            if properties.get("s3.endpoint") != inherited_endpoint:
                # The server's client endpoint is another address of the server's endpoint only.
                properties.pop("s3.client-endpoint", None)
            if existing is not None and existing.location.rstrip("/") != destination.location:
                errors.append(
                    ConfigError(
                        "destination_bucket_url",
                        f"warehouse {name!r} already exists at {existing.location}, not at "
                        f"{destination.location}",
                    )
                )
            create = existing is None or (
                existing.location.rstrip("/") == destination.location
                and any(existing.properties.get(k) != v for k, v in properties.items())
            )
            return WarehouseChoice(name, existing, destination.location, properties, create)
        name = config.warehouse or settings.warehouse_name
        existing = await store.get_warehouse(name)
        if existing is None:
            errors.append(
                ConfigError(
                    "warehouse",
                    f"warehouse {name!r} does not exist (create it with floe warehouses create, or set "
                    "destination_bucket_url)",
                )
            )
            return WarehouseChoice(name, None, "", {}, create=False)
        return WarehouseChoice(name, existing, existing.location, existing.properties, create=False)

    async def _check_clusters(
        self, config: PipelineConfig, warehouse: str, errors: list[ConfigError]
    ) -> None:
        existing = {c.name: c for c in await self.store.list_clusters()}
        for cluster in config.source_clusters:
            found = existing.get(cluster.name)
            if found is not None and found.warehouse != warehouse:
                errors.append(
                    ConfigError(
                        f"{cluster.path}.name",
                        f"cluster {cluster.name!r} already exists with its tables in warehouse "
                        f"{found.warehouse!r}; this configuration puts its tables in {warehouse!r}",
                    )
                )

    async def _current_tables(
        self, config: PipelineConfig, warehouse: WarehouseRecord | None, errors: list[ConfigError]
    ) -> dict[tuple[str, str], TableMetadata]:
        """The current metadata of every configured table that exists (none when the warehouse does not):
        one read for all of them, each model from the commit path's cache when it holds it (an apply of
        a thousand tables read and parsed them one at a time)."""
        current: dict[tuple[str, str], TableMetadata] = {}
        if warehouse is None:
            return current
        targets = table_names(config)
        records = await self.store.get_tabulars(warehouse.id, [(t.namespace, t.name) for t in targets])
        for target in targets:
            record = records.get((target.namespace, target.name))
            if record is None:
                continue
            if record.kind != "table":
                errors.append(
                    ConfigError(
                        f"{target.table_path}.source_topic",
                        f"{target.namespace}.{target.name} is a view; the topic's "
                        f"{'table' if target.kind == 'data' else 'dead-letter table'} needs that name",
                    )
                )
                continue
            current[(target.namespace, target.name)] = self.metadata_models.get(
                record.metadata_location
            ) or core.parse_table_metadata(record.metadata_json)
        return current

    # -- applying ---------------------------------------------------------------------------------

    async def _ensure_warehouse(self, choice: WarehouseChoice) -> WarehouseRecord:
        if choice.record is not None and not choice.create:
            return choice.record
        record = await self.store.upsert_warehouse(choice.name, choice.location, choice.properties)
        log.info("warehouse %s at %s for the pipeline", record.name, record.location)
        return record

    async def _ensure_clusters(self, config: PipelineConfig, warehouse: WarehouseRecord) -> None:
        store = self.store
        existing = {c.name for c in await store.list_clusters()}
        for cluster in config.source_clusters:
            if cluster.name not in existing:
                with contextlib.suppress(AlreadyExists):  # created by a concurrent apply
                    await store.create_cluster(
                        cluster.name, warehouse.id, {"floe.bootstrap.servers": cluster.bootstrap_servers}
                    )
                    log.info("cluster %s created for the pipeline", cluster.name)
            # The cluster's namespace may have been dropped since the cluster was created.
            if await store.get_namespace(warehouse.id, cluster.name) is None:
                with contextlib.suppress(AlreadyExists):
                    await store.create_namespace(warehouse.id, cluster.name, {"floe.cluster": cluster.name})


def parse_stored_config(stored: dict[str, Any]) -> PipelineConfig:
    """A stored revision's configuration, without the `user:password@` of any URL in it (older floe
    stored them; they are shown to no one)."""
    return parse_config(strip_userinfo(stored))
