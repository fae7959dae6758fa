"""`TransactionOutcome`: how the ingestion, redrive and replay commands read floe's answer to a
multi-table commit (one reading, in catalog/client.py)."""

from __future__ import annotations

from catalog.client import TransactionOutcome
from catalog.kafka_offsets import OFFSETS_CONFLICT


def test_a_2xx_is_committed_and_nothing_else() -> None:
    for status in (200, 204):
        outcome = TransactionOutcome(status)
        assert outcome.committed
        assert not (outcome.refused)
        assert not (outcome.invalid)
        assert not (outcome.unknown)


def test_a_409_is_refused_and_the_offsets_fence_is_told_apart_by_its_wording() -> None:
    moved = TransactionOutcome(409, '{"error": {"message": "Requirement failed: branch main has changed"}}')
    fenced = TransactionOutcome(409, f'{{"error": {{"message": "{OFFSETS_CONFLICT}: topic t partition 0"}}}}')
    assert moved.refused
    assert not moved.fenced
    assert not moved.unknown
    assert fenced.refused
    assert fenced.fenced


def test_no_answer_or_a_server_error_is_unknown_and_another_4xx_is_invalid() -> None:
    lost = TransactionOutcome(None, "Cannot reach floe at http://127.0.0.1:1: connection refused")
    assert lost.unknown
    assert not lost.committed
    assert str(lost) == lost.detail
    assert TransactionOutcome(503, "busy").unknown
    assert str(TransactionOutcome(503, "x" * 500)) == "HTTP 503: " + "x" * 200
    bad = TransactionOutcome(400, "bad")
    assert bad.invalid
    assert not bad.unknown
    assert not bad.refused
