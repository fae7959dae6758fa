"""The management API's result types are defined once (catalog/wire.py): the server answers with them
and the client decodes into the very same classes, so the two cannot drift apart."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from catalog import client, wire
from catalog.api import kafka_offsets, maintenance, management, pipelines
from catalog.service import maintenance as maintenance_service

# The client's name of each result, and the wire type (the server's, and the OpenAPI component's name).
CLIENT_NAMES = {
    "Cluster": wire.Cluster,
    "ApiKey": wire.ApiKey,
    "IssuedKey": wire.ApiKeyWithSecret,
    "AuditEntry": wire.AuditRecord,
    "AuditPage": wire.ListAuditResponse,
    "PlannedTable": wire.PlannedTable,
    "ApplyOutcome": wire.ApplyPipelineResponse,
    "PipelineTable": wire.PipelineTable,
    "Pipeline": wire.PipelineResponse,
    "PartitionOffset": wire.PartitionOffset,
    "TopicOffsets": wire.TopicOffsets,
    "SnapshotAt": wire.SnapshotAtResponse,
    "TableCounts": wire.TableStats,
    "MaintenanceAction": wire.MaintenanceAction,
    "PassRecord": wire.MaintenancePassReport,
    "MaintenancePass": wire.MaintenancePass,
}


@pytest.mark.parametrize(("name", "wire_type"), sorted(CLIENT_NAMES.items()))
def test_the_client_decodes_into_the_wire_types(name: str, wire_type: type) -> None:
    assert getattr(client, name) is wire_type


def test_the_server_answers_with_the_wire_types() -> None:
    used = {
        management: ("Cluster", "ApiKey", "ApiKeyWithSecret", "AuditRecord", "ListAuditResponse"),
        pipelines: ("PlannedTable", "ApplyPipelineResponse", "PipelineTable", "PipelineResponse"),
        kafka_offsets: ("PartitionOffset", "TopicOffsets", "KafkaOffsetsResponse", "SnapshotAtResponse"),
        maintenance: ("MaintenancePass", "ListPassesResponse"),
        maintenance_service: ("TableStats", "MaintenanceAction", "MaintenancePassReport", "MaintenancePass"),
    }
    for module, names in used.items():
        for name in names:
            assert getattr(module, name) is getattr(wire, name), f"{module.__name__}.{name}"
    assert issubclass(maintenance.RecordPassRequest, wire.MaintenancePassReport)


def test_wire_names_on_the_wire() -> None:
    """Field names as the API spells them (hyphenated where the Iceberg-style responses are)."""
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    offsets = wire.KafkaOffsetsResponse([wire.TopicOffsets("t", [wire.PartitionOffset(0, 42, at)])])
    assert msgspec.json.decode(msgspec.json.encode(offsets)) == {
        "topics": [
            {
                "topic": "t",
                "partitions": [{"partition": 0, "next-offset": 42, "committed-at": "2026-01-02T03:04:05Z"}],
            }
        ]
    }
    key = wire.ApiKeyWithSecret("id", None, "admin", "", "ops", at, client_secret="s")
    assert set(msgspec.json.decode(msgspec.json.encode(key))) == {
        "client_id",
        "cluster",
        "role",
        "description",
        "created_by",
        "created_at",
        "client_secret",
    }  # unset optional times are left out (omit_defaults)
