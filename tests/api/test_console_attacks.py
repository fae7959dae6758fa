"""Attacks on the console and the pipeline API over HTTP (issue 29): a YAML bomb or a deeply nested document
posted by any signed-in session, a huge audit cursor, a table whose data file is gone, hostile table names
on the connect page. Each gets a clear 4xx (or a page saying what failed) quickly, the server stays
responsive, and no answer names a server path."""

from __future__ import annotations

import ast
import html
import re
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import httpx
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.console import controllers
from devtools.catalog_server import CatalogProcess
from tests.api.test_console import Browser, Key, World, create_key, signed_in, text_of
from tests.unit.test_config_bounds import yaml_bomb
from tests.unit.test_schema_depth import nested

DEEP = "tables: " + "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def world(catalog_server: CatalogProcess) -> World:
    """A cluster of this module's own, with a key of every role."""
    cluster = f"attacked_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        reader = create_key(http, "reader", cluster)
        return World(
            cluster=cluster,
            other=cluster,
            admin=Key(catalog_server.admin_client_id, catalog_server.admin_client_secret),
            reader=reader,
            writer=create_key(http, "writer", cluster),
            cluster_admin=create_key(http, "admin", cluster),
            other_reader=reader,
        )


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every floe.yaml text the console parses (the catalog runs in this process)."""
    seen: list[str] = []
    original = controllers._read_pipeline

    def recording(text: str) -> Any:
        seen.append(text)
        return original(text)

    monkeypatch.setattr(controllers, "_read_pipeline", recording)
    return seen


def post_pipeline(browser: Browser, text: str) -> httpx.Response:
    return browser.post("/console/pipeline", {"config": text})


@pytest.mark.timeout(120)
def test_keys_that_may_not_apply_are_refused_before_the_yaml_is_parsed(
    catalog_server: CatalogProcess, world: World, parses: list[str]
) -> None:
    for key in (world.reader, world.writer, world.cluster_admin):
        browser = signed_in(catalog_server, key)
        try:
            for text in (yaml_bomb(12), DEEP):
                response = post_pipeline(browser, text)
                assert response.status_code == 403, response.text[:500]
                assert "Only global administrators may apply a pipeline configuration" in text_of(
                    response.text
                )
        finally:
            browser.close()
    assert parses == []


@pytest.mark.timeout(120)
def test_an_admin_posting_a_yaml_bomb_or_deep_nesting_gets_the_bound(
    catalog_server: CatalogProcess, world: World, parses: list[str]
) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        bomb = post_pipeline(browser, yaml_bomb(12))
        assert bomb.status_code == 400, bomb.text[:500]
        text = text_of(bomb.text)
        assert "line 6" in text
        assert "more than 200000 values once its aliases are expanded" in text
        deep = post_pipeline(browser, DEEP)
        assert deep.status_code == 400, deep.text[:500]
        assert "nested deeper than 64 levels" in text_of(deep.text)
        recursive = post_pipeline(browser, "tables: &t [*t]\n")
        assert recursive.status_code == 400
        assert "a recursive alias" in text_of(recursive.text)
        assert httpx.get(f"{catalog_server.url}/healthz", timeout=30).status_code == 200
    finally:
        browser.close()
    assert len(parses) == 3


@pytest.mark.timeout(180)
def test_the_yaml_is_parsed_off_the_event_loop(
    catalog_server: CatalogProcess, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parse is held until /healthz answered: were it on the event loop, /healthz could not."""
    started, release = threading.Event(), threading.Event()
    original = controllers._read_pipeline

    def held(text: str) -> Any:
        started.set()
        assert release.wait(120), "never released"
        return original(text)

    monkeypatch.setattr(controllers, "_read_pipeline", held)
    browser = signed_in(catalog_server, world.admin)
    answers: list[httpx.Response] = []
    poster = threading.Thread(target=lambda: answers.append(post_pipeline(browser, yaml_bomb(12))))
    poster.start()
    try:
        assert started.wait(60)
        assert httpx.get(f"{catalog_server.url}/healthz", timeout=30).status_code == 200
        assert not answers  # the bomb's request is still being handled
    finally:
        release.set()
        poster.join(timeout=120)
        browser.close()
    (answer,) = answers
    assert answer.status_code == 400


# -- the pipeline API (JSON) -----------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("depth", [100, 5000])
def test_the_api_refuses_deeply_nested_json(catalog_server: CatalogProcess, depth: int) -> None:
    headers = {"Authorization": f"Bearer {catalog_server.token()}", "Content-Type": "application/json"}
    body = '{"config": {"tables": ' + "[" * depth + "]" * depth + "}}"
    response = httpx.put(
        f"{catalog_server.url}/management/v1/pipeline", content=body, headers=headers, timeout=60
    )
    assert response.status_code == 400, response.text[:500]
    assert "nested" in response.json()["error"]["message"]


# -- the audit page's cursor -------------------------------------------------------------------------------


@pytest.mark.parametrize("before", ["99999999999999999999999999999", str(2**63), "0", "-5", "1e400", "x"])
def test_an_out_of_range_audit_cursor_is_a_400(
    catalog_server: CatalogProcess, world: World, before: str
) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        response = browser.get("/console/audit", before=before)
        assert response.status_code == 400, response.text[:500]
        assert "before" in text_of(response.text)
        assert browser.get("/console/audit", before=str(2**63 - 1)).status_code == 200
    finally:
        browser.close()


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-13-01"])
def test_audit_times_out_of_range_are_a_400(catalog_server: CatalogProcess, world: World, value: str) -> None:
    """Times whose offset moves them out of years 1 to 9999 in UTC (the database driver's 500 before)."""
    browser = signed_in(catalog_server, world.admin)
    try:
        for name in ("since", "until"):
            response = browser.get("/console/audit", **{name: value})
            assert response.status_code == 400, response.text[:500]
            assert f"Invalid {name}" in text_of(response.text)
        assert (
            browser.get(
                "/console/audit", since="0001-01-01T00:00:00", until="9999-12-31T23:59:59"
            ).status_code
            == 200
        )
    finally:
        browser.close()


# -- errors name no server path -----------------------------------------------------------------------------


def test_a_missing_data_file_is_reported_without_its_path(
    catalog_server: CatalogProcess, world: World
) -> None:
    name = f"gone_{uuid.uuid4().hex[:6]}"
    catalog = catalog_server.catalog(warehouse="default")
    table = catalog.create_table(f"{world.cluster}.{name}", Schema(NestedField(1, "id", LongType())))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    (data_file,) = [task.file.file_path for task in table.scan().plan_files()]
    local = Path(urlparse(data_file).path)
    local.unlink()
    browser = signed_in(catalog_server, world.reader)
    try:
        response = browser.get(f"/console/tables/default/{world.cluster}/{name}/sample")
        assert response.status_code == 200, response.text[:500]
        text = html.unescape(response.text)
        assert "The table's files could not be read." in text
        assert str(local.parent) not in text
        assert "/" + local.name not in text
    finally:
        browser.close()


# -- the connect page with a hostile table name ----------------------------------------------------------


def test_the_connect_page_shows_hostile_names_quoted(catalog_server: CatalogProcess, world: World) -> None:
    hostile = 'x"); import os; os.system("id"); ("'
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_table((world.cluster, hostile), Schema(NestedField(1, "id", LongType())))
    browser = signed_in(catalog_server, world.reader)
    try:
        path = f"/console/tables/default/{world.cluster}/{quote(hostile, safe='')}/connect"
        page = browser.get(path)
        assert page.status_code == 200, page.text[:500]
        snippets = [html.unescape(s) for s in re.findall(r"<code>(.*?)</code>", page.text, re.DOTALL)]
        pyiceberg = next(s for s in snippets if "load_catalog" in s)
        (loading,) = [
            node
            for node in ast.walk(ast.parse(pyiceberg))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "load_table"
        ]
        assert ast.literal_eval(loading.args[0]) == (world.cluster, hostile)
        duckdb = next(s for s in snippets if "CREATE SECRET" in s)
        assert 'FROM floe."' + world.cluster + '"."' + hostile.replace('"', '""') + '"' in duckdb
    finally:
        browser.close()


# -- nothing stored breaks a page later ---------------------------------------------------------------------


@pytest.mark.parametrize("timestamp_ms", [10**18, -(10**18)])
def test_a_snapshot_time_no_date_has_does_not_break_the_pages(
    catalog_server: CatalogProcess, world: World, timestamp_ms: int
) -> None:
    """A writer's commit may carry any `timestamp-ms`: the overview and the table page show it as a number."""
    name = f"timeless_{uuid.uuid4().hex[:6]}"
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_table(f"{world.cluster}.{name}", Schema(NestedField(1, "id", LongType())))
    headers = {"Authorization": f"Bearer {catalog_server.token(world.writer.client_id, world.writer.secret)}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        path = f"/v1/default/namespaces/{world.cluster}/tables/{name}"
        location = http.get(path).json()["metadata"]["location"]
        snapshot = {
            "snapshot-id": 7,
            "sequence-number": 1,
            "timestamp-ms": timestamp_ms,
            "manifest-list": f"{location}/metadata/snap-7.avro",
            "summary": {"operation": "append"},
            "schema-id": 0,
        }
        updates = [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
        ]
        committed = http.post(path, json={"requirements": [], "updates": updates})
    if committed.status_code != 200:  # refused at commit: then nothing is stored that could break a page
        assert 400 <= committed.status_code < 500, committed.text
        return
    browser = signed_in(catalog_server, world.reader)
    try:
        assert f"{world.cluster}.{name}" in browser.page("/console/")
        assert f"{timestamp_ms} ms (not a date)" in browser.page(
            f"/console/tables/default/{world.cluster}/{name}"
        )
    finally:
        browser.close()


@pytest.mark.parametrize("days", ["inf", "-inf", "nan", "1e300", "-1", "x"])
def test_a_key_expiry_no_date_has_is_a_400(catalog_server: CatalogProcess, world: World, days: str) -> None:
    browser = signed_in(catalog_server, world.admin)
    try:
        response = browser.post(
            "/console/keys", {"role": "reader", "cluster": world.cluster, "expires_in_days": days}
        )
        assert response.status_code == 400, response.text[:500]
    finally:
        browser.close()


@pytest.mark.parametrize(
    ("kind", "depth"), [("struct", 32), ("list", 32), ("struct", 33), ("list", 200), ("list", 900)]
)
def test_a_deeply_nested_schema_is_refused_or_shown(
    catalog_server: CatalogProcess, world: World, kind: str, depth: int
) -> None:
    """A writer's table whose column is a struct of structs … or a list of lists …: up to 32 nested types
    it is created and the console shows it; deeper it is refused with a 400 before pyiceberg parses it
    (a RecursionError, a 500, before)."""
    name = f"deep_{kind}_{depth}_{uuid.uuid4().hex[:6]}"
    schema = nested(depth - 1, kind)
    headers = {"Authorization": f"Bearer {catalog_server.token(world.writer.client_id, world.writer.secret)}"}
    created = httpx.post(
        f"{catalog_server.url}/v1/default/namespaces/{world.cluster}/tables",
        json={"name": name, "schema": schema},
        headers=headers,
        timeout=60,
    )
    if depth > 32:
        assert created.status_code == 400, created.text[:500]
        assert "types nested more than 32 levels deep" in created.json()["error"]["message"]
        flat = {"type": "struct", "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}
        path = f"{catalog_server.url}/v1/default/namespaces/{world.cluster}/tables"
        assert httpx.post(path, json={"name": name, "schema": flat}, headers=headers).status_code == 200
        update = {"action": "add-schema", "schema": {**schema, "schema-id": 1}}
        evolved = httpx.post(
            f"{path}/{name}", json={"requirements": [], "updates": [update]}, headers=headers
        )
        assert evolved.status_code == 400, evolved.text[:500]
        assert "types nested more than 32 levels deep" in evolved.json()["error"]["message"]
        return
    assert created.status_code == 200, created.text[:500]
    browser = signed_in(catalog_server, world.reader)
    try:
        for path in ("", "/connect"):
            page = browser.get(f"/console/tables/default/{world.cluster}/{name}{path}")
            assert page.status_code == 200, page.text[:500]
        assert f"{world.cluster}.{name}" in browser.page("/console/")
    finally:
        browser.close()


# -- deep JSON anywhere in a writer's request -----------------------------------------------------------


def _deep(depth: int) -> object:
    value: object = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.timeout(300)
@pytest.mark.parametrize("depth", [150, 400])
def test_deep_json_in_any_writer_request_is_never_a_500(
    catalog_server: CatalogProcess, world: World, depth: int
) -> None:
    """Deeply nested JSON in every place a writer's request takes an object: a 4xx each time (or accepted
    when the place ignores it), never a RecursionError's 500."""
    deep = _deep(depth)
    name = f"fuzz_{depth}_{uuid.uuid4().hex[:6]}"
    flat = {"type": "struct", "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}
    headers = {"Authorization": f"Bearer {catalog_server.token(world.writer.client_id, world.writer.secret)}"}
    base = f"/v1/default/namespaces/{world.cluster}"
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=60) as http:
        assert http.post(f"{base}/tables", json={"name": name, "schema": flat}).status_code == 200
        view = {
            "name": f"{name}_v",
            "schema": flat,
            "view-version": {
                "version-id": 1,
                "timestamp-ms": 1,
                "schema-id": 0,
                "summary": {},
                "default-namespace": [world.cluster],
                "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
            },
            "properties": {},
        }
        attempts: list[tuple[str, str, object]] = [
            (
                "POST",
                "/v1/default/namespaces",
                {"namespace": [world.cluster, name], "properties": {"a": deep}},
            ),
            ("POST", "/tables", {"name": f"{name}_2", "schema": flat, "partition-spec": {"fields": [deep]}}),
            (
                "POST",
                "/tables",
                {"name": f"{name}_3", "schema": flat, "write-order": {"order-id": 1, "fields": deep}},
            ),
            ("POST", "/tables", {"name": f"{name}_4", "schema": {**flat, "fields": [deep]}}),
            ("POST", f"/tables/{name}", {"requirements": [deep], "updates": []}),
            (
                "POST",
                f"/tables/{name}",
                {"requirements": [], "updates": [{"action": "add-spec", "spec": deep}]},
            ),
            (
                "POST",
                f"/tables/{name}",
                {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": deep}]},
            ),
            (
                "POST",
                f"/tables/{name}",
                {"requirements": [], "updates": [{"action": "set-statistics", "statistics": deep}]},
            ),
            ("POST", f"/tables/{name}/metrics", {"report-type": "scan-report", "metrics": deep}),
            ("POST", "/views", {**view, "view-version": {**view["view-version"], "representations": [deep]}}),  # type: ignore[dict-item]
            ("POST", "/views", {**view, "properties": {"a": deep}}),
        ]
        for method, path, body in attempts:
            answer = http.request(method, path if path.startswith("/v1/") else f"{base}{path}", json=body)
            assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:300])
        commit = {
            "table-changes": [
                {
                    "identifier": {"namespace": [world.cluster], "name": name},
                    "requirements": [],
                    "updates": [deep],
                }
            ]
        }
        answer = http.post("/v1/default/transactions/commit", json=commit)
        assert answer.status_code < 500, answer.text[:300]
