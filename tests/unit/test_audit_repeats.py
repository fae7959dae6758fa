"""`AuditWriter.record_repeatable`: identical granted token requests within a window are one counted
entry, on a real SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from catalog.migrations import upgrade_database
from catalog.service.audit import AuditWriter
from catalog.store import create_store
from catalog.store.security import AuditEntry


def _token_entry(request_id: str, source: str = "10.0.0.1", status: int = 200) -> AuditEntry:
    outcome = "ok" if status == 200 else "denied"
    return AuditEntry("floe_key", None, "getToken", "", outcome, status, request_id, source)


def _store_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'catalog.db'}"
    upgrade_database(url)
    return url


def test_repeats_within_a_window_are_one_counted_entry(tmp_path: Path) -> None:
    url = _store_url(tmp_path)

    async def run() -> None:
        store = create_store(url)
        writer = AuditWriter(store, repeat_window=0.3)
        try:
            for n in range(5):
                await writer.record_repeatable(_token_entry(f"r{n}"))
            # The first is stored before its call returns; the four after it are only counted so far.
            listed = await store.list_audit(limit=10)
            assert [(e.request_id, e.count) for e in listed] == [("r0", 1)]
            # Another address is another entry, stored at once.
            await writer.record_repeatable(_token_entry("other", source="10.0.0.2"))
            assert [e.request_id for e in await store.list_audit(limit=10)] == ["other", "r0"]
            await asyncio.sleep(0.8)  # the window ends, the sweep writes its count
            listed = await store.list_audit(limit=10)
            summary = [e for e in listed if e.request_id == "r1"]
            assert [(e.count, e.subject, e.action, e.outcome, e.source) for e in summary] == [
                (4, "floe_key", "getToken", "ok", "10.0.0.1")
            ]
            assert sum(e.count for e in listed) == 6  # every request is accounted for
            # After the window a request is recorded individually again.
            await writer.record_repeatable(_token_entry("r5"))
            assert (await store.list_audit(limit=1))[0].request_id == "r5"
        finally:
            await writer.close()
            await store.close()

    asyncio.run(run())


def test_close_writes_the_counts_of_open_windows(tmp_path: Path) -> None:
    url = _store_url(tmp_path)

    async def run() -> None:
        store = create_store(url)
        writer = AuditWriter(store, repeat_window=3600)
        try:
            for n in range(3):
                await writer.record_repeatable(_token_entry(f"r{n}"))
            await writer.close()
            listed = await store.list_audit(limit=10)
            assert [(e.request_id, e.count) for e in listed] == [("r1", 2), ("r0", 1)]
        finally:
            await store.close()

    asyncio.run(run())


def test_no_window_records_every_request(tmp_path: Path) -> None:
    url = _store_url(tmp_path)

    async def run() -> None:
        store = create_store(url)
        writer = AuditWriter(store, repeat_window=0)
        try:
            for n in range(3):
                await writer.record_repeatable(_token_entry(f"r{n}"))
            listed = await store.list_audit(limit=10)
            assert [(e.request_id, e.count) for e in listed] == [("r2", 1), ("r1", 1), ("r0", 1)]
        finally:
            await writer.close()
            await store.close()

    asyncio.run(run())
