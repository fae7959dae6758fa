"""Commit lines of the ingestion service (issue 12, item 4): a table's first commit as its own line, then one
summary per table per period — commits every second must not drown the terminal."""

from __future__ import annotations

import logging
import time

import pytest

from ingest.ingest_table import BatchResult, IngestTable
from ingest.service import CommitLog
from tests.ingest_tables import json_table


def _table(name: str) -> IngestTable:
    return json_table(name)


def test_first_commit_then_one_summary_per_period(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ingest.service")
    log = CommitLog(period=0.2)
    events = _table("events")
    log.committed(events, BatchResult(records=5, end_offsets={0: 5}))
    for offset in range(6, 16):
        log.committed(events, BatchResult(records=1, dead_letters=1, end_offsets={0: offset}))
    assert [r.getMessage() for r in caplog.records] == ["local.events: first commit, 5 rows (offsets p0=5)"]
    time.sleep(0.25)
    log.flush()
    summary = caplog.records[-1].getMessage()
    assert summary.startswith("local.events: 10 commits, 10 rows, 10 dead letters in the last")
    assert summary.endswith("(offsets p0=15)")
    log.flush(force=True)  # nothing pending: no empty summary
    assert len(caplog.records) == 2


def test_each_table_has_its_first_commit_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ingest.service")
    log = CommitLog()
    log.committed(_table("a"), BatchResult(records=1, end_offsets={0: 1, 1: 3}))
    log.committed(_table("b"), BatchResult(records=2, end_offsets={0: 2}))
    assert [r.getMessage() for r in caplog.records] == [
        "local.a: first commit, 1 rows (offsets p0=1 p1=3)",
        "local.b: first commit, 2 rows (offsets p0=2)",
    ]


def test_a_flush_logs_the_tables_whose_period_is_over_and_keeps_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ingest.service")
    log = CommitLog(period=0.3)
    tables = [_table(n) for n in ("a", "b", "c")]
    for table in tables:  # first commits: their own lines
        log.committed(table, BatchResult(records=1, end_offsets={0: 1}))
    log.committed(tables[0], BatchResult(records=1, end_offsets={0: 2}))  # a's window starts
    time.sleep(0.2)
    log.committed(tables[1], BatchResult(records=1, end_offsets={0: 2}))  # b's window starts
    log.committed(tables[0], BatchResult(records=1, end_offsets={0: 3}))  # a's goes on
    time.sleep(0.15)
    log.committed(tables[2], BatchResult(records=1, end_offsets={0: 2}))  # c's starts; a's is over
    summaries = [r.getMessage() for r in caplog.records[3:]]
    assert len(summaries) == 1
    assert summaries[0].startswith("local.a: 2 commits, 2 rows")
    log.committed(tables[0], BatchResult(records=1, end_offsets={0: 4}))  # a's next window starts
    time.sleep(0.2)
    log.flush()  # b's is over, c's and a's new one are not
    summaries = [r.getMessage() for r in caplog.records[3:]]
    assert len(summaries) == 2
    assert summaries[1].startswith("local.b: 1 commits, 1 rows")
    log.flush(force=True)
    assert sorted(r.getMessage()[:8] for r in caplog.records[5:]) == ["local.a:", "local.c:"]
