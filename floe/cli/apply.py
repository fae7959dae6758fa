"""`floe apply`: validate a floe.yaml here, then make it the desired state on the server."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from floe.cli.output import OUTPUT, as_json, console, printable
from floe.cli.remote import call

if TYPE_CHECKING:
    from catalog.client import ApplyOutcome, FloeClient
    from catalog.pipelines import ConfigError

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

    from catalog.client import RequestFailed
    from catalog.pipelines import ConfigError, InvalidConfig
    from catalog.pipelines.bounds import LIMITS
    from catalog.pipelines.config import read_yaml, validate_read
    from catalog.pipelines.yaml_values import with_line

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
        _refused(path, exc.errors)

    def apply_it(floe: FloeClient) -> ApplyOutcome:
        try:
            return floe.apply_pipeline(data, dry_run=dry_run)
        except RequestFailed as exc:
            if exc.status != 400 or not exc.errors:
                raise
            # The server's checks (the applied tables: a type narrowed, a field dropped) at their lines.
            _refused(path, [with_line(ConfigError(p, m), read[1]) for p, m in exc.errors])

    result = call(apply_it)
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


def _refused(path: str, errors: Sequence[ConfigError]) -> NoReturn:
    """The refusal of a floe.yaml: each error with its YAML path and line; exit status 1."""
    # Whole lines (not folded at the terminal's width): a path or message is read and searched as one.
    console.print(
        Text(printable(f"{path}: {len(errors)} error(s), nothing applied"), style="red"),
        highlight=False,
        soft_wrap=True,
    )
    for error in errors:
        console.print(Text(printable(f"  {error}")), highlight=False, soft_wrap=True)
    sys.exit(1)
