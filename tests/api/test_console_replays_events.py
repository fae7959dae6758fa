"""The console's views of issue 35's replays and commit events: a table's page lists its replays (from
the snapshot summaries `floe replay` writes, every value escaped), and the overview shows global
administrators whether commit events are on, the outbox depth and its oldest event's age — never a
cluster's keys (the outbox holds every cluster's events)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from anyio.from_thread import start_blocking_portal
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from catalog.store.outbox import PublisherLock
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from tests.api.catalog_thread import CatalogThread
from tests.api.test_console import SCHEMA, Key, create_key, rows, signed_in, text_of
from tests.unit.test_kafka_offsets import progress_props

HOSTILE = "<script>alert(1)</script>"


def _replay_props(records: str, rows_: str, dead: str, spans: str) -> dict[str, str]:
    return {
        "floe.replay.records": records,
        "floe.replay.rows": rows_,
        "floe.replay.dead-letters": dead,
        "floe.replay.range": spans,
    }


def test_a_tables_page_lists_its_replays_escaped(catalog_server: CatalogProcess) -> None:
    cluster = f"rp_{uuid.uuid4().hex[:6]}"
    headers = {"Authorization": f"Bearer {catalog_server.token()}"}
    with httpx.Client(base_url=catalog_server.url, headers=headers, timeout=30) as http:
        assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        reader = create_key(http, "reader", cluster)
    catalog = catalog_server.catalog(warehouse="default")
    table = catalog.create_table(f"{cluster}.orders", SCHEMA)
    table.append(rows(1, 2, 3), snapshot_properties=progress_props("orders", {}, {0: 2, 1: 1}))
    table.append(rows(4), snapshot_properties=_replay_props("30", "28", "2", '{"0": [0, 2], "1": [0, 1]}'))
    # What another engine could write into a summary: shown as far as it is valid, escaped, never raw.
    table.append(rows(5), snapshot_properties=_replay_props("7", HOSTILE, "x", json.dumps({HOSTILE: [1, 2]})))
    table.append(rows(6), snapshot_properties=_replay_props(HOSTILE, "1", "1", "{}"))  # not a replay

    browser = signed_in(catalog_server, reader)  # a reader of the cluster sees its tables' replays
    try:
        page = browser.get(f"/console/tables/default/{cluster}/orders")
        assert page.status_code == 200, page.text
        assert HOSTILE not in page.text
        replays = page.text[page.text.index('id="replays"') : page.text.index('id="maintenance"')]
        text = text_of(replays)
        assert f"floe replay --table {cluster}.orders --from … --to …" in text
        assert "No replays yet." not in text
        listed = re.findall(r"<tr><td>(.*?)</td></tr>", replays)
        assert len(listed) == 2, listed  # newest first; the snapshot without a count is not a replay
        newest, first = (text_of(row) for row in listed)
        assert re.search(r"^\S+ \S+ UTC 7 — — \d+$", newest), newest  # no valid spans, rows, dead letters
        assert re.search(r"^\S+ \S+ UTC 0: 0\u20132, 1: 0\u20131 30 28 2 \d+$", first), first
    finally:
        browser.close()
    other = catalog.create_table(f"{cluster}.quiet", Schema(NestedField(1, "id", LongType())))
    assert other.metadata.current_snapshot_id is None
    admin = signed_in(catalog_server, Key(catalog_server.admin_client_id, catalog_server.admin_client_secret))
    try:
        assert "No replays yet." in admin.page(f"/console/tables/default/{cluster}/quiet")
    finally:
        admin.close()


@contextmanager
def publisher_lock_held(database_url: str) -> Iterator[None]:
    """The outbox's publisher lock held by this test, as another catalog process would hold it: the
    server under test then never sends, so its events stay in the outbox (no events broker needed)."""
    with start_blocking_portal() as portal:
        if database_url.startswith("sqlite"):
            database = Path(make_url(database_url).database or "")
            lock = PublisherLock(None, database.with_name(database.name + ".events-lock"))
            engine = None
        else:
            engine = portal.call(lambda: create_async_engine(database_url))
            lock = PublisherLock(engine)
        assert portal.call(lock.acquire)
        try:
            yield
        finally:
            portal.call(lock.release)
            if engine is not None:
                portal.call(engine.dispose)


def test_the_overview_shows_commit_events_to_global_admins_only(
    fresh_database_url: str, tmp_path: Path
) -> None:
    cluster = f"ev_{uuid.uuid4().hex[:6]}"
    env = {
        # Nothing listens there: the test holds the publisher lock, so nothing is sent anyway.
        "FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
        "FLOE_EVENTS_TOPIC": "floe.events.{cluster}",
    }
    with (
        publisher_lock_held(fresh_database_url),
        CatalogThread(fresh_database_url, home=tmp_path / "home", env=env) as server,
    ):
        headers = {"Authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
            cluster_admin = create_key(http, "admin", cluster)
        table = server.catalog(warehouse="default").create_table(f"{cluster}.orders", SCHEMA)
        table.append(rows(1))  # a create and a commit: two events waiting

        admin = signed_in(server, Key(server.admin_client_id, server.admin_client_secret))
        try:
            page = admin.get("/console")
            assert page.status_code == 200, page.text
            text = text_of(page.text[page.text.index('id="commit-events"') :])
            assert "Publishing on, to floe.events.{cluster}" in text
            depth = int(re.search(r'id="outbox-depth">([\d,]+)<', page.text).group(1).replace(",", ""))  # type: ignore[union-attr]
            assert depth >= 2
            assert re.search(r"Oldest waiting written \d+ s ago \(\d{4}-\d\d-\d\d [\d:]+ UTC\)", text), text
            assert "Commit events" not in text_of(admin.page("/console/overview/rows"))  # the polled part
        finally:
            admin.close()
        scoped = signed_in(server, cluster_admin)
        try:
            page = scoped.get("/console")
            assert page.status_code == 200, page.text
            assert f"{cluster}.orders" in text_of(page.text)  # its own tables, but not the outbox
            for operator_only in ('id="commit-events"', 'id="outbox-depth"', "Waiting in the outbox"):
                assert operator_only not in page.text
        finally:
            scoped.close()


def test_the_overview_says_when_commit_events_are_off(catalog_server: CatalogProcess) -> None:
    admin = signed_in(catalog_server, Key(catalog_server.admin_client_id, catalog_server.admin_client_secret))
    try:
        text = admin.page("/console")
        section = text[text.index("Commit events") :]
        assert "Publishing off ( FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS is not set: changes write no" in section
        assert "Waiting in the outbox 0 Oldest waiting none" in section
    finally:
        admin.close()
