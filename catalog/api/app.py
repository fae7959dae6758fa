"""The ASGI application: Litestar controllers, dependencies, error mapping and middleware."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio.to_thread
from litestar import Litestar, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Tag

from catalog.api.config import get_config, healthz, metrics, readyz
from catalog.api.dependencies import (
    provide_audit,
    provide_auth,
    provide_clusters,
    provide_keys,
    provide_leases,
    provide_maintenance,
    provide_namespaces,
    provide_pipelines,
    provide_principal,
    provide_settings,
    provide_tables,
    provide_views,
    provide_warehouses,
    provide_watermarks,
)
from catalog.api.errors import EXCEPTION_HANDLERS
from catalog.api.kafka_offsets import KafkaOffsetsController, SnapshotAtController
from catalog.api.leases import LeaseController
from catalog.api.maintenance import MaintenanceController
from catalog.api.management import ManagementController
from catalog.api.namespaces import NamespaceController
from catalog.api.oauth import get_token
from catalog.api.pipeline import RequestPipeline
from catalog.api.pipelines import PipelineController
from catalog.api.requests import FloeRequest
from catalog.api.tables import TableController, TableOperationsController
from catalog.api.views import ViewController, ViewOperationsController
from catalog.api.watermarks import WatermarkController
from catalog.collector import full_collection_pauses, keep_full_collections_short
from catalog.migrations import upgrade_database
from catalog.service.commit_events import CommitEventPublisher
from catalog.service.components import CatalogComponents
from catalog.service.glue import ConfiguredGlueTarget, GluePublisher
from catalog.service.ingest_history import IngestHistory
from catalog.service.security import AuthService
from catalog.settings import Settings
from catalog.store import create_store

log = logging.getLogger(__name__)

VERSION = "0.1.0"


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="floe Iceberg REST catalog",
        version=VERSION,
        description="The Apache Iceberg REST catalog API as served by floe.",
        tags=[Tag(name="Configuration API"), Tag(name="Catalog API")],
        use_handler_docstrings=True,
        path="/openapi",
    )


def build_litestar(settings: Settings) -> Litestar:
    """The Litestar app alone (for OpenAPI generation): it authenticates nothing; `create_app` wraps it
    in the request pipeline for serving."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        settings.prepare_home()
        if settings.migrate_on_start:
            await anyio.to_thread.run_sync(upgrade_database, settings.database_url)
        store = create_store(
            settings.database_url,
            statement_timeout=settings.database_statement_timeout_seconds,
            connect_timeout=settings.database_connect_timeout_seconds,
        )
        # The environment is the source of truth for the default warehouse's storage settings.
        await store.upsert_warehouse(
            settings.warehouse_name, settings.warehouse_location, settings.warehouse_properties
        )
        # Every collaborator and service, built once; the HTTP layer takes them from `state.components`.
        components = app.state.components = CatalogComponents(store, settings)
        # Tables of S3 warehouses are published to AWS Glue (FLOE_GLUE_*, else floe.yaml's `glue:`).
        glue = GluePublisher(
            store,
            ConfiguredGlueTarget(settings, store),
            retry_max_seconds=settings.glue_retry_max_seconds,
        )
        glue.subscribe(components.events)
        # Commit events (FLOE_EVENTS_*): the outbox sent to Kafka.
        events = CommitEventPublisher(store, settings) if settings.events_kafka_bootstrap_servers else None
        if events is not None:
            events.subscribe(components.events)
            await events.start()
        auth = AuthService(store, settings)
        await auth.bootstrap_admin()
        app.state.auth = auth
        if settings.auth_mode == "none":
            log.warning("FLOE_AUTH=none: authentication is OFF, every caller is an administrator")
        # Everything loaded by now (modules, pydantic and pyiceberg models, routes: ~150k objects)
        # lives as long as the process, and each full collection's survivors are frozen too: the
        # collector rescanning them stalled every request (catalog/collector.py).
        keep_full_collections_short(pauses=full_collection_pauses())
        history = None
        if settings.console and settings.console_ingest_metrics_url:
            # The console's lag and throughput charts: the ingestion service sampled into the database.
            history = app.state.ingest_history = IngestHistory(
                store,
                settings.console_ingest_metrics_url,
                settings.console_metrics_interval_seconds,
                timedelta(hours=settings.console_metrics_retention_hours),
            )
        await glue.start()
        if history is not None:
            history.start()
        try:
            yield
        finally:
            if history is not None:
                await history.stop()
            await glue.stop()
            if events is not None:
                await events.stop()
            await components.audit.close()
            await store.close()

    console: list[Router] = []
    templates = None
    if settings.console:
        # Imported only when served: FLOE_CONSOLE=off loads none of it.
        from catalog.console import console_router, template_config

        console, templates = [console_router()], template_config()
    return Litestar(
        route_handlers=[
            *console,
            get_config,
            get_token,
            ManagementController,
            PipelineController,
            KafkaOffsetsController,
            SnapshotAtController,
            WatermarkController,
            MaintenanceController,
            LeaseController,
            healthz,
            readyz,
            metrics,
            NamespaceController,
            TableController,
            TableOperationsController,
            ViewController,
            ViewOperationsController,
        ],
        dependencies={
            "principal": Provide(provide_principal),
            "auth": Provide(provide_auth, sync_to_thread=False),
            "namespaces": Provide(provide_namespaces, sync_to_thread=False),
            "tables": Provide(provide_tables, sync_to_thread=False),
            "views": Provide(provide_views, sync_to_thread=False),
            "watermarks": Provide(provide_watermarks, sync_to_thread=False),
            "warehouses": Provide(provide_warehouses, sync_to_thread=False),
            "settings": Provide(provide_settings, sync_to_thread=False),
            "clusters": Provide(provide_clusters, sync_to_thread=False),
            "keys": Provide(provide_keys, sync_to_thread=False),
            "audit": Provide(provide_audit, sync_to_thread=False),
            "maintenance": Provide(provide_maintenance, sync_to_thread=False),
            "leases": Provide(provide_leases, sync_to_thread=False),
            "pipelines": Provide(provide_pipelines, sync_to_thread=False),
        },
        exception_handlers=EXCEPTION_HANDLERS,
        # No middleware: authentication, idempotency and audit are steps of the request pipeline
        # (`RequestPipeline`), in front of Litestar's routing.
        lifespan=[lifespan],
        openapi_config=openapi_config(),
        # Bodies are bounded by the request pipeline's limits step (`catalog.api.body_limits`), per
        # operation, before any step reads them.
        request_max_body_size=None,
        request_class=FloeRequest,
        template_config=templates,
        logging_config=None,
        debug=False,
    )


def create_app(settings: Settings | None = None) -> RequestPipeline:
    """The served ASGI app: the request pipeline, with Litestar as the handler of every route that is
    not a hot one."""
    settings = settings or Settings.from_env()
    return RequestPipeline(build_litestar(settings), settings.max_body_bytes)
