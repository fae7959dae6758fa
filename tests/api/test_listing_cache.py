"""listTables/listViews served from the listing cache: a table or view created, registered, renamed or
dropped through another catalog process is listed (or gone) on the very next listing, pages stay
consistent across a change, a page cached for one cluster is never shown to another's key, and the
migration that adds the listing version keeps existing namespaces."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa
from alembic import command

from catalog.migrations import alembic_config, upgrade_database
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.test_idempotency import run_sql
from tests.api.test_security import bearer, new_cluster, new_key, token_for

SCHEMA = pa.schema([("id", pa.int64())])
SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
}
VIEW = {
    "name": "v",
    "schema": SCHEMA_JSON,
    "view-version": {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1,
        "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["ns"],
    },
    "properties": {},
}


@pytest.fixture(scope="module")
def two_servers(
    new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[CatalogProcess, CatalogProcess]]:
    """Two catalog servers (as two `floe serve` processes would be) on one database, shared by this
    module's tests (each uses namespaces of its own)."""
    database_url = new_database()
    env = {"FLOE_ADMIN_CLIENT_ID": "floe-admin", "FLOE_ADMIN_CLIENT_SECRET": uuid.uuid4().hex}
    home = tmp_path_factory.mktemp("home")
    with (
        CatalogThread(database_url, home=home, env=env) as one,
        CatalogThread(database_url, home=home, env=env) as two,
    ):
        yield one, two


def _names(client: httpx.Client, path: str, query: str = "") -> list[str]:
    listed = client.get(f"{path}?{query}" if query else path)
    assert listed.status_code == 200, listed.text
    return [identifier["name"] for identifier in listed.json()["identifiers"]]


def test_changes_through_another_server_are_listed_at_once(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    one, two = two_servers
    one.catalog().create_namespace("ns")
    one.catalog().create_namespace("other")
    tables, views = "/v1/default/namespaces/ns/tables", "/v1/default/namespaces/ns/views"
    other_tables = "/v1/default/namespaces/other/tables"
    with (
        httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one,
        httpx.Client(base_url=two.url, headers=bearer(two.token())) as via_two,
    ):
        for path in (tables, views, other_tables):
            assert _names(via_one, path) == []
            assert _names(via_one, path) == []  # cached by server one now

        two.catalog().create_table("ns.a", schema=SCHEMA)
        assert _names(via_one, tables) == ["a"]
        assert _names(via_one, views) == []

        created = via_two.post(views, json=VIEW)
        assert created.status_code == 200, created.text
        assert _names(via_one, views) == ["v"]
        assert _names(via_one, tables) == ["a"]

        renamed = via_two.post(
            "/v1/default/tables/rename",
            json={
                "source": {"namespace": ["ns"], "name": "a"},
                "destination": {"namespace": ["ns"], "name": "b"},
            },
        )
        assert renamed.status_code == 204, renamed.text
        assert _names(via_one, tables) == ["b"]

        moved = via_two.post(
            "/v1/default/tables/rename",
            json={
                "source": {"namespace": ["ns"], "name": "b"},
                "destination": {"namespace": ["other"], "name": "b"},
            },
        )
        assert moved.status_code == 204, moved.text
        assert _names(via_one, tables) == []
        assert _names(via_one, other_tables) == ["b"]

        location = via_one.get(f"{other_tables}/b").json()["metadata-location"]
        assert via_two.delete(f"{other_tables}/b").status_code == 204  # no purge: the files stay
        assert _names(via_one, other_tables) == []

        registered = via_two.post(
            "/v1/default/namespaces/ns/register", json={"name": "again", "metadata-location": location}
        )
        assert registered.status_code == 200, registered.text
        assert _names(via_one, tables) == ["again"]

        assert via_two.delete(f"{views}/v").status_code == 204
        assert _names(via_one, views) == []

        # A namespace dropped and created again through the other server lists as the new one.
        assert via_two.delete(f"{tables}/again").status_code == 204
        assert via_two.delete("/v1/default/namespaces/ns").status_code == 204
        missing = via_one.get(tables)
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "NoSuchNamespaceException"
        two.catalog().create_namespace("ns")
        assert _names(via_one, tables) == []


def test_pages_across_a_change(two_servers: tuple[CatalogProcess, CatalogProcess]) -> None:
    one, two = two_servers
    one.catalog().create_namespace("paged")
    for name in ("a", "c", "d", "e"):
        one.catalog().create_table(f"paged.{name}", schema=SCHEMA)
    tables = "/v1/default/namespaces/paged/tables"
    with httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one:
        first = via_one.get(tables, params={"pageSize": 2}).json()
        assert [i["name"] for i in first["identifiers"]] == ["a", "c"]
        token = first["next-page-token"]
        second = via_one.get(tables, params={"pageSize": 2, "pageToken": token}).json()
        assert [i["name"] for i in second["identifiers"]] == ["d", "e"]
        assert second["next-page-token"] is None  # nothing after e

        # Tables created through the other server after the first page: the next page (already cached
        # for this token) continues after the last name seen, and takes the new names in order.
        two.catalog().create_table("paged.b", schema=SCHEMA)  # before the token: the first page has it
        two.catalog().create_table("paged.cc", schema=SCHEMA)
        second = via_one.get(tables, params={"pageSize": 2, "pageToken": token}).json()
        assert [i["name"] for i in second["identifiers"]] == ["cc", "d"]
        third = via_one.get(tables, params={"pageSize": 2, "pageToken": second["next-page-token"]}).json()
        assert [i["name"] for i in third["identifiers"]] == ["e"]
        assert third["next-page-token"] is None
        first = via_one.get(tables, params={"pageSize": 2}).json()
        assert [i["name"] for i in first["identifiers"]] == ["a", "b"]

        # A dropped table leaves the pages it was on.
        two.catalog().drop_table("paged.d")
        second = via_one.get(tables, params={"pageSize": 2, "pageToken": token}).json()
        assert [i["name"] for i in second["identifiers"]] == ["cc", "e"]
        assert _names(via_one, tables) == ["a", "b", "c", "cc", "e"]

        bad = via_one.get(tables, params={"pageToken": "%%"})
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "BadRequestException"


def test_concurrent_changes_across_namespaces_through_two_servers(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    """Renames between two namespaces in both directions, creates and drops, all at once through both
    servers: every change counts in the namespaces it touches (no deadlock on their version rows, no
    500), and the cached listings end up exactly as the tables are."""
    one, two = two_servers
    one.catalog().create_namespace("left")
    one.catalog().create_namespace("right")
    count = 6
    for i in range(count):
        one.catalog().create_table(f"left.l{i}", schema=SCHEMA)
        one.catalog().create_table(f"right.r{i}", schema=SCHEMA)
    clients = [
        httpx.Client(base_url=server.url, headers=bearer(server.token()), timeout=60) for server in (one, two)
    ]
    for client in clients:  # both servers cache both listings
        assert len(_names(client, "/v1/default/namespaces/left/tables")) == count

    def rename(client: httpx.Client, source: str, target: str, name: str) -> None:
        body = {
            "source": {"namespace": [source], "name": name},
            "destination": {"namespace": [target], "name": name},
        }
        answer = client.post("/v1/default/tables/rename", json=body)
        assert answer.status_code == 204, answer.text

    def work(i: int) -> None:
        client = clients[i % 2]
        rename(client, "left", "right", f"l{i}")
        rename(client, "right", "left", f"r{i}")
        created = client.post(
            "/v1/default/namespaces/right/tables", json={"name": f"n{i}", "schema": SCHEMA_JSON}
        )
        assert created.status_code == 200, created.text
        dropped = client.delete(f"/v1/default/namespaces/right/tables/l{i}")
        assert dropped.status_code == 204, dropped.text

    with ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(work, range(count)))
    for client in clients:
        assert _names(client, "/v1/default/namespaces/left/tables") == sorted(f"r{i}" for i in range(count))
        assert _names(client, "/v1/default/namespaces/right/tables") == sorted(f"n{i}" for i in range(count))
        client.close()


@pytest.mark.parametrize("collection", ["tables", "views"])
def test_cached_listings_stay_inside_their_cluster(
    catalog_server: CatalogProcess, http: httpx.Client, collection: str
) -> None:
    a, b = new_cluster(http), new_cluster(http)
    catalog_server.catalog().create_table(f"{a}.events", schema=SCHEMA)
    listing = f"/v1/default/namespaces/{a}/{collection}"
    a_reader = bearer(token_for(catalog_server, new_key(http, a, "reader")))
    b_admin = bearer(token_for(catalog_server, new_key(http, b, "admin")))
    for query in ("", "pageSize=1", "pageSize=1&pageToken=ZXZlbnRz"):
        path = f"{listing}?{query}" if query else listing
        assert http.get(path).status_code == 200  # cached by the global admin
        assert http.get(path, headers=a_reader).status_code == 200  # and by a reader of the cluster
        refused = http.get(path, headers=b_admin)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["type"] == "NoSuchNamespaceException"
        assert b"events" not in refused.content
        assert http.get(path, headers={"Authorization": "Bearer not-a-token"}).status_code == 401


def test_migration_0009_starts_existing_namespaces_at_version_0(fresh_database_url: str) -> None:
    upgrade_database(fresh_database_url, "0008")
    run_sql(
        fresh_database_url,
        sa.text(
            "INSERT INTO warehouses (id, name, location, properties) VALUES ('w', 'lake', 'file:///l', '{}')"
        ),
    )
    run_sql(
        fresh_database_url,
        sa.text(
            "INSERT INTO namespaces (id, warehouse_id, key, parent_key, properties) "
            "VALUES ('n', 'w', 'db', '', '{}')"
        ),
    )
    upgrade_database(fresh_database_url, "0009")
    assert run_sql(fresh_database_url, sa.text("SELECT id, listing_version FROM namespaces")) == [("n", 0)]
    command.downgrade(alembic_config(fresh_database_url), "0008")
    assert run_sql(fresh_database_url, sa.text("SELECT id, key FROM namespaces")) == [("n", "db")]
    upgrade_database(fresh_database_url)
    assert run_sql(fresh_database_url, sa.text("SELECT listing_version FROM namespaces")) == [(0,)]
