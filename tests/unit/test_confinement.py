"""A cluster key never escapes its cluster through storage paths (issue 9, items 1-4): the pure pieces.

Canonical locations, purge and the storage pool, tested directly; the attacks against real servers
are in tests/api/test_confinement.py.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from pyiceberg.table.metadata import TableMetadataUtil

from catalog.errors import BadRequest, Forbidden, ServiceUnavailable
from catalog.locations import is_within, normalize_location, path_segment, stored_form
from catalog.security.vending import check_scope
from catalog.storage import Storage, StorageRunner

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


# -- canonical locations (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("s3://b/lake/a/t", "s3://b/lake/a/t"),
        ("s3a://b/lake/a/t/", "s3://b/lake/a/t"),
        ("s3n://b//lake/./a//t", "s3://b/lake/a/t"),
        ("s3://b/lake/a/x/../t", "s3://b/lake/a/t"),
        ("S3A://b/lake", "s3://b/lake"),
        ("/srv/wh/a/t", "file:///srv/wh/a/t"),
        ("file:/srv/wh/a/t", "file:///srv/wh/a/t"),
        ("file://localhost/srv/wh/a/t", "file:///srv/wh/a/t"),
        ("file:///srv//wh/./a/../a/t/", "file:///srv/wh/a/t"),
    ],
)
def test_locations_have_one_canonical_form(given: str, canonical: str) -> None:
    assert normalize_location(given) == canonical
    assert normalize_location(canonical) == canonical


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("relative/t", "relative path"),
        ("./t", "relative path"),
        ("file:relative", "relative path"),
        ("s3://b/../../etc", "climbs above"),
        ("file:///../etc/passwd", "climbs above"),
        ("s3://b/lake/a/%2e%2e/b", "percent-escapes"),
        ("s3://b/lake/a%2Fb", "percent-escapes"),
        ("s3://b/lake\\a", "backslashes"),
        ("s3://b/lake/\x00a", "control characters"),
        ("s3://b/lake/a?x=1", "query"),
        ("gs://b/lake", "unsupported storage scheme 'gs'"),
        ("abfs://c@acct.dfs.core.windows.net/x", "unsupported storage scheme 'abfs'"),
        ("http://169.254.169.254/latest", "unsupported storage scheme 'http'"),
        ("hdfs://nn/x", "unsupported storage scheme"),
        ("s3:///lake", "does not name a bucket"),
        ("s3://user@b/lake", "does not name a bucket"),
        ("file://otherhost/x", "names no host"),
        ("", "non-empty"),
        ("s3://b/" + "x" * 3000, "longer than"),
    ],
)
def test_ambiguous_or_foreign_locations_are_refused(given: str, reason: str) -> None:
    with pytest.raises(BadRequest, match=reason):
        normalize_location(given)


def test_inside_means_the_folder_or_below_it() -> None:
    assert is_within("s3://b/lake/a", "s3://b/lake/a")
    assert is_within("s3://b/lake/a/t", "s3://b/lake/a")
    assert not is_within("s3://b/lake/ab/t", "s3://b/lake/a")
    assert not is_within("s3://b2/lake/a/t", "s3://b/lake/a")
    assert not is_within("file:///lake/a", "s3://b/lake/a")


def test_folder_names_never_collide() -> None:
    # Safe names (every cluster name) are their own folder; others get a hash of the exact name.
    assert path_segment("kafka_a") == "kafka_a"
    assert path_segment("a b") != path_segment("a_b")
    long_a, long_b = "x" * 101 + "a", "x" * 101 + "b"
    assert path_segment(long_a) != path_segment(long_b)
    assert len(path_segment(long_a)) <= 100
    assert path_segment("..") not in ("..", ".", "")


@pytest.mark.parametrize(
    "location",
    [
        "s3://lake/wh/kafka_a/../kafka_b/t",
        "s3a://lake/wh/kafka_a/../kafka_b/t",
        "s3://lake/wh/kafka_a/x/../../kafka_b",
        "s3://lake/wh//kafka_b/t",
    ],
)
def test_vending_scope_compares_canonical_locations(location: str) -> None:
    with pytest.raises(Forbidden, match="outside"):
        check_scope(location, "s3://lake/wh/kafka_a")
    assert check_scope("s3a://lake/wh//kafka_a/./t/", "s3://lake/wh/kafka_a") == "s3://lake/wh/kafka_a/t"


# -- purge and the storage pool (real local files) ------------------------------------------------------


def _metadata(location: str, **extra: Any) -> Any:
    document = {
        "format-version": 2,
        "table-uuid": str(uuid.uuid4()),
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": 0,
        "last-column-id": 1,
        "schemas": [SCHEMA],
        "current-schema-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "default-spec-id": 0,
        "last-partition-id": 999,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
        "properties": {},
        **extra,
    }
    return TableMetadataUtil.parse_raw(json.dumps(document))


def test_purge_never_reads_or_deletes_outside_the_tables_folders(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    own = warehouse / "kafka_a" / "t-1"
    other = warehouse / "kafka_b" / "t-2" / "data" / "victim.parquet"
    database = tmp_path / "floe.db"
    own_files = [own / "metadata" / "00001.metadata.json", own / "metadata" / "stats.puffin"]
    for path in [*own_files, other, database]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    statistics = [
        {"snapshot-id": 1, "statistics-path": p.as_uri(), "file-size-in-bytes": 1,
         "file-footer-size-in-bytes": 1, "blob-metadata": []}
        for p in (own_files[1], other, database)
    ]  # fmt: skip
    snapshots = [
        {"snapshot-id": 1, "sequence-number": 1, "timestamp-ms": 0, "summary": {"operation": "append"},
         "manifest-list": (own / "metadata" / "missing.avro").as_uri(), "schema-id": 0},
        {"snapshot-id": 2, "parent-snapshot-id": 1, "sequence-number": 2, "timestamp-ms": 0,
         "summary": {"operation": "append"}, "manifest-list": database.as_uri(), "schema-id": 0},
    ]  # fmt: skip
    metadata = _metadata(
        own.as_uri(),
        snapshots=snapshots,
        statistics=statistics,
        **{"current-snapshot-id": 2, "last-sequence-number": 2},
    )
    root = normalize_location((warehouse / "kafka_a").as_uri())
    storage = Storage(warehouse.as_uri(), {}, root)
    deleted = storage.purge_table(metadata, own_files[0].as_uri(), [normalize_location(own.as_uri())])
    assert deleted == 2
    assert not any(p.exists() for p in own_files)
    assert other.exists()
    assert database.exists()
    # A table whose own location is outside its cluster folder owns nothing to delete.
    outside = _metadata(other.parent.parent.as_uri())
    assert storage.purge_table(outside, None, [normalize_location(other.parent.parent.as_uri())]) == 0
    assert other.exists()


def test_storage_refuses_paths_outside_its_root(tmp_path: Path) -> None:
    root = normalize_location((tmp_path / "wh" / "kafka_a").as_uri())
    storage = Storage((tmp_path / "wh").as_uri(), {}, root)
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash")
    for location in (
        secret.as_uri(),
        f"{root}/../../secret.txt",
        (tmp_path / "wh" / "kafka_b" / "x").as_uri(),
    ):
        with pytest.raises((Forbidden, BadRequest)):
            storage.read(location)
        with pytest.raises((Forbidden, BadRequest)):
            storage.write(location, b"x")
    assert storage.delete_many([secret.as_uri()]) == 0
    assert secret.read_text() == "root:$6$hash"


def test_storage_pool_keeps_one_tenant_from_starving_the_others() -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(10)
        return "late"

    async def scenario() -> None:
        runner = StorageRunner(total=4, per_tenant=2, timeout_seconds=0.5)
        async with anyio.create_task_group() as tasks:
            outcomes: list[str] = []

            async def greedy() -> None:
                try:
                    outcomes.append(await runner.run("greedy", hang))
                except ServiceUnavailable:
                    outcomes.append("timed out")

            for _ in range(5):
                tasks.start_soon(greedy)
            await anyio.sleep(0.1)
            # The greedy tenant holds its two slots (and three more calls wait): others still run.
            started = time.monotonic()
            assert await runner.run("polite", lambda: "ok") == "ok"
            assert time.monotonic() - started < 0.3
        assert outcomes == ["timed out"] * 5
        # Timed-out calls still hold their tenant's slots until their threads end.
        with pytest.raises(ServiceUnavailable, match="did not answer"):
            await runner.run("greedy", lambda: "blocked")
        release.set()
        await anyio.sleep(0.2)
        assert await runner.run("greedy", lambda: "free again") == "free again"

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("file:/srv/wh/a/t", "file:/srv/wh/a/t"),
        ("s3a://b/lake/a/t/", "s3a://b/lake/a/t"),
        ("/srv/wh/a/t", "/srv/wh/a/t"),
        ("s3://b/lake//a/t", "s3://b/lake/a/t"),
        ("s3a://b/lake/a/x/../t", "s3://b/lake/a/t"),
        ("file:///srv/wh/./a/t", "file:///srv/wh/a/t"),
    ],
)
def test_a_plain_spelling_is_stored_as_sent_and_any_other_canonically(given: str, stored: str) -> None:
    assert stored_form(given, normalize_location(given)) == stored
    assert normalize_location(stored) == normalize_location(given)
