"""The console's overview a page at a time (issue 29, item 9): a cluster of thousands of tables, or a
server of many clusters, renders and polls a bounded number of rows.

The overview shows `CLUSTERS_PER_PAGE` clusters, each with its first `TABLES_PER_PAGE` tables and a pager;
`?cluster=<name>&page=<n>` shows one cluster's tables page by page, and the htmx poll asks for the same
page. Dead-letter tables stay folded into their table's row when the two fall on different pages.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from catalog.console.paging import CLUSTERS_PER_PAGE, KEYS_PER_PAGE, TABLES_PER_PAGE
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.test_console import Browser, Key, create_key, text_of

DASH = "\N{EN DASH}"  # between a page's first and last item
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
}
# `big`'s tables in the order the overview lists them (by namespace, then name): `x` ends the first page
# and its dead-letter table `x_dlq` starts the second.
FIRST_PAGE = [f"a{i:02d}" for i in range(TABLES_PER_PAGE - 1)] + ["x"]
LATER = ["x_dlq", *(f"y{i:02d}" for i in range(TABLES_PER_PAGE + 5))]
NESTED = ["z0", "z1"]  # in `big.sub`, listed after every table of `big` itself


@dataclass
class Paging:
    server: CatalogProcess
    big: str
    clusters: list[str]
    admin: Key
    big_reader: Key

    def browser(self, key: Key) -> Browser:
        client = Browser(self.server.url)
        assert client.sign_in(key).status_code == 303
        return client


@pytest.fixture(scope="module")
def paging(new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Paging]:
    home = Path(tmp_path_factory.mktemp("paging-home"))
    with CatalogThread(new_database(), home=home) as server:
        with httpx.Client(
            base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {server.token()}"}
        ) as admin:
            big = f"big_{uuid.uuid4().hex[:6]}"
            others = [f"c{i:02d}_{uuid.uuid4().hex[:4]}" for i in range(CLUSTERS_PER_PAGE + 2)]
            for name in [big, *others]:
                assert admin.post("/management/v1/clusters", json={"name": name}).status_code == 201
            assert admin.post("/v1/default/namespaces", json={"namespace": [big, "sub"]}).status_code == 200

            def create(namespace: str, name: str) -> None:
                body = {"name": name, "schema": SCHEMA}
                response = admin.post(f"/v1/default/namespaces/{namespace}/tables", json=body)
                assert response.status_code == 200, response.text

            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda name: create(big, name), FIRST_PAGE + LATER))
                list(pool.map(lambda name: create(f"{big}%1Fsub", name), NESTED))
            reader = create_key(admin, "reader", big)
        yield Paging(
            server,
            big,
            sorted([big, *others]),
            Key(server.admin_client_id, server.admin_client_secret),
            reader,
        )


def _rows(markup: str, cluster: str) -> list[str]:
    """The tables of `cluster` the page shows a row of, in order."""
    return re.findall(rf'<th scope="row"[^>]*><a href="[^"]*">{re.escape(cluster)}\.([^<]+)</a>', markup)


def test_the_overview_shows_a_page_of_a_large_clusters_tables(paging: Paging) -> None:
    total = len(FIRST_PAGE) + len(LATER) + len(NESTED)
    browser = paging.browser(paging.big_reader)
    try:
        page = browser.get("/console")
        assert page.status_code == 200
        assert _rows(page.text, paging.big) == FIRST_PAGE
        text = text_of(page.text)
        assert f"Tables 1{DASH}{TABLES_PER_PAGE} of {total}" in text
        assert f'href="/console?cluster={paging.big}&amp;page=2"' in page.text
        assert 'hx-get="/console/overview/rows"' in page.text
        # `x` has a dead-letter table (on the next page): its row counts its dead letters (none); a table
        # without one shows no count.
        assert re.search(rf"{paging.big}\.x — never — — — 0 none", text), text
        assert re.search(rf"{paging.big}\.a00 — never — — — — none", text), text
    finally:
        browser.close()


def test_a_clusters_pages_cover_every_table_once(paging: Paging) -> None:
    browser = paging.browser(paging.big_reader)
    try:
        seen: list[str] = []
        page_number = 1
        while True:
            page = browser.get("/console", cluster=paging.big, page=str(page_number))
            assert page.status_code == 200, page.text
            rows = _rows(page.text, paging.big)
            assert len(rows) <= TABLES_PER_PAGE
            seen.extend(rows)
            # The poll asks for the same page, and gets the same rows.
            poll = f'hx-get="/console/overview/rows?cluster={paging.big}&amp;page={page_number}"'
            assert poll in page.text
            polled = browser.get("/console/overview/rows", cluster=paging.big, page=str(page_number))
            assert _rows(polled.text, paging.big) == rows
            assert "All clusters" in page.text
            if 'rel="next"' not in page.text:
                break
            page_number += 1
        # Every table once, in order; `x_dlq` folded into `x` although it starts page 2.
        expected = FIRST_PAGE + LATER[1:] + [f"sub.{name}" for name in NESTED]
        assert seen == expected
        # A page beyond the last shows the last one.
        beyond = browser.get("/console", cluster=paging.big, page="999")
        assert _rows(beyond.text, paging.big) == expected[-len(_rows(beyond.text, paging.big)) :]
        assert f"page {page_number} of {page_number}" in text_of(beyond.text)
    finally:
        browser.close()


def test_the_overview_pages_clusters(paging: Paging) -> None:
    browser = paging.browser(paging.admin)
    try:
        first = browser.get("/console")
        shown = re.findall(r"<h2 id=\"cluster-\d+\">Cluster (\S+) ", first.text)
        assert shown == paging.clusters[:CLUSTERS_PER_PAGE]
        assert f"Clusters 1{DASH}{CLUSTERS_PER_PAGE} of {len(paging.clusters)}" in text_of(first.text)
        second = browser.get("/console", page="2")
        assert (
            re.findall(r"<h2 id=\"cluster-\d+\">Cluster (\S+) ", second.text)
            == paging.clusters[CLUSTERS_PER_PAGE:]
        )
        assert 'hx-get="/console/overview/rows?page=2"' in second.text
    finally:
        browser.close()


def test_bad_pages_and_hidden_clusters_are_refused(paging: Paging) -> None:
    browser = paging.browser(paging.big_reader)
    try:
        for bad in ("abc", "0", "-1", "1e9", "12345678"):
            assert browser.get("/console", page=bad).status_code == 400, bad
        other = next(name for name in paging.clusters if name != paging.big)
        assert browser.get("/console", cluster=other).status_code == 404
        assert browser.get("/console/overview/rows", cluster="no-such-cluster").status_code == 404
    finally:
        browser.close()


def test_the_keys_page_shows_keys_a_page_at_a_time(paging: Paging) -> None:
    cluster = paging.clusters[-1] if paging.clusters[-1] != paging.big else paging.clusters[0]
    with httpx.Client(
        base_url=paging.server.url, timeout=60, headers={"Authorization": f"Bearer {paging.server.token()}"}
    ) as admin:
        made = [create_key(admin, "reader", cluster).client_id for _ in range(KEYS_PER_PAGE + 3)]
        manager = create_key(admin, "admin", cluster)
    browser = paging.browser(manager)
    try:
        listed: list[str] = []
        for number in (1, 2):
            page = browser.get("/console/keys", page=str(number))
            assert page.status_code == 200, page.text
            rows = re.findall(r'<th scope="row" data-label="Client id"><code>([^<]+)</code>', page.text)
            assert len(rows) == (KEYS_PER_PAGE if number == 1 else 4)
            listed.extend(rows)
        assert f"Keys 1{DASH}{KEYS_PER_PAGE} of {KEYS_PER_PAGE + 4}" in text_of(
            browser.get("/console/keys").text
        )
        assert listed == [*made, manager.client_id]
        assert browser.get("/console/keys", page="x").status_code == 400
    finally:
        browser.close()
