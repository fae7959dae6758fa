"""`floe snapshot-at TABLE --partition P --offset O`: the snapshot id of a table as of a Kafka record,
for time travel in any engine (`FOR VERSION AS OF <id>`)."""

from __future__ import annotations

import json

import click

from catalog.cli.output import as_json
from catalog.cli.remote import call


@click.command("snapshot-at")
@click.argument("table")
@click.option("--partition", type=click.IntRange(min=0), required=True, help="Kafka partition")
@click.option("--offset", type=click.IntRange(min=0), required=True, help="Kafka offset of the record")
@click.option("--topic", default=None, help="The source topic (only when the table has several)")
@click.option("--warehouse", default="default", show_default=True)
@click.option("--json", "as_json_output", is_flag=True, help="Print the snapshot and the offsets it covers")
def snapshot_at_command(
    table: str, partition: int, offset: int, topic: str | None, warehouse: str, as_json_output: bool
) -> None:
    """Print the id of the first snapshot of TABLE (namespace.table) that holds Kafka record
    (partition, offset)."""
    *namespace, name = table.split(".")
    if not namespace:
        raise click.BadParameter("expected namespace.table", param_hint="TABLE")
    found = call(
        lambda client: client.snapshot_at(warehouse, tuple(namespace), name, partition, offset, topic)
    )
    if as_json_output:
        click.echo(json.dumps(as_json(found), indent=2))
    else:
        click.echo(found.snapshot_id)
