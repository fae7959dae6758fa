"""pyiceberg's RestCatalog against a real floe server: namespaces (create, nest, list, properties, drop)."""

from __future__ import annotations

import uuid

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    RESTError,
)

from catalog.locations import path_segment
from devtools.catalog_server import CatalogProcess

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def unique(prefix: str = "ns") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def user_properties(catalog: RestCatalog, namespace: str | tuple[str, ...]) -> dict[str, str]:
    """A namespace's properties without the `location` floe adds to every loaded namespace."""
    properties = dict(catalog.load_namespace_properties(namespace))
    assert properties.pop("location")
    return properties


def test_create_with_properties_and_load(rest_catalog: RestCatalog) -> None:
    name = unique()
    rest_catalog.create_namespace(name, {"owner": "data-team", "comment": "raw events"})
    assert user_properties(rest_catalog, name) == {"owner": "data-team", "comment": "raw events"}
    assert (name,) in rest_catalog.list_namespaces()


def test_create_without_properties_loads_empty(rest_catalog: RestCatalog) -> None:
    name = unique()
    rest_catalog.create_namespace(name)
    assert user_properties(rest_catalog, name) == {}


def test_create_existing_namespace_fails(rest_catalog: RestCatalog) -> None:
    name = unique()
    rest_catalog.create_namespace(name, {"a": "1"})
    with pytest.raises(NamespaceAlreadyExistsError):
        rest_catalog.create_namespace(name, {"a": "2"})
    # The failed create must not have touched the existing namespace.
    assert user_properties(rest_catalog, name) == {"a": "1"}


def test_nested_namespaces_and_list_with_parent(rest_catalog: RestCatalog) -> None:
    root = unique("root")
    rest_catalog.create_namespace((root,))
    rest_catalog.create_namespace((root, "b"), {"level": "2"})
    rest_catalog.create_namespace((root, "c"))
    rest_catalog.create_namespace((root, "b", "deep"))

    top_level = rest_catalog.list_namespaces()
    assert (root,) in top_level
    # Listing without a parent returns only first-level namespaces.
    assert all(len(ns) == 1 for ns in top_level)
    assert sorted(rest_catalog.list_namespaces((root,))) == [(root, "b"), (root, "c")]
    assert rest_catalog.list_namespaces((root, "b")) == [(root, "b", "deep")]
    assert rest_catalog.list_namespaces((root, "c")) == []
    assert user_properties(rest_catalog, (root, "b")) == {"level": "2"}
    assert rest_catalog.namespace_exists((root, "b", "deep"))
    assert not rest_catalog.namespace_exists((root, "b", "missing"))


def test_nested_namespace_requires_parent(rest_catalog: RestCatalog) -> None:
    root = unique("orphan")
    with pytest.raises(RESTError, match="Namespace does not exist"):
        rest_catalog.create_namespace((root, "child"))
    assert not rest_catalog.namespace_exists((root, "child"))


def test_list_children_of_missing_namespace(rest_catalog: RestCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.list_namespaces((unique("missing"),))


def test_list_namespaces_pages_through_everything(rest_catalog: RestCatalog, http: httpx.Client) -> None:
    root = unique("paged")
    rest_catalog.create_namespace(root)
    children = [(root, f"child_{i:02d}") for i in range(7)]
    for child in children:
        rest_catalog.create_namespace(child)
    first_page = http.get("/v1/default/namespaces", params={"parent": root, "pageSize": "2"}).json()
    assert len(first_page["namespaces"]) == 2
    assert first_page["next-page-token"]
    # A small page size makes pyiceberg follow next-page-token across several requests.
    paged = RestCatalog(
        "floe-paged",
        uri=rest_catalog.uri,
        credential=rest_catalog.properties["credential"],
        **{"rest-page-size": "2"},
    )
    assert sorted(paged.list_namespaces(root)) == children


def test_update_and_remove_properties(rest_catalog: RestCatalog) -> None:
    name = unique()
    rest_catalog.create_namespace(name, {"keep": "k", "drop-me": "x", "change-me": "old"})
    summary = rest_catalog.update_namespace_properties(
        name, removals={"drop-me", "never-existed"}, updates={"change-me": "new", "added": "a"}
    )
    assert sorted(summary.removed) == ["drop-me"]
    assert sorted(summary.updated) == ["added", "change-me"]
    assert sorted(summary.missing) == ["never-existed"]
    assert user_properties(rest_catalog, name) == {"keep": "k", "change-me": "new", "added": "a"}


def test_update_properties_of_missing_namespace(rest_catalog: RestCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.update_namespace_properties(unique("missing"), updates={"a": "b"})


def test_load_missing_namespace(rest_catalog: RestCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.load_namespace_properties(unique("missing"))


def test_exists_and_drop(rest_catalog: RestCatalog) -> None:
    name = unique()
    assert not rest_catalog.namespace_exists(name)
    rest_catalog.create_namespace(name)
    assert rest_catalog.namespace_exists(name)
    rest_catalog.drop_namespace(name)
    assert not rest_catalog.namespace_exists(name)
    assert (name,) not in rest_catalog.list_namespaces()
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.drop_namespace(name)
    # The name is free again after a drop.
    rest_catalog.create_namespace(name, {"again": "yes"})
    assert user_properties(rest_catalog, name) == {"again": "yes"}


def test_drop_namespace_with_table_fails(rest_catalog: RestCatalog) -> None:
    name = unique()
    rest_catalog.create_namespace(name)
    rest_catalog.create_table((name, "t"), schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        rest_catalog.drop_namespace(name)
    assert rest_catalog.table_exists((name, "t"))
    rest_catalog.drop_table((name, "t"))
    rest_catalog.drop_namespace(name)
    assert not rest_catalog.namespace_exists(name)


def test_drop_namespace_with_child_namespace_fails(rest_catalog: RestCatalog) -> None:
    root = unique()
    rest_catalog.create_namespace(root)
    rest_catalog.create_namespace((root, "child"))
    with pytest.raises(NamespaceNotEmptyError):
        rest_catalog.drop_namespace(root)
    rest_catalog.drop_namespace((root, "child"))
    rest_catalog.drop_namespace(root)
    assert not rest_catalog.namespace_exists(root)


def test_drop_namespace_with_view_fails(rest_catalog: RestCatalog, http: httpx.Client) -> None:
    name = unique()
    rest_catalog.create_namespace(name)
    # pyiceberg only reaches views through create_view, exercised in the view tests; a raw request keeps
    # this test about namespaces.
    response = http.post(
        f"/v1/default/namespaces/{name}/views",
        json={
            "name": "v",
            "schema": {"type": "struct", "schema-id": 0, "fields": []},
            "view-version": {
                "version-id": 1,
                "schema-id": 0,
                "timestamp-ms": 1,
                "summary": {},
                "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
                "default-namespace": [name],
            },
            "properties": {},
        },
    )
    assert response.status_code == 200, response.text
    with pytest.raises(NamespaceNotEmptyError):
        rest_catalog.drop_namespace(name)
    rest_catalog.drop_view((name, "v"))
    rest_catalog.drop_namespace(name)


SPECIAL_NAMES = [
    pytest.param("with.dot", id="dot"),
    pytest.param("with/slash", id="slash"),
    pytest.param("with space", id="space"),
    pytest.param("ünïcødé-名前-😀", id="unicode"),
    pytest.param("per%cent%2F", id="percent"),
    pytest.param("a+b&c=d?e#f", id="url-reserved"),
]


@pytest.mark.parametrize("special", SPECIAL_NAMES)
def test_special_characters_round_trip(rest_catalog: RestCatalog, special: str) -> None:
    root = unique("special")
    # Tuples keep pyiceberg from splitting names on dots.
    rest_catalog.create_namespace((root,))
    nested = (root, special)
    rest_catalog.create_namespace(nested, {"name": special})
    assert rest_catalog.list_namespaces((root,)) == [nested]
    assert user_properties(rest_catalog, nested) == {"name": special}
    assert rest_catalog.namespace_exists(nested)

    top = (f"{special}-{uuid.uuid4().hex[:6]}",)
    rest_catalog.create_namespace(top)
    assert top in rest_catalog.list_namespaces()
    assert rest_catalog.namespace_exists(top)

    table = rest_catalog.create_table((*nested, special), schema=SCHEMA)
    table.append(pa.table({"id": pa.array([7], pa.int64())}, schema=SCHEMA))
    assert rest_catalog.list_tables(nested) == [(*nested, special)]
    loaded = rest_catalog.load_table((*nested, special))
    assert loaded.name() == (*nested, special)
    assert loaded.scan().to_arrow().column("id").to_pylist() == [7]

    summary = rest_catalog.update_namespace_properties(nested, removals={"name"}, updates={special: special})
    assert summary.removed == ["name"]
    assert user_properties(rest_catalog, nested) == {special: special}

    rest_catalog.drop_table((*nested, special))
    rest_catalog.drop_namespace(nested)
    rest_catalog.drop_namespace(top)
    assert not rest_catalog.namespace_exists(nested)
    assert not rest_catalog.namespace_exists(top)


def test_every_namespace_has_its_warehouse_folder_as_location(
    rest_catalog: RestCatalog, catalog_server: CatalogProcess
) -> None:
    """Engines (Trino) place new tables below a namespace's `location`: without one, Trino let the
    catalog pick and then refused the folder it found."""
    root = unique("located")
    rest_catalog.create_namespace(root)
    rest_catalog.create_namespace((root, "a b"))
    warehouse = catalog_server.warehouse_path.resolve().as_uri()
    assert rest_catalog.load_namespace_properties(root) == {"location": f"{warehouse}/{root}"}
    nested = rest_catalog.load_namespace_properties((root, "a b"))["location"]
    assert nested == f"{warehouse}/{root}/{path_segment('a b')}"
    table = rest_catalog.create_table((root, "a b", "t"), schema=SCHEMA)
    assert table.location().startswith(nested + "/t-")


def test_a_namespace_location_set_by_the_user_is_canonical_and_places_its_tables(
    rest_catalog: RestCatalog, catalog_server: CatalogProcess
) -> None:
    name = unique("placed")
    folder = catalog_server.warehouse_path.resolve() / name / "custom"
    rest_catalog.create_namespace(name, {"location": f"{folder}/./"})
    stored = rest_catalog.load_namespace_properties(name)["location"]
    assert stored == f"file://{folder}"
    table = rest_catalog.create_table((name, "t"), schema=SCHEMA)
    assert table.location().startswith(f"file://{folder}/t-")
    table.append(pa.table({"id": pa.array([1], pa.int64())}, schema=SCHEMA))
    assert all(task.file.file_path.startswith(f"file://{folder}/t-") for task in table.scan().plan_files())

    moved = catalog_server.warehouse_path.resolve() / name / "moved"
    rest_catalog.update_namespace_properties(name, updates={"location": moved.as_uri()})
    assert rest_catalog.load_namespace_properties(name)["location"] == moved.as_uri()
    assert rest_catalog.create_table((name, "u"), schema=SCHEMA).location().startswith(f"file://{moved}/u-")
    # Removing it brings back the warehouse folder.
    rest_catalog.update_namespace_properties(name, removals={"location"})
    default = rest_catalog.load_namespace_properties(name)["location"]
    assert default == catalog_server.warehouse_path.resolve().joinpath(name).as_uri()


@pytest.mark.parametrize(
    ("location", "error"),
    [("relative/folder", "relative path"), ("gs://bucket/x", "unsupported storage scheme")],
)
def test_an_invalid_namespace_location_is_refused(
    rest_catalog: RestCatalog, location: str, error: str
) -> None:
    name = unique("bad")
    with pytest.raises(BadRequestError, match=error):
        rest_catalog.create_namespace(name, {"location": location})
    assert not rest_catalog.namespace_exists(name)
    rest_catalog.create_namespace(name)
    with pytest.raises(BadRequestError, match=error):
        rest_catalog.update_namespace_properties(name, updates={"location": location})
