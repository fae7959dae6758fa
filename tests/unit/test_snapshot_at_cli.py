"""`floe snapshot-at --timestamp`: record times as epoch milliseconds or ISO-8601, and the option rules."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from floe.cli.snapshot_at import parse_record_time, snapshot_at_command


def test_record_times_parse_as_epoch_ms_or_iso_8601() -> None:
    assert parse_record_time("1763000000123") == 1_763_000_000_123
    assert parse_record_time("2025-11-13T02:13:20.123Z") == 1_763_000_000_123
    assert parse_record_time("2025-11-13T03:13:20.123+01:00") == 1_763_000_000_123
    assert parse_record_time("2025-11-13T02:13:20.123") == 1_763_000_000_123  # UTC when no offset
    for bad in ("yesterday", "-5", "1969-12-31T00:00:00Z"):
        with pytest.raises(click.BadParameter):
            parse_record_time(bad)


def test_a_record_or_a_time_but_not_both() -> None:
    runner = CliRunner()
    both = runner.invoke(
        snapshot_at_command, ["a.b", "--timestamp", "5", "--partition", "0", "--offset", "1"]
    )
    assert both.exit_code == 2
    assert "not both" in both.output
    neither = runner.invoke(snapshot_at_command, ["a.b", "--partition", "0"])
    assert neither.exit_code == 2
    assert "--timestamp" in neither.output
