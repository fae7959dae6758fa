"""pyiceberg's RestCatalog against a real floe server: the table lifecycle.

Create (plain, staged, at a custom location, per format version), load, list, exists, properties,
rename, drop, purge (files really deleted), register and the errors pyiceberg maps from the answers.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    RESTError,
    TableAlreadyExistsError,
)
from pyiceberg.table import StaticTable, Table

from devtools.catalog_server import CatalogProcess

PEOPLE = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def people(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}, schema=PEOPLE)


def ids(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme in ("file", ""), uri
    return Path(unquote(parsed.path))


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def written_table(rest_catalog: RestCatalog, namespace: str, name: str = "t") -> Table:
    """A table with several snapshots, a delete and a property change: many data and metadata files."""
    table = rest_catalog.create_table((namespace, name), schema=PEOPLE)
    table.append(people([1, 2, 3]))
    table.append(people([4, 5]))
    table.delete(delete_filter="id == 2")
    with table.transaction() as txn:
        txn.set_properties(owner="tests")
    loaded: Table = rest_catalog.load_table((namespace, name))
    return loaded


def other_namespace(rest_catalog: RestCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:10]}"
    rest_catalog.create_namespace(name)
    return name


# -- create, load, list, exists --------------------------------------------------------------------


def test_create_load_list_exists(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    assert rest_catalog.list_tables(namespace) == []
    assert not rest_catalog.table_exists((namespace, "b"))
    created = rest_catalog.create_table((namespace, "b"), schema=PEOPLE, properties={"owner": "me"})
    rest_catalog.create_table((namespace, "a"), schema=PEOPLE)

    assert sorted(rest_catalog.list_tables(namespace)) == [(namespace, "a"), (namespace, "b")]
    assert rest_catalog.table_exists((namespace, "b"))
    loaded = rest_catalog.load_table(f"{namespace}.b")
    assert loaded.name() == (namespace, "b")
    assert loaded.metadata.table_uuid == created.metadata.table_uuid
    assert loaded.metadata_location == created.metadata_location
    assert loaded.properties["owner"] == "me"
    assert [(f.name, str(f.field_type)) for f in loaded.schema().fields] == [
        ("id", "long"),
        ("name", "string"),
    ]
    assert loaded.format_version == 2
    # The default location is inside the server's warehouse, and the first metadata file is on disk.
    location = local_path(loaded.location())
    assert location.is_relative_to(catalog_server.warehouse_path)
    metadata_file = local_path(loaded.metadata_location)
    assert metadata_file.is_file()
    assert metadata_file.parent == location / "metadata"


def test_create_at_custom_location(
    rest_catalog: RestCatalog, catalog_server: CatalogProcess, namespace: str
) -> None:
    # Anywhere inside the warehouse (tests/api/test_confinement.py: never outside the caller's folder).
    location = catalog_server.warehouse_path.resolve() / f"custom-{uuid.uuid4().hex[:8]}" / "table"
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE, location=location.as_uri())
    table.append(people([1, 2]))
    loaded = rest_catalog.load_table((namespace, "t"))
    assert local_path(loaded.location()) == location
    assert local_path(loaded.metadata_location).parent == location / "metadata"
    data_files = [local_path(t.file.file_path) for t in loaded.scan().plan_files()]
    assert data_files
    assert all(f.is_relative_to(location) and f.is_file() for f in data_files)
    assert ids(loaded) == [1, 2]


@pytest.mark.parametrize("version", [1, 2])
def test_format_versions_and_upgrade(rest_catalog: RestCatalog, namespace: str, version: int) -> None:
    table = rest_catalog.create_table(
        (namespace, "t"), schema=PEOPLE, properties={"format-version": str(version)}
    )
    assert table.format_version == version
    table.append(people([1]))
    if version == 1:
        with table.transaction() as txn:
            txn.upgrade_table_version(format_version=2)
        table.append(people([2]))
    loaded = rest_catalog.load_table((namespace, "t"))
    assert loaded.format_version == 2
    assert ids(loaded) == ([1, 2] if version == 1 else [1])


def test_create_existing_table_fails(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    table.append(people([1]))
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    # The failed create left the original table alone.
    assert ids(rest_catalog.load_table((namespace, "t"))) == [1]
    assert rest_catalog.create_table_if_not_exists((namespace, "t"), schema=PEOPLE).metadata.table_uuid == (
        table.metadata.table_uuid
    )


def test_missing_tables_and_namespaces(rest_catalog: RestCatalog, namespace: str, http: httpx.Client) -> None:
    with pytest.raises(NoSuchTableError, match="Table does not exist"):
        rest_catalog.load_table((namespace, "missing"))
    missing_ns = f"missing_{uuid.uuid4().hex[:8]}"
    # Loading a table of a missing namespace is a NoSuchTableException (as the Java reference answers,
    # which Java clients rely on to load metadata tables such as `db.t.snapshots`); the message says why.
    with pytest.raises(NoSuchTableError, match=r"namespace .* does not exist"):
        rest_catalog.load_table((missing_ns, "t"))
    response = http.get(f"/v1/default/namespaces/{missing_ns}/tables/t")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchTableException"
    response = http.get(f"/v1/default/namespaces/{namespace}/tables/missing")
    assert response.json()["error"]["type"] == "NoSuchTableException"

    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.list_tables(missing_ns)
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.create_table((missing_ns, "t"), schema=PEOPLE)
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.create_table_transaction((missing_ns, "t"), schema=PEOPLE)
    assert not rest_catalog.table_exists((missing_ns, "t"))
    with pytest.raises(NoSuchTableError):
        rest_catalog.drop_table((namespace, "missing"))
    with pytest.raises(NoSuchTableError):
        rest_catalog.purge_table((namespace, "missing"))


# -- properties --------------------------------------------------------------------------------------


def test_table_properties_update(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table(
        (namespace, "t"), schema=PEOPLE, properties={"keep": "1", "drop-me": "2", "change-me": "3"}
    )
    with table.transaction() as txn:
        txn.set_properties({"change-me": "33", "added": "4"})
    with table.transaction() as txn:
        txn.remove_properties("drop-me")
    properties = rest_catalog.load_table((namespace, "t")).properties
    assert properties["keep"] == "1"
    assert properties["change-me"] == "33"
    assert properties["added"] == "4"
    assert "drop-me" not in properties
    # Every commit wrote a new metadata file and logged the previous one.
    loaded = rest_catalog.load_table((namespace, "t"))
    assert len(loaded.metadata.metadata_log) == 2
    assert all(local_path(entry.metadata_file).is_file() for entry in loaded.metadata.metadata_log)


def test_removing_absent_property_is_ignored(
    rest_catalog: RestCatalog, namespace: str, http: httpx.Client
) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE, properties={"a": "1", "b": "2"})
    # pyiceberg refuses this client-side; the Java client sends it (e.g. `UNSET TBLPROPERTIES IF EXISTS`)
    # and the reference server ignores keys that are not set.
    response = http.post(
        f"/v1/default/namespaces/{namespace}/tables/t",
        json={
            "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],
            "updates": [
                {"action": "set-properties", "updates": {"c": "3"}},
                {"action": "remove-properties", "removals": ["a", "c", "never-set"]},
            ],
        },
    )
    assert response.status_code == 200, response.text
    properties = rest_catalog.load_table((namespace, "t")).properties
    assert properties["b"] == "2"
    assert not {"a", "c", "never-set"} & set(properties)


# -- staged create ---------------------------------------------------------------------------------


def test_create_table_transaction(rest_catalog: RestCatalog, namespace: str) -> None:
    txn = rest_catalog.create_table_transaction((namespace, "t"), schema=PEOPLE, properties={"stage": "yes"})
    # A staged create is invisible until it commits.
    assert not rest_catalog.table_exists((namespace, "t"))
    assert rest_catalog.list_tables(namespace) == []
    txn.set_properties(extra="1")
    txn.append(people([1, 2, 3]))
    committed = txn.commit_transaction()

    loaded = rest_catalog.load_table((namespace, "t"))
    assert ids(loaded) == [1, 2, 3]
    assert loaded.properties["stage"] == "yes"
    assert loaded.properties["extra"] == "1"
    assert len(loaded.snapshots()) == 1
    assert loaded.metadata.table_uuid == committed.metadata.table_uuid
    assert local_path(loaded.metadata_location).is_file()


def test_create_table_transaction_loses_to_concurrent_create(
    rest_catalog: RestCatalog, namespace: str
) -> None:
    first = rest_catalog.create_table_transaction((namespace, "t"), schema=PEOPLE)
    second = rest_catalog.create_table_transaction((namespace, "t"), schema=PEOPLE)
    first.append(people([1]))
    first.commit_transaction()
    second.append(people([2]))
    # The assert-create requirement fails in the Java wording the REST spec's clients expect.
    with pytest.raises(CommitFailedException, match="Requirement failed: table already exists"):
        second.commit_transaction()
    assert ids(rest_catalog.load_table((namespace, "t"))) == [1]
    # Staging a create for a name that exists is refused up front.
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table_transaction((namespace, "t"), schema=PEOPLE)


# -- rename ------------------------------------------------------------------------------------------


def test_rename_within_namespace(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "old"), schema=PEOPLE)
    table.append(people([1]))
    renamed = rest_catalog.rename_table((namespace, "old"), (namespace, "new"))
    assert renamed.name() == (namespace, "new")
    assert renamed.metadata.table_uuid == table.metadata.table_uuid
    assert rest_catalog.list_tables(namespace) == [(namespace, "new")]
    assert not rest_catalog.table_exists((namespace, "old"))
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table((namespace, "old"))
    # The renamed table keeps its data and accepts commits under its new name.
    renamed.append(people([2]))
    assert ids(rest_catalog.load_table((namespace, "new"))) == [1, 2]
    # The old name is free for a new table.
    rest_catalog.create_table((namespace, "old"), schema=PEOPLE)
    assert ids(rest_catalog.load_table((namespace, "old"))) == []


def test_rename_across_namespaces(rest_catalog: RestCatalog, namespace: str) -> None:
    target = other_namespace(rest_catalog)
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE)
    table.append(people([1, 2]))
    rest_catalog.rename_table((namespace, "t"), (target, "moved"))
    assert rest_catalog.list_tables(namespace) == []
    assert rest_catalog.list_tables(target) == [(target, "moved")]
    assert ids(rest_catalog.load_table((target, "moved"))) == [1, 2]
    # The source namespace is empty now, so it can be dropped.
    rest_catalog.drop_namespace(namespace)


def test_rename_errors(rest_catalog: RestCatalog, namespace: str) -> None:
    rest_catalog.create_table((namespace, "a"), schema=PEOPLE).append(people([1]))
    rest_catalog.create_table((namespace, "b"), schema=PEOPLE).append(people([2]))
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.rename_table((namespace, "a"), (namespace, "b"))
    with pytest.raises(NoSuchTableError):
        rest_catalog.rename_table((namespace, "missing"), (namespace, "c"))
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.rename_table((namespace, "a"), (f"missing_{uuid.uuid4().hex[:8]}", "a"))
    # Nothing moved.
    assert ids(rest_catalog.load_table((namespace, "a"))) == [1]
    assert ids(rest_catalog.load_table((namespace, "b"))) == [2]


# -- drop and purge ----------------------------------------------------------------------------------


def test_drop_keeps_files(rest_catalog: RestCatalog, namespace: str) -> None:
    table = written_table(rest_catalog, namespace)
    location = local_path(table.location())
    before = files_under(location)
    assert any(p.suffix == ".parquet" for p in before)
    assert any(p.name.endswith(".metadata.json") for p in before)
    assert any(p.suffix == ".avro" for p in before)

    rest_catalog.drop_table((namespace, "t"))
    assert not rest_catalog.table_exists((namespace, "t"))
    assert rest_catalog.list_tables(namespace) == []
    assert files_under(location) == before

    # The kept metadata file brings the table back, with all its history.
    restored = rest_catalog.register_table((namespace, "t"), table.metadata_location)
    assert ids(restored) == [1, 3, 4, 5]
    assert [s.snapshot_id for s in restored.snapshots()] == [s.snapshot_id for s in table.snapshots()]


def test_purge_deletes_data_and_metadata_files(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    table = written_table(rest_catalog, namespace)
    location = local_path(table.location())
    assert location.is_relative_to(catalog_server.warehouse_path)
    before = files_under(location)
    data_files = {p for p in before if p.suffix == ".parquet"}
    # Two appends and a copy-on-write delete that rewrote one file.
    assert len(data_files) >= 3
    assert len([p for p in before if p.name.endswith(".metadata.json")]) == 5

    rest_catalog.purge_table((namespace, "t"))
    assert not rest_catalog.table_exists((namespace, "t"))
    assert files_under(location) == set()
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table((namespace, "t"))


def test_purge_spares_neighbouring_table(rest_catalog: RestCatalog, namespace: str) -> None:
    kept = written_table(rest_catalog, namespace, "kept")
    written_table(rest_catalog, namespace, "purged")
    kept_files = files_under(local_path(kept.location()))
    rest_catalog.purge_table((namespace, "purged"))
    assert files_under(local_path(kept.location())) == kept_files
    assert ids(rest_catalog.load_table((namespace, "kept"))) == [1, 3, 4, 5]


def plant_unlisted_files(location: Path) -> set[Path]:
    """Files a table's metadata does not list: those of commits that lost a race, or never committed."""
    planted = {
        location / "data" / "lost-race-00000.parquet",
        location / "data" / "id_bucket=3" / "lost-race-00001.parquet",
        location / "metadata" / "00042-lost.metadata.json",
        location / "metadata" / "snap-42-lost.avro",
    }
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"never committed")
    return planted


def test_purge_empties_a_catalog_assigned_location(rest_catalog: RestCatalog, namespace: str) -> None:
    """A table in the folder floe assigned it loses everything in it, listed or not; the folder goes."""
    kept = written_table(rest_catalog, namespace, "kept")
    kept_files = files_under(local_path(kept.location()))
    table = written_table(rest_catalog, namespace)
    location = local_path(table.location())
    plant_unlisted_files(location)

    rest_catalog.purge_table((namespace, "t"))
    assert not location.exists()
    assert files_under(local_path(kept.location())) == kept_files
    assert ids(rest_catalog.load_table((namespace, "kept"))) == [1, 3, 4, 5]


def test_purge_of_a_staged_create_empties_its_assigned_location(
    rest_catalog: RestCatalog, namespace: str
) -> None:
    """A create transaction sends back the location floe assigned when it was staged: it is floe's too."""
    with rest_catalog.create_table_transaction((namespace, "staged"), schema=PEOPLE) as txn:
        txn.set_properties(owner="staged")
    table = rest_catalog.load_table((namespace, "staged"))
    table.append(people([1]))
    location = local_path(table.location())
    plant_unlisted_files(location)
    rest_catalog.purge_table((namespace, "staged"))
    assert not location.exists()


def test_purge_of_a_chosen_location_deletes_only_listed_files(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    """A location the client chose may hold files that are not the table's: only listed files go."""
    folder = catalog_server.warehouse_path.resolve() / namespace
    location = folder / f"chosen-{uuid.uuid4().hex[:8]}" / "table"
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE, location=location.as_uri())
    table.append(people([1, 2]))
    assert any(p.suffix == ".parquet" for p in files_under(location))
    planted = plant_unlisted_files(location)
    rest_catalog.purge_table((namespace, "t"))
    assert files_under(location) == planted


def test_purge_keeps_a_table_placed_inside_the_purged_location(
    rest_catalog: RestCatalog, namespace: str
) -> None:
    """Another table whose location a client chose inside the purged table's folder keeps its files: the
    purge falls back to the files the purged table's metadata lists."""
    outer = written_table(rest_catalog, namespace, "outer")
    outer_location = local_path(outer.location())
    inner = rest_catalog.create_table(
        (namespace, "inner"), schema=PEOPLE, location=(outer_location / "nested").as_uri()
    )
    inner.append(people([7]))
    inner_files = files_under(outer_location / "nested")
    planted = plant_unlisted_files(outer_location)

    rest_catalog.purge_table((namespace, "outer"))
    assert files_under(outer_location) == inner_files | planted
    assert ids(rest_catalog.load_table((namespace, "inner"))) == [7]


# -- register ----------------------------------------------------------------------------------------


def test_register_existing_metadata_under_new_name(rest_catalog: RestCatalog, namespace: str) -> None:
    table = written_table(rest_catalog, namespace, "source")
    target = other_namespace(rest_catalog)
    registered = rest_catalog.register_table((target, "copy"), table.metadata_location)
    assert registered.name() == (target, "copy")
    assert registered.metadata_location == table.metadata_location
    assert registered.metadata.table_uuid == table.metadata.table_uuid
    assert ids(registered) == ids(table) == [1, 3, 4, 5]
    loaded = rest_catalog.load_table((target, "copy"))
    assert ids(loaded) == [1, 3, 4, 5]
    assert loaded.properties["owner"] == "tests"
    # An older metadata file registers the table as it was then.
    oldest = table.metadata.metadata_log[1].metadata_file
    earlier = rest_catalog.register_table((target, "earlier"), oldest)
    assert ids(earlier) == [1, 2, 3]


def test_register_errors_and_overwrite(rest_catalog: RestCatalog, namespace: str) -> None:
    first = rest_catalog.create_table((namespace, "first"), schema=PEOPLE)
    first.append(people([1]))
    second = rest_catalog.create_table((namespace, "second"), schema=PEOPLE)
    second.append(people([2]))
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.register_table((namespace, "first"), second.metadata_location)
    assert ids(rest_catalog.load_table((namespace, "first"))) == [1]

    replaced = rest_catalog.register_table((namespace, "first"), second.metadata_location, overwrite=True)
    assert ids(replaced) == [2]
    assert ids(rest_catalog.load_table((namespace, "first"))) == [2]

    missing_file = f"{second.location()}/metadata/99999-{uuid.uuid4()}.metadata.json"
    with pytest.raises(BadRequestError):
        rest_catalog.register_table((namespace, "ghost"), missing_file)
    assert not rest_catalog.table_exists((namespace, "ghost"))
    # pyiceberg maps only 409 for register; the 404 reaches it as a generic RESTError.
    with pytest.raises(RESTError, match="NoSuchNamespaceException"):
        rest_catalog.register_table((f"missing_{uuid.uuid4().hex[:8]}", "t"), second.metadata_location)


# -- gzip metadata files ---------------------------------------------------------------------------


def test_a_table_can_keep_its_metadata_files_gzip(rest_catalog: RestCatalog, namespace: str) -> None:
    codec = "write.metadata.compression-codec"  # Iceberg's table property; `gzip` or `none`
    table = rest_catalog.create_table((namespace, "gz"), schema=PEOPLE, properties={codec: "gzip"})
    assert table.metadata_location.endswith(".gz.metadata.json")
    table.append(people([1, 2]))
    table.append(people([3]))
    loaded = rest_catalog.load_table((namespace, "gz"))
    assert loaded.metadata_location.endswith(".gz.metadata.json")
    written = local_path(loaded.metadata_location).read_bytes()
    assert written[:2] == b"\x1f\x8b"  # gzip, as the name says
    # What any reader of the file sees (pyiceberg tells gzip by the name, as the Java client does).
    static = StaticTable.from_metadata(loaded.metadata_location)
    assert static.metadata == loaded.metadata
    assert ids(static) == [1, 2, 3]
    # A gzip file registers, and back to plain files from the next commit on.
    copy = rest_catalog.register_table((other_namespace(rest_catalog), "copy"), loaded.metadata_location)
    assert ids(copy) == [1, 2, 3]
    with loaded.transaction() as txn:
        txn.set_properties({codec: "none"})
    plain = rest_catalog.load_table((namespace, "gz"))
    assert plain.metadata_location.endswith(".metadata.json")
    assert not plain.metadata_location.endswith(".gz.metadata.json")
    assert local_path(plain.metadata_location).read_bytes()[:1] == b"{"
    # A codec Iceberg does not know is refused, and nothing changes.
    with pytest.raises(BadRequestError, match=codec), plain.transaction() as txn:
        txn.set_properties({codec: "zstd"})
    with pytest.raises(BadRequestError, match=codec):
        rest_catalog.create_table((namespace, "bad"), schema=PEOPLE, properties={codec: "lz4"})
    assert rest_catalog.load_table((namespace, "gz")).metadata_location == plain.metadata_location
    assert not rest_catalog.table_exists((namespace, "bad"))


def test_delete_after_commit_keeps_only_the_files_the_log_names(
    rest_catalog: RestCatalog, namespace: str
) -> None:
    """Iceberg's `write.metadata.delete-after-commit.enabled`: each commit deletes the metadata files it
    drops from the log (`write.metadata.previous-versions-max` long), as the Java commit does; off (the
    default), every version stays for maintenance."""
    tidy = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "2"}
    table = rest_catalog.create_table((namespace, "tidy"), schema=PEOPLE, properties=tidy)
    for i in range(5):
        table.append(people([i]))
    loaded = rest_catalog.load_table((namespace, "tidy"))
    current = local_path(loaded.metadata_location)
    folder = current.parent
    logged = [local_path(entry.metadata_file).name for entry in loaded.metadata.metadata_log]
    assert len(logged) == 2
    # Deleted just after each commit's answer (an object store's DELETEs do not hold the commit up).
    deadline = time.monotonic() + 30
    while sorted(p.name for p in folder.glob("*.metadata.json")) != sorted([*logged, current.name]):
        assert time.monotonic() < deadline, sorted(p.name for p in folder.glob("*.metadata.json"))
        time.sleep(0.05)
    assert ids(loaded) == [0, 1, 2, 3, 4]
    assert StaticTable.from_metadata(loaded.metadata_location).metadata == loaded.metadata
    # Switched off: that commit and every next one keep what they drop.
    with loaded.transaction() as txn:
        txn.set_properties({"write.metadata.delete-after-commit.enabled": "false"})
    table = rest_catalog.load_table((namespace, "tidy"))
    table.append(people([5]))
    table.append(people([6]))
    assert len(list(folder.glob("*.metadata.json"))) == 3 + 3
    assert ids(rest_catalog.load_table((namespace, "tidy"))) == [0, 1, 2, 3, 4, 5, 6]
