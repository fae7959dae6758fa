"""The web console (`/console`) over HTTP against the session's in-process catalog: sign-in and its
cookies, CSRF refusals, sessions that end when the key is revoked, what cluster and reader keys may see
and do, and every page rendering real data (tables committed through pyiceberg with Kafka offsets in
their snapshots, maintenance passes, keys, the audit log, floe.yaml revisions). A real browser drives
it in tests/e2e/test_console_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, StructType

from catalog.api.app import build_litestar
from catalog.console.session import CSRF_COOKIE, CSRF_FIELD, SESSION_COOKIE
from catalog.settings import Settings
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from tests.api.catalog_thread import CatalogThread
from tests.api.test_maintenance import pass_body
from tests.unit.test_kafka_offsets import progress_props

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "device", StructType(NestedField(4, "os", StringType()))),
    identifier_field_ids=[1],
)
ROWS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("device", pa.struct([pa.field("os", pa.string())])),
    ]
)


def rows(*ids: int) -> pa.Table:
    return pa.table(
        {"id": list(ids), "region": ["eu"] * len(ids), "device": [{"os": "linux"}] * len(ids)}, schema=ROWS
    )


@dataclass
class Key:
    client_id: str
    secret: str


@dataclass
class World:
    """Two clusters, each with a table; the first with a dead-letter table and a maintenance pass."""

    cluster: str
    other: str
    admin: Key
    reader: Key
    writer: Key
    cluster_admin: Key
    other_reader: Key


def create_key(http: httpx.Client, role: str, cluster: str | None) -> Key:
    response = http.post("/management/v1/keys", json={"role": role, "cluster": cluster})
    assert response.status_code == 201, response.text
    body = response.json()
    return Key(body["client_id"], body["client_secret"])


@pytest.fixture(scope="module")
def world(catalog_server: CatalogProcess) -> Iterator[World]:
    cluster, other = f"shop_{uuid.uuid4().hex[:6]}", f"rival_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        for name in (cluster, other):
            assert http.post("/management/v1/clusters", json={"name": name}).status_code == 201
        catalog = catalog_server.catalog(warehouse="default")
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
        orders = catalog.create_table(f"{cluster}.orders", SCHEMA, partition_spec=spec)
        orders.append(rows(1, 2, 3), snapshot_properties=progress_props("orders.v1", {}, {0: 3}))
        orders.append(rows(4, 5), snapshot_properties=progress_props("orders.v1", {0: 3}, {0: 5}))
        dlq = catalog.create_table(f"{cluster}.orders_dlq", Schema(NestedField(1, "error", StringType())))
        dlq.append(pa.table({"error": ["bad json", "missing id"]}))
        catalog.create_table(f"{other}.secrets", Schema(NestedField(1, "id", LongType())))
        recorded = http.post("/management/v1/maintenance/passes", json=pass_body([cluster], "orders"))
        assert recorded.status_code == 201, recorded.text
        yield World(
            cluster=cluster,
            other=other,
            admin=Key(catalog_server.admin_client_id, catalog_server.admin_client_secret),
            reader=create_key(http, "reader", cluster),
            writer=create_key(http, "writer", cluster),
            cluster_admin=create_key(http, "admin", cluster),
            other_reader=create_key(http, "reader", other),
        )


class Browser:
    """An HTTP client that keeps cookies and posts forms with the page's CSRF token, as a browser does."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30, follow_redirects=False)

    def close(self) -> None:
        self.http.close()

    @property
    def csrf(self) -> str:
        if CSRF_COOKIE not in self.http.cookies:
            self.http.get("/console/sign-in")
        return str(self.http.cookies[CSRF_COOKIE])

    def sign_in(self, key: Key) -> httpx.Response:
        return self.post("/console/sign-in", {"client_id": key.client_id, "client_secret": key.secret})

    def post(self, path: str, data: dict[str, str] | None = None, *, csrf: bool = True) -> httpx.Response:
        form = {**(data or {}), **({CSRF_FIELD: self.csrf} if csrf else {})}
        return self.http.post(path, data=form)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params)

    def page(self, path: str, **params: Any) -> str:
        """The page's text without markup (what a reader sees), after checking it rendered."""
        response = self.get(path, **params)
        assert response.status_code == 200, response.text
        return text_of(response.text)


def text_of(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


@pytest.fixture
def browser(catalog_server: CatalogProcess) -> Iterator[Browser]:
    client = Browser(catalog_server.url)
    yield client
    client.close()


def signed_in(catalog_server: CatalogProcess, key: Key) -> Browser:
    client = Browser(catalog_server.url)
    response = client.sign_in(key)
    assert response.status_code == 303, response.text
    return client


def set_cookies(response: httpx.Response) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


# -- sign-in, cookies, CSRF -------------------------------------------------------------------------


def test_sign_in_sets_an_httponly_strict_session_cookie(browser: Browser, world: World) -> None:
    first = browser.get("/console/sign-in")
    assert first.status_code == 200
    csrf_cookie = set_cookies(first)[CSRF_COOKIE]
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/console"):
        assert flag in csrf_cookie
    assert "Secure" not in csrf_cookie  # plain HTTP here: a Secure cookie would never come back
    assert f'name="{CSRF_FIELD}" value="{browser.http.cookies[CSRF_COOKIE]}"' in first.text

    response = browser.sign_in(world.admin)
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
    session = set_cookies(response)[SESSION_COOKIE]
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/console"):
        assert flag in session
    # The session lives as long as its token, which may be one the key got a moment ago.
    max_age = int(session.split("Max-Age=", 1)[1].split(";", 1)[0])
    assert 3600 - 60 <= max_age <= 3600
    assert "Secure" not in session
    assert "Overview" in browser.page("/console")


def test_the_session_cookie_is_secure_over_https(catalog_server: CatalogProcess, world: World) -> None:
    """Behind a TLS-terminating proxy uvicorn reports the scheme it is told; here the ASGI scheme is set
    directly through Litestar's test client."""
    from litestar.testing import TestClient

    settings = Settings.from_env(
        {
            "FLOE_HOME": str(catalog_server.home),
            "FLOE_DATABASE_URL": str(catalog_server.database_url),
            "FLOE_ADMIN_CLIENT_ID": world.admin.client_id,
            "FLOE_ADMIN_CLIENT_SECRET": world.admin.secret,
            "FLOE_MIGRATE_ON_START": "false",
        }
    )
    with TestClient(build_litestar(settings), base_url="https://floe.test") as client:
        page = client.get("/console/sign-in")
        assert "Secure" in set_cookies(page)[CSRF_COOKIE]
        response = client.post(
            "/console/sign-in",
            data={
                "client_id": world.reader.client_id,
                "client_secret": world.reader.secret,
                CSRF_FIELD: client.cookies[CSRF_COOKIE],
            },
            follow_redirects=False,
        )
        assert response.status_code == 303, response.text
        assert "Secure" in set_cookies(response)[SESSION_COOKIE]


def test_wrong_secret_is_refused_without_a_session(browser: Browser, world: World) -> None:
    response = browser.sign_in(Key(world.reader.client_id, "not-the-secret"))
    assert response.status_code == 401
    assert "unknown client id or wrong secret" in text_of(response.text)
    assert SESSION_COOKIE not in set_cookies(response)
    assert "not-the-secret" not in response.text


def test_forms_without_the_csrf_token_are_refused(catalog_server: CatalogProcess, world: World) -> None:
    browser = Browser(catalog_server.url)
    try:
        browser.get("/console/sign-in")
        credentials = {"client_id": world.admin.client_id, "client_secret": world.admin.secret}
        missing = browser.post("/console/sign-in", credentials, csrf=False)
        assert missing.status_code == 403
        assert "CSRF" in text_of(missing.text)
        assert SESSION_COOKIE not in set_cookies(missing)
        wrong = browser.http.post("/console/sign-in", data={**credentials, CSRF_FIELD: "forged"})
        assert wrong.status_code == 403
        assert browser.sign_in(world.admin).status_code == 303
        # Signed in, a forged form still does nothing: no key is created.
        forged = browser.http.post("/console/keys", data={"role": "admin", CSRF_FIELD: "forged"})
        assert forged.status_code == 403
        assert "client secret" not in text_of(forged.text).lower()
    finally:
        browser.close()


def test_pages_need_a_session(browser: Browser) -> None:
    response = browser.get("/console")
    assert response.status_code == 303
    assert response.headers["location"] == "/console/sign-in"
    polled = browser.http.get("/console/overview/rows", headers={"HX-Request": "true"})
    assert polled.status_code == 401
    assert polled.headers["HX-Redirect"] == "/console/sign-in"
    browser.http.cookies.set(SESSION_COOKIE, "not-a-token", path="/console")
    assert browser.get("/console/keys").status_code == 303


def test_sign_out_ends_the_session(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.reader)
    try:
        response = browser.post("/console/sign-out")
        assert response.status_code == 303
        assert "Max-Age=0" in set_cookies(response)[SESSION_COOKIE]
        assert browser.get("/console").status_code == 303
    finally:
        browser.close()


# -- what each key sees -----------------------------------------------------------------------------


def test_overview_shows_tables_with_freshness_dead_letters_and_maintenance(
    catalog_server: CatalogProcess, world: World
) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        # Each cluster's own view: other tests of the session add clusters, and the overview shows ten a page.
        response = browser.get("/console", cluster=world.cluster)
        assert 'hx-trigger="every 10s"' in response.text
        text = text_of(response.text)
        assert f"Cluster {world.cluster}" in text
        assert f"Cluster {world.other}" in browser.page("/console", cluster=world.other)
        row = text[text.index(f"{world.cluster}.orders") :][:300]
        # 5 records in 2 data files, 2 dead letters (the _dlq table is folded into its table's row),
        # a maintenance pass; amber because of the dead letters.
        # The last maintenance pass said as the last commit is: how long ago (issue 33).
        assert re.search(r"orders not ingested \d+ s ago 5 2 [\d.]+ KiB 2 \d+ s ago", row), row
        assert f"{world.cluster}.orders_dlq" not in text
        assert re.search(r"amber ?: 2 dead letters in the last hour", text)
        rows = browser.get("/console/overview/rows", cluster=world.cluster)
        assert text_of(rows.text).count(f"{world.cluster}.orders") == 1
    finally:
        browser.close()


def test_a_cluster_key_sees_only_its_cluster(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.other_reader)
    try:
        text = browser.page("/console")
        assert f"{world.other}.secrets" in text
        assert world.cluster not in text
        own = browser.get(f"/console/tables/default/{world.other}/secrets")
        assert own.status_code == 200
        for path in (
            f"/console/tables/default/{world.cluster}/orders",
            f"/console/tables/default/{world.cluster}/orders/connect",
        ):
            response = browser.get(path)
            assert response.status_code == 404, path
            assert "orders" not in text_of(response.text).replace(f"{world.cluster}.orders", "")
        assert browser.get("/console/keys").status_code == 403
        assert browser.get("/console/audit").status_code == 403
        assert browser.get("/console/pipeline").status_code == 403
    finally:
        browser.close()


def test_table_page_shows_schema_partitioning_snapshots_offsets_and_passes(
    catalog_server: CatalogProcess, world: World
) -> None:
    browser = signed_in(catalog_server, world.reader)
    try:
        response = browser.get(f"/console/tables/default/{world.cluster}/orders")
        assert response.status_code == 200, response.text
        text = text_of(response.text)
        # Field ids, types, nesting and the identifier field.
        assert "1 id long yes yes" in text
        assert "2 region string no" in text
        assert "3 device struct no" in text
        assert "4 device.os string no" in text
        assert "identity(region) as region" in text
        # The snapshot timeline, newest first, with each commit's Kafka offsets.
        assert re.search(r"append 2 1 5 2 orders\.v1 0:3 → 0:5 .* append 3 1 3 1 orders\.v1 ∅ → 0:3", text)
        assert "orders.v1 : 0:5" in text  # the committed offsets ingestion resumes from
        assert "rewrite_data_files, expire_snapshots" in text
        assert 'href="/console/tables/default/' + world.cluster + '/orders_dlq"' in response.text
        assert "Records 5 Data files 2" in text
        data = re.search(
            r'<script type="application/json" id="throughput-data">(.*?)</script>', response.text
        )
        assert data is not None
        assert [p[1] for p in __import__("json").loads(data.group(1))] == [3, 2]
        # The reader sees no write buttons anywhere.
        assert '<form method="post" action="/console/keys' not in response.text
    finally:
        browser.close()


def test_connect_page_has_snippets_with_this_servers_url(
    catalog_server: CatalogProcess, world: World
) -> None:
    browser = signed_in(catalog_server, world.reader)
    try:
        text = browser.page(f"/console/tables/default/{world.cluster}/orders/connect")
        url = catalog_server.url
        assert f'uri="{url}"' in text
        assert f'load_table("{world.cluster}.orders")' in text
        assert f"ENDPOINT '{url}'" in text
        assert f'FROM floe."{world.cluster}"."orders"' in text
        assert f"spark.sql.catalog.floe.uri={url}" in text
        assert f"iceberg.rest-catalog.oauth2.server-uri={url}/v1/oauth/tokens" in text
    finally:
        browser.close()


# -- writes: refused for readers by the server, done for admins -------------------------------------


def test_readers_and_writers_cannot_post_management_forms(
    catalog_server: CatalogProcess, world: World
) -> None:
    for key in (world.reader, world.writer):
        browser = signed_in(catalog_server, key)
        try:
            assert browser.post("/console/keys", {"role": "admin"}).status_code == 403
            assert browser.post(f"/console/keys/{world.admin.client_id}/revoke").status_code in (403, 404)
            assert browser.post("/console/clusters", {"name": "nope"}).status_code == 403
            assert browser.post("/console/pipeline", {"config": "tables: []"}).status_code == 403
        finally:
            browser.close()
    admin = signed_in(catalog_server, world.admin)
    try:  # the admin key is still usable: nothing above revoked it
        assert admin.get("/console/keys").status_code == 200
    finally:
        admin.close()


def _key_row(browser: Browser, client_id: str) -> str:
    """The keys page's row of `client_id`, on whichever page it is (other tests of the session add keys)."""
    for number in range(1, 100):
        text = text_of(browser.get("/console/keys", page=number).text)
        if client_id in text:
            return text[text.index(client_id) :][:300]
        if "Next" not in text:
            break
    raise AssertionError(f"{client_id} is on no page of /console/keys")


def test_create_rotate_and_revoke_a_key(catalog_server: CatalogProcess, world: World) -> None:
    admin = signed_in(catalog_server, world.admin)
    try:
        created = admin.post(
            "/console/keys", {"role": "reader", "cluster": world.cluster, "description": "console test"}
        )
        assert created.status_code == 200, created.text
        assert created.headers["cache-control"] == "no-store"
        client_id = re.search(r'id="new-client-id">([^<]+)<', created.text).group(1)  # type: ignore[union-attr]
        secret = re.search(r'id="new-client-secret">([^<]+)<', created.text).group(1)  # type: ignore[union-attr]
        assert catalog_server.token(client_id, secret)
        assert secret not in admin.get("/console/keys").text  # shown once

        rotated = admin.post(f"/console/keys/{client_id}/rotate")
        assert rotated.status_code == 200
        new_secret = re.search(r'id="new-client-secret">([^<]+)<', rotated.text).group(1)  # type: ignore[union-attr]
        assert new_secret != secret
        session = signed_in(catalog_server, Key(client_id, new_secret))
        try:
            assert session.get("/console").status_code == 200
            assert admin.post(f"/console/keys/{client_id}/revoke").status_code == 303
            assert "revoked" in _key_row(admin, client_id)
            with pytest.raises(httpx.HTTPStatusError):
                catalog_server.token(client_id, new_secret)
            # The revoked key's console session ends (within the key-state cache's seconds).
            import time

            deadline = time.monotonic() + 10
            while session.get("/console").status_code == 200:
                assert time.monotonic() < deadline, "revoked key still signed in"
                time.sleep(0.25)
            assert session.get("/console").headers["location"] == "/console/sign-in"
        finally:
            session.close()
    finally:
        admin.close()


def test_a_cluster_admin_manages_its_own_keys_only(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.cluster_admin)
    try:
        text = browser.page("/console/keys")
        assert world.reader.client_id in text
        assert world.other_reader.client_id not in text
        # The cluster field is ignored: a cluster admin's keys are its cluster's.
        created = browser.post("/console/keys", {"role": "reader", "cluster": world.other})
        assert created.status_code == 200
        assert f"reader {world.cluster}" in text_of(created.text)
        refused = browser.post(f"/console/keys/{world.other_reader.client_id}/revoke")
        assert refused.status_code == 404
        assert browser.post("/console/clusters", {"name": "mine"}).status_code == 403
    finally:
        browser.close()


def test_create_a_cluster(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        name = f"new_{uuid.uuid4().hex[:6]}"
        assert browser.post("/console/clusters", {"name": name}).status_code == 303
        assert f"Cluster {name}" in browser.page("/console", cluster=name)
        bad = browser.post("/console/clusters", {"name": "no spaces"})
        assert bad.status_code == 400
        assert "Invalid cluster name" in text_of(bad.text)
    finally:
        browser.close()


def test_audit_log_filters(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        created = browser.post("/console/keys", {"role": "reader", "cluster": world.cluster})
        client_id = re.search(r'id="new-client-id">([^<]+)<', created.text).group(1)  # type: ignore[union-attr]
        assert browser.post(f"/console/keys/{client_id}/revoke").status_code == 303
        browser.sign_in(Key(world.writer.client_id, "wrong"))
        text = browser.page("/console/audit", action="consoleCreateKey", actor=world.admin.client_id)
        assert "consoleCreateKey" in text
        assert "consoleSignIn" not in text
        denied = browser.page("/console/audit", action="consoleSignIn", outcome="denied")
        entries = denied.split("Status Source", 1)[1]
        assert world.writer.client_id in entries
        assert " ok " not in entries
        assert "No entries match" in browser.page("/console/audit", since="2999-01-01T00:00")
        assert "consoleCreateKey" in browser.page("/console/audit", since="2000-01-01T00:00")
        assert browser.get("/console/audit", outcome="maybe").status_code == 400
        assert browser.get("/console/audit", since="yesterday").status_code == 400
        by_target = browser.page("/console/audit", target=client_id)
        assert f"consoleRevokeKey client_id={client_id} ok 303" in by_target
        # Its creation names it too (issue 33: a createKey entry names its target).
        created_entry = f"consoleCreateKey client_id={client_id} cluster={world.cluster} role=reader ok 200"
        assert created_entry in by_target
        assert by_target.count("client_id=") == 2
    finally:
        browser.close()


PIPELINE = """\
source_clusters:
  - name: {cluster}
    bootstrap_brokers: [{{hostname: localhost, port: 9092}}]
tables:
  - source_cluster_name: {cluster}
    source_topic: clicks
    source_format: json
    schema:
      fields:
        - {{name: id, id: 1, type: long}}
{extra}"""


def test_pipeline_dry_run_confirm_revisions_and_diff(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.admin)
    cluster = f"pipe_{uuid.uuid4().hex[:6]}"
    try:
        bad = browser.post(
            "/console/pipeline",
            {"config": PIPELINE.format(cluster=cluster, extra="        - {name: at, id: 1, type: long}\n")},
        )
        assert bad.status_code == 400
        assert re.search(
            r"line 11 ?, column \d+ ?: tables\[0\]\.schema\.fields\[1\]\.id ?: duplicate field id 1",
            text_of(bad.text),
        )

        good = PIPELINE.format(cluster=cluster, extra="")
        dry = browser.post("/console/pipeline", {"config": good})
        assert dry.status_code == 200
        assert f"Dry run: nothing changed yet Table Action Changes {cluster}.clicks create" in text_of(
            dry.text
        ), text_of(dry.text)[-2500:]
        assert "Apply this configuration" in dry.text
        assert cluster not in text_of(browser.get("/console").text)

        applied = browser.post("/console/pipeline", {"config": good, "confirm": "yes"})
        assert applied.status_code == 200
        revision = int(re.search(r"Revision (\d+) applied", text_of(applied.text)).group(1))  # type: ignore[union-attr]
        overview = browser.page("/console", cluster=cluster)
        assert f"{cluster}.clicks" in overview

        evolved = PIPELINE.format(
            cluster=cluster, extra="        - {name: note, id: 2, type: string, optional: true}\n"
        )
        browser.post("/console/pipeline", {"config": evolved, "confirm": "yes"})
        diff = browser.page("/console/pipeline", revision=revision + 1, compare=revision)
        assert f"Changes from revision {revision}" in diff
        assert re.search(r"\+ - name: note", diff) or "+  - name: note" in diff or "+ name: note" in diff, (
            diff
        )
        assert browser.get("/console/pipeline", revision=10**9).status_code == 404
    finally:
        browser.close()


def test_the_console_can_be_turned_off() -> None:
    def console_paths(env: dict[str, str]) -> list[str]:
        app = build_litestar(Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home", **env}))
        return [route.path for route in app.routes if route.path.startswith("/console")]

    assert "/console" in console_paths({})
    assert console_paths({"FLOE_CONSOLE": "off"}) == []


def test_overview_shows_the_ingestion_services_lag(fresh_database_url: str, tmp_path: Path) -> None:
    """With FLOE_CONSOLE_INGEST_METRICS_URL, the overview reads `floe ingest`'s metrics endpoint (its
    registry, served as `floe ingest` serves it) and shows lag and throughput of the tables the key sees."""
    from prometheus_client import start_http_server

    from ingest import metrics

    port = free_port()
    httpd, thread = start_http_server(port, addr="127.0.0.1", registry=metrics.REGISTRY)
    cluster = f"lag_{uuid.uuid4().hex[:6]}"
    env = {
        "FLOE_CONSOLE_INGEST_METRICS_URL": f"http://127.0.0.1:{port}/metrics",
        "FLOE_CONSOLE_METRICS_INTERVAL_SECONDS": "0.2",
    }
    try:
        with CatalogThread(fresh_database_url, home=tmp_path / "home", env=env) as server:
            admin = Key(server.admin_client_id, server.admin_client_secret)
            headers = {"Authorization": f"Bearer {server.token()}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
                assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
            table = server.catalog(warehouse="default").create_table(f"{cluster}.clicks", SCHEMA)
            table.append(rows(1), snapshot_properties=progress_props("clicks", {}, {0: 1}))
            for partition, lag, seconds in (("0", 120, 7200.0), ("1", 30, 12.5)):
                metrics.OFFSET_LAG.labels(f"{cluster}.clicks", "clicks", partition).set(lag)
                metrics.TIME_LAG.labels(f"{cluster}.clicks", "clicks", partition).set(seconds)
            metrics.RECORDS_RATE.labels(f"{cluster}.clicks").set(41.5)
            metrics.OFFSET_LAG.labels("someone_else.secret", "s", "0").set(9)
            metrics.TABLE_ERROR.labels(f"{cluster}.clicks", "topic clicks does not exist").set(1)

            browser = signed_in(server, admin)
            try:
                text = browser.page("/console")
                row = text[text.index(f"{cluster}.clicks") :][:200]
                assert re.search(r"clicks not ingested \d+ s ago 150 2\.0 h 41\.5 1 ", row), row
                assert re.search(
                    r"red ?: ingestion stopped: topic clicks does not exist; ingestion over an hour behind",
                    text,
                )
                assert "someone_else" not in text  # only tables this key sees
                # The catalog samples the readings into its database: the table page charts them.
                deadline = time.monotonic() + 20
                while True:
                    page = browser.get(f"/console/tables/default/{cluster}/clicks").text
                    assert "Ingestion over the last 24 h" in page
                    found = re.search(
                        r'<script type="application/json" id="history-data">(.*?)</script>', page
                    )
                    history = json.loads(found.group(1)) if found else []  # none: not sampled yet
                    if len(history) >= 2:
                        break
                    assert time.monotonic() < deadline, history
                    time.sleep(0.2)
                assert all(row[1:] == [41.5, 7200.0, 150] for row in history), history
                assert history == sorted(history)  # oldest first
                assert "Latest sample: 41.5 records/s, time lag 2.0 h, offset lag 150." in text_of(page)
                httpd.shutdown()
                httpd.server_close()  # refused at once (a listening socket nobody serves would time out)
                text = browser.page("/console/overview/rows")
                assert "Lag not shown: the ingestion service's metrics are unavailable." in text
                assert f"{cluster}.clicks" in text
            finally:
                browser.close()
    finally:
        metrics.TABLE_ERROR.remove(f"{cluster}.clicks", "topic clicks does not exist")
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_files_and_newest_rows_on_request(catalog_server: CatalogProcess, world: World) -> None:
    browser = signed_in(catalog_server, world.reader)
    try:
        page = browser.get(f"/console/tables/default/{world.cluster}/orders")
        assert f'hx-get="/console/tables/default/{world.cluster}/orders/sample"' in page.text
        text = browser.page(f"/console/tables/default/{world.cluster}/orders/sample")
        assert "Data file sizes (2 files in the current snapshot)" in text
        assert "< 1 MiB 2 1 to 8 MiB 0" in text
        # The newest data file first: the second commit's rows, then the first's.
        # A struct as JSON, not a Python repr (issue 33).
        assert 'id region device 4 eu {"os": "linux"} 5 eu {"os": "linux"} 1 eu' in text
        dead = browser.page(f"/console/tables/default/{world.cluster}/orders_dlq/sample")
        assert "Latest dead letters error bad json missing id" in dead
    finally:
        browser.close()
    other = signed_in(catalog_server, world.other_reader)
    try:
        assert other.get(f"/console/tables/default/{world.cluster}/orders/sample").status_code == 404
    finally:
        other.close()


def test_an_active_session_outlives_its_first_token(fresh_database_url: str, tmp_path: Path) -> None:
    """Past half its lifetime a page load renews the session's token (token exchange): with 4 s tokens
    (issued in whole seconds), pages loaded every 0.8 s keep working after the first token expired; a
    session left alone ends with its token."""
    env = {"FLOE_TOKEN_LIFETIME_SECONDS": "4"}
    with CatalogThread(fresh_database_url, home=tmp_path / "home", env=env) as server:
        active = signed_in(server, Key(server.admin_client_id, server.admin_client_secret))
        idle = signed_in(server, Key(server.admin_client_id, server.admin_client_secret))
        try:
            first = active.http.cookies[SESSION_COOKIE]
            renewals = set()
            for _ in range(6):
                time.sleep(0.8)
                response = active.get("/console")
                assert response.status_code == 200
                if SESSION_COOKIE in set_cookies(response):
                    renewals.add(active.http.cookies[SESSION_COOKIE])
            assert renewals - {first}
            assert idle.get("/console").status_code == 303  # its token expired: signed out
            sign_out = active.post("/console/sign-out")  # a POST never renews: sign-out sticks
            assert [c for c in sign_out.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE)] == [
                f"{SESSION_COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"
            ]
        finally:
            active.close()
            idle.close()
