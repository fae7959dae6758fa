"""What `floe up` and `floe maintain` print, as a new user reads it (issue 33 item 7): log lines in the
format of floe up's own lines (no timestamps, through the same console), the example floe.yaml naming
the command that applies it, the Trino block as its heading says, and maintenance in plain words."""

from __future__ import annotations

import io
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
import yaml
from rich.console import Console

from floe.cli.services import TerminalLogHandler
from floe.cli.up import example_config, shown_path
from maintenance.table_state import TableStats
from maintenance.worker import ActionOutcome, MaintainedTable, PassResult
from tests.unit.test_console_snippets import read_properties
from tests.unit.test_ready_summary import PLAIN, block, summary


def test_log_lines_have_floe_ups_format() -> None:
    out = io.StringIO()
    handler = TerminalLogHandler(Console(file=out, width=40, force_terminal=False))
    logger = logging.getLogger("ingest.service.test_terminal_lines")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "local.events: created topic %s on floe's broker, a long line that is not folded", "events"
        )
        logger.warning("bad \x1b]52;c;ZXZpbA==\x07 name [bold]x[/bold]")
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "WARNING ingest.service.test_terminal_lines: local.events: created topic events on floe's broker, "
        "a long line that is not folded"
    )
    assert not re.match(r"\d{4}-\d\d-\d\d", lines[0])  # no timestamp, as floe up's own lines
    assert lines[1].endswith("bad \\x1b]52;c;ZXZpbA==\\x07 name [bold]x[/bold]")  # escaped, no markup


def test_the_example_floe_yaml_names_the_command_that_applies_it() -> None:
    text = example_config(9092, ".floe/floe.yaml")
    assert "# Edit it and run `floe apply -f .floe/floe.yaml` (or restart `floe up`" in text
    assert "{this file}" not in text
    assert yaml.safe_load(text)["source_clusters"][0]["name"] == "local"
    assert "`floe apply -f '/tmp/my home/floe.yaml'`" in example_config(9092, "/tmp/my home/floe.yaml")
    broken = example_config(9092, "/tmp/x\nsource_clusters: []\n#")
    assert 'floe apply -f "$FLOE_HOME/floe.yaml"' in broken
    assert yaml.safe_load(broken)["source_clusters"][0]["name"] == "local"


def test_paths_are_shown_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / ".floe" / "floe.yaml") == ".floe/floe.yaml"
    assert shown_path(Path(".floe/floe.yaml")) == ".floe/floe.yaml"
    assert shown_path(Path("/elsewhere/floe.yaml")) == "/elsewhere/floe.yaml"


def test_the_trino_block_prints_the_file_it_names_one_property_a_line() -> None:
    lines = block(summary(*PLAIN), "Trino")
    assert lines[0] == "etc/catalog/floe.properties:"
    properties = [line.strip() for line in lines[1:]]
    assert len(properties) == 9
    assert all("=" in line for line in properties)
    assert read_properties("\n".join(properties))["iceberg.rest-catalog.warehouse"] == "default"


def test_a_maintenance_pass_reads_in_plain_words() -> None:
    stats = {"data_bytes": 1, "delete_files": 0, "delete_bytes": 0, "manifests": 1}
    result = PassResult(
        table=MaintainedTable("default", ("local",), "events", cast("object", None)),  # type: ignore[arg-type]
        started_at=datetime.now(UTC),
        duration_seconds=1.25,
        actions=[ActionOutcome("rewrite_data_files", 1.0), ActionOutcome("expire_snapshots", 0.2, error="x")],
        before=TableStats(data_files=12, snapshots=5, **stats),
        after=TableStats(data_files=3, snapshots=8, **stats),
    )
    assert result.summary() == (
        "local.events: compacted data files, expired old snapshots (failed) in 1.2 s; "
        "data files 12 before, 3 after; snapshots 5 before, 8 after"
    )
    assert "→" not in result.summary()
