"""`floe status`, `floe maintain`, `floe apply` and the management commands' errors print tenants'
names and server errors as text: control characters (ESC, BEL, CSI, OSC 52 clipboard writes) appear as
escapes, and Rich markup or emoji codes in a name are shown as written, never interpreted."""

from __future__ import annotations

import importlib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from catalog.client import ApplyOutcome, ClientError, PlannedTable
from catalog.pipelines.maintenance import DEFAULT_POLICY
from floe.cli import maintain, remote, status
from maintenance.worker import ActionOutcome, MaintainedTable, PassResult

# The package's `apply` and `clusters` are the commands: their modules by name.
apply_cli = importlib.import_module("floe.cli.apply")
clusters_cli = importlib.import_module("floe.cli.clusters")
HOSTILE_TABLE = "ns.t\x1b]52;c;ZXZpbA==\x07[bold]b[/bold]:smile:"
HOSTILE_ERROR = "failed \x1b[2J\x9b31m [red]x[/red] \r\x08"
# Any C0 or C1 control character except the line break (CliRunner's output is not a terminal, so Rich
# adds no styles of its own).
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def status_entry() -> dict[str, Any]:
    return {
        "table": HOSTILE_TABLE,
        "partitions": [{"partition": 0, "offset_lag": 1}],
        "error": HOSTILE_ERROR,
        "missing_topic": "topic\x1b[31m",
        "records_with_undeclared_fields": 2,
        "undeclared_fields": {"field\x1b[1m": 2},
    }


def run_status(monkeypatch: pytest.MonkeyPatch, maintenance: Any) -> str:
    monkeypatch.setattr(status, "read_status", lambda _url: {"tables": [status_entry()]})
    monkeypatch.setattr(status, "admin_credentials", lambda: ("id", "secret"))
    monkeypatch.setattr(status, "read_maintenance", maintenance)
    result = CliRunner().invoke(status.status_command, [], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.output


def assert_shown_as_text(output: str) -> None:
    assert not CONTROL.search(output), repr(output)
    assert r"\x1b]52;c;ZXZpbA==\x07[bold]b[/bold]:smile:" in output  # escapes, markup and emoji as written
    assert r"failed \x1b[2J\x9b31m [red]x[/red] \r\x08" in output


def test_status_prints_names_and_errors_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*_args: Any) -> list[dict[str, Any]]:
        raise ClientError("maintenance \x1b]8;;http://x\x07link [bold]no[/bold]")

    output = run_status(monkeypatch, unavailable)
    assert_shown_as_text(output)
    assert r"topic\x1b[31m of ns.t" in output
    assert r"field\x1b[1m (2)" in output
    assert r"maintenance passes unavailable: maintenance \x1b]8;;http://x\x07link [bold]no[/bold]" in output


def test_status_maintenance_grid_escapes_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    passes = [
        {
            "table": "ns.t",
            "started_at": "2026-01-01T00:00:00",
            "duration_seconds": 1.0,
            "before": {},
            "after": {},
            "actions": [{"name": "compact"}],
            "error": "bad\x1b[2Jthing",
        }
    ]
    output = run_status(monkeypatch, lambda *_args: passes)
    assert not CONTROL.search(output), repr(output)
    assert r"bad\x1b[2Jthing" in output


def test_maintain_prints_names_and_errors_as_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = MaintainedTable(
        "wh[bold]", ("ns",), "t\x1b]52;c;ZXZpbA==\x07[bold]b[/bold]:smile:", DEFAULT_POLICY
    )
    result = PassResult(
        table,
        datetime.now(UTC),
        actions=[ActionOutcome("compact", 0.5, error=HOSTILE_ERROR)],
        error=HOSTILE_ERROR,
    )
    monkeypatch.setattr(maintain, "console", Console(stderr=True, width=400))
    maintain.print_results([result])
    output = capsys.readouterr().err
    assert_shown_as_text(output)
    assert "wh[bold]/ns.t" in output
    assert r"  compact: failed \x1b[2J" in output


FLOE_YAML = """
source_clusters:
  - name: c
    bootstrap_brokers: [{hostname: localhost, port: 9092}]
tables:
  - source_cluster_name: c
    source_topic: orders
    source_format: json
    schema:
      fields: [{name: id, id: 1, type: long}]
"""


def test_apply_prints_the_plan_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "floe.yaml"
    path.write_text(FLOE_YAML)
    outcome = ApplyOutcome(
        revision=2,
        warehouse="wh\x1b[31m",
        dry_run=False,
        applied=True,
        plan=[
            PlannedTable(
                namespace="ns[bold]x[/bold]",
                table=HOSTILE_TABLE,
                kind="data",
                cluster="c",
                topic="orders",
                action="create",
                changes=[HOSTILE_ERROR],
            )
        ],
    )
    monkeypatch.setattr(apply_cli, "call", lambda _action: outcome)
    result = CliRunner().invoke(apply_cli.apply, ["-f", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert_shown_as_text(result.output)
    assert "ns[bold]x[/bold]" in result.output
    assert r"applied to warehouse wh\x1b[31m" in result.output


def test_server_errors_quoting_names_are_printed_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing:
        def __enter__(self) -> Refusing:
            raise ClientError("404: no cluster named c\x1b]52;c;ZXZpbA==\x07")

        def __exit__(self, *_args: object) -> None:
            return None

    monkeypatch.setattr(remote, "admin_credentials", lambda: ("id", "secret"))
    monkeypatch.setattr(remote, "FloeClient", lambda *_args: Refusing())
    result = CliRunner().invoke(clusters_cli.clusters, ["delete", "c"])
    assert result.exit_code == 1
    assert not CONTROL.search(result.output), repr(result.output)
    assert r"no cluster named c\x1b]52;c;ZXZpbA==\x07" in result.output
