"""What the console shows of a row's values and a table's record count (issue 33 item 5): bytes as UTF-8
text or hex, times in ISO 8601 (UTC as `Z`), nested values as JSON, never a Python repr; an upsert
table's Records are its live rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest

from catalog.cell_text import cell_text
from catalog.console.formatting import ago, iso
from catalog.console.readings import live_records


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, ""),
        (b"k1", "k1"),
        (b"\xff\x00", "0xff00"),
        ("caf\u00e9".encode(), "caf\u00e9"),
        (datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), "2026-01-02T03:04:05.123456Z"),
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))), "2026-01-02T03:04:05+02:00"),
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
        (date(2026, 1, 2), "2026-01-02"),
        (Decimal("1.50"), "1.50"),
        (UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (42, "42"),
        (True, "True"),
        (
            {"key": b"k1", "at": datetime(2026, 1, 2, tzinfo=UTC)},
            '{"key": "k1", "at": "2026-01-02T00:00:00Z"}',
        ),
        ([{"key": "h", "value": b"\x01"}], '[{"key": "h", "value": "\\u0001"}]'),
        ([("a", 1), ("b", 2)], '{"a": 1, "b": 2}'),  # a map, as pyarrow reads it
        ([1.5, float("nan")], '[1.5, "nan"]'),
    ],
)
def test_cells_read_as_people_read_them(value: object, shown: str) -> None:
    assert cell_text(value) == shown
    assert "b'" not in shown


def test_long_cells_are_cut() -> None:
    assert cell_text("x" * 400, 300) == "x" * 300 + "\u2026"


@pytest.mark.parametrize(
    ("summary", "records"),
    [
        ({"total-records": "10", "total-position-deletes": "6"}, 4),  # an upsert table after merges
        ({"total-records": "10"}, 10),
        ({"total-records": "10", "total-position-deletes": "0", "total-equality-deletes": "0"}, 10),
        ({"total-records": "10", "total-equality-deletes": "3"}, None),  # not knowable from a summary
        ({}, None),
    ],
)
def test_records_are_what_count_star_gives(summary: dict[str, str], records: int | None) -> None:
    assert live_records(summary) == records


def test_times_are_relative_with_iso_attributes() -> None:
    assert ago(datetime.now(UTC) - timedelta(minutes=7)) == "7 min ago"
    assert ago(None) == "never"
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
