"""From the applied pipeline (floe.yaml as stored by `floe apply`) to what ingestion runs per table."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from pyiceberg.schema import Schema

from catalog.client import Pipeline, PipelineTable
from catalog.pipelines import (
    CredentialError,
    PipelineConfig,
    TableConfig,
    avro_schema,
    data_schema,
    parse_config,
    resolve_credentials,
    resolve_registry_auth,
)
from catalog.pipelines.sources import SourceCluster
from ingest.ingest_table import IngestTable
from ingest.kafka_connection import PresentedCertificates
from ingest.metrics import TableProblems
from ingest.protobuf_decode import WriterSchema
from ingest.registry_client import BasicAuth, RegistryConnection

log = logging.getLogger(__name__)
DEFAULT_COMMIT_INTERVAL = 2.0


def ingest_tables(
    pipeline: Pipeline | Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    default_warehouse: str = "default",
    *,
    problems: TableProblems | None = None,
    presented_certificates: Callable[[SourceCluster], str] | None = None,
    definitions: PipelineDefinitions | None = None,
) -> list[IngestTable]:
    """Every table of the applied pipeline, ready to ingest: the revision floe serves, or a mapping with
    a floe.yaml document as `config` (and optionally `tables` as the management API lists them).

    A table whose source cluster's or schema registry's credentials cannot be resolved (a missing
    environment variable) is left out with an error in the log (through `problems` when given: once per
    reason, and in `floe status`), so one misconfigured cluster does not stop the others.
    `presented_certificates` fetches what brokers present for `tls_insecure_skip_verify` (by default a
    `PresentedCertificates` for this call; pass one to keep its cache between calls). `definitions` are
    the pipeline's document already parsed (`PipelineTables` keeps them per revision).
    """
    environ = os.environ if environ is None else environ
    presented = presented_certificates or PresentedCertificates(environ)
    if isinstance(pipeline, Pipeline):
        document, placed = pipeline.config, pipeline.tables
    else:
        document = pipeline["config"]
        placed = msgspec.convert(pipeline.get("tables", []), list[PipelineTable])
    if definitions is None:
        definitions = PipelineDefinitions.of(document)
    config = definitions.config
    warehouses = {(entry.namespace, entry.table): entry.warehouse for entry in placed}
    tables: list[IngestTable] = []
    for definition in definitions.tables:
        table = definition.table
        cluster = config.cluster(table.source_cluster_name)
        try:
            spark_options = resolve_credentials(cluster, environ, "spark", presented_certificates=presented)
            consumer = resolve_credentials(cluster, environ, "librdkafka")
            registry = registry_connection(config, table, environ)
        except CredentialError as exc:
            if problems is None:
                log.error("%s.%s: %s", table.namespace, table.table_name, exc)
            else:
                problems.report(f"{table.namespace}.{table.table_name}", str(exc))
            continue
        warehouse = (
            warehouses.get((table.namespace, table.table_name))
            or config.warehouse
            or (config.destination.warehouse_name if config.destination else None)
            or default_warehouse
        )
        settings = {
            "table": definition.settings,
            "cluster": {
                k: v for k, v in spark_options.items() if "jaas" not in k and "keystore.key" not in k
            },
            "registry": table.registry_url,
            "registry_auth": (
                [registry.basic_auth.username_env, registry.basic_auth.password_env]
                if registry is not None and registry.basic_auth is not None
                else None
            ),
            "warehouse": warehouse,
        }
        tables.append(
            IngestTable(
                cluster=cluster.name,
                topic=table.source_topic,
                warehouse=warehouse,
                namespace=(table.namespace,),
                table=table.table_name,
                dlq_table=table.dlq_table_name,
                source_format=table.source_format,
                schema=definition.schema,
                kafka_options=spark_options,
                consumer_config=consumer,
                commit_interval=float(table.commit_interval_seconds or DEFAULT_COMMIT_INTERVAL),
                avro_schema=avro_schema(table) if table.source_format == "avro" else None,
                registry=registry,
                confluent_framing=table.avro_framing == "confluent",
                protobuf_inline=definition.protobuf_inline,
                protobuf_framing=table.protobuf_framing == "confluent",
                table_mode=table.table_mode,
                envelope=table.envelope,
                ingest_path=table.ingest_path,
                fingerprint=hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
                source_cluster=cluster,
            )
        )
    return tables


def registry_connection(
    config: PipelineConfig, table: TableConfig, environ: Mapping[str, str]
) -> RegistryConnection | None:
    """The schema registry a registry-mode table decodes with (None for inline mode).

    floe.yaml gives credentials only for the top-level `schema_registry`: a table reading from that
    registry (by default, or naming its URL again) uses them; a table naming another registry in its own
    `schema_registry_url` reaches it without. CredentialError when a variable they name is not set.
    """
    if table.schema_mode != "registry" or table.registry_url is None:
        return None
    setting = (
        f"{table.path or 'table'}.schema_registry_url" if table.schema_registry_url else "schema_registry.url"
    )
    top = config.schema_registry
    auth: BasicAuth | None = None
    if top is not None and top.url == table.registry_url:
        credentials = resolve_registry_auth(top, environ)
        if credentials is not None:
            assert top.basic_auth_username_env is not None
            assert top.basic_auth_password_env is not None
            auth = BasicAuth(
                credentials[0], credentials[1], top.basic_auth_username_env, top.basic_auth_password_env
            )
    return RegistryConnection(table.registry_url, auth, setting)


@dataclass(frozen=True)
class TableDefinition:
    """What ingesting a table needs that its floe.yaml entry alone decides: worked out once per revision."""

    table: TableConfig
    schema: Schema
    protobuf_inline: tuple[WriterSchema, str] | None
    settings: dict[str, Any]  # the entry as JSON, part of the table's fingerprint

    @classmethod
    def of(cls, table: TableConfig) -> TableDefinition:
        protobuf_inline = None
        if table.protobuf is not None and table.schema_mode == "inline":
            files, main = table.protobuf.descriptor_set()
            protobuf_inline = (WriterSchema.of(files, main), table.protobuf.message)
        return cls(table, data_schema(table), protobuf_inline, table.to_json())


@dataclass(frozen=True)
class PipelineDefinitions:
    """A pipeline document parsed, with its tables' definitions."""

    config: PipelineConfig
    tables: tuple[TableDefinition, ...]

    @classmethod
    def of(cls, document: Any) -> PipelineDefinitions:
        config = parse_config(document)
        return cls(config, tuple(TableDefinition.of(t) for t in config.tables))


class PipelineTables:
    """`ingest_tables` for the ingest service's polls of the applied pipeline, its document parsed (and
    each table's schema and settings worked out) once per revision: the service builds every table again
    once a minute (to pick up brokers' rotated certificates), and at a thousand tables that took ~0.8 s of
    CPU holding the GIL the shared consumer needs (`python -m benchmarks.many_tables.pipeline_poll`).
    Credentials, certificates and fingerprints are worked out at every call, as before."""

    def __init__(
        self,
        default_warehouse: str = "default",
        *,
        problems: TableProblems | None = None,
        presented_certificates: Callable[[SourceCluster], str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._default_warehouse = default_warehouse
        self._problems = problems
        self._presented = presented_certificates
        self._environ = environ
        # The revision parsed (with when it was applied: a catalog whose database was made again numbers
        # its revisions from 1 again) and its definitions.
        self._parsed: tuple[tuple[int, datetime], PipelineDefinitions] | None = None

    def __call__(self, pipeline: Pipeline) -> list[IngestTable]:
        revision = (pipeline.revision, pipeline.applied_at)
        if self._parsed is None or self._parsed[0] != revision:
            self._parsed = (revision, PipelineDefinitions.of(pipeline.config))
        return ingest_tables(
            pipeline,
            self._environ,
            self._default_warehouse,
            problems=self._problems,
            presented_certificates=self._presented,
            definitions=self._parsed[1],
        )
