"""The web console in a real browser: Debian's Chromium driven by Playwright against a `floe serve`
process, at a desktop (1280 px) and a phone (390 px) width. Sign in (a wrong secret first), the
overview, a table page with its snapshots and chart, creating a key whose secret pyiceberg then uses,
revoking it (pyiceberg refused after), a reader without write buttons, keyboard access, and sign out.
Screenshots of each page go to pytest's basetemp (`console-screenshots/`). The console over real
ingestion (lag, freshness, offsets, dead letters, a cluster reader, a form without its CSRF token) is
tested in test_ingest.py, beside the `floe ingest` that module already runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from playwright.sync_api import Browser, Page, expect
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from devtools.catalog_server import CatalogProcess
from tests.e2e.browser import launched_chromium, screenshot_directory, shoot, sign_in
from tests.unit.test_kafka_offsets import progress_props

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with launched_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def cluster(catalog_server: CatalogProcess) -> str:
    """A cluster with a table of two ingestion-like commits and a dead-letter table."""
    name = f"web_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    response = httpx.post(
        f"{catalog_server.url}/management/v1/clusters", json={"name": name}, headers=headers
    )
    assert response.status_code == 201, response.text
    catalog = catalog_server.catalog(warehouse="default")
    table = catalog.create_table(f"{name}.orders", Schema(NestedField(1, "id", LongType())))
    ids = pa.schema([pa.field("id", pa.int64())])
    table.append(pa.table({"id": [1, 2, 3]}, schema=ids), snapshot_properties=progress_props("o", {}, {0: 3}))
    table.append(pa.table({"id": [4]}, schema=ids), snapshot_properties=progress_props("o", {0: 3}, {0: 4}))
    dlq = catalog.create_table(f"{name}.orders_dlq", Schema(NestedField(1, "error", StringType())))
    dlq.append(pa.table({"error": ["not json"]}))
    return name


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_directory(tmp_path_factory)


def _fits_width(page: Page) -> bool:
    """No horizontal scrolling of the page itself (wide tables scroll inside their own boxes)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"))


@pytest.mark.parametrize("width", list(WIDTHS))
def test_admin_journey(
    chromium: Browser, catalog_server: CatalogProcess, cluster: str, screenshots: Path, width: str
) -> None:
    viewport_width, viewport_height = WIDTHS[width]
    context = chromium.new_context(viewport={"width": viewport_width, "height": viewport_height})
    page = context.new_page()
    url = catalog_server.url
    try:
        sign_in(page, url, catalog_server.admin_client_id, "wrong-secret")
        expect(page.get_by_role("alert")).to_contain_text("unknown client id or wrong secret")
        shoot(page, screenshots, f"{width}-sign-in-refused")

        sign_in(page, url, catalog_server.admin_client_id, catalog_server.admin_client_secret)
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"{cluster}.orders"))
        expect(row).to_contain_text("amber")
        expect(row).to_contain_text("1 dead letters in the last hour")
        expect(row).to_contain_text("ago")
        assert _fits_width(page), "the overview overflows the viewport"
        shoot(page, screenshots, f"{width}-overview")

        # Keyboard: the first Tab reaches the skip link; focus on a table link survives the auto-refresh.
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        table_link = page.get_by_role("link", name=f"{cluster}.orders")
        table_link.focus()
        page.wait_for_timeout(10_500)  # one polling interval
        expect(table_link).to_be_focused()

        page.get_by_role("link", name=f"{cluster}.orders").click()
        expect(page.get_by_role("heading", name=f"{cluster}.orders", exact=True)).to_be_visible()
        snapshots = page.get_by_role("region", name="Snapshots")
        expect(snapshots).to_contain_text("o 0:3 → 0:4")
        expect(snapshots).to_contain_text("o ∅ → 0:3")
        expect(page.locator(".uplot canvas")).to_have_count(1)  # the chart drew, from vendored uPlot
        # Its legend describes the chart until a point is hovered: no uPlot "--" placeholder (issue 33).
        expect(page.locator(".u-legend")).to_contain_text("2 shown, newest at")
        expect(page.locator(".u-legend")).not_to_contain_text("--")
        page.get_by_role("link", name="Load files and rows").click()  # htmx loads the fragment in place
        expect(page.get_by_role("region", name="Files and newest rows")).to_contain_text("2 files")
        expect(page.get_by_role("region", name="Files and newest rows")).to_contain_text("Newest rows")
        assert _fits_width(page), "the table page overflows the viewport"
        shoot(page, screenshots, f"{width}-table")

        page.get_by_role("link", name="Connect an engine").click()
        expect(page.get_by_role("heading", name="DuckDB")).to_be_visible()
        expect(page.locator("pre").first).to_contain_text(f'uri="{url}"')
        shoot(page, screenshots, f"{width}-connect")

        page.get_by_role("link", name="Keys & clusters").click()
        page.get_by_label("Role").select_option("reader")
        page.get_by_label("Cluster", exact=True).select_option(cluster)
        page.get_by_label("Description").fill(f"browser {width}")
        page.get_by_role("button", name="Create key").click()
        client_id = page.locator("#new-client-id").inner_text()
        secret = page.locator("#new-client-secret").inner_text()
        shoot(page, screenshots, f"{width}-key-created")
        # The key works: pyiceberg reads the cluster's table with it.
        key_catalog = catalog_server.catalog(credential=f"{client_id}:{secret}", warehouse="default")
        assert key_catalog.load_table(f"{cluster}.orders").scan().to_arrow().num_rows == 4

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name=f"Revoke key {client_id}").click()
        key_row = page.get_by_role("row").filter(has_text=client_id)
        expect(key_row).to_contain_text("revoked")
        with pytest.raises(httpx.HTTPStatusError):
            catalog_server.token(client_id, secret)

        page.get_by_role("link", name="Audit log").click()
        page.get_by_label("Action").fill("consoleRevokeKey")
        page.get_by_role("button", name="Filter").click()
        expect(page.get_by_role("row").filter(has_text=client_id)).to_contain_text("ok")
        shoot(page, screenshots, f"{width}-audit")

        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in to floe")).to_be_visible()
        page.goto(f"{url}/console/keys")
        expect(page).to_have_url(f"{url}/console/sign-in")
    finally:
        context.close()


def test_reader_sees_no_write_buttons_and_a_hand_made_post_is_refused(
    chromium: Browser, catalog_server: CatalogProcess, cluster: str, screenshots: Path
) -> None:
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    created = httpx.post(
        f"{catalog_server.url}/management/v1/keys",
        json={"role": "reader", "cluster": cluster},
        headers=headers,
    )
    key = created.json()
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, catalog_server.url, key["client_id"], key["client_secret"])
        expect(page.get_by_role("link", name=f"{cluster}.orders")).to_be_visible()
        expect(page.get_by_role("link", name="Keys")).to_have_count(0)
        expect(page.get_by_role("button", name="Create key")).to_have_count(0)
        # A form posted by hand from the signed-in page, with its valid CSRF token: the server refuses.
        status = page.evaluate(
            """async () => {
                const token = document.querySelector('input[name=csrf_token]').value;
                const body = new URLSearchParams({csrf_token: token, role: 'admin'});
                return (await fetch('/console/keys', {method: 'POST', body})).status;
            }"""
        )
        assert status == 403
        shoot(page, screenshots, "reader-overview")
    finally:
        context.close()


PIPELINE = """\
source_clusters:
  - name: {cluster}
    bootstrap_brokers: [{{hostname: localhost, port: 9092}}]
tables:
  - source_cluster_name: {cluster}
    source_topic: views
    source_format: json
    schema:
      fields:
        - {{name: id, id: 1, type: long}}
{extra}"""


def test_apply_a_pipeline_from_the_browser(
    chromium: Browser, catalog_server: CatalogProcess, screenshots: Path
) -> None:
    cluster = f"yaml_{uuid.uuid4().hex[:6]}"
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret)
        page.get_by_role("link", name="Pipeline").click()
        editor = page.get_by_role("textbox", name="floe.yaml")
        editor.fill(PIPELINE.format(cluster=cluster, extra="        - {name: at, id: 1, type: long}\n"))
        page.get_by_role("button", name="Dry run").click()
        expect(page.get_by_role("alert")).to_contain_text("line 11")
        expect(page.get_by_role("alert")).to_contain_text("duplicate field id 1")
        shoot(page, screenshots, "pipeline-error")
        page.get_by_role("textbox", name="floe.yaml").fill(PIPELINE.format(cluster=cluster, extra=""))
        page.get_by_role("button", name="Dry run").click()
        expect(page.get_by_role("status")).to_contain_text("Dry run: nothing changed yet")
        page.get_by_role("button", name="Apply this configuration").click()
        expect(page.get_by_role("status")).to_contain_text("applied")
        shoot(page, screenshots, "pipeline-applied")
        page.get_by_role("link", name="Overview").click()
        expect(page.get_by_role("link", name=f"{cluster}.views")).to_be_visible()
    finally:
        context.close()
