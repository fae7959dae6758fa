"""`floe apply`: validate a floe.yaml here, then make it the desired state on the server."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from floe.cli.output import OUTPUT, as_json, console, printable
from floe.cli.remote import call

_ACTION_STYLES = {
    "create": "green",
    "evolve": "yellow",
    "resumed": "cyan",
    "unchanged": "dim",
    "removed": "red",
}


@click.command("apply")
@click.option(
    "-f", "--file", "path", required=True, type=click.Path(exists=True, dir_okay=False), help="floe.yaml"
)
@click.option("--dry-run", is_flag=True, help="Show what would change, change nothing.")
@OUTPUT
def apply(path: str, dry_run: bool, output: str) -> None:
    """Apply a floe.yaml: create and evolve its tables, store it as the desired state ingestion reads.

    The file is validated here first: every error is printed with its YAML path and nothing is sent."""
    from pathlib import Path

    from catalog.pipelines import ConfigError, InvalidConfig
    from catalog.pipelines.bounds import LIMITS
    from catalog.pipelines.config import read_yaml, validate_read

    try:
        # Bounded like the server's (bytes here; nesting and aliases while parsing): a YAML bomb is
        # refused at once instead of expanding.
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(LIMITS.max_bytes + 1)
        except UnicodeDecodeError:
            raise InvalidConfig([ConfigError("", "the file is not UTF-8 text")]) from None
        if len(text) > LIMITS.max_bytes:
            raise InvalidConfig([ConfigError("", f"the document is larger than {LIMITS.max_bytes} bytes")])
        # `.proto` files named by protobuf.schema_file are read here, next to floe.yaml, and sent as text.
        read = read_yaml(text)
        validate_read(read, base=Path(path).resolve().parent)  # the data's schema_files inlined too
        data = read[0]
    except InvalidConfig as exc:
        console.print(
            Text(printable(f"{path}: {len(exc.errors)} error(s), nothing applied"), style="red"),
            highlight=False,
        )
        for error in exc.errors:
            console.print(Text(printable(f"  {error}")), highlight=False)
        sys.exit(1)
    result = call(lambda floe: floe.apply_pipeline(data, dry_run=dry_run))
    if output == "json":
        click.echo(json.dumps(as_json(result), indent=2))
        return
    table = Table("namespace", "table", "action", "changes")
    for entry in result.plan:
        style = _ACTION_STYLES.get(entry.action, "")
        # Names and changes as Text: never read as markup; control characters shown as escapes.
        table.add_row(
            Text(printable(entry.namespace)),
            Text(printable(entry.table)),
            Text(entry.action, style=style),
            Text("\n".join(printable(change) for change in entry.changes)),
        )
    Console().print(table)
    counts = {a: sum(1 for e in result.plan if e.action == a) for a in _ACTION_STYLES}
    summary = ", ".join(f"{action}: {count}" for action, count in counts.items())
    if result.dry_run:
        against = "no revision is applied yet" if result.revision is None else f"revision {result.revision}"
        click.echo(f"dry run against {against}: {summary}; nothing applied", err=True)
    elif result.applied:
        click.echo(
            printable(f"revision {result.revision} applied to warehouse {result.warehouse}: {summary}"),
            err=True,
        )
    else:
        click.echo(f"no changes: revision {result.revision} is current", err=True)
