"""Issue 29's console attacks in a real browser (Debian's Chromium through Playwright, against a `floe serve`
process): a table whose name closes a Python string literal and calls `os.system` shows on the connect page
as a quoted literal, and the text the Copy button puts on the clipboard parses back to exactly that name;
a reader's YAML bomb, posted from its signed-in page with its valid CSRF token, is refused at once while
the server keeps answering."""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pyarrow as pa
import pytest
from playwright.sync_api import Browser, expect
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.console.session import CSRF_COOKIE, CSRF_FIELD
from devtools.catalog_server import CatalogProcess
from tests.e2e.browser import launched_chromium, sign_in
from tests.unit.test_config_bounds import yaml_bomb

HOSTILE = 'x"); import os; os.system("echo pwned"); ("'


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with launched_chromium() as browser:
        yield browser


def _cluster_and_reader(catalog_server: CatalogProcess) -> tuple[str, dict[str, str]]:
    cluster = f"hostile_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        created = http.post("/management/v1/keys", json={"role": "reader", "cluster": cluster})
        assert created.status_code == 201, created.text
    return cluster, created.json()


def _load_table_argument(code: str) -> object:
    (call,) = [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "load_table"
    ]
    return ast.literal_eval(call.args[0])


@pytest.mark.timeout(300)
def test_the_copied_snippet_holds_a_hostile_name_as_data(
    chromium: Browser, catalog_server: CatalogProcess
) -> None:
    cluster, reader = _cluster_and_reader(catalog_server)
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_table((cluster, HOSTILE), Schema(NestedField(1, "id", LongType())))
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=catalog_server.url)
    page = context.new_page()
    try:
        sign_in(page, catalog_server.url, reader["client_id"], reader["client_secret"])
        page.get_by_role("link", name=f"{cluster}.{HOSTILE}").click()
        page.get_by_role("link", name="Connect an engine").click()
        expect(page.get_by_role("heading", name="pyiceberg")).to_be_visible()
        shown = page.locator("pre").first.inner_text()
        assert _load_table_argument(shown) == (cluster, HOSTILE)
        page.get_by_role("button", name="Copy").first.click()
        expect(page.get_by_role("button", name="Copied")).to_be_visible()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.strip() == shown.strip()
        assert _load_table_argument(copied) == (cluster, HOSTILE)
    finally:
        context.close()


@pytest.mark.timeout(300)
def test_a_readers_yaml_bomb_is_refused_at_once(chromium: Browser, catalog_server: CatalogProcess) -> None:
    _, reader = _cluster_and_reader(catalog_server)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, catalog_server.url, reader["client_id"], reader["client_secret"])
        status = page.evaluate(
            """async (config) => {
                const token = document.querySelector('input[name=csrf_token]').value;
                const body = new URLSearchParams({csrf_token: token, config});
                return (await fetch('/console/pipeline', {method: 'POST', body})).status;
            }""",
            yaml_bomb(12),
        )
        assert status == 403
        assert httpx.get(f"{catalog_server.url}/healthz", timeout=30).status_code == 200
    finally:
        context.close()


RUNNABLE_NAME = 'it\'s "quoted" \\ ünï 表'


@pytest.mark.timeout(600)
def test_the_connect_snippets_run_with_a_quoted_name(catalog_server: CatalogProcess, tmp_path: Path) -> None:
    """The console's pyiceberg and DuckDB snippets, copied from the page with the credentials filled in
    as the page says, run against the server and read a table whose name holds quotes, a backslash and
    non-ASCII letters: the quoting is right for the engines, not only for the parsers."""
    cluster, reader = _cluster_and_reader(catalog_server)
    catalog = catalog_server.catalog(warehouse="default")
    table = catalog.create_table((cluster, RUNNABLE_NAME), Schema(NestedField(1, "id", LongType())))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    path = f"/console/tables/default/{cluster}/{quote(RUNNABLE_NAME, safe='')}/connect"
    with httpx.Client(base_url=catalog_server.url, timeout=30, follow_redirects=False) as http:
        http.get("/console/sign-in")
        signed = http.post(
            "/console/sign-in",
            data={
                "client_id": reader["client_id"],
                "client_secret": reader["client_secret"],
                CSRF_FIELD: http.cookies[CSRF_COOKIE],
            },
        )
        assert signed.status_code == 303, signed.text[:300]
        page = http.get(path)
    assert page.status_code == 200, page.text[:300]
    snippets = [html.unescape(s) for s in re.findall(r"<code>(.*?)</code>", page.text, re.DOTALL)]
    credential = f"{reader['client_id']}:{reader['client_secret']}"
    pyiceberg = next(s for s in snippets if "load_catalog" in s).replace(
        "CLIENT_ID:CLIENT_SECRET", credential
    )
    assert run_python(pyiceberg).splitlines()[-1] == "3"
    duckdb = next(s for s in snippets if "CREATE SECRET" in s)
    # Key ids and secrets are URL-safe base64 and underscores: no quote to escape in SQL or Python.
    duckdb = duckdb.replace("'CLIENT_ID'", f"'{reader['client_id']}'")
    duckdb = duckdb.replace("'CLIENT_SECRET'", f"'{reader['client_secret']}'")
    assert run_python(duckdb, env={"HOME": str(tmp_path)}).splitlines()[-1] == "[(3,)]"


def run_python(program: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout
