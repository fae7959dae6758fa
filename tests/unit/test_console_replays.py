"""The console's replay list (catalog/console/replays.py) reads only what a replay commit wrote: counts
as digits, the range as `{"partition": [start, end]}`, bounded; anything else an engine put into a
summary is left out rather than shown or trusted."""

from __future__ import annotations

import json

from catalog.console.replays import MAX_REPLAYS, MAX_SPANS, RANGE, Span, replay_history
from catalog.redrive_audit import REPLAYED, REPLAYED_DEAD, REPLAYED_ROWS


def _snapshot(snapshot_id: int, at: int, summary: dict[str, str]) -> dict[str, object]:
    return {"snapshot-id": snapshot_id, "timestamp-ms": at, "summary": summary}


def test_the_replay_list_reads_only_what_a_replay_wrote() -> None:
    spans = json.dumps({"1": [5, 9], "0": [0, 3], "x": [1, 2], "2": [-1, 4], "3": [1], "4": [True, 2]})
    snapshots = [
        _snapshot(1, 1000, {"operation": "append"}),
        _snapshot(2, 2000, {REPLAYED: "12", REPLAYED_ROWS: "10", REPLAYED_DEAD: "2", RANGE: spans}),
        _snapshot(3, 3000, {REPLAYED: "<b>", REPLAYED_ROWS: "1"}),
        _snapshot(4, 4000, {REPLAYED: "9" * 40}),
        _snapshot(5, 5000, {REPLAYED: "3", REPLAYED_ROWS: "x", RANGE: "not json"}),
        _snapshot(6, 5000, {REPLAYED: "4", RANGE: json.dumps([1, 2])}),  # same time: later in the log
        "not a snapshot",
        {"snapshot-id": "7", "timestamp-ms": 7000, "summary": {REPLAYED: "1"}},
    ]
    history = replay_history({"snapshots": snapshots})
    assert [(r.snapshot_id, r.records, r.rows, r.dead_letters) for r in history] == [
        (6, 4, None, None),
        (5, 3, None, None),
        (2, 12, 10, 2),
    ]
    assert history[2].spans == [Span(0, 0, 3), Span(1, 5, 9)]
    assert history[0].spans == []
    assert history[1].spans == []


def test_the_replay_list_is_bounded() -> None:
    wide = json.dumps({str(p): [0, 1] for p in range(MAX_SPANS + 5)})
    snapshots = [_snapshot(n, n, {REPLAYED: "1", RANGE: wide}) for n in range(1, MAX_REPLAYS + 4)]
    snapshots.append(_snapshot(99, 99, {REPLAYED: "1", RANGE: "{" + " " * 30_000 + "}"}))
    history = replay_history({"snapshots": snapshots})
    assert len(history) == MAX_REPLAYS
    assert history[0].snapshot_id == 99
    assert history[0].spans == []
    assert len(history[1].spans) == MAX_SPANS
    assert history[1].more_spans == 5
