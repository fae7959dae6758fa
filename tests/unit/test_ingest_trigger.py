"""How long an ingestion query waits between looks for records when too few wait for a batch."""

from __future__ import annotations

import pytest

from ingest.service import POLL_DELAY_BOUNDS, poll_delay_seconds


@pytest.mark.parametrize(
    ("interval", "delay"),
    [(2.0, 0.5), (1.0, 0.25), (0.1, POLL_DELAY_BOUNDS[0]), (60.0, POLL_DELAY_BOUNDS[1]), (4.0, 1.0)],
)
def test_a_quarter_of_the_commit_interval_within_bounds(interval: float, delay: float) -> None:
    assert poll_delay_seconds(interval) == pytest.approx(delay)
