"""`floe snapshot-at TABLE --partition P --offset O` or `--timestamp T`: the snapshot id of a table as of a
Kafka record or a Kafka record time, for time travel in any engine (`FOR VERSION AS OF <id>`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from floe.cli.output import as_json
from floe.cli.remote import call


def parse_record_time(text: str) -> int:
    """A record time as epoch milliseconds: an integer (epoch ms) or ISO-8601 (UTC when no offset)."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        value = int(stripped)
    else:
        try:
            parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
        except ValueError as exc:
            raise click.BadParameter(
                f"{text!r} is neither epoch milliseconds nor an ISO-8601 time", param_hint="--timestamp"
            ) from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        value = round(parsed.timestamp() * 1000)
    if value < 0:
        raise click.BadParameter(f"{text!r} is before 1970", param_hint="--timestamp")
    return value


@click.command("snapshot-at")
@click.argument("table")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Kafka partition")
@click.option("--offset", type=click.IntRange(min=0), default=None, help="Kafka offset of the record")
@click.option(
    "--timestamp",
    default=None,
    help="Kafka record time instead of a record: epoch milliseconds or ISO-8601 (UTC unless it says)",
)
@click.option("--topic", default=None, help="The source topic (only when the table has several)")
@click.option("--warehouse", default="default", show_default=True)
@click.option("--json", "as_json_output", is_flag=True, help="Print the snapshot and the offsets it covers")
def snapshot_at_command(
    table: str,
    partition: int | None,
    offset: int | None,
    timestamp: str | None,
    topic: str | None,
    warehouse: str,
    as_json_output: bool,
) -> None:
    """Print the id of the first snapshot of TABLE (namespace.table) that holds Kafka record
    (--partition, --offset), or of the snapshot that is TABLE as of record time --timestamp: the newest
    one holding no record later than that time."""
    *namespace, name = table.split(".")
    if not namespace:
        raise click.BadParameter("expected namespace.table", param_hint="TABLE")
    timestamp_ms = None if timestamp is None else parse_record_time(timestamp)
    if timestamp_ms is not None and (partition is not None or offset is not None):
        raise click.UsageError("give --timestamp, or --partition and --offset, not both")
    if timestamp_ms is None and (partition is None or offset is None):
        raise click.UsageError(
            "give --partition and --offset (a Kafka record), or --timestamp (a record time)"
        )
    found = call(
        lambda client: client.snapshot_at(
            warehouse, tuple(namespace), name, partition, offset, topic, timestamp_ms=timestamp_ms
        )
    )
    if as_json_output:
        click.echo(json.dumps(as_json(found), indent=2))
    else:
        click.echo(found.snapshot_id)
