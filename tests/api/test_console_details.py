"""The console's details a new user trips over (issue 33 item 5): an upsert table's Records are its live
rows (what `count(*)` gives) and the page says it is an upsert table; dead letters read as text, hex
and ISO times (no Python reprs); the overview's dead-letter count links to a paged dead-letters page,
which escapes what it shows; the last maintenance pass is relative, as the last commit is."""

from __future__ import annotations

import html
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, urlparse

import httpx
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.pipelines import dlq_schema
from catalog.pipelines.iceberg import UPSERT_PROPERTIES
from devtools.catalog_server import CatalogProcess
from tests.api.test_console import Browser, Key, signed_in
from tests.api.test_maintenance import pass_body

HOSTILE = "<script>alert(1)</script>&amp;"
FAILED_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclass
class Shop:
    cluster: str
    browser: Browser


def dead_letters(start: int, count: int) -> pa.Table:
    """`count` dead letters from offset `start`, the newest (highest offset) last."""
    schema = dlq_schema().as_arrow()
    rows = [
        {
            "topic": "orders",
            "partition": 0,
            "offset": n,
            "timestamp": FAILED_AT + timedelta(seconds=n),
            "key": b"k1",
            "value": b"\xff\x00" if n % 2 else f'{{"n": {n}}}'.encode(),
            "headers": [{"key": "h", "value": b"v"}],
            "error": f"{HOSTILE} #{n}",
            "failed_at": FAILED_AT,
        }
        for n in range(start, start + count)
    ]
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.fixture(scope="module")
def shop(catalog_server: CatalogProcess) -> Iterator[Shop]:
    cluster = f"det_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        catalog = catalog_server.catalog(warehouse="default")
        orders = catalog.create_table(f"{cluster}.orders", Schema(NestedField(1, "id", LongType())))
        orders.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
        dlq = catalog.create_table(f"{cluster}.orders_dlq", dlq_schema())
        dlq.append(dead_letters(0, 30))  # two files: 60 dead letters, 50 a page
        dlq.append(dead_letters(30, 30))
        passed = pass_body([cluster], "orders")
        passed["started_at"] = (datetime.now(UTC) - timedelta(minutes=7)).isoformat()
        assert http.post("/management/v1/maintenance/passes", json=passed).status_code == 201
        upsert_table(http, catalog_server, cluster)
    browser = signed_in(
        catalog_server, Key(catalog_server.admin_client_id, catalog_server.admin_client_secret)
    )
    try:
        yield Shop(cluster, browser)
    finally:
        browser.close()


def upsert_table(http: httpx.Client, catalog_server: CatalogProcess, cluster: str) -> None:
    """An upsert table as floe's merges leave it: 10 records written, 6 of them replaced (position
    deletes), so `count(*)` is 4. The snapshot is committed as Spark's MERGE commits one (its summary's
    totals); the pages read only the metadata."""
    catalog = catalog_server.catalog(warehouse="default")
    table = catalog.create_table(
        f"{cluster}.customers", Schema(NestedField(1, "id", LongType())), properties=UPSERT_PROPERTIES
    )
    table.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    current = table.current_snapshot()
    assert current is not None
    snapshot_id = current.snapshot_id + 1
    summary = {
        "operation": "overwrite",
        **{k: v for k, v in current.summary.additional_properties.items() if k.startswith("total-")},
        "added-position-deletes": "6",
        "added-delete-files": "1",
        "total-position-deletes": "6",
        "total-delete-files": "1",
        "total-equality-deletes": "0",
    }
    snapshot = {
        "snapshot-id": snapshot_id,
        "parent-snapshot-id": current.snapshot_id,
        "sequence-number": (current.sequence_number or 0) + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"{table.location()}/metadata/snap-{snapshot_id}-merge.avro",
        "summary": summary,
        "schema-id": 0,
    }
    updates = [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]
    committed = http.post(
        f"/v1/default/namespaces/{cluster}/tables/customers", json={"requirements": [], "updates": updates}
    )
    assert committed.status_code == 200, committed.text


def facts(page: str) -> dict[str, str]:
    return {
        html.unescape(k): html.unescape(re.sub(r"<[^>]+>", "", v)).strip()
        for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page)
    }


def test_an_upsert_tables_records_are_its_live_rows(shop: Shop) -> None:
    page = shop.browser.get(f"/console/tables/default/{shop.cluster}/customers")
    assert page.status_code == 200, page.text
    shown = facts(page.text)
    assert shown["Records"].startswith("4 ")  # 10 written, 6 replaced: count(*) is 4
    assert "count(*)" in shown["Records"]
    assert shown["Table mode"].startswith("upsert: one row per key")
    assert '<span class="badge">upsert table</span>' in page.text
    overview = shop.browser.page("/console", cluster=shop.cluster)
    row = overview.split(f"{shop.cluster}.customers", 1)[1]
    assert re.match(r"\s*in floe.yaml|\s*not ingested|\s*—", row) is not None
    assert (
        " 4 " in row.split(f"{shop.cluster}.orders", 1)[0]
        if f"{shop.cluster}.orders" in row
        else " 4 " in row
    )
    append = facts(shop.browser.get(f"/console/tables/default/{shop.cluster}/orders").text)
    assert append["Table mode"] == "append"
    assert append["Records"] == "2"


def test_the_overview_links_dead_letters_and_says_when_maintenance_ran(shop: Shop) -> None:
    response = shop.browser.get("/console", cluster=shop.cluster)
    assert response.status_code == 200
    link = f'href="/console/tables/default/{shop.cluster}/orders/dead-letters"'
    assert link in response.text
    assert re.search(link + r"[^>]*>60</a>", response.text)
    last_pass = re.search(
        r'data-label="Last maintenance"><time datetime="([^"]+)" title="([^"]+)">([^<]+)</time>',
        response.text,
    )
    assert last_pass is not None, response.text
    assert last_pass.group(3) == "7 min ago"
    assert last_pass.group(2).endswith(" UTC")
    assert last_pass.group(1).endswith("Z")


def test_the_dead_letters_page_is_paged_readable_and_escaped(shop: Shop) -> None:
    path = f"/console/tables/default/{shop.cluster}/orders/dead-letters"
    first = shop.browser.get(path)
    assert first.status_code == 200, first.text
    assert "Dead letters 1\u201350 of 60" in first.text
    assert "<script>" not in first.text  # escaped: a record's text is never markup
    assert html.escape(f"{HOSTILE} #59") in first.text  # newest first
    assert f'{path}?page=2" rel="next"' in first.text
    # Newest first: the newer file's rows, last written first, then the older file's.
    assert [int(n) for n in re.findall(r" #(\d+)</code>", first.text)] == list(range(59, 9, -1))
    text = html.unescape(first.text)
    assert "b'k1'" not in text
    assert "+00:00" not in text
    assert "<code>k1</code>" in text
    assert "<code>0xff00</code>" in text
    assert '<code>{"n": 58}</code>' in text
    assert "<code>2026-01-02T03:04:05Z</code>" in text  # failed_at
    assert '<code>[{"key": "h", "value": "v"}]</code>' in text
    second = shop.browser.get(path, page="2")
    assert "Dead letters 51\u201360 of 60" in second.text
    assert second.text.count("<tr>") == 1 + 10
    assert [int(n) for n in re.findall(r" #(\d+)</code>", second.text)] == list(range(9, -1, -1))
    beyond = shop.browser.get(path, page="9")  # past the end: the last page
    assert "Dead letters 51\u201360 of 60" in beyond.text
    assert shop.browser.get(path, page="x").status_code == 400
    # A table without dead letters has no such page; nor does a key that cannot read the cluster.
    assert (
        shop.browser.get(f"/console/tables/default/{shop.cluster}/customers/dead-letters").status_code == 404
    )


def test_the_table_pages_sample_shows_readable_values(shop: Shop) -> None:
    sample = shop.browser.get(f"/console/tables/default/{shop.cluster}/orders_dlq/sample")
    assert sample.status_code == 200, sample.text
    text = html.unescape(sample.text)
    assert "b'k1'" not in text
    assert "<code>k1</code>" in text
    assert "+00:00" not in text


def test_the_dead_letters_page_escapes_names_and_hides_paths(
    catalog_server: CatalogProcess, shop: Shop
) -> None:
    """A hostile table name is text on the page; a dead-letter file that cannot be read is said so,
    without its path; another cluster's key finds no such page."""
    hostile = f"<img src=x onerror=alert(1)>{uuid.uuid4().hex[:4]}"
    catalog = catalog_server.catalog(warehouse="default")
    catalog.create_table((shop.cluster, hostile), Schema(NestedField(1, "id", LongType())))
    dlq = catalog.create_table((shop.cluster, hostile + "_dlq"), dlq_schema())
    dlq.append(dead_letters(0, 3))
    path = f"/console/tables/default/{shop.cluster}/{quote(hostile, safe='')}/dead-letters"
    page = shop.browser.get(path)
    assert page.status_code == 200, page.text[:500]
    assert "<img" not in page.text
    assert html.escape(f"Dead letters of {shop.cluster}.{hostile}", quote=False) in page.text
    (data_file,) = [task.file.file_path for task in dlq.scan().plan_files()]
    local = Path(urlparse(data_file).path)
    local.unlink()
    broken = shop.browser.get(path)
    assert broken.status_code == 200, broken.text[:500]
    assert "could not be read" in broken.text
    assert str(local.parent) not in html.unescape(broken.text)
    with httpx.Client(
        base_url=catalog_server.url, headers={"Authorization": f"Bearer {catalog_server.token()}"}
    ) as http:
        other = f"oth_{uuid.uuid4().hex[:6]}"
        assert http.post("/management/v1/clusters", json={"name": other}).status_code == 201
        made = http.post("/management/v1/keys", json={"cluster": other, "role": "reader"}).json()
    outsider = signed_in(catalog_server, Key(made["client_id"], made["client_secret"]))
    try:
        assert outsider.get(f"/console/tables/default/{shop.cluster}/orders/dead-letters").status_code == 404
    finally:
        outsider.close()
