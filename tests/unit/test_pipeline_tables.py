"""`PipelineTables`: the ingest service's tables from the applied pipeline, parsed once per revision."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from catalog.client import Pipeline
from catalog.pipelines import parse_config
from ingest.tables import PipelineTables, ingest_tables

APPLIED = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def _document(topics: list[str], *, sasl: bool = False) -> dict[str, Any]:
    cluster: dict[str, Any] = {"name": "c", "bootstrap_brokers": [{"hostname": "k", "port": 9092}]}
    if sasl:
        cluster["credentials"] = {
            "sasl_mechanism": "plain",
            "sasl_username_env": "KAFKA_USER",
            "sasl_password_env": "KAFKA_PW",
        }
    tables = [
        {
            "source_cluster_name": "c",
            "source_topic": topic,
            "source_format": "json",
            "schema_mode": "inline",
            "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
        }
        for topic in topics
    ]
    return {"source_clusters": [cluster], "tables": tables}


def _pipeline(document: dict[str, Any], revision: int = 1, applied_at: dt.datetime = APPLIED) -> Pipeline:
    normalized = parse_config(document).to_json()  # as floe stores and serves it
    return Pipeline(revision, applied_at, "alice", "default", normalized, [])


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the documents parsed through `ingest.tables`."""
    calls: list[int] = []

    def counting(document: Any) -> Any:
        calls.append(len(document.get("tables", [])))
        return parse_config(document)

    monkeypatch.setattr("ingest.tables.parse_config", counting)
    return calls


def test_a_revision_is_parsed_once_and_builds_the_same_tables_as_ingest_tables(parses: list[int]) -> None:
    pipeline = _pipeline(_document(["a", "b", "c"]))
    build = PipelineTables(environ={})
    first, again = build(pipeline), build(pipeline)
    assert parses == [3]
    expected = ingest_tables(pipeline, {})
    assert (
        [t.fingerprint for t in first] == [t.fingerprint for t in again] == [t.fingerprint for t in expected]
    )
    assert [(t.topic, t.schema) for t in first] == [(t.topic, t.schema) for t in expected]


def test_a_new_revision_or_a_catalog_made_again_is_parsed_again(parses: list[int]) -> None:
    build = PipelineTables(environ={})
    assert [t.topic for t in build(_pipeline(_document(["a"])))] == ["a"]
    assert [t.topic for t in build(_pipeline(_document(["a", "b"]), revision=2))] == ["a", "b"]
    # Revision 1 again, applied later: floe's database was made again; not the revision parsed first.
    later = APPLIED + dt.timedelta(hours=1)
    assert [t.topic for t in build(_pipeline(_document(["c"]), applied_at=later))] == ["c"]
    assert parses == [1, 2, 1]


def test_credentials_are_resolved_at_every_build_of_a_revision(
    parses: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    pipeline = _pipeline(_document(["a"], sasl=True))
    environ: dict[str, str] = {}
    build = PipelineTables(environ=environ)
    assert build(pipeline) == []  # the variables are not set: the table is left out, with the reason
    assert "KAFKA_USER" in caplog.text
    environ |= {"KAFKA_USER": "alice", "KAFKA_PW": "s3cret"}
    [table] = build(pipeline)
    assert table.consumer_config["sasl.username"] == "alice"
    assert parses == [1]


def test_ingest_path_spark_gives_a_json_table_a_query_of_its_own() -> None:
    """`ingest_path: spark` takes an inline-JSON append table off the shared consumer; the default
    (`auto`) is not in the stored form, so tables applied before the key existed keep their fingerprint."""
    from ingest.shared.service import shared_consumer_reads

    document = _document(["quiet", "hot"])
    before = {t.topic: t for t in ingest_tables(_pipeline(document), environ={})}
    document["tables"][1]["ingest_path"] = "spark"
    normalized = parse_config(document).to_json()
    assert "ingest_path" not in normalized["tables"][0]
    assert normalized["tables"][1]["ingest_path"] == "spark"
    after = {t.topic: t for t in ingest_tables(_pipeline(document), environ={})}
    assert shared_consumer_reads(after["quiet"])
    assert not shared_consumer_reads(after["hot"])
    assert after["quiet"].fingerprint == before["quiet"].fingerprint
    # Moving a table between the paths restarts its ingestion (the service compares fingerprints).
    assert after["hot"].fingerprint != before["hot"].fingerprint


@pytest.mark.parametrize("value", ["shared", "queries", 1, None])
def test_ingest_path_is_auto_or_spark(value: Any) -> None:
    from catalog.pipelines import InvalidConfig

    document = _document(["t"])
    document["tables"][0]["ingest_path"] = value
    with pytest.raises(InvalidConfig) as raised:
        parse_config(document)
    assert "tables[0].ingest_path" in str(raised.value)
