"""pyiceberg's RestCatalog against a real floe server: views (create, load, list, exists, drop, register)
and the single name space views share with tables."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    NoSuchNamespaceError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view import View
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from devtools.catalog_server import CatalogProcess

VIEW_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False, doc="who"),
)
TABLE_SCHEMA = pa.schema([pa.field("id", pa.int64())])


def view_version(namespace: str, sql: str = "SELECT id, name FROM people", **dialects: str) -> ViewVersion:
    representations = [ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect="spark"))]
    representations += [
        ViewRepresentation(SQLViewRepresentation(type="sql", sql=text, dialect=dialect))
        for dialect, text in dialects.items()
    ]
    return ViewVersion(
        version_id=1,
        schema_id=0,
        representations=representations,
        default_namespace=(namespace,),
        summary={"engine-name": "pyiceberg-tests"},
    )


def create_view(rest_catalog: RestCatalog, namespace: str, name: str, **properties: str) -> View:
    view: View = rest_catalog.create_view(
        (namespace, name), schema=VIEW_SCHEMA, view_version=view_version(namespace), properties=properties
    )
    return view


def view_metadata_location(http: httpx.Client, namespace: str, name: str) -> str:
    """pyiceberg's View does not keep its metadata location; the load response has it."""
    response = http.get(f"/v1/default/namespaces/{quote(namespace, safe='')}/views/{quote(name, safe='')}")
    assert response.status_code == 200, response.text
    return str(response.json()["metadata-location"])


def local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme in ("file", ""), uri
    return Path(unquote(parsed.path))


def test_create_and_load_view(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str, http: httpx.Client
) -> None:
    created = rest_catalog.create_view(
        (namespace, "v"),
        schema=VIEW_SCHEMA,
        view_version=view_version(namespace, trino="SELECT id, name FROM people"),
        properties={"comment": "people view"},
    )
    loaded = rest_catalog.load_view((namespace, "v"))
    assert loaded.name() == (namespace, "v")
    assert loaded.uuid() == created.uuid()
    assert loaded.properties["comment"] == "people view"
    assert [(f.name, str(f.field_type), f.doc) for f in loaded.schema().fields] == [
        ("id", "long", None),
        ("name", "string", "who"),
    ]
    version = loaded.current_version()
    assert version.version_id == 1
    assert version.schema_id == loaded.schema().schema_id
    assert tuple(version.default_namespace) == (namespace,)
    assert version.summary == {"engine-name": "pyiceberg-tests"}
    assert sorted((r.root.dialect, r.root.sql) for r in version.representations) == [
        ("spark", "SELECT id, name FROM people"),
        ("trino", "SELECT id, name FROM people"),
    ]
    assert [entry.version_id for entry in loaded.history()] == [1]
    # The view lives in the warehouse and its metadata file is really written.
    assert local_path(loaded.location()).is_relative_to(catalog_server.warehouse_path)
    metadata_file = local_path(view_metadata_location(http, namespace, "v"))
    assert metadata_file.is_file()
    assert metadata_file.parent == local_path(loaded.location()) / "metadata"


def test_list_views_and_tables_are_separate(rest_catalog: RestCatalog, namespace: str) -> None:
    assert rest_catalog.list_views(namespace) == []
    create_view(rest_catalog, namespace, "v2")
    create_view(rest_catalog, namespace, "v1")
    rest_catalog.create_table((namespace, "t"), schema=TABLE_SCHEMA)
    assert sorted(rest_catalog.list_views(namespace)) == [(namespace, "v1"), (namespace, "v2")]
    assert rest_catalog.list_tables(namespace) == [(namespace, "t")]
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.list_views("missing_namespace_for_views")


def test_view_exists_and_drop(rest_catalog: RestCatalog, namespace: str) -> None:
    assert not rest_catalog.view_exists((namespace, "v"))
    create_view(rest_catalog, namespace, "v")
    assert rest_catalog.view_exists((namespace, "v"))
    # A view is not a table.
    assert not rest_catalog.table_exists((namespace, "v"))

    rest_catalog.drop_view((namespace, "v"))
    assert not rest_catalog.view_exists((namespace, "v"))
    assert rest_catalog.list_views(namespace) == []
    with pytest.raises(NoSuchViewError):
        rest_catalog.load_view((namespace, "v"))
    with pytest.raises(NoSuchViewError):
        rest_catalog.drop_view((namespace, "v"))
    # The name is free again.
    create_view(rest_catalog, namespace, "v", again="yes")
    assert rest_catalog.load_view((namespace, "v")).properties["again"] == "yes"


def test_missing_view_errors(rest_catalog: RestCatalog, namespace: str) -> None:
    with pytest.raises(NoSuchViewError):
        rest_catalog.load_view((namespace, "missing"))
    with pytest.raises(NoSuchViewError):
        rest_catalog.load_view(("missing_namespace_for_views", "v"))
    assert not rest_catalog.view_exists(("missing_namespace_for_views", "v"))


def test_views_and_tables_share_names(rest_catalog: RestCatalog, namespace: str) -> None:
    create_view(rest_catalog, namespace, "v", owner="first")
    with pytest.raises(ViewAlreadyExistsError):
        create_view(rest_catalog, namespace, "v", owner="second")
    assert rest_catalog.load_view((namespace, "v")).properties["owner"] == "first"

    rest_catalog.create_table((namespace, "t"), schema=TABLE_SCHEMA)
    with pytest.raises(ViewAlreadyExistsError):
        create_view(rest_catalog, namespace, "t")
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table((namespace, "v"), schema=TABLE_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.rename_table((namespace, "t"), (namespace, "v"))
    assert rest_catalog.table_exists((namespace, "t"))
    assert rest_catalog.view_exists((namespace, "v"))
    # Dropping a view by a table's name (or a table by a view's name) finds nothing.
    with pytest.raises(NoSuchViewError):
        rest_catalog.drop_view((namespace, "t"))
    assert rest_catalog.table_exists((namespace, "t"))


def test_register_view(rest_catalog: RestCatalog, namespace: str, http: httpx.Client) -> None:
    original = create_view(rest_catalog, namespace, "v", owner="me")
    location = view_metadata_location(http, namespace, "v")
    rest_catalog.drop_view((namespace, "v"))
    # Dropping a view keeps its metadata file, so it can be registered again under any name.
    assert local_path(location).is_file()

    registered = rest_catalog.register_view((namespace, "again"), location)
    assert registered.uuid() == original.uuid()
    loaded = rest_catalog.load_view((namespace, "again"))
    assert loaded.properties["owner"] == "me"
    assert loaded.current_version().representations == original.current_version().representations
    assert view_metadata_location(http, namespace, "again") == location
    assert rest_catalog.list_views(namespace) == [(namespace, "again")]

    with pytest.raises(ViewAlreadyExistsError):
        rest_catalog.register_view((namespace, "again"), location)
    rest_catalog.create_table((namespace, "t"), schema=TABLE_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.register_view((namespace, "t"), location)


@pytest.mark.parametrize(
    "name", ["with.dot", "with/slash", "with space", "ünïcødé-😀"], ids=["dot", "slash", "space", "unicode"]
)
def test_view_names_with_special_characters(
    rest_catalog: RestCatalog, namespace: str, http: httpx.Client, name: str
) -> None:
    rest_catalog.create_namespace((namespace, name))
    identifier = (namespace, name, name)
    # pyiceberg 0.12's create_view puts the percent-encoded name in the request body (see the test below),
    # so the view is created with a raw request; every other call goes through pyiceberg, which encodes
    # namespace levels and names correctly in paths.
    response = http.post(
        f"/v1/default/namespaces/{quote(namespace, safe='')}%1F{quote(name, safe='')}/views",
        json={
            "name": name,
            "schema": VIEW_SCHEMA.model_dump(by_alias=True),
            "view-version": view_version(namespace).model_dump(by_alias=True),
            "properties": {"n": name},
        },
    )
    assert response.status_code == 200, response.text
    assert rest_catalog.view_exists(identifier)
    assert rest_catalog.list_views((namespace, name)) == [identifier]
    assert rest_catalog.load_view(identifier).properties == {"n": name}
    assert [f.name for f in rest_catalog.load_view(identifier).schema().fields] == ["id", "name"]
    rest_catalog.drop_view(identifier)
    assert not rest_catalog.view_exists(identifier)
    assert rest_catalog.list_views((namespace, name)) == []


def test_view_name_in_request_body_is_taken_literally(rest_catalog: RestCatalog, namespace: str) -> None:
    # pyiceberg 0.12 sends `"name": "a%20b"` for a view called "a b". The server must not percent-decode
    # body fields (a name may really contain "%20"), so the view is called exactly what was sent.
    rest_catalog.create_view(
        (namespace, "a b"), schema=VIEW_SCHEMA, view_version=view_version(namespace), properties={}
    )
    assert rest_catalog.list_views(namespace) == [(namespace, "a%20b")]
    assert rest_catalog.view_exists((namespace, "a%20b"))
    assert not rest_catalog.view_exists((namespace, "a b"))
